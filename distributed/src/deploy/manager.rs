//! The cluster manager: keeps the workers a session asked for alive
//! through a [`Provider`] (batch jobs, local processes), `scale(n)` by
//! hand or `adapt` by the scheduler's load, and takes them away cleanly.
//!
//! One step (every `interval`, and at once on `scale`) polls the provider,
//! asks the scheduler for its view (`Adaptive`), and acts:
//!
//! - jobs that ended after their workers served (a worker's `--lifetime`)
//!   are replaced, so `scale(n)` keeps n (dask-jobqueue #691);
//! - a job pending for a reason that never clears (SLURM's
//!   `PartitionConfig`) is cancelled and its reason reported;
//! - jobs that end before their worker connects, and submissions refused,
//!   count as failures: three in a row pause submitting ([`Breaker`]);
//! - to remove a worker its results first move elsewhere (the scheduler
//!   retires it; it then exits and its job ends), then its job gets
//!   SIGTERM, then it is cancelled; pending jobs are cancelled at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::System;
use super::adaptive::{Adaptive, Breaker, Policy, Recommendation};
use super::batch::{Batch, JobState, Phase, fatal_reason};
use super::script::JobOptions;
use crate::client::RemoteClient;
use crate::protocol::{AdaptiveAnswer, AdaptiveRule};

/// The managers of this process, for [`Manager::cancel_all`].
static LIVE: Mutex<Vec<std::sync::Weak<Manager>>> = Mutex::new(Vec::new());

/// How long a worker asked to retire may take before its job gets SIGTERM.
const RETIRE_GRACE: Duration = Duration::from_secs(20);
/// How long after SIGTERM before the job is cancelled outright.
const TERM_GRACE: Duration = Duration::from_secs(10);

/// Where workers come from.
pub trait Provider: Send + Sync {
    /// Start one job (or process); its id and its workers' names.
    fn start(&self) -> Result<(String, Vec<String>), String>;
    /// The jobs of `ids` still queued or running.
    fn poll(&self, ids: &[String]) -> Result<Vec<JobState>, String>;
    fn cancel(&self, ids: &[String], graceful: bool) -> Result<(), String>;
    /// A pending reason that will never clear.
    fn fatal(&self, reason: &str) -> bool;
    /// Threads of one worker (adaptive's unit when none is connected).
    fn threads_per_worker(&self) -> u32;
    /// Workers each job runs.
    fn workers_per_job(&self) -> usize {
        1
    }
    /// What each job runs, when it is a script.
    fn script(&self) -> Option<String> {
        None
    }
    /// Jobs already running when the manager starts (a local cluster's
    /// first workers): ids and worker names.
    fn adopt(&self) -> Vec<(String, Vec<String>)> {
        Vec::new()
    }
    fn kind(&self) -> &'static str;
}

/// Batch jobs: one job script, submitted once per job.
pub struct BatchProvider {
    batch: Box<dyn Batch>,
    options: JobOptions,
    script: String,
    env: Vec<(String, String)>,
}

impl BatchProvider {
    /// `token`: the cluster's secret, given to jobs in their environment
    /// (never written into the script).
    pub fn new(
        batch: Box<dyn Batch>,
        options: JobOptions,
        scheduler: &str,
        token: Option<String>,
    ) -> Result<BatchProvider, String> {
        let script = options.script(batch.system(), scheduler)?;
        let env = token.map(|t| vec![("BRISK_TOKEN".to_string(), t)]).unwrap_or_default();
        Ok(BatchProvider { batch, options, script, env })
    }

    fn system(&self) -> System {
        self.batch.system()
    }
}

impl Provider for BatchProvider {
    fn start(&self) -> Result<(String, Vec<String>), String> {
        let id = self.batch.submit(&self.script, &self.env).map_err(|e| e.to_string())?;
        let base = format!("{}-{id}", self.options.job_name);
        let names = if self.options.processes > 1 {
            (0..self.options.processes).map(|i| format!("{base}-{i}")).collect()
        } else {
            vec![base]
        };
        Ok((id, names))
    }

    fn poll(&self, ids: &[String]) -> Result<Vec<JobState>, String> {
        self.batch.poll(ids).map_err(|e| e.to_string())
    }

    fn cancel(&self, ids: &[String], graceful: bool) -> Result<(), String> {
        self.batch.cancel(ids, graceful).map_err(|e| e.to_string())
    }

    fn fatal(&self, reason: &str) -> bool {
        fatal_reason(self.system(), reason)
    }

    fn threads_per_worker(&self) -> u32 {
        self.options.threads_per_worker()
    }

    fn workers_per_job(&self) -> usize {
        self.options.processes.max(1) as usize
    }

    fn script(&self) -> Option<String> {
        Some(self.script.clone())
    }

    fn kind(&self) -> &'static str {
        self.system().name()
    }
}

/// One job the manager started.
#[derive(Clone, Debug)]
pub struct Job {
    pub id: String,
    pub workers: Vec<String>,
    pub state: String,
    pub reason: Option<String>,
    pub phase: Phase,
    pub started: Instant,
    /// One of its workers connected at some point.
    pub seen: bool,
    /// Being taken away: since when, and whether SIGTERM went out.
    closing: Option<(Instant, bool)>,
}

/// What the manager aims for.
#[derive(Clone, Debug)]
enum Mode {
    /// Keep this many jobs.
    Fixed(usize),
    Adapt(Box<Adaptive>, AdaptiveRule),
}

struct Inner {
    jobs: Vec<Job>,
    mode: Mode,
    breaker: Breaker,
    /// The last thing that went wrong, for `status()` and `wait_for_workers`.
    error: Option<String>,
    /// A request the batch system can never satisfy.
    fatal: Option<String>,
    interval: Duration,
}

impl Inner {
    /// Why no job may be submitted now (`now`: the manager's clock), if so.
    fn blocked(&self, now: f64) -> Option<String> {
        if let Some(f) = &self.fatal {
            // Another job of the same script would pend for ever too.
            return Some(f.clone());
        }
        self.breaker.paused(now).map(|left| {
            format!(
                "submitting is paused for {left:.0}s after repeated failures; the last: {}",
                self.breaker.last_error.as_deref().unwrap_or("?")
            )
        })
    }
}

/// A session's deployed cluster (see the module doc).
pub struct Manager {
    provider: Box<dyn Provider>,
    client: Arc<RemoteClient>,
    inner: Mutex<Inner>,
    /// Held through a step, so the loop and `scale` never act at once.
    step_lock: Mutex<()>,
    wake: Condvar,
    stop: AtomicBool,
    t0: Instant,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// A job's line in `status()`.
#[derive(Clone, Debug, PartialEq)]
pub struct JobRow {
    pub id: String,
    pub state: String,
    pub reason: Option<String>,
    pub workers: Vec<String>,
    /// Whether its workers are connected now.
    pub connected: bool,
    pub seconds: f64,
}

impl Manager {
    /// Manage workers from `provider` for the scheduler `client` talks to;
    /// a thread steps every `interval`.
    pub fn start(provider: Box<dyn Provider>, client: Arc<RemoteClient>, interval: Duration) -> Arc<Manager> {
        let jobs: Vec<Job> = provider
            .adopt()
            .into_iter()
            .map(|(id, workers)| Job {
                id,
                workers,
                state: "RUNNING".into(),
                reason: None,
                phase: Phase::Running,
                started: Instant::now(),
                seen: true,
                closing: None,
            })
            .collect();
        let n = jobs.len();
        let m = Arc::new(Manager {
            provider,
            client,
            inner: Mutex::new(Inner {
                jobs,
                mode: Mode::Fixed(n),
                breaker: Breaker::default(),
                error: None,
                fatal: None,
                interval,
            }),
            step_lock: Mutex::new(()),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
            t0: Instant::now(),
            thread: Mutex::new(None),
        });
        let weak = Arc::downgrade(&m);
        let handle = std::thread::Builder::new().name("brisk-deploy".into()).spawn(move || {
            loop {
                let Some(m) = weak.upgrade() else { return };
                if m.stop.load(Ordering::SeqCst) {
                    return;
                }
                m.step();
                let interval = m.lock().interval;
                let guard = m.lock();
                let _ = m.wake.wait_timeout(guard, interval);
            }
        });
        if let Ok(h) = handle {
            *m.thread.lock().unwrap_or_else(|e| e.into_inner()) = Some(h);
        }
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        live.retain(|w| w.strong_count() > 0);
        live.push(Arc::downgrade(&m));
        m
    }

    /// Cancel every job of every manager in this process at once, for an
    /// exit that runs no destructor (SIGTERM, a second Ctrl-C).
    pub fn cancel_all() {
        let live: Vec<Arc<Manager>> = LIVE
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter_map(std::sync::Weak::upgrade)
            .collect();
        for m in live {
            m.stop.store(true, Ordering::SeqCst);
            let ids: Vec<String> =
                m.lock().jobs.iter().filter(|j| j.phase != Phase::Ended).map(|j| j.id.clone()).collect();
            let _ = m.provider.cancel(&ids, false);
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn client(&self) -> &Arc<RemoteClient> {
        &self.client
    }

    pub fn kind(&self) -> &'static str {
        self.provider.kind()
    }

    pub fn script(&self) -> Option<String> {
        self.provider.script()
    }

    pub fn threads_per_worker(&self) -> u32 {
        self.provider.threads_per_worker()
    }

    /// Keep `jobs` jobs (adaptive scaling stops); submits at once, so a
    /// refused submission is this call's error.
    pub fn scale(&self, jobs: usize) -> Result<(), String> {
        {
            let mut st = self.lock();
            st.mode = Mode::Fixed(jobs);
            st.fatal = None;
            st.breaker.succeeded();
        }
        match self.step() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Scale by the scheduler's load, between `policy`'s bounds.
    pub fn adapt(&self, policy: Policy, rule: AdaptiveRule, interval: Duration) {
        let mut st = self.lock();
        st.mode = Mode::Adapt(Box::new(Adaptive::new(policy)), rule);
        st.interval = interval;
        st.fatal = None;
        drop(st);
        self.wake.notify_all();
    }

    /// The jobs, oldest first, with the workers connected now (after a
    /// fresh look at the batch system).
    pub fn status(&self) -> Vec<JobRow> {
        self.step();
        let connected: Vec<String> =
            self.client.worker_rows().map(|r| r.into_iter().map(|w| w.name).collect()).unwrap_or_default();
        let st = self.lock();
        st.jobs
            .iter()
            .map(|j| JobRow {
                id: j.id.clone(),
                state: j.state.clone(),
                reason: j.reason.clone(),
                workers: j.workers.clone(),
                connected: j.workers.iter().any(|w| connected.contains(w)),
                seconds: j.started.elapsed().as_secs_f64(),
            })
            .collect()
    }

    /// Why submitting is paused or a job can never start, if so.
    pub fn problem(&self) -> Option<String> {
        self.lock().blocked(self.t0.elapsed().as_secs_f64())
    }

    /// Wait until `n` workers are connected; fails with the batch system's
    /// reason when a job can never start.
    pub fn wait_for_workers(&self, n: usize, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            let have = self.client.worker_rows().map_err(|e| e.to_string())?.len();
            if have >= n {
                return Ok(());
            }
            if let Some(f) = self.lock().fatal.clone() {
                return Err(f);
            }
            if Instant::now() > deadline {
                let why = self.problem().or_else(|| self.lock().error.clone());
                let pending: Vec<String> = self
                    .status()
                    .into_iter()
                    .filter(|j| !j.connected)
                    .map(|j| {
                        format!(
                            "job {} {}{}",
                            j.id,
                            j.state,
                            j.reason.map(|r| format!(" ({r})")).unwrap_or_default()
                        )
                    })
                    .collect();
                return Err(format!(
                    "only {have} of {n} workers connected within {}s{}{}",
                    timeout.as_secs(),
                    if pending.is_empty() { String::new() } else { format!("; {}", pending.join(", ")) },
                    why.map(|w| format!("; {w}")).unwrap_or_default()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Take every worker away (results handed over first), cancel every
    /// job, and stop the manager's thread. Waits up to `timeout`, then
    /// cancels what is left outright.
    pub fn close(&self, timeout: Duration) {
        self.lock().mode = Mode::Fixed(0);
        let deadline = Instant::now() + timeout;
        loop {
            self.step();
            let left: Vec<String> =
                self.lock().jobs.iter().filter(|j| j.phase != Phase::Ended).map(|j| j.id.clone()).collect();
            if left.is_empty() {
                break;
            }
            if Instant::now() > deadline {
                let _ = self.provider.cancel(&left, false);
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        self.stop();
    }

    /// Stop stepping (the workers stay).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.wake.notify_all();
        let handle = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(h) = handle
            && h.thread().id() != std::thread::current().id()
        {
            let _ = h.join();
        }
    }

    /// One round: poll, ask the scheduler, act. The error it met, if any.
    fn step(&self) -> Option<String> {
        let _step = self.step_lock.lock().unwrap_or_else(|e| e.into_inner());
        let ids: Vec<String> =
            self.lock().jobs.iter().filter(|j| j.phase != Phase::Ended).map(|j| j.id.clone()).collect();
        let states = match self.provider.poll(&ids) {
            Ok(s) => s,
            Err(e) => return Some(self.note_error(e)),
        };
        let rule = match &self.lock().mode {
            Mode::Adapt(_, rule) => rule.clone(),
            Mode::Fixed(_) => {
                AdaptiveRule { target_duration: 5.0, threads_per_worker: self.provider.threads_per_worker() }
            }
        };
        let view = match self.client.adaptive(rule) {
            Ok(v) => v,
            Err(e) => return Some(self.note_error(format!("cannot reach the scheduler: {e}"))),
        };
        let now = self.t0.elapsed().as_secs_f64();
        let mut st = self.lock();
        let mut to_cancel = self.observe(&mut st, &states, &view.workers, now);
        let decision = decide(&mut st, &view, self.provider.workers_per_job());
        let mut error = None;
        match decision {
            Recommendation::Same => {}
            Recommendation::Up(k) => {
                if let Some(why) = st.blocked(now) {
                    error = Some(why);
                } else {
                    drop(st);
                    let mut started = Vec::new();
                    for _ in 0..k {
                        match self.provider.start() {
                            Ok(job) => started.push(job),
                            Err(e) => {
                                error = Some(e);
                                break;
                            }
                        }
                    }
                    st = self.lock();
                    if let Some(e) = &error {
                        st.breaker.failed(now, e.clone());
                    }
                    for (id, workers) in started {
                        st.jobs.push(Job {
                            id,
                            workers,
                            state: "SUBMITTED".into(),
                            reason: None,
                            phase: Phase::Pending,
                            started: Instant::now(),
                            seen: false,
                            closing: None,
                        });
                    }
                }
            }
            Recommendation::Down(ids) => {
                let mut retire = Vec::new();
                for j in st.jobs.iter_mut().filter(|j| ids.contains(&j.id)) {
                    j.closing = Some((Instant::now(), false));
                    if j.seen {
                        retire.extend(j.workers.iter().cloned());
                    } else {
                        to_cancel.push(j.id.clone());
                    }
                }
                if !retire.is_empty() {
                    drop(st);
                    if let Err(e) = self.client.retire_workers(retire) {
                        error = Some(format!("cannot retire workers: {e}"));
                    }
                    st = self.lock();
                }
            }
        }
        let (term, overdue) = escalate(&mut st);
        to_cancel.extend(overdue);
        if let Some(e) = &error {
            st.error = Some(e.clone());
        }
        drop(st);
        if !term.is_empty()
            && let Err(e) = self.provider.cancel(&term, true)
        {
            error.get_or_insert(e);
        }
        if !to_cancel.is_empty()
            && let Err(e) = self.provider.cancel(&to_cancel, false)
        {
            error.get_or_insert(e);
        }
        error
    }

    /// Bring each job up to date with the batch system's answer (`states`)
    /// and the workers connected now; the jobs to cancel (they can never
    /// start). Failures feed the breaker.
    fn observe(&self, st: &mut Inner, states: &[JobState], connected: &[String], now: f64) -> Vec<String> {
        let mut to_cancel = Vec::new();
        // (what went wrong, whether it can never work)
        let mut failures: Vec<(String, bool)> = Vec::new();
        let mut arrived = false;
        for j in st.jobs.iter_mut().filter(|j| j.phase != Phase::Ended) {
            if !j.seen && j.workers.iter().any(|w| connected.contains(w)) {
                j.seen = true;
                arrived = true;
            }
            match states.iter().find(|s| s.id == j.id) {
                Some(s) => {
                    j.state = s.state.clone();
                    j.reason = s.reason.clone();
                    j.phase = s.phase;
                    if s.phase == Phase::Pending
                        && let Some(r) = &s.reason
                        && self.provider.fatal(r)
                    {
                        let why = format!(
                            "job {} can never start: the {} scheduler says {r} (the request does not fit its partition, limits or account)",
                            j.id,
                            self.provider.kind()
                        );
                        failures.push((why, true));
                        to_cancel.push(j.id.clone());
                        j.phase = Phase::Ended;
                        j.state = "CANCELLED".into();
                    }
                }
                None => {
                    // Ended: by its lifetime (served, then left), as
                    // asked, or before its worker ever came.
                    if !j.seen && j.closing.is_none() {
                        let why = format!("job {} ended before its worker connected (see its log)", j.id);
                        failures.push((why, false));
                    }
                    j.phase = Phase::Ended;
                    if j.state != "CANCELLED" {
                        j.state = "ENDED".into();
                    }
                }
            }
        }
        // A worker arriving ends a run of failures; a job merely accepted
        // does not (jobs that start and die at once would never trip it).
        if arrived {
            st.breaker.succeeded();
        }
        for (f, fatal) in failures {
            crate::log::warn("deploy", &f);
            st.breaker.failed(now, f.clone());
            if fatal {
                st.fatal = Some(f);
            }
        }
        // Forget ended jobs after a while, keeping the recent ones for status().
        if st.jobs.len() > 256 {
            let excess = st.jobs.len() - 256;
            let mut dropped = 0;
            st.jobs.retain(|j| {
                let drop = dropped < excess && j.phase == Phase::Ended;
                dropped += usize::from(drop);
                !drop
            });
        }
        to_cancel
    }

    fn note_error(&self, e: String) -> String {
        self.lock().error = Some(e.clone());
        e
    }
}

/// What to do given the mode: jobs to start or to take away.
fn decide(st: &mut Inner, view: &AdaptiveAnswer, per_job: usize) -> Recommendation {
    let live = |j: &&Job| j.phase != Phase::Ended && j.closing.is_none();
    let plan: Vec<String> = st.jobs.iter().filter(live).map(|j| j.id.clone()).collect();
    let pending: Vec<String> =
        st.jobs.iter().filter(live).filter(|j| !j.seen).map(|j| j.id.clone()).collect();
    // Jobs whose every worker the scheduler may close, best first.
    let mut closable: Vec<(usize, String)> = st
        .jobs
        .iter()
        .filter(live)
        .filter(|j| j.seen)
        .filter_map(|j| {
            let pos = j
                .workers
                .iter()
                .map(|w| view.to_close.iter().position(|x| x == w))
                .collect::<Option<Vec<_>>>()?;
            Some((pos.into_iter().max().unwrap_or(0), j.id.clone()))
        })
        .collect();
    closable.sort();
    let closable: Vec<String> = closable.into_iter().map(|(_, id)| id).collect();
    match &mut st.mode {
        Mode::Fixed(n) if *n > plan.len() => Recommendation::Up(*n - plan.len()),
        Mode::Fixed(n) if *n < plan.len() => {
            // Pending first (newest first), then the scheduler's choice,
            // then the newest.
            let excess = plan.len() - *n;
            let mut out: Vec<String> = Vec::new();
            let order = plan.iter().rev().filter(|id| pending.contains(id));
            for id in order.chain(closable.iter()).chain(plan.iter().rev()) {
                if out.len() < excess && !out.contains(id) {
                    out.push(id.clone());
                }
            }
            Recommendation::Down(out)
        }
        Mode::Fixed(_) => Recommendation::Same,
        Mode::Adapt(a, _) => {
            let target_jobs = (view.target as usize).div_ceil(per_job.max(1));
            a.recommend(target_jobs, &plan, &pending, &closable)
        }
    }
}

/// Jobs being taken away whose graces passed: those to send SIGTERM, and
/// those to cancel outright.
fn escalate(st: &mut Inner) -> (Vec<String>, Vec<String>) {
    let (mut term, mut cancel) = (Vec::new(), Vec::new());
    for j in st.jobs.iter_mut().filter(|j| j.phase != Phase::Ended) {
        let Some((since, termed)) = j.closing else { continue };
        if !termed && since.elapsed() > RETIRE_GRACE {
            j.closing = Some((since, true));
            term.push(j.id.clone());
        } else if termed && since.elapsed() > RETIRE_GRACE + TERM_GRACE {
            cancel.push(j.id.clone());
        }
    }
    (term, cancel)
}

impl Drop for Manager {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.wake.notify_all();
    }
}
