//! A cluster of real processes for tests (distributed's `gen_cluster`): a
//! scheduler and workers of the `brisk` binary on ephemeral loopback
//! ports. `finish` checks the scheduler's invariants, stops everything and
//! fails if a process or the scheduler's port is left; dropping the fixture
//! (a failed test) kills whatever still runs.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use brisk_distributed::{RemoteClient, Security, TlsFiles};

/// GPU examples (`gpu*.rhai`) run where `BRISK_REQUIRE_GPU` says there is
/// a GPU (scripts/gpu-tests.sh); elsewhere they are skipped.
pub fn gpu_allowed(path: &std::path::Path) -> bool {
    let gpu = path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("gpu"));
    !gpu || std::env::var_os("BRISK_REQUIRE_GPU").is_some()
}

pub fn brisk() -> Command {
    Command::new(env!("CARGO_BIN_EXE_brisk"))
}

/// Fixtures share the machine (read); a test whose timing is its subject
/// takes it alone (write, `alone`): the chaos soak's kill schedule assumes
/// its workers get the CPU, which two other clusters on 2 cores starve.
static MACHINE: RwLock<()> = RwLock::new(());

thread_local! {
    static ALONE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Run the rest of this test with no other fixture's processes beside it.
pub fn alone() -> RwLockWriteGuard<'static, ()> {
    let g = MACHINE.write().unwrap_or_else(|e| e.into_inner());
    ALONE.with(|a| a.set(true));
    g
}

fn share() -> Option<RwLockReadGuard<'static, ()>> {
    (!ALONE.with(|a| a.get())).then(|| MACHINE.read().unwrap_or_else(|e| e.into_inner()))
}

pub struct TestCluster {
    pub address: String,
    pub token: Option<String>,
    /// The TLS files every process of this cluster uses, if any.
    pub tls: Option<TlsFiles>,
    /// The scheduler's HTTP port, `http://127.0.0.1:PORT`.
    pub http: String,
    scheduler: Child,
    /// The arguments the scheduler was started with (a restart reuses them).
    scheduler_args: Vec<String>,
    pub workers: Vec<Child>,
    client: Option<RemoteClient>,
    /// Held until the fixture's processes are gone (fields drop last).
    _share: Option<RwLockReadGuard<'static, ()>>,
}

impl TestCluster {
    /// A scheduler and `n` one-thread workers, all joined.
    pub fn start(n: usize) -> TestCluster {
        TestCluster::start_with(n, None, &[])
    }

    pub fn start_with(n: usize, token: Option<&str>, scheduler_args: &[&str]) -> TestCluster {
        TestCluster::start_secure(n, token, None, scheduler_args)
    }

    /// As `start_with`, every process (and the fixture's client) using TLS
    /// with `tls`'s files when given.
    pub fn start_secure(
        n: usize,
        token: Option<&str>,
        tls: Option<&TlsFiles>,
        scheduler_args: &[&str],
    ) -> TestCluster {
        let share = share();
        let scheduler_args: Vec<String> = scheduler_args.iter().map(|a| a.to_string()).collect();
        let (scheduler, address, http) = spawn_scheduler(token, tls, &scheduler_args);
        let files = tls.cloned().unwrap_or_default();
        let security = Security::from_flags(token.map(str::to_string), files).expect("the TLS files");
        let client = RemoteClient::connect(&address, security, true).expect("connect the fixture's client");
        let mut c = TestCluster {
            address,
            token: token.map(str::to_string),
            tls: tls.cloned(),
            http,
            scheduler,
            scheduler_args,
            workers: Vec::new(),
            client: Some(client),
            _share: share,
        };
        for _ in 0..n {
            c.add_worker(&[]);
        }
        c.client().wait_for_workers(n, Duration::from_secs(30)).expect("workers join");
        c
    }

    /// SIGKILL the scheduler and start it again with the same arguments
    /// (a journal among them); it must come back on the same address.
    pub fn kill_and_restart_scheduler(&mut self) {
        let _ = self.scheduler.kill();
        let _ = self.scheduler.wait();
        let (scheduler, address, http) =
            spawn_scheduler(self.token.as_deref(), self.tls.as_ref(), &self.scheduler_args);
        self.scheduler = scheduler;
        self.http = http;
        assert_eq!(address, self.address, "the restarted scheduler listens elsewhere");
    }

    /// A one-thread worker without a nanny (as `gen_cluster`'s workers:
    /// killing it kills it), with `args` added.
    pub fn add_worker(&mut self, args: &[&str]) {
        let mut all = vec!["--no-nanny"];
        all.extend_from_slice(args);
        self.add_worker_with_nanny(&all);
    }

    /// A one-thread worker as `brisk worker` starts it: under a nanny
    /// unless `args` say `--no-nanny`.
    pub fn add_worker_with_nanny(&mut self, args: &[&str]) {
        let scheduler = self.address.clone();
        self.add_worker_via(&scheduler, args);
    }

    /// As `add_worker_with_nanny`, reaching the scheduler at `scheduler`
    /// (a proxy in front of it).
    pub fn add_worker_via(&mut self, scheduler: &str, args: &[&str]) {
        self.add_worker_env_via(scheduler, args, &[]);
    }

    /// As `add_worker_via`, with `env` set for the worker (its own
    /// `--nthreads` in `args` replaces the one thread).
    pub fn add_worker_env_via(&mut self, scheduler: &str, args: &[&str], env: &[(&str, &str)]) {
        let name = format!("w{}", self.workers.len());
        let mut cmd = brisk();
        cmd.args(["worker", scheduler, "--name", &name]).args(args).envs(env.iter().copied());
        if !args.contains(&"--nthreads") {
            cmd.args(["--nthreads", "1"]);
        }
        if let Some(t) = &self.token {
            cmd.args(["--token", t]);
        }
        if let Some(f) = &self.tls {
            cmd.args(tls_flags(f));
        }
        // Started where the sessions run, as workers on a shared file
        // system would be: scripts name their files relative to it.
        cmd.current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."));
        let child = cmd
            .env_remove("BRISK_TOKEN")
            .env("BRISK_LOG", "warning")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("start a worker");
        self.workers.push(child);
    }

    pub fn client(&self) -> &RemoteClient {
        self.client.as_ref().expect("the fixture's client")
    }

    /// `brisk run` of `script` with the session connected to this cluster;
    /// past `deadline` the run is killed and the test fails with the
    /// scheduler's view of the workers.
    pub fn run(&self, script: &str, deadline: Duration) -> Output {
        self.run_via(&self.address, script, deadline)
    }

    /// As `run`, the session reaching the scheduler at `scheduler` (a
    /// proxy in front of it).
    pub fn run_via(&self, scheduler: &str, script: &str, deadline: Duration) -> Output {
        let file = ScriptFile::new(script);
        let mut cmd = self.run_command(scheduler, &file);
        run_with_deadline(&mut cmd, deadline, || format!("{:?}", self.client().worker_rows()))
    }

    /// `brisk run` of `file` connected to this cluster, started and left
    /// running, its output piped.
    pub fn spawn_run(&self, file: &ScriptFile) -> Child {
        self.run_command(&self.address, file)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the script")
    }

    fn run_command(&self, scheduler: &str, file: &ScriptFile) -> Command {
        let mut cmd = brisk();
        cmd.args(["run", "--no-progress"])
            .arg(&file.0)
            .env("BRISK_SCHEDULER_ADDRESS", scheduler)
            .env("NO_COLOR", "1");
        if let Some(t) = &self.token {
            cmd.env("BRISK_TOKEN", t);
        }
        if let Some(f) = &self.tls {
            let path = |p: &Option<PathBuf>| p.clone().expect("a TLS file");
            cmd.env("BRISK_TLS_CERT", path(&f.cert))
                .env("BRISK_TLS_KEY", path(&f.key))
                .env("BRISK_TLS_CA", path(&f.ca));
        }
        cmd
    }

    /// The scheduler's invariants hold.
    pub fn validate(&self) {
        if let Err(e) = self.client().validate() {
            panic!("the scheduler's state is invalid: {e}");
        }
    }

    /// Validate, stop every process, and fail on anything left behind.
    pub fn finish(mut self) {
        self.validate();
        self.client.take();
        let port = self.address.rsplit(':').next().and_then(|p| p.parse::<u16>().ok()).expect("port");
        self.stop();
        for c in self.workers.iter_mut().chain(std::iter::once(&mut self.scheduler)) {
            assert!(matches!(c.try_wait(), Ok(Some(_))), "process {} is still running", c.id());
        }
        assert!(
            std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
            "the scheduler's port {port} is still open"
        );
    }

    fn stop(&mut self) {
        // SIGTERM closes each process cleanly.
        for c in self.workers.iter_mut().chain(std::iter::once(&mut self.scheduler)) {
            if matches!(c.try_wait(), Ok(None)) {
                let _ = Command::new("kill").arg("-TERM").arg(c.id().to_string()).status();
            }
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        for c in self.workers.iter_mut().chain(std::iter::once(&mut self.scheduler)) {
            while matches!(c.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if matches!(c.try_wait(), Ok(None)) {
                let _ = c.kill();
                let _ = c.wait();
                panic!("process {} ignored SIGTERM", c.id());
            }
        }
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        self.client.take();
        for c in self.workers.iter_mut().chain(std::iter::once(&mut self.scheduler)) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A scheduler on ephemeral loopback ports: the child, its address and its
/// HTTP address (read from its first two lines).
fn spawn_scheduler(token: Option<&str>, tls: Option<&TlsFiles>, args: &[String]) -> (Child, String, String) {
    let mut cmd = brisk();
    cmd.args(["scheduler", "--host", "127.0.0.1", "--port", "0", "--http-port", "0"]).args(args);
    if let Some(t) = token {
        cmd.args(["--token", t]);
    }
    if let Some(f) = tls {
        cmd.args(tls_flags(f));
    }
    let mut scheduler = cmd
        .env_remove("BRISK_TOKEN")
        .env("BRISK_LOG", "warning")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the scheduler");
    let mut out = BufReader::new(scheduler.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("address line");
    let address = line.split_whitespace().last().expect("an address").to_string();
    let mut http_line = String::new();
    out.read_line(&mut http_line).expect("HTTP line");
    let http = http_line.split_whitespace().find(|w| w.starts_with("http://")).expect("an HTTP address");
    let scheme = if tls.is_some() { "tls" } else { "tcp" };
    assert!(address.starts_with(&format!("{scheme}://127.0.0.1:")), "scheduler printed {line:?}");
    (scheduler, address, http.to_string())
}

/// GET `path` from `http` (`http://host:port`) with these extra header
/// lines: the status code and the body.
pub fn http_get(http: &str, path: &str, headers: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let host = http.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(host).expect("connect to the HTTP port");
    write!(s, "GET {path} HTTP/1.1\r\nHost: {host}\r\n{headers}\r\n").expect("send");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read the answer");
    let status = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).expect("a status line");
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

/// `--tls-cert F --tls-key F --tls-ca F`.
pub fn tls_flags(f: &TlsFiles) -> Vec<String> {
    let s = |p: &Option<PathBuf>| p.as_ref().expect("a TLS file").display().to_string();
    vec!["--tls-cert".into(), s(&f.cert), "--tls-key".into(), s(&f.key), "--tls-ca".into(), s(&f.ca)]
}

/// The test Python (`BRISK_PYTHON`, made by `scripts/python-env.sh`; else
/// `python3`) if it can run `import {modules}`. Without it the test skips
/// with a message, except on CI, where `.ci/run` installs `what`.
pub fn python_with(modules: &str, what: &str) -> Option<PathBuf> {
    let py = std::env::var_os("BRISK_PYTHON").map(PathBuf::from).unwrap_or_else(|| "python3".into());
    let import = format!("import {modules}");
    let ok = Command::new(&py).args(["-c", &import]).output().is_ok_and(|o| o.status.success());
    if ok {
        return Some(py);
    }
    assert!(std::env::var_os("CI").is_none(), "{what} needed on CI; .ci/run sets BRISK_PYTHON");
    eprintln!("skipped: no Python with {what} (see scripts/python-env.sh)");
    None
}

/// A script in the temporary directory, removed when dropped.
pub struct ScriptFile(pub PathBuf);

impl ScriptFile {
    pub fn new(text: &str) -> ScriptFile {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("brisk-cluster-test-{}-{n}.rhai", std::process::id()));
        std::fs::write(&path, text).expect("write the script");
        ScriptFile(path)
    }
}

impl Drop for ScriptFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Run `cmd` to the end, or kill it at `deadline` and fail with `state()`.
pub fn run_with_deadline(cmd: &mut Command, deadline: Duration, state: impl Fn() -> String) -> Output {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start brisk");
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => return child.wait_with_output().expect("output"),
            Ok(None) if start.elapsed() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let out = child.wait_with_output().expect("output");
                panic!(
                    "no result within {deadline:?}; cluster: {}\nstdout:\n{}\nstderr:\n{}",
                    state(),
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
}

/// Whether a process still runs (a zombie counts as gone).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rsplit(')').next().and_then(|r| r.split_whitespace().next()) != Some("Z"))
}
