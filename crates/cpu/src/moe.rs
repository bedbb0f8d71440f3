//! The routed FFN of a mixture-of-experts layer, as llama.cpp's
//! `build_moe_ffn` computes it over `mul_mat_id`: each row's router picks
//! `n_used` experts and their weights; the rows that chose one expert are
//! gathered and go through its matrices together, so a step streams each
//! chosen expert's weights once however many rows chose it; each row's
//! weighted expert outputs are then summed in the order they were chosen.
//!
//! A row's result depends only on that row: the products are the
//! batch-invariant [`matmul`], the activation and the sum are per row. So
//! a sequence gets the same bits alone or in any batch.

use minfer_graph::{Gating, GraphError, MoeAct, MoeParams, Result};
use minfer_kernels::pool::ThreadPool;
use minfer_kernels::{matmul, ActScratch, Kernels, MatRef, RowKernels};

/// The smallest weight sum llama.cpp divides by when it normalises the
/// chosen weights (the smallest normal f16).
const MIN_WEIGHT_SUM: f32 = 6.103_515_6e-5;

/// Buffers of the routed FFN, grown before a graph runs so that a step
/// does not allocate.
#[derive(Default)]
pub struct MoeScratch {
    /// Per row and choice: the expert and its weight.
    choice: Vec<(u32, f32)>,
    /// The choices (`row * n_used + k`) ordered by expert, then row.
    by_expert: Vec<u32>,
    /// Where each expert's choices start in `by_expert` (`n_expert + 1`).
    starts: Vec<u32>,
    /// One router row being ranked.
    rank: Vec<u32>,
    /// The rows gathered for one expert.
    x: Vec<f32>,
    up: Vec<f32>,
    gate: Vec<f32>,
    down: Vec<f32>,
    /// Per row and choice: the weighted output of that expert.
    y: Vec<f32>,
}

fn grow(v: &mut Vec<f32>, n: usize) {
    if v.len() < n {
        v.resize(n, 0.0);
    }
}

impl MoeScratch {
    /// Makes room for `n_rows` rows of `n_embd` values through a layer of
    /// shape `p`.
    pub fn reserve(&mut self, p: &MoeParams, n_embd: usize, n_rows: usize) {
        let choices = n_rows * p.n_used;
        if self.choice.len() < choices {
            self.choice.resize(choices, (0, 0.0));
            self.by_expert.resize(choices, 0);
        }
        if self.starts.len() < p.n_expert + 1 {
            self.starts.resize(p.n_expert + 1, 0);
        }
        if self.rank.len() < p.n_expert {
            self.rank.resize(p.n_expert, 0);
        }
        grow(&mut self.x, n_rows * n_embd);
        grow(&mut self.up, n_rows * p.n_ff);
        grow(&mut self.gate, n_rows * p.n_ff);
        grow(&mut self.down, n_rows * n_embd);
        grow(&mut self.y, choices * n_embd);
    }

    /// Whether [`MoeScratch::reserve`] made room for this size.
    fn fits(&self, p: &MoeParams, n_embd: usize, n_rows: usize) -> bool {
        let choices = n_rows * p.n_used;
        self.choice.len() >= choices
            && self.by_expert.len() >= choices
            && self.starts.len() > p.n_expert
            && self.rank.len() >= p.n_expert
            && self.x.len() >= n_rows * n_embd
            && self.up.len() >= n_rows * p.n_ff
            && self.gate.len() >= n_rows * p.n_ff
            && self.down.len() >= n_rows * n_embd
            && self.y.len() >= choices * n_embd
    }
}

/// The expert weights of one layer, each stacking `n_expert` matrices.
pub struct Experts<'a> {
    /// `n_ff` rows of `n_embd` per expert.
    pub up: MatRef<'a>,
    /// As `up`.
    pub gate: MatRef<'a>,
    /// `n_embd` rows of `n_ff` per expert.
    pub down: MatRef<'a>,
    /// Per-expert biases of the up, gate and down products (`n_ff`,
    /// `n_ff` and `n_embd` values per expert), where the model has them.
    pub biases: Option<[&'a [f32]; 3]>,
}

/// Adds expert `e`'s row of `bias` (`width` values per expert) to each
/// row of `y`.
fn add_bias(y: &mut [f32], bias: Option<&[f32]>, width: usize, e: usize) {
    if let Some(b) = bias {
        let b = &b[e * width..(e + 1) * width];
        for row in y.chunks_exact_mut(width) {
            for (v, &b) in row.iter_mut().zip(b) {
                *v += b;
            }
        }
    }
}

/// ggml's `swiglu_oai` of one row, into `gate`.
fn swiglu_oai(gate: &mut [f32], up: &[f32], alpha: f32, limit: f32) {
    for (g, &u) in gate.iter_mut().zip(up) {
        let x = g.min(limit);
        let y = u.clamp(-limit, limit);
        *g = x / (1.0 + (alpha * -x).exp()) * (y + 1.0);
    }
}

/// Expert `e`'s matrix out of a stack of `n` equal ones. Either layout
/// keeps them apart: the store repacks a stack only when each matrix fills
/// whole interleaved groups.
fn expert<'a>(w: &MatRef<'a>, n: usize, e: usize) -> MatRef<'a> {
    let bytes = w.data.len() / n;
    MatRef {
        rows: w.rows / n,
        data: &w.data[e * bytes..(e + 1) * bytes],
        ..*w
    }
}

/// What a routed FFN reads besides its weights.
pub struct MoeInputs<'a> {
    /// The rows, `n_embd` values each.
    pub x: &'a [f32],
    /// Per row, the router's `n_expert` probabilities or logits.
    pub router: &'a [f32],
}

/// The kernels and buffers a routed FFN runs with.
pub struct MoeRun<'a> {
    /// Matrix products.
    pub kernels: &'a Kernels,
    /// Row routines (softmax, SwiGLU).
    pub rows: RowKernels,
    /// The products' threads.
    pub pool: &'a ThreadPool,
    /// The products' quantized activations.
    pub act: &'a mut ActScratch,
    /// This op's buffers.
    pub scratch: &'a mut MoeScratch,
}

fn bad(msg: String) -> GraphError {
    GraphError::BadInput {
        what: "moe_ffn",
        msg,
    }
}

/// Runs the routed FFN `p` over the rows of `input` into `out` (as many
/// rows of `n_embd` values).
///
/// # Errors
/// [`GraphError::BadInput`] for inconsistent lengths or a scratch not
/// reserved for this size; kernel errors of the products.
pub fn moe_ffn(
    run: MoeRun,
    p: &MoeParams,
    w: &Experts,
    input: &MoeInputs,
    out: &mut [f32],
) -> Result<()> {
    let n_embd = w.up.cols;
    let n_rows = input.x.len().checked_div(n_embd).unwrap_or(0);
    let s = run.scratch;
    if p.n_used > MoeParams::MAX_USED
        || input.x.len() != n_rows * n_embd
        || out.len() != input.x.len()
        || input.router.len() != n_rows * p.n_expert
        || !s.fits(p, n_embd, n_rows)
        || w.up.rows != p.n_ff * p.n_expert
        || (w.gate.rows, w.gate.cols) != (w.up.rows, n_embd)
        || (w.down.rows, w.down.cols) != (n_embd * p.n_expert, p.n_ff)
        || w.biases.is_some_and(|[u, g, d]| {
            u.len() != p.n_ff * p.n_expert
                || g.len() != p.n_ff * p.n_expert
                || d.len() != n_embd * p.n_expert
        })
    {
        return Err(bad(format!(
            "{} values of rows of {n_embd} with a router of {} values, {} outputs",
            input.x.len(),
            input.router.len(),
            out.len()
        )));
    }
    for t in 0..n_rows {
        let router = &input.router[t * p.n_expert..(t + 1) * p.n_expert];
        let choice = &mut s.choice[t * p.n_used..(t + 1) * p.n_used];
        route(p, run.rows, router, &mut s.rank, choice);
    }
    order_by_expert(p, n_rows, s);
    for e in 0..p.n_expert {
        let (a, b) = (s.starts[e] as usize, s.starts[e + 1] as usize);
        if a == b {
            continue;
        }
        let m = b - a;
        for (j, &c) in s.by_expert[a..b].iter().enumerate() {
            let t = c as usize / p.n_used;
            s.x[j * n_embd..(j + 1) * n_embd]
                .copy_from_slice(&input.x[t * n_embd..(t + 1) * n_embd]);
        }
        let x = &s.x[..m * n_embd];
        let (up, gate) = (&mut s.up[..m * p.n_ff], &mut s.gate[..m * p.n_ff]);
        let mm = |wm: &MatRef, x: &[f32], out: &mut [f32], act: &mut ActScratch| {
            matmul(
                run.kernels,
                run.pool,
                &expert(wm, p.n_expert, e),
                x,
                m,
                out,
                act,
            )
        };
        let [bu, bg, bd] = w.biases.map_or([None; 3], |b| b.map(Some));
        mm(&w.up, x, up, run.act)?;
        add_bias(up, bu, p.n_ff, e);
        mm(&w.gate, x, gate, run.act)?;
        add_bias(gate, bg, p.n_ff, e);
        for (g, u) in gate.chunks_exact_mut(p.n_ff).zip(up.chunks_exact(p.n_ff)) {
            match p.act {
                MoeAct::SwiGlu => run.rows.swiglu(g, u),
                MoeAct::SwiGluOai { alpha, limit } => swiglu_oai(g, u, alpha, limit),
            }
        }
        let down = &mut s.down[..m * n_embd];
        mm(&w.down, gate, down, run.act)?;
        add_bias(down, bd, n_embd, e);
        for (j, &c) in s.by_expert[a..b].iter().enumerate() {
            let c = c as usize;
            let wt = s.choice[c].1;
            let y = &mut s.y[c * n_embd..(c + 1) * n_embd];
            for (y, &d) in y.iter_mut().zip(&down[j * n_embd..(j + 1) * n_embd]) {
                *y = d * wt;
            }
        }
    }
    // Each row: its first choice's output, then the others added in order.
    for (t, o) in out.chunks_exact_mut(n_embd).enumerate() {
        let ys = &s.y[t * p.n_used * n_embd..(t + 1) * p.n_used * n_embd];
        o.copy_from_slice(&ys[..n_embd]);
        for y in ys.chunks_exact(n_embd).skip(1) {
            for (o, &y) in o.iter_mut().zip(y) {
                *o += y;
            }
        }
    }
    Ok(())
}

/// One row's choices: the `n_used` largest router values (ties to the lower
/// expert), best first, with their weights.
fn route(
    p: &MoeParams,
    rows: RowKernels,
    router: &[f32],
    rank: &mut [u32],
    choice: &mut [(u32, f32)],
) {
    let rank = &mut rank[..p.n_expert];
    for (i, r) in rank.iter_mut().enumerate() {
        *r = i as u32;
    }
    // Descending by value; NaN sorts last so that it is never chosen over
    // a number. Ties go to the lower expert, so the order is total and the
    // in-place sort (which does not allocate) gives one answer.
    rank.sort_unstable_by(|&a, &b| {
        let (x, y) = (router[a as usize], router[b as usize]);
        y.partial_cmp(&x)
            .unwrap_or_else(|| x.is_nan().cmp(&y.is_nan()))
            .then(a.cmp(&b))
    });
    for (c, &e) in choice.iter_mut().zip(rank.iter()) {
        *c = (e, router[e as usize]);
    }
    if p.gating == Gating::SoftmaxChosen {
        let mut w = [0f32; MoeParams::MAX_USED];
        let w = &mut w[..choice.len()];
        for (w, c) in w.iter_mut().zip(choice.iter()) {
            *w = c.1;
        }
        rows.softmax(w);
        for (c, &w) in choice.iter_mut().zip(w.iter()) {
            c.1 = w;
        }
    }
    if p.norm_weights {
        // As ggml's row sum: accumulated in f64, rounded once.
        let sum = choice.iter().map(|c| f64::from(c.1)).sum::<f64>() as f32;
        let sum = sum.max(MIN_WEIGHT_SUM);
        for c in choice.iter_mut() {
            c.1 /= sum;
        }
    }
    if p.weights_scale != 0.0 && p.weights_scale != 1.0 {
        for c in choice.iter_mut() {
            c.1 *= p.weights_scale;
        }
    }
}

/// Fills `by_expert` with every choice grouped by expert, rows ascending
/// within a group, and `starts` with the group bounds (a counting sort).
fn order_by_expert(p: &MoeParams, n_rows: usize, s: &mut MoeScratch) {
    let starts = &mut s.starts[..p.n_expert + 1];
    starts.fill(0);
    let n = n_rows * p.n_used;
    for &(e, _) in &s.choice[..n] {
        starts[e as usize + 1] += 1;
    }
    for e in 0..p.n_expert {
        starts[e + 1] += starts[e];
    }
    // `rank` is free again: it serves as the fill cursor of each group.
    let next = &mut s.rank[..p.n_expert];
    next.copy_from_slice(&starts[..p.n_expert]);
    for (c, &(e, _)) in s.choice[..n].iter().enumerate() {
        let at = &mut next[e as usize];
        s.by_expert[*at as usize] = c as u32;
        *at += 1;
    }
}
