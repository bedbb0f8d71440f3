//! The Messages API's streamed events: `message_start`, then each content
//! block's `content_block_start`, deltas (`text_delta`, `thinking_delta`,
//! `input_json_delta`) and `content_block_stop`, then `message_delta`
//! with the stop reason and usage, and `message_stop`.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::reply::{content_block, error_body, stop, usage, Ids};
use crate::events::Finish;
use crate::http::ApiError;
use crate::translate::{Block, Blocks, Ev, Named, Sink};

/// Where a streamed answer stands.
pub(super) struct Stream {
    pub(super) ids: Ids,
    pub(super) blocks: Blocks,
    pub(super) stops: Vec<String>,
    /// When the client last got an event it does not skip (anything but a
    /// `ping`).
    pub(super) heard: Instant,
}

/// Silence after which a long prefill sends a `message_delta` with no
/// change: the official SDKs drop `ping` events before the caller sees
/// them, so a client's own idle timer (Claude Code aborts a stream after
/// 300 s without an event) counts only real events. The Messages API
/// allows several `message_delta` events; this one changes nothing
/// (`stop_reason` still null, no tokens out yet).
const PROGRESS_EVERY: Duration = Duration::from_secs(60);

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
        if !evs.is_empty() {
            self.heard = Instant::now();
        }
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
        if self.heard.elapsed() >= PROGRESS_EVERY {
            self.heard = Instant::now();
            out.push(ev(
                "message_delta",
                json!({"delta": {"stop_reason": null, "stop_sequence": null},
                       "usage": {"output_tokens": 0}}),
            ));
        }
    }

    fn ended(&self) -> bool {
        self.blocks.ended()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::Split;

    #[test]
    fn a_long_silence_gets_an_event_the_sdks_pass_on() {
        let mut st = Stream {
            ids: Ids::new(3),
            blocks: Blocks::new(&Split::qwen_tools()),
            stops: Vec::new(),
            heard: Instant::now(),
        };
        let mut out = Vec::new();
        st.idle(&mut out);
        assert_eq!(out.iter().map(|(n, _)| *n).collect::<Vec<_>>(), ["ping"]);
        st.heard = Instant::now() - PROGRESS_EVERY;
        out.clear();
        st.idle(&mut out);
        assert_eq!(
            out.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
            ["ping", "message_delta"]
        );
        // Nothing changes: no stop reason, no tokens.
        assert_eq!(out[1].1["delta"]["stop_reason"], Value::Null);
        assert_eq!(out[1].1["usage"], json!({"output_tokens": 0}));
        out.clear();
        st.idle(&mut out);
        assert_eq!(out.len(), 1, "one progress event a period");
    }

    #[test]
    fn thinking_text_and_calls_stream_as_blocks() {
        let split = Split::qwen_tools();
        let mut st = Stream {
            ids: Ids::new(3),
            blocks: Blocks::new(&split),
            stops: Vec::new(),
            heard: Instant::now(),
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
