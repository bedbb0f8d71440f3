//! Chat templates: the Jinja template stored in `tokenizer.chat_template`,
//! rendered the way Hugging Face transformers renders it.
//!
//! transformers uses Jinja2 with `trim_blocks`, `lstrip_blocks` and the
//! loop-controls extension, adds `raise_exception`, `strftime_now` and a
//! `tojson` that is `json.dumps(ensure_ascii=False)`, and lets templates
//! call Python string and dict methods. minijinja with its Python
//! compatibility layer provides the same language; the functions are
//! defined here, the remaining differences are bridged in `compat`.

use std::collections::BTreeMap;
use std::sync::Arc;

use minfer_gguf::Metadata;
use minijinja::syntax::SyntaxConfig;
use minijinja::value::{Kwargs, Serde, Value};
use minijinja::{Environment, Error, ErrorKind};
use serde::{Deserialize, Serialize};

use crate::compat;
use crate::pyjson;
use crate::strftime::DateTime;
use crate::TextError;

const KEY_TEMPLATE: &str = "tokenizer.chat_template";
const TEMPLATE_NAME: &str = "chat_template";

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant`, `tool`…
    pub role: String,
    /// The message text.
    pub content: String,
}

impl ChatMessage {
    /// A message with the given role and text.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role: role.into(),
            content: content.into(),
        }
    }
}

/// Where `strftime_now` reads the time.
type Clock = Arc<dyn Fn() -> DateTime + Send + Sync>;

/// A compiled chat template plus the variables it is rendered with.
#[derive(Clone)]
pub struct ChatTemplate {
    source: String,
    env: Environment<'static>,
    clock: Clock,
    bos_token: String,
    eos_token: String,
    extra: BTreeMap<String, Value>,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("source_len", &self.source.len())
            .field("bos_token", &self.bos_token)
            .field("eos_token", &self.eos_token)
            .finish_non_exhaustive()
    }
}

impl ChatTemplate {
    /// The template of a model, compiled; `Ok(None)` when the metadata has
    /// none. A template that does not compile is [`TextError::Template`].
    pub fn from_gguf(md: &Metadata) -> Result<Option<ChatTemplate>, TextError> {
        match md.get_str(KEY_TEMPLATE)? {
            None => Ok(None),
            Some(src) => ChatTemplate::new(src).map(Some),
        }
    }

    /// Compiles a template. `bos_token` and `eos_token` start empty, the
    /// clock of `strftime_now` is the system's (UTC).
    pub fn new(source: &str) -> Result<ChatTemplate, TextError> {
        let clock: Clock = Arc::new(DateTime::now_utc);
        let env = build_env(source, clock.clone())?;
        Ok(ChatTemplate {
            source: source.to_string(),
            env,
            clock,
            bos_token: String::new(),
            eos_token: String::new(),
            extra: BTreeMap::new(),
        })
    }

    /// The template text.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Sets the `bos_token` and `eos_token` variables (usually the texts of
    /// the tokenizer's BOS and EOS tokens).
    pub fn with_special_tokens(mut self, bos: impl Into<String>, eos: impl Into<String>) -> Self {
        self.bos_token = bos.into();
        self.eos_token = eos.into();
        self
    }

    /// Makes `strftime_now` read `clock` instead of the system time.
    pub fn with_clock(
        mut self,
        clock: impl Fn() -> DateTime + Send + Sync + 'static,
    ) -> Result<Self, TextError> {
        self.clock = Arc::new(clock);
        self.env = build_env(&self.source, self.clock.clone())?;
        Ok(self)
    }

    /// Makes `strftime_now` always see `now`.
    pub fn with_fixed_time(self, now: DateTime) -> Result<Self, TextError> {
        self.with_clock(move || now)
    }

    /// Defines an extra template variable (e.g. `enable_thinking`).
    pub fn with_var(mut self, name: impl Into<String>, value: &serde_json::Value) -> Self {
        self.extra.insert(name.into(), Value::from(Serde(value)));
        self
    }

    /// Renders a conversation. `tools` (a JSON array of tool definitions)
    /// is passed as the `tools` variable, `None` as Python's `None`.
    pub fn render(
        &self,
        messages: &[ChatMessage],
        tools: Option<&serde_json::Value>,
        add_generation_prompt: bool,
    ) -> Result<String, TextError> {
        self.render_value(Value::from(Serde(messages)), tools, add_generation_prompt)
    }

    /// Like [`render`](Self::render) with messages given as JSON, for
    /// messages that carry more than role and text (`tool_calls`,
    /// `name`…).
    pub fn render_json(
        &self,
        messages: &serde_json::Value,
        tools: Option<&serde_json::Value>,
        add_generation_prompt: bool,
    ) -> Result<String, TextError> {
        self.render_value(Value::from(Serde(messages)), tools, add_generation_prompt)
    }

    fn render_value(
        &self,
        messages: Value,
        tools: Option<&serde_json::Value>,
        add_generation_prompt: bool,
    ) -> Result<String, TextError> {
        let mut ctx = self.extra.clone();
        // Today's date in the two spellings templates read (Llama 3.x's
        // `date_string`, FireFunction's `datetime`), as llama.cpp passes
        // them, unless a caller's variable says otherwise.
        let now = (self.clock)();
        ctx.entry("date_string".into())
            .or_insert_with(|| Value::from(now.strftime("%d %b %Y")));
        ctx.entry("datetime".into())
            .or_insert_with(|| Value::from(now.strftime("%b %d %Y")));
        // FireFunction v2's template reads the tools as indented JSON text
        // in `functions`, which llama.cpp fills so.
        ctx.entry("functions".into()).or_insert_with(|| {
            Value::from(tools.map_or(String::new(), |t| {
                serde_json::to_string_pretty(t).unwrap_or_default()
            }))
        });
        ctx.insert("messages".into(), messages);
        ctx.insert(
            "tools".into(),
            tools.map_or(Value::from(()), |t| Value::from(Serde(t))),
        );
        ctx.insert(
            "add_generation_prompt".into(),
            Value::from(add_generation_prompt),
        );
        ctx.insert("bos_token".into(), Value::from(self.bos_token.as_str()));
        ctx.insert("eos_token".into(), Value::from(self.eos_token.as_str()));
        let tmpl = self.env.get_template(TEMPLATE_NAME)?;
        Ok(tmpl.render(Value::from(ctx))?)
    }
}

fn build_env(source: &str, clock: Clock) -> Result<Environment<'static>, TextError> {
    let mut env = Environment::new();
    let syntax = SyntaxConfig::builder()
        .trim_blocks(true)
        .lstrip_blocks(true)
        .build()?;
    env.set_syntax(syntax);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function("raise_exception", raise_exception);
    env.add_function("strftime_now", move |fmt: String| clock().strftime(&fmt));
    env.add_filter("tojson", tojson);
    env.add_test("iterable", compat::is_iterable);
    env.add_template_owned(
        TEMPLATE_NAME,
        compat::rewrite_generation_tags(source).into_owned(),
    )?;
    Ok(env)
}

fn raise_exception(message: String) -> Result<Value, Error> {
    Err(Error::new(
        ErrorKind::InvalidOperation,
        format!("template raised an exception: {message}"),
    ))
}

/// `tojson(x, ensure_ascii=False, indent=None, separators=None,
/// sort_keys=False)`, as transformers defines it.
fn tojson(value: &Value, indent: Option<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let mut opts = pyjson::Options::default();
    let indent = match indent {
        Some(v) => Some(v),
        None => kwargs.get::<Option<Value>>("indent")?,
    };
    if let Some(v) = indent.filter(|v| !v.is_none() && !v.is_undefined()) {
        let n = usize::try_from(v.clone()).map_err(|_| {
            Error::new(
                ErrorKind::InvalidOperation,
                "tojson: indent must be an integer",
            )
        })?;
        opts.indent = Some(n);
        // Python drops the space after item separators when indenting.
        opts.item_sep = ",".into();
    }
    if let Some(b) = kwargs.get::<Option<bool>>("ensure_ascii")? {
        opts.ensure_ascii = b;
    }
    if let Some(b) = kwargs.get::<Option<bool>>("sort_keys")? {
        opts.sort_keys = b;
    }
    if let Some(seps) = kwargs.get::<Option<Value>>("separators")? {
        if !seps.is_none() {
            let parts: Vec<String> = seps
                .try_iter()?
                .map(|s| s.as_str().map(str::to_string))
                .collect::<Option<_>>()
                .filter(|p: &Vec<String>| p.len() == 2)
                .ok_or_else(|| {
                    Error::new(
                        ErrorKind::InvalidOperation,
                        "tojson: separators must be two strings",
                    )
                })?;
            opts.item_sep = parts[0].clone();
            opts.key_sep = parts[1].clone();
        }
    }
    kwargs.assert_all_used()?;
    Ok(Value::from_safe_string(pyjson::dumps(value, &opts)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> Vec<ChatMessage> {
        vec![ChatMessage::new("user", text)]
    }

    #[test]
    fn trims_blocks_like_transformers() {
        let t = ChatTemplate::new(
            "{% for m in messages %}\n  {% if m.role == 'user' %}\n[{{ m.content }}]\n  {% endif %}\n{% endfor %}\n",
        )
        .unwrap();
        assert_eq!(t.render(&user("hi"), None, false).unwrap(), "[hi]\n");
    }

    #[test]
    fn python_string_methods_and_loop_controls() {
        let t = ChatTemplate::new(
            "{% for m in messages %}{% if loop.index > 1 %}{% break %}{% endif %}\
             {{ m.content.strip().split(',')|join('|') }}{{ m.content.startswith(' a') }}{% endfor %}",
        )
        .unwrap();
        let msgs = vec![
            ChatMessage::new("user", " a,b "),
            ChatMessage::new("user", "x"),
        ];
        assert_eq!(t.render(&msgs, None, false).unwrap(), "a|bTrue");
    }

    #[test]
    fn tojson_is_python_json() {
        let t =
            ChatTemplate::new("{{ tools | tojson }}|{{ tools[0] | tojson(indent=2) }}").unwrap();
        let tools = serde_json::json!([{"z": 1, "a": [1.5, "é"]}]);
        assert_eq!(
            t.render(&[], Some(&tools), false).unwrap(),
            "[{\"z\": 1, \"a\": [1.5, \"é\"]}]|{\n  \"z\": 1,\n  \"a\": [\n    1.5,\n    \"é\"\n  ]\n}"
        );
    }

    #[test]
    fn strftime_now_uses_the_injected_clock() {
        let t = ChatTemplate::new("{{ strftime_now('%d %B %Y') }}")
            .unwrap()
            .with_fixed_time(DateTime::date(2026, 11, 29))
            .unwrap();
        assert_eq!(t.render(&[], None, true).unwrap(), "29 November 2026");
    }

    #[test]
    fn todays_date_and_functions_are_passed_as_llama_cpp_passes_them() {
        let src = "{{ date_string }}|{{ datetime }}";
        let t = ChatTemplate::new(src)
            .unwrap()
            .with_fixed_time(DateTime::date(2026, 11, 29))
            .unwrap();
        assert_eq!(
            t.render(&[], None, true).unwrap(),
            "29 Nov 2026|Nov 29 2026"
        );
        let tools = serde_json::json!([{"type": "function", "function": {"name": "f"}}]);
        let f = ChatTemplate::new("[{{ functions }}]").unwrap();
        assert_eq!(f.render(&[], None, true).unwrap(), "[]");
        assert_eq!(
            f.render(&[], Some(&tools), true).unwrap(),
            format!("[{}]", serde_json::to_string_pretty(&tools).unwrap())
        );
        let given = t.with_var("date_string", &serde_json::json!("1 Jan 2000"));
        assert!(given
            .render(&[], None, true)
            .unwrap()
            .starts_with("1 Jan 2000|"));
    }

    #[test]
    fn special_tokens_and_extra_vars() {
        let t = ChatTemplate::new("{{ bos_token }}{{ flag }}{{ eos_token }}")
            .unwrap()
            .with_special_tokens("<s>", "</s>")
            .with_var("flag", &serde_json::json!(true));
        assert_eq!(t.render(&[], None, true).unwrap(), "<s>True</s>");
    }

    #[test]
    fn raise_exception_is_an_error() {
        let t = ChatTemplate::new("{{ raise_exception('no system role') }}").unwrap();
        let err = t.render(&[], None, true).unwrap_err();
        assert!(matches!(err, TextError::Template(_)));
        assert!(err.to_string().contains("no system role"), "{err}");
    }

    #[test]
    fn none_is_not_iterable() {
        let t = ChatTemplate::new(
            "{{ tools is iterable }}{{ messages is iterable }}{{ nothing is iterable }}",
        )
        .unwrap();
        assert_eq!(t.render(&[], None, true).unwrap(), "FalseTrueTrue");
    }

    #[test]
    fn shareable_across_threads() {
        fn assert_send_sync<T: Send + Sync + Clone>() {}
        assert_send_sync::<ChatTemplate>();
    }

    #[test]
    fn broken_template_is_refused() {
        let err = ChatTemplate::new("{% for m in messages %}{{ m.content }").unwrap_err();
        assert!(matches!(err, TextError::Template(_)), "{err}");
    }
}
