//! What every API's handlers share about HTTP: reading and parsing a
//! body, the JSON error, running CPU-heavy preparation off the async
//! workers, CORS, and admission (the one check of a prompt against the
//! context, then a place in the queue).

mod admission;
mod body;
mod cors;
mod error;

pub use admission::{admit, check_prompt, Admission, Admitted};
pub use body::{parse, parse_off_thread, read_body};
pub use cors::Cors;
pub use error::ApiError;
