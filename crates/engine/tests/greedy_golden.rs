//! Greedy decoding against llama.cpp's recorded tokens and logits
//! (`golden/greedy-*.json`): the prompt is evaluated in one batch, then one
//! token at a time, each the argmax of the raw logits.
//!
//! Tolerances. These models amplify rounding: activations are quantized
//! to 8 bits before every matmul, so a last-bit difference anywhere flips
//! some roundings and grows from layer to layer. Two llama.cpp builds of
//! the very commit that made the golden files (ggml 0.25.3, 0c1e570), on
//! this machine type with the same settings, differ from the golden
//! logits by up to 0.2 (Qwen2.5-0.5B) and 0.5 (SmolLM2-135M), mean 0.06 and
//! 0.19 over the recorded top-5. The bounds below sit just above that
//! spread, so they accept any faithful implementation and still reject a
//! real defect (a wrong RoPE style, norm epsilon, bias or attention scale
//! moves logits by whole units).
//!
//! Every step feeds llama.cpp's token, so the context stays identical even
//! after a step where the two engines would pick differently. Logits are
//! compared at every step; tokens at every step whose top two logits (in
//! llama.cpp) are far enough apart that rounding cannot swap them.

mod common;

use std::sync::Arc;

use common::golden::*;
use minfer_models::Model;

#[test]
fn greedy_matches_llama_cpp_qwen2_5() {
    check_model(minfer_testutil::QWEN, "greedy-qwen2.5.json", &QWEN_TOL);
}

#[test]
fn greedy_matches_llama_cpp_smollm2() {
    check_model(minfer_testutil::SMOLLM, "greedy-smollm2.json", &SMOLLM_TOL);
}

#[test]
fn greedy_matches_llama_cpp_qwen3_tiny() {
    let file = "qwen3-tiny-q8_0.gguf";
    let path = minfer_testutil::repo_model(file);
    let model = Arc::new(Model::open(&path).expect("the repository's qwen3 model loads"));
    for golden in ["greedy-qwen3-tiny.avx2.json", "greedy-qwen3-tiny.avx.json"] {
        check_loaded(&model, file, golden, &QWEN3_TINY_TOL);
    }
}

/// The random-weight Qwen3-MoE made by `scripts/make-moe-fixture.py`,
/// against llama.cpp's run of the same file (`scripts/golden-greedy.py`,
/// the golden data's llama.cpp commit): routing, expert products and the
/// weighted sum, on top of the qwen3 model's attention.
#[test]
fn greedy_matches_llama_cpp_qwen3moe_tiny() {
    let file = "qwen3moe-tiny-q8_0.gguf";
    let path = minfer_testutil::repo_model(file);
    let model = Arc::new(Model::open(&path).expect("the repository's qwen3moe model loads"));
    for golden in [
        "greedy-qwen3moe-tiny.avx2.json",
        "greedy-qwen3moe-tiny.avx.json",
    ] {
        check_loaded(&model, file, golden, &QWEN3MOE_TINY_TOL);
    }
}

/// The same Qwen3-MoE with its experts in MXFP4 (gpt-oss's expert type),
/// made by `scripts/make-moe-fixture.py --experts MXFP4`, every expert
/// used by every row: the E8M0 scales and the e2m1 codebook against
/// llama.cpp's, inside the expert FFN.
#[test]
fn greedy_matches_llama_cpp_qwen3moe_mxfp4_tiny() {
    let file = "qwen3moe-mxfp4-tiny.gguf";
    let path = minfer_testutil::repo_model(file);
    let model = Arc::new(Model::open(&path).expect("the repository's MXFP4 model loads"));
    for golden in [
        "greedy-qwen3moe-mxfp4-tiny.avx512.json",
        "greedy-qwen3moe-mxfp4-tiny.avx2.json",
        "greedy-qwen3moe-mxfp4-tiny.avx.json",
    ] {
        check_loaded(&model, file, golden, &QWEN3MOE_MXFP4_TINY_TOL);
    }
}

/// The random-weight gpt-oss made by `scripts/make-gpt-oss-fixture.py`:
/// attention sinks, biases on every projection, alternating sliding and
/// full attention, YaRN, and MXFP4 experts with biases behind a softmax
/// over the chosen logits and the clamped SwiGLU.
#[test]
fn greedy_matches_llama_cpp_gpt_oss_tiny() {
    let file = "gpt-oss-tiny.gguf";
    let path = minfer_testutil::repo_model(file);
    let model = Arc::new(Model::open(&path).expect("the repository's gpt-oss model loads"));
    for golden in [
        "greedy-gpt-oss-tiny.avx512.json",
        "greedy-gpt-oss-tiny.avx2.json",
        "greedy-gpt-oss-tiny.avx.json",
    ] {
        check_loaded(&model, file, golden, &GPT_OSS_TINY_TOL);
    }
}

/// The random-weight Phi-3 made by `scripts/make-phi3-fixture.py`:
/// fused Q/K/V and gate/up tensors split at load, partial NeoX RoPE with
/// LongRoPE's long factors and attention factor (the golden context of
/// 4096 is past the file's original 2048), Q scaled before attention.
#[test]
fn greedy_matches_llama_cpp_phi3_tiny() {
    let file = "phi3-tiny-q8_0.gguf";
    let path = minfer_testutil::repo_model(file);
    let model = Arc::new(Model::open(&path).expect("the repository's phi3 model loads"));
    for golden in [
        "greedy-phi3-tiny.avx512.json",
        "greedy-phi3-tiny.avx2.json",
        "greedy-phi3-tiny.avx.json",
    ] {
        check_loaded(&model, file, golden, &PHI3_TINY_TOL);
    }
}

#[test]
fn greedy_matches_llama_cpp_qwen2_5_1_5b() {
    for golden in ["greedy-qwen2.5-1.5b.json", "greedy-qwen2.5-1.5b.avx2.json"] {
        check_model(minfer_testutil::QWEN_1_5B, golden, &QWEN_1_5B_TOL);
    }
}

#[test]
fn greedy_matches_llama_cpp_gemma3() {
    for golden in ["greedy-gemma3.json", "greedy-gemma3.avx2.json"] {
        check_model(minfer_testutil::GEMMA3, golden, &GEMMA3_TOL);
    }
}
