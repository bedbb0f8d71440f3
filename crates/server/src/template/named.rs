//! llama.cpp's named chat templates (`--chat-template llama3`, …), as
//! Jinja. llama.cpp renders these names with fixed C++ code
//! (`llm_chat_apply_template` in `src/llama-chat.cpp`) rather than a
//! template; each one here writes the same text for the same messages,
//! and `crates/server/tests/fixtures/named_templates.json` holds
//! llama-server's renders that a test compares them with. `trim` is
//! llama.cpp's (spaces, tabs and newlines at both ends).

/// Llama 3: header, content trimmed, `<|eot_id|>`.
const LLAMA3: &str = concat!(
    "{%- for m in messages %}{{- '<|start_header_id|>' + m.role + '<|end_header_id|>\\n\\n' + ((m.content or '') | trim) + '<|eot_id|>' }}{%- endfor %}",
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
);

/// Phi-4: ChatML with `<|im_sep|>` and no newlines.
const PHI4: &str = concat!(
    "{%- for m in messages %}{{- '<|im_start|>' + m.role + '<|im_sep|>' + (m.content or '') + '<|im_end|>' }}{%- endfor %}",
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant<|im_sep|>' }}{%- endif %}"
);

/// Gemma: system text (trimmed) merged into the next user turn,
/// `assistant` spelled `model`, contents trimmed.
const GEMMA: &str = concat!(
    "{%- set ns = namespace(sys='') %}",
    "{%- for m in messages %}",
    "{%- if m.role == 'system' %}{%- set ns.sys = ns.sys + ((m.content or '') | trim) %}",
    "{%- else %}{%- set role = 'model' if m.role == 'assistant' else m.role %}",
    "{{- '<start_of_turn>' + role + '\\n' }}",
    "{%- if ns.sys and role != 'model' %}{{- ns.sys + '\\n\\n' }}{%- set ns.sys = '' %}{%- endif %}",
    "{{- ((m.content or '') | trim) + '<end_of_turn>\\n' }}",
    "{%- endif %}{%- endfor %}",
    "{%- if add_generation_prompt %}{{- '<start_of_turn>model\\n' }}{%- endif %}"
);

/// Phi-3 (`<|end|>\n`), Falcon 3 (`\n`) and Zephyr (`<|endoftext|>\n`):
/// `<|role|>\n`, the content, then `end`.
fn role_lines(end: &str) -> String {
    format!(
        "{{%- for m in messages %}}{{{{- '<|' + m.role + '|>\\n' + (m.content or '') + '{end}' }}}}{{%- endfor %}}\
         {{%- if add_generation_prompt %}}{{{{- '<|assistant|>\\n' }}}}{{%- endif %}}"
    )
}

/// Vicuna (1.1), or with `orca` its Orca variant's `SYSTEM:` prefix.
fn vicuna(orca: bool) -> String {
    let system = if orca {
        "'SYSTEM: ' + (m.content or '') + '\\n'"
    } else {
        "(m.content or '') + '\\n\\n'"
    };
    format!(
        "{{%- for m in messages %}}{{%- if m.role == 'system' %}}{{{{- {system} }}}}\
         {{%- elif m.role == 'user' %}}{{{{- 'USER: ' + (m.content or '') + '\\n' }}}}\
         {{%- elif m.role == 'assistant' %}}{{{{- 'ASSISTANT: ' + (m.content or '') + '</s>\\n' }}}}\
         {{%- endif %}}{{%- endfor %}}\
         {{%- if add_generation_prompt %}}{{{{- 'ASSISTANT:' }}}}{{%- endif %}}"
    )
}

/// DeepSeek Coder: `### Instruction:` / `### Response:`.
const DEEPSEEK: &str = concat!(
    "{%- for m in messages %}{%- if m.role == 'system' %}{{- (m.content or '') }}",
    "{%- elif m.role == 'user' %}{{- '### Instruction:\\n' + (m.content or '') + '\\n' }}",
    "{%- elif m.role == 'assistant' %}{{- '### Response:\\n' + (m.content or '') + '\\n<|EOT|>\\n' }}",
    "{%- endif %}{%- endfor %}",
    "{%- if add_generation_prompt %}{{- '### Response:\\n' }}{%- endif %}"
);

/// Command R: turn tokens, contents trimmed.
const COMMAND_R: &str = concat!(
    "{%- for m in messages %}",
    "{%- set tok = {'system': '<|SYSTEM_TOKEN|>', 'user': '<|USER_TOKEN|>', 'assistant': '<|CHATBOT_TOKEN|>'}.get(m.role) %}",
    "{%- if tok %}{{- '<|START_OF_TURN_TOKEN|>' + tok + ((m.content or '') | trim) + '<|END_OF_TURN_TOKEN|>' }}{%- endif %}",
    "{%- endfor %}",
    "{%- if add_generation_prompt %}{{- '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' }}{%- endif %}"
);

/// OpenChat 3.5: `GPT4 Correct User: …<|end_of_turn|>`.
const OPENCHAT: &str = concat!(
    "{%- for m in messages %}{%- if m.role == 'system' %}{{- (m.content or '') + '<|end_of_turn|>' }}",
    "{%- else %}{{- 'GPT4 Correct ' + (m.role | capitalize) + ': ' + (m.content or '') + '<|end_of_turn|>' }}{%- endif %}{%- endfor %}",
    "{%- if add_generation_prompt %}{{- 'GPT4 Correct Assistant:' }}{%- endif %}"
);

/// Mistral v7 (`tekken`: without the spaces).
fn mistral_v7(tekken: bool) -> String {
    let sp = if tekken { "" } else { " " };
    format!(
        "{{%- for m in messages %}}{{%- if m.role == 'system' %}}{{{{- '[SYSTEM_PROMPT]{sp}' + (m.content or '') + '[/SYSTEM_PROMPT]' }}}}\
         {{%- elif m.role == 'user' %}}{{{{- '[INST]{sp}' + (m.content or '') + '[/INST]' }}}}\
         {{%- else %}}{{{{- '{sp}' + (m.content or '') + '</s>' }}}}{{%- endif %}}{{%- endfor %}}"
    )
}

/// Mistral v1, v3 and v3-tekken: `[INST]` turns, the system text at the
/// start of one; v1 puts a space before `[INST]` and `[/INST]`, v3 trims
/// the answers, tekken has no space after `[INST]`.
fn mistral(leading: &str, trailing: &str, trim_answers: bool) -> String {
    let answer = if trim_answers {
        "((m.content or '') | trim)"
    } else {
        "(m.content or '')"
    };
    format!(
        "{{%- set ns = namespace(inside=false) %}}{{%- for m in messages %}}\
         {{%- if not ns.inside %}}{{{{- '{leading}[INST]{trailing}' }}}}{{%- set ns.inside = true %}}{{%- endif %}}\
         {{%- if m.role == 'system' %}}{{{{- (m.content or '') + '\\n\\n' }}}}\
         {{%- elif m.role == 'user' %}}{{{{- (m.content or '') + '{leading}[/INST]' }}}}\
         {{%- else %}}{{{{- '{trailing}' + {answer} + '</s>' }}}}{{%- set ns.inside = false %}}{{%- endif %}}\
         {{%- endfor %}}"
    )
}

/// Llama 2 and its variants: `sys` gives the system text `<<SYS>>` tags
/// (else it is its own line), `bos` opens each later turn with `<s>`,
/// `strip` trims every content.
fn llama2(sys: bool, bos: bool, strip: bool) -> String {
    let c = if strip {
        "((m.content or '') | trim)"
    } else {
        "(m.content or '')"
    };
    let system = if sys {
        format!("'<<SYS>>\\n' + {c} + '\\n<</SYS>>\\n\\n'")
    } else {
        format!("{c} + '\\n'")
    };
    let reopen = if bos { "<s>[INST] " } else { "[INST] " };
    format!(
        "{{%- set ns = namespace(inside=true) %}}{{{{- '[INST] ' }}}}{{%- for m in messages %}}\
         {{%- if not ns.inside %}}{{%- set ns.inside = true %}}{{{{- '{reopen}' }}}}{{%- endif %}}\
         {{%- if m.role == 'system' %}}{{{{- {system} }}}}\
         {{%- elif m.role == 'user' %}}{{{{- {c} + ' [/INST]' }}}}\
         {{%- else %}}{{{{- {c} + '</s>' }}}}{{%- set ns.inside = false %}}{{%- endif %}}\
         {{%- endfor %}}"
    )
}

/// The Jinja of llama.cpp's template `name`, when it is one of those here.
pub fn named(name: &str) -> Option<String> {
    Some(match name {
        "llama3" => LLAMA3.into(),
        "llama2" => llama2(false, false, false),
        "llama2-sys" => llama2(true, false, false),
        "llama2-sys-bos" => llama2(true, true, false),
        "llama2-sys-strip" => llama2(true, false, true),
        "mistral-v1" => mistral(" ", " ", false),
        "mistral-v3" => mistral("", " ", true),
        "mistral-v3-tekken" => mistral("", "", false),
        "mistral-v7" => mistral_v7(false),
        "mistral-v7-tekken" => mistral_v7(true),
        "phi3" => role_lines("<|end|>\\n"),
        "phi4" => PHI4.into(),
        "falcon3" => role_lines("\\n"),
        "zephyr" => role_lines("<|endoftext|>\\n"),
        "gemma" => GEMMA.into(),
        "vicuna" => vicuna(false),
        "vicuna-orca" => vicuna(true),
        "deepseek" => DEEPSEEK.into(),
        "command-r" => COMMAND_R.into(),
        "openchat" => OPENCHAT.into(),
        _ => return None,
    })
}

/// Every name [`named`] knows.
pub const NAMES: &[&str] = &[
    "llama3",
    "llama2",
    "llama2-sys",
    "llama2-sys-bos",
    "llama2-sys-strip",
    "mistral-v1",
    "mistral-v3",
    "mistral-v3-tekken",
    "mistral-v7",
    "mistral-v7-tekken",
    "phi3",
    "phi4",
    "falcon3",
    "zephyr",
    "gemma",
    "vicuna",
    "vicuna-orca",
    "deepseek",
    "command-r",
    "openchat",
];

#[cfg(test)]
mod tests {
    use super::*;
    use minfer_engine::{ChatMessage, ChatTemplate};

    /// llama-server's renders (`scripts/record_named_templates.py`).
    const RECORDED: &str = include_str!("../../tests/fixtures/named_templates.json");

    #[test]
    fn every_name_renders_as_llama_server_does() {
        let rec: serde_json::Value = serde_json::from_str(RECORDED).unwrap();
        let msgs: Vec<ChatMessage> = rec["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| ChatMessage::new(m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
            .collect();
        let renders = rec["renders"].as_object().unwrap();
        assert_eq!(renders.len(), NAMES.len());
        for name in NAMES {
            let t = ChatTemplate::new(&named(name).unwrap()).unwrap();
            let ours = t.render(&msgs, None, true).unwrap();
            assert_eq!(ours, renders[*name].as_str().unwrap(), "{name}");
        }
        assert!(named("no-such-template").is_none());
    }
}
