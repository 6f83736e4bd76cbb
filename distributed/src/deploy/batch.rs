//! Talking to a batch system: submit a job script, ask where jobs are,
//! cancel them. The thin part that differs per system; everything else
//! (naming, scaling, retiring before cancelling) is the manager's.
//!
//! Each command runs with a deadline (a batch controller that does not
//! answer must not hang the session) and its own words come back in the
//! error: "sbatch: error: Memory specification can not be satisfied".

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::System;

/// How long one command of the batch system may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    #[error("cannot run {program}: {error} (is {system} installed here, and on PATH?)")]
    Spawn { program: String, system: &'static str, error: std::io::Error },
    #[error("{program} did not answer within {}s", .timeout.as_secs())]
    Timeout { program: String, timeout: Duration },
    #[error("{program} failed: {message}")]
    Failed { program: String, message: String },
    #[error("{program} printed {output:?}, which holds no job id")]
    NoJobId { program: String, output: String },
}

/// Where a job is, as the batch system says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobState {
    pub id: String,
    /// The system's own word: PENDING, RUNNING, COMPLETING (SLURM); Q, R (PBS); PEND, RUN (LSF).
    pub state: String,
    /// Why it waits, when it does (SLURM's `%r`: Resources, Priority, PartitionConfig…).
    pub reason: Option<String>,
    pub phase: Phase,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Waiting in the queue.
    Pending,
    /// Started: its workers are starting or running.
    Running,
    /// Finished, cancelled, failed or on its way out.
    Ended,
}

/// Submitting, watching and cancelling jobs.
pub trait Batch: Send + Sync {
    fn system(&self) -> System;
    /// Submit `script` with `env` added to the submitting command's
    /// environment (the job inherits it); the job's id.
    fn submit(&self, script: &str, env: &[(String, String)]) -> Result<String, BatchError>;
    /// The jobs of `ids` the system still knows and has not finished;
    /// those left out have ended.
    fn poll(&self, ids: &[String]) -> Result<Vec<JobState>, BatchError>;
    /// Cancel jobs: `graceful` sends SIGTERM to every process of the job
    /// (workers hand over their results and exit), else the job is killed.
    fn cancel(&self, ids: &[String], graceful: bool) -> Result<(), BatchError>;
}

/// The pending reasons that never clear by waiting: the request is
/// impossible here (SLURM accepts `--cpus-per-task=64` on 8-CPU nodes and
/// leaves it pending forever with `PartitionConfig`), or held.
pub fn fatal_reason(system: System, reason: &str) -> bool {
    match system {
        System::Slurm => matches!(
            reason,
            "PartitionConfig"
                | "PartitionNodeLimit"
                | "PartitionTimeLimit"
                | "BadConstraints"
                | "InvalidAccount"
                | "InvalidQOS"
                | "AccountNotAllowed"
                | "QOSMaxCpuPerJobLimit"
                | "QOSMaxMemoryPerJob"
                | "QOSMaxNodePerJobLimit"
                | "QOSMaxWallDurationPerJobLimit"
                | "DependencyNeverSatisfied"
                | "JobHeldUser"
                | "JobHeldAdmin"
        ),
        System::Pbs | System::Lsf => false,
    }
}

/// The batch system's own commands, found on PATH.
#[derive(Clone, Debug)]
pub struct Commands {
    system: System,
}

impl Commands {
    pub fn new(system: System) -> Commands {
        Commands { system }
    }

    fn run(
        &self,
        program: &str,
        args: &[&str],
        stdin: Option<&str>,
        env: &[(String, String)],
    ) -> Result<String, BatchError> {
        run(self.system, program, args, stdin, env)
    }
}

impl Batch for Commands {
    fn system(&self) -> System {
        self.system
    }

    fn submit(&self, script: &str, env: &[(String, String)]) -> Result<String, BatchError> {
        // Every system reads the script on stdin: no file to leave behind.
        let (program, args): (&str, &[&str]) = match self.system {
            System::Slurm => ("sbatch", &["--parsable"]),
            // qsub exports only the variables it is told to.
            System::Pbs => ("qsub", &["-v", "BRISK_TOKEN"]),
            System::Lsf => ("bsub", &[]),
        };
        let out = self.run(program, args, Some(script), env)?;
        parse_job_id(self.system, &out)
            .ok_or_else(|| BatchError::NoJobId { program: program.into(), output: out.trim().to_string() })
    }

    fn poll(&self, ids: &[String]) -> Result<Vec<JobState>, BatchError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        match self.system {
            System::Slurm => {
                // The user's jobs in every state squeue shows; asking for
                // ids squeue no longer knows would be an error.
                let out = self.run("squeue", &["-h", "--me", "-o", "%i|%T|%r"], None, &[])?;
                Ok(parse_squeue(&out).into_iter().filter(|j| ids.contains(&j.id)).collect())
            }
            System::Pbs => {
                let mut states = Vec::new();
                for id in ids {
                    // qstat fails for a job it has forgotten ("Unknown Job
                    // Id"): it ended. Any other failure is the poll's.
                    match self.run("qstat", &["-f", id], None, &[]) {
                        Ok(out) => states.extend(parse_qstat(id, &out)),
                        Err(e) if forgotten(&e) => {}
                        Err(e) => return Err(e),
                    }
                }
                Ok(states)
            }
            System::Lsf => {
                let mut args = vec!["-noheader", "-o", "jobid stat pend_reason delimiter='|'"];
                args.extend(ids.iter().map(String::as_str));
                match self.run("bjobs", &args, None, &[]) {
                    Ok(out) => Ok(parse_bjobs(&out)),
                    // Every job asked for is gone ("Job <12> is not found").
                    Err(e) if forgotten(&e) => Ok(Vec::new()),
                    Err(e) => Err(e),
                }
            }
        }
    }

    fn cancel(&self, ids: &[String], graceful: bool) -> Result<(), BatchError> {
        if ids.is_empty() {
            return Ok(());
        }
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        let (program, mut args): (&str, Vec<&str>) = match (self.system, graceful) {
            // `--full` reaches the batch shell and its children: without
            // it the signal goes only to job steps, which these jobs lack.
            (System::Slurm, true) => ("scancel", vec!["--signal=TERM", "--full"]),
            (System::Slurm, false) => ("scancel", vec![]),
            (System::Pbs, true) => ("qsig", vec!["-s", "TERM"]),
            (System::Pbs, false) => ("qdel", vec![]),
            (System::Lsf, true) => ("bkill", vec!["-s", "TERM"]),
            (System::Lsf, false) => ("bkill", vec![]),
        };
        args.extend(ids);
        self.run(program, &args, None, &[]).map(drop)
    }
}

/// The system no longer knows the job: it ended (a poll that fails any
/// other way must not be read as every job having ended).
fn forgotten(e: &BatchError) -> bool {
    matches!(e, BatchError::Failed { message, .. }
        if message.contains("Unknown Job Id") || message.contains("is not found"))
}

/// Run one command with a deadline; its stdout, or its stderr as the error.
fn run(
    system: System,
    program: &str,
    args: &[&str],
    stdin: Option<&str>,
    env: &[(String, String)],
) -> Result<String, BatchError> {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().map_err(|error| BatchError::Spawn {
        program: program.into(),
        system: system.name(),
        error,
    })?;
    // Feed stdin and read both pipes on threads: a command that does not
    // read its input, or fills a pipe, cannot stall us past the deadline.
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        let text = text.to_string();
        std::thread::spawn(move || {
            let _ = pipe.write_all(text.as_bytes());
        });
    }
    let mut out_pipe = child.stdout.take();
    let mut err_pipe = child.stderr.take();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(p) = out_pipe.as_mut() {
            let _ = p.take(1 << 24).read_to_string(&mut s);
        }
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(p) = err_pipe.as_mut() {
            let _ = p.take(1 << 20).read_to_string(&mut s);
        }
        s
    });
    let deadline = Instant::now() + COMMAND_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(BatchError::Timeout { program: program.into(), timeout: COMMAND_TIMEOUT });
            }
        }
    };
    let out = out.join().unwrap_or_default();
    let err = err.join().unwrap_or_default();
    if status.success() {
        Ok(out)
    } else {
        let message = if err.trim().is_empty() { out.trim() } else { err.trim() };
        let message = if message.is_empty() { format!("exit status {status}") } else { message.to_string() };
        Err(BatchError::Failed { program: program.into(), message })
    }
}

/// The id in what the submit command printed.
pub fn parse_job_id(system: System, out: &str) -> Option<String> {
    let text = out.trim();
    let id = match system {
        // `--parsable`: "123" or "123;cluster".
        System::Slurm => text.lines().last()?.split(';').next()?.trim().to_string(),
        // "123.server" (PBS Pro, Torque).
        System::Pbs => text.lines().last()?.trim().to_string(),
        // "Job <123> is submitted to queue <normal>."
        System::Lsf => {
            let start = text.find('<')? + 1;
            let len = text[start..].find('>')?;
            text[start..start + len].to_string()
        }
    };
    let digits = id.split('.').next().unwrap_or("");
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) && id.len() < 256).then_some(id)
}

fn slurm_phase(state: &str) -> Phase {
    match state {
        "PENDING" | "CONFIGURING" | "REQUEUED" | "REQUEUE_HOLD" | "REQUEUE_FED" | "RESV_DEL_HOLD" => {
            Phase::Pending
        }
        "RUNNING" | "SUSPENDED" | "STOPPED" | "SIGNALING" | "RESIZING" | "STAGE_OUT" => Phase::Running,
        _ => Phase::Ended,
    }
}

/// `squeue -h -o '%i|%T|%r'` lines.
pub fn parse_squeue(out: &str) -> Vec<JobState> {
    out.lines()
        .filter_map(|l| {
            let mut f = l.trim().splitn(3, '|');
            let (id, state, reason) = (f.next()?.trim(), f.next()?.trim(), f.next().unwrap_or("").trim());
            if id.is_empty() || state.is_empty() {
                return None;
            }
            let reason = (!reason.is_empty() && reason != "None").then(|| reason.to_string());
            Some(JobState { id: id.into(), state: state.into(), reason, phase: slurm_phase(state) })
        })
        .collect()
}

/// `qstat -f ID`: its `job_state` and `comment`.
pub fn parse_qstat(id: &str, out: &str) -> Option<JobState> {
    let field = |name: &str| {
        out.lines().find_map(|l| {
            let (k, v) = l.trim().split_once(" = ")?;
            (k.trim() == name).then(|| v.trim().to_string())
        })
    };
    let state = field("job_state")?;
    let phase = match state.as_str() {
        "Q" | "H" | "W" | "T" | "S" => Phase::Pending,
        "R" | "B" => Phase::Running,
        _ => Phase::Ended,
    };
    Some(JobState { id: id.into(), state, reason: field("comment"), phase })
}

/// `bjobs -noheader -o "jobid stat pend_reason delimiter='|'"` lines.
pub fn parse_bjobs(out: &str) -> Vec<JobState> {
    out.lines()
        .filter_map(|l| {
            let mut f = l.trim().splitn(3, '|');
            let (id, state) = (f.next()?.trim(), f.next()?.trim());
            if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let reason = f.next().map(str::trim).filter(|r| !r.is_empty() && *r != "-").map(str::to_string);
            let phase = match state {
                "PEND" | "PSUSP" => Phase::Pending,
                "RUN" | "USUSP" | "SSUSP" => Phase::Running,
                _ => Phase::Ended,
            };
            Some(JobState { id: id.into(), state: state.into(), reason, phase })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_ids_are_read_from_each_systems_answer() {
        assert_eq!(parse_job_id(System::Slurm, "123\n").as_deref(), Some("123"));
        assert_eq!(parse_job_id(System::Slurm, "77;cluster2\n").as_deref(), Some("77"));
        assert_eq!(parse_job_id(System::Slurm, "Submitted batch job 5\n"), None);
        assert_eq!(parse_job_id(System::Pbs, "4242.pbs-server\n").as_deref(), Some("4242.pbs-server"));
        assert_eq!(
            parse_job_id(System::Lsf, "Job <913> is submitted to queue <normal>.\n").as_deref(),
            Some("913")
        );
        assert_eq!(parse_job_id(System::Lsf, "garbage"), None);
    }

    #[test]
    fn squeue_lines_give_states_and_reasons() {
        let s = parse_squeue("12|PENDING|PartitionConfig\n13|RUNNING|None\n14|COMPLETING|None\nbad\n");
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].phase, Phase::Pending);
        assert_eq!(s[0].reason.as_deref(), Some("PartitionConfig"));
        assert!(fatal_reason(System::Slurm, "PartitionConfig"));
        assert!(!fatal_reason(System::Slurm, "Resources"));
        assert_eq!(s[1].phase, Phase::Running);
        assert_eq!(s[1].reason, None);
        assert_eq!(s[2].phase, Phase::Ended);
    }

    #[test]
    fn qstat_and_bjobs_answers_give_states() {
        let q = parse_qstat(
            "7.srv",
            "Job Id: 7.srv\n    job_state = Q\n    comment = Not Running: Insufficient amount of resource: ncpus\n",
        );
        assert_eq!(q.as_ref().map(|j| j.phase), Some(Phase::Pending));
        assert!(q.is_some_and(|j| j.reason.is_some_and(|r| r.contains("ncpus"))));
        let b = parse_bjobs("913|PEND|New job is waiting for scheduling\n914|RUN|-\n");
        assert_eq!(b.len(), 2);
        assert_eq!(b[1].phase, Phase::Running);
        assert_eq!(b[1].reason, None);
    }

    #[test]
    fn a_missing_program_is_named() {
        let gone =
            BatchError::Failed { program: "qstat".into(), message: "qstat: Unknown Job Id 7.srv".into() };
        assert!(forgotten(&gone));
        let down = BatchError::Failed { program: "bjobs".into(), message: "LSF is down".into() };
        assert!(!forgotten(&down));
        let e = run(System::Slurm, "brisk-no-such-sbatch", &[], None, &[]);
        assert!(e.is_err_and(|e| e.to_string().contains("brisk-no-such-sbatch")));
        let e = run(
            System::Slurm,
            "sh",
            &["-c", "echo 'sbatch: error: Batch job submission failed' >&2; exit 1"],
            None,
            &[],
        );
        assert!(e.is_err_and(|e| e.to_string().contains("Batch job submission failed")));
        let out =
            run(System::Slurm, "sh", &["-c", "cat; echo \"$X\""], Some("in\n"), &[("X".into(), "y".into())]);
        assert_eq!(out.ok().as_deref(), Some("in\ny\n"));
    }
}
