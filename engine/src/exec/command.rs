//! `run_command`: an external program as a task. Dask users run their GPU
//! programs (a PyTorch script) as tasks on the worker that owns a device;
//! the program inherits the worker's environment, so on a CUDA worker it
//! sees that worker's GPU alone (`CUDA_VISIBLE_DEVICES`).
//!
//! The program runs in a process group of its own, so a cancelled or timed
//! out task stops it and everything it started (SIGTERM, then SIGKILL after
//! a grace period). Its output is captured, up to a bound per stream.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::TaskError;
use crate::runner::TaskContext;
use crate::value::Value;

/// Output kept per stream; the rest is read and dropped (a program that
/// writes gigabytes must not fill the worker's memory, nor block on a full pipe).
const KEEP: usize = 16 << 20;
/// How often the task checks the program and its own cancellation.
const POLL: Duration = Duration::from_millis(20);
/// Between SIGTERM and SIGKILL for a cancelled program.
const GRACE: Duration = Duration::from_secs(2);
/// Lines of stderr quoted in the error of a failed program.
const QUOTED: usize = 20;
/// Lines per second passed on to the log as they come (a burst of twice
/// as many at once); beyond that they are counted, not sent, so a chatty
/// program cannot flood the scheduler and the dashboard. The result keeps
/// them all.
const LOG_RATE: f64 = 100.0;
/// Characters of one line passed on to the log.
const LOG_WIDTH: usize = 500;

/// Run `[argv, options]`: `argv` a non-empty list of strings, `options` a
/// map with `env` (a map of strings, added to the inherited environment)
/// and `cwd`. The result is `#{stdout, stderr, returncode}`; a non-zero
/// exit or a signal is the task's error, with stderr's last lines.
pub(super) fn run(args: Vec<Value>, ctx: &TaskContext<'_>) -> Result<Value, TaskError> {
    let mut args = args.into_iter();
    let (argv, options) = (args.next().unwrap_or_default(), args.next().unwrap_or_default());
    let argv = match &argv {
        Value::List(items) if !items.is_empty() => items
            .iter()
            .enumerate()
            .map(|(i, x)| match x {
                Value::Str(s) => Ok(s.to_string()),
                other => Err(TaskError::user(format!(
                    "run_command: item {i} of the command must be a string, got {} (a delayed value or future as an item must give a string)",
                    other.type_name()
                ))),
            })
            .collect::<Result<Vec<_>, _>>()?,
        other => {
            return Err(TaskError::user(format!(
                "run_command: the command must be a non-empty array of strings, got {}",
                if matches!(other, Value::List(_)) { "an empty array" } else { other.type_name() }
            )));
        }
    };
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    if let Some(d) = ctx.device {
        cmd.env("CUDA_VISIBLE_DEVICES", d);
    }
    // A worker's programs write in its folder, as its spilled data does; a
    // relative `cwd` is taken from there too.
    if let Some(d) = ctx.workdir {
        cmd.current_dir(d);
    }
    match &options {
        Value::Map(m) => {
            if let Some(bad) = m.keys().find(|k| !["env", "cwd"].contains(&k.as_str())) {
                return Err(TaskError::user(format!("run_command: unknown option '{bad}' (env, cwd)")));
            }
            match m.get("env") {
                None | Some(Value::Unit) => {}
                Some(Value::Map(env)) => {
                    for (k, v) in env.iter() {
                        let Value::Str(v) = v else {
                            return Err(TaskError::user(format!(
                                "run_command: env value of '{k}' must be a string, got {}",
                                v.type_name()
                            )));
                        };
                        cmd.env(k, &**v);
                    }
                }
                Some(other) => {
                    return Err(TaskError::user(format!(
                        "run_command: env must be a map, got {}",
                        other.type_name()
                    )));
                }
            }
            match m.get("cwd") {
                None | Some(Value::Unit) => {}
                Some(Value::Str(d)) => {
                    cmd.current_dir(
                        ctx.workdir.map_or_else(|| std::path::PathBuf::from(&**d), |w| w.join(&**d)),
                    );
                }
                Some(other) => {
                    return Err(TaskError::user(format!(
                        "run_command: cwd must be a string, got {}",
                        other.type_name()
                    )));
                }
            }
        }
        Value::Unit => {}
        other => {
            return Err(TaskError::user(format!(
                "run_command: options must be a map, got {}",
                other.type_name()
            )));
        }
    }
    let program = &argv[0];
    let mut child =
        cmd.spawn().map_err(|e| TaskError::user(format!("run_command: cannot start {program:?}: {e}")))?;
    let group = nix::unistd::Pid::from_raw(child.id() as i32);
    let outputs = [Arc::new(Mutex::new(Vec::new())), Arc::new(Mutex::new(Vec::new()))];
    let mut log = ctx.output.map(Log::new);
    let lines = log.as_ref().map(|l| l.tx.clone());
    let readers = [
        child.stdout.take().map(|o| drain(o, outputs[0].clone(), lines.clone())),
        child.stderr.take().map(|e| drain(e, outputs[1].clone(), lines)),
    ];
    let waiting =
        |e: nix::errno::Errno| TaskError::user(format!("run_command: waiting for {program:?}: {e}"));
    while !ended(group).map_err(waiting)? {
        if ctx.is_cancelled() {
            stop(&mut child, group);
            return Err(TaskError::cancelled());
        }
        if let Some(l) = &mut log {
            l.pass_on(Instant::now());
        }
        std::thread::sleep(POLL);
    }
    // The program's own children may hold the pipes open: they belong to
    // the task, which is over. The program is not reaped yet, so its group
    // id cannot have passed to another process. One that left the group
    // (setsid) may still hold them: its output is waited for a grace
    // period, not for ever.
    let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
    let status =
        child.wait().map_err(|e| TaskError::user(format!("run_command: waiting for {program:?}: {e}")))?;
    let until = Instant::now() + GRACE;
    while readers.iter().flatten().any(|h| !h.is_finished()) && Instant::now() < until {
        std::thread::sleep(POLL);
    }
    if let Some(l) = &mut log {
        l.finish();
    }
    let [stdout, stderr] = outputs.map(|o| std::mem::take(&mut *o.lock().unwrap_or_else(|e| e.into_inner())));
    let (stdout, stderr) =
        (String::from_utf8_lossy(&stdout).into_owned(), String::from_utf8_lossy(&stderr).into_owned());
    if !status.success() {
        use std::os::unix::process::ExitStatusExt;
        let how = match (status.code(), status.signal()) {
            (Some(code), _) => format!("exited with status {code}"),
            (None, Some(sig)) => format!("was killed by signal {sig}"),
            _ => "failed".into(),
        };
        let lines: Vec<&str> = stderr.lines().collect();
        let tail = lines[lines.len().saturating_sub(QUOTED)..].join("\n");
        let tail = if tail.is_empty() { String::new() } else { format!(":\n{tail}") };
        return Err(TaskError::user(format!("run_command: {program:?} {how}{tail}")));
    }
    let mut m = BTreeMap::new();
    m.insert("stdout".to_string(), Value::str(&stdout));
    m.insert("stderr".to_string(), Value::str(&stderr));
    m.insert("returncode".to_string(), Value::Int(0));
    Ok(Value::Map(Arc::new(m)))
}

/// Read a stream to its end on a thread of its own, keeping the first
/// [`KEEP`] bytes in `into` and sending each line to `lines` (dropped when
/// the log is behind: it is lossy, the result is not).
fn drain(
    mut r: impl Read + Send + 'static,
    into: Arc<Mutex<Vec<u8>>>,
    lines: Option<SyncSender<String>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buf = [0u8; 64 << 10];
        let mut partial: Vec<u8> = Vec::new();
        loop {
            match r.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    {
                        let mut kept = into.lock().unwrap_or_else(|e| e.into_inner());
                        let room = KEEP.saturating_sub(kept.len()).min(n);
                        kept.extend_from_slice(&buf[..room]);
                    }
                    let Some(tx) = &lines else { continue };
                    for piece in buf[..n].split_inclusive(|&b| b == b'\n') {
                        if partial.len() < 4 * LOG_WIDTH {
                            partial.extend_from_slice(piece);
                        }
                        if piece.ends_with(b"\n") {
                            let _ = tx.try_send(log_line(&partial));
                            partial.clear();
                        }
                    }
                }
            }
        }
        if let Some(tx) = &lines
            && !partial.is_empty()
        {
            let _ = tx.try_send(log_line(&partial));
        }
    })
}

/// A printed line as the log shows it: without its line end, from its last
/// carriage return on (a progress bar redraws over itself), at most
/// [`LOG_WIDTH`] characters.
fn log_line(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    let text = text.trim_end_matches(['\n', '\r']);
    let text = text.rsplit('\r').next().unwrap_or(text);
    match text.char_indices().nth(LOG_WIDTH) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// Passes a program's lines on to the task's output as they come, at most
/// [`LOG_RATE`] a second (a token bucket), telling how many it left out.
struct Log<'a> {
    out: &'a (dyn Fn(&str) + Sync),
    tx: SyncSender<String>,
    rx: Receiver<String>,
    tokens: f64,
    at: Option<Instant>,
    skipped: u64,
}

impl<'a> Log<'a> {
    fn new(out: &'a (dyn Fn(&str) + Sync)) -> Self {
        let (tx, rx) = std::sync::mpsc::sync_channel(4096);
        Log { out, tx, rx, tokens: 2.0 * LOG_RATE, at: None, skipped: 0 }
    }

    fn pass_on(&mut self, now: Instant) {
        if let Some(at) = self.at {
            let gained = now.saturating_duration_since(at).as_secs_f64() * LOG_RATE;
            self.tokens = (self.tokens + gained).min(2.0 * LOG_RATE);
        }
        self.at = Some(now);
        while let Ok(line) = self.rx.try_recv() {
            if self.tokens < 1.0 {
                self.skipped += 1;
                continue;
            }
            if self.skipped > 0 && self.tokens >= 2.0 {
                self.tokens -= 1.0;
                (self.out)(&format!("… {} lines not shown", self.skipped));
                self.skipped = 0;
            }
            self.tokens -= 1.0;
            (self.out)(&line);
        }
    }

    /// The program ended: what is left goes, and the count of what did not.
    fn finish(&mut self) {
        self.pass_on(Instant::now());
        if self.skipped > 0 {
            (self.out)(&format!("… {} lines not shown", self.skipped));
        }
    }
}

/// Whether the program (the leader of `group`) has ended, without reaping
/// it: until it is reaped its id, which is the group's, is not reused, so
/// signals to the group cannot reach an unrelated process.
fn ended(group: nix::unistd::Pid) -> Result<bool, nix::errno::Errno> {
    use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
    loop {
        match waitid(Id::Pid(group), flags) {
            Ok(WaitStatus::StillAlive) => return Ok(false),
            Ok(_) => return Ok(true),
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
}

/// Stop the program's process group: SIGTERM, then SIGKILL after the
/// grace period (the program not reaped before, see [`ended`]); the
/// program is reaped either way.
fn stop(child: &mut std::process::Child, group: nix::unistd::Pid) {
    use nix::sys::signal::{Signal, killpg};
    let _ = killpg(group, Signal::SIGTERM);
    let until = Instant::now() + GRACE;
    while Instant::now() < until && !ended(group).unwrap_or(true) {
        std::thread::sleep(POLL);
    }
    let _ = killpg(group, Signal::SIGKILL);
    let _ = child.wait();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_lines_lose_line_ends_and_overdrawn_progress() {
        assert_eq!(log_line(b"epoch 3\r\n"), "epoch 3");
        assert_eq!(log_line(b" 10%\r 50%\r100%\n"), "100%");
        assert_eq!(log_line("é".repeat(LOG_WIDTH + 5).as_bytes()).chars().count(), LOG_WIDTH + 1);
        assert_eq!(log_line(&[0xff, b'a']), "\u{fffd}a");
    }

    #[test]
    fn the_log_passes_a_burst_then_counts_what_it_left_out() {
        let seen = Mutex::new(Vec::new());
        let out = |l: &str| seen.lock().expect("lock").push(l.to_string());
        let mut log = Log::new(&out);
        let t0 = Instant::now();
        let burst = (2.0 * LOG_RATE) as usize;
        for i in 0..burst + 50 {
            log.tx.send(format!("line {i}")).expect("send");
        }
        log.pass_on(t0);
        assert_eq!(seen.lock().expect("lock").len(), burst, "a burst passes, the rest is counted");
        log.tx.send("later".into()).expect("send");
        log.pass_on(t0 + Duration::from_secs(1));
        log.finish();
        let seen = seen.into_inner().expect("lock");
        assert_eq!(seen[burst - 1], format!("line {}", burst - 1));
        assert_eq!(seen[burst..], ["… 50 lines not shown".to_string(), "later".to_string()]);
    }
}
