//! Tasks and the flat graph: an operation, the keys it reads and its
//! annotations; a graph indexes tasks by key.

use std::sync::Arc;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::key::Key;
use crate::ops::Op;

/// Annotations on a task (`annotate(#{...}, || ...)` in scripts).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Annotations {
    /// Higher runs first, before graph order (Dask's `priority=`).
    pub priority: i64,
    /// How many times a failed task is tried again.
    pub retries: u32,
    /// Abstract resources the task holds while it runs, e.g. `("GPU", 1.0)`.
    pub resources: Vec<(String, f64)>,
    /// Seconds one run may take; past them it is stopped and fails
    /// (beyond Dask, which cannot stop a running task: dask#1183).
    pub timeout: Option<f64>,
}

/// One node of the graph: an operation, its dependencies and annotations.
/// The op refers to its inputs by position in `deps` (`Arg::Dep(i)`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Task {
    pub key: Key,
    pub op: Op,
    pub deps: Vec<Key>,
    pub annotations: Option<Arc<Annotations>>,
}

impl Task {
    pub fn new(key: Key, op: Op, deps: Vec<Key>) -> Task {
        Task { key, op, deps, annotations: None }
    }
}

/// A flat task graph, indexed by key. Tasks may depend on keys that are not
/// in the graph (*external* keys: futures and persisted results that the
/// runtime already holds).
#[derive(Clone, Debug, Default)]
pub struct Graph {
    tasks: Vec<Task>,
    index: FxHashMap<Key, u32>,
}

impl Graph {
    /// Build from tasks; a key defined twice keeps its first definition
    /// (equal keys mean equal expressions).
    pub fn from_tasks(tasks: impl IntoIterator<Item = Task>) -> Graph {
        let mut g = Graph::default();
        for t in tasks {
            g.insert(t);
        }
        g
    }

    pub fn with_capacity(n: usize) -> Graph {
        let mut index = FxHashMap::default();
        index.reserve(n);
        Graph { tasks: Vec::with_capacity(n), index }
    }

    /// Add a task unless its key is already present. Returns whether it was added.
    pub fn insert(&mut self, task: Task) -> bool {
        if self.index.contains_key(&task.key) {
            return false;
        }
        self.index.insert(task.key.clone(), self.tasks.len() as u32);
        self.tasks.push(task);
        true
    }

    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    pub fn tasks(&self) -> &[Task] {
        &self.tasks
    }

    pub fn into_tasks(self) -> Vec<Task> {
        self.tasks
    }

    pub fn get(&self, key: &Key) -> Option<&Task> {
        self.index.get(key).map(|&i| &self.tasks[i as usize])
    }

    pub fn position(&self, key: &Key) -> Option<usize> {
        self.index.get(key).map(|&i| i as usize)
    }

    pub fn contains(&self, key: &Key) -> bool {
        self.index.contains_key(key)
    }

    /// Keys that tasks depend on but that the graph does not define.
    pub fn external_keys(&self) -> Vec<Key> {
        let mut seen = rustc_hash::FxHashSet::default();
        let mut out = Vec::new();
        for t in &self.tasks {
            for d in &t.deps {
                if !self.index.contains_key(d) && seen.insert(d.clone()) {
                    out.push(d.clone());
                }
            }
        }
        out
    }

    /// For each task (by position), the positions of its in-graph
    /// dependencies; external dependencies are left out.
    pub fn dependency_positions(&self) -> Vec<Vec<u32>> {
        self.tasks
            .iter()
            .map(|t| t.deps.iter().filter_map(|d| self.index.get(d).copied()).collect())
            .collect()
    }

    /// For each task (by position), the positions of the tasks that depend on it.
    pub fn dependent_positions(&self) -> Vec<Vec<u32>> {
        let mut out = vec![Vec::new(); self.tasks.len()];
        for (i, t) in self.tasks.iter().enumerate() {
            for d in &t.deps {
                if let Some(&j) = self.index.get(d) {
                    out[j as usize].push(i as u32);
                }
            }
        }
        out
    }
}
