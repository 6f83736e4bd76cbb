//! The stimuli: each public method is one event from outside (a client, a
//! worker) and runs the transitions it implies. Cascades (releasing a chain,
//! failing dependents, forgetting) use explicit worklists, never recursion,
//! so graphs of any depth are safe.

use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

use super::{
    Action, Known, NewTask, Priority, Scheduler, TaskId, TaskRec, TaskState, WorkerId, WorkerRec, WorkerSpec,
};
use crate::error::{SchedulerError, TaskError, TaskErrorKind};
use crate::key::Key;

impl Scheduler {
    /// A worker joined. Queued work may go to it at once.
    pub fn add_worker(&mut self, spec: WorkerSpec, out: &mut Vec<Action>) -> WorkerId {
        self.stimulus += 1;
        let ids: Vec<(u16, f64)> =
            spec.resources.iter().map(|(name, amount)| (self.resource_id(name), *amount)).collect();
        let mut resources = vec![0.0; self.resource_names.len()];
        for (id, amount) in ids {
            resources[id as usize] += amount.max(0.0);
        }
        let rec = WorkerRec {
            name: spec.name,
            nthreads: spec.nthreads.max(1),
            available: resources.clone(),
            resources,
            processing: FxHashSet::default(),
            seceded: FxHashSet::default(),
            has_what: FxHashSet::default(),
            held_bytes: 0,
            free_pos: None,
            paused: false,
            retiring: false,
        };
        let w = WorkerId(self.workers.insert(rec));
        self.update_free(w);
        self.restricted_dirty = true;
        self.after_stimulus(out);
        w
    }

    /// Worker `w` now offers `amount` of a resource in all (a local worker
    /// offers `GPU` once a graph needs it); what is in use stays in use.
    pub fn set_resource(&mut self, w: WorkerId, name: &str, amount: f64, out: &mut Vec<Action>) {
        self.stimulus += 1;
        let id = self.resource_id(name) as usize;
        let Some(wr) = self.workers.get_mut(w.0) else { return };
        let amount = amount.max(0.0);
        let in_use = wr.resources[id] - wr.available[id];
        wr.resources[id] = amount;
        wr.available[id] = (amount - in_use).max(0.0);
        self.restricted_dirty = true;
        self.after_stimulus(out);
    }

    /// A worker's memory passed its pause threshold (`true`) or fell back:
    /// a paused worker keeps its running tasks and results but gets no new
    /// task; others take the work meanwhile.
    pub fn pause_worker(&mut self, w: WorkerId, paused: bool, out: &mut Vec<Action>) {
        self.stimulus += 1;
        let Some(wr) = self.workers.get_mut(w.0) else { return };
        if wr.paused == paused || wr.retiring {
            return;
        }
        wr.paused = paused;
        self.update_free(w);
        self.restricted_dirty = true;
        self.after_stimulus(out);
    }

    /// Worker `w` is leaving on purpose (Dask's `retire_workers`): it gets
    /// no new task, the tasks it was given go elsewhere (cancelled there),
    /// and each result only it holds that is still needed gets a copy on
    /// another worker (`Replicate`). Once `retired(w)`, the runtime closes
    /// it (`worker_closed`); nothing it made is then computed again.
    pub fn retire_worker(&mut self, w: WorkerId, out: &mut Vec<Action>) {
        self.stimulus += 1;
        let Some(wr) = self.workers.get_mut(w.0) else { return };
        wr.retiring = true;
        wr.paused = true;
        self.update_free(w);
        self.restricted_dirty = true;
        let mut running: Vec<TaskId> =
            self.workers.get(w.0).map(|wr| wr.processing.iter().copied().collect()).unwrap_or_default();
        running.sort_unstable_by_key(|t| self.rec(*t).priority);
        for t in running {
            out.push(Action::Cancel { worker: w, task: t });
            self.reschedule(t, w, out);
        }
        let mut held: Vec<TaskId> =
            self.workers.get(w.0).map(|wr| wr.has_what.iter().copied().collect()).unwrap_or_default();
        held.retain(|t| self.needs_copy(*t, w));
        held.sort_unstable_by_key(|t| self.rec(*t).priority);
        // Spread over the workers that take work, the emptiest first.
        let mut targets: Vec<(u64, WorkerId)> = self
            .workers
            .iter()
            .filter(|(id, wr)| *id != w.0 && !wr.paused)
            .map(|(id, wr)| (wr.held_bytes, WorkerId(id)))
            .collect();
        targets.sort_unstable();
        for (t, &(_, to)) in held.into_iter().zip(targets.iter().cycle()) {
            out.push(Action::Replicate { task: t, from: w, to });
        }
        self.after_stimulus(out);
    }

    /// Whether retiring worker `w` may go: it runs nothing and every
    /// needed result it holds has a copy elsewhere (or there is no other
    /// worker to copy to).
    pub fn retired(&self, w: WorkerId) -> bool {
        self.retired_or_stranded(w)
    }

    /// Retiring worker `w` holds needed results only it has and there is no
    /// worker to copy them to (all others leave too): a worker that joins
    /// soon can take them (`retire_worker` again sends the copies).
    pub fn stranded(&self, w: WorkerId) -> bool {
        let Some(wr) = self.workers.get(w.0) else { return false };
        self.copy_target(w).is_none() && wr.has_what.iter().any(|t| self.needs_copy(*t, w))
    }

    fn retired_or_stranded(&self, w: WorkerId) -> bool {
        let Some(wr) = self.workers.get(w.0) else { return true };
        wr.processing.is_empty()
            && (self.copy_target(w).is_none() || wr.has_what.iter().all(|t| !self.needs_copy(*t, w)))
    }

    /// `t`'s result lives only on `w` and is still needed; a copy can serve.
    fn needs_copy(&self, t: TaskId, w: WorkerId) -> bool {
        let r = self.rec(t);
        r.state == TaskState::Memory && r.who_has == [w] && (r.wants > 0 || r.waiters > 0) && !r.pinned
    }

    /// The worker a copy of a result on `from` goes to: the one holding
    /// the fewest bytes that takes work.
    fn copy_target(&self, from: WorkerId) -> Option<WorkerId> {
        self.workers
            .iter()
            .filter(|(id, wr)| WorkerId(*id) != from && !wr.paused)
            .min_by_key(|(id, wr)| (wr.held_bytes, *id))
            .map(|(id, _)| WorkerId(id))
    }

    /// A worker died: its running tasks are rescheduled (each counting a
    /// death toward `KilledWorker`) and every result that lived only there
    /// is recomputed from lineage if still needed.
    pub fn remove_worker(&mut self, w: WorkerId, out: &mut Vec<Action>) {
        self.remove(w, true, out);
    }

    /// A worker left on purpose: as `remove_worker`, but its tasks were
    /// not running when it died, so none of them grows more suspicious.
    pub fn worker_closed(&mut self, w: WorkerId, out: &mut Vec<Action>) {
        self.remove(w, false, out);
    }

    fn remove(&mut self, w: WorkerId, died: bool, out: &mut Vec<Action>) {
        self.stimulus += 1;
        self.remove_from_free(w);
        let Some(wr) = self.workers.remove(w.0) else { return };
        let mut running: Vec<TaskId> = wr.processing.into_iter().collect();
        running.sort_unstable_by_key(|t| self.rec(*t).priority);
        let mut held: Vec<TaskId> = wr.has_what.into_iter().collect();
        held.sort_unstable_by_key(|t| self.rec(*t).priority);

        // Running tasks stay active; park them as queued until lost inputs are known.
        for &t in &running {
            let r = self.rec_mut(t);
            r.processing_on = None;
            r.suspicious += u32::from(died);
            self.set_state(t, TaskState::Queued);
        }
        let mut unneeded = Vec::new();
        for &t in &held {
            let r = self.rec_mut(t);
            r.who_has.retain(|x| *x != w);
            if r.who_has.is_empty() && r.state == TaskState::Memory {
                self.lose(t, out, &mut unneeded);
            }
        }
        let limit = self.config.allowed_failures;
        let mut failed = Vec::new();
        for &t in &running {
            let r = self.rec(t);
            if r.suspicious > limit {
                let error = TaskError {
                    kind: TaskErrorKind::KilledWorker,
                    message: format!(
                        "task {} was running on {} workers that died (allowed failures: {limit})",
                        r.key, r.suspicious
                    ),
                    position: None,
                };
                failed.push((t, Arc::new(error)));
            } else if r.state == TaskState::Queued {
                self.make_ready(t, out);
            }
        }
        for (t, e) in failed {
            self.fail(t, e, out, &mut unneeded);
        }
        self.process_unneeded(unneeded, out);
        self.after_stimulus(out);
    }

    /// Add tasks and client references. Keys already known are not added
    /// again (equal keys are equal work), so shared sub-graphs run once.
    /// Validates the whole submission before changing anything.
    pub fn submit(
        &mut self,
        tasks: Vec<NewTask>,
        wanted: &[Key],
        out: &mut Vec<Action>,
    ) -> Result<(), SchedulerError> {
        self.restore(tasks, wanted, Known::default(), out)
    }

    /// `submit` for a scheduler restarted from its journal: the tasks
    /// (with their references), and what is known of them besides. Results
    /// workers still hold are in memory from the start and errors stay
    /// errors, so only what was lost is computed again; a held result
    /// nothing needs is freed at once.
    pub fn restore(
        &mut self,
        tasks: Vec<NewTask>,
        wanted: &[Key],
        known: Known,
        out: &mut Vec<Action>,
    ) -> Result<(), SchedulerError> {
        let order = self.validate_submission(&tasks, wanted)?;
        self.stimulus += 1;
        self.generation += 1;
        let generation = self.generation;
        let mut slots: Vec<Option<NewTask>> = tasks.into_iter().map(Some).collect();
        let mut added = Vec::with_capacity(order.len());
        for i in order {
            let Some(nt) = slots[i].take() else { continue };
            let mut deps: Vec<TaskId> = nt.deps.iter().filter_map(|d| self.keys.get(d).copied()).collect();
            if deps.len() > 1 {
                // Sort and dedup: linear scans would be quadratic for a task
                // that reads 100,000 inputs.
                deps.sort_unstable();
                deps.dedup();
            }
            let group = self.group_of(&nt.key);
            let (user, retries, resources) = match &nt.annotations {
                Some(a) => {
                    let res = a.resources.iter().map(|(n, x)| (self.resource_id(n), *x)).collect();
                    (a.priority, a.retries, res)
                }
                None => (0, 0, Vec::new()),
            };
            let rec = TaskRec {
                key: nt.key.clone(),
                state: TaskState::Released,
                group,
                deps,
                dependents: Vec::new(),
                live_dependents: 0,
                waiting_on: 0,
                waiters: 0,
                wants: 0,
                priority: Priority { neg_user: user.saturating_neg(), generation, order: nt.order },
                retries_left: retries,
                resources,
                who_has: Vec::new(),
                processing_on: None,
                run: 0,
                nbytes: 0,
                lineage_us: 0.0,
                pinned: false,
                suspicious: 0,
                counted_done: false,
                error: None,
            };
            let t = TaskId(self.tasks.insert(rec));
            let g = &mut self.groups[group as usize];
            g.total += 1;
            g.states[TaskState::Released.index()] += 1;
            self.keys.insert(nt.key, t);
            for k in 0..self.rec(t).deps.len() {
                let d = self.rec(t).deps[k];
                let dr = self.rec_mut(d);
                dr.dependents.push(t);
                dr.live_dependents += 1;
            }
            added.push(t);
        }
        let Known { held, erred, wants } = known;
        let held = self.settle_known(held, erred);
        for key in wanted {
            if let Some(&t) = self.keys.get(key) {
                self.add_want(t, 1, out);
            }
        }
        for (key, n) in wants {
            if let Some(&t) = self.keys.get(&key) {
                self.add_want(t, n, out);
            }
        }
        // Tasks nobody asked for (culled away by the caller, or already
        // computed dependents) are forgotten right away.
        self.process_unneeded(held, out);
        self.forget_all(added, out);
        self.after_stimulus(out);
        Ok(())
    }

    /// Put results still held in memory and known errors in place, for
    /// tasks just added (released); returns the tasks now in memory.
    fn settle_known(
        &mut self,
        known_held: Vec<(Key, WorkerId, u64, bool)>,
        erred: Vec<(Key, TaskError)>,
    ) -> Vec<TaskId> {
        let mut held = Vec::new();
        for (key, w, nbytes, pinned) in known_held {
            let Some(&t) = self.keys.get(&key) else { continue };
            if self.workers.get(w.0).is_none() {
                continue;
            }
            let r = self.rec_mut(t);
            match r.state {
                TaskState::Released => {
                    r.nbytes = nbytes;
                    r.who_has.push(w);
                    held.push(t);
                }
                TaskState::Memory if !r.who_has.contains(&w) => r.who_has.push(w),
                _ => continue,
            }
            r.pinned |= pinned;
            let nbytes = r.nbytes;
            if let Some(wr) = self.workers.get_mut(w.0) {
                wr.has_what.insert(t);
                wr.held_bytes += nbytes;
            }
            self.count_done(t);
            self.set_state(t, TaskState::Memory);
        }
        for (key, error) in erred {
            let Some(&t) = self.keys.get(&key) else { continue };
            let r = self.rec_mut(t);
            if r.state != TaskState::Released {
                continue;
            }
            r.error = Some(Arc::new(error));
            let group = r.group as usize;
            self.groups[group].erred += 1;
            self.count_done(t);
            self.set_state(t, TaskState::Erred);
        }
        held
    }

    /// Add one client reference to a known key (a future passed on, a
    /// persisted collection reused) and make sure it is (being) computed.
    pub fn want(&mut self, key: &Key, out: &mut Vec<Action>) -> Result<TaskId, SchedulerError> {
        self.want_n(key, 1, out)
    }

    /// `n` more client references at once (a client coming back with its
    /// count): one stimulus however large `n` is.
    pub fn want_n(&mut self, key: &Key, n: u32, out: &mut Vec<Action>) -> Result<TaskId, SchedulerError> {
        let t = self.lookup(key).ok_or_else(|| SchedulerError::UnknownKey(key.clone()))?;
        self.stimulus += 1;
        self.add_want(t, n, out);
        self.after_stimulus(out);
        Ok(t)
    }

    /// `n` more client references. A result already there (or an error
    /// already known) is announced at once; a task that fails while being
    /// brought back is announced by `fail`, once.
    fn add_want(&mut self, t: TaskId, n: u32, out: &mut Vec<Action>) {
        if n == 0 {
            return;
        }
        let r = self.rec_mut(t);
        r.wants = r.wants.saturating_add(n);
        let settled_before = matches!(r.state, TaskState::Memory | TaskState::Erred);
        self.ensure_computed(t, out);
        if settled_before {
            self.notify_if_finished(t, out);
        }
    }

    /// Drop one client reference. A task nobody needs any more is cancelled
    /// (if running) or freed, and forgotten with what only it needed.
    pub fn release(&mut self, t: TaskId, out: &mut Vec<Action>) {
        self.release_n(t, 1, out);
    }

    /// Drop `n` client references at once (a client that left).
    pub fn release_n(&mut self, t: TaskId, n: u32, out: &mut Vec<Action>) {
        if !self.is_live(t) {
            return;
        }
        self.stimulus += 1;
        let r = self.rec_mut(t);
        if r.wants == 0 || n == 0 {
            return;
        }
        r.wants = r.wants.saturating_sub(n);
        if r.wants == 0 && r.waiters == 0 {
            self.process_unneeded(vec![t], out);
        }
        self.after_stimulus(out);
    }

    /// The running task `t` waits on other tasks (it submitted them from
    /// inside, Dask's `secede`): its thread is free for them, so it stops
    /// counting against its worker's slots until it rejoins or ends.
    pub fn secede(&mut self, t: TaskId, out: &mut Vec<Action>) {
        self.stimulus += 1;
        let Some(w) = self.tasks.get(t.0).and_then(|r| r.processing_on) else { return };
        if let Some(wr) = self.workers.get_mut(w.0) {
            wr.seceded.insert(t);
        }
        self.update_free(w);
        self.after_stimulus(out);
    }

    /// A seceded task holds a thread again (Dask's `rejoin`).
    pub fn rejoin(&mut self, t: TaskId, out: &mut Vec<Action>) {
        self.stimulus += 1;
        let Some(w) = self.tasks.get(t.0).and_then(|r| r.processing_on) else { return };
        if let Some(wr) = self.workers.get_mut(w.0) {
            wr.seceded.remove(&t);
        }
        self.update_free(w);
        self.after_stimulus(out);
    }

    /// A worker finished attempt `run` of a task and holds its result of `nbytes`.
    pub fn task_finished(
        &mut self,
        w: WorkerId,
        t: TaskId,
        run: u32,
        nbytes: u64,
        duration_us: f64,
        out: &mut Vec<Action>,
    ) {
        self.stimulus += 1;
        if !self.accept_report(w, t, run, out) {
            return;
        }
        self.unassign(t, w);
        // Only copies need the lineage cost: the local runtime skips the sum.
        let inputs_us: f64 = if self.config.replicate_after_us > 0.0 {
            self.rec(t).deps.iter().map(|d| self.rec(*d).lineage_us).sum()
        } else {
            0.0
        };
        let r = self.rec_mut(t);
        r.who_has.clear();
        r.who_has.push(w);
        r.nbytes = nbytes;
        r.lineage_us = duration_us.max(0.0) + inputs_us;
        let group = r.group as usize;
        if let Some(wr) = self.workers.get_mut(w.0) {
            wr.has_what.insert(t);
            wr.held_bytes += nbytes;
        }
        let g = &mut self.groups[group];
        g.duration_us += duration_us.max(0.0);
        g.finished_runs += 1;
        self.count_done(t);
        self.set_state(t, TaskState::Memory);
        let mut unneeded = Vec::new();
        self.leave_active(t, &mut unneeded);
        let ndependents = self.rec(t).dependents.len();
        for k in 0..ndependents {
            let d = self.rec(t).dependents[k];
            let Some(dr) = self.tasks.get_mut(d.0) else { continue };
            if dr.state == TaskState::Waiting {
                dr.waiting_on -= 1;
                if dr.waiting_on == 0 {
                    self.make_ready(d, out);
                }
            }
        }
        self.notify_if_finished(t, out);
        let r = self.rec(t);
        if r.wants == 0 && r.waiters == 0 {
            unneeded.push(t);
        }
        self.process_unneeded(unneeded, out);
        self.maybe_replicate(t, w, out);
        self.after_stimulus(out);
    }

    /// Copy a result that is still needed, small, and costly to make again
    /// to a second worker (the least loaded with results, not paused).
    fn maybe_replicate(&mut self, t: TaskId, from: WorkerId, out: &mut Vec<Action>) {
        let after = self.config.replicate_after_us;
        let Some(r) = self.tasks.get(t.0) else { return };
        let worth = after > 0.0
            && r.state == TaskState::Memory
            && (r.wants > 0 || r.waiters > 0)
            && r.who_has.len() == 1
            && r.lineage_us >= after
            && !r.pinned
            && r.nbytes <= self.config.replicate_max_bytes;
        if !worth {
            return;
        }
        if let Some(to) = self.copy_target(from) {
            out.push(Action::Replicate { task: t, from, to });
        }
    }

    /// `t`'s result is only of use on the worker that made it (see
    /// `TaskRec::pinned`): no copies of it.
    pub fn pin(&mut self, t: TaskId) {
        if let Some(r) = self.tasks.get_mut(t.0) {
            r.pinned = true;
        }
    }

    /// Worker `w` now holds a copy of `t`'s result (asked by `Replicate`).
    /// A copy nobody needs any more is freed at once.
    pub fn add_replica(&mut self, w: WorkerId, t: TaskId, out: &mut Vec<Action>) {
        self.stimulus += 1;
        let alive = self.workers.get(w.0).is_some();
        let Some(r) = self.tasks.get_mut(t.0) else { return };
        if !alive {
            return;
        }
        if r.state != TaskState::Memory {
            out.push(Action::Free { worker: w, task: t });
            return;
        }
        if r.who_has.contains(&w) {
            return;
        }
        r.who_has.push(w);
        let nbytes = r.nbytes;
        if let Some(wr) = self.workers.get_mut(w.0) {
            wr.has_what.insert(t);
            wr.held_bytes += nbytes;
        }
        self.after_stimulus(out);
    }

    /// A worker reports that a task failed. Retried while it has retries
    /// left; otherwise it and everything waiting on it err.
    pub fn task_failed(&mut self, w: WorkerId, t: TaskId, run: u32, error: TaskError, out: &mut Vec<Action>) {
        self.stimulus += 1;
        if !self.accept_report(w, t, run, out) {
            return;
        }
        self.unassign(t, w);
        let r = self.rec_mut(t);
        if r.retries_left > 0 && error.kind != TaskErrorKind::Cancelled {
            r.retries_left -= 1;
            self.set_state(t, TaskState::Queued);
            self.make_ready(t, out);
        } else {
            let mut unneeded = Vec::new();
            self.fail(t, Arc::new(error), out, &mut unneeded);
            self.process_unneeded(unneeded, out);
        }
        self.after_stimulus(out);
    }

    /// A worker could not fetch input `dep` of its task `t` from any of
    /// `holders` (Dask's missing-data). They no longer count as holding it
    /// (and are told to drop any copy); with no holder left it is
    /// recomputed from lineage and `t` waits for it, else `t` runs again,
    /// fetching from the holders that are left. Not the task's failure.
    pub fn missing_data(
        &mut self,
        w: WorkerId,
        t: TaskId,
        run: u32,
        dep: &Key,
        holders: &[WorkerId],
        out: &mut Vec<Action>,
    ) {
        self.stimulus += 1;
        if !self.accept_report(w, t, run, out) {
            return;
        }
        let Some(d) = self.keys.get(dep).copied().filter(|d| self.rec(t).deps.contains(d)) else {
            // Not an input of the task: a confused worker; run it again.
            self.reschedule(t, w, out);
            self.after_stimulus(out);
            return;
        };
        let nbytes = self.rec(d).nbytes;
        for h in holders {
            let dr = self.rec_mut(d);
            let before = dr.who_has.len();
            dr.who_has.retain(|x| x != h);
            if dr.who_has.len() < before
                && let Some(wr) = self.workers.get_mut(h.0)
            {
                wr.has_what.remove(&d);
                wr.held_bytes = wr.held_bytes.saturating_sub(nbytes);
                out.push(Action::Free { worker: *h, task: d });
            }
        }
        let dr = self.rec(d);
        if dr.who_has.is_empty() && dr.state == TaskState::Memory {
            // Moves `t` (and any other dependent running) back to waiting.
            let mut unneeded = Vec::new();
            self.lose(d, out, &mut unneeded);
            self.process_unneeded(unneeded, out);
        } else {
            self.reschedule(t, w, out);
        }
        self.after_stimulus(out);
    }

    /// Take `t` off `w`, where it no longer runs, and make it ready again.
    fn reschedule(&mut self, t: TaskId, w: WorkerId, out: &mut Vec<Action>) {
        self.unassign(t, w);
        self.set_state(t, TaskState::Queued);
        self.make_ready(t, out);
    }

    // ---- internals -------------------------------------------------------

    /// Check that a worker's report is about the attempt it is running now.
    /// A stale report (a cancelled attempt, a dead worker, a duplicate)
    /// changes nothing, but an unexpected result is freed on the worker.
    fn accept_report(&mut self, w: WorkerId, t: TaskId, run: u32, out: &mut Vec<Action>) -> bool {
        let worker_live = self.workers.get(w.0).is_some();
        match self.tasks.get(t.0) {
            Some(r) if r.state == TaskState::Processing && r.processing_on == Some(w) && r.run == run => true,
            Some(r) => {
                if worker_live && !r.who_has.contains(&w) {
                    out.push(Action::Free { worker: w, task: t });
                }
                false
            }
            None => {
                if worker_live {
                    out.push(Action::Free { worker: w, task: t });
                }
                false
            }
        }
    }

    /// Check a submission and return the positions of its new tasks in a
    /// topological order (first definition of a key wins). Flat vectors,
    /// not maps of lists: submissions have hundreds of thousands of tasks.
    fn validate_submission(&self, tasks: &[NewTask], wanted: &[Key]) -> Result<Vec<usize>, SchedulerError> {
        let n = tasks.len();
        let mut index: FxHashMap<&Key, u32> = FxHashMap::default();
        index.reserve(n);
        let mut is_new = vec![false; n];
        for (i, t) in tasks.iter().enumerate() {
            if !self.keys.contains_key(&t.key) && !index.contains_key(&t.key) {
                index.insert(&t.key, i as u32);
                is_new[i] = true;
            }
        }
        let mut indegree = vec![0u32; n];
        let mut edges: Vec<(u32, u32)> = Vec::new();
        for (i, t) in tasks.iter().enumerate() {
            if !is_new[i] {
                continue;
            }
            for d in &t.deps {
                if let Some(&j) = index.get(d) {
                    if j as usize == i {
                        return Err(SchedulerError::Cycle(t.key.clone()));
                    }
                    indegree[i] += 1;
                    edges.push((j, i as u32));
                } else if !self.keys.contains_key(d) {
                    return Err(SchedulerError::MissingDependency { task: t.key.clone(), dep: d.clone() });
                }
            }
        }
        for k in wanted {
            if !index.contains_key(k) && !self.keys.contains_key(k) {
                return Err(SchedulerError::UnknownKey(k.clone()));
            }
        }
        // Dependents as compressed rows.
        let mut start = vec![0u32; n + 1];
        for &(j, _) in &edges {
            start[j as usize + 1] += 1;
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let mut fill = start.clone();
        let mut adj = vec![0u32; edges.len()];
        for &(j, i) in &edges {
            adj[fill[j as usize] as usize] = i;
            fill[j as usize] += 1;
        }
        let mut ready: Vec<u32> =
            (0..n as u32).rev().filter(|&i| is_new[i as usize] && indegree[i as usize] == 0).collect();
        let mut order = Vec::with_capacity(index.len());
        while let Some(i) = ready.pop() {
            order.push(i as usize);
            for &j in &adj[start[i as usize] as usize..start[i as usize + 1] as usize] {
                indegree[j as usize] -= 1;
                if indegree[j as usize] == 0 {
                    ready.push(j);
                }
            }
        }
        if order.len() < index.len() {
            let stuck = (0..n).find(|&i| is_new[i] && indegree[i] > 0).unwrap_or(0);
            return Err(SchedulerError::Cycle(tasks[stuck].key.clone()));
        }
        Ok(order)
    }

    fn notify_if_finished(&mut self, t: TaskId, out: &mut Vec<Action>) {
        let r = self.rec(t);
        if r.wants == 0 {
            return;
        }
        match r.state {
            TaskState::Memory => out.push(Action::Done { task: t }),
            TaskState::Erred => {
                let error = r.error.clone().unwrap_or_else(|| Arc::new(TaskError::internal("erred")));
                out.push(Action::Erred { task: t, error });
            }
            _ => {}
        }
    }

    /// A released task is needed: walk down to what must be (re)computed.
    fn ensure_computed(&mut self, root: TaskId, out: &mut Vec<Action>) {
        let mut stack = vec![root];
        let mut unneeded = Vec::new();
        while let Some(t) = stack.pop() {
            let r = self.rec(t);
            if r.state != TaskState::Released || (r.wants == 0 && r.waiters == 0) {
                continue;
            }
            let mut waiting_on = 0;
            let mut failed_dep = None;
            for k in 0..r.deps.len() {
                let d = self.rec(t).deps[k];
                let dr = self.rec_mut(d);
                dr.waiters += 1;
                match dr.state {
                    TaskState::Memory => {}
                    TaskState::Erred => failed_dep = Some(d),
                    TaskState::Released => {
                        waiting_on += 1;
                        stack.push(d);
                    }
                    _ => waiting_on += 1,
                }
            }
            self.rec_mut(t).waiting_on = waiting_on;
            self.set_state(t, TaskState::Waiting);
            if let Some(d) = failed_dep {
                let dr = self.rec(d);
                let cause = dr.error.clone().unwrap_or_else(|| Arc::new(TaskError::internal("erred")));
                let e = Arc::new(TaskError::dependency_failed(&dr.key, &cause));
                self.fail(t, e, out, &mut unneeded);
            } else if waiting_on == 0 {
                self.make_ready(t, out);
            }
        }
        self.process_unneeded(unneeded, out);
    }

    /// An active task stops being active: its dependencies lose a waiter.
    fn leave_active(&mut self, t: TaskId, unneeded: &mut Vec<TaskId>) {
        for k in 0..self.rec(t).deps.len() {
            let d = self.rec(t).deps[k];
            let dr = self.rec_mut(d);
            dr.waiters -= 1;
            if dr.waiters == 0 && dr.wants == 0 {
                unneeded.push(d);
            }
        }
    }

    /// Tasks that nothing needs any more: cancel the running ones, free the
    /// results, forget what is left over. Cascades down the graph.
    fn process_unneeded(&mut self, mut work: Vec<TaskId>, out: &mut Vec<Action>) {
        let mut forget = Vec::new();
        while let Some(t) = work.pop() {
            let Some(r) = self.tasks.get(t.0) else { continue };
            if r.wants > 0 || r.waiters > 0 {
                continue;
            }
            match r.state {
                TaskState::Memory => {
                    let holders = std::mem::take(&mut self.rec_mut(t).who_has);
                    let nbytes = self.rec(t).nbytes;
                    for w in holders {
                        if let Some(wr) = self.workers.get_mut(w.0) {
                            wr.has_what.remove(&t);
                            wr.held_bytes = wr.held_bytes.saturating_sub(nbytes);
                        }
                        out.push(Action::Free { worker: w, task: t });
                    }
                    self.set_state(t, TaskState::Released);
                }
                TaskState::Waiting | TaskState::Queued | TaskState::Processing => {
                    if let Some(w) = self.rec(t).processing_on {
                        self.unassign(t, w);
                        out.push(Action::Cancel { worker: w, task: t });
                    }
                    self.set_state(t, TaskState::Released);
                    self.leave_active(t, &mut work);
                }
                TaskState::Released | TaskState::Erred => {}
            }
            forget.push(t);
        }
        self.forget_all(forget, out);
    }

    /// Remove tasks that are released or erred, unwanted, and that no live
    /// task depends on; then their dependencies, and so on.
    fn forget_all(&mut self, mut work: Vec<TaskId>, out: &mut Vec<Action>) {
        while let Some(t) = work.pop() {
            let Some(r) = self.tasks.get(t.0) else { continue };
            if !matches!(r.state, TaskState::Released | TaskState::Erred)
                || r.wants > 0
                || r.live_dependents > 0
            {
                continue;
            }
            let Some(r) = self.tasks.remove(t.0) else { continue };
            self.groups[r.group as usize].states[r.state.index()] -= 1;
            self.keys.remove(&r.key);
            for d in r.deps {
                let Some(dr) = self.tasks.get_mut(d.0) else { continue };
                dr.live_dependents -= 1;
                if dr.live_dependents == 0 {
                    dr.dependents.clear();
                    work.push(d);
                } else if dr.dependents.len() > 2 * dr.live_dependents as usize + 8 {
                    let mut list = std::mem::take(&mut dr.dependents);
                    list.retain(|x| self.tasks.get(x.0).is_some());
                    if let Some(dr) = self.tasks.get_mut(d.0) {
                        dr.dependents = list;
                    }
                }
            }
            out.push(Action::Forget { task: t });
        }
    }

    /// Count a task as done in its group's progress, once however often it
    /// is recomputed.
    fn count_done(&mut self, t: TaskId) {
        let r = self.rec_mut(t);
        if !std::mem::replace(&mut r.counted_done, true) {
            let group = r.group as usize;
            self.groups[group].done += 1;
        }
    }

    /// Fail a task and, transitively, every active task waiting on it.
    pub(super) fn fail(
        &mut self,
        t: TaskId,
        error: Arc<TaskError>,
        out: &mut Vec<Action>,
        unneeded: &mut Vec<TaskId>,
    ) {
        let mut work = vec![(t, error)];
        while let Some((t, error)) = work.pop() {
            let r = self.rec(t);
            if !r.state.is_active() {
                continue;
            }
            if let Some(w) = r.processing_on {
                self.unassign(t, w);
                out.push(Action::Cancel { worker: w, task: t });
            }
            let r = self.rec_mut(t);
            r.error = Some(error.clone());
            let group = r.group as usize;
            self.groups[group].erred += 1;
            self.count_done(t);
            self.set_state(t, TaskState::Erred);
            self.leave_active(t, unneeded);
            self.notify_if_finished(t, out);
            let key = self.rec(t).key.clone();
            for k in 0..self.rec(t).dependents.len() {
                let d = self.rec(t).dependents[k];
                if self.tasks.get(d.0).is_some_and(|dr| dr.state.is_active()) {
                    work.push((d, Arc::new(TaskError::dependency_failed(&key, &error))));
                }
            }
            let r = self.rec(t);
            if r.wants == 0 && r.live_dependents == 0 {
                unneeded.push(t);
            }
        }
    }

    /// The only copy of a result is gone. Recompute it if it is needed, and
    /// put back to waiting every active dependent that was about to use it.
    fn lose(&mut self, t: TaskId, out: &mut Vec<Action>, unneeded: &mut Vec<TaskId>) {
        self.set_state(t, TaskState::Released);
        for k in 0..self.rec(t).dependents.len() {
            let d = self.rec(t).dependents[k];
            let Some(dr) = self.tasks.get(d.0) else { continue };
            match dr.state {
                TaskState::Waiting => self.rec_mut(d).waiting_on += 1,
                TaskState::Queued | TaskState::Processing => {
                    if let Some(w) = dr.processing_on {
                        self.unassign(d, w);
                        out.push(Action::Cancel { worker: w, task: d });
                    }
                    self.rec_mut(d).waiting_on = 1;
                    self.set_state(d, TaskState::Waiting);
                }
                _ => {}
            }
        }
        let r = self.rec(t);
        if r.wants > 0 || r.waiters > 0 {
            self.ensure_computed(t, out);
        } else {
            unneeded.push(t);
        }
    }
}
