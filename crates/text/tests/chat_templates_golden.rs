//! Chat templates of the real models against transformers' renderings.

mod common;

use common::{golden, open_model, MODELS};
use minfer_text::{ChatMessage, ChatTemplate, DateTime};
use serde_json::Value;

/// One golden case: what the template is given and what it must render.
struct Case<'a> {
    name: &'a str,
    messages: Vec<ChatMessage>,
    tools: Option<&'a Value>,
    add_gen: bool,
    want: &'a str,
}

impl<'a> Case<'a> {
    fn read(case: &'a Value) -> Self {
        Self {
            name: case["name"].as_str().unwrap_or("?"),
            messages: serde_json::from_value(case["messages"].clone()).expect("messages"),
            tools: (!case["tools"].is_null()).then_some(&case["tools"]),
            add_gen: case["add_generation_prompt"].as_bool().expect("flag"),
            want: case["rendered"].as_str().expect("rendered"),
        }
    }

    /// Renders the case with `t`; a failure or a different render is added
    /// to `failures`, under `model`'s name.
    fn check(&self, t: &ChatTemplate, model: &str, failures: &mut Vec<String>) {
        let (name, want) = (self.name, self.want);
        match t.render(&self.messages, self.tools, self.add_gen) {
            Ok(got) if got == want => {}
            Ok(got) => failures.push(format!(
                "{model}/{name}: rendered differently\n  got:  {got:?}\n  want: {want:?}"
            )),
            Err(e) => failures.push(format!("{model}/{name}: {e}")),
        }
    }
}

#[test]
fn golden_chat_templates_render_identically() {
    let g = golden("chat-templates.json");
    let mut checked = 0;
    for (file, name) in MODELS {
        let Some(cases) = g["models"][name].as_array() else {
            panic!("chat-templates.json has no cases for {name}");
        };
        let Some(f) = open_model(file) else { continue };
        // The golden was rendered with empty BOS/EOS strings and the clock
        // fixed at 2026-11-29.
        let t = ChatTemplate::from_gguf(f.metadata())
            .expect("template compiles")
            .expect("model has a template")
            .with_fixed_time(DateTime::date(2026, 11, 29))
            .expect("template compiles");
        let mut failures = Vec::new();
        for case in cases {
            let c = Case::read(case);
            c.check(&t, name, &mut failures);
            // The JSON entry point must agree with the typed one.
            let via_json = t
                .render_json(&case["messages"], c.tools, c.add_gen)
                .expect("renders");
            assert_eq!(via_json, c.want, "{name}/{} via render_json", c.name);
            checked += 1;
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        eprintln!("{name}: {} chat-template cases identical", cases.len());
    }
    eprintln!("{checked} cases checked");
}

/// Templates of models the tests do not carry (Phi-3.5-mini's), stored with
/// their renders in `chat-templates-extra.json`: written by
/// `scripts/make-chat-template-golden.py` with jinja2 as transformers
/// renders, with each model's own BOS/EOS texts.
#[test]
fn extra_chat_templates_render_identically() {
    let g = golden("chat-templates-extra.json");
    let templates = g["templates"].as_object().expect("templates");
    assert!(templates.contains_key("phi-3.5-mini-instruct"));
    let mut failures = Vec::new();
    let mut checked = 0;
    for (name, entry) in templates {
        let source = entry["template"].as_str().expect("template");
        let bos = entry["bos_token"].as_str().expect("bos_token");
        let eos = entry["eos_token"].as_str().expect("eos_token");
        let t = ChatTemplate::new(source)
            .expect("template compiles")
            .with_special_tokens(bos, eos)
            .with_fixed_time(DateTime::date(2026, 11, 29))
            .expect("template compiles");
        let cases = entry["cases"].as_array().expect("cases");
        assert!(!cases.is_empty(), "{name}: no cases");
        for case in cases {
            Case::read(case).check(&t, name, &mut failures);
            checked += 1;
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    eprintln!("{checked} extra chat-template cases identical");
}
