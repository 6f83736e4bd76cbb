//! `validate()`: every invariant of the state machine, checked from scratch.
//! Tests call it after every stimulus (Dask's `validate_state`).

use super::{Scheduler, TaskState, WorkerId};

impl Scheduler {
    /// Check all invariants; the error names the first one broken.
    pub fn validate(&self) -> Result<(), String> {
        let mut counts = vec![[0u64; super::NSTATES]; self.groups.len()];
        if self.keys.len() != self.tasks.len() {
            return Err(format!("{} keys but {} tasks", self.keys.len(), self.tasks.len()));
        }
        for (id, r) in self.tasks.iter() {
            let t = super::TaskId(id);
            let key = &r.key;
            if self.keys.get(key) != Some(&t) {
                return Err(format!("{key}: key map points elsewhere"));
            }
            counts[r.group as usize][r.state.index()] += 1;
            let deps: Vec<_> = r.deps.iter().map(|d| self.tasks.get(d.0)).collect();
            if deps.iter().any(Option::is_none) {
                return Err(format!("{key}: depends on a forgotten task"));
            }
            let deps: Vec<_> = deps.into_iter().flatten().collect();
            let not_in_memory = deps.iter().filter(|d| d.state != TaskState::Memory).count() as u32;
            let live: Vec<_> = r.dependents.iter().filter_map(|d| self.tasks.get(d.0)).collect();
            if live.len() as u32 != r.live_dependents {
                return Err(format!("{key}: live_dependents {} but {} live", r.live_dependents, live.len()));
            }
            let active = live.iter().filter(|d| d.state.is_active()).count() as u32;
            if active != r.waiters {
                return Err(format!("{key}: waiters {} but {active} active dependents", r.waiters));
            }
            if r.state.is_active() && r.wants == 0 && r.waiters == 0 {
                return Err(format!("{key}: {} but nobody needs it", r.state.name()));
            }
            if r.state == TaskState::Memory && r.wants == 0 && r.waiters == 0 {
                return Err(format!("{key}: in memory but nobody needs it"));
            }
            if (r.state == TaskState::Memory) == r.who_has.is_empty() {
                return Err(format!("{key}: state {} with who_has {:?}", r.state.name(), r.who_has));
            }
            if (r.state == TaskState::Processing) != r.processing_on.is_some() {
                return Err(format!(
                    "{key}: state {} with processing_on {:?}",
                    r.state.name(),
                    r.processing_on
                ));
            }
            match r.state {
                TaskState::Waiting => {
                    if r.waiting_on != not_in_memory || r.waiting_on == 0 {
                        return Err(format!(
                            "{key}: waiting_on {} but {not_in_memory} inputs missing",
                            r.waiting_on
                        ));
                    }
                }
                TaskState::Queued | TaskState::Processing => {
                    if not_in_memory > 0 {
                        return Err(format!("{key}: {} with {not_in_memory} inputs missing", r.state.name()));
                    }
                }
                TaskState::Released | TaskState::Erred | TaskState::Memory => {}
            }
            if matches!(r.state, TaskState::Released | TaskState::Erred)
                && r.wants == 0
                && r.live_dependents == 0
            {
                return Err(format!("{key}: should have been forgotten"));
            }
            for w in &r.who_has {
                if !self.workers.get(w.0).is_some_and(|wr| wr.has_what.contains(&t)) {
                    return Err(format!("{key}: who_has {w:?} which does not hold it"));
                }
            }
            if let Some(w) = r.processing_on
                && !self.workers.get(w.0).is_some_and(|wr| wr.processing.contains(&t))
            {
                return Err(format!("{key}: processing on {w:?} which does not list it"));
            }
        }
        for (g, c) in self.groups.iter().zip(&counts) {
            if g.states != *c {
                return Err(format!("group {}: counts {:?} but tasks say {c:?}", g.name, g.states));
            }
        }
        for (id, wr) in self.workers.iter() {
            let w = WorkerId(id);
            for t in &wr.has_what {
                if !self.tasks.get(t.0).is_some_and(|r| r.who_has.contains(&w)) {
                    return Err(format!("worker {}: holds a task that does not list it", wr.name));
                }
            }
            let mut used = vec![0.0; wr.resources.len()];
            for t in &wr.processing {
                let Some(r) = self.tasks.get(t.0) else {
                    return Err(format!("worker {}: processing a forgotten task", wr.name));
                };
                if r.processing_on != Some(w) {
                    return Err(format!("worker {}: lists {} which runs elsewhere", wr.name, r.key));
                }
                for (rid, amount) in &r.resources {
                    used[*rid as usize] += amount;
                }
            }
            for (i, u) in used.iter().enumerate() {
                if (wr.available[i] + u - wr.resources[i]).abs() > 1e-9 {
                    return Err(format!(
                        "worker {}: resource {} accounting is off",
                        wr.name, self.resource_names[i]
                    ));
                }
            }
            if !wr.seceded.is_subset(&wr.processing) {
                return Err(format!("worker {}: a seceded task is not processing there", wr.name));
            }
            let free = !wr.paused && wr.active() < self.slots(w);
            if free != wr.free_pos.is_some() || wr.free_pos.is_some_and(|p| self.free.get(p) != Some(&w)) {
                return Err(format!("worker {}: free-set membership is wrong", wr.name));
            }
        }
        // Every ready task without a worker waits in a queue: none is lost.
        let waiting_in_queues: rustc_hash::FxHashSet<super::TaskId> = self
            .queue
            .iter()
            .map(|std::cmp::Reverse((_, t))| *t)
            .chain(self.restricted.values().flat_map(|q| q.iter().map(|std::cmp::Reverse((_, t))| *t)))
            .collect();
        for (id, r) in self.tasks.iter() {
            if r.state == TaskState::Queued && !waiting_in_queues.contains(&super::TaskId(id)) {
                return Err(format!("{}: queued but in no queue", r.key));
            }
        }
        if !self.free.is_empty() {
            let queued_roots = self.queue.iter().any(|std::cmp::Reverse((_, t))| {
                self.tasks.get(t.0).is_some_and(|r| r.state == TaskState::Queued && r.processing_on.is_none())
            });
            if queued_roots {
                return Err("a worker has a free slot while ready tasks are queued".into());
            }
        }
        Ok(())
    }
}
