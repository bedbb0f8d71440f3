//! gpt-oss's harmony format through `minfer serve`: the random-weight
//! gpt-oss fixture with gpt-oss's own chat template. A request that must
//! call a tool (`tool_choice` `required` or a named function) is held to
//! the harmony call by a grammar, and the answer reaches the client as a
//! tool call with JSON arguments that follow the function's schema, on the
//! OpenAI, Anthropic and Responses routes.

mod common;

use common::server::{exchange, Server};
use minfer_testutil::{repo_model, workspace_root};
use serde_json::{json, Value};

/// One JSON request over a fresh connection; returns (status, body).
fn post(addr: &str, path: &str, body: &Value) -> (u16, Value) {
    let (status, text) = exchange(addr, "POST", path, &body.to_string());
    let json = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    (status, json)
}

fn weather() -> Value {
    json!({
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 12}},
            "required": ["city"],
            "additionalProperties": false
        }
    })
}

fn clock() -> Value {
    json!({
        "name": "now",
        "description": "The time.",
        "parameters": {"type": "object", "properties": {}, "additionalProperties": false}
    })
}

/// The arguments a call carries follow `get_weather`'s schema.
fn check_weather_args(args: &Value) {
    let city = args["city"].as_str().unwrap_or_else(|| panic!("{args}"));
    assert!(city.chars().count() <= 12, "{args}");
    assert_eq!(args.as_object().unwrap().len(), 1, "{args}");
}

#[test]
fn required_and_named_tool_choices_give_harmony_calls() {
    let model = repo_model("gpt-oss-tiny.gguf");
    let template = workspace_root().join("tests/templates/openai-gpt-oss-120b.jinja");
    let home = tempfile::tempdir().unwrap();
    let server = Server::start(
        &model,
        home.path(),
        &[
            "-c",
            "2048",
            "--chat-template-file",
            template.to_str().unwrap(),
        ],
    );
    let (addr, id) = (server.addr.as_str(), server.model.as_str());
    let user = json!([{"role": "user", "content": "What is the weather in Paris?"}]);
    let tools = json!([{"type": "function", "function": weather()},
                       {"type": "function", "function": clock()}]);

    for (choice, name) in [
        (json!("required"), None),
        (
            json!({"type": "function", "function": {"name": "get_weather"}}),
            Some("get_weather"),
        ),
        (
            json!({"type": "function", "function": {"name": "now"}}),
            Some("now"),
        ),
    ] {
        let req = json!({"model": id, "messages": user, "tools": tools,
                         "tool_choice": choice, "max_tokens": 400, "temperature": 0});
        let (status, body) = post(addr, "/v1/chat/completions", &req);
        assert_eq!(status, 200, "{body}");
        let c = &body["choices"][0];
        assert_eq!(c["finish_reason"], "tool_calls", "{choice}: {body}");
        let calls = c["message"]["tool_calls"].as_array().unwrap();
        assert_eq!(calls.len(), 1, "{body}");
        let f = &calls[0]["function"];
        let called = f["name"].as_str().unwrap();
        if let Some(n) = name {
            assert_eq!(called, n, "{body}");
        }
        let args: Value = serde_json::from_str(f["arguments"].as_str().unwrap()).unwrap();
        match called {
            "get_weather" => check_weather_args(&args),
            "now" => assert_eq!(args, json!({}), "{body}"),
            other => panic!("called {other}: {body}"),
        }
        assert!(
            !c["message"]["content"]
                .as_str()
                .unwrap_or("")
                .contains("<|"),
            "{body}"
        );
    }

    // Anthropic's `any` and the Responses API's `required` take the same path.
    let req = json!({"model": id, "max_tokens": 400, "temperature": 0,
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [{"name": "get_weather", "description": "The current weather in a city.",
                   "input_schema": weather()["parameters"]}],
        "tool_choice": {"type": "any"}});
    let (status, body) = post(addr, "/v1/messages", &req);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["stop_reason"], "tool_use", "{body}");
    let used = body["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "tool_use")
        .unwrap_or_else(|| panic!("{body}"));
    assert_eq!(used["name"], "get_weather");
    check_weather_args(&used["input"]);

    let mut f = weather();
    f["type"] = json!("function");
    let req = json!({"model": id, "max_output_tokens": 400, "temperature": 0,
        "input": "Weather in Paris?", "tools": [f], "tool_choice": "required"});
    let (status, body) = post(addr, "/v1/responses", &req);
    assert_eq!(status, 200, "{body}");
    let call = body["output"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["type"] == "function_call")
        .unwrap_or_else(|| panic!("{body}"));
    assert_eq!(call["name"], "get_weather");
    check_weather_args(&serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap());
}
