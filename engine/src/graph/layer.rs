//! Layers: the high-level graph. Each collection operation adds one layer
//! holding its tasks and `Arc`s to the layers it reads, so building an
//! expression is O(tasks it adds), never a copy of the whole graph.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use rustc_hash::FxHashSet;

use super::task::{Graph, Task};

/// What keeps results held by a client alive (its futures), type-erased so
/// that graphs need not know the client.
pub type Pin = Arc<dyn Any + Send + Sync>;

/// One operation's tasks and the layers they read.
#[derive(Default)]
pub struct Layer {
    /// Deterministic name (`"inc-<token>"`); layers with equal names hold equal tasks.
    pub name: Arc<str>,
    pub tasks: Vec<Task>,
    pub deps: Vec<LayerRef>,
    /// Results read as *external* keys by this layer's tasks (futures passed
    /// to a delayed call) or by its dependents' (a persisted collection's
    /// partitions). Held here so that they live exactly as long as anything
    /// built on them, as Dask keeps the futures of a persisted collection in
    /// its graph. Dropping the last holder releases the future, which takes
    /// its client's lock: a client must never own layers.
    pub pins: Vec<Pin>,
}

impl fmt::Debug for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Layer")
            .field("name", &self.name)
            .field("tasks", &self.tasks.len())
            .field("deps", &self.deps.len())
            .field("pins", &self.pins.len())
            .finish()
    }
}

pub type LayerRef = Arc<Layer>;

impl Layer {
    pub fn new(name: impl Into<Arc<str>>, tasks: Vec<Task>, deps: Vec<LayerRef>) -> LayerRef {
        Arc::new(Layer { name: name.into(), tasks, deps, pins: Vec::new() })
    }

    /// A layer that also keeps `pins` alive.
    pub fn pinned(
        name: impl Into<Arc<str>>,
        tasks: Vec<Task>,
        deps: Vec<LayerRef>,
        pins: Vec<Pin>,
    ) -> LayerRef {
        Arc::new(Layer { name: name.into(), tasks, deps, pins })
    }
}

impl Drop for Layer {
    /// Drop long chains iteratively: a chain of 100,000 delayed calls would
    /// otherwise recurse once per layer and overflow the stack.
    fn drop(&mut self) {
        let mut stack = std::mem::take(&mut self.deps);
        while let Some(layer) = stack.pop() {
            if let Ok(mut inner) = Arc::try_unwrap(layer) {
                stack.append(&mut inner.deps);
            }
        }
    }
}

/// Flatten the layers reachable from `roots` into one graph. Each layer
/// object is visited once, iteratively, so deep chains are fine; equal
/// layers built twice (same name) give equal keys, which `Graph` dedups.
pub fn materialize(roots: &[LayerRef]) -> Graph {
    let mut seen: FxHashSet<*const Layer> = FxHashSet::default();
    let mut stack: Vec<&LayerRef> = roots.iter().collect();
    let mut layers: Vec<&LayerRef> = Vec::new();
    while let Some(l) = stack.pop() {
        if !seen.insert(Arc::as_ptr(l)) {
            continue;
        }
        layers.push(l);
        stack.extend(l.deps.iter());
    }
    let ntasks = layers.iter().map(|l| l.tasks.len()).sum();
    let mut g = Graph::with_capacity(ntasks);
    // Dependencies first, so positions roughly follow construction order.
    for l in layers.iter().rev() {
        for t in &l.tasks {
            g.insert(t.clone());
        }
    }
    g
}

/// Every file the tasks of the layers reachable from `roots` read, for a
/// writer to check that it does not write over its own input.
pub fn files_read(roots: &[LayerRef]) -> std::collections::BTreeSet<String> {
    let mut seen: FxHashSet<*const Layer> = FxHashSet::default();
    let mut stack: Vec<&LayerRef> = roots.iter().collect();
    let mut files = std::collections::BTreeSet::new();
    while let Some(l) = stack.pop() {
        if !seen.insert(Arc::as_ptr(l)) {
            continue;
        }
        for t in &l.tasks {
            files.extend(t.op.files_read().into_iter().map(String::from));
        }
        stack.extend(l.deps.iter());
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::Key;
    use crate::ops::Op;
    use crate::value::Value;

    fn lit(name: &str, deps: Vec<LayerRef>) -> LayerRef {
        let dep_keys = deps.iter().map(|d| d.tasks[0].key.clone()).collect();
        Layer::new(name, vec![Task::new(Key::new(name), Op::Literal(Value::Int(1)), dep_keys)], deps)
    }

    #[test]
    fn deep_chains_build_materialize_and_drop() {
        let mut l = lit("l-0", vec![]);
        for i in 1..200_000 {
            l = lit(&format!("l-{i}"), vec![l]);
        }
        let g = materialize(&[l.clone()]);
        assert_eq!(g.len(), 200_000);
        drop(g);
        drop(l); // must not overflow the stack
    }

    #[test]
    fn shared_layers_are_visited_once() {
        let a = lit("a-1", vec![]);
        let b = lit("b-1", vec![a.clone()]);
        let c = lit("c-1", vec![a.clone(), b.clone()]);
        let again = lit("a-1", vec![]); // same name, built twice
        let g = materialize(&[c, again]);
        assert_eq!(g.len(), 3);
        assert!(g.external_keys().is_empty());
    }
}
