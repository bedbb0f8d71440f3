//! The routed FFN of a mixture-of-experts layer, as llama.cpp's
//! `build_moe_ffn` computes it over `mul_mat_id`: each row's router picks
//! `n_used` experts and their weights; the rows that chose one expert are
//! gathered and go through its matrices together, so a step streams each
//! chosen expert's weights once however many rows chose it; each row's
//! weighted expert outputs are then summed in the order they were chosen.
//!
//! Experts are taken in waves of at most [`WAVE_ROWS`] gathered rows (at
//! least one expert each): a wave's up and gate products run as one job
//! on the pool, then its down products as another. A decode step's few
//! chosen experts are then two waits a layer instead of three per expert;
//! a prefill's experts, with many rows each, go one or two at a time.
//!
//! A row's result depends only on that row: the products are the
//! batch-invariant [`matmul_many`] (each output the bits [`matmul`] gives
//! alone), the activation and the sum are per row. So a sequence gets the
//! same bits alone or in any batch, and in any wave.
//!
//! [`matmul`]: minfer_kernels::matmul

use std::ops::Range;

use minfer_graph::{Gating, GraphError, MoeAct, MoeParams, Result};
use minfer_kernels::pool::ThreadPool;
use minfer_kernels::{matmul_many, ActScratch, Kernels, MatRef, Product, RowKernels};

/// The smallest weight sum llama.cpp divides by when it normalises the
/// chosen weights (the smallest normal f16).
const MIN_WEIGHT_SUM: f32 = 6.103_515_6e-5;

/// Gathered rows per wave of experts (see the module notes): enough for
/// every choice of a decode step of many sequences, few enough that the
/// wave's buffers stay small.
const WAVE_ROWS: usize = 64;

/// The most activation values a wave's products quantize at once (its up
/// and gate products take every gathered row each): what the activation
/// scratch needs for `n_rows` rows of `n_embd` through a layer of shape
/// `p`.
pub fn wave_values(p: &MoeParams, n_embd: usize, n_rows: usize) -> usize {
    wave_cap(p, n_rows) * (2 * n_embd).max(p.n_ff)
}

/// The rows a wave may gather: [`WAVE_ROWS`], or one expert's rows (at
/// most one per row) when that is more, and never more than the choices.
fn wave_cap(p: &MoeParams, n_rows: usize) -> usize {
    n_rows.max(WAVE_ROWS).min(n_rows * p.n_used)
}

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
    /// The rows gathered for one wave of experts, expert by expert.
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
        let cap = wave_cap(p, n_rows);
        grow(&mut self.x, cap * n_embd);
        grow(&mut self.up, cap * p.n_ff);
        grow(&mut self.gate, cap * p.n_ff);
        grow(&mut self.down, cap * n_embd);
        grow(&mut self.y, choices * n_embd);
    }

    /// Whether [`MoeScratch::reserve`] made room for this size.
    fn fits(&self, p: &MoeParams, n_embd: usize, n_rows: usize) -> bool {
        let (choices, cap) = (n_rows * p.n_used, wave_cap(p, n_rows));
        self.choice.len() >= choices
            && self.by_expert.len() >= choices
            && self.starts.len() > p.n_expert
            && self.rank.len() >= p.n_expert
            && self.x.len() >= cap * n_embd
            && self.up.len() >= cap * p.n_ff
            && self.gate.len() >= cap * p.n_ff
            && self.down.len() >= cap * n_embd
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
    /// The products' quantized activations: a wave's side by side (see
    /// [`wave_values`]).
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
    let cap = wave_cap(p, n_rows);
    let mut e0 = 0;
    while e0 < p.n_expert {
        // As many experts as fit `cap` gathered rows, at least one.
        let first = s.starts[e0] as usize;
        let mut e1 = e0 + 1;
        while e1 < p.n_expert && s.starts[e1 + 1] as usize - first <= cap {
            e1 += 1;
        }
        let ex = Exec {
            kernels: run.kernels,
            pool: run.pool,
            rows: run.rows,
            act: &mut *run.act,
        };
        wave(ex, s, p, w, input.x, e0..e1)?;
        e0 = e1;
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

/// The kernels a wave runs with.
struct Exec<'a> {
    kernels: &'a Kernels,
    pool: &'a ThreadPool,
    rows: RowKernels,
    act: &'a mut ActScratch,
}

/// The experts of `experts` (a wave: their choices fit the scratch's
/// gathered rows) through their up and gate products, the activation and
/// their down products; each choice's weighted output into `s.y`.
fn wave<'a>(
    ex: Exec,
    s: &'a mut MoeScratch,
    p: &MoeParams,
    w: &Experts<'a>,
    x_in: &[f32],
    experts: Range<usize>,
) -> Result<()> {
    let (n_embd, n_ff) = (w.up.cols, p.n_ff);
    let first = s.starts[experts.start] as usize;
    let m_all = s.starts[experts.end] as usize - first;
    let MoeScratch {
        choice,
        by_expert,
        starts,
        x,
        up,
        gate,
        down,
        y,
        ..
    } = s;
    let by_expert = &by_expert[first..first + m_all];
    for (j, &c) in by_expert.iter().enumerate() {
        let t = c as usize / p.n_used;
        x[j * n_embd..(j + 1) * n_embd].copy_from_slice(&x_in[t * n_embd..(t + 1) * n_embd]);
    }
    // Expert `e`'s rows within the wave's gathered ones.
    let span = |e: usize| (starts[e] as usize - first)..(starts[e + 1] as usize - first);
    let chosen = || experts.clone().filter(|&e| !span(e).is_empty());
    let x = &x[..m_all * n_embd];
    let (mut up_rest, mut gate_rest) = (&mut up[..m_all * n_ff], &mut gate[..m_all * n_ff]);
    let ups = chosen().flat_map(|e| {
        let r = span(e);
        let (u, rest) = std::mem::take(&mut up_rest).split_at_mut(r.len() * n_ff);
        up_rest = rest;
        let (g, rest) = std::mem::take(&mut gate_rest).split_at_mut(r.len() * n_ff);
        gate_rest = rest;
        let xs = &x[r.start * n_embd..r.end * n_embd];
        let one = |m: MatRef<'a>, out| Product {
            w: expert(&m, p.n_expert, e),
            x: xs,
            n_tok: r.len(),
            out,
        };
        [one(w.up, u), one(w.gate, g)]
    });
    matmul_many(ex.kernels, ex.pool, ups, ex.act).map_err(GraphError::from)?;
    let [bu, bg, bd] = w.biases.map_or([None; 3], |b| b.map(Some));
    for e in chosen() {
        let r = span(e);
        let (u, g) = (
            &mut up[r.start * n_ff..r.end * n_ff],
            &mut gate[r.start * n_ff..r.end * n_ff],
        );
        add_bias(u, bu, n_ff, e);
        add_bias(g, bg, n_ff, e);
        for (g, u) in g.chunks_exact_mut(n_ff).zip(u.chunks_exact(n_ff)) {
            match p.act {
                MoeAct::SwiGlu => ex.rows.swiglu(g, u),
                MoeAct::SwiGluOai { alpha, limit } => swiglu_oai(g, u, alpha, limit),
            }
        }
    }
    let gate = &gate[..m_all * n_ff];
    let mut down_rest = &mut down[..m_all * n_embd];
    let downs = chosen().map(|e| {
        let r = span(e);
        let (d, rest) = std::mem::take(&mut down_rest).split_at_mut(r.len() * n_embd);
        down_rest = rest;
        Product {
            w: expert(&w.down, p.n_expert, e),
            x: &gate[r.start * n_ff..r.end * n_ff],
            n_tok: r.len(),
            out: d,
        }
    });
    matmul_many(ex.kernels, ex.pool, downs, ex.act).map_err(GraphError::from)?;
    for e in chosen() {
        let r = span(e);
        let d = &mut down[r.start * n_embd..r.end * n_embd];
        add_bias(d, bd, n_embd, e);
        for (j, d) in r.zip(d.chunks_exact(n_embd)) {
            let c = by_expert[j] as usize;
            let wt = choice[c].1;
            for (y, &d) in y[c * n_embd..(c + 1) * n_embd].iter_mut().zip(d) {
                *y = d * wt;
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
