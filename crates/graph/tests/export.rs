//! Graph dumps name every node and parse back.

mod common;

use common::{build, params, store, Hp};
use minfer_graph::export::{to_dot, to_json, to_json_string};
use minfer_graph::{CacheConfig, Fusion};
use minfer_kernels::{GgmlType, Kernels};

#[test]
fn dot_and_json_contain_every_node() {
    let hp = Hp::SMALL;
    let w = store(&hp, GgmlType::Q8_0, 31);
    let mut c = minfer_cpu::graph_cache(Kernels::detect(), 1, CacheConfig::default());
    for fusion in [Fusion::ALL, Fusion::NONE] {
        let uid = c
            .prepare(&params(4, 1, 32, fusion), &w, |b| build(b, &hp))
            .unwrap();
        let g = c.graph(uid).unwrap();
        let dot = to_dot(g);
        assert!(dot.starts_with("digraph"));
        let json_text = to_json_string(g);
        let parsed: serde_json::Value = serde_json::from_str(&json_text).unwrap();
        assert_eq!(parsed, to_json(g));
        let nodes = parsed["nodes"].as_array().unwrap();
        assert_eq!(nodes.len(), g.nodes.len());
        let mut edges = 0;
        for (i, n) in g.nodes.iter().enumerate() {
            assert!(
                dot.contains(&format!("\"{}\\n", n.name)),
                "{} missing from DOT",
                n.name
            );
            let j = &nodes[i];
            assert_eq!(j["id"], i);
            assert_eq!(j["name"], n.name.as_str());
            assert_eq!(j["op"], n.op.name());
            assert_eq!(j["shape"], serde_json::json!(n.shape));
            assert_eq!(j["srcs"], serde_json::json!(n.srcs));
            assert!(j["dtype"] == "f32" || j["dtype"] == "i32");
            edges += n.srcs.len();
        }
        assert_eq!(dot.matches(" -> ").count(), edges);
        assert_eq!(parsed["output"], g.output);
        assert_eq!(parsed["inputs"].as_array().unwrap().len(), g.inputs.len());
    }
}
