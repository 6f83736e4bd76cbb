//! The client a worker's tasks reach the scheduler through (Dask's worker
//! client): one per worker process, connected at its tasks' first request,
//! so a `Queue` a task reads or a `Lock` it takes is the cluster's. When
//! the worker goes, so does this connection, and the scheduler frees the
//! locks and leases its tasks held.

use std::sync::{Arc, Mutex};

use brisk_engine::client::CancelToken;
use brisk_engine::coordination::{CoordError, CoordOp, CoordReply, Coordinator, Deadline};
use brisk_engine::error::EngineError;

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
        if let Err(EngineError::Internal(_)) = reply {
            // The connection is lost: the next request makes a new one.
            *self.client.lock().unwrap_or_else(|e| e.into_inner()) = None;
        }
        reply
    }
}
