//! `brisk scheduler` and `brisk worker`: the cluster's processes. Each
//! serves until told to stop (SIGINT, SIGTERM, SIGHUP, or for a worker the
//! scheduler's word) and then exits with 0; `--exit-with-parent` (used by
//! `local_cluster`) also ends it when its parent goes.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use brisk_distributed::{SchedulerOptions, Security, TlsFiles, WorkerOptions};

/// Mutual TLS: every process of the cluster gives all three (else the
/// `BRISK_TLS_CERT`, `BRISK_TLS_KEY`, `BRISK_TLS_CA` variables).
#[derive(clap::Args)]
pub struct TlsArgs {
    /// This process's certificate (PEM), signed by the cluster's CA.
    #[arg(long, value_name = "FILE")]
    tls_cert: Option<std::path::PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, value_name = "FILE")]
    tls_key: Option<std::path::PathBuf>,
    /// The CA certificate (PEM): peers must present a certificate it signed.
    #[arg(long, value_name = "FILE")]
    tls_ca: Option<std::path::PathBuf>,
}

#[derive(clap::Args)]
pub struct TopArgs {
    /// The scheduler: tcp://HOST:PORT (or tls://).
    pub address: String,
    /// The cluster's shared secret (else BRISK_TOKEN).
    #[arg(long)]
    pub token: Option<String>,
    #[command(flatten)]
    pub tls: TlsArgs,
}

impl TlsArgs {
    pub fn security(self, token: Option<String>) -> anyhow::Result<Security> {
        let files = TlsFiles { cert: self.tls_cert, key: self.tls_key, ca: self.tls_ca };
        Ok(Security::from_flags(token, files)?)
    }
}

#[derive(clap::Args)]
pub struct SchedulerArgs {
    /// The interface to listen on (127.0.0.1: this machine only).
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// The port workers and clients connect to (0: any free port).
    #[arg(long, default_value_t = 8786)]
    port: u16,
    /// The shared secret every worker and client must present (else BRISK_TOKEN).
    #[arg(long)]
    token: Option<String>,
    /// Seconds without a heartbeat after which a worker is removed.
    #[arg(long, default_value_t = 30.0)]
    worker_ttl: f64,
    /// The HTTP port: /health, /metrics (Prometheus) and /api/v1/workers
    /// (another free port if taken; 0: any free port).
    #[arg(long, default_value_t = 8787)]
    http_port: u16,
    /// Serve no HTTP port.
    #[arg(long)]
    no_http: bool,
    /// Deaths of workers running a task before it errs as KilledWorker.
    #[arg(long, default_value_t = 3)]
    allowed_failures: u32,
    /// Keep a journal of the graph and of where results are in FILE; a
    /// scheduler started again on the same FILE (after a crash) carries on
    /// where it was, on the same port: workers and clients come back and
    /// only what was lost is computed again.
    #[arg(long, value_name = "FILE")]
    journal: Option<std::path::PathBuf>,
    #[command(flatten)]
    tls: TlsArgs,
    #[arg(long, hide = true)]
    exit_with_parent: bool,
}

#[derive(clap::Args)]
pub struct WorkerArgs {
    /// The scheduler: tcp://HOST:PORT.
    scheduler: String,
    /// Threads that run tasks (default: one per core).
    #[arg(long)]
    nthreads: Option<usize>,
    /// Memory this worker may use: bytes, "4GiB", "auto" (the machine's
    /// memory times this worker's share of the cores) or "none". Results
    /// spill to disk past 60%, no task starts past 80%, and the nanny
    /// restarts the worker past 95% (the four flags below).
    #[arg(long, default_value = "auto")]
    memory_limit: String,
    /// Results beyond this fraction of the limit go to disk (default 0.6;
    /// "off": none do).
    #[arg(long, value_parser = threshold)]
    memory_target: Option<Threshold>,
    /// Past this fraction of the limit in process memory, spilling is forced (default 0.7).
    #[arg(long, value_parser = threshold)]
    memory_spill: Option<Threshold>,
    /// Past this fraction in process memory, the worker starts no task (default 0.8).
    #[arg(long, value_parser = threshold)]
    memory_pause: Option<Threshold>,
    /// Past this fraction in process memory, the nanny restarts the worker (default 0.95).
    #[arg(long, value_parser = threshold)]
    memory_terminate: Option<Threshold>,
    /// The worker's name (default: worker-PID).
    #[arg(long)]
    name: Option<String>,
    /// Abstract resources this worker offers: "GPU=1,MEM=2e9".
    #[arg(long)]
    resources: Option<String>,
    /// The cluster's shared secret (else BRISK_TOKEN).
    #[arg(long)]
    token: Option<String>,
    /// The address to serve data on (default: the one that reaches the scheduler).
    #[arg(long, conflicts_with = "interface")]
    host: Option<String>,
    /// The network interface to serve data on, by name (eth0, ib0): its
    /// IPv4 address is used.
    #[arg(long)]
    interface: Option<String>,
    /// Keep trying to reach the scheduler this long ("60s"), at first and
    /// after losing it; then exit (a batch job then ends instead of
    /// waiting for a scheduler that is gone).
    #[arg(long, value_name = "DURATION")]
    death_timeout: Option<String>,
    /// Leave cleanly after this long ("55m"): results move to other workers
    /// first. A batch job's worker goes before its walltime kills it.
    #[arg(long, value_name = "DURATION")]
    lifetime: Option<String>,
    /// Move each worker's lifetime by a random amount up to this ("4m"),
    /// so workers started together do not leave together.
    #[arg(long, value_name = "DURATION", requires = "lifetime")]
    lifetime_stagger: Option<String>,
    /// Start this many worker processes, named NAME-0, NAME-1, … (each
    /// with its own nanny, its share of nothing: give each its threads
    /// and memory limit).
    #[arg(long, default_value_t = 1)]
    nworkers: usize,
    /// Where to keep shuffle pieces (default: the temporary directory).
    #[arg(long)]
    local_directory: Option<std::path::PathBuf>,
    /// Run the worker without a nanny (a supervising process that restarts
    /// it when it dies or its memory passes 95% of the limit).
    #[arg(long)]
    no_nanny: bool,
    #[command(flatten)]
    tls: TlsArgs,
    #[arg(long, hide = true)]
    exit_with_parent: bool,
    /// For the reliability tests: die at this point (split, serve-pieces,
    /// collect) the first time it is reached.
    #[arg(long, hide = true)]
    kill_at: Option<brisk_distributed::worker::KillAt>,
    /// Make this a CUDA worker: it must see a GPU (the first one visible),
    /// and keeps its GPU results on the device up to this limit (a fraction
    /// of the device, "0.8", or a size, "16GiB"), moving the least recently
    /// used to host memory beyond it. `brisk cuda-worker` sets it.
    #[arg(long, value_name = "LIMIT", value_parser = device_limit)]
    device_memory_limit: Option<brisk_distributed::worker::DeviceLimit>,
}

/// `brisk cuda-worker`: one worker per GPU, as dask-cuda's `dask cuda worker`.
#[derive(clap::Args)]
pub struct CudaWorkerArgs {
    /// The GPUs to start a worker on: "0,2" (indices or UUIDs; default:
    /// those CUDA_VISIBLE_DEVICES lists, else every GPU).
    #[arg(long, value_name = "LIST")]
    devices: Option<String>,
    /// Every worker flag, as for `brisk worker`; here --nthreads defaults
    /// to 1, --memory-limit "auto" shares the machine's memory between the
    /// GPUs' workers, and --device-memory-limit defaults to 0.8.
    #[command(flatten)]
    worker: WorkerArgs,
}

fn device_limit(text: &str) -> Result<brisk_distributed::worker::DeviceLimit, String> {
    brisk_distributed::worker::DeviceLimit::parse(text)
}

pub fn scheduler(args: SchedulerArgs) -> anyhow::Result<ExitCode> {
    if args.exit_with_parent {
        brisk_distributed::cluster::exit_with_parent();
    }
    if !(args.worker_ttl.is_finite() && args.worker_ttl > 0.0) {
        anyhow::bail!("--worker-ttl must be a positive number of seconds");
    }
    let options = SchedulerOptions {
        host: args.host,
        port: args.port,
        security: args.tls.security(args.token)?,
        worker_ttl: Duration::from_secs_f64(args.worker_ttl),
        allowed_failures: args.allowed_failures,
        http_port: (!args.no_http).then_some(args.http_port),
        journal: args.journal,
    };
    let handle = brisk_distributed::server::start(options)?;
    // The only lines on stdout: `local_cluster` and scripts read the address
    // (first) and the HTTP address (second, unless --no-http) here.
    println!("brisk scheduler at {}", handle.address);
    if let Some(h) = &handle.http_address {
        println!("brisk scheduler HTTP at {h} (/health, /metrics, /api/v1/workers)");
    }
    wait_for_signal();
    handle.stop();
    Ok(ExitCode::SUCCESS)
}

pub fn worker(args: WorkerArgs) -> anyhow::Result<ExitCode> {
    if args.exit_with_parent {
        brisk_distributed::cluster::exit_with_parent();
    }
    brisk_distributed::comm::parse_address(&args.scheduler)?;
    anyhow::ensure!((1..=256).contains(&args.nworkers), "--nworkers must be between 1 and 256");
    let duration = |flag: &str, v: &Option<String>| -> anyhow::Result<Option<Duration>> {
        v.as_deref()
            .map(|t| {
                brisk_engine::exec::deadline::parse_duration(t).map_err(|e| anyhow::anyhow!("--{flag}: {e}"))
            })
            .transpose()
    };
    let death_timeout = duration("death-timeout", &args.death_timeout)?;
    let lifetime = duration("lifetime", &args.lifetime)?;
    let lifetime_stagger = duration("lifetime-stagger", &args.lifetime_stagger)?.unwrap_or_default();
    let host = match &args.interface {
        Some(i) => Some(
            brisk_distributed::deploy::interface_address(i)
                .map_err(|e| anyhow::anyhow!("--interface: {e}"))?,
        ),
        None => args.host.clone(),
    };
    if args.nworkers > 1 {
        return worker_group(args.nworkers, args.name.as_deref());
    }
    let mut options = WorkerOptions::new(&args.scheduler);
    options.death_timeout = death_timeout;
    options.lifetime = lifetime;
    options.lifetime_stagger = lifetime_stagger;
    if let Some(n) = args.nthreads {
        anyhow::ensure!(n > 0, "--nthreads must be at least 1");
        options.nthreads = n;
    }
    options.memory_limit = memory_limit(&args.memory_limit, options.nthreads)?;
    // Each flag left out keeps Dask's default (0.6, 0.7, 0.8, 0.95).
    let d = brisk_distributed::worker::MemoryThresholds::default();
    let or = |flag: Option<Threshold>, default| flag.map_or(default, |t| t.0);
    options.thresholds = brisk_distributed::worker::MemoryThresholds {
        target: or(args.memory_target, d.target),
        spill: or(args.memory_spill, d.spill),
        pause: or(args.memory_pause, d.pause),
        terminate: or(args.memory_terminate, d.terminate),
    };
    if let Some(r) = &args.resources {
        options.resources = parse_resources(r)?;
    }
    options.name = args.name;
    options.host = host;
    options.local_directory = args.local_directory;
    options.kill_at = args.kill_at;
    options.device_memory_limit = args.device_memory_limit;
    options.security = args.tls.security(args.token)?;
    if !args.no_nanny {
        return crate::nanny::run(options.memory_limit, options.thresholds.terminate);
    }
    if let Some(bytes) = options.memory_limit {
        brisk_engine::memory::set_limit(Some(bytes));
    }
    // A signal makes the worker leave cleanly: it tells the scheduler,
    // which moves its work elsewhere without counting a death, and ends.
    // If that takes more than a few seconds it ends anyway.
    std::thread::Builder::new().name("brisk-signals".into()).spawn(|| {
        wait_for_signal();
        brisk_distributed::worker::request_close();
        std::thread::sleep(Duration::from_secs(20));
        brisk_engine::pieces::Cleanup::now();
        std::process::exit(0);
    })?;
    let udfs = Arc::new(brisk_script::ship::RhaiUdfs::new(brisk_script::api::worker_engine));
    match brisk_distributed::worker::run(options, udfs) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(
            e @ (brisk_distributed::worker::WorkerError::Lost(_)
            | brisk_distributed::worker::WorkerError::Removed(_)),
        ) => {
            eprintln!("error: {e}");
            Ok(ExitCode::from(crate::nanny::EXIT_LOST))
        }
        Err(e) => Err(e.into()),
    }
}

/// `brisk cuda-worker ADDR`: one `brisk worker` (each with its nanny) per
/// GPU, started with `CUDA_VISIBLE_DEVICES` set to its device, offering
/// `GPU: 1` and a device memory limit, named NAME-DEVICE; signals go to all
/// of them, and this process ends when they have.
pub fn cuda_worker(args: CudaWorkerArgs) -> anyhow::Result<ExitCode> {
    let w = &args.worker;
    if w.exit_with_parent {
        brisk_distributed::cluster::exit_with_parent();
    }
    brisk_distributed::comm::parse_address(&w.scheduler)?;
    anyhow::ensure!(
        w.nworkers == 1,
        "--nworkers: brisk cuda-worker starts one worker per GPU (see --devices)"
    );
    let requested = args.devices.as_deref().map(|d| d.split(',').map(str::to_string).collect());
    let devices = brisk_distributed::cuda::visible_devices(requested)
        .map_err(|e| anyhow::anyhow!("brisk cuda-worker: {e}"))?;
    let nthreads = w.nthreads.unwrap_or(1);
    anyhow::ensure!(nthreads > 0, "--nthreads must be at least 1");
    let memory = match w.memory_limit.trim().to_ascii_lowercase().as_str() {
        "auto" => (brisk_engine::memory::machine_bytes() / devices.len() as u64).to_string(),
        _ => w.memory_limit.clone(),
    };
    memory_limit(&memory, nthreads)?;
    let device_limit = w.device_memory_limit.unwrap_or(brisk_distributed::worker::DeviceLimit::Fraction(0.8));
    let mut resources = match &w.resources {
        Some(r) => parse_resources(r)?,
        None => Vec::new(),
    };
    if !resources.iter().any(|(k, _)| k == "GPU") {
        resources.push(("GPU".into(), 1.0));
    }
    let resources: Vec<String> = resources.iter().map(|(k, v)| format!("{k}={v}")).collect();
    // This command line, as `brisk worker`'s, less what differs per worker.
    let set_here = [
        "--devices",
        "--name",
        "--nthreads",
        "--memory-limit",
        "--device-memory-limit",
        "--resources",
        "--nworkers",
    ];
    let mut base: Vec<std::ffi::OsString> = vec!["worker".into()];
    let mut skip = false;
    let mut seen_command = false;
    for a in std::env::args_os().skip(1) {
        if std::mem::take(&mut skip) {
            continue;
        }
        let text = a.to_string_lossy();
        if !seen_command && text == "cuda-worker" {
            seen_command = true;
            continue;
        }
        if set_here.contains(&text.as_ref()) {
            skip = true;
            continue;
        }
        if set_here.iter().any(|f| text.starts_with(&format!("{f}="))) {
            continue;
        }
        base.push(a);
    }
    let prefix = w.name.clone().unwrap_or_else(|| format!("cuda-worker-{}", std::process::id()));
    let children = devices
        .iter()
        .map(|d| {
            let mut cmd = std::process::Command::new(std::env::current_exe()?);
            cmd.args(&base)
                .args(["--name", &format!("{prefix}-{d}"), "--nthreads", &nthreads.to_string()])
                .args(["--memory-limit", &memory, "--device-memory-limit", &device_limit.to_arg()])
                .args(["--resources", &resources.join(",")])
                .env("CUDA_VISIBLE_DEVICES", d);
            Ok(cmd)
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    supervise(children, &base)
}

/// `--nworkers N`: N worker processes from this command line, named
/// NAME-0 … NAME-(N-1), each a child of this one; signals go to all of
/// them, and this process ends when they have.
fn worker_group(n: usize, name: Option<&str>) -> anyhow::Result<ExitCode> {
    let program = std::env::current_exe()?;
    let mut base: Vec<std::ffi::OsString> = Vec::new();
    let mut skip = false;
    for a in std::env::args_os().skip(1) {
        if std::mem::take(&mut skip) {
            continue;
        }
        let text = a.to_string_lossy();
        if text == "--nworkers" || text == "--name" {
            skip = true;
            continue;
        }
        if text.starts_with("--nworkers=") || text.starts_with("--name=") {
            continue;
        }
        base.push(a);
    }
    let prefix = name.map_or_else(|| format!("worker-{}", std::process::id()), str::to_string);
    let children = (0..n)
        .map(|i| {
            let mut cmd = std::process::Command::new(&program);
            cmd.args(&base).args(["--name", &format!("{prefix}-{i}")]);
            cmd
        })
        .collect();
    supervise(children, &base)
}

/// Start `commands` (worker command lines) as children of this process and
/// wait for them all: signals to this process go to each, and the exit code
/// is the worst of theirs.
fn supervise(commands: Vec<std::process::Command>, base: &[std::ffi::OsString]) -> anyhow::Result<ExitCode> {
    use std::sync::atomic::{AtomicBool, Ordering};
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT, signal_hook::consts::SIGHUP] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    let mut children = Vec::new();
    for mut cmd in commands {
        if !base.iter().any(|a| a == brisk_distributed::cluster::PARENT_PIPE_FLAG) {
            // Each child ends with this process, even when it is killed.
            cmd.arg(brisk_distributed::cluster::PARENT_PIPE_FLAG).stdin(std::process::Stdio::piped());
        }
        children.push(cmd.spawn()?);
    }
    let mut signalled = false;
    let mut worst = 0;
    while !children.is_empty() {
        if stop.load(Ordering::Relaxed) && !signalled {
            signalled = true;
            for c in &children {
                if let Ok(pid) = i32::try_from(c.id()) {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGTERM,
                    );
                }
            }
        }
        children.retain_mut(|c| match c.try_wait() {
            Ok(Some(status)) => {
                worst = worst.max(status.code().unwrap_or(1));
                false
            }
            Ok(None) => true,
            Err(_) => false,
        });
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(ExitCode::from(worst.clamp(0, 255) as u8))
}

/// `--memory-limit`: a size, "none", or "auto" (Dask's: the machine's
/// memory times `nthreads / cores`, at most all of it).
/// A memory threshold flag's value (`None`: off).
#[derive(Clone, Copy, Debug)]
struct Threshold(Option<f64>);

fn threshold(text: &str) -> Result<Threshold, String> {
    brisk_distributed::worker::parse_threshold(text).map(Threshold)
}

fn memory_limit(text: &str, nthreads: usize) -> anyhow::Result<Option<u64>> {
    match text.trim().to_ascii_lowercase().as_str() {
        "none" | "0" => Ok(None),
        "auto" => {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            let share = (nthreads as f64 / cores as f64).min(1.0);
            Ok(Some((brisk_engine::memory::machine_bytes() as f64 * share) as u64))
        }
        _ => {
            let bytes =
                brisk_engine::memory::parse_size(text).map_err(|e| anyhow::anyhow!("--memory-limit: {e}"))?;
            Ok(Some(bytes))
        }
    }
}

/// "GPU=1,MEM=2e9" as (name, amount) pairs.
pub fn parse_resources(s: &str) -> anyhow::Result<Vec<(String, f64)>> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((name, amount)) = part.split_once('=') else {
            anyhow::bail!("--resources: {part:?} is not NAME=AMOUNT");
        };
        let amount: f64 =
            amount.trim().parse().map_err(|_| anyhow::anyhow!("--resources: {amount:?} is not a number"))?;
        anyhow::ensure!(
            amount.is_finite() && amount >= 0.0,
            "--resources: {name} must be a non-negative number"
        );
        out.push((name.trim().to_string(), amount));
    }
    Ok(out)
}

/// Block until SIGINT, SIGTERM or SIGHUP.
fn wait_for_signal() {
    #[cfg(unix)]
    {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        match signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) {
            Ok(mut s) => {
                let _ = s.forever().next();
            }
            Err(e) => {
                eprintln!("warning: cannot watch for signals ({e}); stop brisk with SIGKILL");
                loop {
                    std::thread::park();
                }
            }
        }
    }
    #[cfg(not(unix))]
    loop {
        std::thread::park();
    }
}
