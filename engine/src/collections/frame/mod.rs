//! The lazy `DataFrame` and `Series` (Dask's `dask.dataframe`): the frame
//! and its stages (`dataframe`), Series (`series`), readers (`read`), and
//! everything that moves rows between partitions (`shuffle`). Their
//! per-partition kernels are `crate::frame`.

mod align;
mod categorical;
mod concat;
mod cumulative;
mod dataframe;
mod delayed;
mod index;
mod read;
mod reshape;
mod rolling_time;
mod series;
mod shift;
mod shuffle;
mod stats;
pub mod to_array;

pub use crate::frame::error::FrameError;
pub use dataframe::{
    Assigned, DEFAULT_BLOCKSIZE, DataFrame, Divisions, MAX_PARTITIONS, Part, SPLIT_EVERY, Series,
};
pub use read::{ParquetFilter, from_columns, from_records, read_csv, read_json, read_parquet};
pub use shuffle::{BROADCAST_PARTS, MergeArgs, merge};
