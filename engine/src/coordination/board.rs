//! The coordination state itself: variables, queues, locks, events,
//! semaphores and published datasets, with the requests that wait for them.
//! Pure (no clocks, no threads, no I/O) so the local runtime and the
//! cluster's scheduler hold the same one: a host hands it requests with a
//! ticket and sends each answer it returns to whoever holds that ticket.
//! Timeouts are the host's: it withdraws a ticket whose time is up.

use std::collections::{BTreeMap, VecDeque};

use rustc_hash::{FxHashMap, FxHashSet};

use super::error::CoordError;
use super::ops::{Batch, CoordOp, CoordReply};
use crate::value::Value;

/// A request's identity at its host, unique among those it has given out.
pub type Ticket = u64;

/// Every answer a request produced: its own (if it did not wait) and those
/// of waiting requests it let through, in the order they were let through.
pub type Answers = Vec<(Ticket, CoordReply)>;

#[derive(Default)]
struct Semaphore {
    max_leases: u64,
    /// Leases held, per holder.
    held: FxHashMap<u64, u64>,
}

impl Semaphore {
    fn taken(&self) -> u64 {
        self.held.values().sum()
    }
}

#[derive(Default)]
struct Queue {
    items: VecDeque<Value>,
    /// 0: unbounded (set by the first `put` that names the queue).
    maxsize: u64,
}

/// The named things and the requests waiting on them (oldest first).
#[derive(Default)]
pub struct Board {
    variables: FxHashMap<String, Value>,
    queues: FxHashMap<String, Queue>,
    /// Each held lock's holder.
    locks: FxHashMap<String, u64>,
    events: FxHashSet<String>,
    semaphores: FxHashMap<String, Semaphore>,
    datasets: BTreeMap<String, Value>,
    waiting: VecDeque<(Ticket, CoordOp)>,
}

impl Board {
    pub fn new() -> Board {
        Board::default()
    }

    /// Handle `op`. One that cannot be answered yet waits when `wait`, else
    /// is answered `TimedOut` at once (a zero timeout, `blocking: false`).
    pub fn request(&mut self, ticket: Ticket, op: CoordOp, wait: bool) -> Answers {
        let mut out = Vec::new();
        match self.try_apply(&op) {
            Some(reply) => {
                out.push((ticket, reply));
                self.wake(&mut out);
            }
            None if wait => self.waiting.push_back((ticket, op)),
            None => out.push((ticket, CoordReply::TimedOut)),
        }
        out
    }

    /// Stop waiting on `ticket` (its time is up, its caller went): `None`
    /// when it is not waiting, that is, its answer was already given.
    pub fn withdraw(&mut self, ticket: Ticket) -> Option<CoordReply> {
        let at = self.waiting.iter().position(|(t, _)| *t == ticket)?;
        self.waiting.remove(at);
        Some(CoordReply::TimedOut)
    }

    /// Holders that are gone (a client or worker that disconnected): their
    /// locks and leases are freed, and those waiting for them go on.
    pub fn drop_holders(&mut self, holders: &FxHashSet<u64>) -> Answers {
        self.free(holders);
        let mut out = Vec::new();
        self.wake(&mut out);
        out
    }

    fn free(&mut self, holders: &FxHashSet<u64>) {
        self.locks.retain(|_, h| !holders.contains(h));
        for s in self.semaphores.values_mut() {
            s.held.retain(|h, _| !holders.contains(h));
        }
    }

    /// How many requests wait now.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Let through, oldest first, every waiting request that can now be
    /// answered; one let through may let others through (a `put` a `get`).
    fn wake(&mut self, out: &mut Answers) {
        // Taken out while they are tried, so no request (nor the value a
        // `put` carries) is copied to be looked at.
        let mut waiting = std::mem::take(&mut self.waiting);
        loop {
            let found = (0..waiting.len()).find_map(|i| self.try_apply(&waiting[i].1).map(|r| (i, r)));
            let Some((i, reply)) = found else { break };
            if let Some((ticket, _)) = waiting.remove(i) {
                out.push((ticket, reply));
            }
        }
        self.waiting = waiting;
    }

    /// `None`: the request cannot be answered yet, and nothing changed.
    fn try_apply(&mut self, op: &CoordOp) -> Option<CoordReply> {
        use CoordReply::{Count, Done, Failed, Flag, Names, Values};
        Some(match op {
            CoordOp::SetVariable { name, value } => {
                self.variables.insert(name.clone(), value.clone());
                Done
            }
            CoordOp::GetVariable { name } => CoordReply::Value(self.variables.get(name)?.clone()),
            CoordOp::DeleteVariable { name } => {
                self.variables.remove(name);
                Done
            }
            CoordOp::Put { queue, value, maxsize } => {
                let q = self
                    .queues
                    .entry(queue.clone())
                    .or_insert_with(|| Queue { maxsize: *maxsize, ..Queue::default() });
                if q.maxsize > 0 && q.items.len() as u64 >= q.maxsize {
                    return None;
                }
                q.items.push_back(value.clone());
                Done
            }
            CoordOp::Get { queue, batch } => {
                let items = self.queues.get_mut(queue).map(|q| &mut q.items);
                let n = match batch {
                    Batch::One => 1,
                    Batch::N(n) => *n as usize,
                    Batch::All => items.as_ref().map_or(0, |i| i.len()),
                };
                let have = items.as_ref().map_or(0, |i| i.len());
                if have < n {
                    return None;
                }
                let got: Vec<Value> = items.map(|i| i.drain(..n).collect()).unwrap_or_default();
                match batch {
                    Batch::One => CoordReply::Value(got.into_iter().next()?),
                    _ => Values(got),
                }
            }
            CoordOp::QueueSize { queue } => Count(self.queues.get(queue).map_or(0, |q| q.items.len() as u64)),
            CoordOp::Acquire { lock, holder } => {
                if self.locks.contains_key(lock) {
                    return None;
                }
                self.locks.insert(lock.clone(), *holder);
                Flag(true)
            }
            CoordOp::Release { lock, holder } => {
                if self.locks.get(lock) == Some(holder) {
                    self.locks.remove(lock);
                    Done
                } else {
                    Failed(CoordError::NotHeld { lock: lock.clone() })
                }
            }
            CoordOp::Locked { lock } => Flag(self.locks.contains_key(lock)),
            CoordOp::SetEvent { name } => {
                self.events.insert(name.clone());
                Done
            }
            CoordOp::ClearEvent { name } => {
                self.events.remove(name);
                Done
            }
            CoordOp::WaitEvent { name } => {
                if !self.events.contains(name) {
                    return None;
                }
                Flag(true)
            }
            CoordOp::IsSet { name } => Flag(self.events.contains(name)),
            CoordOp::AcquireLease { semaphore, max_leases, holder } => {
                let s = match self.semaphore(semaphore, *max_leases) {
                    Ok(s) => s,
                    Err(e) => return Some(Failed(e)),
                };
                if s.taken() >= s.max_leases {
                    return None;
                }
                *s.held.entry(*holder).or_default() += 1;
                Flag(true)
            }
            CoordOp::ReleaseLease { semaphore, max_leases, holder } => {
                let s = match self.semaphore(semaphore, *max_leases) {
                    Ok(s) => s,
                    Err(e) => return Some(Failed(e)),
                };
                match s.held.get_mut(holder) {
                    Some(n) if *n > 1 => *n -= 1,
                    Some(_) => {
                        s.held.remove(holder);
                    }
                    None => return Some(Failed(CoordError::NoLease { semaphore: semaphore.clone() })),
                }
                Done
            }
            CoordOp::Leases { semaphore, max_leases } => match self.semaphore(semaphore, *max_leases) {
                Ok(s) => Count(s.taken()),
                Err(e) => Failed(e),
            },
            CoordOp::DropHolders { holders } => {
                self.free(&holders.iter().copied().collect());
                Done
            }
            CoordOp::Publish { name, value, replace } => {
                if !replace && self.datasets.contains_key(name) {
                    return Some(Failed(CoordError::DatasetExists { name: name.clone() }));
                }
                self.datasets.insert(name.clone(), value.clone());
                Done
            }
            CoordOp::Dataset { name } => match self.datasets.get(name) {
                Some(v) => CoordReply::Value(v.clone()),
                None => Failed(CoordError::NoDataset { name: name.clone(), known: self.dataset_names() }),
            },
            CoordOp::Datasets => Names(self.dataset_names()),
            CoordOp::Unpublish { name } => match self.datasets.remove(name) {
                Some(_) => Done,
                None => Failed(CoordError::NoDataset { name: name.clone(), known: self.dataset_names() }),
            },
        })
    }

    fn dataset_names(&self) -> Vec<String> {
        self.datasets.keys().cloned().collect()
    }

    /// The semaphore `name`, made with `max_leases` on first use; another
    /// count for the same name is refused, as Dask does.
    fn semaphore(&mut self, name: &str, max_leases: u64) -> Result<&mut Semaphore, CoordError> {
        let s = self
            .semaphores
            .entry(name.to_string())
            .or_insert_with(|| Semaphore { max_leases, held: FxHashMap::default() });
        if s.max_leases != max_leases {
            return Err(CoordError::LeasesDiffer {
                semaphore: name.to_string(),
                has: s.max_leases,
                asked: max_leases,
            });
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(i: i64) -> Value {
        Value::Int(i)
    }

    fn put(q: &str, v: i64, maxsize: u64) -> CoordOp {
        CoordOp::Put { queue: q.into(), value: int(v), maxsize }
    }

    fn get(q: &str) -> CoordOp {
        CoordOp::Get { queue: q.into(), batch: Batch::One }
    }

    #[test]
    fn a_get_waits_for_the_put_and_gets_in_order() {
        let mut b = Board::new();
        assert!(b.request(1, get("q"), true).is_empty());
        assert!(b.request(2, get("q"), true).is_empty());
        assert_eq!(b.waiting(), 2);
        let out = b.request(3, put("q", 10, 0), true);
        assert_eq!(out, vec![(3, CoordReply::Done), (1, CoordReply::Value(int(10)))]);
        let out = b.request(4, put("q", 11, 0), true);
        assert_eq!(out, vec![(4, CoordReply::Done), (2, CoordReply::Value(int(11)))]);
        assert_eq!(b.request(5, get("q"), false), vec![(5, CoordReply::TimedOut)]);
    }

    #[test]
    fn a_full_queue_holds_the_put_back_until_a_get() {
        let mut b = Board::new();
        assert_eq!(b.request(1, put("q", 1, 1), true), vec![(1, CoordReply::Done)]);
        assert!(b.request(2, put("q", 2, 1), true).is_empty());
        let out = b.request(3, get("q"), true);
        assert_eq!(out, vec![(3, CoordReply::Value(int(1))), (2, CoordReply::Done)]);
        let all = CoordOp::Get { queue: "q".into(), batch: Batch::All };
        assert_eq!(b.request(4, all.clone(), true), vec![(4, CoordReply::Values(vec![int(2)]))]);
        assert_eq!(b.request(5, all, true), vec![(5, CoordReply::Values(vec![]))]);
        let two = CoordOp::Get { queue: "r".into(), batch: Batch::N(2) };
        assert!(b.request(6, two, true).is_empty());
        b.request(7, put("r", 3, 0), true);
        let out = b.request(8, put("r", 4, 0), true);
        assert_eq!(out, vec![(8, CoordReply::Done), (6, CoordReply::Values(vec![int(3), int(4)]))]);
    }

    #[test]
    fn a_lock_passes_to_the_next_waiter_on_release_and_refuses_a_stranger() {
        let mut b = Board::new();
        let acquire = |h| CoordOp::Acquire { lock: "l".into(), holder: h };
        let release = |h| CoordOp::Release { lock: "l".into(), holder: h };
        assert_eq!(b.request(1, acquire(100), true), vec![(1, CoordReply::Flag(true))]);
        assert_eq!(b.request(2, acquire(200), false), vec![(2, CoordReply::TimedOut)]);
        assert!(b.request(3, acquire(200), true).is_empty());
        let out = b.request(4, release(300), true);
        assert!(matches!(&out[..], [(4, CoordReply::Failed(CoordError::NotHeld { .. }))]), "{out:?}");
        let out = b.request(5, release(100), true);
        assert_eq!(out, vec![(5, CoordReply::Done), (3, CoordReply::Flag(true))]);
        assert_eq!(
            b.request(6, CoordOp::Locked { lock: "l".into() }, true),
            vec![(6, CoordReply::Flag(true))]
        );
        // The holder goes away: the lock is free again.
        b.drop_holders(&[200].into_iter().collect());
        assert_eq!(
            b.request(7, CoordOp::Locked { lock: "l".into() }, true),
            vec![(7, CoordReply::Flag(false))]
        );
    }

    #[test]
    fn semaphores_count_leases_per_holder() {
        let mut b = Board::new();
        let acq = |h| CoordOp::AcquireLease { semaphore: "s".into(), max_leases: 2, holder: h };
        let rel = |h| CoordOp::ReleaseLease { semaphore: "s".into(), max_leases: 2, holder: h };
        let taken = CoordOp::Leases { semaphore: "s".into(), max_leases: 2 };
        b.request(1, acq(1), true);
        b.request(2, acq(1), true);
        assert_eq!(b.request(3, taken, true), vec![(3, CoordReply::Count(2))]);
        assert!(b.request(4, acq(2), true).is_empty());
        assert!(matches!(
            &b.request(5, rel(2), true)[..],
            [(5, CoordReply::Failed(CoordError::NoLease { .. }))]
        ));
        assert_eq!(b.request(6, rel(1), true), vec![(6, CoordReply::Done), (4, CoordReply::Flag(true))]);
        let other = CoordOp::AcquireLease { semaphore: "s".into(), max_leases: 3, holder: 9 };
        let out = b.request(7, other, true);
        assert!(matches!(
            &out[..],
            [(7, CoordReply::Failed(CoordError::LeasesDiffer { has: 2, asked: 3, .. }))]
        ));
    }

    #[test]
    fn events_variables_and_datasets() {
        let mut b = Board::new();
        let wait = CoordOp::WaitEvent { name: "e".into() };
        assert!(b.request(1, wait.clone(), true).is_empty());
        assert!(b.request(2, CoordOp::GetVariable { name: "v".into() }, true).is_empty());
        assert_eq!(b.withdraw(2), Some(CoordReply::TimedOut));
        assert_eq!(b.withdraw(2), None);
        let out = b.request(3, CoordOp::SetEvent { name: "e".into() }, true);
        assert_eq!(out, vec![(3, CoordReply::Done), (1, CoordReply::Flag(true))]);
        b.request(4, CoordOp::SetVariable { name: "v".into(), value: int(5) }, true);
        let out = b.request(5, CoordOp::GetVariable { name: "v".into() }, true);
        assert_eq!(out, vec![(5, CoordReply::Value(int(5)))]);
        let publish = CoordOp::Publish { name: "d".into(), value: int(1), replace: false };
        assert_eq!(b.request(6, publish.clone(), true), vec![(6, CoordReply::Done)]);
        assert!(matches!(
            &b.request(7, publish, true)[..],
            [(7, CoordReply::Failed(CoordError::DatasetExists { .. }))]
        ));
        assert_eq!(b.request(8, CoordOp::Datasets, true), vec![(8, CoordReply::Names(vec!["d".into()]))]);
        assert_eq!(b.request(9, CoordOp::Unpublish { name: "d".into() }, true), vec![(9, CoordReply::Done)]);
        let out = b.request(10, CoordOp::Dataset { name: "d".into() }, true);
        assert!(matches!(&out[..], [(10, CoordReply::Failed(CoordError::NoDataset { .. }))]));
        assert_eq!(b.waiting(), 0);
    }
}
