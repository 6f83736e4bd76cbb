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
                    cmd.current_dir(&**d);
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
    let readers = [
        child.stdout.take().map(|o| drain(o, outputs[0].clone())),
        child.stderr.take().map(|e| drain(e, outputs[1].clone())),
    ];
    let waiting =
        |e: nix::errno::Errno| TaskError::user(format!("run_command: waiting for {program:?}: {e}"));
    while !ended(group).map_err(waiting)? {
        if ctx.is_cancelled() {
            stop(&mut child, group);
            return Err(TaskError::cancelled());
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
/// [`KEEP`] bytes in `into`.
fn drain(mut r: impl Read + Send + 'static, into: Arc<Mutex<Vec<u8>>>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buf = [0u8; 64 << 10];
        loop {
            match r.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    let mut kept = into.lock().unwrap_or_else(|e| e.into_inner());
                    let room = KEEP.saturating_sub(kept.len()).min(n);
                    kept.extend_from_slice(&buf[..room]);
                }
            }
        }
    })
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
