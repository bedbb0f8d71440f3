//! Tool calls in the syntax a model writes them: which syntax a chat
//! template teaches (found from the template's text, as llama.cpp's
//! `common/chat` does), the parsers of each family's call text, and the
//! filter that also catches the calls small models write outside their
//! family's markers (bare JSON, a fenced JSON block).

mod bare;
mod history;
mod json;
mod parse;
mod types;
mod xml;

pub use bare::BareCalls;
pub use history::template_calls;
pub use types::{Call, Catalog, Format, Piece, Syntax};

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn families_are_found_from_template_text() {
        for (src, format) in [
            ("{{ '<tool_call>\\n{\"name\": ...}' }}", Format::Hermes),
            (
                "<tool_call>\\n<function=example>\\n<parameter=p>",
                Format::QwenXml,
            ),
            ("{{ '[TOOL_CALLS]' + calls | tojson }}", Format::Mistral),
            ("{{ '<|python_tag|>' + tool_call.name }}", Format::Llama3),
            (
                "<|start_header_id|>user ... {\"name\": function name, \"parameters\": dict}",
                Format::Llama3,
            ),
            (
                "{% if tools %}{{ tools | tojson }}{% endif %}",
                Format::Json,
            ),
            (
                "<|start|>assistant to=functions.f<|channel|>commentary json",
                Format::Harmony,
            ),
        ] {
            assert_eq!(Syntax::format_of(src), format, "{src}");
        }
    }

    #[test]
    fn bodies_parse_per_family() {
        let cat = Catalog::new(vec![(
            "write".into(),
            json!({"properties": {"path": {"type": "string"}, "n": {"type": "integer"}}}),
        )]);
        let h = Syntax::hermes(true);
        let got = h
            .parse_body("\n{\"name\": \"write\", \"arguments\": {\"n\": 1}}\n", &cat)
            .unwrap();
        assert_eq!(got[0].arguments, r#"{"n":1}"#);
        let x = Syntax::of_format(Format::QwenXml, true);
        let got = x
            .parse_body(
                "\n<function=write>\n<parameter=path>\n007\n</parameter>\n<parameter=n>\n7\n</parameter>\n</function>\n",
                &cat,
            )
            .unwrap();
        assert_eq!(
            got,
            vec![Call {
                name: "write".into(),
                arguments: r#"{"path":"007","n":7}"#.into()
            }]
        );
        let m = Syntax::of_format(Format::Mistral, true);
        assert_eq!(
            m.parse_body("[{\"name\": \"write\", \"arguments\": {}}]", &cat)
                .unwrap()[0]
                .name,
            "write"
        );
        let got = m
            .parse_body("write[ARGS]{\"n\": 2}[TOOL_CALLS]write[ARGS]{}", &cat)
            .unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].arguments, r#"{"n":2}"#);
        let l = Syntax::of_format(Format::Llama3, true);
        assert_eq!(
            l.parse_body("{\"name\": \"write\", \"parameters\": {\"n\": 3}}", &cat)
                .unwrap()[0]
                .arguments,
            r#"{"n":3}"#
        );
        assert!(h.parse_body("not json", &cat).is_none());
    }

    #[test]
    fn template_calls_take_object_arguments() {
        let c = template_calls(&json!([{"function": {"name": "f", "arguments": "{\"a\": 1}"}}]));
        assert_eq!(c[0]["function"]["arguments"]["a"], 1);
    }
}
