//! Dataframe partitions and their kernels (Dask's "pandas per partition").
//! A partition is a polars `DataFrame`; the operations a task runs on it
//! form the closed, serializable `FrameOp` vocabulary. The lazy frame that
//! builds these tasks is `crate::collections::frame`.

pub mod agg;
pub mod argbest;
pub mod bins;
pub mod calendar;
pub mod call;
pub mod cells;
pub mod csv;
pub mod cumulative;
mod decimal;
pub mod dtype;
pub mod error;
pub mod ewm;
pub mod exec;
pub mod expr;
pub mod fastagg;
pub mod fastcsv;
pub mod group;
pub mod json;
pub mod moments;
pub mod op;
pub mod parquet;
pub mod partition;
pub mod prune;
pub mod quantile;
pub mod query;
pub mod red;
pub mod rolling;
pub mod rolling_time;
pub mod series;
pub mod shuffle;
pub mod stage;
pub mod text;
pub mod to_block;
pub mod udf;
pub mod values;

pub use dtype::{DType, Schema};
pub use error::FrameError;
pub use op::{FrameOp, Sink, Source};
pub use partition::Frame;
