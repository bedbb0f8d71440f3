//! The Responses API's answer: the response object with its output items
//! (reasoning, message, function calls), and the request's settings it
//! echoes.

use serde_json::{json, Value};

use super::request::{ResponsesRequest, Scoped};
use crate::events::Finish;
use crate::translate::Block;

/// The fixed parts of one response.
pub(super) struct Shape {
    /// The request's number, for the item ids.
    pub(super) n: u64,
    pub(super) created: u64,
    pub(super) model: String,
    pub(super) prompt_tokens: usize,
    /// The request's settings, echoed in every response object.
    pub(super) echo: Value,
    /// The functions of its `namespace` tools.
    pub(super) scoped: Vec<Scoped>,
}

impl Shape {
    pub(super) fn id(&self) -> String {
        format!("resp_{:016x}", self.n)
    }

    pub(super) fn item_id(&self, prefix: &str, i: usize) -> String {
        format!("{prefix}_{:016x}{i:02}", self.n)
    }

    pub(super) fn item(&self, i: usize, b: &Block, status: &str) -> Value {
        match b {
            Block::Text(t) => json!({"type": "message", "id": self.item_id("msg", i),
                "status": status, "role": "assistant",
                "content": [{"type": "output_text", "text": t, "annotations": [], "logprobs": []}]}),
            Block::Reasoning(t) => json!({"type": "reasoning", "id": self.item_id("rs", i),
                "status": status, "summary": [],
                "content": [{"type": "reasoning_text", "text": t}]}),
            Block::Call(c) => {
                let mut item = json!({"type": "function_call", "id": self.item_id("fc", i),
                    "call_id": self.item_id("call", i), "name": c.name,
                    "arguments": c.arguments, "status": status});
                // A namespace's function comes back under the names the
                // client gave it.
                if let Some(s) = self.scoped.iter().find(|s| s.flat == c.name) {
                    item["name"] = json!(s.name);
                    item["namespace"] = json!(s.namespace);
                }
                item
            }
        }
    }

    /// The response object; `end` once the answer is complete.
    pub(super) fn object(&self, blocks: &[Block], end: Option<&Finish>) -> Value {
        let cut = end.is_some_and(Finish::cut_off);
        let output: Vec<Value> = blocks
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let last = i + 1 == blocks.len();
                self.item(
                    i,
                    b,
                    if cut && last {
                        "incomplete"
                    } else {
                        "completed"
                    },
                )
            })
            .collect();
        let text: String = blocks
            .iter()
            .filter_map(|b| match b {
                Block::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        let status = match end {
            None => "in_progress",
            Some(_) if cut => "incomplete",
            Some(_) => "completed",
        };
        let mut v = json!({
            "id": self.id(),
            "object": "response",
            "created_at": self.created,
            "status": status,
            "model": self.model,
            "output": output,
            "output_text": text,
            "error": null,
            "incomplete_details": if cut { json!({"reason": "max_output_tokens"}) } else { Value::Null },
            "usage": end.map(|f| json!({
                "input_tokens": self.prompt_tokens,
                "input_tokens_details": {"cached_tokens": f.cached_tokens},
                "output_tokens": f.completion_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": self.prompt_tokens + f.completion_tokens,
            })),
        });
        if let (Some(o), Some(e)) = (v.as_object_mut(), self.echo.as_object()) {
            o.extend(e.clone());
        }
        v
    }
}

/// The request's settings as the response object echoes them.
pub(super) fn echo(req: &ResponsesRequest) -> Value {
    let tools: Vec<Value> = req
        .tools
        .iter()
        .flatten()
        .map(|t| {
            let mut t = t.clone();
            if t.get("strict").is_none() {
                t["strict"] = json!(false);
            }
            t
        })
        .collect();
    let text = req
        .text
        .clone()
        .filter(|t| t.get("format").is_some_and(|f| !f.is_null()))
        .unwrap_or_else(|| json!({"format": {"type": "text"}}));
    json!({
        "instructions": req.instructions,
        "max_output_tokens": req.max_output_tokens,
        "metadata": req.metadata.clone().unwrap_or_else(|| json!({})),
        "parallel_tool_calls": req.parallel_tool_calls.unwrap_or(true),
        "temperature": req.temperature.unwrap_or(1.0),
        "top_p": req.top_p.unwrap_or(1.0),
        "tool_choice": req.tool_choice.clone().filter(|c| !c.is_null()).unwrap_or_else(|| json!("auto")),
        "tools": tools,
        "text": text,
        "reasoning": req.reasoning.clone().unwrap_or_else(|| json!({"effort": null, "summary": null})),
        "store": false,
        "truncation": "disabled",
    })
}
