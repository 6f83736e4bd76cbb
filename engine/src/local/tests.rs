//! The local runtime end to end on both executors (`threads`, `sync`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::client::AsCompleted;
use crate::error::SchedulerError;
use crate::graph::task::{Annotations, Task};
use crate::ops::{Arg, Builtin, Func};
use crate::runner::{Code, NoUdfs, Udf};

fn both() -> Vec<LocalConfig> {
    vec![
        LocalConfig { threads: 3, ..LocalConfig::default() },
        LocalConfig { sync: true, ..LocalConfig::default() },
    ]
}

fn lit(k: &str, v: i64) -> Task {
    Task::new(Key::new(k), Op::Literal(Value::Int(v)), vec![])
}

fn call(k: &str, b: Builtin, deps: &[&str]) -> Task {
    let args = (0..deps.len() as u32).map(Arg::Dep).collect();
    Task::new(
        Key::new(k),
        Op::Call { func: Func::Builtin(b), args },
        deps.iter().map(|d| Key::new(*d)).collect(),
    )
}

/// Leaves `v{i} = i + 1` and a pairwise `add` tree, as benchmark B1.
fn tree(n: usize) -> (Graph, Key) {
    let mut tasks = Vec::new();
    let mut layer: Vec<String> = Vec::new();
    for i in 0..n {
        tasks.push(lit(&format!("lit-{i}"), i as i64));
        let k = format!("inc-{i}");
        let mut t = call(&k, Builtin::Add, &[&format!("lit-{i}")]);
        t.op =
            Op::Call { func: Func::Builtin(Builtin::Add), args: vec![Arg::Dep(0), Arg::Lit(Value::Int(1))] };
        tasks.push(t);
        layer.push(k);
    }
    let mut level = 0;
    while layer.len() > 1 {
        let mut next = Vec::new();
        for (j, pair) in layer.chunks(2).enumerate() {
            if pair.len() == 2 {
                let k = format!("add-{level}-{j}");
                tasks.push(call(&k, Builtin::Add, &[&pair[0], &pair[1]]));
                next.push(k);
            } else {
                next.push(pair[0].clone());
            }
        }
        layer = next;
        level += 1;
    }
    (Graph::from_tasks(tasks), Key::new(layer[0].as_str()))
}

#[test]
fn a_tree_reduction_gives_the_exact_sum_and_leaves_nothing_behind() {
    for config in both() {
        let rt = Runtime::new(config.clone(), Arc::new(NoUdfs));
        let (g, out) = tree(2_000);
        let v = rt.compute(g.clone(), &[out], &CancelToken::new()).expect("compute");
        assert_eq!(v, vec![Value::Int(2_000 * 2_001 / 2)], "{config:?}");
        assert_eq!(rt.snapshot().tasks_held, 0);
        rt.validate().expect("valid");
        assert_eq!(rt.snapshot().memory_bytes, 0);
    }
}

#[test]
fn shared_work_in_one_compute_runs_once() {
    for config in both() {
        let rt = Runtime::new(config, Arc::new(NoUdfs));
        let g = Graph::from_tasks(vec![
            lit("x-00000000", 20),
            call("a-00000000", Builtin::Neg, &["x-00000000"]),
            call("b-00000000", Builtin::Add, &["x-00000000", "x-00000000"]),
        ]);
        let v = rt
            .compute(g, &[Key::new("a-00000000"), Key::new("b-00000000")], &CancelToken::new())
            .expect("ok");
        assert_eq!(v, vec![Value::Int(-20), Value::Int(40)]);
        let x = rt.snapshot().groups.into_iter().find(|g| &*g.name == "x").expect("group x");
        assert_eq!((x.total, x.done), (1, 1));
    }
}

#[test]
fn a_failing_task_fails_its_dependents_not_the_others() {
    for config in both() {
        let rt = Runtime::new(config, Arc::new(NoUdfs));
        let mut bad = call("bad", Builtin::GetItem, &["l"]);
        bad.op = Op::Call {
            func: Func::Builtin(Builtin::GetItem),
            args: vec![Arg::Dep(0), Arg::Lit(Value::Int(9))],
        };
        let g = Graph::from_tasks(vec![
            Task::new(Key::new("l"), Op::Literal(Value::list(vec![])), vec![]),
            bad,
            call("after", Builtin::Neg, &["bad"]),
            lit("fine", 3),
        ]);
        let futs = rt.submit(g.clone(), &[Key::new("after"), Key::new("fine")]).expect("submit");
        let err = futs[0].result(&CancelToken::new()).expect_err("must fail");
        assert!(err.to_string().contains("index 9 out of range for array of length 0"), "{err}");
        assert_eq!(futs[0].status().name(), "error");
        assert_eq!(futs[1].result(&CancelToken::new()).ok(), Some(Value::Int(3)));
        drop(futs);
        assert_eq!(rt.snapshot().tasks_held, 0);
    }
}

/// A closure runner for tests: `spin` runs until cancelled, `panic` panics,
/// anything else returns its first argument.
struct TestUdfs;

impl UdfRunner for TestUdfs {
    fn call(&self, udf: &Udf, args: Vec<Value>, ctx: &TaskContext<'_>) -> Result<Value, TaskError> {
        match udf.entry.as_str() {
            "spin" => {
                let t0 = Instant::now();
                while !ctx.is_cancelled() {
                    if t0.elapsed() > Duration::from_secs(20) {
                        return Err(TaskError::user("spin was never cancelled"));
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(TaskError::cancelled())
            }
            "panic" => panic!("boom in a task"),
            "sleep" => {
                std::thread::sleep(Duration::from_millis(300));
                Ok(args.into_iter().next().unwrap_or_default())
            }
            _ => Ok(args.into_iter().next().unwrap_or_default()),
        }
    }
}

fn udf_task(k: &str, entry: &str) -> Task {
    let udf = Udf {
        label: entry.into(),
        entry: entry.into(),
        code: Arc::new(Code { id: 0, chunks: vec![] }),
        curry: vec![],
    };
    Task::new(
        Key::new(k),
        Op::Call { func: Func::Udf(Arc::new(udf)), args: vec![Arg::Lit(Value::Int(1))] },
        vec![],
    )
}

#[test]
fn cancelling_a_compute_stops_running_tasks_and_the_runtime_stays_usable() {
    let rt = Runtime::new(LocalConfig { threads: 2, ..LocalConfig::default() }, Arc::new(TestUdfs));
    let g = Graph::from_tasks(vec![udf_task("spin-1", "spin"), udf_task("spin-2", "spin")]);
    let cancel = CancelToken::new();
    let c2 = cancel.clone();
    let t0 = Instant::now();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        c2.cancel();
    });
    let r = rt.compute(g.clone(), &[Key::new("spin-1"), Key::new("spin-2")], &cancel);
    let _ = stopper.join();
    assert!(matches!(r, Err(EngineError::Cancelled)), "{r:?}");
    assert!(t0.elapsed() < Duration::from_secs(5));
    // The running tasks see their cancel flag and the runtime drains.
    let deadline = Instant::now() + Duration::from_secs(5);
    while rt.snapshot().busy_threads > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(rt.snapshot().busy_threads, 0);
    assert_eq!(rt.snapshot().tasks_held, 0);
    let again = rt.compute(Graph::from_tasks(vec![lit("x", 5)]), &[Key::new("x")], &CancelToken::new());
    assert_eq!(again.ok(), Some(vec![Value::Int(5)]));
}

#[test]
fn a_panicking_task_becomes_a_failed_task() {
    for config in both() {
        let rt = Runtime::new(config, Arc::new(TestUdfs));
        let g = Graph::from_tasks(vec![udf_task("p", "panic"), udf_task("ok", "id")]);
        let futs = rt.submit(g.clone(), &[Key::new("p"), Key::new("ok")]).expect("submit");
        let e = futs[0].result(&CancelToken::new()).expect_err("panics");
        assert!(e.to_string().contains("panicked: boom in a task"), "{e}");
        assert_eq!(futs[1].result(&CancelToken::new()).ok(), Some(Value::Int(1)));
    }
}

#[test]
fn as_completed_yields_in_finishing_order() {
    let rt = Runtime::new(LocalConfig { threads: 2, ..LocalConfig::default() }, Arc::new(TestUdfs));
    let slow =
        rt.submit(Graph::from_tasks(vec![udf_task("slow-1", "sleep")]), &[Key::new("slow-1")]).expect("s");
    let quick =
        rt.submit(Graph::from_tasks(vec![udf_task("quick-1", "id")]), &[Key::new("quick-1")]).expect("q");
    let all = vec![slow[0].clone(), quick[0].clone()];
    let order: Vec<String> =
        AsCompleted::new(all, CancelToken::new()).map(|f| f.expect("ok").key().to_string()).collect();
    assert_eq!(order, ["quick-1", "slow-1"]);
}

#[test]
fn fusion_never_swallows_a_key_the_scheduler_already_holds() {
    let rt = Runtime::new(LocalConfig { threads: 1, ..LocalConfig::default() }, Arc::new(NoUdfs));
    let held =
        rt.submit(Graph::from_tasks(vec![lit("x-00000000", 20)]), &[Key::new("x-00000000")]).expect("x");
    held[0].result(&CancelToken::new()).expect("x done");
    // x -> y is a linear chain that fusion would merge, recomputing x.
    let g = Graph::from_tasks(vec![lit("x-00000000", 20), call("y-00000000", Builtin::Neg, &["x-00000000"])]);
    assert_eq!(
        rt.compute(g, &[Key::new("y-00000000")], &CancelToken::new()).ok(),
        Some(vec![Value::Int(-20)])
    );
    let x = rt.snapshot().groups.into_iter().find(|g| &*g.name == "x").expect("group x");
    assert_eq!((x.total, x.done), (1, 1), "x ran once");
}

#[test]
fn futures_complete_in_order_of_finishing_and_release_on_drop() {
    for config in both() {
        let rt = Runtime::new(config, Arc::new(NoUdfs));
        let (g, out) = tree(64);
        let mut futs = rt.submit(g.clone(), std::slice::from_ref(&out)).expect("submit");
        futs.extend(
            rt.submit(Graph::from_tasks(vec![lit("quick", 1)]), &[Key::new("quick")]).expect("submit"),
        );
        let done: Vec<Key> = AsCompleted::new(futs.clone(), CancelToken::new())
            .map(|f| f.expect("ok").key().clone())
            .collect();
        assert_eq!(done.len(), 2);
        assert!(futs.iter().all(Future::done));
        assert!(rt.snapshot().tasks_held >= 2);
        drop(futs);
        assert_eq!(rt.snapshot().tasks_held, 0);
    }
}

#[test]
fn futures_can_be_inputs_of_later_graphs() {
    for config in both() {
        let rt = Runtime::new(config, Arc::new(NoUdfs));
        let f =
            rt.submit(Graph::from_tasks(vec![lit("s", 41)]), &[Key::new("s")]).expect("scatter").remove(0);
        let g = Graph::from_tasks(vec![{
            let mut t = call("t", Builtin::Add, &["s"]);
            t.op = Op::Call {
                func: Func::Builtin(Builtin::Add),
                args: vec![Arg::Dep(0), Arg::Lit(Value::Int(1))],
            };
            t
        }]);
        assert_eq!(
            rt.compute(g.clone(), &[Key::new("t")], &CancelToken::new()).ok(),
            Some(vec![Value::Int(42)])
        );
        drop(f);
        let missing = rt.compute(g.clone(), &[Key::new("t")], &CancelToken::new());
        assert!(
            matches!(missing, Err(EngineError::Scheduler(SchedulerError::MissingDependency { .. }))),
            "{missing:?}"
        );
    }
}

#[test]
fn cancelling_a_future_stops_its_task_and_reports_cancelled() {
    let rt = Runtime::new(LocalConfig { threads: 1, ..LocalConfig::default() }, Arc::new(TestUdfs));
    let f = rt
        .submit(Graph::from_tasks(vec![udf_task("spin-x", "spin")]), &[Key::new("spin-x")])
        .expect("submit");
    let deadline = Instant::now() + Duration::from_secs(5);
    while rt.snapshot().busy_threads == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    f[0].cancel();
    let e = f[0].result(&CancelToken::new()).expect_err("cancelled");
    assert!(matches!(e, EngineError::FutureCancelled(_)), "{e:?}");
    assert_eq!(f[0].status(), Status::Cancelled);
    while rt.snapshot().busy_threads > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(rt.snapshot().busy_threads, 0, "the spinning task was stopped");
    assert_eq!(rt.snapshot().tasks_held, 0);
    drop(f); // releases nothing twice
    rt.validate().expect("valid");
}

/// Fails its first two calls, then returns its argument.
struct Flaky(std::sync::atomic::AtomicUsize);

impl UdfRunner for Flaky {
    fn call(&self, _: &Udf, args: Vec<Value>, _: &TaskContext<'_>) -> Result<Value, TaskError> {
        if self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < 2 {
            return Err(TaskError::user("flaky"));
        }
        Ok(args.into_iter().next().unwrap_or_default())
    }
}

#[test]
fn retries_rerun_a_failed_task_until_they_run_out() {
    for (retries, expect_ok, calls) in [(2, true, 3), (1, false, 2)] {
        let flaky = Arc::new(Flaky(std::sync::atomic::AtomicUsize::new(0)));
        let rt = Runtime::new(LocalConfig { threads: 1, ..LocalConfig::default() }, flaky.clone());
        let mut t = udf_task("f-00000000", "flaky");
        t.annotations = Some(Arc::new(Annotations { retries, ..Annotations::default() }));
        let r = rt.compute(Graph::from_tasks(vec![t]), &[Key::new("f-00000000")], &CancelToken::new());
        assert_eq!(r.is_ok(), expect_ok, "retries {retries}: {r:?}");
        assert_eq!(flaky.0.load(std::sync::atomic::Ordering::SeqCst), calls, "retries {retries}");
    }
}

#[test]
fn tasks_needing_a_missing_resource_are_refused_not_hung() {
    let rt = Runtime::new(LocalConfig { threads: 1, ..LocalConfig::default() }, Arc::new(NoUdfs));
    let mut t = lit("g", 1);
    t.annotations =
        Some(Arc::new(Annotations { resources: vec![("GPU".into(), 1.0)], ..Annotations::default() }));
    let e =
        rt.compute(Graph::from_tasks(vec![t]), &[Key::new("g")], &CancelToken::new()).expect_err("refused");
    assert!(
        matches!(&e, EngineError::MissingResource { name, need, have, .. } if name == "GPU" && *need == 1.0 && *have == 0.0),
        "{e:?}"
    );
    assert_eq!(e.to_string(), "task g needs resource GPU=1, but the local worker has GPU=0");
}

#[test]
fn a_closed_client_refuses_work_and_fails_what_was_pending() {
    let rt = Runtime::new(LocalConfig { sync: true, ..LocalConfig::default() }, Arc::new(NoUdfs));
    let pending = rt.submit(Graph::from_tasks(vec![lit("p", 1)]), &[Key::new("p")]).expect("submit");
    rt.close();
    assert!(matches!(pending[0].result(&CancelToken::new()), Err(EngineError::Task { .. })));
    let again = rt.submit(Graph::from_tasks(vec![lit("q", 2)]), &[Key::new("q")]);
    assert!(matches!(again, Err(EngineError::Shutdown)), "{again:?}");
}

#[test]
fn subscribers_see_tasks_run() {
    let rt = Runtime::new(LocalConfig { threads: 2, ..LocalConfig::default() }, Arc::new(NoUdfs));
    let rx = rt.subscribe(1000);
    let (g, out) = tree(10);
    rt.compute(g.clone(), &[out], &CancelToken::new()).expect("ok");
    let ran = rx.try_iter().filter(|e| matches!(e, Event::TaskRan { ok: true, .. })).count();
    assert!(ran >= 19, "saw {ran} task events");
}

#[test]
fn tasks_sharing_a_resource_all_run() {
    for config in both() {
        let config = LocalConfig { resources: vec![("GPU".into(), 1.0)], ..config };
        let rt = Runtime::new(config.clone(), Arc::new(NoUdfs));
        let (g, out) = tree(500);
        let quarter =
            Arc::new(Annotations { resources: vec![("GPU".into(), 0.25)], ..Annotations::default() });
        let tasks: Vec<Task> = g
            .into_tasks()
            .into_iter()
            .map(|mut t| {
                t.annotations = Some(quarter.clone());
                t
            })
            .collect();
        let v = rt.compute(Graph::from_tasks(tasks), &[out], &CancelToken::new()).expect("compute");
        assert_eq!(v, vec![Value::Int(500 * 501 / 2)], "{config:?}");
        rt.validate().expect("valid");
    }
}

#[test]
fn workers_lists_the_offered_resources() {
    let config = LocalConfig { threads: 1, resources: vec![("MEM".into(), 2.0)], ..LocalConfig::default() };
    let rt = Runtime::new(config, Arc::new(NoUdfs));
    let w = rt.workers();
    assert_eq!((w.len(), w[0].resources.clone()), (1, vec![("MEM".to_string(), 2.0)]));
}
