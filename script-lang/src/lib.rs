//! brisk-script: the Rhai binding of the engine. A `Session` is what every
//! front end evaluates scripts in; closures travel to workers in shipped
//! form (`ship`).

pub mod api;
pub mod collection;
pub mod complete;
pub mod convert;
pub mod error;
pub mod input;
mod lower;
pub mod print;
pub mod session;
pub mod ship;
pub mod state;
pub mod types;

pub use error::{ErrorKind, ScriptError};
pub use session::{Outcome, Session};
pub use state::{DisplaySink, OutputSink, Rendered, SessionConfig, SessionState};
