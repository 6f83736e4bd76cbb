//! The lazy, user-facing collections. Each builds graph layers and knows its
//! metadata without computing; the per-block kernels live beside them
//! (`crate::array` for arrays).

pub mod array;
pub mod bag;
pub mod delayed;
pub mod frame;

use std::sync::Arc;

use crate::client::Future;
use crate::graph::layer::{Layer, LayerRef, Pin};
use crate::graph::task::Task;
use crate::key::Key;

/// What every lazy collection tells the code that runs it (Dask's
/// `__dask_graph__`, `__dask_keys__`, `__dask_postcompute__` and
/// `__dask_postpersist__`). `compute`, `persist` and `visualize` are
/// written once against it.
pub trait Collection {
    /// The tasks that compute the partitions (blocks, or the one value of a
    /// `Delayed`), and one key per partition, in order.
    fn partitions(&self) -> (LayerRef, Vec<Key>);

    /// One task from the partitions to the value `compute` returns (blocks
    /// joined into one array, partitions stacked into one frame), and its key.
    fn finalize(&self) -> (LayerRef, Key);

    /// The same collection read from results already held under the keys
    /// of `partitions()`, which `futures` keep alive for as long as
    /// anything built on the returned collection exists.
    fn persisted(&self, keys: Vec<Key>, futures: Vec<Future>) -> Self
    where
        Self: Sized;

    /// The bytes its computed value will take and what it is, when known
    /// before running (an array's shape and dtype say it): `compute` and
    /// `persist` refuse a result that cannot fit in memory up front, rather
    /// than after an hour of work, or with an abort.
    fn result_bytes(&self) -> Option<(u64, String)> {
        None
    }
}

/// Refuse to run `collections` if their results together cannot fit in
/// the memory budget (`verb`: "compute", "persist").
pub fn check_results_fit(
    verb: &str,
    collections: &[&dyn Collection],
) -> Result<(), crate::memory::MemoryError> {
    let sized: Vec<(u64, String)> = collections.iter().filter_map(|c| c.result_bytes()).collect();
    let total = sized.iter().fold(0u64, |a, (b, _)| a.saturating_add(*b));
    crate::memory::check(total, || {
        let what: Vec<&str> = sized.iter().map(|(_, w)| w.as_str()).collect();
        format!("the result of {verb} ({})", what.join(", "))
    })
}

/// A layer without tasks whose keys are results held by a client, kept
/// alive by `futures`.
pub(crate) fn held_layer(name: impl Into<Arc<str>>, futures: Vec<Future>) -> LayerRef {
    let pin: Pin = Arc::new(futures);
    Layer::pinned(name, Vec::new(), Vec::new(), vec![pin])
}

/// The combine levels of a tree reduction over `level` (the keys of
/// `first`): groups of `fan_in` keys are merged by `combine(key, group)`
/// until one key is left, with at least `min_levels` levels. Returns the
/// last layer and its keys (one). Bags and frames share it; the caller
/// adds the finish task.
pub(crate) fn combine_tree(
    label: &str,
    tok: &str,
    first: LayerRef,
    mut level: Vec<Key>,
    fan_in: usize,
    min_levels: usize,
    combine: impl Fn(Key, &[Key]) -> Task,
) -> (LayerRef, Vec<Key>) {
    let mut last = first;
    let mut depth = 0;
    while level.len() > 1 || depth < min_levels {
        depth += 1;
        let name: Arc<str> = Arc::from(format!("{label}-combine{depth}-{tok}"));
        let mut tasks = Vec::new();
        let mut next = Vec::new();
        for (g, group) in level.chunks(fan_in.max(2)).enumerate() {
            let key = Key::block(name.clone(), &[g as u32]);
            tasks.push(combine(key.clone(), group));
            next.push(key);
        }
        last = Layer::new(name, tasks, vec![last]);
        level = next;
    }
    (last, level)
}
