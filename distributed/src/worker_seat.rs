//! A worker task's thread, lent while the task waits on tasks it submitted
//! (`secede`): the scheduler is told (it stops counting the task against
//! this worker's slots) and the pool grows by a thread; on `rejoin` or at
//! the task's end it shrinks back as threads come free.

use brisk_engine::key::Key;
use brisk_engine::runner::Seat;

use super::{Shared, WState};
use crate::protocol::WorkerMsg;

impl Seat for Shared {
    fn secede(&self, key: &Key) {
        let mut st = self.lock();
        let Some(run) = st.tasks.get(key).map(|t| t.run) else { return };
        if !st.seceded.insert(key.clone()) {
            return;
        }
        self.report(WorkerMsg::Seceded { key: key.clone(), run, seceded: true });
        st.threads_wanted += 1;
        while st.threads_alive < st.threads_wanted && !st.closing {
            let Some(me) = self.me.upgrade() else { return };
            let index = st.threads_alive as u32;
            let spawned = std::thread::Builder::new()
                .name(format!("brisk-task-{index}"))
                .spawn(move || me.task_loop(index));
            if spawned.is_err() {
                // No thread to lend: its children wait for one to come free.
                return;
            }
            st.threads_alive += 1;
        }
    }

    fn rejoin(&self, key: &Key) {
        let mut st = self.lock();
        if !st.seceded.remove(key) {
            return;
        }
        if let Some(run) = st.tasks.get(key).map(|t| t.run) {
            self.report(WorkerMsg::Seceded { key: key.clone(), run, seceded: false });
        }
        st.threads_wanted -= 1;
        drop(st);
        // A thread beyond the wanted count leaves when it next looks.
        self.work.notify_all();
    }
}

impl Shared {
    /// The task of `key` ended here: a thread it lent is no longer wanted
    /// (the scheduler forgets the secession as the task leaves).
    pub(super) fn seat_ended(&self, st: &mut WState, key: &Key) {
        if st.seceded.remove(key) {
            st.threads_wanted -= 1;
            self.work.notify_all();
        }
    }
}
