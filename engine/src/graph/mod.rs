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
pub mod order;

pub use layer::{Layer, LayerRef, Pin, files_read, materialize};
pub use task::{Annotations, Graph, Task};
pub use token::Tokenizer;
