//! Record-wise transforms, run inside whatever task next needs the partition.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::runner::Udf;
use crate::value::Value;

/// A record-wise transform.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Stage {
    Map(Arc<Udf>),
    Filter(Arc<Udf>),
    /// The partition's whole list to the closure, which returns a list.
    MapPartitions(Arc<Udf>),
    Flatten,
    /// `x[key]`: an index into lists, a key into maps.
    Pluck(Value),
    /// Python's `str.split()` (runs of whitespace) or `str.split(sep)`.
    StrSplit(Option<Arc<str>>),
    StrLower,
    StrStrip,
    /// `f(*record)`: each record (a list) spread into the arguments.
    StarMap(Arc<Udf>),
    /// Each record kept with probability `prob` (`random_sample`), from a
    /// stream seeded by `seed`, the partition and the record's position.
    RandomSample {
        prob: f64,
        seed: u64,
    },
    /// `join(other, on_self, on_other)`: for each record, a
    /// `[other_item, record]` pair per item of `other` whose key matches
    /// the record's, as Dask's `Bag.join` (`other` is small, in the task).
    Join {
        other: Arc<Vec<Value>>,
        on_self: Arc<Udf>,
        on_other: Arc<Udf>,
    },
}

impl Stage {
    pub fn name(&self) -> &'static str {
        match self {
            Stage::Map(_) => "map",
            Stage::Filter(_) => "filter",
            Stage::MapPartitions(_) => "map_partitions",
            Stage::Flatten => "flatten",
            Stage::Pluck(_) => "pluck",
            Stage::StrSplit(_) => "str_split",
            Stage::StrLower => "str_lower",
            Stage::StrStrip => "str_strip",
            Stage::StarMap(_) => "starmap",
            Stage::RandomSample { .. } => "random_sample",
            Stage::Join { .. } => "join",
        }
    }
}
