//! The lazy, user-facing collections. Each builds graph layers and knows its
//! metadata without computing; the per-block kernels live beside them
//! (`crate::array` for arrays).

pub mod array;
pub mod bag;
pub mod dataframe;
pub mod shuffle;

use std::sync::Arc;

use crate::Task;
use crate::graph::{Key, Layer, LayerRef};

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
