//! The stages that change logits by token id: logit bias and the history
//! penalties (repeat, frequency, presence), on the dense row or on a
//! candidate list.

use crate::filters::Candidate;

/// Adds each `(id, bias)` to its logit; the ids were checked against the
/// row by [`SamplingParams::validate_vocab`](crate::SamplingParams::validate_vocab).
pub(crate) fn apply_logit_bias(logits: &mut [f32], bias: &[(u32, f32)]) {
    for &(id, b) in bias {
        if let Some(l) = logits.get_mut(id as usize) {
            *l += b;
        }
    }
}

/// The three history penalties of llama.cpp's `penalties` sampler.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Penalties {
    /// Divides positive / multiplies non-positive logits; `1` is off.
    pub(crate) repeat: f32,
    /// Subtracted once per occurrence; `0` is off.
    pub(crate) frequency: f32,
    /// Subtracted once for any occurrence; `0` is off.
    pub(crate) presence: f32,
}

impl Penalties {
    fn is_off(&self) -> bool {
        self.repeat == 1.0 && self.frequency == 0.0 && self.presence == 0.0
    }

    fn apply(&self, l: &mut f32, count: usize) {
        if self.repeat != 1.0 {
            if *l <= 0.0 {
                *l *= self.repeat;
            } else {
                *l /= self.repeat;
            }
        }
        *l -= count as f32 * self.frequency + self.presence;
    }
}

/// Puts the window's ids into `seen`, sorted; `false` when there is nothing
/// to penalise. Sorting a copy of the window is O(n log n) and reuses
/// `seen`'s capacity, where a hash map of counts would allocate.
fn sorted_window(window: &[u32], p: Penalties, seen: &mut Vec<u32>) -> bool {
    if window.is_empty() || p.is_off() {
        return false;
    }
    seen.clear();
    seen.extend_from_slice(window);
    seen.sort_unstable();
    true
}

/// llama.cpp's penalties: for each distinct id seen `c` times in `window`,
/// the repeat penalty divides its logit when positive and multiplies it when
/// not (once, however often it occurs), then
/// `c * frequency + presence` is subtracted.
pub(crate) fn apply_penalties(
    logits: &mut [f32],
    window: &[u32],
    p: Penalties,
    seen: &mut Vec<u32>,
) {
    if !sorted_window(window, p, seen) {
        return;
    }
    for run in seen.chunk_by(|a, b| a == b) {
        if let Some(l) = logits.get_mut(run[0] as usize) {
            p.apply(l, run.len());
        }
    }
}

/// The same penalties applied to a candidate list (when the order puts
/// them after a truncation).
pub(crate) fn apply_penalties_sparse(
    cands: &mut [Candidate],
    window: &[u32],
    p: Penalties,
    seen: &mut Vec<u32>,
) {
    if !sorted_window(window, p, seen) {
        return;
    }
    for c in cands.iter_mut() {
        let lo = seen.partition_point(|&t| t < c.id);
        let hi = seen.partition_point(|&t| t <= c.id);
        if hi > lo {
            p.apply(&mut c.logit, hi - lo);
        }
    }
}
