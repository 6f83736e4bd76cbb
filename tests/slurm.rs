//! Deploying through SLURM for real: a one-host SLURM cluster of three
//! emulated nodes (`scripts/slurm-up.sh 4 3`, which `.ci/run` starts) runs
//! `brisk worker` jobs submitted by `slurm_cluster`. Each test uses a job
//! name of its own and checks that no job of that name is left. Without a
//! SLURM controller answering, the tests skip with a message (on CI they
//! must run: `BRISK_SLURM=required`).
//!
//! Also here, needing no SLURM: the job scripts checked line by line
//! against dask-jobqueue's for the same options.

#[path = "support/cluster.rs"]
mod support;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use support::{ScriptFile, brisk, run_with_deadline};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// One SLURM test at a time: they share the three nodes, and a test's
/// timings (adapt's growth, a node going down) assume the nodes are free.
static SLURM: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Whether a SLURM controller answers here; skips (or fails on CI) if not.
fn slurm() -> bool {
    let up = Command::new("sinfo")
        .args(["-h", "-o", "%N"])
        .output()
        .is_ok_and(|o| o.status.success() && !o.stdout.is_empty());
    if !up {
        assert!(
            std::env::var("BRISK_SLURM").as_deref() != Ok("required"),
            "BRISK_SLURM=required but no SLURM controller answers (scripts/slurm-up.sh starts one)"
        );
        eprintln!("skipped: no SLURM controller answers here (scripts/slurm-up.sh 4 3 starts one, as root)");
    }
    up
}

/// Jobs of this name SLURM still lists.
fn jobs_named(name: &str) -> Vec<String> {
    let out = Command::new("squeue").args(["-h", "-n", name, "-o", "%i %T"]).output().expect("squeue");
    text(&out.stdout).lines().map(str::to_string).collect()
}

/// A folder `brisk run` starts in, removed when dropped: SLURM writes each
/// job's output (`slurm-ID.out`) where it was submitted from.
struct WorkDir(PathBuf);

impl WorkDir {
    fn new() -> WorkDir {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("brisk-slurm-test-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("make a folder");
        WorkDir(dir)
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `brisk run` of `script` in a folder of its own, left running with its
/// stdout piped (and stderr piped too when `stderr`); the script file and
/// the folder go when the returned guards are dropped.
fn spawn_run(script: &str, stderr: bool) -> (std::process::Child, ScriptFile, WorkDir) {
    let file = ScriptFile::new(script);
    let dir = WorkDir::new();
    let child = brisk()
        .arg("run")
        .arg(&file.0)
        .current_dir(&dir.0)
        .env("BRISK_LOG", "warning")
        .stdout(std::process::Stdio::piped())
        .stderr(if stderr { std::process::Stdio::piped() } else { std::process::Stdio::null() })
        .spawn()
        .expect("start brisk");
    (child, file, dir)
}

/// Run a script with `brisk run`; its output.
fn run(script: &str, deadline: Duration) -> Output {
    let file = ScriptFile::new(script);
    let dir = WorkDir::new();
    run_with_deadline(
        brisk().arg("run").arg(&file.0).current_dir(&dir.0).env("BRISK_LOG", "warning"),
        deadline,
        || text(&Command::new("squeue").output().map(|o| o.stdout).unwrap_or_default()),
    )
}

fn assert_ok(out: &Output) -> String {
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "the script failed ({:?}):\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        text(&out.stderr)
    );
    stdout
}

/// No job of `name` is left (SLURM may take a moment to forget one).
/// No job of `name` is left. A job COMPLETING is SLURM's own clean-up
/// after brisk's worker left (slurmd killing and reaping the step); on the
/// 2-core CI machine it once took over a minute, so it gets longer than a
/// job still running or pending would.
fn assert_no_jobs(name: &str) {
    let t0 = Instant::now();
    loop {
        let left = jobs_named(name);
        if left.is_empty() {
            return;
        }
        let completing = left.iter().all(|l| l.ends_with(" COMPLETING"));
        let limit = Duration::from_secs(if completing { 150 } else { 15 });
        if t0.elapsed() > limit {
            let show = Command::new("scontrol").args(["show", "job"]).output().map(|o| text(&o.stdout));
            panic!(
                "jobs of {name} left behind after {:?}: {left:?}\n{}",
                t0.elapsed(),
                show.unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The shared options of a test cluster: loopback, one core, small memory.
fn cluster_options(name: &str, extra: &str) -> String {
    format!(
        "#{{cores: 1, memory: \"1GiB\", job_name: \"{name}\", interface: \"lo\", walltime: \"00:10:00\"{extra}}}"
    )
}

const WAIT_ENDED: &str = r#"
// COMPLETING once the worker left is SLURM's clean-up (assert_no_jobs
// waits for that to end).
fn ended(j) {
    if j.state == "ENDED" || j.state == "CANCELLED" { return true; }
    j.state == "COMPLETING" && !j.connected
}
fn wait_ended(cluster, secs) {
    let t = timestamp();
    while cluster.status().filter(|j| !ended(j)).len() > 0 {
        if t.elapsed > secs { throw `jobs still running after ${secs}s: ${cluster.status()}`; }
        sleep(0.2);
    }
}
"#;

#[test]
fn scaled_jobs_compute_the_local_answers_and_scale_to_zero() {
    let _one = SLURM.lock().unwrap_or_else(|e| e.into_inner());
    if !slurm() {
        return;
    }
    let name = "bt-scale";
    let script = format!(
        r#"{WAIT_ENDED}
let rows = []; for i in 0..2000 {{ rows.push(#{{key: `k${{i % 7}}`, x: i * 0.5}}); }}
let df = from_maps(rows, #{{npartitions: 6}});
let x = random([4000, 20], #{{chunks: [500, 20], seed: 3}});
let g0 = df.groupby("key").agg(#{{x: "sum"}}).compute();
let s0 = svd(x)[1].compute();
let cluster = slurm_cluster({opts});
print(cluster.job_script());
let t0 = timestamp();
cluster.scale(#{{jobs: 2}});
cluster.wait_for_workers(2);
print(`joined in ${{t0.elapsed}}`);
let c = client(cluster);
let names = c.workers().map(|w| w.name);
if names.len() != 2 {{ throw `workers: ${{names}}`; }}
for j in cluster.status() {{ if !names.contains(`{name}-${{j.job_id}}`) {{ throw `job ${{j.job_id}} has no worker among ${{names}}`; }} }}
let g = df.groupby("key").agg(#{{x: "sum"}}).compute();
let s = svd(x)[1].compute();
if to_json(g) != to_json(g0) {{ throw `groupby: ${{g}} vs ${{g0}}`; }}
let err = abs(s - s0).max();
if err > 1e-9 {{ throw `svd differs by ${{err}}`; }}
cluster.scale(0);
wait_ended(cluster, 60);
if c.workers().len() != 0 {{ throw `workers left: ${{c.workers()}}`; }}
cluster.close();
print("ok");
"#,
        opts = cluster_options(name, "")
    );
    let out = run(&script, Duration::from_secs(180));
    let stdout = assert_ok(&out);
    assert!(stdout.contains("#SBATCH --no-requeue") && stdout.contains("#SBATCH --mem=1G"), "{stdout}");
    assert!(stdout.trim_end().ends_with("ok"), "{stdout}");
    assert_no_jobs(name);
}

/// A session that ends without `close()`, or is stopped with SIGTERM,
/// leaves no job behind.
#[test]
fn jobs_end_with_the_session_however_it_ends() {
    let _one = SLURM.lock().unwrap_or_else(|e| e.into_inner());
    if !slurm() {
        return;
    }
    let name = "bt-session";
    let script = format!(
        r#"
let cluster = slurm_cluster({opts});
cluster.scale(#{{jobs: 2}});
cluster.wait_for_workers(2);
print("UP");
"#,
        opts = cluster_options(name, "")
    );
    let out = run(&script, Duration::from_secs(120));
    assert!(assert_ok(&out).contains("UP"));
    assert_no_jobs(name);
    // Killed with SIGTERM while its jobs run.
    let (mut child, _file, _dir) = spawn_run(&format!("{}\nsleep(600);\n", script.trim_end()), false);
    let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut line).expect("read");
    assert_eq!(line.trim(), "UP");
    assert_eq!(jobs_named(name).len(), 2);
    let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(128 + 15));
    assert_no_jobs(name);
}

#[test]
fn adapt_grows_from_zero_under_work_and_returns_to_zero() {
    let _one = SLURM.lock().unwrap_or_else(|e| e.into_inner());
    if !slurm() {
        return;
    }
    let name = "bt-adapt";
    let script = format!(
        r#"
let cluster = slurm_cluster({opts});
let c = client(cluster);
cluster.adapt(#{{minimum: 0, maximum: 4, interval: "500ms", wait_count: 2}});
sleep(1.5);
if c.workers().len() != 0 {{ throw `workers before any work: ${{c.workers().len()}}`; }}
let t0 = timestamp();
let fs = []; for i in 0..60 {{ fs.push(submit(|i| {{ sleep(1.0); i * 2 }}, i)); }}
let most = 0;
while !fs.all(|f| f.done()) {{ let n = c.workers().len(); if n > most {{ most = n; }} sleep(0.1); }}
let v = gather(fs).reduce(|s, x| s + x, 0);
print(`most ${{most}} workers; done in ${{t0.elapsed}}`);
if v != 3540 {{ throw `sum ${{v}}`; }}
if most < 3 {{ throw `adapt grew to ${{most}} workers only`; }}
fs = ();
let t1 = timestamp();
while c.workers().len() > 0 {{ if t1.elapsed > 60 {{ throw `still ${{c.workers().len()}} workers 60s after the work`; }} sleep(0.2); }}
print(`back to zero in ${{t1.elapsed}}`);
cluster.close();
print("ok");
"#,
        opts = cluster_options(name, "")
    );
    let out = run(&script, Duration::from_secs(240));
    let stdout = assert_ok(&out);
    assert!(stdout.trim_end().ends_with("ok"), "{stdout}");
    assert_no_jobs(name);
}

#[test]
fn an_impossible_request_fails_with_slurms_reason() {
    let _one = SLURM.lock().unwrap_or_else(|e| e.into_inner());
    if !slurm() {
        return;
    }
    let name = "bt-impossible";
    let script = format!(
        r#"
let cluster = slurm_cluster(#{{cores: 64, memory: "1GiB", job_name: "{name}", interface: "lo"}});
// SLURM may give the reason before scale's own look at the queue is
// over: then scale fails with it, else wait_for_workers does.
try {{ cluster.scale(1); cluster.wait_for_workers(1, 60); throw "no error"; }} catch (e) {{ print(`wait: ${{e}}`); }}
let st = cluster.status();
if st.len() != 1 || st[0].reason != "PartitionConfig" {{ throw `status: ${{st}}`; }}
cluster.close();
let big = slurm_cluster(#{{cores: 1, memory: "100TiB", job_name: "{name}", interface: "lo"}});
try {{ big.scale(1); throw "no error"; }} catch (e) {{ print(`scale: ${{e}}`); }}
big.close();
print("ok");
"#
    );
    let out = run(&script, Duration::from_secs(120));
    let stdout = assert_ok(&out);
    assert!(stdout.contains("wait: ") && stdout.contains("PartitionConfig"), "{stdout}");
    assert!(
        stdout.contains("scale: ") && stdout.contains("Memory specification can not be satisfied"),
        "{stdout}"
    );
    assert_no_jobs(name);
}

/// A node set down mid-graph takes its job (and worker) with it; the
/// scheduler computes what was lost again elsewhere: the exact result.
#[test]
fn a_node_set_down_mid_graph_gives_the_exact_result() {
    let _one = SLURM.lock().unwrap_or_else(|e| e.into_inner());
    if !slurm() {
        return;
    }
    let name = "bt-nodedown";
    // One job per node: each books all 4 CPUs of an emulated node.
    let script = format!(
        r#"
let cluster = slurm_cluster(#{{cores: 4, memory: "1GiB", job_name: "{name}", interface: "lo", walltime: "00:10:00"}});
cluster.scale(#{{jobs: 3}});
cluster.wait_for_workers(3);
let c = client(cluster);
let step = delayed(|i| {{ sleep(1.0); i * i }});
let parts = []; for i in 0..60 {{ parts.push(step.call(i)); }}
let total = delayed(|a| a.reduce(|s, v| s + v, 0)).call(parts);
let f = total.persist();
sleep(1.5);
print("READY");
let v = f.compute();
print(`sum ${{v}}`);
if v != 70210 {{ throw `sum ${{v}}`; }}
// The job on the downed node ended; the cluster replaced it.
let t = timestamp();
while cluster.status().len() < 4 && t.elapsed < 15 {{ sleep(0.2); }}
print(`jobs ${{cluster.status().len()}}`);
cluster.close();
print("ok");
"#
    );
    let (mut child, _file, _dir) = spawn_run(&script, true);
    let stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut lines = Vec::new();
        let mut ready = false;
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if line == "READY" && !ready {
                ready = true;
                // The node of one of the test's jobs goes down.
                let out = Command::new("squeue")
                    .args(["-h", "-n", "bt-nodedown", "-o", "%N"])
                    .output()
                    .expect("squeue");
                let node = text(&out.stdout).lines().next().unwrap_or_default().trim().to_string();
                let down = Command::new("scontrol")
                    .args(["update", &format!("nodename={node}"), "state=down", "reason=brisk-test"])
                    .output()
                    .expect("scontrol");
                lines.push(format!("DOWN {node} {}", down.status.success()));
            }
            lines.push(line);
        }
        lines
    });
    let deadline = Instant::now() + Duration::from_secs(180);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("no result within 180s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let lines = reader.join().expect("reader");
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut err);
    }
    // The node comes back (ReturnToService=2 when its slurmd answers); make sure.
    for n in ["n1", "n2", "n3"] {
        let _ = Command::new("scontrol").args(["update", &format!("nodename={n}"), "state=resume"]).output();
    }
    let all = lines.join("\n");
    assert!(status.success(), "the script failed:\n{all}\nstderr:\n{err}");
    assert!(all.contains("DOWN n") && all.contains(" true"), "{all}");
    assert!(all.contains("sum 70210") && all.contains("jobs 4\n") && all.ends_with("ok"), "{all}");
    assert_no_jobs(name);
}

/// Jobs of a 1-minute walltime carry a 3-minute graph: each worker leaves
/// before its job is killed (its lifetime, handing its results over) and
/// `scale(n)` submits a job in its place.
#[test]
fn a_one_minute_walltime_carries_a_three_minute_graph() {
    let _one = SLURM.lock().unwrap_or_else(|e| e.into_inner());
    if !slurm() {
        return;
    }
    let name = "bt-walltime";
    let script = format!(
        r#"
let cluster = slurm_cluster(#{{cores: 1, memory: "1GiB", job_name: "{name}", interface: "lo", walltime: "00:01:00"}});
cluster.scale(2);
cluster.wait_for_workers(2);
let c = client(cluster);
let t0 = timestamp();
let step = delayed(|i| {{ sleep(2.0); i + 1 }});
let parts = []; for i in 0..180 {{ parts.push(step.call(i)); }}
let total = delayed(|a| a.reduce(|s, v| s + v, 0)).call(parts);
let v = total.compute();
print(`sum ${{v}} in ${{t0.elapsed}}s over ${{cluster.status().len()}} jobs`);
if v != 16290 {{ throw `sum ${{v}}`; }}
if cluster.status().len() < 4 {{ throw `no job was replaced: ${{cluster.status()}}`; }}
cluster.close();
print("ok");
"#
    );
    let out = run(&script, Duration::from_secs(600));
    let stdout = assert_ok(&out);
    assert!(stdout.trim_end().ends_with("ok"), "{stdout}");
    assert_no_jobs(name);
}

/// The Python with dask-jobqueue (tests/requirements.txt), if any.
fn python_with_jobqueue() -> Option<PathBuf> {
    support::python_with("dask_jobqueue", "dask-jobqueue is")
}

/// The header lines of a job script: between the shebang and the worker.
fn header(script: &str) -> Vec<String> {
    script
        .lines()
        .filter(|l| l.starts_with("#SBATCH") || l.starts_with("#PBS") || l.starts_with("#BSUB"))
        .map(str::to_string)
        .collect()
}

#[test]
fn job_scripts_match_dask_jobqueues_line_by_line() {
    let Some(py) = python_with_jobqueue() else { return };
    let reference = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/reference/jobqueue_script.py");
    // (dask-jobqueue's options as JSON, brisk's flags)
    let cases: &[(&str, &[&str])] = &[
        (
            r#"{"system": "slurm", "cores": 8, "memory": "28GB", "queue": "regular", "account": "proj42", "walltime": "01:00:00", "log_directory": "/tmp/brisk-jq-logs", "job_extra_directives": ["--gres=gpu:1", "--exclusive"]}"#,
            &[
                "slurm",
                "--cores",
                "8",
                "--memory",
                "28GB",
                "--queue",
                "regular",
                "--account",
                "proj42",
                "--walltime",
                "01:00:00",
                "--log-directory",
                "/tmp/brisk-jq-logs",
                "--job-extra-directive",
                "--gres=gpu:1",
                "--job-extra-directive",
                "--exclusive",
            ],
        ),
        (
            r#"{"system": "slurm", "cores": 4, "memory": "3GiB", "job_directives_skip": ["--mem", "-A"], "account": "x", "job_cpu": 6, "job_name": "etl"}"#,
            &[
                "slurm",
                "--cores",
                "4",
                "--memory",
                "3GiB",
                "--job-directive-skip",
                "--mem",
                "--job-directive-skip",
                "-A",
                "--account",
                "x",
                "--job-cpu",
                "6",
                "--job-name",
                "etl",
            ],
        ),
        (
            r#"{"system": "pbs", "cores": 24, "memory": "100GB", "queue": "regular", "account": "proj", "walltime": "02:00:00", "log_directory": "/tmp/brisk-jq-logs", "job_extra_directives": ["-m abe"]}"#,
            &[
                "pbs",
                "--cores",
                "24",
                "--memory",
                "100GB",
                "--queue",
                "regular",
                "--account",
                "proj",
                "--walltime",
                "02:00:00",
                "--log-directory",
                "/tmp/brisk-jq-logs",
                "--job-extra-directive",
                "-m abe",
            ],
        ),
        (
            r#"{"system": "pbs", "cores": 2, "memory": "5MB", "resource_spec": "select=1:ncpus=2:mem=8GB:ngpus=1"}"#,
            &[
                "pbs",
                "--cores",
                "2",
                "--memory",
                "5MB",
                "--resource-spec",
                "select=1:ncpus=2:mem=8GB:ngpus=1",
            ],
        ),
        (
            r#"{"system": "lsf", "cores": 8, "memory": "28GB", "queue": "regular", "project": "proj", "walltime": "01:30", "lsf_units": "mb", "log_directory": "/tmp/brisk-jq-logs"}"#,
            &[
                "lsf",
                "--cores",
                "8",
                "--memory",
                "28GB",
                "--queue",
                "regular",
                "--account",
                "proj",
                "--walltime",
                "01:30",
                "--lsf-units",
                "mb",
                "--log-directory",
                "/tmp/brisk-jq-logs",
            ],
        ),
        (
            r#"{"system": "lsf", "cores": 1, "memory": "2GB", "lsf_units": "gb", "job_directives_skip": ["-W"]}"#,
            &["lsf", "--cores", "1", "--memory", "2GB", "--lsf-units", "gb", "--job-directive-skip", "-W"],
        ),
    ];
    for (spec, flags) in cases {
        let theirs = Command::new(&py).arg(&reference).arg(spec).output().expect("python");
        assert!(theirs.status.success(), "dask-jobqueue failed for {spec}: {}", text(&theirs.stderr));
        let ours = brisk().arg("jobqueue").args(*flags).arg("--print-script").output().expect("brisk");
        assert!(ours.status.success(), "brisk jobqueue failed for {flags:?}: {}", text(&ours.stderr));
        let (theirs, ours) = (text(&theirs.stdout), text(&ours.stdout));
        // brisk's two additions to a SLURM header: one node, no requeue.
        let mine: Vec<String> = header(&ours)
            .into_iter()
            .filter(|l| l != "#SBATCH -N 1" && l != "#SBATCH --no-requeue")
            .collect();
        assert_eq!(mine, header(&theirs), "for {spec}\nbrisk:\n{ours}\ndask-jobqueue:\n{theirs}");
        assert_eq!(ours.lines().next(), theirs.lines().next(), "the shebang, for {spec}");
        if spec.contains("\"slurm\"") && !spec.contains("no-requeue") {
            assert!(ours.contains("#SBATCH --no-requeue\n"), "{ours}");
        }
    }
    let _ = std::fs::remove_dir_all("/tmp/brisk-jq-logs");
}

#[test]
fn bad_job_options_are_refused_with_a_clear_error() {
    let cases: &[(&[&str], &str)] = &[
        (&["slurm", "--cores", "0", "--memory", "1GiB"], "cores must be at least 1"),
        (&["slurm", "--cores", "2", "--memory", "1GiB", "--walltime", "soon"], "walltime"),
        (&["slurm", "--cores", "2", "--memory", "lots"], "--memory"),
        (&["slurm", "--cores", "2", "--memory", "1GiB", "--job-name", "a b"], "job_name"),
        (&["slurm", "--cores", "2", "--memory", "1GiB", "--processes", "3"], "processes"),
        (&["condor", "--cores", "2", "--memory", "1GiB"], "slurm, pbs, lsf"),
        (&["slurm", "--cores", "2", "--memory", "1GiB", "--jobs", "1"], "--scheduler"),
    ];
    for (flags, expected) in cases {
        let out = brisk().arg("jobqueue").args(*flags).output().expect("brisk");
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {err}");
        assert!(err.contains(expected), "{flags:?}: expected {expected:?} in {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let file = ScriptFile::new(
        r#"
try { slurm_cluster(#{memory: "1GiB"}); } catch (e) { print(e); }
try { slurm_cluster(#{cores: 1, memory: "1GiB", walltime: "00:01:00", lifetime: "2m"}); } catch (e) { print(e); }
try { slurm_cluster(#{cores: 1, memory: "1GiB", queues: "x"}); } catch (e) { print(e); }
try { slurm_cluster(#{cores: 1, memory: "1GiB", interface: "nosuch0"}); } catch (e) { print(e); }
try { jobqueue_cluster("sge", #{cores: 1, memory: "1GiB"}); } catch (e) { print(e); }
"#,
    );
    let out = brisk().arg("run").arg(&file.0).output().expect("brisk");
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    for expected in [
        "cores is required",
        "before the walltime",
        "queues",
        "no network interface nosuch0",
        "slurm, pbs, lsf",
    ] {
        assert!(stdout.contains(expected), "expected {expected:?} in:\n{stdout}");
    }
}
