//! The Messages API's streamed events: `message_start`, then each content
//! block's `content_block_start`, deltas (`text_delta`, `thinking_delta`,
//! `input_json_delta`) and `content_block_stop`, then `message_delta`
//! with the stop reason and usage, and `message_stop`.

use serde_json::{json, Value};

use super::{content_block, error_body, stop, usage, Ids};
use crate::error::ApiError;
use crate::translate::{Block, Blocks, Ev, Named, Sink};
use crate::worker::Finish;

/// Where a streamed answer stands.
pub(super) struct Stream {
    pub(super) ids: Ids,
    pub(super) blocks: Blocks,
    pub(super) stops: Vec<String>,
}

pub(super) fn ev(name: &'static str, mut v: Value) -> Named {
    v["type"] = json!(name);
    (name, v)
}

impl Stream {
    fn events(&self, evs: Vec<Ev>, out: &mut Vec<Named>) {
        for e in evs {
            match e {
                Ev::Open(i, b) => {
                    let mut block = content_block(&self.ids, i, &b);
                    if let Block::Call(c) = &b {
                        block["input"] = json!({});
                        out.push(ev(
                            "content_block_start",
                            json!({"index": i, "content_block": block}),
                        ));
                        let delta =
                            json!({"type": "input_json_delta", "partial_json": c.arguments});
                        out.push(ev(
                            "content_block_delta",
                            json!({"index": i, "delta": delta}),
                        ));
                    } else {
                        out.push(ev(
                            "content_block_start",
                            json!({"index": i, "content_block": block}),
                        ));
                    }
                }
                Ev::Delta(i, Block::Text(t)) => {
                    let delta = json!({"type": "text_delta", "text": t});
                    out.push(ev(
                        "content_block_delta",
                        json!({"index": i, "delta": delta}),
                    ));
                }
                Ev::Delta(i, Block::Reasoning(t)) => {
                    let delta = json!({"type": "thinking_delta", "thinking": t});
                    out.push(ev(
                        "content_block_delta",
                        json!({"index": i, "delta": delta}),
                    ));
                }
                Ev::Delta(_, Block::Call(_)) => {}
                Ev::Close(i, _) => out.push(ev("content_block_stop", json!({"index": i}))),
            }
        }
    }
}

impl Sink for Stream {
    fn text(&mut self, s: &str, out: &mut Vec<Named>) {
        let evs = self.blocks.push(s);
        self.events(evs, out);
    }

    fn done(&mut self, f: &Finish, out: &mut Vec<Named>) {
        let evs = self.blocks.finish();
        self.events(evs, out);
        let (reason, seq) = stop(f, self.blocks.has_calls(), &self.stops);
        out.push(ev(
            "message_delta",
            json!({"delta": {"stop_reason": reason, "stop_sequence": seq},
                   "usage": usage(f.prompt_tokens, f.cached_tokens, f.completion_tokens)}),
        ));
        out.push(ev("message_stop", json!({})));
    }

    fn error(&mut self, e: &ApiError, out: &mut Vec<Named>) {
        out.push(("error", error_body(e)));
    }

    fn idle(&mut self, out: &mut Vec<Named>) {
        out.push(ev("ping", json!({})));
    }

    fn ended(&self) -> bool {
        self.blocks.ended()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::respond::Split;

    #[test]
    fn thinking_text_and_calls_stream_as_blocks() {
        let split = Split::qwen_tools();
        let mut st = Stream {
            ids: Ids::new(3),
            blocks: Blocks::new(&split),
            stops: Vec::new(),
        };
        let out = crate::translate::feed_think_text_call(&mut st);
        let names: Vec<&str> = out.iter().map(|(n, _)| *n).collect();
        let (start, delta, end) = (
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
        );
        assert_eq!(
            names,
            [
                start,
                delta,
                delta,
                end,
                start,
                delta,
                delta,
                end,
                start,
                delta,
                end,
                "message_delta",
                "message_stop"
            ]
        );
        for (name, v) in &out {
            assert_eq!(v["type"], *name);
        }
        let block = |k: usize| &out[k].1["content_block"];
        assert_eq!(block(0)["type"], "thinking");
        assert_eq!(
            out[1].1["delta"],
            json!({"type": "thinking_delta", "thinking": "h"})
        );
        assert_eq!(block(4)["type"], "text");
        assert_eq!(
            out[6].1["delta"],
            json!({"type": "text_delta", "text": " there"})
        );
        assert_eq!(block(8)["id"], "toolu_000000000000000302");
        assert_eq!(block(8)["input"], json!({}));
        assert_eq!(out[9].1["delta"]["partial_json"], r#"{"a":1}"#);
        assert_eq!(out[9].1["index"], 2);
        assert_eq!(out[11].1["delta"]["stop_reason"], "tool_use");
        assert_eq!(out[11].1["usage"]["output_tokens"], 9);
    }
}
