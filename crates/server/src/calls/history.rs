//! Calls sent back in a conversation, in the shape chat templates read.

use serde_json::Value;

/// A message's `tool_calls` as chat templates expect them: `arguments` as
/// an object where the text parses (templates write it with `tojson`).
pub fn template_calls(calls: &Value) -> Value {
    let mut calls = calls.clone();
    if let Some(list) = calls.as_array_mut() {
        for c in list {
            if let Some(f) = c.get_mut("function") {
                if let Some(Value::String(s)) = f.get("arguments") {
                    if let Ok(v) = serde_json::from_str::<Value>(s) {
                        f["arguments"] = v;
                    }
                }
            }
        }
    }
    calls
}
