//! `c.run(f)`: one call on every worker, beside its tasks (Dask's
//! `Client.run`). The scheduler passes the call to each worker connected
//! now and answers the client once each has answered or left.

use brisk_engine::error::TaskError;
use brisk_engine::value::Value;
use rustc_hash::{FxHashMap, FxHashSet};

use super::{ConnId, State};
use crate::protocol::{Blob, ToClient, ToWorker};

/// Runs not yet answered, by the id the workers know them by.
#[derive(Default)]
pub(super) struct Runs {
    next: u64,
    pending: FxHashMap<u64, Run>,
}

struct Run {
    client: ConnId,
    /// The client's id of its request.
    id: u64,
    /// Workers that have not answered.
    waiting: FxHashSet<ConnId>,
    /// Per worker, in the order asked.
    results: Vec<Answer>,
}

struct Answer {
    worker: ConnId,
    address: String,
    got: Option<Result<Value, TaskError>>,
}

impl State {
    pub(super) fn run_everywhere(&mut self, client: ConnId, id: u64, op: Blob) {
        self.runs.next += 1;
        let run = self.runs.next;
        let workers: Vec<(ConnId, String)> =
            self.workers.iter().map(|(c, w)| (*c, w.address.clone())).collect();
        for (conn, _) in &workers {
            if let Some(w) = self.workers.get_mut(conn) {
                w.outbox.push(ToWorker::Run { id: run, op: op.clone() });
            }
        }
        let waiting = workers.iter().map(|(c, _)| *c).collect();
        let results =
            workers.into_iter().map(|(worker, address)| Answer { worker, address, got: None }).collect();
        self.runs.pending.insert(run, Run { client, id, waiting, results });
        self.finish_run(run);
    }

    pub(super) fn run_result(&mut self, worker: ConnId, run: u64, result: Result<Value, TaskError>) {
        let Some(r) = self.runs.pending.get_mut(&run) else { return };
        if r.waiting.remove(&worker)
            && let Some(slot) = r.results.iter_mut().find(|a| a.worker == worker)
        {
            slot.got = Some(result);
        }
        self.finish_run(run);
    }

    /// `worker` left: the runs waiting on it get an error for it.
    pub(super) fn runs_lost(&mut self, worker: ConnId, reason: &str) {
        let ids: Vec<u64> =
            self.runs.pending.iter().filter(|(_, r)| r.waiting.contains(&worker)).map(|(i, _)| *i).collect();
        for run in ids {
            let lost = TaskError::internal(format!("the worker left before it answered: {reason}"));
            self.run_result(worker, run, Err(lost));
        }
    }

    fn finish_run(&mut self, run: u64) {
        if !self.runs.pending.get(&run).is_some_and(|r| r.waiting.is_empty()) {
            return;
        }
        let Some(r) = self.runs.pending.remove(&run) else { return };
        let results = r
            .results
            .into_iter()
            .map(|a| (a.address, a.got.unwrap_or_else(|| Err(TaskError::internal("no answer")))))
            .collect();
        self.tell_client(r.client, ToClient::Ran { id: r.id, results });
    }
}
