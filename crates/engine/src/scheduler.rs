//! Generations you pull from, and the [`Scheduler`] that steps all of them
//! together.
//!
//! A generation is a prompt being prefilled, then tokens being sampled and
//! decoded, on one sequence of the [`Runtime`]. The scheduler does not run a
//! loop of its own: every [`step`](Scheduler::step) gathers one row from
//! each decoding generation and a prefill chunk from those still reading
//! their prompt, runs them as one batch, and turns the logits into events
//! (text, then a final [`Event::Done`]) that the caller reads with
//! [`next_event`](Scheduler::next_event). Decode rows go first and prompts
//! are cut into chunks, so a long prompt never holds back the streams that
//! are already answering.
//!
//! When a generation ends, its sequence is released: the cells stay cached
//! for a later prompt with the same beginning (prefix reuse) until their
//! room is needed. A generation started on a caller's sequence
//! ([`Scheduler::submit_on`]) leaves the sequence to its owner.

mod gen;
mod masks;
mod plan;
mod read;
mod spec_state;
mod speculate;
mod state;
mod step;
mod step_plan;
mod submit;
mod types;

pub use state::Scheduler;
pub use types::{Event, GenId, GenProgress, GenTimes, DEFAULT_CHUNK};
