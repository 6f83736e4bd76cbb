//! The nanny: `brisk worker` (unless `--no-nanny`) runs the worker as its
//! child and stays beside it, as Dask's `Nanny`. It measures the child's
//! resident memory every 20 ms and kills it past 95% of its memory limit
//! (a task whose memory runs away would otherwise take the machine, or be
//! killed by the kernel's OOM killer with nothing to restart it), and
//! starts a new worker whenever the old one dies: killed, crashed, or
//! removed by the scheduler. The scheduler sees the old connection close
//! and recomputes what was lost there.
//!
//! It stops, and so does its worker, on SIGTERM/SIGINT/SIGHUP, when its own
//! parent goes (`--exit-with-parent`), when the worker was told to close
//! (exit 0), and when the worker cannot start at all (a wrong address or
//! token: starting it again would fail again).

use std::ffi::OsString;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use brisk_distributed::cluster::PARENT_PIPE_FLAG;
use brisk_distributed::log;

/// The worker lost its scheduler after joining (EX_TEMPFAIL): start
/// another, which joins again or, if the scheduler is gone, fails to.
pub const EXIT_LOST: u8 = 75;

/// How often the worker's memory is measured.
const POLL: Duration = Duration::from_millis(20);

/// What became of one worker.
#[derive(Debug, PartialEq)]
enum Ended {
    /// It exited (a code, or killed by a signal: `None`).
    Exited(Option<i32>),
    /// The nanny killed it: its memory passed the terminate threshold.
    OutOfMemory(u64),
}

/// Whether to start another worker after `ended`.
fn restart(ended: &Ended) -> bool {
    match ended {
        Ended::OutOfMemory(_) => true,
        // A signal (SIGKILL, an abort), a panic (70), or a lost scheduler.
        Ended::Exited(None) => true,
        Ended::Exited(Some(code)) => {
            *code == 70
                || *code == i32::from(EXIT_LOST)
                || *code == i32::from(brisk_distributed::worker::EXIT_GPU_FAILED)
        }
    }
}

/// Run the worker of this command line (`brisk worker …`) under a nanny.
pub fn run(memory_limit: Option<u64>, terminate_at: Option<f64>) -> anyhow::Result<ExitCode> {
    let program = std::env::current_exe()?;
    let mut args: Vec<OsString> = std::env::args_os().skip(1).collect();
    args.push("--no-nanny".into());
    if !args.iter().any(|a| a == PARENT_PIPE_FLAG) {
        args.push(PARENT_PIPE_FLAG.into());
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT, signal_hook::consts::SIGHUP] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    let kill_at = memory_limit.zip(terminate_at).map(|(l, t)| (l as f64 * t) as u64);
    // The first death is answered at once; a worker that dies again and
    // again soon after it started is restarted ever more slowly.
    let mut delay = Duration::ZERO;
    loop {
        // The worker's stdin is a pipe from here: it exits when the nanny
        // dies, even by SIGKILL.
        let mut child = Command::new(&program).args(&args).stdin(Stdio::piped()).spawn()?;
        let started = Instant::now();
        let ended = match watch(&mut child, kill_at, &stop) {
            Some(ended) => ended,
            None => {
                terminate(&mut child);
                return Ok(ExitCode::SUCCESS);
            }
        };
        match &ended {
            Ended::OutOfMemory(rss) => log::warn(
                "nanny",
                &format!(
                    "worker process {} used {} of its {} memory limit (over {:.0}%): restarting it",
                    child.id(),
                    brisk_engine::memory::fmt_bytes(*rss),
                    brisk_engine::memory::fmt_bytes(memory_limit.unwrap_or(0)),
                    terminate_at.unwrap_or(1.0) * 100.0
                ),
            ),
            Ended::Exited(code) if restart(&ended) => {
                let how =
                    code.map_or_else(|| "was killed by a signal".into(), |c| format!("exited with {c}"));
                log::warn("nanny", &format!("worker process {} {how}: restarting it", child.id()));
            }
            Ended::Exited(code) => return Ok(ExitCode::from(code.unwrap_or(1).clamp(0, 255) as u8)),
        }
        if started.elapsed() > Duration::from_secs(10) {
            delay = Duration::ZERO;
        }
        let until = Instant::now() + delay;
        while Instant::now() < until {
            if stop.load(Ordering::Relaxed) {
                return Ok(ExitCode::SUCCESS);
            }
            std::thread::sleep(POLL);
        }
        delay = (delay * 2).clamp(Duration::from_millis(100), Duration::from_secs(5));
    }
}

/// Wait for the worker to end, killing it past `kill_at` bytes; `None`
/// when the nanny was asked to stop.
fn watch(child: &mut Child, kill_at: Option<u64>, stop: &AtomicBool) -> Option<Ended> {
    loop {
        if stop.load(Ordering::Relaxed) {
            return None;
        }
        match child.try_wait() {
            Ok(Some(status)) => return Some(Ended::Exited(status.code())),
            Ok(None) => {}
            Err(_) => return Some(Ended::Exited(None)),
        }
        if let Some(limit) = kill_at {
            let rss = brisk_engine::memory::resident(child.id());
            if rss > limit {
                let _ = child.kill();
                let _ = child.wait();
                return Some(Ended::OutOfMemory(rss));
            }
        }
        std::thread::sleep(POLL);
    }
}

/// Ask the worker to go (SIGTERM: it hands its results over, for up to
/// 10 s, and removes its folder), then make sure.
fn terminate(child: &mut Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGTERM);
    }
    // Past the worker's own limit (20 s), so a clean leave is not cut short.
    let deadline = Instant::now() + Duration::from_secs(25);
    while Instant::now() < deadline {
        if !matches!(child.try_wait(), Ok(None)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crashes_kills_and_lost_schedulers_restart_errors_do_not() {
        assert!(restart(&Ended::OutOfMemory(1 << 30)));
        assert!(restart(&Ended::Exited(None)));
        assert!(restart(&Ended::Exited(Some(70))));
        assert!(restart(&Ended::Exited(Some(i32::from(EXIT_LOST)))));
        assert!(!restart(&Ended::Exited(Some(0))), "told to close");
        assert!(!restart(&Ended::Exited(Some(2))), "cannot start: a wrong address or token");
    }
}
