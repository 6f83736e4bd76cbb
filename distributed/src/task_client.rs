//! The client a worker's tasks reach the scheduler through (Dask's worker
//! client): one per worker process, connected at its tasks' first request,
//! so a `Queue` a task reads or a `Lock` it takes is the cluster's. When
//! the worker goes, so does this connection, and the scheduler frees the
//! locks and leases its tasks held. Tasks that submit tasks
//! (`worker_client`) submit through it too.

use std::sync::{Arc, Mutex};

use brisk_engine::client::{CancelToken, Client, Future, RunResults, StoryRow, WorkerInfo};
use brisk_engine::coordination::{CoordError, CoordOp, CoordReply, Coordinator, Deadline};
use brisk_engine::diagnostics::{Event, Snapshot};
use brisk_engine::error::EngineError;
use brisk_engine::graph::Graph;
use brisk_engine::key::Key;
use brisk_engine::ops::Op;
use brisk_engine::value::Value;

use crate::client::RemoteClient;
use crate::security::Security;

pub struct TaskClient {
    scheduler: String,
    security: Security,
    client: Mutex<Option<Arc<RemoteClient>>>,
}

impl TaskClient {
    pub fn new(scheduler: &str, security: Security) -> TaskClient {
        TaskClient { scheduler: scheduler.to_string(), security, client: Mutex::new(None) }
    }

    /// The connection, made now if there is none.
    fn client(&self) -> Result<Arc<RemoteClient>, EngineError> {
        let mut slot = self.client.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = &*slot {
            return Ok(c.clone());
        }
        let c = RemoteClient::connect(&self.scheduler, self.security.clone(), false).map_err(|e| {
            CoordError::Unavailable(format!(
                "a task could not reach the scheduler at {}: {e}",
                self.scheduler
            ))
        })?;
        let c = Arc::new(c);
        *slot = Some(c.clone());
        Ok(c)
    }
}

impl Coordinator for TaskClient {
    fn coordinate(
        &self,
        op: CoordOp,
        deadline: Deadline,
        cancel: &CancelToken,
    ) -> Result<CoordReply, EngineError> {
        let client = self.client()?;
        let reply = client.coordinate(op, deadline, cancel);
        if reply.is_err() && client.is_lost() {
            // The connection is gone: the next request makes a new one.
            // (Not on other errors: dropping it would free every lock this
            // worker's tasks hold.)
            *self.client.lock().unwrap_or_else(|e| e.into_inner()) = None;
        }
        reply
    }
}

/// Tasks submit tasks through the same connection (`worker_client`).
impl Client for TaskClient {
    fn submit(&self, graph: Graph, outputs: &[Key]) -> Result<Vec<Future>, EngineError> {
        self.client()?.submit(graph, outputs)
    }

    fn gather(&self, futures: &[Future], cancel: &CancelToken) -> Result<Vec<Value>, EngineError> {
        self.client()?.gather(futures, cancel)
    }

    fn scatter(&self, values: Vec<Value>, cancel: &CancelToken) -> Result<Vec<Future>, EngineError> {
        self.client()?.scatter(values, cancel)
    }

    fn workers(&self) -> Vec<WorkerInfo> {
        self.client().map(|c| c.workers()).unwrap_or_default()
    }

    fn run_everywhere(&self, op: Op, cancel: &CancelToken) -> Result<RunResults, EngineError> {
        self.client()?.run_everywhere(op, cancel)
    }

    fn who_has(&self, keys: Option<&[Key]>) -> Vec<(Key, Vec<String>)> {
        self.client().map(|c| c.who_has(keys)).unwrap_or_default()
    }

    fn snapshot(&self) -> Snapshot {
        self.client().map(|c| c.snapshot()).unwrap_or_default()
    }

    fn story(&self, keys: &[Key]) -> Result<Vec<StoryRow>, EngineError> {
        self.client()?.story(keys)
    }

    fn subscribe(&self, capacity: usize) -> crossbeam_channel::Receiver<Event> {
        match self.client() {
            Ok(c) => c.subscribe(capacity),
            Err(_) => crossbeam_channel::bounded(0).1,
        }
    }

    fn describe(&self) -> String {
        format!("<Client: a task's, scheduler={}>", self.scheduler)
    }

    /// A task does not close its worker's connection: it goes with the worker.
    fn close(&self) {}
}
