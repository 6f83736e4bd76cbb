//! Bag kernels: what one task does to one partition of records (Dask's
//! `dask.bag` per-partition functions). A partition is a `Value::List` of
//! records; a record is any `Value`.
//!
//! Per-partition transforms are not one task each: the lazy `Bag` keeps
//! them as a list of `Stage`s and runs them, with the source read and the
//! partial aggregation, in one `Run` task per partition. That is Dask's bag
//! fusion done when the expression is built, and it lets the common text
//! pipelines (`read_text().str_split().flatten().frequencies()`) run over
//! borrowed lines without building a value per word (`text::fast`).

pub mod agg;
pub mod exec;
pub mod op;
pub mod records;
pub mod stage;
pub mod text;
pub mod vkey;

pub use agg::{Agg, Sink};
pub use op::{BagOp, Source};
pub use stage::Stage;
pub use vkey::VKey;

#[cfg(test)]
mod tests;
