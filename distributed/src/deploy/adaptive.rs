//! Adaptive scaling, decided without I/O or clocks: the scheduler gives a
//! [`Load`] (what is queued and running, per task group, and what each
//! worker holds), [`target`] turns it into a number of workers, and
//! [`Adaptive::recommend`] turns that into jobs to start or workers to
//! close, as `distributed.deploy.Adaptive` does, with the fixes its tracker
//! asked for:
//!
//! - queued tasks count at their group's measured duration (dask/distributed
//!   #8035), not the default for unknown tasks;
//! - cores become workers by dividing by the threads of a worker (#8037's
//!   over-ask);
//! - a task group nobody has finished yet counts at least as long as its
//!   oldest task has been running, so hours-long tasks still scale up
//!   (#3627), and an empty cluster with a queue asks for more than one
//!   worker (#6962);
//! - jobs still pending count as asked for, at most `backlog` of them wait
//!   in the queue, and pending jobs are cancelled first on scale-down;
//! - a worker is closed only when idle, after `wait_count` suggestions in a
//!   row, and only if the rest keep twice its stored data in memory;
//! - after repeated failures to submit or start, submitting pauses
//!   ([`Breaker`]).

use std::collections::HashMap;

/// One task group's work.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GroupLoad {
    /// Ready tasks waiting for a thread.
    pub queued: u64,
    /// Tasks running on workers.
    pub processing: u64,
    /// Mean measured duration, seconds; `None` while no task of the group
    /// has finished.
    pub mean: Option<f64>,
    /// For a group without a measured duration: how long its oldest
    /// running task has run, seconds.
    pub running_for: f64,
}

/// One worker, as the scheduler sees it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorkerLoad {
    pub name: String,
    pub nthreads: u32,
    /// Tasks assigned to it.
    pub processing: u64,
    /// Results it holds, and their bytes.
    pub held: u64,
    pub held_bytes: u64,
    pub memory_limit: Option<u64>,
    /// Leaving already: it counts for nothing.
    pub retiring: bool,
}

/// What the scheduler holds now.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Load {
    pub groups: Vec<GroupLoad>,
    /// Tasks waiting for their inputs (not ready yet, but work to come).
    pub waiting: u64,
    pub workers: Vec<WorkerLoad>,
}

/// How the target is computed.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    /// The queue should drain within this long (Dask's `target_duration`, 5 s).
    pub target_duration: f64,
    /// The duration assumed for a task of a group never measured (Dask's
    /// `unknown-task-duration`, 0.5 s).
    pub unknown_duration: f64,
    /// Threads of a worker when none is connected to count them.
    pub threads_per_worker: u32,
}

impl Default for Rule {
    fn default() -> Rule {
        Rule { target_duration: 5.0, unknown_duration: 0.5, threads_per_worker: 1 }
    }
}

fn live(load: &Load) -> impl Iterator<Item = &WorkerLoad> {
    load.workers.iter().filter(|w| !w.retiring)
}

/// The number of workers the load asks for (before `minimum`/`maximum`).
pub fn target(load: &Load, rule: &Rule) -> usize {
    let nworkers = live(load).count();
    let threads: u64 = live(load).map(|w| u64::from(w.nthreads.max(1))).sum();
    let per_worker = if nworkers > 0 {
        threads as f64 / nworkers as f64
    } else {
        f64::from(rule.threads_per_worker.max(1))
    };
    let target_duration = if rule.target_duration > 0.0 { rule.target_duration } else { 5.0 };
    let mut work = 0.0;
    let mut ready = 0u64;
    for g in &load.groups {
        let d = g.mean.unwrap_or_else(|| rule.unknown_duration.max(g.running_for));
        work += (g.queued + g.processing) as f64 * d.max(0.0);
        ready += g.queued + g.processing;
    }
    // Threads needed to drain the work in time, but never more than one
    // per ready task: a few long tasks do not need many cores.
    let cpu = ((work / target_duration).ceil() as u64).min(ready);
    let mut workers = (cpu as f64 / per_worker).ceil() as usize;
    if workers == 0 && ready + load.waiting > 0 {
        workers = 1;
    }
    // Memory: past 60% of the limits, ask for twice the workers.
    let stored: u64 = live(load).map(|w| w.held_bytes).sum();
    let limits: u64 = live(load).filter_map(|w| w.memory_limit).sum();
    let memory = if limits > 0 && stored as f64 > 0.6 * limits as f64 { 2 * nworkers } else { 0 };
    let target = workers.max(memory);
    if target < nworkers {
        // Shrink only by the workers that are safe to close.
        return nworkers - workers_to_close(load, target).len();
    }
    target
}

/// The workers to close to come down to `target`: idle ones holding the
/// least data first, while the rest keep at least twice the stored data
/// within their memory limits, and never the last one while any holds a
/// result (its results would have nowhere to go).
pub fn workers_to_close(load: &Load, target: usize) -> Vec<String> {
    let nworkers = live(load).count();
    if target >= nworkers {
        return Vec::new();
    }
    let mut idle: Vec<&WorkerLoad> = live(load).filter(|w| w.processing == 0).collect();
    idle.sort_by(|a, b| (a.held_bytes, a.held, &a.name).cmp(&(b.held_bytes, b.held, &b.name)));
    let stored: u64 = live(load).map(|w| w.held_bytes).sum();
    let mut limits: u64 = live(load).filter_map(|w| w.memory_limit).sum();
    let known = live(load).all(|w| w.memory_limit.is_some());
    let keep = usize::from(live(load).any(|w| w.held > 0)).max(target);
    let mut out = Vec::new();
    for w in idle {
        if nworkers - out.len() <= keep {
            break;
        }
        let rest = limits.saturating_sub(w.memory_limit.unwrap_or(0));
        if known && stored > 0 && (rest as f64) < 2.0 * stored as f64 {
            break;
        }
        limits = rest;
        out.push(w.name.clone());
    }
    out
}

/// The bounds and pace of adaptive scaling (`cluster.adapt(#{...})`).
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    pub minimum: usize,
    pub maximum: usize,
    /// Suggestions in a row before a worker is closed (Dask: 3).
    pub wait_count: u32,
    /// Jobs at most waiting in the batch queue at once.
    pub backlog: usize,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy { minimum: 0, maximum: usize::MAX, wait_count: 3, backlog: 16 }
    }
}

/// What to do now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recommendation {
    Same,
    /// Start this many more.
    Up(usize),
    /// Close these (pending jobs first, then idle workers).
    Down(Vec<String>),
}

/// Adaptive's memory between decisions: how often each worker was
/// suggested for closing in a row.
#[derive(Clone, Debug, Default)]
pub struct Adaptive {
    pub policy: Policy,
    close_counts: HashMap<String, u32>,
}

impl Adaptive {
    pub fn new(policy: Policy) -> Adaptive {
        Adaptive { policy, close_counts: HashMap::new() }
    }

    /// `plan`: the workers asked for and not closed, oldest first;
    /// `pending`: those of them not connected yet; `closable`: connected
    /// workers safe to close, best first (from [`workers_to_close`]).
    pub fn recommend(
        &mut self,
        target: usize,
        plan: &[String],
        pending: &[String],
        closable: &[String],
    ) -> Recommendation {
        let p = &self.policy;
        let target = target.clamp(p.minimum, p.maximum.max(p.minimum));
        if target >= plan.len() {
            self.close_counts.clear();
            if target == plan.len() {
                return Recommendation::Same;
            }
            let room = p.backlog.saturating_sub(pending.len());
            let n = (target - plan.len()).min(room);
            return if n == 0 { Recommendation::Same } else { Recommendation::Up(n) };
        }
        let excess = plan.len() - target;
        // Jobs that never started go first, the newest of them first.
        let mut to_close: Vec<&String> =
            plan.iter().rev().filter(|n| pending.contains(n)).take(excess).collect();
        for n in closable {
            if to_close.len() == excess {
                break;
            }
            if plan.contains(n) && !to_close.contains(&n) {
                to_close.push(n);
            }
        }
        let mut firm = Vec::new();
        for n in &to_close {
            let c = self.close_counts.entry((*n).clone()).or_insert(0);
            *c += 1;
            if *c >= p.wait_count.max(1) {
                firm.push((*n).clone());
            }
        }
        self.close_counts.retain(|k, _| to_close.contains(&k));
        for n in &firm {
            self.close_counts.remove(n);
        }
        if firm.is_empty() { Recommendation::Same } else { Recommendation::Down(firm) }
    }
}

/// Stops submitting after repeated failures (a rejected script, jobs that
/// end before their worker connects), for ever longer: 30 s, 60 s, … up to
/// 16 minutes. Times are seconds on the caller's clock.
#[derive(Clone, Debug, Default)]
pub struct Breaker {
    failures: u32,
    paused_until: f64,
    pub last_error: Option<String>,
}

/// Failures in a row that pause submitting.
pub const BREAKER_FAILURES: u32 = 3;

impl Breaker {
    pub fn failed(&mut self, now: f64, error: String) {
        self.failures += 1;
        self.last_error = Some(error);
        if self.failures >= BREAKER_FAILURES {
            let k = (self.failures - BREAKER_FAILURES).min(5);
            self.paused_until = now + 30.0 * f64::from(1u32 << k);
        }
    }

    pub fn succeeded(&mut self) {
        self.failures = 0;
        self.paused_until = 0.0;
    }

    /// `Some(seconds left)` while submitting is paused.
    pub fn paused(&self, now: f64) -> Option<f64> {
        (now < self.paused_until).then_some(self.paused_until - now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(name: &str, processing: u64, held: u64) -> WorkerLoad {
        WorkerLoad {
            name: name.into(),
            nthreads: 2,
            processing,
            held: u64::from(held > 0),
            held_bytes: held,
            memory_limit: Some(1 << 30),
            retiring: false,
        }
    }

    fn group(queued: u64, processing: u64, mean: Option<f64>) -> GroupLoad {
        GroupLoad { queued, processing, mean, running_for: 0.0 }
    }

    #[test]
    fn queued_work_at_its_measured_duration_sets_the_target() {
        // 100 tasks of 1 s on 2-thread workers: 100 s / 5 s = 20 threads = 10 workers.
        let load =
            Load { groups: vec![group(98, 2, Some(1.0))], waiting: 0, workers: vec![worker("a", 2, 0)] };
        assert_eq!(target(&load, &Rule::default()), 10);
        // Short tasks need fewer: 100 × 0.01 s drains on one thread.
        let load =
            Load { groups: vec![group(100, 0, Some(0.01))], waiting: 0, workers: vec![worker("a", 0, 0)] };
        assert_eq!(target(&load, &Rule::default()), 1);
    }

    #[test]
    fn an_empty_cluster_with_a_queue_asks_for_more_than_one_worker() {
        let rule = Rule { threads_per_worker: 4, ..Rule::default() };
        // 400 unknown tasks × 0.5 s = 200 s → 40 threads → 10 workers of 4.
        let load = Load { groups: vec![group(400, 0, None)], waiting: 0, workers: vec![] };
        assert_eq!(target(&load, &rule), 10);
        // Waiting tasks alone still get one worker.
        let load = Load { groups: vec![], waiting: 3, workers: vec![] };
        assert_eq!(target(&load, &rule), 1);
        assert_eq!(target(&Load::default(), &rule), 0);
    }

    #[test]
    fn long_tasks_never_measured_still_scale_up() {
        // Dask would count these 8 at 0.5 s each (1 thread); they have run 60 s.
        let g = GroupLoad { queued: 6, processing: 2, mean: None, running_for: 60.0 };
        let load = Load { groups: vec![g], waiting: 0, workers: vec![worker("a", 2, 0)] };
        // 8 ready tasks at ≥ 60 s: one thread each, 4 workers of 2 threads.
        assert_eq!(target(&load, &Rule::default()), 4);
    }

    #[test]
    fn memory_pressure_doubles_the_workers() {
        let load = Load {
            groups: vec![],
            waiting: 0,
            workers: vec![worker("a", 1, 700 << 20), worker("b", 1, 700 << 20)],
        };
        assert_eq!(target(&load, &Rule::default()), 4);
    }

    #[test]
    fn only_idle_workers_that_leave_room_for_the_data_close() {
        let load = Load {
            groups: vec![],
            waiting: 0,
            workers: vec![worker("busy", 3, 0), worker("big", 0, 200 << 20), worker("small", 0, 10 << 20)],
        };
        assert_eq!(workers_to_close(&load, 0), vec!["small".to_string(), "big".to_string()]);
        // Three long tasks want three threads (two workers of two): one of
        // the idle workers goes, never the busy one.
        let busy = Load { groups: vec![group(0, 3, Some(100.0))], ..load.clone() };
        assert_eq!(target(&busy, &Rule::default()), 2);
        assert_eq!(workers_to_close(&busy, 2), vec!["small".to_string()]);
        // Data that needs the memory of two workers keeps two.
        let full = Load {
            groups: vec![],
            waiting: 0,
            workers: vec![worker("a", 0, 600 << 20), worker("b", 0, 0), worker("c", 0, 0)],
        };
        assert_eq!(workers_to_close(&full, 0), vec!["b".to_string()]);
        // Results too small to weigh still keep the last worker.
        let mut tiny = worker("t", 0, 0);
        tiny.held = 3;
        let load = Load { groups: vec![], waiting: 0, workers: vec![tiny, worker("u", 0, 0)] };
        assert_eq!(workers_to_close(&load, 0), vec!["u".to_string()]);
        assert_eq!(target(&load, &Rule::default()), 1);
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn scale_up_is_at_once_and_bounded_by_the_backlog() {
        let mut a = Adaptive::new(Policy { minimum: 0, maximum: 10, wait_count: 3, backlog: 2 });
        assert_eq!(a.recommend(50, &[], &[], &[]), Recommendation::Up(2));
        assert_eq!(a.recommend(50, &names(&["j1", "j2"]), &names(&["j1", "j2"]), &[]), Recommendation::Same);
        assert_eq!(a.recommend(50, &names(&["j1", "j2"]), &names(&["j2"]), &[]), Recommendation::Up(1));
        assert_eq!(a.recommend(0, &[], &[], &[]), Recommendation::Same);
        // The minimum holds with no work.
        let mut a = Adaptive::new(Policy { minimum: 2, ..Policy::default() });
        assert_eq!(a.recommend(0, &[], &[], &[]), Recommendation::Up(2));
    }

    #[test]
    fn scale_down_waits_and_closes_pending_jobs_first() {
        let mut a = Adaptive::new(Policy { wait_count: 3, ..Policy::default() });
        let plan = names(&["j1", "j2", "j3"]);
        let pending = names(&["j3"]);
        let closable = names(&["j1", "j2"]);
        assert_eq!(a.recommend(1, &plan, &pending, &closable), Recommendation::Same);
        assert_eq!(a.recommend(1, &plan, &pending, &closable), Recommendation::Same);
        assert_eq!(a.recommend(1, &plan, &pending, &closable), Recommendation::Down(names(&["j3", "j1"])));
        // A suggestion interrupted by work starts counting again.
        assert_eq!(a.recommend(1, &plan, &pending, &closable), Recommendation::Same);
        assert_eq!(a.recommend(3, &plan, &pending, &closable), Recommendation::Same);
        assert_eq!(a.recommend(1, &plan, &pending, &closable), Recommendation::Same);
        assert_eq!(a.recommend(1, &plan, &pending, &closable), Recommendation::Same);
        assert_eq!(a.recommend(1, &plan, &pending, &closable), Recommendation::Down(names(&["j3", "j1"])));
    }

    #[test]
    fn repeated_failures_pause_submitting_for_longer_each_time() {
        let mut b = Breaker::default();
        b.failed(0.0, "x".into());
        b.failed(1.0, "x".into());
        assert_eq!(b.paused(1.0), None);
        b.failed(2.0, "sbatch: error: invalid partition".into());
        assert_eq!(b.paused(2.0), Some(30.0));
        assert_eq!(b.paused(40.0), None);
        b.failed(40.0, "again".into());
        assert_eq!(b.paused(40.0), Some(60.0));
        b.succeeded();
        assert_eq!(b.paused(41.0), None);
    }
}
