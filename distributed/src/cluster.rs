//! `local_cluster`: a scheduler and worker processes on this machine,
//! children of the same `brisk` binary. Each child gets a pipe on its stdin
//! and exits when the pipe closes, so no child outlives this process, even
//! when it is killed (a destructor cannot run then, but the kernel closes
//! the pipe).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

/// The option that tells a child to exit when its stdin closes.
pub const PARENT_PIPE_FLAG: &str = "--exit-with-parent";

/// The `brisk` binary to start; set by the binary itself (`current_exe`
/// is a test harness under `cargo test`). `BRISK_PROGRAM` overrides it.
static PROGRAM: Mutex<Option<PathBuf>> = Mutex::new(None);

pub fn set_program(path: PathBuf) {
    *PROGRAM.lock().unwrap_or_else(|e| e.into_inner()) = Some(path);
}

/// The `brisk` binary that child processes and batch jobs run.
pub fn program() -> Result<PathBuf, ClusterError> {
    if let Some(p) = std::env::var_os("BRISK_PROGRAM") {
        return Ok(PathBuf::from(p));
    }
    if let Some(p) = PROGRAM.lock().unwrap_or_else(|e| e.into_inner()).clone() {
        return Ok(p);
    }
    Err(ClusterError::NoProgram)
}

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("local_cluster needs the brisk binary; set BRISK_PROGRAM to its path")]
    NoProgram,
    #[error("cannot start {what}: {error}")]
    Spawn { what: String, error: std::io::Error },
    #[error("the scheduler did not start: {0}")]
    Scheduler(String),
    #[error("{0}")]
    Cuda(#[from] crate::cuda::CudaError),
    #[error("every GPU ({0}) has its worker: a CUDA cluster runs one worker per GPU")]
    NoFreeDevice(usize),
}

/// What to start.
#[derive(Clone, Debug, PartialEq)]
pub struct LocalClusterOptions {
    pub workers: usize,
    pub threads: usize,
    pub memory_limit: Option<u64>,
    pub thresholds: crate::worker::MemoryThresholds,
    pub resources: Vec<(String, f64)>,
    pub token: Option<String>,
    /// The address the scheduler listens on (default 127.0.0.1: this
    /// machine only).
    pub scheduler_host: Option<String>,
    /// One worker per GPU (`local_cuda_cluster`).
    pub cuda: Option<CudaWorkers>,
}

/// A CUDA cluster's workers: one per device, each seeing only its own
/// (`CUDA_VISIBLE_DEVICES`), offering `GPU: 1`, with a device memory limit.
#[derive(Clone, Debug, PartialEq)]
pub struct CudaWorkers {
    /// As `CUDA_VISIBLE_DEVICES` names them ([`crate::cuda::visible_devices`]).
    pub devices: Vec<String>,
    pub device_memory_limit: crate::worker::DeviceLimit,
}

/// The processes of a local cluster; dropping it stops them. Shared:
/// the session scales it while adaptive scaling may start and stop workers.
pub struct LocalCluster {
    pub address: String,
    /// The scheduler's HTTP port (`/health`, `/metrics`, `/api/v1/workers`).
    pub http_address: Option<String>,
    options: LocalClusterOptions,
    procs: Mutex<Procs>,
}

struct Procs {
    scheduler: Child,
    /// Worker processes by name (`local-N`), with a CUDA worker's device.
    workers: Vec<(String, Child, Option<String>)>,
    started: usize,
}

impl LocalCluster {
    /// Start the scheduler on a free loopback port, then the workers.
    pub fn start(options: LocalClusterOptions) -> Result<LocalCluster, ClusterError> {
        let program = program()?;
        let mut cmd = child(&program);
        let host = options.scheduler_host.as_deref().unwrap_or("127.0.0.1");
        cmd.args(["scheduler", "--host", host, "--port", "0", "--http-port", "0", PARENT_PIPE_FLAG]);
        if let Some(t) = &options.token {
            cmd.args(["--token", t]);
        }
        cmd.stdout(Stdio::piped());
        let mut scheduler = cmd
            .spawn()
            .map_err(|error| ClusterError::Spawn { what: program.display().to_string(), error })?;
        let (address, http_address) = match read_address(&mut scheduler) {
            Ok(a) => a,
            Err(e) => {
                let _ = scheduler.kill();
                let _ = scheduler.wait();
                return Err(e);
            }
        };
        let procs = Mutex::new(Procs { scheduler, workers: Vec::new(), started: 0 });
        let cluster = LocalCluster { address, http_address, options, procs };
        cluster.add_workers(cluster.options.workers)?;
        Ok(cluster)
    }

    pub fn options(&self) -> &LocalClusterOptions {
        &self.options
    }

    fn procs(&self) -> std::sync::MutexGuard<'_, Procs> {
        self.procs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Worker processes started and still running.
    pub fn nworkers(&self) -> usize {
        self.running().len()
    }

    /// The names of the worker processes still running.
    pub fn running(&self) -> Vec<String> {
        let mut p = self.procs();
        p.workers.retain_mut(|(_, c, _)| matches!(c.try_wait(), Ok(None)));
        p.workers.iter().map(|(n, ..)| n.clone()).collect()
    }

    /// Stop worker `name`: SIGTERM (it hands its results over and leaves),
    /// or at once.
    pub fn stop_worker(&self, name: &str, graceful: bool) {
        let mut p = self.procs();
        let Some((_, c, _)) = p.workers.iter_mut().find(|(n, ..)| n == name) else { return };
        if graceful {
            if let Ok(pid) = i32::try_from(c.id()) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGTERM,
                );
            }
        } else {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Start `n` more workers; their names.
    pub fn add_workers(&self, n: usize) -> Result<Vec<String>, ClusterError> {
        let program = program()?;
        let mut names = Vec::new();
        for _ in 0..n {
            let mut p = self.procs();
            // A CUDA worker takes the first device without a running worker.
            let device = match &self.options.cuda {
                None => None,
                Some(cuda) => {
                    p.workers.retain_mut(|(_, c, _)| matches!(c.try_wait(), Ok(None)));
                    let taken: Vec<&String> = p.workers.iter().filter_map(|(.., d)| d.as_ref()).collect();
                    match cuda.devices.iter().find(|d| !taken.contains(d)) {
                        Some(d) => Some(d.clone()),
                        None => return Err(ClusterError::NoFreeDevice(cuda.devices.len())),
                    }
                }
            };
            let name = format!("local-{}", p.started);
            p.started += 1;
            drop(p);
            let mut cmd = child(&program);
            cmd.args([
                "worker",
                &self.address,
                "--nthreads",
                &self.options.threads.max(1).to_string(),
                "--name",
                &name,
            ]);
            cmd.arg(PARENT_PIPE_FLAG);
            // Dask's LocalCluster: the machine's memory shared by the workers.
            let share = brisk_engine::memory::machine_bytes() / self.options.workers.max(1) as u64;
            let limit = self.options.memory_limit.unwrap_or(share);
            cmd.args(["--memory-limit", &limit.to_string()]);
            if self.options.thresholds != crate::worker::MemoryThresholds::default() {
                cmd.args(self.options.thresholds.to_args());
            }
            let mut resources: Vec<String> =
                self.options.resources.iter().map(|(k, v)| format!("{k}={v}")).collect();
            if let (Some(device), Some(cuda)) = (&device, &self.options.cuda) {
                cmd.env("CUDA_VISIBLE_DEVICES", device);
                cmd.args(["--device-memory-limit", &cuda.device_memory_limit.to_arg()]);
                if !self.options.resources.iter().any(|(k, _)| k == "GPU") {
                    resources.push("GPU=1".into());
                }
            }
            if !resources.is_empty() {
                cmd.args(["--resources", &resources.join(",")]);
            }
            if let Some(t) = &self.options.token {
                cmd.args(["--token", t]);
            }
            cmd.stdout(Stdio::null());
            let child = cmd.spawn().map_err(|error| ClusterError::Spawn { what: name.clone(), error })?;
            self.procs().workers.push((name.clone(), child, device));
            names.push(name);
        }
        Ok(names)
    }

    /// Stop every process, workers first.
    pub fn stop(&self) {
        let mut guard = self.procs();
        let p = &mut *guard;
        // Workers first, and the scheduler only once they are gone: a
        // worker that saw its scheduler close before its parent pipe would
        // report a lost scheduler on the way out.
        for (_, c, _) in p.workers.iter_mut() {
            // Closing the pipe asks the child to go; a kill makes sure.
            drop(c.stdin.take());
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        let stopped = p.workers.iter_mut().all(|(_, c, _)| end(c, deadline));
        if stopped && !p.workers.is_empty() {
            // Each nanny's own worker follows it through its pipe.
            std::thread::sleep(Duration::from_millis(100));
        }
        drop(p.scheduler.stdin.take());
        end(&mut p.scheduler, std::time::Instant::now() + Duration::from_secs(2));
        p.workers.clear();
    }
}

/// Wait for `c` to exit until `deadline`, then kill it; whether it exited by itself.
fn end(c: &mut Child, deadline: std::time::Instant) -> bool {
    loop {
        match c.try_wait() {
            Ok(Some(_)) | Err(_) => return true,
            Ok(None) if std::time::Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) => {
                let _ = c.kill();
                let _ = c.wait();
                return false;
            }
        }
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A child process of the cluster: quiet logs (unless the session sets
/// `BRISK_LOG` itself), the parent pipe on stdin, and no TLS from the
/// environment (a local cluster runs on loopback with plain TCP, and its
/// client connects without TLS).
fn child(program: &Path) -> Command {
    let mut cmd = Command::new(program);
    if std::env::var_os("BRISK_LOG").is_none() {
        cmd.env("BRISK_LOG", "warning");
    }
    cmd.env_remove("BRISK_TLS_CERT")
        .env_remove("BRISK_TLS_KEY")
        .env_remove("BRISK_TLS_CA")
        .stdin(Stdio::piped())
        .stderr(Stdio::inherit());
    cmd
}

/// The scheduler's address and HTTP address, its two lines on stdout.
fn read_address(child: &mut Child) -> Result<(String, Option<String>), ClusterError> {
    let Some(out) = child.stdout.take() else {
        return Err(ClusterError::Scheduler("no stdout".into()));
    };
    let mut out = BufReader::new(out);
    let mut line = String::new();
    out.read_line(&mut line).map_err(|e| ClusterError::Scheduler(e.to_string()))?;
    let address = line
        .split_whitespace()
        .find(|w| w.starts_with("tcp://") || w.starts_with("tls://"))
        .map(str::to_string)
        .ok_or_else(|| {
            ClusterError::Scheduler(format!("it printed {:?} instead of its address", line.trim()))
        })?;
    let mut line = String::new();
    out.read_line(&mut line).map_err(|e| ClusterError::Scheduler(e.to_string()))?;
    let http = line.split_whitespace().find(|w| w.starts_with("http://")).map(str::to_string);
    Ok((address, http))
}

/// In a child started with [`PARENT_PIPE_FLAG`]: exit when stdin closes
/// (the parent is gone).
pub fn exit_with_parent() {
    let _ = std::thread::Builder::new().name("brisk-parent-watch".into()).spawn(|| {
        let mut sink = [0u8; 64];
        let mut stdin = std::io::stdin();
        loop {
            match std::io::Read::read(&mut stdin, &mut sink) {
                Ok(0) | Err(_) => {
                    // Shuffle pieces and spilled results go with the process.
                    brisk_engine::pieces::Cleanup::now();
                    std::process::exit(0)
                }
                Ok(_) => {}
            }
        }
    });
}
