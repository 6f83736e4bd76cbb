//! A one-line progress bar on stderr while tasks are pending, fed by the
//! runtime's diagnostics snapshots (drawn only when stderr is a terminal).

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use brisk_script::SessionState;

pub struct Bar {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Bar {
    pub fn start(state: Arc<SessionState>) -> Bar {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("brisk-progress".into())
            .spawn(move || draw_loop(&state, &flag))
            .ok();
        Bar { stop, thread }
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn draw_loop(state: &SessionState, stop: &AtomicBool) {
    // (done, total) when the current burst of work began, and when.
    let mut burst: Option<((u64, u64), Instant)> = None;
    let mut drawn = false;
    let mut err = std::io::stderr();
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(100));
        let snap = state.runtime().snapshot();
        let (done, total) = snap.totals();
        // Pending = tasks that still have to run now (tasks released unrun,
        // after an error or an interrupt, never count as done).
        let pending = snap.groups.iter().any(|g| g.waiting + g.queued + g.processing > 0);
        if burst.is_some_and(|((d0, t0), _)| done < d0 || total < t0) {
            burst = None; // a new runtime (config changed): start over
        }
        match (pending, burst) {
            (true, None) => burst = Some(((done, total), Instant::now())),
            (false, Some(_)) => {
                burst = None;
                if drawn {
                    let _ = write!(err, "\r\x1b[2K");
                    let _ = err.flush();
                    drawn = false;
                }
            }
            _ => {}
        }
        if let Some(((d0, _), since)) = burst
            && since.elapsed() > Duration::from_millis(300)
        {
            let d = done.saturating_sub(d0);
            let t = total.saturating_sub(d0).max(d);
            let _ = write!(err, "\r\x1b[2K{}", line(d, t, since.elapsed(), snap.memory_bytes));
            let _ = err.flush();
            drawn = true;
        }
    }
    if drawn {
        let _ = write!(err, "\r\x1b[2K");
        let _ = err.flush();
    }
}

/// `[########------------] 40% 4,000/10,000 tasks | 1.2 s | 3.1 MiB`
pub fn line(done: u64, total: u64, elapsed: Duration, memory: u64) -> String {
    const WIDTH: u64 = 30;
    let filled = (done * WIDTH).checked_div(total).unwrap_or(WIDTH).min(WIDTH);
    let pct = (done * 100).checked_div(total).unwrap_or(100);
    format!(
        "[{}{}] {pct:>3}% {done}/{total} tasks | {:.1} s | {:.1} MiB",
        "#".repeat(filled as usize),
        "-".repeat((WIDTH - filled) as usize),
        elapsed.as_secs_f64(),
        memory as f64 / (1024.0 * 1024.0)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_fills_with_progress() {
        let l = line(5, 10, Duration::from_millis(1500), 1024 * 1024);
        assert!(l.starts_with("[###############---------------]  50% 5/10 tasks | 1.5 s | 1.0 MiB"), "{l}");
        assert!(line(0, 0, Duration::ZERO, 0).contains("100%"));
    }
}
