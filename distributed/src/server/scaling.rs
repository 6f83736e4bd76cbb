//! The scheduler's side of scaling: the [`Load`] adaptive scaling decides
//! on, retiring workers by name, how long the scheduler has been idle, and
//! the JSON endpoints Dask's deployment tools call on its HTTP port
//! (`/api/v1/adaptive_target`, `/api/v1/retire_workers`,
//! `/api/v1/get_workers`, `/api/v1/check_idle`).

use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use brisk_engine::key::Key;
use brisk_engine::scheduler::TaskState;
use rustc_hash::FxHashMap;

use super::{ConnId, State};
use crate::deploy::adaptive::{self, GroupLoad, Load, Rule, WorkerLoad};
use crate::protocol::{AdaptiveAnswer, AdaptiveRule};

/// What the scheduler keeps for scaling.
#[derive(Default)]
pub(super) struct Scaling {
    /// Per task group seen running: while none of its tasks has finished,
    /// when the first was sent to a worker (its duration is unknown, but
    /// at least this); `None` once it has a measured duration.
    first_run: FxHashMap<Arc<str>, Option<Instant>>,
    /// Since when no task waits, is queued or runs.
    idle_since: Option<Instant>,
}

impl State {
    /// A task of `key`'s group goes to a worker.
    pub(super) fn note_run(&mut self, key: &Key) {
        // One lookup per task: groups are scanned only the first time.
        let group = key.group();
        if self.scaling.first_run.contains_key(group) {
            return;
        }
        let measured = self.core.groups().iter().any(|g| &*g.name == group && g.finished_runs > 0);
        self.scaling.first_run.insert(Arc::from(group), (!measured).then(Instant::now));
    }

    /// On the tick: is there work, and which groups got measured.
    pub(super) fn scaling_tick(&mut self) {
        let counts = self.core.state_counts();
        let active = [TaskState::Waiting, TaskState::Queued, TaskState::Processing]
            .iter()
            .any(|s| counts[*s as usize] > 0);
        if active {
            self.scaling.idle_since = None;
        } else if self.scaling.idle_since.is_none() {
            self.scaling.idle_since = Some(Instant::now());
        }
        if self.scaling.first_run.values().any(Option::is_some) {
            for g in self.core.groups().iter().filter(|g| g.finished_runs > 0) {
                if let Some(t) = self.scaling.first_run.get_mut(&g.name) {
                    *t = None;
                }
            }
        }
    }

    /// The work and the workers, for [`adaptive::target`].
    pub(super) fn load(&self) -> Load {
        let groups = self
            .core
            .groups()
            .iter()
            .map(|g| {
                let mean = (g.finished_runs > 0).then(|| g.duration_us / g.finished_runs as f64 / 1e6);
                let running_for = match (mean, self.scaling.first_run.get(&g.name)) {
                    (None, Some(Some(t))) => t.elapsed().as_secs_f64(),
                    _ => 0.0,
                };
                GroupLoad {
                    queued: g.in_state(TaskState::Queued),
                    processing: g.in_state(TaskState::Processing),
                    mean,
                    running_for,
                }
            })
            .filter(|g| g.queued + g.processing > 0)
            .collect();
        let waiting = self.core.state_counts()[TaskState::Waiting as usize];
        let info: FxHashMap<_, _> = self.core.workers().into_iter().map(|w| (w.id, w)).collect();
        let workers = self
            .workers
            .iter()
            .map(|(conn, w)| {
                let i = info.get(&w.id);
                WorkerLoad {
                    name: w.name.to_string(),
                    nthreads: w.nthreads,
                    processing: i.map_or(0, |i| i.processing as u64),
                    held: i.map_or(0, |i| i.held as u64),
                    held_bytes: i.map_or(0, |i| i.held_bytes),
                    memory_limit: w.memory_limit,
                    retiring: self.retiring.contains_key(conn),
                }
            })
            .collect();
        Load { groups, waiting, workers }
    }

    pub(super) fn adaptive(&self, rule: &AdaptiveRule) -> AdaptiveAnswer {
        let rule = Rule {
            target_duration: rule.target_duration,
            threads_per_worker: rule.threads_per_worker,
            ..Rule::default()
        };
        let load = self.load();
        let target = adaptive::target(&load, &rule);
        let mut workers: Vec<String> = load.workers.iter().map(|w| w.name.clone()).collect();
        workers.sort();
        AdaptiveAnswer {
            target: target as u64,
            to_close: adaptive::workers_to_close(&load, target),
            workers,
            idle_for: self.scaling.idle_since.map(|t| t.elapsed().as_secs_f64()),
        }
    }

    /// Retire the workers named (or whose data address is given): their
    /// results move to other workers, then they close. The names retired.
    pub(super) fn retire_named(&mut self, names: &[String]) -> Vec<String> {
        let names: rustc_hash::FxHashSet<&str> = names.iter().map(String::as_str).collect();
        let chosen: Vec<(ConnId, String)> = self
            .workers
            .iter()
            .filter(|(_, w)| names.contains(&*w.name) || names.contains(w.address.as_str()))
            .map(|(c, w)| (*c, w.name.to_string()))
            .collect();
        for (conn, _) in &chosen {
            let Some(w) = self.workers.get(conn) else { continue };
            let id = w.id;
            self.retiring.entry(*conn).or_insert_with(Instant::now);
            self.core.retire_worker(id, &mut self.out);
        }
        self.check_retiring();
        chosen.into_iter().map(|(_, n)| n).collect()
    }

    /// `GET /api/v1/adaptive_target[?target_duration=5s]`: `{"workers": n}`.
    pub(super) fn http_adaptive_target(&self, target_duration: Option<f64>) -> String {
        let target_duration = target_duration.unwrap_or(Rule::default().target_duration);
        let rule = AdaptiveRule { target_duration, threads_per_worker: 1 };
        serde_json::json!({ "workers": self.adaptive(&rule).target }).to_string()
    }

    /// `GET /api/v1/get_workers`.
    pub(super) fn http_get_workers(&self) -> String {
        let workers: Vec<serde_json::Value> = self
            .rows()
            .into_iter()
            .map(|w| {
                serde_json::json!({
                    "name": w.name, "address": w.address, "nthreads": w.threads,
                    "memory_limit": w.memory_limit, "processing": w.processing,
                })
            })
            .collect();
        serde_json::json!({ "num_workers": workers.len(), "workers": workers }).to_string()
    }

    /// `GET /api/v1/check_idle`: `{"idle_since": unix seconds | null}`.
    pub(super) fn http_check_idle(&self) -> String {
        let since = self.scaling.idle_since.map(|t| {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
            now - t.elapsed().as_secs_f64()
        });
        serde_json::json!({ "idle_since": since }).to_string()
    }

    /// `POST /api/v1/retire_workers` with `{"n": k}` or `{"workers": [names or addresses]}`:
    /// the workers retired, by address, as Dask answers.
    pub(super) fn http_retire_workers(&mut self, body: &str) -> Result<String, String> {
        let v: serde_json::Value =
            serde_json::from_str(body).map_err(|e| format!("the body is not JSON: {e}"))?;
        let names: Vec<String> = if let Some(list) = v.get("workers") {
            let list = list.as_array().ok_or("\"workers\" must be a list of names or addresses")?;
            list.iter()
                .map(|x| x.as_str().map(str::to_string).ok_or("\"workers\" must be a list of strings"))
                .collect::<Result<_, _>>()?
        } else if let Some(n) = v.get("n") {
            let n = n.as_u64().ok_or("\"n\" must be a non-negative integer")?;
            let load = self.load();
            let keep = load.workers.iter().filter(|w| !w.retiring).count().saturating_sub(n as usize);
            adaptive::workers_to_close(&load, keep)
        } else {
            return Err("give {\"n\": K} or {\"workers\": [...]}".into());
        };
        let retired = self.retire_named(&names);
        let rows = self.rows();
        let mut out = serde_json::Map::new();
        for name in retired {
            if let Some(r) = rows.iter().find(|r| r.name == name) {
                out.insert(r.address.clone(), serde_json::json!({ "name": r.name, "address": r.address }));
            } else {
                out.insert(name.clone(), serde_json::json!({ "name": name }));
            }
        }
        Ok(serde_json::Value::Object(out).to_string())
    }
}
