//! What the dashboard shows, built from the engine's diagnostics (polled
//! snapshots and pushed events) and kept apart from the widgets that draw
//! it. Pure: every sample carries its own time, so tests drive the model
//! step by step and the widgets are tested on a model they build by hand.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use brisk_engine::client::WorkerInfo;
use brisk_engine::diagnostics::{Event, GroupProgress, Snapshot};
use brisk_engine::gpu::Gpus;

/// Memory samples kept for the memory-over-time view (at 4 Hz: 2 minutes).
const MEMORY_HISTORY: usize = 480;
/// Task-stream entries kept.
const STREAM: usize = 20_000;
/// Lines of programs' output kept for the log view.
const LOG: usize = 500;
/// Tasks per second are measured over this window.
const RATE_WINDOW: Duration = Duration::from_secs(2);

/// One observation of the runtime and the host.
#[derive(Clone, Debug)]
pub struct Sample {
    /// Time since the model was created.
    pub at: Duration,
    pub snapshot: Snapshot,
    /// CPU seconds this process has used so far (`None`: unknown here).
    pub cpu_seconds: Option<f64>,
    /// Total memory of the machine: the local worker's memory limit.
    pub memory_limit: Option<u64>,
    pub gpus: Gpus,
    /// The cluster's workers when the session is connected to one.
    pub cluster: Option<Vec<WorkerInfo>>,
}

/// A row of the worker table.
#[derive(Clone, Debug, PartialEq)]
pub struct Worker {
    pub name: String,
    pub threads_busy: usize,
    pub threads: usize,
    pub memory: u64,
    pub memory_limit: Option<u64>,
    pub spilled: u64,
    /// Percent of one core, as Dask's worker table (800% = 8 busy cores).
    pub cpu_percent: Option<f64>,
    pub gpus: Gpus,
    /// A cluster worker's GPU as it reported it ("NAME, N GiB" or "no GPU").
    pub gpu_label: Option<String>,
}

/// Progress of one group since the model's baseline.
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    pub name: Arc<str>,
    pub total: u64,
    /// Finished (in memory, released after use, or erred).
    pub done: u64,
    pub in_memory: u64,
    pub erred: u64,
    pub processing: u64,
}

/// A task that ran, for the task stream.
#[derive(Clone, Debug, PartialEq)]
pub struct Ran {
    pub group: Arc<str>,
    pub thread: usize,
    pub start_us: u64,
    pub stop_us: u64,
    pub ok: bool,
}

#[derive(Clone, Debug)]
pub struct Model {
    pub worker: Worker,
    /// One row per worker of the connected cluster (empty when local).
    pub cluster: Vec<Worker>,
    pub groups: Vec<Group>,
    pub tasks_per_second: f64,
    /// Time since the first sample.
    pub elapsed: Duration,
    /// (time, bytes in memory), oldest first.
    pub memory: VecDeque<(Duration, u64)>,
    pub stream: VecDeque<Ran>,
    /// Lines programs run as tasks printed (`run_command`), oldest first;
    /// on a cluster each begins with its worker's name.
    pub log: VecDeque<Arc<str>>,
    /// Group counts when the model started: progress counts from here.
    baseline: HashMap<Arc<str>, (u64, u64, u64)>,
    first: Option<Duration>,
    /// (time, tasks done) for the rate.
    done_history: VecDeque<(Duration, u64)>,
    last_cpu: Option<(Duration, f64)>,
    group_names: HashMap<String, Arc<str>>,
}

impl Model {
    /// A model whose progress counts from `base` (the runtime as it was
    /// when the work to watch began).
    pub fn new(base: &Snapshot) -> Model {
        Model {
            worker: Worker {
                name: "local".into(),
                threads_busy: 0,
                threads: base.threads,
                memory: base.memory_bytes,
                memory_limit: None,
                spilled: 0,
                cpu_percent: None,
                gpus: Gpus::None("not probed yet".into()),
                gpu_label: None,
            },
            cluster: Vec::new(),
            groups: Vec::new(),
            tasks_per_second: 0.0,
            elapsed: Duration::ZERO,
            memory: VecDeque::new(),
            stream: VecDeque::new(),
            log: VecDeque::new(),
            baseline: base.groups.iter().map(|g| (g.name.clone(), (g.total, g.done, g.erred))).collect(),
            first: None,
            done_history: VecDeque::new(),
            last_cpu: None,
            group_names: HashMap::new(),
        }
    }

    pub fn update(&mut self, s: Sample) {
        let first = *self.first.get_or_insert(s.at);
        self.elapsed = s.at.saturating_sub(first);
        let snap = &s.snapshot;
        let mut groups: Vec<Group> = snap.groups.iter().filter_map(|g| self.relative(g)).collect();
        // A group whose tasks were released (an interrupt, an error) leaves
        // the snapshot: keep its last state, so the summary still counts it.
        for old in &self.groups {
            if !groups.iter().any(|g| g.name == old.name) {
                groups.push(old.clone());
            }
        }
        self.groups = groups;
        let done: u64 = self.groups.iter().map(|g| g.done).sum();
        self.done_history.push_back((s.at, done));
        while self.done_history.front().is_some_and(|&(t, _)| s.at.saturating_sub(t) > RATE_WINDOW) {
            self.done_history.pop_front();
        }
        self.tasks_per_second = match (self.done_history.front(), self.done_history.back()) {
            (Some(&(t0, d0)), Some(&(t1, d1))) if t1 > t0 => {
                d1.saturating_sub(d0) as f64 / (t1 - t0).as_secs_f64()
            }
            _ => 0.0,
        };
        let cpu_percent = match (self.last_cpu, s.cpu_seconds) {
            (Some((t0, c0)), Some(c1)) if s.at > t0 => {
                Some(100.0 * (c1 - c0).max(0.0) / (s.at - t0).as_secs_f64())
            }
            _ => self.worker.cpu_percent,
        };
        if let Some(c) = s.cpu_seconds {
            self.last_cpu = Some((s.at, c));
        }
        self.worker = Worker {
            name: "local".into(),
            threads_busy: snap.busy_threads,
            threads: snap.threads,
            memory: snap.memory_bytes,
            memory_limit: s.memory_limit,
            spilled: 0,
            cpu_percent,
            gpus: s.gpus,
            gpu_label: None,
        };
        self.cluster = s
            .cluster
            .unwrap_or_default()
            .into_iter()
            .map(|w| Worker {
                threads_busy: w.running.min(w.threads),
                threads: w.threads,
                memory: w.memory,
                memory_limit: w.memory_limit,
                spilled: w.spilled,
                cpu_percent: None,
                gpus: Gpus::None(String::new()),
                gpu_label: Some(w.gpu_line()),
                name: w.name,
            })
            .collect();
        self.memory.push_back((s.at, snap.memory_bytes));
        if self.memory.len() > MEMORY_HISTORY {
            self.memory.pop_front();
        }
    }

    /// A group's counts since the baseline; `None` for a group untouched
    /// since then (earlier work stays off the panel).
    fn relative(&self, g: &GroupProgress) -> Option<Group> {
        let (t0, d0, e0) = self.baseline.get(&g.name).copied().unwrap_or((0, 0, 0));
        let pending = g.waiting + g.queued + g.processing;
        if g.total == t0 && g.done == d0 && pending == 0 {
            return None;
        }
        let done = g.done.saturating_sub(d0);
        Some(Group {
            name: g.name.clone(),
            total: g.total.saturating_sub(t0).max(done + pending),
            done,
            in_memory: g.in_memory,
            erred: g.erred.saturating_sub(e0),
            processing: g.processing,
        })
    }

    /// Take in pushed events (the task stream).
    pub fn events(&mut self, events: impl IntoIterator<Item = Event>) {
        for e in events {
            if let Event::Output { line, .. } = e {
                self.log.push_back(line);
                if self.log.len() > LOG {
                    self.log.pop_front();
                }
            } else if let Event::TaskRan { key, thread, start_us, stop_us, ok } = e {
                let name = key.group();
                let group = match self.group_names.get(name) {
                    Some(g) => g.clone(),
                    None => {
                        let g: Arc<str> = Arc::from(name);
                        self.group_names.insert(name.to_string(), g.clone());
                        g
                    }
                };
                self.stream.push_back(Ran { group, thread, start_us, stop_us, ok });
                if self.stream.len() > STREAM {
                    self.stream.pop_front();
                }
            }
        }
    }

    /// (done, total) over the groups shown.
    pub fn totals(&self) -> (u64, u64) {
        self.groups.iter().fold((0, 0), |(d, t), g| (d + g.done, t + g.total))
    }

    pub fn erred(&self) -> u64 {
        self.groups.iter().map(|g| g.erred).sum()
    }

    /// The line left behind when the panel clears.
    pub fn summary(&self) -> String {
        let (done, total) = self.totals();
        let erred = self.erred();
        let mut s = format!("{done}/{total} tasks in {:.1} s", self.elapsed.as_secs_f64());
        if self.elapsed.as_secs_f64() > 0.0 {
            s += &format!(" ({} tasks/s)", thousands(done as f64 / self.elapsed.as_secs_f64()));
        }
        if erred > 0 {
            s += &format!(", {erred} erred");
        }
        s += &format!(", peak memory {}", bytes(self.memory.iter().map(|m| m.1).max().unwrap_or(0)));
        s
    }
}

/// `1.5 GiB`, `12.0 MiB`, `512 B`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1} {}", UNITS[u])
}

/// `12,345`, rounded.
pub fn thousands(v: f64) -> String {
    let n = v.round().max(0.0) as u64;
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use brisk_engine::Key;

    fn group(name: &str, total: u64, done: u64, processing: u64, erred: u64) -> GroupProgress {
        GroupProgress {
            name: Arc::from(name),
            total,
            done,
            erred,
            waiting: total - done - processing,
            queued: 0,
            processing,
            in_memory: done - erred,
        }
    }

    fn sample(ms: u64, groups: Vec<GroupProgress>, cpu: f64, memory: u64) -> Sample {
        Sample {
            at: Duration::from_millis(ms),
            snapshot: Snapshot {
                groups,
                memory_bytes: memory,
                threads: 4,
                busy_threads: 3,
                transitions: 0,
                tasks_held: 0,
            },
            cpu_seconds: Some(cpu),
            memory_limit: Some(8 << 30),
            gpus: Gpus::None("no GPU device".into()),
            cluster: None,
        }
    }

    #[test]
    fn progress_counts_from_the_baseline() {
        // "inc" finished before the panel opened: it stays off the panel.
        let base = Snapshot { groups: vec![group("inc", 10, 10, 0, 0)], threads: 4, ..Default::default() };
        let mut m = Model::new(&base);
        m.update(sample(0, vec![group("inc", 10, 10, 0, 0), group("sum", 100, 0, 4, 0)], 1.0, 0));
        assert_eq!(m.groups.len(), 1);
        assert_eq!((m.groups[0].done, m.groups[0].total), (0, 100));
        m.update(sample(500, vec![group("inc", 20, 12, 4, 0), group("sum", 100, 50, 4, 1)], 2.5, 1 << 20));
        let names: Vec<&str> = m.groups.iter().map(|g| &*g.name).collect();
        assert_eq!(names, ["inc", "sum"]);
        assert_eq!((m.groups[0].done, m.groups[0].total), (2, 10), "inc counts its new tasks only");
        assert_eq!(m.totals(), (52, 110));
        assert_eq!(m.erred(), 1);
        // 52 tasks in 0.5 s; 1.5 CPU seconds in 0.5 s is 300%.
        assert!((m.tasks_per_second - 104.0).abs() < 1e-9, "{}", m.tasks_per_second);
        assert_eq!(m.worker.cpu_percent.map(|c| c.round()), Some(300.0));
        assert_eq!((m.worker.threads_busy, m.worker.threads, m.worker.memory), (3, 4, 1 << 20));
        assert_eq!(m.elapsed, Duration::from_millis(500));
        m.update(sample(1000, vec![group("inc", 20, 20, 0, 0), group("sum", 100, 100, 0, 1)], 3.0, 0));
        assert!(m.groups.iter().all(|g| g.done == g.total));
        assert_eq!(m.summary(), "110/110 tasks in 1.0 s (110 tasks/s), 1 erred, peak memory 1.0 MiB");
    }

    #[test]
    fn a_released_group_stays_in_the_summary() {
        let mut m = Model::new(&Snapshot::default());
        m.update(sample(0, vec![group("lambda", 1, 0, 1, 0)], 0.0, 0));
        m.update(sample(200, vec![], 0.1, 0));
        assert_eq!(m.totals(), (0, 1));
        assert!(m.summary().starts_with("0/1 tasks in 0.2 s"), "{}", m.summary());
    }

    #[test]
    fn the_task_stream_keeps_groups_and_threads() {
        let mut m = Model::new(&Snapshot::default());
        let key = Key::block(Arc::from("sum-0123456789abcdef"), &[3]);
        m.events([
            Event::TaskRan { key: key.clone(), thread: 2, start_us: 10, stop_us: 20, ok: true },
            Event::Memory { bytes: 5 },
            Event::TaskRan { key, thread: 1, start_us: 15, stop_us: 30, ok: false },
        ]);
        assert_eq!(m.stream.len(), 2);
        assert_eq!(&*m.stream[0].group, key_group());
        assert!(Arc::ptr_eq(&m.stream[0].group, &m.stream[1].group), "group names are shared");
        assert_eq!((m.stream[1].thread, m.stream[1].ok), (1, false));
    }

    #[test]
    fn the_log_keeps_the_latest_lines_of_programs() {
        let mut m = Model::new(&Snapshot::default());
        let key = Key::block(Arc::from("run_command-0123456789abcdef"), &[0]);
        m.events(
            (0..LOG + 3).map(|i| Event::Output { key: key.clone(), line: Arc::from(format!("line {i}")) }),
        );
        assert_eq!(m.log.len(), LOG);
        assert_eq!((&*m.log[0], &*m.log[LOG - 1]), ("line 3", &*format!("line {}", LOG + 2)));
        assert!(m.stream.is_empty(), "output is not a task that ran");
    }

    fn key_group() -> &'static str {
        brisk_engine::key::group_of("sum-0123456789abcdef")
    }

    #[test]
    fn sizes_read_well() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(3 << 29), "1.5 GiB");
        assert_eq!(thousands(1234567.4), "1,234,567");
        assert_eq!(thousands(12.0), "12");
    }
}
