//! The grammar helper: one standing thread that computes the next
//! grammar masks of a step while its forward pass runs.
//!
//! The scheduler lends each constrained generation's grammar out
//! ([`Gate::lend_grammar`](crate::generate::Gate::lend_grammar)), sends
//! the loans in one message, runs the step, and waits for them to come
//! back before it samples. The loans travel in a vector that goes back and
//! forth, so a step allocates nothing for them once the vector has grown.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

use minfer_sampler::GrammarLoan;

/// Lent grammars, with the generation each belongs to.
pub(super) type Loans = Vec<(usize, GrammarLoan)>;

/// The standing helper thread; it ends when this is dropped.
#[derive(Debug)]
pub(super) struct MaskHelper {
    jobs: Option<SyncSender<Loans>>,
    done: Receiver<Loans>,
    thread: Option<JoinHandle<()>>,
}

impl MaskHelper {
    /// Starts the helper thread.
    ///
    /// # Errors
    /// The thread could not be created.
    pub(super) fn spawn() -> std::io::Result<MaskHelper> {
        let (jobs, inbox) = sync_channel::<Loans>(1);
        let (outbox, done) = sync_channel::<Loans>(1);
        let thread = std::thread::Builder::new()
            .name("minfer-grammar".into())
            .spawn(move || {
                for mut loans in inbox {
                    for (_, g) in &mut loans {
                        // A failure shows again, for that generation
                        // alone, when it samples.
                        let _ = g.prepare();
                    }
                    if outbox.send(loans).is_err() {
                        return;
                    }
                }
            })?;
        Ok(MaskHelper {
            jobs: Some(jobs),
            done,
            thread: Some(thread),
        })
    }

    /// Hands `loans` to the helper; [`finish`](MaskHelper::finish) gets
    /// them back.
    ///
    /// # Panics
    /// When the helper thread has died (it panicked in the grammar
    /// engine): the grammars it held are gone.
    pub(super) fn start(&self, loans: Loans) {
        let jobs = self.jobs.as_ref().expect("the helper runs until dropped");
        jobs.send(loans)
            .expect("the grammar helper thread panicked");
    }

    /// Waits for the loans [`start`](MaskHelper::start) handed over, their
    /// masks computed.
    ///
    /// # Panics
    /// As [`start`](MaskHelper::start).
    pub(super) fn finish(&self) -> Loans {
        self.done
            .recv()
            .expect("the grammar helper thread panicked")
    }
}

impl Drop for MaskHelper {
    fn drop(&mut self) {
        // Closing the job channel ends the thread's loop.
        drop(self.jobs.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
