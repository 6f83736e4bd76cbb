//! The local runtime as a `Client`: implemented on its shared state, so
//! the session's `Runtime` and its own tasks (which submit tasks through
//! it, `worker_client`) are clients of the same runtime.

use super::{LOCAL_ADDRESS, Runtime, Shared};
use crate::client::{CancelToken, Client, Future, RunResults, StoryRow, WorkerInfo};
use crate::coordination::{CoordOp, CoordReply, Coordinator, Deadline};
use crate::diagnostics::{Event, Snapshot};
use crate::error::EngineError;
use crate::graph::task::Graph;
use crate::key::Key;
use crate::ops::Op;
use crate::runner::TaskContext;

impl Coordinator for Shared {
    fn coordinate(
        &self,
        op: CoordOp,
        deadline: Deadline,
        cancel: &CancelToken,
    ) -> Result<CoordReply, EngineError> {
        self.board.coordinate(op, deadline, cancel)
    }
}

impl Client for Shared {
    /// Cull to `outputs`, fuse, order, then hand the tasks to the state machine.
    fn submit(&self, graph: Graph, outputs: &[Key]) -> Result<Vec<Future>, EngineError> {
        let me = self.me.upgrade().ok_or(EngineError::Shutdown)?;
        Shared::submit(&me, graph, outputs)
    }

    fn story(&self, _keys: &[Key]) -> Result<Vec<StoryRow>, EngineError> {
        Err(EngineError::NoStory)
    }

    fn workers(&self) -> Vec<WorkerInfo> {
        let snap = Shared::snapshot(self);
        // One lock, taken and dropped here: a guard held as a temporary
        // across the literal below would deadlock a second `lock()`.
        let (in_memory, resources) = {
            let st = self.lock();
            (st.store.len(), st.resources(&self.config))
        };
        vec![WorkerInfo {
            name: "local".into(),
            address: LOCAL_ADDRESS.into(),
            threads: snap.threads,
            running: snap.busy_threads,
            in_memory,
            memory: snap.memory_bytes,
            // The budget the process holds its results to (Dask's LocalCluster
            // reports its workers' share of the machine the same way).
            memory_limit: Some(crate::memory::limit()),
            spilled: 0,
            gpu: crate::gpu::summary(),
            device: None,
            resources,
            pid: std::process::id(),
        }]
    }

    /// On the calling thread: the local runtime is its one worker.
    fn run_everywhere(&self, op: Op, cancel: &CancelToken) -> Result<RunResults, EngineError> {
        let key = Key::new("run");
        let ctx = TaskContext {
            key: &key,
            cancelled: cancel.flag(),
            interrupt: None,
            device: None,
            workdir: None,
            output: None,
            coordinator: Some(&self.board),
            client: None,
            seat: None,
        };
        let result = crate::exec::execute(&op, &[], &*self.udfs, &ctx);
        Ok(vec![(LOCAL_ADDRESS.to_string(), result)])
    }

    fn who_has(&self, keys: Option<&[Key]>) -> Vec<(Key, Vec<String>)> {
        let st = self.lock();
        let here = || vec![LOCAL_ADDRESS.to_string()];
        match keys {
            Some(keys) => keys
                .iter()
                .filter(|k| st.core.lookup(k).is_some_and(|t| st.store.contains_key(&t)))
                .map(|k| (k.clone(), here()))
                .collect(),
            None => {
                let mut all: Vec<Key> = st.store.keys().filter_map(|t| st.core.key(*t).cloned()).collect();
                all.sort();
                all.into_iter().map(|k| (k, here())).collect()
            }
        }
    }

    fn snapshot(&self) -> Snapshot {
        Shared::snapshot(self)
    }

    fn subscribe(&self, capacity: usize) -> crossbeam_channel::Receiver<Event> {
        self.lock().hub.subscribe(capacity)
    }

    fn describe(&self) -> String {
        let cfg = &self.config;
        format!(
            "<Client: local, threads={}, scheduler={}>",
            cfg.threads,
            if cfg.sync { "sync" } else { "threads" }
        )
    }

    fn close(&self) {
        self.break_down("the client was closed");
    }
}

/// The session's handle: everything goes to the shared state.
impl Coordinator for Runtime {
    fn coordinate(
        &self,
        op: CoordOp,
        deadline: Deadline,
        cancel: &CancelToken,
    ) -> Result<CoordReply, EngineError> {
        self.shared.coordinate(op, deadline, cancel)
    }
}

impl Client for Runtime {
    fn submit(&self, graph: Graph, outputs: &[Key]) -> Result<Vec<Future>, EngineError> {
        Client::submit(&*self.shared, graph, outputs)
    }

    fn story(&self, keys: &[Key]) -> Result<Vec<StoryRow>, EngineError> {
        self.shared.story(keys)
    }

    fn workers(&self) -> Vec<WorkerInfo> {
        self.shared.workers()
    }

    fn run_everywhere(&self, op: Op, cancel: &CancelToken) -> Result<RunResults, EngineError> {
        self.shared.run_everywhere(op, cancel)
    }

    fn who_has(&self, keys: Option<&[Key]>) -> Vec<(Key, Vec<String>)> {
        self.shared.who_has(keys)
    }

    fn snapshot(&self) -> Snapshot {
        Client::snapshot(&*self.shared)
    }

    fn subscribe(&self, capacity: usize) -> crossbeam_channel::Receiver<Event> {
        self.shared.subscribe(capacity)
    }

    fn describe(&self) -> String {
        self.shared.describe()
    }

    fn close(&self) {
        self.shared.close()
    }
}
