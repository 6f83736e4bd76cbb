//! Where and when ready tasks run. Root tasks (no dependencies) wait in a
//! scheduler-side priority queue and are handed out only while a worker has
//! fewer than `ceil(nthreads × saturation)` tasks, as Dask's root-task
//! queuing, so a wide graph never floods memory with inputs. Other tasks go
//! at once to the worker that minimizes estimated start time: its queue of
//! work plus the time to fetch the inputs it lacks (data locality). Tasks
//! that need resources (`GPU: 1`) run only where that resource is free.
//!
//! Where a round trip costs more than a task (a cluster running 5 µs
//! tasks), the limit per thread grows with how short the queue's head task
//! is measured to be, up to `MAX_DEPTH`, so that `backlog_us` of work waits
//! on each thread: Dask's one task at a time would leave the thread idle
//! for most of each round trip.

use std::cmp::Reverse;

use super::{Action, Needs, Priority, Scheduler, TaskId, TaskState, WorkerId};

/// The most root tasks one thread may hold, however short they are.
const MAX_DEPTH: f64 = 64.0;

impl Scheduler {
    /// An active task with all inputs in memory: queue it or assign it.
    pub(super) fn make_ready(&mut self, t: TaskId, out: &mut Vec<Action>) {
        self.set_state(t, TaskState::Queued);
        let r = self.rec(t);
        if !r.resources.is_empty() {
            let needs = r.resources.iter().map(|&(id, x)| (id, x.to_bits())).collect();
            let p = r.priority;
            self.restricted.entry(needs).or_default().push(Reverse((p, t)));
            self.restricted_dirty = true;
        } else if r.deps.is_empty() || self.workers.len() == 0 {
            let p = r.priority;
            self.queue.push(Reverse((p, t)));
        } else if let Some(w) = self.decide_worker(t) {
            self.assign(t, w, out);
        } else {
            let p = r.priority;
            self.queue.push(Reverse((p, t)));
        }
    }

    /// Estimated start time on the workers that hold its inputs (and one
    /// free worker), lowest wins; ties go to the lower worker id.
    fn decide_worker(&self, t: TaskId) -> Option<WorkerId> {
        let r = self.rec(t);
        let mut candidates: Vec<WorkerId> = Vec::new();
        for d in &r.deps {
            for w in &self.rec(*d).who_has {
                if !candidates.contains(w) {
                    candidates.push(*w);
                }
            }
        }
        if let Some(&w) = self.free.last()
            && !candidates.contains(&w)
        {
            candidates.push(w);
        }
        candidates.retain(|w| self.workers.get(w.0).is_some_and(|wr| !wr.paused));
        if candidates.is_empty() {
            candidates =
                self.workers.iter().filter(|(_, wr)| !wr.paused).map(|(id, _)| WorkerId(id)).collect();
        }
        let duration = self.expected_duration(r.group);
        let mut best: Option<(f64, WorkerId)> = None;
        for w in candidates {
            let Some(wr) = self.workers.get(w.0) else { continue };
            let occupancy = wr.active() as f64 / f64::from(wr.nthreads) * duration;
            let missing: u64 = r
                .deps
                .iter()
                .map(|d| self.rec(*d))
                .filter(|dr| !dr.who_has.contains(&w))
                .map(|dr| dr.nbytes)
                .sum();
            let cost = occupancy + missing as f64 / self.config.bandwidth_bytes_per_us;
            if best.is_none_or(|(c, bw)| cost < c || (cost == c && w < bw)) {
                best = Some((cost, w));
            }
        }
        best.map(|(_, w)| w)
    }

    fn expected_duration(&self, group: u32) -> f64 {
        let g = &self.groups[group as usize];
        if g.finished_runs > 0 {
            g.duration_us / g.finished_runs as f64
        } else {
            self.config.default_task_duration_us
        }
    }

    pub(super) fn assign(&mut self, t: TaskId, w: WorkerId, out: &mut Vec<Action>) {
        let r = self.rec_mut(t);
        r.processing_on = Some(w);
        r.run = r.run.wrapping_add(1);
        let run = r.run;
        let priority = r.priority;
        let resources = r.resources.clone();
        self.set_state(t, TaskState::Processing);
        if let Some(wr) = self.workers.get_mut(w.0) {
            wr.processing.insert(t);
            for (id, amount) in resources {
                wr.available[id as usize] -= amount;
            }
        }
        self.update_free(w);
        out.push(Action::Run { worker: w, task: t, run, priority });
    }

    /// The task no longer runs on `w` (finished, failed, cancelled).
    pub(super) fn unassign(&mut self, t: TaskId, w: WorkerId) {
        let r = self.rec_mut(t);
        r.processing_on = None;
        let had_resources = !r.resources.is_empty();
        let resources = r.resources.clone();
        if let Some(wr) = self.workers.get_mut(w.0)
            && wr.processing.remove(&t)
        {
            wr.seceded.remove(&t);
            for (id, amount) in resources {
                let i = id as usize;
                wr.available[i] = (wr.available[i] + amount).min(wr.resources[i]);
            }
        }
        if had_resources {
            self.restricted_dirty = true;
        }
        self.update_free(w);
    }

    /// How many tasks a worker takes before root tasks wait in the queue.
    pub(super) fn slots(&self, w: WorkerId) -> usize {
        self.workers.get(w.0).map_or(0, |wr| (f64::from(wr.nthreads) * self.depth).ceil().max(1.0) as usize)
    }

    /// Tasks per thread for a queue headed by a task of `group`: the
    /// saturation limit, or for a group measured short enough, a power of
    /// two (so that the limit, and the free set with it, change seldom).
    fn depth_for(&self, group: u32) -> f64 {
        let saturation = self.config.worker_saturation;
        let g = &self.groups[group as usize];
        if self.config.backlog_us <= 0.0 || g.finished_runs == 0 {
            return saturation;
        }
        let duration = (g.duration_us / g.finished_runs as f64).max(1.0);
        let want = (self.config.backlog_us / duration).min(MAX_DEPTH);
        if want < 2.0 * saturation {
            return saturation;
        }
        f64::from(2u32.pow(want.log2().floor() as u32))
    }

    /// Drop stale entries off the queue's head and set the depth for the
    /// live head (a new depth changes every worker's limit); `false` when
    /// the queue is empty.
    fn adjust_depth(&mut self) -> bool {
        let head = loop {
            let Some(Reverse((_, t))) = self.queue.peek().copied() else { return false };
            match self.tasks.get(t.0) {
                Some(r) if r.state == TaskState::Queued && r.processing_on.is_none() => break r.group,
                _ => {
                    self.queue.pop();
                }
            }
        };
        let depth = self.depth_for(head);
        if depth != self.depth {
            self.depth = depth;
            let ids: Vec<WorkerId> = self.workers.iter().map(|(id, _)| WorkerId(id)).collect();
            for w in ids {
                self.update_free(w);
            }
        }
        true
    }

    /// Keep `free` = the workers below their root-task limit.
    pub(super) fn update_free(&mut self, w: WorkerId) {
        let slots = self.slots(w);
        let Some(wr) = self.workers.get(w.0) else { return };
        let is_free = !wr.paused && wr.active() < slots;
        match (is_free, wr.free_pos) {
            (true, None) => {
                let pos = self.free.len();
                self.free.push(w);
                if let Some(wr) = self.workers.get_mut(w.0) {
                    wr.free_pos = Some(pos);
                }
            }
            (false, Some(_)) => self.remove_from_free(w),
            _ => {}
        }
    }

    pub(super) fn remove_from_free(&mut self, w: WorkerId) {
        let Some(pos) = self.workers.get_mut(w.0).and_then(|wr| wr.free_pos.take()) else { return };
        self.free.swap_remove(pos);
        if let Some(&moved) = self.free.get(pos)
            && let Some(wr) = self.workers.get_mut(moved.0)
        {
            wr.free_pos = Some(pos);
        }
    }

    /// End of every stimulus: hand queued work to free workers.
    pub(super) fn after_stimulus(&mut self, out: &mut Vec<Action>) {
        // The depth follows each head in turn: a slow group queued behind a
        // fast one is not handed out at the fast group's depth.
        while self.adjust_depth() {
            let Some(&w) = self.free.last() else { break };
            let Some(Reverse((p, t))) = self.queue.pop() else { break };
            let r = self.rec(t);
            let target = if r.deps.is_empty() { Some(w) } else { self.decide_worker(t) };
            match target {
                Some(target) => self.assign(t, target, out),
                None => {
                    // No worker for it now: keep it queued, never drop it.
                    self.queue.push(Reverse((p, t)));
                    break;
                }
            }
        }
        if self.restricted_dirty {
            self.restricted_dirty = false;
            self.dispatch_restricted(out);
        }
    }

    /// Run restricted tasks, best priority first, where their resources
    /// are free. Each round takes the best head among the queues whose head
    /// still fits somewhere; a queue whose head does not fit is done for
    /// the round (what it needs is not free, and only grows scarcer).
    fn dispatch_restricted(&mut self, out: &mut Vec<Action>) {
        let mut queues = std::mem::take(&mut self.restricted);
        let mut done: Vec<Needs> = Vec::new();
        loop {
            let mut best: Option<(&Needs, Priority, TaskId)> = None;
            for (needs, q) in queues.iter_mut() {
                if done.contains(needs) {
                    continue;
                }
                // Entries of tasks assigned or forgotten since go unread.
                while let Some(&Reverse((_, t))) = q.peek() {
                    if self
                        .tasks
                        .get(t.0)
                        .is_some_and(|r| r.state == TaskState::Queued && r.processing_on.is_none())
                    {
                        break;
                    }
                    q.pop();
                }
                if let Some(&Reverse((p, t))) = q.peek()
                    && best.is_none_or(|(_, bp, bt)| (p, t) < (bp, bt))
                {
                    best = Some((needs, p, t));
                }
            }
            let Some((needs, _, t)) = best else { break };
            let needs = needs.clone();
            match self.fitting_worker(t) {
                // The queue's head is `t`: popped as stale next round.
                Some(w) => self.assign(t, w, out),
                None => done.push(needs),
            }
        }
        queues.retain(|_, q| !q.is_empty());
        self.restricted = queues;
    }

    /// The unpaused worker with the fewest tasks where all `t` needs is free.
    fn fitting_worker(&self, t: TaskId) -> Option<WorkerId> {
        let needs = &self.rec(t).resources;
        let mut best: Option<(usize, WorkerId)> = None;
        for (id, wr) in self.workers.iter().filter(|(_, wr)| !wr.paused) {
            // Amounts are fractions (GPU: 0.5); allow for float rounding.
            let fits = needs
                .iter()
                .all(|(r, amount)| wr.available.get(*r as usize).is_some_and(|a| *a + 1e-9 >= *amount));
            if fits && best.is_none_or(|(n, _)| wr.active() < n) {
                best = Some((wr.active(), WorkerId(id)));
            }
        }
        best.map(|(_, w)| w)
    }
}
