//! A cluster of batch jobs, as dask-jobqueue's `JobQueueCluster`: a
//! scheduler started here (a child process, like `local_cluster`'s), a
//! [`Manager`] submitting `brisk worker` jobs to it, and the scaling verbs
//! in the units users think in (workers, jobs, cores, memory).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::System;
use super::adaptive::Policy;
use super::batch::Batch;
use super::manager::{BatchProvider, Manager};
use super::script::JobOptions;
use crate::client::RemoteClient;
use crate::cluster::{LocalCluster, LocalClusterOptions};
use crate::protocol::AdaptiveRule;
use crate::security::Security;

/// How long `close` lets workers hand their results over before jobs are
/// cancelled outright.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(40);

/// How adaptive scaling runs (`cluster.adapt(#{...})`), in workers.
#[derive(Clone, Debug, PartialEq)]
pub struct AdaptOptions {
    pub minimum: usize,
    pub maximum: usize,
    pub target_duration: Duration,
    pub interval: Duration,
    pub wait_count: u32,
    pub backlog: usize,
}

impl Default for AdaptOptions {
    fn default() -> AdaptOptions {
        AdaptOptions {
            minimum: 0,
            maximum: usize::MAX,
            target_duration: Duration::from_secs(5),
            interval: Duration::from_secs(1),
            wait_count: 3,
            backlog: 16,
        }
    }
}

/// Start adaptive scaling on `manager`, whose jobs run `per_job` workers each.
pub fn adapt(manager: &Manager, a: &AdaptOptions, per_job: usize) {
    let policy = Policy {
        minimum: a.minimum.div_ceil(per_job),
        maximum: if a.maximum == usize::MAX { usize::MAX } else { a.maximum.div_ceil(per_job) },
        wait_count: a.wait_count,
        backlog: a.backlog,
    };
    let rule = AdaptiveRule {
        target_duration: a.target_duration.as_secs_f64(),
        threads_per_worker: manager.threads_per_worker(),
    };
    manager.adapt(policy, rule, a.interval);
}

pub struct JobQueueCluster {
    pub system: System,
    /// The cluster's secret (made up when not given): jobs get it in their
    /// environment, clients must present it.
    pub token: Option<String>,
    options: JobOptions,
    scheduler: LocalCluster,
    manager: Arc<Manager>,
    closed: AtomicBool,
}

impl JobQueueCluster {
    /// Start the scheduler on `host` (default: this machine's address on
    /// its outward interface, or `options.interface`'s) and the manager;
    /// no job yet.
    pub fn start(
        batch: Box<dyn Batch>,
        options: JobOptions,
        host: Option<String>,
        token: Option<String>,
    ) -> Result<JobQueueCluster, String> {
        let system = batch.system();
        options.validate(system)?;
        let host = match (host, &options.interface) {
            (Some(h), _) => h,
            (None, Some(i)) => super::interface_address(i)?,
            (None, None) => super::outward_address(),
        };
        let token = token.or_else(super::new_token);
        let scheduler = LocalCluster::start(LocalClusterOptions {
            workers: 0,
            threads: 1,
            memory_limit: None,
            thresholds: crate::worker::MemoryThresholds::default(),
            resources: Vec::new(),
            token: token.clone(),
            scheduler_host: Some(host),
            cuda: None,
        })
        .map_err(|e| format!("cannot start the scheduler: {e}"))?;
        let address = scheduler.address.clone();
        let client = RemoteClient::connect(&address, Security { token: token.clone(), tls: None }, true)
            .map_err(|e| format!("cannot connect to the scheduler at {address}: {e}"))?;
        let provider = BatchProvider::new(batch, options.clone(), &address, token.clone())?;
        let manager = Manager::start(Box::new(provider), Arc::new(client), Duration::from_secs(1));
        Ok(JobQueueCluster { system, token, options, scheduler, manager, closed: AtomicBool::new(false) })
    }

    /// Where workers and clients connect.
    pub fn address(&self) -> &str {
        &self.scheduler.address
    }

    /// The scheduler's HTTP address.
    pub fn dashboard(&self) -> Option<&str> {
        self.scheduler.http_address.as_deref()
    }

    pub fn manager(&self) -> &Arc<Manager> {
        &self.manager
    }

    pub fn options(&self) -> &JobOptions {
        &self.options
    }

    pub fn job_script(&self) -> String {
        self.manager.script().unwrap_or_default()
    }

    /// Jobs for `n` workers (each job runs `processes` of them).
    pub fn jobs_for_workers(&self, n: usize) -> usize {
        n.div_ceil(self.options.processes.max(1) as usize)
    }

    pub fn jobs_for_cores(&self, cores: u64) -> usize {
        cores.div_ceil(u64::from(self.options.cores.max(1))) as usize
    }

    pub fn jobs_for_memory(&self, bytes: u64) -> usize {
        bytes.div_ceil(self.options.memory.max(1)) as usize
    }

    pub fn scale_jobs(&self, jobs: usize) -> Result<(), String> {
        self.manager.scale(jobs)
    }

    pub fn adapt(&self, a: &AdaptOptions) {
        adapt(&self.manager, a, self.options.processes.max(1) as usize);
    }

    /// Retire every worker, cancel every job, stop the scheduler. Safe to call twice.
    pub fn close(&self) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        self.manager.close(CLOSE_TIMEOUT);
        brisk_engine::client::Client::close(&**self.manager.client());
        self.scheduler.stop();
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }
}

impl Drop for JobQueueCluster {
    fn drop(&mut self) {
        self.close();
    }
}
