//! llama-server's own endpoints through `minfer serve`: `/props`,
//! `/slots` (and `--no-slots`), `/tokenize` with pieces, `/apply-template`
//! and assistant prefill, the chat page (and
//! `--no-ui`), and the native `/completion`, whole and streamed, with
//! llama-server's field names. The same text comes out of
//! `/completion` as out of `/v1/completions` for the same greedy request.

mod common;

use std::io::Read;

use common::server::{exchange, send, Server};
use minfer_testutil::{require_model, SMOLLM};
use serde_json::{json, Value};

/// One request (no body for `Value::Null`): (status, body text).
fn call(addr: &str, method: &str, path: &str, body: &Value) -> (u16, String) {
    let text = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    exchange(addr, method, path, &text)
}

/// The prompt the completion tests continue.
const PROMPT: &str = "I believe the meaning of life is";

/// The greedy 8-token `/completion` of [`PROMPT`] with 3 alternatives per
/// token and the token ids, streamed or whole: (status, body).
fn greedy(addr: &str, stream: bool) -> (u16, String) {
    let req = json!({"prompt": PROMPT, "n_predict": 8, "temperature": 0, "n_probs": 3,
                     "return_tokens": true, "stream": stream});
    call(addr, "POST", "/completion", &req)
}

/// A server of SmolLM2 with `-np 2`, or `None` (a recorded skip).
fn smollm_server(args: &[&str]) -> Option<(tempfile::TempDir, Server)> {
    let model = require_model(SMOLLM)?;
    let home = tempfile::tempdir().unwrap();
    let server = Server::start(&model, home.path(), args);
    Some((home, server))
}

fn json_of(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// The `data:` objects of a server-sent event stream (chunked transfer
/// framing lines are not JSON and are passed over).
fn events(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(json_of)
        .collect()
}

#[test]
fn props_slots_names_and_switches() {
    let Some((_home, server)) = smollm_server(&["-c", "512", "--np", "2"]) else {
        return;
    };
    let addr = server.addr.as_str();

    let (status, body) = call(addr, "GET", "/props", &Value::Null);
    assert_eq!(status, 200, "{body}");
    let props = json_of(&body);
    assert_eq!(props["total_slots"], 2, "{props}");
    assert_eq!(props["default_generation_settings"]["n_ctx"], 512);
    assert!(props["model_path"].as_str().unwrap().ends_with(SMOLLM));
    assert!(props["chat_template"]
        .as_str()
        .unwrap()
        .contains("im_start"));

    let (status, body) = call(addr, "GET", "/slots", &Value::Null);
    assert_eq!(status, 200, "{body}");
    let slots = json_of(&body);
    assert_eq!(slots.as_array().unwrap().len(), 2, "{slots}");
    assert_eq!(slots[1]["id"], 1);
    assert_eq!(slots[0]["is_processing"], false);
    drop(server);

    let Some((_home, server)) = smollm_server(&[
        "-c",
        "512",
        "--no-slots",
        "--no-ui",
        "--alias",
        "b-name,a-name",
        "--tags",
        "chat,small",
        "--seed",
        "7",
        "--temp",
        "1.5",
    ]) else {
        return;
    };
    // --seed and --temp: a request that sets neither samples the same way
    // each time.
    let (_, body) = call(&server.addr, "GET", "/props", &Value::Null);
    let params = &json_of(&body)["default_generation_settings"]["params"];
    assert_eq!(params["seed"], 7, "{params}");
    assert_eq!(params["temperature"], 1.5, "{params}");
    let req = json!({"prompt": "Once upon a time", "n_predict": 12});
    let (_, a) = call(&server.addr, "POST", "/completion", &req);
    let (_, b) = call(&server.addr, "POST", "/completion", &req);
    assert_eq!(json_of(&a)["content"], json_of(&b)["content"]);
    assert_eq!(json_of(&a)["generation_settings"]["seed"], 7);
    // Several --alias names: all listed, the first in sorted order the id.
    let (_, body) = call(&server.addr, "GET", "/v1/models", &Value::Null);
    let m = &json_of(&body)["data"][0];
    assert_eq!(m["id"], "a-name", "{m}");
    assert_eq!(m["aliases"], json!(["a-name", "b-name"]), "{m}");
    assert_eq!(m["tags"], json!(["chat", "small"]), "{m}");
    let (status, body) = call(&server.addr, "GET", "/slots", &Value::Null);
    assert_eq!(status, 501, "{body}");
    let (status, _) = call(&server.addr, "GET", "/", &Value::Null);
    assert_eq!(status, 404);
    assert!(json_of(&body)["error"]["message"]
        .as_str()
        .unwrap()
        .contains("--no-slots"));
}

#[test]
fn native_completion_whole_and_streamed() {
    let Some((_home, server)) = smollm_server(&["-c", "512", "--np", "2"]) else {
        return;
    };
    let addr = server.addr.as_str();

    let prompt = PROMPT;
    let (status, body) = greedy(addr, false);
    assert_eq!(status, 200, "{body}");
    let one = json_of(&body);
    assert_eq!(one["stop"], true);
    assert_eq!(one["stop_type"], "limit", "{one}");
    assert_eq!(one["tokens_predicted"], 8);
    assert_eq!(one["timings"]["predicted_n"], 8);
    assert_eq!(one["prompt"], prompt);
    assert_eq!(one["generation_settings"]["n_predict"], 8);
    let probs = one["completion_probabilities"].as_array().unwrap();
    assert_eq!(probs.len(), 8, "{one}");
    assert_eq!(probs[0]["top_logprobs"].as_array().unwrap().len(), 3);
    assert_eq!(probs[0]["id"], one["tokens"][0], "{one}");
    assert!(probs[0]["top_logprobs"][0]["id"].is_u64(), "{one}");
    let content = one["content"].as_str().unwrap().to_string();
    assert!(!content.is_empty());
    // The ids are the text's: /detokenize gives it back.
    let ids = one["tokens"].as_array().unwrap();
    assert_eq!(ids.len(), 8, "{one}");
    let (_, body) = call(addr, "POST", "/detokenize", &json!({"tokens": ids}));
    assert_eq!(json_of(&body)["content"], content.as_str());
    assert!(one["timings"]["prompt_ms"].as_f64().unwrap() > 0.0, "{one}");

    // llama-server's logit_bias forms ban the greedy first token: by id
    // in a list of pairs, by text in an object.
    let first = one["tokens"][0].clone();
    let first_text = probs[0]["token"].clone();
    for bias in [
        json!([[first, false]]),
        json!({first_text.as_str().unwrap(): -100}),
    ] {
        let req = json!({"prompt": prompt, "n_predict": 2, "temperature": 0,
                         "return_tokens": true, "logit_bias": bias});
        let (status, body) = call(addr, "POST", "/completion", &req);
        assert_eq!(status, 200, "{body}");
        assert_ne!(json_of(&body)["tokens"][0], first, "{bias}: {body}");
    }
    // The OpenAI route gives the same greedy text.
    let oai = json!({"prompt": prompt, "max_tokens": 8, "temperature": 0});
    let (_, body) = call(addr, "POST", "/v1/completions", &oai);
    assert_eq!(json_of(&body)["choices"][0]["text"], content.as_str());

    // Streamed: pieces with `stop: false`, then one `stop: true` object.
    let (status, body) = greedy(addr, true);
    assert_eq!(status, 200, "{body}");
    let evs = events(&body);
    let (last, pieces) = evs.split_last().unwrap();
    assert!(pieces.iter().all(|e| e["stop"] == false), "{body}");
    assert_eq!(last["stop"], true, "{body}");
    assert_eq!(last["timings"]["predicted_n"], 8, "{last}");
    let streamed: String = pieces
        .iter()
        .map(|e| e["content"].as_str().unwrap())
        .collect();
    assert_eq!(streamed, content);
}

#[test]
fn apply_template_prefill_and_token_count() {
    let Some((_home, server)) = smollm_server(&["-c", "512", "--np", "2"]) else {
        return;
    };
    let addr = server.addr.as_str();

    // /apply-template: the prompt of a chat; a last assistant message is
    // continued, in the chat route too (the same greedy text as
    // /completion of that prompt).
    let chat = json!([{"role": "user", "content": "Name a colour."}]);
    let (status, body) = call(addr, "POST", "/apply-template", &json!({"messages": chat}));
    assert_eq!(status, 200, "{body}");
    let opened = json_of(&body)["prompt"].as_str().unwrap().to_string();
    assert!(opened.ends_with("<|im_start|>assistant\n"), "{opened}");
    let prefilled = json!([{"role": "user", "content": "Name a colour."},
                           {"role": "assistant", "content": "My favourite colour is"}]);
    let (_, body) = call(
        addr,
        "POST",
        "/apply-template",
        &json!({"messages": prefilled}),
    );
    let prompt2 = json_of(&body)["prompt"].as_str().unwrap().to_string();
    // The chat's token count is its prompt's.
    let (_, body) = call(
        addr,
        "POST",
        "/v1/chat/completions/input_tokens",
        &json!({"messages": prefilled}),
    );
    let (_, toks) = call(addr, "POST", "/tokenize", &json!({"content": prompt2}));
    let n = json_of(&toks)["tokens"].as_array().unwrap().len();
    assert_eq!(json_of(&body)["input_tokens"], n, "{body}");
    assert_eq!(prompt2, format!("{opened}My favourite colour is"));
    let creq = json!({"messages": prefilled, "max_tokens": 6, "temperature": 0});
    let (status, body) = call(addr, "POST", "/v1/chat/completions", &creq);
    assert_eq!(status, 200, "{body}");
    let continued = json_of(&body)["choices"][0]["message"]["content"].clone();
    let creq = json!({"prompt": prompt2, "n_predict": 6, "temperature": 0});
    let (_, body) = call(addr, "POST", "/completion", &creq);
    assert_eq!(json_of(&body)["content"], continued, "{body}");
    let creq = json!({"messages": prefilled, "max_tokens": 2,
                     "continue_final_message": true, "add_generation_prompt": true});
    let (status, body) = call(addr, "POST", "/v1/chat/completions", &creq);
    assert_eq!(status, 400, "{body}");
}

#[test]
fn prompt_forms_errors_pieces_metrics_and_page() {
    let Some((_home, server)) = smollm_server(&["-c", "512", "--np", "2"]) else {
        return;
    };
    let addr = server.addr.as_str();
    let prompt = PROMPT;
    let (_, body) = greedy(addr, false);
    let content = json_of(&body)["content"].as_str().unwrap().to_string();

    // llama-server's other prompt forms: ids, `{"prompt_string"}`, and a
    // list of both, each the same greedy text.
    let (_, body) = call(addr, "POST", "/tokenize", &json!({"content": prompt}));
    let ids = json_of(&body)["tokens"].clone();
    let forms = json!([ids, {"prompt_string": prompt}]);
    let req = json!({"prompt": forms, "n_predict": 8, "temperature": 0});
    let (status, body) = call(addr, "POST", "/completion", &req);
    assert_eq!(status, 200, "{body}");
    for answer in json_of(&body).as_array().unwrap() {
        assert_eq!(answer["content"], content.as_str(), "{body}");
    }

    // A list of prompts: one answer each; bad fields are named.
    let req = json!({"prompt": ["Hello", "Hi there"], "n_predict": 2, "temperature": 0});
    let (status, body) = call(addr, "POST", "/completion", &req);
    assert_eq!(status, 200, "{body}");
    assert_eq!(json_of(&body).as_array().unwrap().len(), 2, "{body}");
    for (bad, field) in [
        (json!({"n_predict": 2}), "prompt"),
        (json!({"prompt": "x", "n_probs": 99}), "n_probs"),
        (json!({"prompt": [999999999]}), "prompt"),
        (
            json!({"prompt": {"prompt_string": "x", "multimodal_data": ["AA=="]}}),
            "prompt",
        ),
        (json!({"prompt": [true]}), "prompt"),
        (json!({"prompt": "x", "logit_bias": [[1]]}), "logit_bias"),
        (
            json!({"prompt": "x", "post_sampling_probs": true}),
            "post_sampling_probs",
        ),
    ] {
        let (status, body) = call(addr, "POST", "/completion", &bad);
        assert_eq!(status, 400, "{bad}: {body}");
        assert_eq!(json_of(&body)["error"]["param"], field, "{body}");
    }

    // /tokenize with pieces: each id with its text.
    let (_, body) = call(
        addr,
        "POST",
        "/tokenize",
        &json!({"content": "Hello world", "with_pieces": true}),
    );
    let pieces = json_of(&body)["tokens"].as_array().unwrap().clone();
    let joined: String = pieces
        .iter()
        .map(|p| p["piece"].as_str().unwrap())
        .collect();
    assert_eq!(joined, "Hello world", "{pieces:?}");
    assert!(pieces.iter().all(|p| p["id"].is_u64()));

    // llama-server's metric names, counting what was answered.
    let mut conn = send(addr, "GET", "/metrics", "");
    let mut metrics = String::new();
    conn.read_to_string(&mut metrics).unwrap();
    assert!(metrics.starts_with("HTTP/1.1 200"), "{metrics}");
    assert!(metrics
        .to_ascii_lowercase()
        .contains("process-start-time-unix: "));
    let predicted: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("llamacpp:tokens_predicted_total "))
        .unwrap_or_else(|| panic!("{metrics}"))
        .parse()
        .unwrap();
    assert!(predicted >= 8.0, "{metrics}");

    let (status, page) = call(addr, "GET", "/", &Value::Null);
    assert_eq!(status, 200);
    assert!(page.contains("<!doctype html>"));
}

/// `/infill` on Qwen2.5-Coder-0.5B (which has fill-in-the-middle tokens):
/// the same prompt tokens and the same greedy answer as llama-server
/// (0c1e570, measured on this request: 48 prompt tokens, and this text);
/// a model without the tokens gets llama-server's 501.
#[test]
fn infill_fills_the_middle_as_llama_server_does() {
    let Some(qwen) = require_model(minfer_testutil::QWEN) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let server = Server::start(&qwen, home.path(), &["-c", "4096", "--np", "1"]);
    let req = json!({
        "input_extra": [{"filename": "llama.h", "text": "LLAMA_API int32_t llama_n_threads();\n"}],
        "input_prefix": "#include <cstdio>\n#include \"llama.h\"\n\nint main() {\n",
        "prompt": "    int n_threads = llama_",
        "input_suffix": "}\n",
        "n_predict": 24, "temperature": 0,
    });
    let (status, body) = call(&server.addr, "POST", "/infill", &req);
    assert_eq!(status, 200, "{body}");
    let v = json_of(&body);
    assert_eq!(v["tokens_evaluated"], 48, "{body}");
    assert_eq!(
        v["content"],
        "n_threads();\n    printf(\"Number of threads: %d\\n\", n_threads);\n    return 0;\n}\n``"
    );
    let mut bad = req.clone();
    bad["input_extra"] = json!([{"filename": 123, "text": "x"}]);
    let (status, body) = call(&server.addr, "POST", "/infill", &bad);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("filename"), "{body}");
    drop(server);

    let Some((_home, smol)) = smollm_server(&[]) else {
        return;
    };
    let (status, body) = call(&smol.addr, "POST", "/infill", &req);
    assert_eq!(status, 501, "{body}");
}

/// llama-server's slot files: a request naming `id_slot` 1 makes slot 1
/// stand for its tokens; saving writes them, erasing makes the same
/// prompt computed again, restoring puts them back so that it is not.
#[test]
fn slots_save_erase_and_restore_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let Some((_home, server)) = smollm_server(&["--np", "2", "--slot-save-path", d]) else {
        return;
    };
    let addr = &server.addr;
    let run = |slot: i64| {
        let req = json!({"prompt": PROMPT, "n_predict": 8, "temperature": 0, "id_slot": slot});
        let (status, body) = call(addr, "POST", "/completion", &req);
        assert_eq!(status, 200, "{body}");
        json_of(&body)
    };
    let act = |path: &str, file: &str| {
        let body = if file.is_empty() {
            Value::Null
        } else {
            json!({ "filename": file })
        };
        call(addr, "POST", path, &body)
    };
    let first = run(1);
    let prompt_n = first["timings"]["prompt_n"].as_u64().unwrap();
    let predicted = first["tokens_predicted"].as_u64().unwrap();
    let (status, body) = act("/slots/1?action=save", "one.bin");
    assert_eq!(status, 200, "{body}");
    let saved = json_of(&body);
    // The prompt and every answer token but the last (never fed back).
    assert_eq!(
        saved["n_saved"].as_u64().unwrap(),
        prompt_n + predicted - 1,
        "{body}"
    );
    assert!(dir.path().join("one.bin").is_file());

    let (status, body) = act("/slots/1?action=erase", "");
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        run(-1)["timings"]["prompt_n"],
        prompt_n,
        "erased: computed again"
    );
    let (status, body) = act("/slots/1?action=erase", "");
    assert_eq!(status, 200, "{body}");

    let (status, body) = act("/slots/0?action=restore", "one.bin");
    assert_eq!(status, 200, "{body}");
    assert_eq!(json_of(&body)["n_restored"], saved["n_saved"], "{body}");
    let again = run(0);
    assert_eq!(
        again["timings"]["prompt_n"], 1,
        "restored: only the last token computed"
    );
    assert_eq!(again["content"], first["content"]);

    for (path, body, status) in [
        (
            "/slots/0?action=save",
            json!({"filename": "../out.bin"}),
            400,
        ),
        (
            "/slots/7?action=save",
            json!({"filename": "seven.bin"}),
            400,
        ),
        (
            "/slots/0?action=restore",
            json!({"filename": "missing.bin"}),
            400,
        ),
        ("/slots/0?action=fly", json!({}), 400),
    ] {
        assert_eq!(call(addr, "POST", path, &body).0, status, "{path} {body}");
    }
    let Some((_home, plain)) = smollm_server(&[]) else {
        return;
    };
    let (status, _) = call(&plain.addr, "POST", "/slots/0?action=erase", &Value::Null);
    assert_eq!(status, 501);
}

/// The `prompt_progress` objects of a stream, in order, and the chunks that
/// carry text with their timings.
fn progress_of(evs: &[Value]) -> Vec<Value> {
    evs.iter()
        .filter(|e| !e["prompt_progress"].is_null())
        .map(|e| e["prompt_progress"].clone())
        .collect()
}

/// Checks a stream's progress reports: the first before any computing
/// (processed = cache), then strictly growing by at most one batch, the
/// last the whole prompt.
fn check_progress(p: &[Value], batch: u64, cached: bool) {
    assert!(p.len() >= if cached { 2 } else { 3 }, "{p:?}");
    let total = p[0]["total"].as_u64().unwrap();
    let cache = p[0]["cache"].as_u64().unwrap();
    assert_eq!(p[0]["processed"], cache, "{p:?}");
    assert_eq!(cache > 0, cached, "{p:?}");
    for w in p.windows(2) {
        let (a, b) = (w[0]["processed"].as_u64(), w[1]["processed"].as_u64());
        assert!(a < b && b.unwrap() - a.unwrap() <= batch, "{p:?}");
        assert_eq!(w[1]["total"], total);
        assert_eq!(w[1]["cache"], cache);
    }
    assert_eq!(p.last().unwrap()["processed"], total, "{p:?}");
}

#[test]
fn progress_and_timings_per_token_as_llama_server_sends_them() {
    let Some((_home, server)) = smollm_server(&["-c", "1024", "--np", "1", "-b", "16"]) else {
        return;
    };
    let addr = server.addr.as_str();
    let prompt = "the quick brown fox jumps over the lazy dog ".repeat(6);

    // /completion: progress with timings, then timings on every piece.
    let req = json!({"prompt": prompt, "n_predict": 6, "temperature": 0, "stream": true,
                     "return_progress": true, "timings_per_token": true});
    let (status, body) = call(addr, "POST", "/completion", &req);
    assert_eq!(status, 200, "{body}");
    let evs = events(&body);
    let progress = progress_of(&evs);
    check_progress(&progress, 16, false);
    let first = evs
        .iter()
        .find(|e| !e["prompt_progress"].is_null())
        .unwrap();
    assert_eq!(first["timings"]["prompt_n"], 0, "{first}");
    assert_eq!(first["timings"]["prompt_ms"], 0.0, "{first}");
    let texts: Vec<&Value> = evs
        .iter()
        .filter(|e| e["content"].as_str().is_some_and(|c| !c.is_empty()))
        .collect();
    assert!(!texts.is_empty());
    let mut before = 0;
    for t in &texts {
        let n = t["timings"]["predicted_n"]
            .as_u64()
            .unwrap_or_else(|| panic!("{t}"));
        assert!(n > before, "{t}");
        before = n;
        assert!(t["timings"]["prompt_per_second"].as_f64().unwrap() > 0.0);
    }

    // The same prompt again: the first report says what the cache held.
    let (_, body) = call(addr, "POST", "/completion", &req);
    check_progress(&progress_of(&events(&body)), 16, true);

    // Chat: progress chunks with no text, timings on the text chunks.
    let chat = json!({"messages": [{"role": "user", "content": prompt}], "max_tokens": 6,
                      "temperature": 0, "stream": true, "return_progress": true,
                      "timings_per_token": true});
    let (status, body) = call(addr, "POST", "/v1/chat/completions", &chat);
    assert_eq!(status, 200, "{body}");
    let evs = events(&body[..body.find("data: [DONE]").unwrap()]);
    check_progress(&progress_of(&evs), 16, false);
    for e in evs.iter().filter(|e| !e["prompt_progress"].is_null()) {
        assert_eq!(e["choices"][0]["delta"], json!({}), "{e}");
    }
    let text = evs
        .iter()
        .find(|e| {
            e["choices"][0]["delta"]["content"]
                .as_str()
                .is_some_and(|c| !c.is_empty())
        })
        .unwrap();
    assert!(
        text["timings"]["predicted_n"].as_u64().unwrap() >= 1,
        "{text}"
    );

    // Without the flags: no progress, and no timings before the end.
    let plain = json!({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4,
                       "stream": true});
    let (_, body) = call(addr, "POST", "/v1/chat/completions", &plain);
    let evs = events(&body[..body.find("data: [DONE]").unwrap()]);
    assert!(progress_of(&evs).is_empty());
    assert!(evs.iter().all(|e| e["timings"].is_null()), "{body}");

    // Responses: `response.in_progress` events with the progress, timings
    // on the text deltas and beside the final response.
    // (Another prompt, whose start, the template's system message, the
    // chat left in the cache.)
    let resp = json!({"input": format!("Once more: {prompt}"), "max_output_tokens": 6, "stream": true,
                      "return_progress": true, "timings_per_token": true});
    let (status, body) = call(addr, "POST", "/v1/responses", &resp);
    assert_eq!(status, 200, "{body}");
    let evs = events(&body);
    let p = progress_of(&evs);
    check_progress(&p, 16, true);
    for e in evs.iter().filter(|e| !e["prompt_progress"].is_null()) {
        assert_eq!(e["type"], "response.in_progress", "{e}");
    }
    let delta = evs
        .iter()
        .find(|e| e["type"] == "response.output_text.delta")
        .unwrap();
    assert!(
        delta["timings"]["predicted_per_second"].is_number(),
        "{delta}"
    );
    let last = evs.last().unwrap();
    assert!(
        last["timings"]["predicted_n"].as_u64().unwrap() >= 1,
        "{last}"
    );
}

#[test]
fn reasoning_off_closes_the_thinking_a_template_opens() {
    let Some(model) = require_model(SMOLLM) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    // A DeepSeek R1-like template: every answer opens a thinking block;
    // and one that closes it itself when `enable_thinking` is not true.
    let r1 = home.path().join("r1.jinja");
    std::fs::write(
        &r1,
        "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}\
         {% if add_generation_prompt %}<|assistant|><think>\n{% endif %}",
    )
    .unwrap();
    let own = home.path().join("own.jinja");
    std::fs::write(
        &own,
        "{% for m in messages %}{{ m.content }}{% endfor %}\
         {% if not enable_thinking %}<closed>{% endif %}",
    )
    .unwrap();
    let user = json!([{"role": "user", "content": "Hi"}]);
    let prompt = |addr: &str, kwargs: Value| {
        let req = json!({"messages": user, "chat_template_kwargs": kwargs});
        let (status, body) = call(addr, "POST", "/apply-template", &req);
        assert_eq!(status, 200, "{body}");
        json_of(&body)["prompt"].as_str().unwrap().to_string()
    };
    let start = |tpl: &std::path::Path, reasoning: &str| {
        let t = tpl.to_str().unwrap();
        Server::start(
            &model,
            home.path(),
            &[
                "-c",
                "512",
                "--chat-template-file",
                t,
                "--reasoning",
                reasoning,
            ],
        )
    };

    let s = start(&r1, "off");
    assert!(prompt(&s.addr, json!({})).ends_with("<think>\n</think>"));
    // A request's own word wins.
    let on = prompt(&s.addr, json!({"enable_thinking": true}));
    assert!(on.ends_with("<think>\n"), "{on}");
    drop(s);
    let s = start(&r1, "auto");
    assert!(prompt(&s.addr, json!({})).ends_with("<think>\n"));
    let off = prompt(&s.addr, json!({"enable_thinking": false}));
    assert!(off.ends_with("<think>\n</think>"), "{off}");
    drop(s);
    // The server tells a template that knows `enable_thinking` that
    // thinking is on unless it is off, as llama-server does.
    let s = start(&own, "auto");
    assert_eq!(prompt(&s.addr, json!({})), "Hi");
    drop(s);
    let s = start(&own, "off");
    assert_eq!(prompt(&s.addr, json!({})), "Hi<closed>");
}
