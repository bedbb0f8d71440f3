//! The Responses API's streamed events: every output item is added, its
//! content part (text or reasoning) or its arguments stream, and it is
//! done, all numbered by `sequence_number`; `response.completed` (or
//! `.incomplete`, `.failed`) ends the stream with the whole response.

use serde_json::{json, Value};

use super::shape::Shape;
use crate::events::{Finish, Generated, Progress, Report, Timings};
use crate::http::ApiError;
use crate::translate::{Block, Blocks, Ev, Named, Sink};

/// Where a streamed response stands.
pub(super) struct Stream {
    pub(super) shape: Shape,
    pub(super) blocks: Blocks,
    pub(super) seq: u64,
    /// What the request asked to hear while it runs.
    pub(super) report: Report,
    /// The timings to send with the next text delta.
    pub(super) tick: Option<Timings>,
    /// The answer's engine times, for the final event's `timings`.
    pub(super) generated: Option<Generated>,
}

impl Stream {
    pub(super) fn ev(&mut self, name: &'static str, mut v: Value, out: &mut Vec<Named>) {
        v["type"] = json!(name);
        v["sequence_number"] = json!(self.seq);
        self.seq += 1;
        out.push((name, v));
    }

    /// An event about item `i` (whose id is `id`): `v` with both.
    fn at(&mut self, name: &'static str, i: usize, id: &Value, mut v: Value, out: &mut Vec<Named>) {
        v["output_index"] = json!(i);
        v["item_id"] = id.clone();
        self.ev(name, v, out);
    }

    fn open(&mut self, i: usize, b: &Block, out: &mut Vec<Named>) {
        let mut item = self.shape.item(i, b, "in_progress");
        let id = item["id"].clone();
        let mut part = Value::Null;
        match b {
            Block::Call(_) => item["arguments"] = json!(""),
            _ => part = std::mem::replace(&mut item["content"], json!([]))[0].take(),
        }
        let added = json!({"output_index": i, "item": item});
        self.ev("response.output_item.added", added, out);
        match b {
            Block::Call(c) => {
                let d = json!({"delta": c.arguments});
                self.at("response.function_call_arguments.delta", i, &id, d, out);
            }
            _ => {
                let p = json!({"content_index": 0, "part": part});
                self.at("response.content_part.added", i, &id, p, out);
            }
        }
    }

    fn close(&mut self, i: usize, b: &Block, status: &str, out: &mut Vec<Named>) {
        let item = self.shape.item(i, b, status);
        let id = item["id"].clone();
        let (name, d) = match b {
            Block::Call(c) => (
                "response.function_call_arguments.done",
                json!({"arguments": c.arguments}),
            ),
            Block::Text(t) => (
                "response.output_text.done",
                json!({"content_index": 0, "text": t, "logprobs": []}),
            ),
            Block::Reasoning(t) => (
                "response.reasoning_text.done",
                json!({"content_index": 0, "text": t}),
            ),
        };
        self.at(name, i, &id, d, out);
        if !matches!(b, Block::Call(_)) {
            let d = json!({"content_index": 0, "part": item["content"][0]});
            self.at("response.content_part.done", i, &id, d, out);
        }
        let done = json!({"output_index": i, "item": item});
        self.ev("response.output_item.done", done, out);
    }

    fn events(&mut self, evs: Vec<Ev>, cut: bool, out: &mut Vec<Named>) {
        for e in evs {
            match e {
                Ev::Open(i, b) => self.open(i, &b, out),
                Ev::Delta(i, Block::Text(t)) => {
                    let id = json!(self.shape.item_id("msg", i));
                    let mut d = json!({"content_index": 0, "delta": t, "logprobs": []});
                    if let Some(t) = self.tick.take() {
                        d["timings"] = t.to_json();
                    }
                    self.at("response.output_text.delta", i, &id, d, out);
                }
                Ev::Delta(i, Block::Reasoning(t)) => {
                    let id = json!(self.shape.item_id("rs", i));
                    let d = json!({"content_index": 0, "delta": t});
                    self.at("response.reasoning_text.delta", i, &id, d, out);
                }
                Ev::Delta(_, Block::Call(_)) => {}
                Ev::Close(i, b) => {
                    let last = cut && self.blocks.closed.len() == i + 1;
                    self.close(i, &b, if last { "incomplete" } else { "completed" }, out);
                }
            }
        }
    }
}

impl Sink for Stream {
    fn text(&mut self, s: &str, out: &mut Vec<Named>) {
        let evs = self.blocks.push(s);
        self.events(evs, false, out);
    }

    fn done(&mut self, f: &Finish, out: &mut Vec<Named>) {
        let evs = self.blocks.finish();
        let cut = f.cut_off();
        self.events(evs, cut, out);
        let obj = self.shape.object(&self.blocks.closed, Some(f));
        let name = if cut {
            "response.incomplete"
        } else {
            "response.completed"
        };
        let mut v = json!({"response": obj});
        // llama-server's timings of the answer, beside the response.
        if let Some(g) = self.generated.take() {
            v["timings"] = g.timings(f);
        }
        self.ev(name, v, out);
    }

    fn error(&mut self, e: &ApiError, out: &mut Vec<Named>) {
        let mut obj = self.shape.object(&self.blocks.closed, None);
        obj["status"] = json!("failed");
        obj["error"] = json!({"code": "server_error", "message": e.message});
        self.ev("response.failed", json!({"response": obj}), out);
    }

    fn idle(&mut self, out: &mut Vec<Named>) {
        let obj = self.shape.object(&self.blocks.closed, None);
        self.ev("response.in_progress", json!({"response": obj}), out);
    }

    fn ended(&self) -> bool {
        self.blocks.ended()
    }

    fn progress(&mut self, p: &Progress, out: &mut Vec<Named>) {
        let mut v = json!({"response": self.shape.object(&self.blocks.closed, None),
                           "prompt_progress": p.to_json()});
        if self.report.timings {
            v["timings"] = p.timings.to_json();
        }
        self.ev("response.in_progress", v, out);
    }

    fn timings(&mut self, t: Timings) {
        self.tick = Some(t);
    }

    fn generated(&mut self, g: &Generated) {
        self.generated = Some(g.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::Split;

    #[test]
    fn items_stream_in_order_and_numbered() {
        let split = Split::qwen_tools();
        let shape = Shape {
            n: 2,
            created: 1,
            model: "m".into(),
            prompt_tokens: 4,
            echo: json!({}),
            scoped: Vec::new(),
        };
        let mut st = Stream {
            shape,
            blocks: Blocks::new(&split),
            seq: 5,
            report: Report::default(),
            tick: None,
            generated: None,
        };
        let out = crate::translate::feed_think_text_call(&mut st);
        let names: Vec<&str> = out
            .iter()
            .map(|(n, _)| n.trim_start_matches("response."))
            .collect();
        let item = ["output_item.added", "content_part.added"];
        let done = ["content_part.done", "output_item.done"];
        let mut want = Vec::new();
        want.extend(item);
        want.extend([
            "reasoning_text.delta",
            "reasoning_text.delta",
            "reasoning_text.done",
        ]);
        want.extend(done);
        want.extend(item);
        want.extend(["output_text.delta", "output_text.delta", "output_text.done"]);
        want.extend(done);
        want.extend(["output_item.added", "function_call_arguments.delta"]);
        want.extend([
            "function_call_arguments.done",
            "output_item.done",
            "completed",
        ]);
        assert_eq!(names, want);
        for (k, (name, v)) in out.iter().enumerate() {
            assert_eq!(
                (v["type"].as_str(), v["sequence_number"].as_u64()),
                (Some(*name), Some(5 + k as u64))
            );
        }
        assert_eq!(out[0].1["item"]["type"], "reasoning");
        assert_eq!(out[4].1["text"], "hm");
        assert_eq!(out[11].1["text"], "Hi there");
        assert_eq!(out[11].1["item_id"], out[7].1["item"]["id"]);
        assert_eq!(out[14].1["item"]["arguments"], "");
        assert_eq!(out[15].1["delta"], r#"{"a":1}"#);
        assert_eq!(out[16].1["arguments"], r#"{"a":1}"#);
        let end = &out.last().unwrap().1["response"];
        assert_eq!(end["status"], "completed");
        assert_eq!(end["output_text"], "Hi there");
        assert_eq!(end["output"][2]["call_id"], "call_000000000000000202");
    }
}
