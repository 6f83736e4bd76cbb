//! `TestEnv`: drives the state machine event by event with readable names,
//! validates every invariant after each stimulus, and lets tests assert the
//! exact actions sent (and that nothing else was). `Sim` adds simulated
//! workers that really hold data, to check results end to end.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::*;
use crate::error::TaskError;
use crate::graph::task::Annotations;
use crate::key::Key;

pub(super) struct TestEnv {
    pub s: Scheduler,
    out: Vec<Action>,
    names: HashMap<WorkerId, String>,
    ids: HashMap<String, WorkerId>,
    keys: HashMap<TaskId, String>,
}

impl TestEnv {
    pub fn new() -> TestEnv {
        Self::with_config(SchedulerConfig { worker_saturation: 1.0, ..SchedulerConfig::default() })
    }

    pub fn with_config(config: SchedulerConfig) -> TestEnv {
        TestEnv {
            s: Scheduler::new(config),
            out: Vec::new(),
            names: HashMap::new(),
            ids: HashMap::new(),
            keys: HashMap::new(),
        }
    }

    fn check(&self) {
        if let Err(e) = self.s.validate() {
            panic!("invariant broken: {e}\nstory: {:#?}", self.s.story().collect::<Vec<_>>());
        }
    }

    pub fn worker(&mut self, name: &str, nthreads: u32) -> WorkerId {
        self.worker_with(name, nthreads, &[])
    }

    pub fn worker_with(&mut self, name: &str, nthreads: u32, resources: &[(&str, f64)]) -> WorkerId {
        let spec = WorkerSpec {
            name: name.to_string(),
            nthreads,
            resources: resources.iter().map(|(n, x)| (n.to_string(), *x)).collect(),
        };
        let w = self.s.add_worker(spec, &mut self.out);
        self.names.insert(w, name.to_string());
        self.ids.insert(name.to_string(), w);
        self.check();
        w
    }

    pub fn set_resource(&mut self, worker: &str, name: &str, amount: f64) {
        let w = self.ids[worker];
        self.s.set_resource(w, name, amount, &mut self.out);
        self.check();
    }

    /// Worker `name` reports that it holds a copy of `key`.
    pub fn replicated(&mut self, key: &str, name: &str) {
        let (w, t) = (self.ids[name], self.id(key));
        self.s.add_replica(w, t, &mut self.out);
        self.check();
    }

    pub fn pause(&mut self, name: &str, paused: bool) {
        let w = self.ids[name];
        self.s.pause_worker(w, paused, &mut self.out);
        self.check();
    }

    pub fn kill(&mut self, name: &str) {
        let w = self.ids[name];
        self.s.remove_worker(w, &mut self.out);
        self.check();
    }

    pub fn wid(&self, name: &str) -> WorkerId {
        self.ids[name]
    }

    /// Worker `name` starts leaving on purpose (`retire_worker`).
    pub fn retire(&mut self, name: &str) {
        let w = self.ids[name];
        self.s.retire_worker(w, &mut self.out);
        self.check();
    }

    /// Worker `name` leaves on purpose (SIGTERM).
    pub fn close(&mut self, name: &str) {
        let w = self.ids[name];
        self.s.worker_closed(w, &mut self.out);
        self.check();
    }

    /// Tasks as `(key, deps)`; each task's order is its position.
    pub fn submit(&mut self, tasks: &[(&str, &[&str])], wanted: &[&str]) {
        self.submit_annotated(tasks, wanted, &[]);
    }

    pub fn submit_annotated(
        &mut self,
        tasks: &[(&str, &[&str])],
        wanted: &[&str],
        ann: &[(&str, Annotations)],
    ) {
        self.restore_annotated(tasks, wanted, Known::default(), ann);
    }

    /// As a scheduler restarted from its journal: `held` results as
    /// `(key, worker)`, `erred` as `(key, message)`.
    pub fn restore(
        &mut self,
        tasks: &[(&str, &[&str])],
        wanted: &[&str],
        held: &[(&str, &str)],
        erred: &[(&str, &str)],
    ) {
        let known = Known {
            held: held.iter().map(|(k, w)| (Key::new(*k), self.ids[*w], 8, false)).collect(),
            erred: erred.iter().map(|(k, m)| (Key::new(*k), TaskError::user(*m))).collect(),
            wants: Vec::new(),
        };
        self.restore_annotated(tasks, wanted, known, &[]);
    }

    /// Tasks as `(key, deps)`, each task's order its position, submitted
    /// with what is `known` of them; their names are kept for `describe`.
    fn restore_annotated(
        &mut self,
        tasks: &[(&str, &[&str])],
        wanted: &[&str],
        known: Known,
        ann: &[(&str, Annotations)],
    ) {
        let new = tasks
            .iter()
            .enumerate()
            .map(|(i, (k, deps))| NewTask {
                key: Key::new(*k),
                deps: deps.iter().map(|d| Key::new(*d)).collect(),
                order: i as u32,
                annotations: ann.iter().find(|(n, _)| n == k).map(|(_, a)| Arc::new(a.clone())),
            })
            .collect();
        let wanted: Vec<Key> = wanted.iter().map(|k| Key::new(*k)).collect();
        let r = self.s.restore(new, &wanted, known, &mut self.out);
        assert_eq!(r, Ok(()));
        for (k, _) in tasks {
            if let Some(t) = self.s.lookup(&Key::new(*k)) {
                self.keys.insert(t, k.to_string());
            }
        }
        self.check();
    }

    pub fn id(&self, key: &str) -> TaskId {
        match self.s.lookup(&Key::new(key)) {
            Some(t) => t,
            None => panic!("{key} is not known"),
        }
    }

    pub fn state(&self, key: &str) -> Option<TaskState> {
        self.s.lookup(&Key::new(key)).and_then(|t| self.s.state(t))
    }

    pub fn finish(&mut self, key: &str) {
        self.finish_bytes(key, 8);
    }

    pub fn finish_bytes(&mut self, key: &str, nbytes: u64) {
        self.finish_with(key, nbytes, 100.0);
    }

    pub fn finish_with(&mut self, key: &str, nbytes: u64, duration_us: f64) {
        let t = self.id(key);
        let w = self.s.processing_on(t).unwrap_or_else(|| panic!("{key} is not processing"));
        let run = self.s.current_run(t).unwrap_or_default();
        self.s.task_finished(w, t, run, nbytes, duration_us, &mut self.out);
        self.check();
    }

    /// `key` waits on others (`true`, secede) or holds its thread again.
    pub fn secede(&mut self, key: &str, seceded: bool) {
        let t = self.id(key);
        if seceded {
            self.s.secede(t, &mut self.out);
        } else {
            self.s.rejoin(t, &mut self.out);
        }
        self.check();
    }

    /// The worker running `key` could not fetch `dep` from `holders`.
    pub fn missing(&mut self, key: &str, dep: &str, holders: &[&str]) {
        let t = self.id(key);
        let w = self.s.processing_on(t).unwrap_or_else(|| panic!("{key} is not processing"));
        let run = self.s.current_run(t).unwrap_or_default();
        let holders: Vec<WorkerId> = holders.iter().map(|h| self.ids[*h]).collect();
        self.s.missing_data(w, t, run, &Key::new(dep), &holders, &mut self.out);
        self.check();
    }

    pub fn fail(&mut self, key: &str, message: &str) {
        let t = self.id(key);
        let w = self.s.processing_on(t).unwrap_or_else(|| panic!("{key} is not processing"));
        let run = self.s.current_run(t).unwrap_or_default();
        self.s.task_failed(w, t, run, TaskError::user(message), &mut self.out);
        self.check();
    }

    pub fn release(&mut self, key: &str) {
        let t = self.id(key);
        self.s.release(t, &mut self.out);
        self.check();
    }

    /// Every action sent since the last call, as short sentences.
    pub fn take(&mut self) -> Vec<String> {
        let out = std::mem::take(&mut self.out);
        out.into_iter().map(|a| self.describe(&a)).collect()
    }

    /// Assert the exact actions sent since the last call, in order.
    #[track_caller]
    pub fn expect(&mut self, expected: &[&str]) {
        let got = self.take();
        assert_eq!(got, expected, "actions differ");
    }

    fn describe(&self, a: &Action) -> String {
        let k = |t: &TaskId| self.keys.get(t).cloned().unwrap_or_else(|| format!("{t:?}"));
        let w = |w: &WorkerId| self.names.get(w).cloned().unwrap_or_else(|| format!("{w:?}"));
        match a {
            Action::Run { worker, task, .. } => format!("run {} on {}", k(task), w(worker)),
            Action::Cancel { worker, task } => format!("cancel {} on {}", k(task), w(worker)),
            Action::Free { worker, task } => format!("free {} on {}", k(task), w(worker)),
            Action::Done { task } => format!("done {}", k(task)),
            Action::Erred { task, error } => format!("erred {}: {}", k(task), error.message),
            Action::Forget { task } => format!("forget {}", k(task)),
            Action::Replicate { task, from, to } => {
                format!("copy {} from {} to {}", k(task), w(from), w(to))
            }
        }
    }
}

/// A simulated cluster: workers hold real values (each task computes
/// `1 + sum of its inputs`), so lost data and recomputation are checked by
/// the final numbers, not only by the scheduler's own bookkeeping.
pub(super) struct Sim {
    pub env: TestEnv,
    deps: HashMap<String, Vec<String>>,
    data: HashMap<(WorkerId, TaskId), i64>,
    running: Vec<(WorkerId, TaskId, u32)>,
    pub done: BTreeMap<String, i64>,
    pub erred: BTreeMap<String, String>,
    /// Transient failures each task may still suffer (its retries).
    flaky: HashMap<String, u32>,
    alive: Vec<String>,
    next_worker: usize,
    /// How often each kind of chaos happened, so tests can check it did.
    pub failures: usize,
    pub repeats: usize,
    rng: crate::testing::Rng,
}

impl Sim {
    pub fn new(seed: u64) -> Sim {
        Sim {
            env: TestEnv::with_config(SchedulerConfig::default()),
            deps: HashMap::new(),
            data: HashMap::new(),
            running: Vec::new(),
            done: BTreeMap::new(),
            erred: BTreeMap::new(),
            flaky: HashMap::new(),
            alive: Vec::new(),
            next_worker: 0,
            failures: 0,
            repeats: 0,
            rng: crate::testing::Rng::new(seed),
        }
    }

    pub fn rand(&mut self, n: usize) -> usize {
        self.rng.below(n)
    }

    /// A random DAG of 40–99 tasks `t0..`, each reading up to 3 earlier ones.
    pub fn random_graph(&mut self) -> Vec<(String, Vec<String>)> {
        let n = 40 + self.rand(60);
        (0..n)
            .map(|i| {
                let ndeps = if i == 0 { 0 } else { self.rand(4).min(i) };
                let mut deps: Vec<String> = (0..ndeps).map(|_| format!("t{}", self.rand(i))).collect();
                deps.sort();
                deps.dedup();
                (format!("t{i}"), deps)
            })
            .collect()
    }

    /// A few distinct keys from the later half of a graph of `n` tasks.
    pub fn random_outputs(&mut self, n: usize) -> Vec<String> {
        let mut wanted: Vec<String> = (0..3).map(|_| format!("t{}", n / 2 + self.rand(n / 2))).collect();
        wanted.sort();
        wanted.dedup();
        wanted
    }

    /// Kill a random live worker, if there is one.
    pub fn kill_random_worker(&mut self) {
        if self.alive.is_empty() {
            return;
        }
        let i = self.rand(self.alive.len());
        let name = self.alive.swap_remove(i);
        self.kill(&name);
    }

    /// Start a new worker with 1–`max_threads` threads.
    pub fn add_random_worker(&mut self, max_threads: usize) {
        let name = format!("w{}", self.next_worker);
        self.next_worker += 1;
        let threads = 1 + self.rand(max_threads) as u32;
        self.add_worker(&name, threads);
        self.alive.push(name);
    }

    pub fn live_workers(&self) -> usize {
        self.alive.len()
    }

    pub fn submit(&mut self, tasks: &[(String, Vec<String>)], wanted: &[String]) {
        self.submit_with_retries(tasks, wanted, &HashMap::new());
    }

    /// Submit; tasks named in `retries` get that many retries, and the
    /// simulation may fail them (transiently) up to that many times.
    pub fn submit_with_retries(
        &mut self,
        tasks: &[(String, Vec<String>)],
        wanted: &[String],
        retries: &HashMap<String, u32>,
    ) {
        for (k, d) in tasks {
            self.deps.insert(k.clone(), d.clone());
        }
        let refs: Vec<Vec<&str>> =
            tasks.iter().map(|(_, d)| d.iter().map(String::as_str).collect()).collect();
        let shaped: Vec<(&str, &[&str])> =
            tasks.iter().zip(&refs).map(|((k, _), d)| (k.as_str(), &d[..])).collect();
        let wanted: Vec<&str> = wanted.iter().map(String::as_str).collect();
        let ann: Vec<(&str, Annotations)> = retries
            .iter()
            .map(|(k, n)| (k.as_str(), Annotations { retries: *n, ..Annotations::default() }))
            .collect();
        // A task submitted again keeps what is left of its failure budget:
        // the simulation never fails a task more often than it may retry.
        for (k, n) in retries {
            self.flaky.entry(k.clone()).or_insert(*n);
        }
        self.env.submit_annotated(&shaped, &wanted, &ann);
        self.absorb();
    }

    /// Fail one running task transiently (if it still may), else finish it;
    /// sometimes repeat the report late, as a slow network would.
    pub fn chaos_step(&mut self) -> bool {
        if self.running.is_empty() {
            return false;
        }
        let i = self.rand(self.running.len());
        let (w, t, run) = self.running[i];
        let key = self.env.keys[&t].clone();
        let may_fail = self.flaky.get(&key).copied().unwrap_or(0);
        if may_fail > 0 && self.rand(100) < 40 {
            self.running.swap_remove(i);
            self.flaky.insert(key, may_fail - 1);
            self.failures += 1;
            self.env.s.task_failed(w, t, run, TaskError::user("transient"), &mut self.env.out);
            self.env.check();
            self.absorb();
            return true;
        }
        let repeat = self.rand(100) < 10;
        let progressed = self.step_at(i);
        if repeat {
            self.repeats += 1;
            self.env.s.task_finished(w, t, run, 8, 50.0, &mut self.env.out);
            self.env.check();
            self.absorb();
        }
        progressed
    }

    /// A second client takes a reference to a key and drops it again.
    pub fn want_and_release(&mut self, key: &str) {
        let r = self.env.s.want(&Key::new(key), &mut self.env.out);
        assert!(r.is_ok(), "{key} is referenced, it must be known: {r:?}");
        self.env.check();
        self.absorb();
        self.release(key);
    }

    /// The value a task must have: computed directly from the definitions.
    pub fn expected(&self, key: &str) -> i64 {
        let mut memo: HashMap<&str, i64> = HashMap::new();
        let mut stack = vec![(key, false)];
        while let Some((k, expanded)) = stack.pop() {
            if memo.contains_key(k) {
                continue;
            }
            let ds = &self.deps[k];
            if expanded {
                let v = 1 + ds.iter().map(|d| memo[d.as_str()]).sum::<i64>();
                memo.insert(k, v);
            } else {
                stack.push((k, true));
                for d in ds {
                    stack.push((d.as_str(), false));
                }
            }
        }
        memo[key]
    }

    fn absorb(&mut self) {
        let actions = std::mem::take(&mut self.env.out);
        for a in actions {
            match a {
                Action::Run { worker, task, run, .. } => self.running.push((worker, task, run)),
                Action::Cancel { worker, task } => self.running.retain(|x| (x.0, x.1) != (worker, task)),
                Action::Free { worker, task } => {
                    self.data.remove(&(worker, task));
                }
                Action::Done { task } => {
                    let key = self.env.keys[&task].clone();
                    let holder = self.env.s.who_has(task)[0];
                    self.done.insert(key, self.data[&(holder, task)]);
                }
                Action::Erred { task, error } => {
                    self.erred.insert(self.env.keys[&task].clone(), error.message.clone());
                }
                Action::Forget { .. } | Action::Replicate { .. } => {}
            }
        }
    }

    /// Finish one running task (chosen at random): read inputs from any holder.
    pub fn step(&mut self) -> bool {
        if self.running.is_empty() {
            return false;
        }
        let i = self.rand(self.running.len());
        self.step_at(i)
    }

    fn step_at(&mut self, i: usize) -> bool {
        let (w, t, run) = self.running.swap_remove(i);
        let mut v = 1;
        for d in self.env.s.dependencies(t).to_vec() {
            let holder = self.env.s.who_has(d).first().copied();
            let value = holder.and_then(|h| self.data.get(&(h, d)).copied());
            v += value.unwrap_or_else(|| panic!("input {:?} of {:?} is nowhere", d, t));
        }
        self.data.insert((w, t), v);
        self.env.s.task_finished(w, t, run, 8, 50.0, &mut self.env.out);
        self.env.check();
        self.absorb();
        true
    }

    pub fn kill(&mut self, name: &str) {
        let w = self.env.ids[name];
        self.data.retain(|(x, _), _| *x != w);
        self.running.retain(|(x, _, _)| *x != w);
        self.env.kill(name);
        self.absorb();
    }

    pub fn add_worker(&mut self, name: &str, nthreads: u32) {
        self.env.worker(name, nthreads);
        self.absorb();
    }

    pub fn release(&mut self, key: &str) {
        self.env.release(key);
        self.absorb();
    }

    pub fn running(&self) -> usize {
        self.running.len()
    }
}
