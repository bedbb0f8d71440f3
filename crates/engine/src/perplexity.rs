//! Perplexity the way llama.cpp's `llama-perplexity` measures it, so the
//! numbers can be compared with it directly.
//!
//! The text is cut into consecutive chunks of `n_ctx` tokens (a partial
//! tail is dropped). Each chunk is evaluated from an empty KV cache, with
//! its first token replaced by BOS when the model adds one. Only the
//! second half of each chunk is scored: the logits at positions
//! `n_ctx/2 .. n_ctx-1` predict the tokens after them, so every scored
//! prediction has at least `n_ctx/2` tokens of context. PPL is
//! `exp(mean NLL)` over all scored predictions.

use crate::engine::Engine;
use crate::error::{EngineError, Result};

/// The outcome of [`perplexity`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PplResult {
    /// `exp` of the mean negative log-likelihood.
    pub ppl: f64,
    /// Standard error of `ppl`, as llama-perplexity reports it after `+/-`.
    pub stderr: f64,
    /// Chunks evaluated.
    pub chunks: usize,
    /// Predictions scored (`chunks × (n_ctx - 1 - n_ctx/2)`).
    pub scored: usize,
}

/// `log softmax(logits)[tok]` as llama-perplexity computes it: the
/// exponentials in f32, their sum in f64.
fn log_softmax(logits: &[f32], tok: usize) -> f64 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = logits.iter().map(|&l| f64::from((l - max).exp())).sum();
    f64::from(logits[tok] - max) - sum.ln()
}

/// Measures the perplexity of `tokens` in chunks of `n_ctx` tokens (see
/// the module documentation). `bos` replaces each chunk's first token
/// when set (pass the BOS id when the model adds BOS, `None` otherwise).
/// `progress(chunk, n_chunks, running_ppl)` is called after each chunk,
/// `chunk` counting from 0.
///
/// The engine's cache is emptied before each chunk and left holding the
/// last chunk.
///
/// # Errors
/// [`EngineError::InvalidArgument`] when `n_ctx` is below 4 or above the
/// engine's context, or when `tokens` has fewer than `2 * n_ctx` tokens
/// (llama-perplexity's rule); evaluation errors as [`Engine::eval`].
pub fn perplexity(
    engine: &mut Engine,
    tokens: &[u32],
    n_ctx: usize,
    bos: Option<u32>,
    mut progress: impl FnMut(usize, usize, f64),
) -> Result<PplResult> {
    if n_ctx < 4 || n_ctx > engine.n_ctx() as usize {
        return Err(EngineError::InvalidArgument(format!(
            "perplexity chunks of {n_ctx} tokens: need 4 ≤ n_ctx ≤ {} (the engine's context)",
            engine.n_ctx()
        )));
    }
    if tokens.len() < 2 * n_ctx {
        return Err(EngineError::InvalidArgument(format!(
            "perplexity needs at least 2 × {n_ctx} tokens, got {}",
            tokens.len()
        )));
    }
    let n_vocab = engine.n_vocab();
    let n_chunks = tokens.len() / n_ctx;
    let first = n_ctx / 2;
    let mut chunk_buf = Vec::with_capacity(n_ctx);
    let (mut nll, mut nll2, mut count) = (0f64, 0f64, 0usize);
    for c in 0..n_chunks {
        let chunk = &tokens[c * n_ctx..(c + 1) * n_ctx];
        chunk_buf.clear();
        chunk_buf.extend_from_slice(chunk);
        if let Some(b) = bos {
            chunk_buf[0] = b;
        }
        engine.reset();
        // Rows `first..n_ctx`: row `i` predicts token `first + i + 1`; the
        // last row predicts past the chunk and is not scored.
        let logits = engine.eval_outputs(&chunk_buf, first)?;
        for (i, row) in logits
            .chunks_exact(n_vocab)
            .take(n_ctx - 1 - first)
            .enumerate()
        {
            let next = chunk[first + i + 1] as usize;
            let v = -log_softmax(row, next);
            nll += v;
            nll2 += v * v;
        }
        count += n_ctx - 1 - first;
        progress(c, n_chunks, (nll / count as f64).exp());
    }
    let mean = nll / count as f64;
    let ppl = mean.exp();
    // llama-perplexity: the variance of the per-token NLL, its standard
    // error, carried to PPL to first order (d exp(x) = exp(x) dx).
    let var = nll2 / count as f64 - mean * mean;
    let stderr = if var > 0.0 && count > 1 {
        (var / (count - 1) as f64).sqrt() * ppl
    } else {
        0.0
    };
    Ok(PplResult {
        ppl,
        stderr,
        chunks: n_chunks,
        scored: count,
    })
}
