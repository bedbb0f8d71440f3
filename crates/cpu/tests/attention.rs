//! Attention and the KV regions on the CPU against naive references written
//! here: grouped-query attention, batches of sequences, shared prefixes,
//! thread counts, cache formats, and a decode step that allocates nothing.
//! Comparisons are bit-exact where the reference performs the same
//! operations in the same order; tolerances are stated otherwise.

mod support;

use support::{assert_close, randn, rope_params};

use minfer_cpu::{attention, kv_store, rms_norm, rope_inplace, softmax_inplace, AttnScratch};
use minfer_graph::kv::{BatchPlan, KvCells, KvRegion};
use minfer_graph::{AttnParams, GraphError, KvFormat, RopeStyle};
use minfer_kernels::pool::ThreadPool;
use minfer_kernels::RowKernels;
use minfer_testutil::counting::{arm_thread, count_armed, Counting};
use rand::rngs::StdRng;
use rand::SeedableRng;

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn kv_store_checks_every_cell_first() {
    let mut r = KvRegion::new(KvFormat::F32, 8, 4).unwrap();
    let x: Vec<f32> = (0..16).map(|i| i as f32).collect();
    for bad in [[1, 4], [-1, 0]] {
        let e = kv_store(&mut r, &x, &bad);
        assert!(matches!(e, Err(GraphError::CellOutOfRange { .. })), "{e:?}");
        for c in 0..4 {
            assert!(r.row_f32(c).unwrap().iter().all(|&v| v == 0.0));
        }
    }
    assert!(kv_store(&mut r, &x[..15], &[0, 1]).is_err());
    kv_store(&mut r, &x, &[3, 1]).unwrap();
    assert_eq!(r.row_f32(3).unwrap(), &x[..8]);
    assert_eq!(r.row_f32(1).unwrap(), &x[8..]);
}

/// Shapes of one attention test.
#[derive(Clone, Copy)]
struct Cfg {
    n_head: usize,
    n_head_kv: usize,
    head_dim: usize,
    n_ctx: usize,
}

/// Four query heads over two KV heads of 48 values, in `n_ctx` cells: a
/// head that straddles q8_0 blocks of 32.
const fn hd48(n_ctx: usize) -> Cfg {
    Cfg {
        n_head: 4,
        n_head_kv: 2,
        head_dim: 48,
        n_ctx,
    }
}

impl Cfg {
    fn params(&self) -> AttnParams {
        AttnParams::new(0, self.n_head, self.n_head_kv, self.head_dim)
    }
}

/// The q, k and v rows of a token: a pure function of its position and a
/// salt (which the tests pick per sequence), so the same token gets the
/// same data in every run, whichever sequence id it runs under.
fn token_rows(cfg: &Cfg, pos: i32, salt: u64) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut rng = StdRng::seed_from_u64(salt * 1_000_003 + pos as u64);
    let q = randn(&mut rng, cfg.n_head * cfg.head_dim);
    let k = randn(&mut rng, cfg.n_head_kv * cfg.head_dim);
    let v = randn(&mut rng, cfg.n_head_kv * cfg.head_dim);
    (q, k, v)
}

/// A context: cell store, one layer's K and V, and a thread pool.
struct Ctx {
    cfg: Cfg,
    cells: KvCells,
    k: KvRegion,
    v: KvRegion,
    pool: ThreadPool,
    scratch: AttnScratch,
    plan: BatchPlan,
}

impl Ctx {
    fn new(cfg: Cfg, format: KvFormat, threads: usize) -> Self {
        let row = cfg.n_head_kv * cfg.head_dim;
        Ctx {
            cfg,
            cells: KvCells::new(cfg.n_ctx),
            k: KvRegion::new(format, row, cfg.n_ctx).unwrap(),
            v: KvRegion::new(format, row, cfg.n_ctx).unwrap(),
            pool: ThreadPool::new(threads),
            scratch: AttnScratch::new(threads, cfg.n_ctx, cfg.head_dim),
            plan: BatchPlan::default(),
        }
    }

    /// Lets the scratch hold the scores of `group` query heads, so that the
    /// heads sharing a KV head are computed together (as the executor
    /// sizes it for a model).
    fn grouped(self, group: usize) -> Self {
        self.grouped_on(group, RowKernels::detect())
    }

    /// As [`Ctx::grouped`], on the row-kernel path `rk`.
    fn grouped_on(mut self, group: usize, rk: RowKernels) -> Self {
        let threads = self.pool.n_threads();
        self.scratch = AttnScratch::new(threads, self.cfg.n_ctx, self.cfg.head_dim)
            .with_group(group)
            .with_row_kernels(rk);
        self
    }

    /// One forward of a batch of `(seq, pos)` tokens through the layer:
    /// plan cells, store K/V, attend. Returns the output rows, one per token.
    fn step(&mut self, batch: &[(u32, i32)], salt: impl Fn(u32) -> u64) -> Vec<f32> {
        let cfg = self.cfg;
        self.cells.plan_batch(batch, &mut self.plan).unwrap();
        let (mut q, mut k, mut v) = (Vec::new(), Vec::new(), Vec::new());
        for &(s, p) in batch {
            let (qr, kr, vr) = token_rows(&cfg, p, salt(s));
            q.extend(qr);
            k.extend(kr);
            v.extend(vr);
        }
        kv_store(&mut self.k, &k, &self.plan.kv_cells).unwrap();
        kv_store(&mut self.v, &v, &self.plan.kv_cells).unwrap();
        let mut out = vec![f32::NAN; q.len()];
        attention(
            &q,
            &self.k,
            &self.v,
            &self.plan.window_offsets,
            &self.plan.window_cells,
            &cfg.params(),
            &self.pool,
            &mut self.scratch,
            &mut out,
        )
        .unwrap();
        out
    }

    /// The naive f64 reference for the last step's queries, reading K/V
    /// back from the regions (so it sees what a quantized region holds).
    fn reference(&self, batch: &[(u32, i32)], salt: impl Fn(u32) -> u64) -> Vec<f64> {
        let scale = self.cfg.params().scale as f64;
        let mut out = Vec::new();
        for (qh, ks, vs) in self.heads(batch, salt) {
            let scores: Vec<f64> = ks
                .iter()
                .map(|k| {
                    scale
                        * qh.iter()
                            .zip(k)
                            .map(|(&a, &b)| a as f64 * b as f64)
                            .sum::<f64>()
                })
                .collect();
            let max = scores.iter().cloned().fold(f64::MIN, f64::max);
            let e: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
            let sum: f64 = e.iter().sum();
            let mut o = vec![0.0f64; qh.len()];
            for (v, ej) in vs.iter().zip(&e) {
                for (oi, &x) in o.iter_mut().zip(v) {
                    *oi += ej / sum * x as f64;
                }
            }
            out.extend(o);
        }
        out
    }

    /// For every query of the last step and every head, in output order:
    /// the query head and the K and V head rows of its window, read back
    /// from the regions.
    #[allow(clippy::type_complexity)]
    fn heads(
        &self,
        batch: &[(u32, i32)],
        salt: impl Fn(u32) -> u64,
    ) -> Vec<(Vec<f32>, Vec<Vec<f32>>, Vec<Vec<f32>>)> {
        let cfg = self.cfg;
        let hd = cfg.head_dim;
        let mut row = vec![0.0f32; cfg.n_head_kv * hd];
        let mut read = |region: &KvRegion, c: i32, kvh: usize| {
            region.read_row(c as usize, &mut row).unwrap();
            row[kvh * hd..(kvh + 1) * hd].to_vec()
        };
        let mut heads = Vec::new();
        for (t, &(s, p)) in batch.iter().enumerate() {
            let (q, _, _) = token_rows(&cfg, p, salt(s));
            let w = &self.plan.window_cells
                [self.plan.window_offsets[t] as usize..self.plan.window_offsets[t + 1] as usize];
            for h in 0..cfg.n_head {
                let kvh = h / (cfg.n_head / cfg.n_head_kv);
                let ks = w.iter().map(|&c| read(&self.k, c, kvh)).collect();
                let vs = w.iter().map(|&c| read(&self.v, c, kvh)).collect();
                heads.push((q[h * hd..(h + 1) * hd].to_vec(), ks, vs));
            }
        }
        heads
    }
}

const GQA: Cfg = Cfg {
    n_head: 14,
    n_head_kv: 2,
    head_dim: 64,
    n_ctx: 40,
};

#[test]
fn attention_gqa_matches_naive_reference() {
    let mut ctx = Ctx::new(GQA, KvFormat::F32, 2);
    let prompt: Vec<(u32, i32)> = (0..11).map(|p| (0, p)).collect();
    let out = ctx.step(&prompt, |_| 1);
    assert_close(&out, &ctx.reference(&prompt, |_| 1), 1e-5, "prefill");
    for p in 11..14 {
        let out = ctx.step(&[(0, p)], |_| 1);
        assert_close(&out, &ctx.reference(&[(0, p)], |_| 1), 1e-5, "decode");
    }
    // The first query sees only itself: its output is its own V head.
    let mut c = Ctx::new(GQA, KvFormat::F32, 1);
    let out = c.step(&[(0, 0)], |_| 1);
    let (_, _, v) = token_rows(&GQA, 0, 1);
    for h in 0..14 {
        let kvh = h / 7;
        assert_eq!(&out[h * 64..(h + 1) * 64], &v[kvh * 64..(kvh + 1) * 64]);
    }
}

#[test]
fn batch_of_sequences_equals_each_alone() {
    let cfg = Cfg {
        n_head: 6,
        n_head_kv: 3,
        head_dim: 32,
        n_ctx: 48,
    };
    // Each sequence has its own data (salt), prompt length and decode steps.
    let salt = |s: u32| 100 + s as u64;
    let lens = [5, 3, 7];
    let mut together = Ctx::new(cfg, KvFormat::F32, 3);
    // Prefill of all three interleaved in one batch.
    let mut batch = Vec::new();
    for p in 0..7 {
        for (s, &len) in lens.iter().enumerate() {
            if p < len {
                batch.push((s as u32, p));
            }
        }
    }
    let out = together.step(&batch, salt);
    let mut decode = [Vec::new(), Vec::new(), Vec::new()];
    for step in 0..3 {
        let b: Vec<(u32, i32)> = (0..3).map(|s| (s as u32, lens[s] + step)).collect();
        decode[step as usize] = together.step(&b, salt);
    }

    let row = cfg.n_head * cfg.head_dim;
    for (s, &len) in lens.iter().enumerate() {
        let s32 = s as u32;
        let mut alone = Ctx::new(cfg, KvFormat::F32, 2);
        let prompt: Vec<(u32, i32)> = (0..len).map(|p| (s32, p)).collect();
        let a = alone.step(&prompt, salt);
        for p in 0..len {
            let t = batch.iter().position(|&x| x == (s32, p)).unwrap();
            let (p_us, t_us) = (p as usize, t);
            assert_eq!(
                &a[p_us * row..(p_us + 1) * row],
                &out[t_us * row..(t_us + 1) * row],
                "seq {s} pos {p} in the shared prefill"
            );
        }
        for (step, d) in decode.iter().enumerate() {
            let a = alone.step(&[(s32, len + step as i32)], salt);
            assert_eq!(&a[..], &d[s * row..(s + 1) * row], "seq {s} decode {step}");
        }
    }
}

#[test]
fn shared_prefix_reads_the_same_kv() {
    let cfg = hd48(32);
    let mut ctx = Ctx::new(cfg, KvFormat::F32, 2);
    let prompt: Vec<(u32, i32)> = (0..6).map(|p| (0, p)).collect();
    ctx.step(&prompt, |_| 7);
    ctx.cells.share(0, 1, 6).unwrap();
    assert_eq!(ctx.cells.used(), 6);
    // Both sequences then see the same token at position 6 (same salt).
    let out = ctx.step(&[(0, 6), (1, 6)], |_| 7);
    let w = &ctx.plan.window_cells;
    let o = &ctx.plan.window_offsets;
    assert_eq!(
        w[o[0] as usize..o[0] as usize + 6],
        w[o[1] as usize..o[1] as usize + 6]
    );
    assert_ne!(ctx.plan.kv_cells[0], ctx.plan.kv_cells[1]);
    let row = cfg.n_head * cfg.head_dim;
    assert_eq!(out[..row], out[row..]);
    // And that equals one sequence of seven tokens alone.
    let mut alone = Ctx::new(cfg, KvFormat::F32, 1);
    let seven: Vec<(u32, i32)> = (0..7).map(|p| (0, p)).collect();
    let a = alone.step(&seven, |_| 7);
    assert_eq!(a[6 * row..], out[..row]);
    // A diverging token reads the same prefix but gives a different output.
    let out = ctx.step(&[(0, 7), (1, 7)], |s| 7 + s as u64);
    assert_ne!(out[..row], out[row..]);
}

#[test]
fn thread_counts_give_identical_outputs() {
    let prompt: Vec<(u32, i32)> = (0..9).map(|p| (p as u32 % 2, p / 2)).collect();
    let mut outs = Vec::new();
    for threads in [1, 2, 3] {
        let mut ctx = Ctx::new(GQA, KvFormat::F32, threads);
        let mut o = ctx.step(&prompt, |s| 3 + s as u64);
        o.extend(ctx.step(&[(0, 5), (1, 4)], |s| 3 + s as u64));
        outs.push(o);
    }
    assert_eq!(outs[0], outs[1]);
    assert_eq!(outs[0], outs[2]);
}

#[test]
fn f16_and_q8_0_regions_are_close_to_f32() {
    let prompt: Vec<(u32, i32)> = (0..12).map(|p| (0, p)).collect();
    let mut f32_ctx = Ctx::new(GQA, KvFormat::F32, 2);
    let want = f32_ctx.step(&prompt, |_| 9);
    // Errors: f16 rounds K/V by <= 2^-11 relative; q8_0 by <= amax/254 per
    // block (~0.008 for values in [-2, 2]). Outputs are convex combinations
    // of V rows, so they move by about as much.
    for (format, tol) in [(KvFormat::F16, 2e-3), (KvFormat::Q8_0, 2e-2)] {
        let mut ctx = Ctx::new(GQA, format, 2);
        let got = ctx.step(&prompt, |_| 9);
        let want64: Vec<f64> = want.iter().map(|&v| v as f64).collect();
        assert_close(&got, &want64, tol, "quantized vs f32");
        // Exact math over what the region holds.
        assert_close(&got, &ctx.reference(&prompt, |_| 9), 1e-5, "vs reference");
        let got = ctx.step(&[(0, 12)], |_| 9);
        assert_close(&got, &ctx.reference(&[(0, 12)], |_| 9), 1e-5, "decode");
    }
    // Heads that straddle q8_0 blocks (head_dim 48) decode correctly.
    let cfg = hd48(16);
    let mut ctx = Ctx::new(cfg, KvFormat::Q8_0, 3);
    let got = ctx.step(&prompt[..5], |_| 4);
    assert_close(&got, &ctx.reference(&prompt[..5], |_| 4), 1e-5, "q8_0 hd48");
}

/// The f32 dot product attention is specified with: eight partial sums,
/// lane `l` over elements `l, l + 8, …` (one fused multiply-add each),
/// combined in this fixed order.
fn dot8(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        acc[i % 8] = x.mul_add(*y, acc[i % 8]);
    }
    ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]))
}

impl Ctx {
    /// The last step's output computed the plain way, in f32 with the same
    /// operations in the same order as the kernel is specified to: every
    /// row read back whole as f32, `scale * dot8`, attention's softmax (its
    /// own exponential), then `out += p_j * v_j` over the window in order,
    /// each step one fused multiply-add.
    fn exact_reference(&self, batch: &[(u32, i32)], salt: impl Fn(u32) -> u64) -> Vec<f32> {
        let scale = self.cfg.params().scale;
        let mut out = Vec::new();
        for (qh, ks, vs) in self.heads(batch, salt) {
            let mut scores: Vec<f32> = ks.iter().map(|k| scale * dot8(&qh, k)).collect();
            RowKernels::SCALAR.attn_softmax(&mut scores);
            let mut o = vec![0.0f32; qh.len()];
            for (v, &pj) in vs.iter().zip(&scores) {
                for (oi, &x) in o.iter_mut().zip(v) {
                    *oi = pj.mul_add(x, *oi);
                }
            }
            out.extend(o);
        }
        out
    }
}

#[test]
fn attention_is_bit_exact_against_the_plain_f32_order() {
    let odd = Cfg {
        n_head: 6,
        n_head_kv: 2,
        head_dim: 20,
        n_ctx: 24,
    };
    let hd48 = hd48(24);
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for (cfg, formats) in [
        (GQA, &[KvFormat::F32, KvFormat::F16, KvFormat::Q8_0][..]),
        (hd48, &[KvFormat::F32, KvFormat::F16, KvFormat::Q8_0][..]),
        // Rows of 40 values cannot be Q8_0.
        (odd, &[KvFormat::F32, KvFormat::F16][..]),
    ] {
        for &format in formats {
            for (threads, group) in [(1, 1), (3, 1), (1, 7), (2, 2), (3, 7)] {
                let mut ctx = Ctx::new(cfg, format, threads).grouped(group);
                let mut check = |batch: &[(u32, i32)], what: &str| {
                    let got = ctx.step(batch, |s| 11 + s as u64);
                    let want = ctx.exact_reference(batch, |s| 11 + s as u64);
                    let at = format!("{format:?} {what}, {threads} threads, group {group}");
                    assert_eq!(bits(&got), bits(&want), "{at}");
                };
                let prompt: Vec<(u32, i32)> = (0..13).map(|p| (p as u32 % 2, p / 2)).collect();
                check(&prompt, "prefill");
                for p in 7..10 {
                    check(&[(0, p), (1, p - 1)], "decode");
                }
            }
        }
    }
}

/// Windows longer than the key blocks that the query heads of a KV group
/// share (and not a multiple of eight): grouped and one-head-at-a-time
/// attention give the plain order's bits, in prefill and decode, on any
/// thread count and row-kernel path.
#[test]
fn grouped_heads_over_long_windows_are_bit_exact() {
    let cfg = Cfg {
        n_head: 9,
        n_head_kv: 3,
        head_dim: 64,
        n_ctx: 160,
    };
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for format in [KvFormat::F16, KvFormat::F32, KvFormat::Q8_0] {
        for ((threads, group), rk) in on_every_path([(1, 1), (1, 3), (2, 3), (3, 2)]) {
            let mut ctx = Ctx::new(cfg, format, threads).grouped_on(group, rk);
            let prompt: Vec<(u32, i32)> = (0..101).map(|p| (0, p)).collect();
            let got = ctx.step(&prompt, |_| 5);
            let want = ctx.exact_reference(&prompt, |_| 5);
            assert_eq!(
                bits(&got),
                bits(&want),
                "{format:?} prefill, {threads}t, group {group}"
            );
            for p in 101..104 {
                let got = ctx.step(&[(0, p)], |_| 5);
                let want = ctx.exact_reference(&[(0, p)], |_| 5);
                assert_eq!(
                    bits(&got),
                    bits(&want),
                    "{format:?} decode {p}, {threads}t, group {group}"
                );
            }
        }
    }
}

/// Each of `cases` with each row-kernel path this CPU has.
fn on_every_path<T: Copy>(
    cases: impl IntoIterator<Item = T>,
) -> impl Iterator<Item = (T, RowKernels)> {
    cases
        .into_iter()
        .flat_map(|c| RowKernels::supported().into_iter().map(move |rk| (c, rk)))
}

/// A lone query's window past one block of the decode walk (512 keys),
/// where the row loops also ask for the rows ahead, still gives the plain
/// order's bits on every thread count and row-kernel path.
#[test]
fn lone_tokens_past_a_block_are_bit_exact() {
    let cfg = Cfg {
        n_head: 6,
        n_head_kv: 2,
        head_dim: 64,
        n_ctx: 1100,
    };
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for format in [KvFormat::F16, KvFormat::F32] {
        for (threads, rk) in on_every_path([1, 2]) {
            let mut ctx = Ctx::new(cfg, format, threads).grouped_on(3, rk);
            let prompt: Vec<(u32, i32)> = (0..1030).map(|p| (0, p)).collect();
            ctx.step(&prompt, |_| 9);
            for p in 1030..1033 {
                let got = ctx.step(&[(0, p)], |_| 9);
                let want = ctx.exact_reference(&[(0, p)], |_| 9);
                assert_eq!(
                    bits(&got),
                    bits(&want),
                    "{format:?} decode {p}, {threads}t, {rk:?}"
                );
            }
        }
    }
}

#[test]
fn attention_rejects_bad_windows_and_scratch() {
    let cfg = Cfg {
        n_head: 4,
        n_head_kv: 2,
        head_dim: 16,
        n_ctx: 8,
    };
    let p = cfg.params();
    let mut ctx = Ctx::new(cfg, KvFormat::F16, 2);
    ctx.step(&[(0, 0), (0, 1)], |_| 1);
    let q = vec![0.5f32; 2 * 64];
    let mut out = vec![0.0f32; 2 * 64];
    let mut run = |offsets: &[i32], cells: &[i32], p: &AttnParams, scratch: &mut AttnScratch| {
        attention(
            &q, &ctx.k, &ctx.v, offsets, cells, p, &ctx.pool, scratch, &mut out,
        )
    };
    let mut ok = AttnScratch::new(2, 8, 16);
    assert!(run(&[0, 1, 3], &[0, 0, 1], &p, &mut ok).is_ok());
    // Cells outside the regions, only where a window names them.
    for bad in [8, 100, -1] {
        let r = run(&[0, 1, 3], &[0, 0, bad], &p, &mut ok);
        assert!(matches!(r, Err(GraphError::CellOutOfRange { .. })), "{r:?}");
    }
    assert!(
        run(&[0, 1, 3], &[0, 0, 1, 99], &p, &mut ok).is_ok(),
        "garbage past the windows"
    );
    // Offsets: decreasing, negative, past the cells, too few.
    for offsets in [&[0, 2, 1][..], &[-1, 1, 2], &[0, 1, 4], &[0, 1], &[]] {
        let r = run(offsets, &[0, 0, 1], &p, &mut ok);
        assert!(
            matches!(r, Err(GraphError::BadInput { .. })),
            "{offsets:?}: {r:?}"
        );
    }
    // Scratch too small: threads, window length, head size.
    for mut small in [
        AttnScratch::new(1, 8, 16),
        AttnScratch::new(2, 1, 16),
        AttnScratch::new(2, 8, 8),
    ] {
        let r = run(&[0, 1, 3], &[0, 0, 1], &p, &mut small);
        assert!(matches!(r, Err(GraphError::BadInput { .. })), "{r:?}");
    }
    // Head counts that do not fit the regions or each other.
    for (n_head, n_head_kv, head_dim) in [(4, 3, 16), (4, 0, 16), (8, 4, 16), (4, 2, 0)] {
        let bad = AttnParams {
            n_head,
            n_head_kv,
            head_dim,
            ..p
        };
        assert!(run(&[0, 1, 3], &[0, 0, 1], &bad, &mut ok).is_err());
    }
    // q and out lengths.
    let mut lengths = |q: &[f32], out: &mut [f32]| {
        let cells = [0, 1, 3];
        attention(
            q,
            &ctx.k,
            &ctx.v,
            &cells,
            &[0, 0, 1],
            &p,
            &ctx.pool,
            &mut ok,
            out,
        )
    };
    assert!(lengths(&q[1..], &mut out).is_err());
    assert!(lengths(&q, &mut out[1..]).is_err());
    // An empty window gives zeros.
    let mut out = vec![1.0f32; 64];
    attention(
        &q[..64],
        &ctx.k,
        &ctx.v,
        &[0, 0],
        &[],
        &p,
        &ctx.pool,
        &mut ok,
        &mut out,
    )
    .unwrap();
    assert!(out.iter().all(|&v| v == 0.0));
}

#[test]
fn decode_step_kernels_do_not_allocate() {
    for format in [KvFormat::Q8_0, KvFormat::F16, KvFormat::F32] {
        decode_step_does_not_allocate(format);
    }
}

fn decode_step_does_not_allocate(format: KvFormat) {
    let cfg = GQA;
    let mut ctx = Ctx::new(cfg, format, 3);
    let prompt: Vec<(u32, i32)> = (0..10).map(|p| (p as u32 % 2, p / 2)).collect();
    ctx.step(&prompt, |s| s as u64);
    // Warm the plan's buffers to their final size.
    ctx.plan.window_cells.reserve(2 * cfg.n_ctx);
    ctx.plan.kv_cells.reserve(2);
    ctx.plan.window_offsets.reserve(3);
    let (q, k, v) = token_rows(&cfg, 5, 0);
    let (q, k, v) = (
        [q.clone(), q].concat(),
        [k.clone(), k].concat(),
        [v.clone(), v].concat(),
    );
    let mut out = vec![0.0f32; q.len()];
    let mut qr = q.clone();
    let mut norm = vec![0.0f32; q.len()];
    let rope = rope_params(RopeStyle::Neox, cfg.n_head, cfg.head_dim, cfg.head_dim);
    let pos = [5, 5];
    let arm = |on: bool| ctx.pool.run(|_| arm_thread(on));
    let ((), n) = count_armed(arm, || {
        for _ in 0..3 {
            ctx.cells
                .plan_batch(&[(0, 5), (1, 5)], &mut ctx.plan)
                .unwrap();
            rope_inplace(&mut qr, &pos, &rope, cfg.n_ctx).unwrap();
            rms_norm(&q, cfg.head_dim, 1e-6, &mut norm).unwrap();
            RowKernels::detect().swiglu(&mut norm, &q);
            softmax_inplace(RowKernels::detect(), &mut norm, cfg.head_dim).unwrap();
            kv_store(&mut ctx.k, &k, &ctx.plan.kv_cells).unwrap();
            kv_store(&mut ctx.v, &v, &ctx.plan.kv_cells).unwrap();
            attention(
                &qr,
                &ctx.k,
                &ctx.v,
                &ctx.plan.window_offsets,
                &ctx.plan.window_cells,
                &cfg.params(),
                &ctx.pool,
                &mut ctx.scratch,
                &mut out,
            )
            .unwrap();
            ctx.cells.remove(0, 5).unwrap();
            ctx.cells.remove(1, 5).unwrap();
        }
    });
    assert_eq!(n, 0, "allocations on the hot path ({format:?} cache)");
}
