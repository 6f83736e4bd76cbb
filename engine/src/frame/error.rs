//! Errors of dataframe operations, from building an expression to reading
//! a file.

/// Why a dataframe operation was refused or failed. The kinds a caller
/// matches on are variants of their own; each message is the one a user
/// sees.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// A column the frame does not have, and the columns it has.
    #[error("unknown column \"{column}\" (columns: {columns})")]
    UnknownColumn { column: String, columns: String },
    /// An operation the column types do not support (comparing a string
    /// with a number, summing strings, filling a number column with text).
    #[error("{0}")]
    DType(String),
    /// A bad argument: a count, a size, an option's value, a name used twice.
    #[error("{0}")]
    Invalid(String),
    /// No file matched a reader's path, pattern or list.
    #[error("{function}: no files matched")]
    NoFiles { function: &'static str },
    /// A reader was given a directory where it reads files.
    #[error("{function}: {path} is a directory")]
    IsDirectory { function: &'static str, path: String },
    #[error("cannot read {path}: {error}")]
    Io { path: String, error: std::io::Error },
    #[error(transparent)]
    Csv(#[from] crate::frame::csv::CsvError),
    #[error(transparent)]
    Parquet(#[from] crate::frame::parquet::ParquetError),
    #[error(transparent)]
    Json(#[from] crate::frame::json::JsonError),
    /// A frame, a graph or a partition count that cannot fit in memory.
    #[error(transparent)]
    Memory(#[from] crate::memory::MemoryError),
    /// A writer refused its target or could not put its output in place.
    #[error(transparent)]
    Write(#[from] crate::staging::WriteError),
}

/// A polars error as a `FrameError`: its first line, as task errors show it.
pub(crate) fn polars_error(e: polars::prelude::PolarsError) -> FrameError {
    FrameError::Invalid(e.to_string().lines().next().unwrap_or("polars error").to_string())
}
