//! Conversations: [`ChatSession`] keeps a message list and one sequence's
//! cache in step (delta prefill, regeneration, undo, context shift), and
//! [`file`](mod@file) saves both to a session file and checks one before loading it.
//! Front ends (the terminal chat, the server) add only their own I/O.

pub mod delta;
pub mod file;
mod format;
mod identity;
mod session;

pub use file::{ModelIdentity, SessionData, SessionFileError};
pub use identity::model_identity;
pub use session::{ChatSession, ChatStats, TurnStart, TurnStats};
