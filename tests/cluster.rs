//! The cluster with real processes: a scheduler and workers of the brisk
//! binary on loopback ports (`support/cluster.rs`). Each test checks the
//! scheduler's invariants at the end and leaves no process or port behind.
//! The golden scripts run on a cluster too (`tests/golden.rs`).

#[path = "support/proxy.rs"]
mod proxy;
#[path = "support/cluster.rs"]
mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Output, Stdio};
use std::time::Duration;

use brisk_distributed::protocol::{self, Blob, ClientMsg, Hello, MAGIC, Reply, Role, TaskDef, ToClient};
use brisk_engine::key::Key;
use support::{ScriptFile, TestCluster, alive, brisk, http_get, run_with_deadline};

const DEADLINE: Duration = Duration::from_secs(120);

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn assert_ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what} failed ({:?}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// `script` run on the embedded local scheduler.
fn run_locally(script: &str) -> Output {
    run_locally_in(script, &std::env::temp_dir())
}

/// As `run_locally`, with `tmp` as the temporary directory of the session
/// and of its cluster's processes.
fn run_locally_in(script: &str, tmp: &std::path::Path) -> Output {
    let file = ScriptFile::new(script);
    run_with_deadline(
        brisk()
            .args(["run", "--no-progress"])
            .arg(&file.0)
            .env_remove("BRISK_SCHEDULER_ADDRESS")
            .env("TMPDIR", tmp)
            .env("NO_COLOR", "1"),
        DEADLINE,
        String::new,
    )
}

const FUTURES: &str = r#"
fn inc(x) { x + 1 }
let futs = map(inc, [1, 2, 3, 4, 5, 6, 7, 8]);
print(gather(futs));
let total = submit(|xs| { let t = 0; for x in xs { t += x; } t }, futs);
print(total.result());
let seen = [];
for f in as_completed(futs) { seen.push(f.result()); }
seen.sort();
print(seen);
let s = scatter([10, 20, 30]);
print(gather(map(|x| x * 2, s)));
let bad = submit(|x| x / 0, 1);
try { bad.result(); } catch (e) { print("caught: " + e.message); }
let f = submit(|x| { while true {} x }, 41);
f.cancel();
print(f.status);
let x = random([300, 200], #{chunks: [100, 50], seed: 7});
let p = (x * 2.0).persist();
print(p.sum().compute());
print((p.T @ p).sum().compute());
let b = from_sequence([1, 2, 3, 4, 5, 6], #{npartitions: 3}).persist();
print(b.map(|v| v * v).sum().compute());
let d = delayed(|a, b| a * b).call(6, 7).persist();
print(d.compute());
print(submit(|a, b| a + b, d, total).result());
"#;

#[test]
fn futures_persist_and_collections_give_the_local_answers_on_two_workers() {
    let c = TestCluster::start(2);
    let local = run_locally(FUTURES);
    assert_ok(&local, "the local run");
    let remote = c.run(FUTURES, DEADLINE);
    assert_ok(&remote, "the cluster run");
    assert_eq!(text(&remote.stdout), text(&local.stdout));
    c.finish();
}

/// Every shuffle kind: a hash shuffle, a sort, a merge of two large
/// sides, a groupby with `split_out`, and a bag groupby.
const SHUFFLES: &str = r#"
let ks = []; let vs = [];
for i in 0..4000 { ks.push(i % 37); vs.push(i); }
let x = from_columns(#{k: ks, v: vs}, #{npartitions: 8});
let yk = []; let yw = [];
for i in 0..37 { yk.push(i); yw.push(i * 10); }
let y = from_columns(#{k: yk, w: yw}, #{npartitions: 6});
print(x.npartitions);
let s = x.shuffle("k", #{npartitions: 5});
print(s.npartitions);
print(s.groupby("k").agg(#{v: "sum"}).compute().to_maps().map(|r| `${r.k}:${r.v}`));
print(x.sort_values("v", #{ascending: false}).head(3));
print(x.set_index("v").divisions.len());
let m = merge(x, y, #{on: "k"});
print(m.npartitions);
print(m.groupby("k").agg(#{w: "sum", v: "count"}).compute().to_maps().map(|r| `${r.k}:${r.w}:${r.v}`));
print(x.groupby("k", #{split_out: 3}).agg(#{v: "max"}).sort_values("k").compute().to_maps().map(|r| r.v));
let b = from_sequence(range(0, 500), #{npartitions: 6});
print(b.groupby(|i| i % 11).map(|g| [g[0], g[1].len()]).compute());
"#;

/// Each worker keeps its pieces under a local directory of its own, so a
/// collect on one worker must fetch what splits on the other wrote; the
/// pieces go when the graph is done and the folders when the workers end.
#[test]
fn shuffles_move_pieces_between_workers_without_a_shared_disk() {
    let mut c = TestCluster::start(0);
    let dirs: Vec<std::path::PathBuf> = (0..2)
        .map(|i| std::env::temp_dir().join(format!("brisk-test-local-{}-{i}", std::process::id())))
        .collect();
    for d in &dirs {
        std::fs::create_dir_all(d).expect("local directory");
        c.add_worker(&["--local-directory", d.to_str().expect("utf-8")]);
    }
    c.client().wait_for_workers(2, Duration::from_secs(30)).expect("workers join");
    let local = run_locally(SHUFFLES);
    assert_ok(&local, "the local run");
    let remote = c.run(SHUFFLES, DEADLINE);
    assert_ok(&remote, "the cluster run");
    assert_eq!(text(&remote.stdout), text(&local.stdout));
    let pieces_left = || -> Vec<String> {
        dirs.iter().flat_map(|d| walk(d)).filter(|p| p.contains("brisk-shuffle-")).collect()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !pieces_left().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(pieces_left(), Vec::<String>::new(), "freed splits leave no pieces");
    c.finish();
    for d in &dirs {
        assert_eq!(walk(d), Vec::<String>::new(), "a worker's folder outlived it");
        std::fs::remove_dir_all(d).expect("remove the test's folder");
    }
}

/// A worker that dies in any phase of a shuffle (after a split wrote its
/// pieces, while a peer fetches its pieces, or while it collects pieces it
/// fetched) costs only recomputation: the splits whose pieces went with it
/// are done again, the answers are exact, and no piece is left behind.
#[test]
fn a_worker_dying_in_each_phase_of_a_shuffle_costs_only_recomputation() {
    let local = run_locally(SHUFFLES);
    assert_ok(&local, "the local run");
    for phase in ["split", "serve-pieces", "collect"] {
        let mut c = TestCluster::start(0);
        let dir = std::env::temp_dir().join(format!("brisk-test-phase-{}-{phase}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("local directory");
        let d = dir.to_str().expect("utf-8");
        c.add_worker(&["--local-directory", d]);
        c.add_worker(&["--local-directory", d]);
        c.add_worker(&["--local-directory", d, "--kill-at", phase]);
        c.client().wait_for_workers(3, Duration::from_secs(30)).expect("workers join");
        let remote = c.run(SHUFFLES, DEADLINE);
        assert_ok(&remote, &format!("the cluster run with a death at {phase}"));
        assert_eq!(text(&remote.stdout), text(&local.stdout), "death at {phase}");
        let died = c.workers[2].try_wait().expect("wait");
        assert!(died.is_some_and(|s| !s.success()), "w2 never reached {phase}");
        // A worker starting on the same directory removes the dead one's folder.
        c.add_worker(&["--local-directory", d]);
        c.client().wait_for_workers(3, Duration::from_secs(30)).expect("w3 joins");
        let pieces_left =
            || -> Vec<String> { walk(&dir).into_iter().filter(|p| p.contains("brisk-shuffle-")).collect() };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !pieces_left().is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(pieces_left(), Vec::<String>::new(), "pieces left after a death at {phase}");
        c.finish();
        assert_eq!(walk(&dir), Vec::<String>::new(), "a worker's folder outlived it");
        std::fs::remove_dir_all(&dir).expect("remove the test's folder");
    }
}

/// Every path under `dir`.
fn walk(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        out.push(e.path().display().to_string());
        if e.path().is_dir() {
            out.extend(walk(&e.path()));
        }
    }
    out
}

const SLOW: &str = r#"
fn slow(i) { let s = 0; for k in 0..200000 { s += k % 7; } s + i }
let parts = [];
for i in 0..24 { parts.push(delayed(slow).call(i)); }
let total = delayed(|xs| { let t = 0; for x in xs { t += x; } t }).call(parts);
print(total.compute());
"#;

#[test]
fn a_worker_killed_mid_graph_gives_the_exact_result() {
    let mut c = TestCluster::start(2);
    let local = run_locally(SLOW);
    assert_ok(&local, "the local run");
    // Kill one worker while the graph runs; its tasks and results move to the other.
    // Once w0 holds results and runs a task: both must be recovered.
    let killer = signal_w0_when_busy(&c, "-KILL");
    let remote = c.run(SLOW, DEADLINE);
    assert!(killer.join().expect("killer"), "w0 never ran a task while holding a result");
    assert_ok(&remote, "the cluster run");
    assert_eq!(text(&remote.stdout), text(&local.stdout));
    let _ = c.workers[0].wait();
    assert_eq!(c.client().worker_rows().expect("rows").len(), 1, "the dead worker was removed");
    c.finish();
}

/// Send `signal` to w0 once it runs a task while holding a result (so both
/// its running work and its results must be recovered); `true` if it did
/// within a minute.
fn signal_w0_when_busy(c: &TestCluster, signal: &'static str) -> std::thread::JoinHandle<bool> {
    // The worker process itself (under a nanny, the fixture's child is the nanny).
    let rows = c.client().worker_rows().expect("rows");
    let victim = rows.iter().find(|r| r.name == "w0").expect("w0").pid;
    let address = c.address.clone();
    std::thread::spawn(move || {
        let watch =
            brisk_distributed::RemoteClient::connect(&address, Default::default(), true).expect("watch");
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while std::time::Instant::now() < deadline {
            let rows = watch.worker_rows().expect("rows");
            if rows.iter().any(|r| r.name == "w0" && r.processing > 0 && r.in_memory > 0) {
                let _ = std::process::Command::new("kill").arg(signal).arg(victim.to_string()).status();
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    })
}

/// A worker that stops answering (SIGSTOP) is removed after the TTL; its
/// tasks and the results only it held are done again elsewhere. Woken up,
/// it finds itself removed and exits, and its nanny starts a fresh worker.
#[test]
fn a_hung_worker_is_removed_after_the_ttl_and_its_work_redone() {
    let mut c = TestCluster::start_with(0, None, &["--worker-ttl", "2"]);
    c.add_worker_with_nanny(&[]);
    c.add_worker(&[]);
    c.client().wait_for_workers(2, Duration::from_secs(30)).expect("workers join");
    let local = run_locally(SLOW);
    let rows = c.client().worker_rows().expect("rows");
    let victim = rows.iter().find(|r| r.name == "w0").expect("w0").pid;
    let stopper = signal_w0_when_busy(&c, "-STOP");
    let remote = c.run(SLOW, DEADLINE);
    let stopped = stopper.join().expect("stopper");
    let _ = std::process::Command::new("kill").arg("-CONT").arg(victim.to_string()).status();
    assert!(stopped, "w0 never ran a task while holding a result");
    assert_ok(&remote, "the cluster run");
    assert_eq!(text(&remote.stdout), text(&local.stdout));
    // Woken, it reads the scheduler's goodbye and ends; its nanny starts a
    // new worker, which joins under the same name.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while alive(victim) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!alive(victim), "the removed worker still runs");
    c.client().wait_for_workers(2, Duration::from_secs(20)).expect("the nanny's new worker joins");
    let rows = c.client().worker_rows().expect("rows");
    let w0 = rows.iter().find(|r| r.name.starts_with("w0")).expect("a new w0");
    assert_ne!(w0.pid, victim);
    let again = c.run(SLOW, DEADLINE);
    assert_eq!(text(&again.stdout), text(&local.stdout));
    c.finish();
}

/// A network partition of one worker (its link to the scheduler passes
/// nothing and stays open) and a worker's link cut in the middle of a
/// message: the partitioned worker is removed after the TTL and its work
/// done elsewhere, then told so when the partition heals; the cut worker
/// ends and its nanny starts another. A session whose link is cut fails
/// with a clear error rather than hanging, and the scheduler forgets it.
#[test]
fn a_partitioned_worker_and_cut_connections_neither_hang_nor_lose_work() {
    let local = run_locally(SLOW);
    assert_ok(&local, "the local run");
    let mut c = TestCluster::start_with(0, None, &["--worker-ttl", "2"]);
    let p1 = std::sync::Arc::new(proxy::Proxy::start(&c.address));
    let p2 = std::sync::Arc::new(proxy::Proxy::start(&c.address));
    c.add_worker(&[]);
    c.add_worker_via(&p1.address, &["--no-nanny"]);
    c.add_worker_via(&p2.address, &[]);
    c.client().wait_for_workers(3, Duration::from_secs(30)).expect("workers join");
    let faults = {
        let (p1, p2, address) = (p1.clone(), p2.clone(), c.address.clone());
        std::thread::spawn(move || {
            let watch =
                brisk_distributed::RemoteClient::connect(&address, Default::default(), true).expect("watch");
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            let (mut stalled, mut cut) = (false, false);
            while !(stalled && cut) && std::time::Instant::now() < deadline {
                for r in watch.worker_rows().expect("rows") {
                    if r.name == "w1" && r.processing > 0 && r.in_memory > 0 && !stalled {
                        p1.stall();
                        stalled = true;
                    }
                    if r.name == "w2" && r.processing > 0 && !cut {
                        p2.cut_next();
                        cut = true;
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            (stalled, cut)
        })
    };
    let remote = c.run(SLOW, DEADLINE);
    let (stalled, cut) = faults.join().expect("faults");
    assert!(stalled && cut, "the faults never struck (stalled {stalled}, cut {cut})");
    assert_ok(&remote, "the cluster run");
    assert_eq!(text(&remote.stdout), text(&local.stdout));
    let names = |c: &TestCluster| -> Vec<String> {
        c.client().worker_rows().expect("rows").into_iter().map(|r| r.name).collect()
    };
    assert!(
        !names(&c).contains(&"w1".to_string()),
        "the partitioned worker is still listed: {:?}",
        names(&c)
    );
    // Healed, w1 hears it was removed and ends.
    p1.heal();
    let w1 = &mut c.workers[1];
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while w1.try_wait().expect("wait").is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(w1.try_wait().expect("wait").is_some(), "the healed worker did not end");
    // w2's nanny started a new worker, through the same proxy.
    c.client().wait_for_workers(2, Duration::from_secs(20)).expect("w2 back");
    assert!(names(&c).contains(&"w2".to_string()), "{:?}", names(&c));

    // A session whose connection is cut in the middle of a message.
    let p3 = std::sync::Arc::new(proxy::Proxy::start(&c.address));
    // Cut once its tasks run (a fixed delay raced the session's start).
    let cutter = {
        let (p3, address) = (p3.clone(), c.address.clone());
        std::thread::spawn(move || {
            let watch =
                brisk_distributed::RemoteClient::connect(&address, Default::default(), true).expect("watch");
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while std::time::Instant::now() < deadline
                && !watch.worker_rows().expect("rows").iter().any(|r| r.processing > 0)
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            p3.cut_next();
        })
    };
    let started = std::time::Instant::now();
    let out = c.run_via(&p3.address, SLOW, DEADLINE);
    cutter.join().expect("cutter");
    assert!(!out.status.success(), "a run whose link was cut succeeded: {}", text(&out.stdout));
    assert!(text(&out.stderr).contains("scheduler"), "{}", text(&out.stderr));
    assert!(started.elapsed() < Duration::from_secs(60), "the cut session took {:?}", started.elapsed());
    let again = c.run(SLOW, DEADLINE);
    assert_eq!(text(&again.stdout), text(&local.stdout));
    c.finish();
}

/// Rounds of an all-to-all rechunk and a sum, each checked against its
/// closed form.
const CHAOS: &str = r#"
let n = 10000000;
for round in 0..ROUNDS {
    let x = arange(round, n + round, 1, #{chunks: n / 16}).reshape([4000, 2500]).rechunk([4000, 160]);
    let s = x.sum().compute();
    if s != n * (n - 1) / 2 + n * round { throw `round ${round}: ${s}`; }
}
print("exact");
"#;

/// The chaos soak's short form (the long one is `bench/chaos_soak.py`):
/// workers SIGKILLed at random, with exponential lifetimes as
/// distributed's `KillWorker`, while rounds of rechunk-and-sum run; their
/// nannies start new ones. Every sum is exact, and when the cluster stops
/// no worker process and no file of theirs is left.
#[test]
fn a_chaos_soak_of_random_worker_deaths_gives_exact_sums_and_leaves_nothing() {
    let _alone = support::alone();
    let mut c = TestCluster::start_with(0, None, &["--allowed-failures", "10"]);
    let dir = std::env::temp_dir().join(format!("brisk-test-chaos-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("local directory");
    for _ in 0..3 {
        c.add_worker_with_nanny(&["--local-directory", dir.to_str().expect("utf-8")]);
    }
    c.client().wait_for_workers(3, Duration::from_secs(30)).expect("workers join");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let chaos = {
        let (stop, address) = (stop.clone(), c.address.clone());
        std::thread::spawn(move || {
            let watch =
                brisk_distributed::RemoteClient::connect(&address, Default::default(), true).expect("watch");
            let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
            let mut uniform = move || {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed >> 11) as f64 / (1u64 << 53) as f64
            };
            let mut killed = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                // Exponential lifetimes with a mean of 1.5 s.
                let wait = -(1.0 - uniform()).ln() * 1.5;
                let until = std::time::Instant::now() + Duration::from_secs_f64(wait);
                while std::time::Instant::now() < until && !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(10));
                }
                let rows = watch.worker_rows().expect("rows");
                if rows.is_empty() || stop.load(std::sync::atomic::Ordering::SeqCst) {
                    continue;
                }
                let victim = rows[(uniform() * rows.len() as f64) as usize % rows.len()].pid;
                let _ = std::process::Command::new("kill").arg("-KILL").arg(victim.to_string()).status();
                killed.push(victim);
            }
            killed
        })
    };
    // A hang guard, not a speed limit: on 2 busy cores the 30 rounds,
    // recomputed after each death, took close to DEADLINE.
    let out = c.run(&CHAOS.replace("ROUNDS", "30"), 3 * DEADLINE);
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let killed = chaos.join().expect("chaos");
    assert_ok(&out, "the soak");
    assert_eq!(text(&out.stdout), "exact\n");
    assert!(killed.len() >= 4, "only {} workers were killed", killed.len());
    assert!(killed.iter().all(|p| !alive(*p)), "a killed worker still runs");
    c.client().wait_for_workers(3, Duration::from_secs(30)).expect("the nannies' workers join");
    let address = c.address.clone();
    c.finish();
    let ours = || -> Vec<u32> {
        let mut out = Vec::new();
        for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
            let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else { continue };
            if text(&cmd).contains(&address) && alive(pid) {
                out.push(pid);
            }
        }
        out
    };
    assert_eq!(wait_gone(&ours()), Vec::<u32>::new(), "worker processes outlived the soak");
    assert_eq!(walk(&dir), Vec::<String>::new(), "the workers left files");
    std::fs::remove_dir_all(&dir).expect("remove the test's folder");
    eprintln!("chaos soak: {} workers killed", killed.len());
}

/// A running closure can be stopped: `f.cancel()` stops it, and a task
/// annotated with a timeout fails when it runs past it (Dask can do
/// neither: dask#1183). On a cluster of one single-thread worker, the
/// work after each only runs if the thread was really freed.
#[test]
fn a_running_task_is_stopped_by_cancel_or_its_timeout_and_the_worker_goes_on() {
    let c = TestCluster::start(1);
    let out = c.run(
        r#"
fn forever(x) { let s = 0; while true { s += 1; } x }
let f = submit(forever, 1);
sleep(0.5);
print(client().workers()[0].running);
f.cancel();
print(f.status);
print(submit(|x| x + 1, 1).result());
let t = timestamp();
let g = annotate(#{timeout: "300ms"}, || submit(forever, 2));
try { g.result(); print("no timeout"); } catch (e) { print(e.message.contains("ran longer than its timeout of 300ms")); }
print(t.elapsed < 10.0);
let d = annotate(#{timeout: 0.3, retries: 1}, || delayed(forever).call(3));
try { d.compute(); } catch (e) { print(e.message.contains("timeout")); }
print(gather(map(|x| x * 2, [1, 2, 3])));
print(client().workers().len());
"#,
        DEADLINE,
    );
    assert_ok(&out, "the script");
    assert_eq!(text(&out.stdout), "1\ncancelled\n2\ntrue\ntrue\ntrue\n[2, 4, 6]\n1\n");
    c.finish();
}

/// A million tasks (a million one-element chunks and their sum) while
/// workers join and leave: every second a new worker joins and the oldest
/// is stopped (SIGTERM), so the graph outlives every worker it started
/// with; the sum is exact and the scheduler's state valid.
#[test]
fn a_million_tasks_finish_exactly_while_workers_join_and_leave() {
    let mut c = TestCluster::start(2);
    let file = ScriptFile::new("print(ones([1000000], #{chunks: 1}).sum().compute());");
    let mut run = c.spawn_run(&file);
    let deadline = std::time::Instant::now() + Duration::from_secs(600);
    let mut oldest = 0;
    while run.try_wait().expect("wait").is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_secs(1));
        c.add_worker(&[]);
        let _ =
            std::process::Command::new("kill").arg("-TERM").arg(c.workers[oldest].id().to_string()).status();
        let _ = c.workers[oldest].wait();
        oldest += 1;
    }
    let out = run_with_deadline_child(run, deadline);
    assert_ok(&out, "the million tasks");
    assert_eq!(text(&out.stdout), "1000000.0\n");
    assert!(oldest >= 3, "only {oldest} workers left during the run");
    c.finish();
}

/// A task whose workers die under it more often than allowed errs as
/// KilledWorker; the rest of the work goes on, and its story tells where
/// it ran and which worker's death ended it.
#[test]
fn a_task_that_keeps_killing_workers_errs_as_killed_worker() {
    let mut c = TestCluster::start_with(1, None, &["--allowed-failures", "1"]);
    let script = ScriptFile::new(
        r#"
print(gather(map(|x| x * 2, [1, 2, 3])));
let doomed = submit(|x| { let s = 0; while true { s += 1; } x }, 1);
try { doomed.result(); print("no error"); } catch (e) { print("error: " + e.message); }
print(doomed.status);
print(gather(map(|x| x + 1, [1, 2, 3])));
// Its story: where it ran, and the deaths that ended it.
let story = doomed.story();
print(story.filter(|r| r.to == "processing").map(|r| r.worker));
let last = story[-1];
print([last.to, last.cause.starts_with("worker w1 left")]);
"#,
    );
    let run = c.spawn_run(&script);
    // Kill whichever worker runs the endless task, twice (one more than allowed).
    // Quick tasks come and go; the endless one stays.
    let mut kills = 0;
    let deadline = std::time::Instant::now() + DEADLINE;
    let busy = |c: &TestCluster| {
        let rows = c.client().worker_rows().expect("rows");
        rows.iter().find(|r| r.processing > 0).map(|r| r.name.clone())
    };
    while kills < 2 && std::time::Instant::now() < deadline {
        let first = busy(&c);
        std::thread::sleep(Duration::from_millis(500));
        if let Some(name) = first.filter(|n| busy(&c).as_ref() == Some(n)) {
            let i: usize = name.trim_start_matches('w').parse().expect("wN");
            let _ =
                std::process::Command::new("kill").arg("-KILL").arg(c.workers[i].id().to_string()).status();
            let _ = c.workers[i].wait();
            kills += 1;
            c.add_worker(&[]);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = run_with_deadline_child(run, deadline);
    assert_ok(&out, "the script");
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "[2, 4, 6]");
    assert!(lines[1].starts_with("error: ") && lines[1].contains("workers that died"), "{stdout}");
    assert_eq!(&lines[2..], ["error", "[2, 3, 4]", r#"["w0", "w1"]"#, r#"["erred", true]"#], "{stdout}");
    c.finish();
}

const JOURNALED: &str = r#"
fn slow(i) { sleep(0.1); i * 2 }
let parts = [];
for i in 0..60 { parts.push(delayed(slow).call(i)); }
let total = delayed(|xs| { let t = 0; for x in xs { t += x; } t }).call(parts);
print(total.compute());
// The restarted scheduler's story: each part was either restored from a
// worker that still held it, or computed after the restart.
let restored = 0;
let rerun = 0;
for p in parts {
    let steps = p.story();
    if steps.some(|s| s.to == "memory" && s.cause.contains("restored from the journal")) { restored += 1; }
    if steps.some(|s| s.to == "processing") { rerun += 1; }
}
print(`restored ${restored} rerun ${rerun}`);
"#;

/// The scheduler is SIGKILLed in the middle of a graph and started again on
/// its journal: the workers and the session come back to it, the result is
/// exact, and no result a worker held is computed again (Dask keeps no
/// journal: distributed#1072). A file that is not a journal is refused and
/// left as it was.
#[test]
fn a_scheduler_killed_mid_graph_carries_on_from_its_journal() {
    let dir = std::env::temp_dir().join(format!("brisk-test-journal-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a folder");
    let notes = dir.join("notes.txt");
    std::fs::write(&notes, "not a journal\n").expect("writes");
    let out = run_with_deadline(
        brisk().args(["scheduler", "--port", "0", "--no-http", "--journal"]).arg(&notes),
        Duration::from_secs(30),
        String::new,
    );
    assert!(!out.status.success() && text(&out.stderr).contains("not a brisk journal"), "{out:?}");
    assert_eq!(std::fs::read_to_string(&notes).expect("reads"), "not a journal\n");

    let journal = dir.join("scheduler.journal");
    let journal = journal.to_str().expect("a UTF-8 path");
    let mut c = TestCluster::start_with(2, None, &["--journal", journal]);
    let file = ScriptFile::new(JOURNALED);
    let run = c.spawn_run(&file);
    let deadline = std::time::Instant::now() + DEADLINE;
    // Twice: the second scheduler reads the journal the first one wrote
    // anew from its restored state.
    let mut held = 0;
    for at in [10, 25] {
        held = loop {
            // The fixture's client, too, is away while the scheduler is.
            let rows = c.client().worker_rows().unwrap_or_default();
            let held: u64 = rows.iter().map(|r| r.in_memory).sum();
            if held >= at {
                break held;
            }
            assert!(std::time::Instant::now() < deadline, "the workers never held {at} results");
            std::thread::sleep(Duration::from_millis(20));
        };
        c.kill_and_restart_scheduler();
    }
    let out = run_with_deadline_child(run, deadline);
    assert_ok(&out, "the run across the restart");
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "3540", "{stdout}");
    let counts: Vec<u64> = lines[1].split_whitespace().filter_map(|w| w.parse().ok()).collect();
    let [restored, rerun] = counts[..] else { panic!("{stdout}") };
    eprintln!(
        "the journal test: {held} results held at the kill, {restored} restored, {rerun} computed after"
    );
    assert_eq!(restored + rerun, 60, "each part restored or computed after the restart: {stdout}");
    assert!(restored >= held, "{held} results were held at the kill, {restored} restored: {stdout}");
    c.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Wait for a started child until `deadline`, killing it past that.
fn run_with_deadline_child(mut child: std::process::Child, deadline: std::time::Instant) -> Output {
    while matches!(child.try_wait(), Ok(None)) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    child.wait_with_output().expect("output")
}

/// A task annotated with a resource runs only where a worker offers it,
/// and waits (queued, not failed) until one joins.
#[test]
fn resource_annotated_tasks_wait_for_a_worker_that_offers_them() {
    use std::io::BufRead;
    let mut c = TestCluster::start(1);
    let script = ScriptFile::new(
        r#"
let f = annotate(#{resources: #{GPU: 1}}, || submit(|x| x + 1, 41));
let plain = submit(|x| x * 2, 21);
print(plain.result());
print(f.status);
print(f.result());
print(client().workers().filter(|w| w.in_memory > 0).map(|w| w.name));
"#,
    );
    let mut run = c.spawn_run(&script);
    let mut lines = std::io::BufReader::new(run.stdout.take().expect("stdout")).lines();
    let mut next = || lines.next().expect("a line").expect("utf-8");
    assert_eq!(next(), "42", "the plain task ran");
    assert_eq!(next(), "pending", "no worker offers a GPU yet");
    std::thread::sleep(Duration::from_millis(300));
    let rows = c.client().worker_rows().expect("rows");
    assert_eq!(rows[0].processing, 0, "the GPU task was not given to w0: {rows:?}");
    c.add_worker(&["--resources", "GPU=1"]);
    assert_eq!(next(), "42", "the GPU task ran once a GPU worker joined");
    // w0 holds `plain`; w1, which joined after `plain` ran, holds `f`.
    assert_eq!(next(), r#"["w0", "w1"]"#, "on the worker with the GPU");
    assert!(run.wait().expect("wait").success());
    c.finish();
}

/// `brisk top ADDR` on a pseudo-terminal (util-linux `script`) draws the
/// cluster's workers and the work another client runs meanwhile; `q`
/// leaves it.
#[test]
fn brisk_top_shows_the_workers_and_the_work_of_other_clients() {
    use std::io::Write;
    if std::process::Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: `script` (util-linux) is not installed, no pseudo-terminal to test with");
        return;
    }
    let c = TestCluster::start(2);
    let cmd = format!("stty cols 120 rows 40; exec {} top {}", env!("CARGO_BIN_EXE_brisk"), c.address);
    let mut top = std::process::Command::new("script")
        .args(["-qefc", &cmd, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script");
    let out = c.run(SLOW, DEADLINE);
    assert_ok(&out, "the work watched");
    std::thread::sleep(Duration::from_millis(800));
    top.stdin.as_mut().expect("stdin").write_all(b"q").expect("q");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while matches!(top.try_wait(), Ok(None)) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(matches!(top.try_wait(), Ok(Some(_))), "brisk top did not leave on q");
    let out = top.wait_with_output().expect("output");
    let screen = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{screen}");
    // Words only: the screen is drawn with cursor moves between them. The
    // legend (■ slow) is drawn once tasks of the group were in the stream.
    for shown in ["worker", "threads", "w0", "w1", "slow", "stream", "tasks/s", "■"] {
        assert!(screen.contains(shown), "{shown:?} is not on the screen: {screen}");
    }
    c.finish();
}

/// A CA and one certificate it signed, for every process of a test cluster.
struct Pki {
    dir: std::path::PathBuf,
    files: brisk_distributed::TlsFiles,
}

impl Pki {
    fn new(tag: &str) -> Pki {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
        };
        let dir = std::env::temp_dir().join(format!("brisk-test-pki-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("pki dir");
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("ca params");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, format!("brisk test CA {tag}"));
        let ca_key = KeyPair::generate().expect("ca key");
        let ca_cert = ca.self_signed(&ca_key).expect("ca cert");
        let issuer = Issuer::new(ca, ca_key);
        let mut leaf = CertificateParams::new(vec!["brisk-node".to_string()]).expect("leaf params");
        leaf.extended_key_usages =
            vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        let leaf_key = KeyPair::generate().expect("leaf key");
        let leaf_cert = leaf.signed_by(&leaf_key, &issuer).expect("leaf cert");
        let write = |name: &str, text: String| {
            let p = dir.join(name);
            std::fs::write(&p, text).expect("write pem");
            Some(p)
        };
        let files = brisk_distributed::TlsFiles {
            cert: write("cert.pem", leaf_cert.pem()),
            key: write("key.pem", leaf_key.serialize_pem()),
            ca: write("ca.pem", ca_cert.pem()),
        };
        Pki { dir, files }
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// With TLS every connection is mutual TLS under the cluster's CA: the
/// cluster computes as before, and a client or worker without TLS, or with
/// a certificate of another CA, is refused; the cluster goes on.
#[test]
fn tls_clusters_refuse_plain_peers_and_other_cas() {
    let (ours, theirs) = (Pki::new("ours"), Pki::new("theirs"));
    let c = TestCluster::start_secure(2, Some("s3cret"), Some(&ours.files), &[]);
    assert!(c.address.starts_with("tls://"), "{}", c.address);
    let local = run_locally(SHUFFLES);
    let remote = c.run(SHUFFLES, DEADLINE);
    assert_ok(&remote, "the run over TLS");
    assert_eq!(text(&remote.stdout), text(&local.stdout));
    let rows = c.client().worker_rows().expect("rows");
    assert!(rows.iter().all(|r| r.address.starts_with("tls://")), "workers serve data over TLS: {rows:?}");

    let connect = |address: &str, tls: Option<&brisk_distributed::TlsFiles>| {
        let security = brisk_distributed::Security {
            token: Some("s3cret".into()),
            tls: tls.map(|f| {
                std::sync::Arc::new(brisk_distributed::security::Tls::load(f.clone()).expect("load"))
            }),
        };
        brisk_distributed::RemoteClient::connect(address, security, true).map(|_| ())
    };
    let plain = c.address.replacen("tls://", "tcp://", 1);
    let err = connect(&plain, None).expect_err("a plain client is refused").to_string();
    assert!(!err.is_empty());
    let err = connect(&c.address, None).expect_err("no TLS settings").to_string();
    assert!(err.contains("TLS address"), "{err}");
    let err = connect(&c.address, Some(&theirs.files)).expect_err("another CA is refused").to_string();
    assert!(err.contains("TLS"), "{err}");
    // Workers likewise: another CA, and none.
    for flags in [support::tls_flags(&theirs.files), Vec::new()] {
        let addr = if flags.is_empty() { plain.clone() } else { c.address.clone() };
        let out = run_with_deadline(
            brisk().args(["worker", &addr, "--token", "s3cret"]).args(&flags).stdin(Stdio::null()),
            Duration::from_secs(30),
            String::new,
        );
        assert!(!out.status.success(), "a worker with {flags:?} joined");
        assert!(text(&out.stderr).contains("cannot reach the scheduler"), "{}", text(&out.stderr));
    }
    assert_eq!(c.client().worker_rows().expect("rows").len(), 2, "no refused worker joined");
    let again = c.run(SHUFFLES, DEADLINE);
    assert_eq!(text(&again.stdout), text(&local.stdout), "the cluster goes on");
    c.finish();
}

#[test]
fn wrong_or_missing_tokens_are_refused() {
    let c = TestCluster::start_with(1, Some("s3cret"), &[]);
    let worker = |args: &[&str]| {
        run_with_deadline(
            brisk().arg("worker").arg(&c.address).args(args).env_remove("BRISK_TOKEN").stdin(Stdio::null()),
            Duration::from_secs(30),
            String::new,
        )
    };
    let wrong = worker(&["--token", "guess"]);
    assert!(!wrong.status.success());
    assert!(text(&wrong.stderr).contains("refused: wrong token"), "{}", text(&wrong.stderr));
    let none = worker(&[]);
    assert!(!none.status.success());
    assert!(text(&none.stderr).contains("needs a token"), "{}", text(&none.stderr));

    // A session without the token cannot connect; with it, it computes.
    let script = "print(submit(|x| x * 3, 14).result());";
    let file = ScriptFile::new(script);
    let run = |token: Option<&str>| {
        let mut cmd = brisk();
        cmd.args(["run", "--no-progress"])
            .arg(&file.0)
            .env("BRISK_SCHEDULER_ADDRESS", &c.address)
            .env_remove("BRISK_TOKEN");
        if let Some(t) = token {
            cmd.env("BRISK_TOKEN", t);
        }
        run_with_deadline(&mut cmd, Duration::from_secs(60), String::new)
    };
    let refused = run(None);
    assert!(!refused.status.success());
    assert!(text(&refused.stderr).contains("needs a token"), "{}", text(&refused.stderr));
    let ok = run(Some("s3cret"));
    assert_ok(&ok, "the run with the token");
    assert_eq!(text(&ok.stdout), "42\n");
    c.finish();
}

/// The HTTP port: `/health` for anyone, `/metrics` (Prometheus text) and
/// `/api/v1/workers` (JSON) only with the token as a Bearer header.
#[test]
fn the_http_port_serves_health_metrics_and_workers_behind_the_token() {
    let c = TestCluster::start_with(2, Some("s3cret"), &[]);
    assert_ok(&c.run(SHUFFLES, DEADLINE), "the shuffles");
    // A connected client learns where the HTTP port is.
    let link = c.run("print(client().dashboard_link);", DEADLINE);
    assert_ok(&link, "dashboard_link");
    assert_eq!(text(&link.stdout).trim(), c.http);
    let refused = run_with_deadline(
        brisk().args(["worker", &c.address, "--token", "guess"]).stdin(Stdio::null()),
        Duration::from_secs(30),
        String::new,
    );
    assert!(!refused.status.success());

    assert_eq!(http_get(&c.http, "/health", ""), (200, "ok\n".to_string()));
    for headers in ["", "Authorization: Bearer guess\r\n", "Authorization: s3cret\r\n"] {
        assert_eq!(http_get(&c.http, "/metrics", headers).0, 401, "{headers:?}");
        assert_eq!(http_get(&c.http, "/api/v1/workers", headers).0, 401, "{headers:?}");
    }
    let auth = "Authorization: Bearer s3cret\r\n";
    assert_eq!(http_get(&c.http, "/nothing", auth).0, 404);

    // Heartbeats bring the bytes moved; wait for one.
    let value = |text: &str, series: &str| -> Option<f64> {
        text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let metrics = loop {
        let (status, text) = http_get(&c.http, "/metrics", auth);
        assert_eq!(status, 200, "{text}");
        if value(&text, "brisk_transferred_bytes_total").is_some_and(|b| b > 0.0)
            || std::time::Instant::now() > deadline
        {
            break text;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // Every line is a comment or `series value`, as Prometheus reads them.
    for line in metrics.lines().filter(|l| !l.starts_with("# HELP ") && !l.starts_with("# TYPE ")) {
        let (series, v) = line.rsplit_once(' ').unwrap_or_else(|| panic!("bad line {line:?}"));
        assert!(v.parse::<f64>().is_ok() && series.starts_with("brisk_"), "bad line {line:?}");
    }
    assert_eq!(value(&metrics, "brisk_workers"), Some(2.0), "{metrics}");
    assert!(value(&metrics, "brisk_transferred_bytes_total").is_some_and(|b| b > 0.0), "{metrics}");
    assert!(value(&metrics, "brisk_handshake_refusals_total").is_some_and(|n| n >= 1.0), "{metrics}");
    assert!(value(&metrics, "brisk_tasks{state=\"processing\"}").is_some(), "{metrics}");
    assert!(metrics.contains("brisk_tasks_done_total{group="), "{metrics}");
    assert!(metrics.contains("brisk_worker_memory_bytes{worker=\"w0\"}"), "{metrics}");

    let (status, json) = http_get(&c.http, "/api/v1/workers", auth);
    assert_eq!(status, 200);
    let rows: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    let names: Vec<&str> =
        rows.as_array().expect("an array").iter().filter_map(|r| r["name"].as_str()).collect();
    assert_eq!(names, ["w0", "w1"], "{json}");
    assert!(rows[0]["address"].as_str().is_some_and(|a| a.starts_with("tcp://127.0.0.1:")), "{json}");
    c.finish();
}

/// Raw bytes at a port: what comes back (until the peer closes or 5 s pass).
fn poke(address: &str, bytes: &[u8]) -> Vec<u8> {
    let addr = address.trim_start_matches("tcp://");
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    let _ = s.write_all(bytes);
    let mut back = Vec::new();
    let _ = s.read_to_end(&mut back);
    back
}

/// Whether a read to the end saw the peer close: a FIN, or a reset. A
/// server that drops a connection before reading what was sent (the HTTP
/// port past its connection limit drops the oldest, perhaps before its
/// task first ran) closes it with a reset, and that is a close too.
fn closed(read: &std::io::Result<usize>) -> bool {
    match read {
        Ok(_) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    }
}

fn read_frame(s: &mut TcpStream) -> Vec<u8> {
    let mut header = [0u8; 8];
    s.read_exact(&mut header).expect("a frame header");
    let mut body = vec![0u8; u64::from_le_bytes(header) as usize];
    s.read_exact(&mut body).expect("a frame body");
    body
}

#[test]
fn garbage_oversized_frames_and_wrong_versions_are_dropped_and_the_cluster_goes_on() {
    let c = TestCluster::start(1);
    let data = c.client().worker_rows().expect("rows")[0].address.clone();
    for target in [c.address.as_str(), data.as_str()] {
        // Random bytes; a header announcing 1 TiB; an empty connection.
        poke(target, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        poke(target, &(1u64 << 40).to_le_bytes());
        poke(target, &[]);
        let mut noise = vec![0u8; 4096];
        for (i, b) in noise.iter_mut().enumerate() {
            *b = (i * 7919 % 251) as u8;
        }
        poke(target, &noise);
        // A brisk hello of another version is told why.
        let hello =
            Hello { magic: MAGIC.into(), version: 999, role: Role::Peer, token: None, name: "old".into() };
        let back = poke(target, &protocol::encode(&hello).expect("encode"));
        let reply: Reply = protocol::decode_frame(&back, protocol::HANDSHAKE_MAX).expect("a reply");
        assert!(matches!(&reply, Reply::Refused { reason } if reason.contains("version 999")), "{reply:?}");
    }
    // A graph whose closure code was not sent is refused, with the reason.
    let mut s = TcpStream::connect(c.address.trim_start_matches("tcp://")).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    let hello = Hello {
        magic: MAGIC.into(),
        version: protocol::VERSION,
        role: Role::Client,
        token: None,
        name: "raw".into(),
    };
    s.write_all(&protocol::encode(&hello).expect("encode")).expect("hello");
    let welcome: Reply = protocol::decode(&read_frame(&mut s)).expect("welcome");
    assert!(matches!(welcome, Reply::Welcome { .. }), "{welcome:?}");
    let task = TaskDef {
        key: Key::new("f-0123456789"),
        deps: vec![],
        order: 0,
        annotations: None,
        op: Blob(std::sync::Arc::from(&b"\x90"[..])),
        codes: vec![42],
    };
    let update = vec![ClientMsg::UpdateGraph { id: 7, tasks: vec![task], wants: vec![], codes: vec![] }];
    s.write_all(&protocol::encode(&update).expect("encode")).expect("update");
    let answer: Vec<ToClient> = protocol::decode(&read_frame(&mut s)).expect("answer");
    assert!(
        matches!(&answer[..], [ToClient::Refused { id: 7, error }] if error.to_string().contains("closure code")),
        "{answer:?}"
    );
    drop(s);
    let out = c.run("print(gather(map(|x| x + 1, [1, 2, 3])));", DEADLINE);
    assert_ok(&out, "a run after the garbage");
    assert_eq!(text(&out.stdout), "[2, 3, 4]\n");
    c.finish();
}

/// A connection that said a valid hello in `role` and was welcomed.
fn greeted(address: &str, role: Role) -> TcpStream {
    let mut s = TcpStream::connect(address.trim_start_matches("tcp://")).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    let hello =
        Hello { magic: MAGIC.into(), version: protocol::VERSION, role, token: None, name: "fuzz".into() };
    s.write_all(&protocol::encode(&hello).expect("encode")).expect("hello");
    let welcome: Reply = protocol::decode(&read_frame(&mut s)).expect("welcome");
    assert!(matches!(welcome, Reply::Welcome { .. }), "{welcome:?}");
    s
}

/// Hostile bytes on every port, from peers that passed the handshake too:
/// fuzzed frames (random bodies, random lengths, deep nesting, truncated
/// frames), connections that open and say nothing (slowloris), and an HTTP
/// port fed garbage and oversized heads. Each is refused or dropped, and
/// the cluster computes exactly throughout.
#[test]
fn hostile_bytes_on_every_port_are_refused_and_the_cluster_goes_on() {
    let c = TestCluster::start(2);
    let data = c.client().worker_rows().expect("rows")[0].address.clone();
    // xorshift: the same "random" bytes every run, so a failure repeats.
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    // Slowloris: connections that never finish their hello, held open
    // while everything else runs.
    let idle: Vec<TcpStream> = [c.address.as_str(), data.as_str(), c.http.as_str()]
        .iter()
        .flat_map(|a| {
            let a = a.trim_start_matches("tcp://").trim_start_matches("http://").to_string();
            (0..100).map(move |i| {
                let mut s = TcpStream::connect(&a).expect("connect");
                let _ = s.write_all(&[i as u8]);
                s
            })
        })
        .collect();
    let targets =
        [(c.address.as_str(), Role::Client), (c.address.as_str(), Role::Worker), (data.as_str(), Role::Peer)];
    for (address, role) in targets {
        for round in 0..40 {
            let mut s = greeted(address, role);
            let len = (next() % 300) as usize;
            let mut body: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            match round % 4 {
                // An array nested far deeper than any message.
                0 => body = [vec![0x91u8; 100_000], vec![0xc0]].concat(),
                // A valid-looking start: a one-element array, then noise.
                1 => body.insert(0, 0x91),
                _ => {}
            }
            let mut frame = (body.len() as u64).to_le_bytes().to_vec();
            frame.extend_from_slice(&body);
            if round % 4 == 3 {
                // Truncated: the header promises more than comes.
                frame[0] = frame[0].wrapping_add(50);
            }
            let _ = s.write_all(&frame);
            let _ = s.shutdown(std::net::Shutdown::Write);
            // The peer drops the connection (or answers and then drops it).
            let mut back = Vec::new();
            let read = s.read_to_end(&mut back);
            assert!(closed(&read), "{role:?} fuzz round {round} at {address}: no close in 5 s: {read:?}");
        }
    }
    // The HTTP port: garbage, a head past its bound, a bad method; each is
    // answered with a 4xx and closed.
    let http = c.http.trim_start_matches("http://");
    let head_too_big = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(64 << 10));
    for ask in
        [&b"\x00\xff\x13garbage\r\n\r\n"[..], head_too_big.as_bytes(), b"BREW /metrics HTCPCP/1.0\r\n\r\n"]
    {
        let back = poke(http, ask);
        let status = String::from_utf8_lossy(&back);
        assert!(status.starts_with("HTTP/1.1 4"), "HTTP answered {:?}", status.get(..40));
    }
    let out = c.run("print(gather(map(|x| x + 1, [1, 2, 3])));", DEADLINE);
    assert_ok(&out, "a run amid the slow connections");
    assert_eq!(text(&out.stdout), "[2, 3, 4]\n");
    // The slow connections are closed by their servers after the handshake
    // timeout (10 s) or the HTTP read timeout (10 s).
    for mut s in idle {
        s.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
        let mut back = Vec::new();
        let read = s.read_to_end(&mut back);
        assert!(closed(&read), "a slow connection was never closed: {read:?}");
    }
    assert_eq!(c.client().worker_rows().expect("rows").len(), 2, "a worker went down");
    let (status, _) = http_get(&c.http, "/health", "");
    assert_eq!(status, 200);
    c.finish();
}

/// brisk processes started with `--exit-with-parent` (local clusters), by pid.
fn cluster_children() -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else { continue };
        let cmd = text(&cmd);
        if cmd.contains(env!("CARGO_BIN_EXE_brisk")) && cmd.contains("--exit-with-parent") && alive(pid) {
            out.push(pid);
        }
    }
    out
}

fn wait_gone(pids: &[u32]) -> Vec<u32> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let left: Vec<u32> = pids.iter().copied().filter(|p| alive(*p)).collect();
        if left.is_empty() || std::time::Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Dask's `distributed.worker.memory.*` settings reach `local_cluster`'s
/// workers: a low target spills early; with target and spill off nothing
/// spills; a bad value is refused.
#[test]
fn memory_thresholds_set_in_config_reach_the_workers() {
    let script = r#"
let x = random([3000, 2000], #{chunks: [500, 2000], seed: 7});
config(#{"distributed.worker.memory.target": 0.2});
let c = local_cluster(#{workers: 1, threads: 1, memory_limit: "200MiB"});
let y = x.persist();
sleep(1.0);
print(c.workers()[0].spilled >= 8000000);
print(y.sum().compute() == x.sum().compute());
c.close();
config(#{"distributed.worker.memory.target": false, "distributed.worker.memory.spill": false});
let c = local_cluster(#{workers: 1, threads: 1, memory_limit: "200MiB"});
let y = x.persist();
sleep(1.0);
print(c.workers()[0].spilled);
c.close();
print(config()["distributed.worker.memory.target"]);
print(config()["distributed.worker.memory.pause"]);
try { config(#{"distributed.worker.memory.pause": 1.5}); } catch (e) { print(e); }
"#;
    let out = run_locally(script);
    assert_ok(&out, "the thresholds script");
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[..5], ["true", "true", "0", "false", "0.8"], "{stdout}");
    assert!(lines[5].contains("not a fraction of the memory limit"), "{stdout}");
}

#[test]
fn local_cluster_runs_worker_processes_and_leaves_none_behind() {
    let before = cluster_children();
    let script = r#"
let c = local_cluster(#{workers: 2, threads: 1});
let w = c.workers();
print(w.len());
print(w.map(|r| r.threads));
print(config().scheduler);
print(gather(map(|x| x * x, [1, 2, 3])));
c.scale(3);
print(c.workers().len());
c.scale(1);
print(c.workers().len());
print(from_sequence([1, 2, 3, 4], #{npartitions: 2}).sum().compute());
print(random([400, 100], #{chunks: [100, 100], seed: 3}).persist().sum().compute() > 0.0);
c.close();
print(config().scheduler);
"#;
    let tmp = std::env::temp_dir().join(format!("brisk-local-cluster-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("a temporary directory");
    let out = run_locally_in(script, &tmp);
    assert_ok(&out, "the local_cluster script");
    assert_eq!(text(&out.stdout), "2\n[1, 1]\ndistributed\n[1, 4, 9]\n3\n1\n10\ntrue\nthreads\n");
    let left: Vec<u32> = cluster_children().into_iter().filter(|p| !before.contains(p)).collect();
    assert_eq!(wait_gone(&left), Vec::<u32>::new(), "processes left after the script ended");
    // The workers' folders (shuffle pieces, spilled results) went with them.
    let files = walk(&tmp);
    let _ = std::fs::remove_dir_all(&tmp);
    assert_eq!(files, Vec::<String>::new(), "files left by the cluster");

    // A session killed outright takes its cluster with it.
    let file = ScriptFile::new("local_cluster(#{workers: 2, threads: 1}); print(\"up\"); loop { }");
    let mut child =
        brisk().args(["run", "--no-progress"]).arg(&file.0).stdout(Stdio::piped()).spawn().expect("run");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().expect("stdout")),
        &mut line,
    )
    .expect("read");
    assert_eq!(line, "up\n");
    let started: Vec<u32> = cluster_children().into_iter().filter(|p| !before.contains(p)).collect();
    child.kill().expect("kill");
    let _ = child.wait();
    assert_eq!(started.len(), 5, "a scheduler and two workers, each under its nanny: {started:?}");
    assert_eq!(wait_gone(&started), Vec::<u32>::new(), "orphans after the session was killed");
}

/// The largest resident memory of `pid` seen until `stop` is set.
fn watch_rss(pid: u32, stop: std::sync::Arc<std::sync::atomic::AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut most = 0;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            let kib = status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
                .unwrap_or(0);
            most = most.max(kib * 1024);
            std::thread::sleep(Duration::from_millis(10));
        }
        most
    })
}

#[test]
fn results_past_the_memory_target_spill_to_disk_and_come_back_exact() {
    let dir = std::env::temp_dir().join(format!("brisk-spill-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a local directory");
    let mut c = TestCluster::start(0);
    let local = dir.to_str().expect("utf-8");
    c.add_worker(&["--memory-limit", "200MiB", "--local-directory", local, "--resources", "near=1"]);
    // A second worker, which reads w0's results (spilled ones too) as a peer.
    c.add_worker(&["--resources", "far=1"]);
    c.client().wait_for_workers(2, DEADLINE).expect("the workers join");
    let pid = c.client().worker_rows().expect("rows")[0].pid;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = watch_rss(pid, stop.clone());
    // 24 blocks of 8 MB: 192 MB of results against a 120 MiB target. A
    // worker's peak is about the target, two blocks in flight and its own
    // ~40 MiB (a debug build): blocks of 16 MB came within 14 MiB of the
    // limit on an idle machine and passed it once under CI's load.
    let script = r#"
let x = annotate(#{resources: #{near: 1}}, || random([12000, 2000], #{chunks: [500, 2000], seed: 7}));
let y = x.persist();
sleep(1.2);
let w = client().workers()[0];
print(w.spilled >= 4 * 16000000);
print(w.memory + w.spilled >= 12 * 16000000);
print(w.memory <= 200 * 1048576 * 6 / 10);
print(y.sum().compute() == x.sum().compute());
print((y * 2.0).max().compute() == x.max().compute() * 2.0);
print(y.blocks([3, 0]).compute().shape);
print(annotate(#{resources: #{far: 1}}, || y.sum()).compute() == x.sum().compute());
"#;
    let out = c.run(script, DEADLINE);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let most = watcher.join().expect("the watcher");
    assert_ok(&out, "the spilling script");
    assert_eq!(text(&out.stdout), "true\ntrue\ntrue\ntrue\ntrue\n[500, 2000]\ntrue\n");
    let far = c.client().worker_rows().expect("rows").into_iter().find(|r| r.name == "w1").expect("w1");
    assert!(far.transferred >= 24 * 8_000_000, "w1 fetched {} bytes of w0's blocks", far.transferred);
    assert!(most < 200 << 20, "the worker's resident memory reached {most} bytes (limit 200 MiB)");
    c.finish();
    let left: Vec<String> = walk(&dir);
    assert!(left.is_empty(), "spill files left behind: {left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A task whose memory runs away where no check sees it (a join whose
/// output is the product of its inputs, inside polars): the nanny kills
/// its worker past 95% of the limit and starts another; the task errs as
/// KilledWorker after the allowed failures, and the cluster goes on.
#[test]
fn the_nanny_restarts_a_worker_whose_memory_runs_away() {
    let mut c = TestCluster::start_with(0, None, &["--allowed-failures", "1"]);
    c.add_worker_with_nanny(&["--memory-limit", "250MiB"]);
    c.client().wait_for_workers(1, DEADLINE).expect("the worker joins");
    let first = c.client().worker_rows().expect("rows")[0].pid;
    let script = r#"
let zeros = []; let ids = [];
for i in 0..12000 { zeros.push(0); ids.push(i); }
let l = from_columns(#{k: zeros, a: ids});
let r = from_columns(#{k: zeros, b: ids});
try { print(l.merge(r, #{on: "k"})["a"].sum().compute()); } catch (e) { print("error: " + e.message); }
print(gather(map(|x| x + 1, [1, 2, 3])));
"#;
    let out = c.run(script, DEADLINE);
    assert_ok(&out, "the script");
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("error: ") && lines[0].contains("workers that died"), "{stdout}");
    assert_eq!(lines[1], "[2, 3, 4]", "{stdout}");
    let rows = c.client().worker_rows().expect("rows");
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_ne!(rows[0].pid, first, "a new worker process serves");
    assert!(!alive(first), "the old worker is gone");
    c.finish();
}

/// `c.adapt` on a local cluster: workers come with a queue of work and go
/// when it is done (and its results are no longer held).
#[test]
fn a_local_cluster_adapts_to_its_work_and_back_to_zero() {
    let out = run_locally(
        r#"
let c = local_cluster(#{workers: 0, threads: 1});
c.adapt(#{minimum: 0, maximum: 3, interval: "300ms", wait_count: 2});
let fs = []; for i in 0..30 { fs.push(submit(|i| { sleep(1.0); i * 3 }, i)); }
let most = 0;
while !fs.all(|f| f.done()) { let n = c.workers().len(); if n > most { most = n; } sleep(0.05); }
print(`most ${most}`);
print(`sum ${gather(fs).reduce(|s, x| s + x, 0)}`);
fs = ();
let t = timestamp();
while c.workers().len() > 0 && t.elapsed < 30 { sleep(0.1); }
print(`left ${c.workers().len()}`);
c.scale(2);
print(`scaled ${c.workers().len()}`);
c.close();
"#,
    );
    assert_ok(&out, "adapt");
    let stdout = text(&out.stdout);
    let most: usize = stdout.lines().find_map(|l| l.strip_prefix("most ")?.parse().ok()).unwrap_or(0);
    assert!(most >= 2, "adapt grew to {most} workers:\n{stdout}");
    assert!(
        stdout.contains("sum 1305\n") && stdout.contains("left 0\n") && stdout.contains("scaled 2\n"),
        "{stdout}"
    );
    assert!(!text(&out.stderr).contains("error"), "{}", text(&out.stderr));
}

/// POST with a body; the status and the body of the answer.
fn http_post(http: &str, path: &str, headers: &str, body: &str) -> (u16, String) {
    let host = http.trim_start_matches("http://");
    let mut s = TcpStream::connect(host).expect("connect to the HTTP port");
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {host}\r\n{headers}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    let mut answer = String::new();
    s.read_to_string(&mut answer).expect("read the answer");
    let status = answer.split_whitespace().nth(1).and_then(|c| c.parse().ok()).expect("a status line");
    (status, answer.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default())
}

/// Dask's scaling endpoints, as the dask-kubernetes operator calls them.
#[test]
fn dask_scaling_endpoints_answer_on_the_http_port() {
    let c = TestCluster::start_with(2, Some("tok"), &[]);
    let auth = "Authorization: Bearer tok\r\n";
    assert_eq!(http_get(&c.http, "/api/v1/adaptive_target", "").0, 401);
    let json = |s: &str| serde_json::from_str::<serde_json::Value>(s).expect("JSON");
    let (status, body) = http_get(&c.http, "/api/v1/get_workers", auth);
    assert_eq!(status, 200, "{body}");
    let workers = json(&body);
    assert_eq!(workers["num_workers"], 2, "{body}");
    let w0 = workers["workers"][0]["address"].as_str().expect("an address").to_string();
    // No work: the target is no worker at all.
    let (status, body) = http_get(&c.http, "/api/v1/adaptive_target", auth);
    assert_eq!((status, json(&body)["workers"].as_u64()), (200, Some(0)), "{body}");
    // Idle since the first tick.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let since = loop {
        let (_, body) = http_get(&c.http, "/api/v1/check_idle", auth);
        if let Some(t) = json(&body)["idle_since"].as_f64() {
            break t;
        }
        assert!(std::time::Instant::now() < deadline, "never idle: {body}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
    assert!(since <= now && now - since < 60.0, "{since} vs {now}");
    // Retire one worker by its address: it leaves.
    let (status, body) =
        http_post(&c.http, "/api/v1/retire_workers", auth, &format!("{{\"workers\": [\"{w0}\"]}}"));
    assert_eq!(status, 200, "{body}");
    assert!(
        json(&body).get(&w0).is_some() || json(&body).as_object().is_some_and(|o| o.len() == 1),
        "{body}"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while c.client().worker_rows().map(|r| r.len()).unwrap_or(0) != 1 {
        assert!(std::time::Instant::now() < deadline, "the worker did not leave");
        std::thread::sleep(Duration::from_millis(50));
    }
    for bad in ["", "{\"n\": -1}", "{\"workers\": 3}", "{}"] {
        let (status, body) = http_post(&c.http, "/api/v1/retire_workers", auth, bad);
        assert_eq!(status, 400, "{bad:?}: {body}");
    }
    c.finish();
}

/// Without a GPU (or with every GPU hidden, as here, so the test reads the
/// same on any machine) the CUDA cluster's three ways in refuse clearly:
/// `local_cuda_cluster`, `brisk cuda-worker`, and a worker given a device
/// memory limit, which stops before it joins. Nothing is left running.
#[test]
fn cuda_workers_refuse_clearly_without_a_gpu() {
    let before = cluster_children();
    let script = r#"
try { local_cuda_cluster(); } catch (e) { print(e); }
try { local_cuda_cluster(#{devices: ["GPU-00000000-0000-0000-0000-000000000000"], device_memory_limit: 0.5}); } catch (e) { print(e); }
try { local_cuda_cluster(#{gpus: 1}); } catch (e) { print(e); }
print(config().scheduler);
"#;
    let file = ScriptFile::new(script);
    let out = run_with_deadline(
        brisk().args(["run", "--no-progress"]).arg(&file.0).env("CUDA_VISIBLE_DEVICES", "-1"),
        DEADLINE,
        String::new,
    );
    assert_ok(&out, "the local_cuda_cluster script");
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    assert!(lines[0].contains("local_cuda_cluster: no GPU: "), "{stdout}");
    // A device no machine has: on one without a GPU that is said first;
    // on one with GPUs the worker finds no such device and ends at once.
    assert!(
        lines[1].contains("local_cuda_cluster: no GPU: ") || lines[1].contains("ended before joining"),
        "{stdout}"
    );
    assert!(lines[2].contains("gpus") && lines[2].contains("devices"), "{stdout}");
    assert_eq!(lines[3], "threads", "the session goes on, on its own threads");

    let out = run_with_deadline(
        brisk().args(["cuda-worker", "tcp://127.0.0.1:9"]).env("CUDA_VISIBLE_DEVICES", "-1"),
        DEADLINE,
        String::new,
    );
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("brisk cuda-worker: no GPU: "), "{}", text(&out.stderr));

    let c = TestCluster::start(0);
    for nanny in [&["--no-nanny"][..], &[]] {
        let out = run_with_deadline(
            brisk()
                .args(["worker", &c.address, "--device-memory-limit", "0.5"])
                .args(nanny)
                .env("CUDA_VISIBLE_DEVICES", "-1"),
            DEADLINE,
            String::new,
        );
        assert!(!out.status.success());
        let err = text(&out.stderr);
        assert!(err.contains("a CUDA worker needs a GPU: no GPU"), "{err}");
    }
    assert!(c.client().worker_rows().expect("workers").is_empty(), "a worker without its GPU joined");
    c.finish();
    let left: Vec<u32> = cluster_children().into_iter().filter(|p| !before.contains(p)).collect();
    assert_eq!(wait_gone(&left), Vec::<u32>::new(), "processes left behind");
}

/// The scheduler's side of a CUDA worker, without a GPU: a worker that
/// registers a device memory limit and reports device bytes shows them in
/// the worker rows and in `/metrics`; when it says its GPU failed, it is
/// removed at once and the cluster goes on.
#[test]
fn a_cuda_workers_device_memory_is_shown_and_its_gpu_failure_removes_it() {
    use brisk_distributed::protocol::WorkerMsg;
    let c = TestCluster::start(1);
    let mut s = greeted(&c.address, Role::Worker);
    let register = WorkerMsg::Register {
        nthreads: 1,
        memory_limit: Some(8 << 30),
        device_memory_limit: Some(2 << 30),
        resources: vec![("GPU".into(), 1.0)],
        address: "tcp://127.0.0.1:9".into(),
        gpu: "GPU 0: NVIDIA H100, 79.2 GiB".into(),
        pid: 1,
        id: 77,
        held: vec![],
    };
    let heartbeat = WorkerMsg::Heartbeat {
        memory: 0,
        running: 0,
        transferred: 0,
        spilled: 0,
        device: 3 << 29,
        device_spilled: 1 << 29,
        device_transferred: 5 << 20,
    };
    s.write_all(&protocol::encode(&vec![register, heartbeat]).expect("encode")).expect("register");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let row = loop {
        let rows = c.client().worker_rows().expect("rows");
        match rows.into_iter().find(|r| r.device_memory_limit.is_some()) {
            Some(r) if r.device_memory > 0 => break r,
            _ if std::time::Instant::now() > deadline => panic!("the CUDA worker's heartbeat never showed"),
            _ => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    assert_eq!(
        (row.device_memory_limit, row.device_memory, row.device_spilled, row.device_transferred),
        (Some(2 << 30), 3 << 29, 1 << 29, 5 << 20)
    );
    let (status, metrics) = http_get(&c.http, "/metrics", "");
    assert_eq!(status, 200, "{metrics}");
    let name = &row.name;
    for (series, want) in [
        ("brisk_worker_device_memory_bytes", 3u64 << 29),
        ("brisk_worker_device_memory_limit_bytes", 2 << 30),
        ("brisk_worker_device_spilled_bytes", 1 << 29),
        ("brisk_worker_device_transferred_bytes", 5 << 20),
    ] {
        let line = format!("{series}{{worker=\"{name}\"}} {want}");
        assert!(metrics.lines().any(|l| l == line), "{line:?} missing:\n{metrics}");
    }
    assert!(!metrics.contains("device_memory_bytes{worker=\"w0\"}"), "w0 is no CUDA worker:\n{metrics}");

    let failed = WorkerMsg::GpuFailed { error: "GPU error on device 0: an illegal memory access".into() };
    s.write_all(&protocol::encode(&vec![failed]).expect("encode")).expect("gpu failed");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while c.client().worker_rows().expect("rows").len() > 1 {
        assert!(std::time::Instant::now() < deadline, "the worker whose GPU failed stayed");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(s);
    let out = c.run("print(gather(map(|x| x + 1, [1, 2, 3])));", DEADLINE);
    assert_ok(&out, "a run after the GPU failure");
    assert_eq!(text(&out.stdout), "[2, 3, 4]\n");
    c.finish();
}

/// `run_command`'s programs run in the worker's own folder under
/// `--local-directory` (a relative `cwd` is taken from there), so what they
/// write stays with the worker and goes when it goes; the lines they print
/// reach the clients that watch the stream (the dashboard's log) as they
/// come, named by their worker.
#[test]
fn run_command_programs_write_in_the_workers_local_directory() {
    use brisk_engine::client::Client;
    let mut c = TestCluster::start(0);
    let dir = std::env::temp_dir().join(format!("brisk-test-workdir-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("local directory");
    c.add_worker(&["--local-directory", dir.to_str().expect("utf-8")]);
    c.client().wait_for_workers(1, Duration::from_secs(30)).expect("the worker joins");
    let watching = c.client().subscribe(1000);
    let out = c.run(
        r#"
let here = run_command(["sh", "-c", "mkdir sub && echo made > sub/out.txt && pwd"]).result().stdout;
here.trim();
print(here);
print(run_command(["cat", "out.txt"], #{cwd: "sub"}).result().stdout);
"#,
        Duration::from_secs(60),
    );
    assert_ok(&out, "programs in the worker's folder");
    let printed = text(&out.stdout);
    let (folder, rest) = printed.split_once('\n').expect("two lines");
    let folder = std::path::Path::new(folder);
    assert_eq!(folder.parent(), Some(dir.canonicalize().expect("canonical").as_path()), "ran in {printed}");
    assert!(
        folder.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("brisk-worker-")),
        "ran in {printed}"
    );
    assert_eq!(rest, "made\n\n", "a relative cwd is under the worker's folder");
    assert_eq!(std::fs::read_to_string(folder.join("sub/out.txt")).expect("the program's file"), "made\n");
    // The lines went to the scheduler before the task's result did; they
    // reach this client on its own connection.
    let mut logged = Vec::new();
    while logged.len() < 2 {
        match watching.recv_timeout(Duration::from_secs(10)) {
            Ok(brisk_engine::diagnostics::Event::Output { line, .. }) => logged.push(line.to_string()),
            Ok(_) => {}
            Err(e) => panic!("the log stopped at {logged:?}: {e}"),
        }
    }
    assert_eq!(logged, [format!("w0: {}", folder.display()), "w0: made".to_string()], "the log");
    c.finish();
    assert_eq!(walk(&dir), Vec::<String>::new(), "the worker's folder went with it");
    std::fs::remove_dir_all(&dir).expect("remove the test's folder");
}

/// `--resources GPU=2` on a worker that sees two devices: two GPU tasks
/// run at once, each given a device of its own, which the programs they
/// start see as `CUDA_VISIBLE_DEVICES`. No GPU is needed: the worker deals
/// the devices the variable lists.
#[test]
fn a_worker_offering_two_gpus_gives_each_gpu_task_its_own_device() {
    let mut c = TestCluster::start(0);
    let scheduler = c.address.clone();
    c.add_worker_env_via(
        &scheduler,
        &["--no-nanny", "--nthreads", "2", "--resources", "GPU=2"],
        &[("CUDA_VISIBLE_DEVICES", "5,7")],
    );
    let out = c.run(
        r#"
let fs = [];
for i in 0..2 { fs.push(run_command(["sh", "-c", "echo $CUDA_VISIBLE_DEVICES; sleep 1"], #{resources: #{GPU: 1}})); }
let seen = fs.map(|f| { let s = f.result().stdout; s.trim(); s });
seen.sort();
print(seen);
let one = run_command(["sh", "-c", "echo $CUDA_VISIBLE_DEVICES"], #{resources: #{GPU: 1}}).result().stdout;
one.trim();
print(one == "5" || one == "7");
let plain = run_command(["sh", "-c", "echo $CUDA_VISIBLE_DEVICES"]).result().stdout;
plain.trim();
print(plain);
"#,
        Duration::from_secs(60),
    );
    assert_ok(&out, "two GPU tasks");
    assert_eq!(text(&out.stdout), "[\"5\", \"7\"]\ntrue\n5,7\n", "each GPU task had its own device");
    c.finish();
}

/// `tests/golden/coordination.rhai` prints what Dask prints for the same
/// Variable, Queue, Lock, Event, Semaphore and dataset calls (the golden
/// test runs the script locally and on a cluster).
#[test]
fn coordination_answers_as_dask_does() {
    let Some(py) = support::python_with("distributed", "dask's distributed is") else { return };
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = run_with_deadline(
        std::process::Command::new(py).arg(root.join("tests/reference/dask_coordination.py")),
        DEADLINE,
        String::new,
    );
    assert_ok(&out, "the Dask reference");
    let golden =
        std::fs::read_to_string(root.join("tests/golden/coordination.out")).expect("the golden output");
    assert_eq!(text(&out.stdout), golden);
}

/// A task's lock is the cluster's; when its worker dies the lock is free
/// again, and a queue item a timed-out task did not take is still there.
#[test]
fn a_worker_that_dies_frees_the_locks_its_tasks_held() {
    let before = cluster_children();
    let script = r#"
let c = local_cluster(#{workers: 1, threads: 2});
let pid = c.workers()[0].pid;
let holder = submit(|| { Lock("held").acquire(); Event("taken").set(); Event("go").wait(#{timeout: 60}); 1 });
print(Event("taken").wait(#{timeout: 20}));
let l = Lock("held");
print(l.acquire(#{timeout: 0.1}));
try { run_command(["kill", "-9", pid.to_string()]).result() } catch { }
// Freed with the dead worker (or, if the task ran again first, when it ends).
Event("go").set();
print(l.acquire(#{timeout: 20}));
let f = submit(|| { let got = "none"; try { got = Queue("late").get(#{timeout: 0.2}) } catch { } got });
print(f.result());
Queue("late").put(1);
print(submit(|| Queue("late").get(#{timeout: 5})).result());
c.close();
"#;
    let out = run_locally(script);
    assert_ok(&out, "the script");
    assert_eq!(text(&out.stdout), "true\nfalse\ntrue\nnone\n1\n");
    let left: Vec<u32> = cluster_children().into_iter().filter(|p| !before.contains(p)).collect();
    assert_eq!(wait_gone(&left), Vec::<u32>::new(), "processes left after the script ended");
}

/// `c.run` calls once on every worker process and `c.who_has` names the
/// workers holding results, as Dask's; a failure names its worker.
#[test]
fn run_calls_every_worker_and_who_has_names_the_holders() {
    let script = r#"
let c = local_cluster(#{workers: 2, threads: 1});
let addrs = client().workers().map(|w| w.address);
addrs.sort();
let r = client().run(|x| x * 2, 21);
let ks = r.keys();
ks.sort();
print(ks == addrs);
print(r.values());
client().run(|| Queue("ran").put(1));
print(Queue("ran").get(#{batch: 2}));
fn boom() { throw "broken" }
try { client().run(boom) } catch (e) { print(e.contains("run: on tcp://") && e.contains("broken")) }
let fs = map(|x| x * 2, [1, 2, 3]);
gather(fs);
let w = client().who_has(fs);
print(w.len());
print(w.values().all(|a| a.len() >= 1 && addrs.contains(a[0])));
print(client().who_has().len() >= 3);
c.close();
print(client().run(|x| x + 1, 1));
let g = submit(|x| x, 5);
g.result();
print(client().who_has(g).values());
"#;
    let out = run_locally(script);
    assert_ok(&out, "the script");
    assert_eq!(
        text(&out.stdout),
        "true\n[42, 42]\n[1, 1]\ntrue\n3\ntrue\ntrue\n#{\"inproc://local\": 2}\n[[\"inproc://local\"]]\n"
    );
}
