//! Task graphs. A collection builds *layers* (one per operation, each a list
//! of tasks) linked into a DAG by `Arc`; `materialize` walks the layers
//! reachable from the requested outputs (culling at layer granularity) into a
//! flat `Graph`, which the passes in `cull`, `fuse` and `order` then refine.

mod canon;
pub mod layer;
pub mod task;
pub mod token;

pub mod cull;
pub mod dot;
pub mod fuse;
pub mod narrow;
pub mod order;

pub use layer::{Layer, LayerRef, Pin, files_read, materialize};
pub use task::{Annotations, Graph, Task};
pub use token::Tokenizer;

use crate::key::Key;

/// The passes every runtime runs before scheduling: cull to `outputs`,
/// narrow tasks whose results are read only in part, fuse linear chains
/// (when `fuse`), and order statically. Keys the runtime
/// already holds (`held`: running for a future, persisted) stay
/// addressable, or fusion would compute them again. Returns the graph and
/// each task's static order, in task order.
pub fn optimize(graph: Graph, outputs: &[Key], fuse: bool, held: impl Fn(&Key) -> bool) -> (Graph, Vec<u32>) {
    let culled = cull::cull(graph, outputs);
    let mut keep = outputs.to_vec();
    keep.extend(culled.tasks().iter().filter(|t| held(&t.key)).map(|t| t.key.clone()));
    let narrowed = narrow::narrow(culled, &keep);
    let optimized = if fuse { fuse::fuse(narrowed, &keep) } else { narrowed };
    let order = order::order(&optimized, outputs);
    (optimized, order)
}
