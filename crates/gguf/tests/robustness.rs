//! Hostile input: every truncation and 100,000 random mutations of a valid
//! file must each give `Ok` or a typed `Err` — never a panic, and never an
//! allocation larger than the input can justify.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};

use minfer_gguf::GgufFile;
use rand::{rngs::StdRng, Rng, SeedableRng};

/// Records the largest single allocation made while armed on this thread.
struct MaxAlloc;

static LARGEST: AtomicUsize = AtomicUsize::new(0);
thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
}

// SAFETY: every call is forwarded to the system allocator unchanged; the
// armed check only reads a thread-local flag and records a size.
unsafe impl GlobalAlloc for MaxAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ARMED.with(Cell::get) {
            LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        }
        // SAFETY: forwarded unchanged; the caller upholds `GlobalAlloc`'s contract for it.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged; the caller upholds `GlobalAlloc`'s contract for it.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if ARMED.with(Cell::get) {
            LARGEST.fetch_max(new_size, Ordering::Relaxed);
        }
        // SAFETY: forwarded unchanged; the caller upholds `GlobalAlloc`'s contract for it.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: MaxAlloc = MaxAlloc;

/// Parses `bytes`, touching every tensor view of a successful parse.
/// Returns whether the parse succeeded; a panic is reported as `Err`.
fn parse(bytes: &[u8]) -> Result<bool, String> {
    let input = bytes.to_vec();
    ARMED.with(|a| a.set(true));
    let r = catch_unwind(AssertUnwindSafe(|| match GgufFile::from_bytes(input) {
        Ok(f) => {
            let mut sum = 0u64;
            for t in f.tensors() {
                sum += f.tensor_data(t).len() as u64;
            }
            for (_, v) in f.metadata().iter() {
                std::hint::black_box(v.to_string());
            }
            std::hint::black_box(sum);
            true
        }
        Err(e) => {
            // Every error must render as one line.
            let msg = e.to_string();
            assert!(!msg.contains('\n'), "multi-line error: {msg}");
            false
        }
    }));
    ARMED.with(|a| a.set(false));
    r.map_err(|p| {
        p.downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default()
    })
}

/// No allocation may exceed this many bytes per input byte (plus slack):
/// values are at most 32 bytes for at least one encoded byte.
fn alloc_limit(input_len: usize) -> usize {
    64 * input_len + 64 * 1024
}

#[test]
fn every_truncation_is_an_error_or_ok_never_a_panic() {
    let good = common::sample_writer().to_bytes();
    assert_eq!(parse(&good), Ok(true));
    let header_len = minfer_gguf::parse_header(&good).unwrap().data_offset as usize;
    LARGEST.store(0, Ordering::Relaxed);
    for len in 0..good.len() {
        match parse(&good[..len]) {
            Err(p) => panic!("truncation to {len} bytes panicked: {p}"),
            Ok(ok) => assert!(
                !ok || len >= header_len,
                "truncation to {len} bytes (header is {header_len}) parsed"
            ),
        }
    }
    let largest = LARGEST.load(Ordering::Relaxed);
    assert!(
        largest <= alloc_limit(good.len()),
        "allocation of {largest} bytes"
    );
}

#[test]
fn random_mutations_never_panic_or_allocate_hugely() {
    let good = common::sample_writer().to_bytes();
    let mut rng = StdRng::seed_from_u64(0x6767_7566);
    let (mut ok, mut err) = (0u32, 0u32);
    LARGEST.store(0, Ordering::Relaxed);
    let interesting: [u64; 8] = [0, 1, 0x7f, 0xff, 0xffff_ffff, u64::MAX, 1 << 40, 63];
    for i in 0..100_000u32 {
        let mut b = good.clone();
        for _ in 0..rng.gen_range(1..=4) {
            let pos = rng.gen_range(0..b.len());
            match rng.gen_range(0..4) {
                0 => b[pos] = rng.gen(),
                1 => b[pos] ^= 1 << rng.gen_range(0..8),
                2 => {
                    // Plant a large or boundary integer where a count,
                    // length, dimension or offset might be.
                    let v = interesting[rng.gen_range(0..interesting.len())].to_le_bytes();
                    let n = (b.len() - pos).min(8);
                    b[pos..pos + n].copy_from_slice(&v[..n]);
                }
                _ => {
                    let cut = rng.gen_range(pos..=b.len());
                    b.truncate(cut.max(1));
                }
            }
        }
        match parse(&b) {
            Ok(true) => ok += 1,
            Ok(false) => err += 1,
            Err(p) => panic!("mutation {i} panicked: {p}"),
        }
    }
    let largest = LARGEST.load(Ordering::Relaxed);
    eprintln!("mutations: {ok} parsed, {err} rejected, largest allocation {largest} B");
    assert!(err > 50_000, "mutations should mostly be rejected");
    assert!(
        largest <= alloc_limit(good.len()),
        "allocation of {largest} bytes"
    );
}
