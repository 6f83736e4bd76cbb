//! A local task's thread, lent while the task waits on tasks it submitted
//! (`secede`): the scheduler stops counting the task against the worker's
//! slots and the pool grows by a thread, so the tasks it waits on run; once
//! it rejoins (or ends) the pool shrinks back as threads come free.

use super::{Shared, State};
use crate::key::Key;
use crate::runner::Seat;
use crate::scheduler::TaskId;

impl Seat for Shared {
    fn secede(&self, key: &Key) {
        let mut st = self.lock();
        let Some(t) = running(&st, key) else { return };
        if !st.seceded.insert(t) {
            return;
        }
        {
            let st = &mut *st;
            st.core.secede(t, &mut st.out);
        }
        if !self.config.sync {
            st.threads_wanted += 1;
        }
        self.apply(&mut st);
        self.grow(&mut st);
    }

    fn rejoin(&self, key: &Key) {
        let mut st = self.lock();
        let Some(t) = running(&st, key) else { return };
        if !st.seceded.remove(&t) {
            return;
        }
        {
            let st = &mut *st;
            st.core.rejoin(t, &mut st.out);
        }
        if !self.config.sync {
            st.threads_wanted -= 1;
        }
        self.apply(&mut st);
        drop(st);
        // A thread beyond the wanted count leaves when it next looks.
        self.work.notify_all();
    }
}

/// The task of `key` if it is running here.
fn running(st: &State, key: &Key) -> Option<TaskId> {
    st.core.lookup(key).filter(|t| st.running.contains_key(t))
}

impl Shared {
    /// Task `t`'s run ended: a thread it lent is no longer wanted (the
    /// scheduler forgets the secession as the task leaves its worker, or,
    /// for a task that runs again, `requeued`, is told it holds one).
    pub(super) fn seat_ended(&self, st: &mut State, t: TaskId, requeued: bool) {
        if !st.seceded.remove(&t) {
            return;
        }
        if requeued {
            st.core.rejoin(t, &mut st.out);
        }
        if !self.config.sync {
            st.threads_wanted -= 1;
            self.work.notify_all();
        }
    }

    /// Start threads until as many run as are wanted.
    pub(super) fn grow(&self, st: &mut State) {
        if self.config.sync {
            return;
        }
        while st.threads_alive < st.threads_wanted && !st.shutdown {
            let Some(me) = self.me.upgrade() else { return };
            let index = st.threads_alive;
            let spawned = std::thread::Builder::new()
                .name(format!("brisk-worker-{index}"))
                .spawn(move || me.worker_loop(index));
            if spawned.is_err() {
                // No thread to lend: the seceded task's children wait for
                // one to come free, as without secession.
                return;
            }
            st.threads_alive += 1;
        }
    }
}
