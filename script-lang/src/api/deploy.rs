//! Deploying on the cluster managers sites run (dask-jobqueue's
//! `SLURMCluster`, `PBSCluster`, `LSFCluster`): `slurm_cluster(#{...})` and
//! `jobqueue_cluster("pbs", #{...})` start a scheduler here and submit
//! `brisk worker` jobs to it; `cluster.scale`, `cluster.adapt`,
//! `cluster.job_script()`, `cluster.status()`, `cluster.close()`;
//! `client(cluster)` runs the session's graphs on it.

use std::sync::Arc;
use std::time::Duration;

use brisk_distributed::deploy::System;
use brisk_distributed::deploy::batch::Commands;
use brisk_distributed::deploy::jobcluster::{AdaptOptions, JobQueueCluster};
use brisk_distributed::deploy::script::JobOptions;
use brisk_distributed::{RemoteClient, Security};
use brisk_engine::exec::deadline::parse_duration;
use rhai::{Array, Dynamic, Engine, EvalAltResult, Map};

use super::args::{options, wrong_type};
use super::fndoc::{FnDoc, doc};
use crate::error::runtime;
use crate::state::{Cluster, SessionState};
use crate::types::{Client, JobCluster};

type Res<T> = Result<T, Box<EvalAltResult>>;

/// How long `wait_for_workers` waits unless told.
const WAIT_TIMEOUT: Duration = Duration::from_secs(120);

const JOB_OPTIONS: &[&str] = &[
    "cores",
    "memory",
    "processes",
    "walltime",
    "queue",
    "account",
    "job_name",
    "job_cpu",
    "job_mem",
    "resource_spec",
    "lsf_units",
    "job_extra_directives",
    "job_directives_skip",
    "job_script_prologue",
    "worker_extra_args",
    "interface",
    "local_directory",
    "log_directory",
    "death_timeout",
    "lifetime",
    "lifetime_stagger",
    "nanny",
    "shebang",
    "program",
    "n_workers",
    "token",
];

pub(super) const DOCS: &[FnDoc] = &[
    doc(
        "slurm_cluster",
        "slurm_cluster(#{cores, memory, walltime, queue, account, processes, job_extra_directives, job_directives_skip, job_script_prologue, worker_extra_args, interface, local_directory, log_directory, death_timeout, lifetime, n_workers, token}) -> Cluster",
        "Start a scheduler in this session and a cluster of SLURM jobs that run `brisk worker` against it (dask-jobqueue's SLURMCluster). cores and memory (per job) are required; walltime defaults to 00:30:00. Each job books --cpus-per-task, --mem, -t, one node and --no-requeue; its worker leaves on its own before the walltime (lifetime: 85% of it, ± 5%) and scale(n) replaces it. No job starts until scale or adapt; client(cluster) runs the session's graphs there; close() retires the workers and cancels every job.",
        "let cluster = slurm_cluster(#{cores: 8, memory: \"32GiB\", walltime: \"01:00:00\", queue: \"regular\"});\ncluster.scale(#{jobs: 4});",
    ),
    doc(
        "jobqueue_cluster",
        "jobqueue_cluster(\"slurm\" | \"pbs\" | \"lsf\", #{...}) -> Cluster",
        "As slurm_cluster, for the batch system named: PBS (qsub/qstat/qdel; resource_spec for -l) or LSF (bsub/bjobs/bkill; lsf_units for -M). The job scripts are dask-jobqueue's for the same options.",
        "let cluster = jobqueue_cluster(\"pbs\", #{cores: 24, memory: \"100GB\", queue: \"regular\"});\nprint(cluster.job_script());",
    ),
    doc(
        "job_script",
        "cluster.job_script()",
        "The script each job runs, exactly as it is submitted (the token travels in the job's environment, not in the script).",
        "print(slurm_cluster(#{cores: 1, memory: \"1GiB\"}).job_script());",
    ),
    doc(
        "adapt",
        "cluster.adapt(#{minimum, maximum, target_duration, interval, wait_count, backlog, minimum_jobs, maximum_jobs})",
        "Scale by the work (distributed's Adaptive): enough workers to finish the queued work (at its measured durations) within target_duration (\"5s\"), between minimum and maximum workers (or *_jobs), checked every interval (\"1s\"). Pending jobs count; at most backlog (16) wait in the queue; on the way down pending jobs are cancelled first, and a worker goes only after wait_count (3) suggestions in a row, when idle, after its results moved. Submitting pauses after three failures in a row.",
        "cluster.adapt(#{minimum: 0, maximum: 10});",
    ),
    doc(
        "status",
        "cluster.status()",
        "One map per job: job_id, state (the batch system's word), reason (why it is pending), workers (their names), connected, seconds (since submitted).",
        "for j in cluster.status() { print(`${j.job_id} ${j.state} ${j.reason}`); }",
    ),
    doc(
        "wait_for_workers",
        "cluster.wait_for_workers(n [, seconds])",
        "Wait until n workers are connected (default 120 s); fails at once with the batch system's reason when a job can never start (SLURM's PartitionConfig: the request does not fit).",
        "cluster.scale(2); cluster.wait_for_workers(2);",
    ),
    doc(
        "scheduler_address",
        "cluster.scheduler_address",
        "Where the cluster's scheduler listens (tcp://HOST:PORT): what its workers connect to.",
        "print(cluster.scheduler_address)",
    ),
];

pub fn register(engine: &mut Engine, state: &Arc<SessionState>) {
    engine.register_fn("slurm_cluster", |m: Map| start(System::Slurm, m));
    engine.register_fn("jobqueue_cluster", |system: &str, m: Map| {
        start(System::parse(system).map_err(|e| runtime(format!("jobqueue_cluster: {e}")))?, m)
    });
    engine.register_fn("job_script", |c: &mut JobCluster| c.0.job_script());
    engine.register_get("scheduler_address", |c: &mut JobCluster| c.0.address().to_string());
    engine
        .register_get("dashboard_link", |c: &mut JobCluster| c.0.dashboard().unwrap_or_default().to_string());
    engine.register_fn("scale", |c: &mut JobCluster, n: i64| {
        let n = count("scale", "the number of workers", n)?;
        scale_jobs(&c.0, c.0.jobs_for_workers(n))
    });
    engine.register_fn("scale", |c: &mut JobCluster, m: Map| scale_map(&c.0, m));
    engine.register_fn("adapt", |c: &mut JobCluster| adapt(&c.0, Map::new()));
    engine.register_fn("adapt", |c: &mut JobCluster, m: Map| adapt(&c.0, m));
    engine.register_fn("status", |c: &mut JobCluster| status(&c.0));
    engine.register_fn("wait_for_workers", |c: &mut JobCluster, n: i64| {
        wait(&c.0, n, WAIT_TIMEOUT.as_secs_f64())
    });
    engine
        .register_fn("wait_for_workers", |c: &mut JobCluster, n: i64, secs: i64| wait(&c.0, n, secs as f64));
    engine.register_fn("wait_for_workers", |c: &mut JobCluster, n: i64, secs: f64| wait(&c.0, n, secs));
    let st = state.clone();
    engine.register_fn("close", move |c: &mut JobCluster| {
        // The session's graphs go back to the local threads if they ran here.
        let ours = st.with_cluster(|cl| cl.deployed.as_ref().is_some_and(|d| Arc::ptr_eq(d, &c.0)));
        if ours == Some(true) {
            st.detach_cluster();
        }
        c.0.close();
    });
    let st = state.clone();
    engine.register_fn("client", move |c: JobCluster| client(&st, &c.0));
}

fn count(function: &str, what: &str, n: i64) -> Res<usize> {
    if !(0..=10_000).contains(&n) {
        return Err(runtime(format!("{function}: {what} must be between 0 and 10000, got {n}")));
    }
    Ok(n as usize)
}

pub(super) fn text(function: &str, key: &str, v: &Dynamic) -> Res<String> {
    v.clone().into_string().map_err(|_| wrong_type(function, &format!("a string for {key}"), v))
}

fn strings(function: &str, key: &str, v: &Dynamic) -> Res<Vec<String>> {
    let what = format!("an array of strings for {key}");
    let a = v.read_lock::<Array>().ok_or_else(|| wrong_type(function, &what, v))?;
    a.iter().map(|x| x.clone().into_string().map_err(|_| wrong_type(function, &what, x))).collect()
}

pub(super) fn duration(function: &str, key: &str, v: &Dynamic) -> Res<Duration> {
    if let Ok(n) = v.as_int() {
        if n < 0 {
            return Err(runtime(format!("{function}: {key} must not be negative, got {n}")));
        }
        return Ok(Duration::from_secs(n as u64));
    }
    if let Ok(f) = v.as_float() {
        if !(f.is_finite() && (0.0..1e9).contains(&f)) {
            return Err(runtime(format!("{function}: {key} must be a number of seconds, got {f}")));
        }
        return Ok(Duration::from_secs_f64(f));
    }
    let s = text(function, key, v)?;
    parse_duration(&s).map_err(|e| runtime(format!("{function}: {key}: {e}")))
}

fn size(function: &str, key: &str, v: &Dynamic) -> Res<u64> {
    if let Ok(n) = v.as_int() {
        return u64::try_from(n).ok().filter(|&n| n > 0).ok_or_else(|| {
            runtime(format!("{function}: {key} must be a positive number of bytes, got {n}"))
        });
    }
    let s = text(function, key, v)?;
    brisk_engine::memory::parse_size(&s).map_err(|e| runtime(format!("{function}: {key}: {e}")))
}

fn int(function: &str, key: &str, v: &Dynamic, min: i64, max: i64) -> Res<i64> {
    let n = v.as_int().map_err(|_| wrong_type(function, &format!("an int for {key}"), v))?;
    if !(min..=max).contains(&n) {
        return Err(runtime(format!("{function}: {key} must be between {min} and {max}, got {n}")));
    }
    Ok(n)
}

/// The job options of a `slurm_cluster` map.
fn job_options(function: &str, m: &Map) -> Res<JobOptions> {
    let cores = m.get("cores").ok_or_else(|| {
        runtime(format!("{function}: cores is required (the cores of one job, e.g. cores: 8)"))
    })?;
    let cores = int(function, "cores", cores, 1, 100_000)? as u32;
    let memory = m.get("memory").ok_or_else(|| {
        runtime(format!("{function}: memory is required (the memory of one job, e.g. memory: \"32GiB\")"))
    })?;
    let memory = size(function, "memory", memory)?;
    let program = match m.get("program") {
        Some(v) => text(function, "program", v)?,
        None => brisk_distributed::cluster::program()
            .map_err(|e| runtime(format!("{function}: {e}")))?
            .display()
            .to_string(),
    };
    let mut o = JobOptions::new(cores, memory, program);
    for (k, v) in m.iter() {
        let k = k.as_str();
        match k {
            "processes" => o.processes = int(function, k, v, 1, 1024)? as u32,
            "walltime" => o.walltime = Some(text(function, k, v)?),
            "queue" => o.queue = Some(text(function, k, v)?),
            "account" => o.account = Some(text(function, k, v)?),
            "job_name" => o.job_name = text(function, k, v)?,
            "job_cpu" => o.job_cpu = Some(int(function, k, v, 1, 100_000)? as u32),
            "job_mem" => o.job_mem = Some(text(function, k, v)?),
            "resource_spec" => o.resource_spec = Some(text(function, k, v)?),
            "lsf_units" => o.lsf_units = Some(text(function, k, v)?),
            "job_extra_directives" => o.job_extra_directives = strings(function, k, v)?,
            "job_directives_skip" => o.job_directives_skip = strings(function, k, v)?,
            "job_script_prologue" => o.job_script_prologue = strings(function, k, v)?,
            "worker_extra_args" => o.worker_extra_args = strings(function, k, v)?,
            "interface" => o.interface = Some(text(function, k, v)?),
            "local_directory" => o.local_directory = Some(text(function, k, v)?),
            "log_directory" => o.log_directory = Some(text(function, k, v)?),
            "death_timeout" => o.death_timeout = duration(function, k, v)?,
            "lifetime" => o.lifetime = Some(duration(function, k, v)?),
            "lifetime_stagger" => o.lifetime_stagger = Some(duration(function, k, v)?),
            "nanny" => o.nanny = v.as_bool().map_err(|_| wrong_type(function, "a bool for nanny", v))?,
            "shebang" => o.shebang = text(function, k, v)?,
            _ => {}
        }
    }
    Ok(o)
}

fn start(system: System, m: Map) -> Res<JobCluster> {
    let function = if system == System::Slurm {
        "slurm_cluster".to_string()
    } else {
        format!("jobqueue_cluster(\"{}\")", system.name())
    };
    let m = options(Some(m), &function, JOB_OPTIONS)?;
    let o = job_options(&function, &m)?;
    if let Some(d) = &o.log_directory {
        std::fs::create_dir_all(d)
            .map_err(|e| runtime(format!("{function}: cannot make log_directory {d}: {e}")))?;
    }
    let token = match m.get("token") {
        Some(v) => Some(text(&function, "token", v)?),
        None => Security::with_token(None).token,
    };
    let n = match m.get("n_workers") {
        Some(v) => Some(int(&function, "n_workers", v, 0, 10_000)? as usize),
        None => None,
    };
    let cluster = JobQueueCluster::start(Box::new(Commands::new(system)), o, None, token)
        .map_err(|e| runtime(format!("{function}: {e}")))?;
    let cluster = Arc::new(cluster);
    if let Some(n) = n {
        scale_jobs(&cluster, cluster.jobs_for_workers(n))?;
    }
    Ok(JobCluster(cluster))
}

fn scale_jobs(c: &JobQueueCluster, jobs: usize) -> Res<()> {
    if c.is_closed() {
        return Err(runtime("scale: this cluster is closed"));
    }
    c.scale_jobs(jobs).map_err(|e| runtime(format!("scale: {e}")))
}

fn scale_map(c: &JobQueueCluster, m: Map) -> Res<()> {
    let m = options(Some(m), "scale", &["jobs", "workers", "cores", "memory"])?;
    if m.len() != 1 {
        return Err(runtime("scale: give one of jobs, workers, cores or memory, as #{jobs: 4}"));
    }
    let (k, v) = m.iter().next().ok_or_else(|| runtime("scale: nothing to scale to"))?;
    let jobs = match k.as_str() {
        "jobs" => count("scale", "jobs", int("scale", "jobs", v, 0, 10_000)?)?,
        "workers" => c.jobs_for_workers(count("scale", "workers", int("scale", "workers", v, 0, 10_000)?)?),
        "cores" => c.jobs_for_cores(int("scale", "cores", v, 0, 10_000_000)? as u64),
        _ => c.jobs_for_memory(size("scale", "memory", v)?),
    };
    scale_jobs(c, jobs)
}

fn adapt(c: &JobQueueCluster, m: Map) -> Res<()> {
    let a = adapt_options(m, c.options().processes.max(1) as usize)?;
    if c.is_closed() {
        return Err(runtime("adapt: this cluster is closed"));
    }
    c.adapt(&a);
    Ok(())
}

/// `adapt`'s options, in workers (`*_jobs` count `per_job` workers each).
pub(super) fn adapt_options(m: Map, per_job: usize) -> Res<AdaptOptions> {
    let allowed = [
        "minimum",
        "maximum",
        "minimum_jobs",
        "maximum_jobs",
        "target_duration",
        "interval",
        "wait_count",
        "backlog",
    ];
    let m = options(Some(m), "adapt", &allowed)?;
    let mut a = AdaptOptions::default();
    for (k, v) in m.iter() {
        let k = k.as_str();
        match k {
            "minimum" => a.minimum = int("adapt", k, v, 0, 100_000)? as usize,
            "maximum" => a.maximum = int("adapt", k, v, 0, 100_000)? as usize,
            "minimum_jobs" => a.minimum = int("adapt", k, v, 0, 100_000)? as usize * per_job,
            "maximum_jobs" => a.maximum = int("adapt", k, v, 0, 100_000)? as usize * per_job,
            "target_duration" => a.target_duration = duration("adapt", k, v)?,
            "interval" => a.interval = duration("adapt", k, v)?,
            "wait_count" => a.wait_count = int("adapt", k, v, 1, 1000)? as u32,
            "backlog" => a.backlog = int("adapt", k, v, 1, 10_000)? as usize,
            _ => {}
        }
    }
    if a.minimum > a.maximum {
        return Err(runtime(format!("adapt: minimum ({}) is above maximum ({})", a.minimum, a.maximum)));
    }
    if a.interval < Duration::from_millis(100) {
        return Err(runtime("adapt: interval must be at least 100ms"));
    }
    if a.target_duration.is_zero() {
        return Err(runtime("adapt: target_duration must be positive"));
    }
    Ok(a)
}

fn status(c: &JobQueueCluster) -> Array {
    c.manager()
        .status()
        .into_iter()
        .map(|j| {
            let mut m = Map::new();
            m.insert("job_id".into(), j.id.into());
            m.insert("state".into(), j.state.into());
            m.insert("reason".into(), j.reason.map_or(Dynamic::UNIT, Into::into));
            m.insert("workers".into(), j.workers.into_iter().map(Dynamic::from).collect::<Array>().into());
            m.insert("connected".into(), j.connected.into());
            m.insert("seconds".into(), j.seconds.into());
            Dynamic::from_map(m)
        })
        .collect()
}

fn wait(c: &JobQueueCluster, n: i64, secs: f64) -> Res<()> {
    let n = count("wait_for_workers", "the number of workers", n)?;
    if !(secs.is_finite() && secs > 0.0 && secs < 1e7) {
        return Err(runtime(format!(
            "wait_for_workers: the timeout must be a positive number of seconds, got {secs}"
        )));
    }
    c.manager()
        .wait_for_workers(n, Duration::from_secs_f64(secs))
        .map_err(|e| runtime(format!("wait_for_workers: {e}")))
}

/// `client(cluster)`: the session's graphs run on the cluster's scheduler.
fn client(state: &Arc<SessionState>, c: &Arc<JobQueueCluster>) -> Res<Client> {
    if c.is_closed() {
        return Err(runtime("client: this cluster is closed"));
    }
    let security = Security { token: c.token.clone(), tls: None };
    let rc = RemoteClient::connect(c.address(), security, state.config().fuse)
        .map_err(|e| runtime(format!("client: cannot connect to {}: {e}", c.address())))?;
    state.attach_cluster(Cluster {
        client: Arc::new(rc),
        local: None,
        adaptive: None,
        deployed: Some(c.clone()),
    });
    Ok(Client { state: state.clone() })
}
