//! Deterministic tests of the state machine, event by event.

use super::test_env::{Sim, TestEnv};
use super::*;
use crate::graph::task::Annotations;

fn ann(priority: i64, retries: u32, resources: &[(&str, f64)]) -> Annotations {
    Annotations {
        priority,
        retries,
        resources: resources.iter().map(|(n, x)| (n.to_string(), *x)).collect(),
        timeout: None,
    }
}

#[test]
fn a_chain_runs_frees_inputs_and_forgets_after_release() {
    let mut e = TestEnv::new();
    e.worker("w1", 1);
    e.submit(&[("a", &[]), ("b", &["a"]), ("c", &["b"])], &["c"]);
    e.expect(&["run a on w1"]);
    e.finish("a");
    e.expect(&["run b on w1"]);
    e.finish("b");
    e.expect(&["run c on w1", "free a on w1"]);
    e.finish("c");
    e.expect(&["done c", "free b on w1"]);
    assert_eq!(e.state("c"), Some(TaskState::Memory));
    assert_eq!(e.state("a"), Some(TaskState::Released));
    e.release("c");
    e.expect(&["free c on w1", "forget c", "forget b", "forget a"]);
    assert_eq!(e.s.ntasks(), 0);
}

#[test]
fn a_restored_graph_computes_only_what_no_worker_holds() {
    let mut e = TestEnv::new();
    e.worker("w1", 1);
    e.worker("w2", 1);
    // b is held by w2, d had failed, x is held but nothing needs it.
    let tasks: &[(&str, &[&str])] =
        &[("a", &[]), ("b", &["a"]), ("c", &["b"]), ("d", &[]), ("e", &["d"]), ("x", &[])];
    e.restore(tasks, &["c", "e"], &[("b", "w2"), ("x", "w1")], &[("d", "boom")]);
    // x is forgotten within the restore, before its name is known here.
    let got = e.take();
    assert_eq!(got[..2], ["run c on w2", "erred e: dependency d failed: boom"]);
    assert!(got.len() == 4 && got[2].starts_with("free ") && got[2].ends_with(" on w1"), "{got:?}");
    assert_eq!(e.state("b"), Some(TaskState::Memory));
    assert_eq!(e.state("a"), Some(TaskState::Released));
    e.finish("c");
    e.expect(&["done c", "free b on w2"]);
    assert!(e.s.story_of(&Key::new("b")).iter().any(|s| s.to == TaskState::Memory && s.worker.is_some()));
}

#[test]
fn references_counted_at_once_saturate_and_release_together() {
    let mut e = TestEnv::new();
    e.worker("w1", 1);
    e.submit(&[("a", &[])], &["a"]);
    e.finish("a");
    e.expect(&["run a on w1", "done a"]);
    let a = e.id("a");
    let mut out = Vec::new();
    // A client claiming more references than a count holds: one stimulus,
    // no overflow.
    e.s.want_n(&Key::new("a"), u32::MAX, &mut out).expect("known");
    assert_eq!(e.s.wants(a), u32::MAX);
    e.s.release_n(a, u32::MAX - 1, &mut out);
    assert_eq!(e.s.wants(a), 1);
    assert!(!out.iter().any(|x| matches!(x, Action::Free { .. })), "{out:?}");
    e.s.release_n(a, 5, &mut out);
    assert!(out.iter().any(|x| matches!(x, Action::Free { .. })), "{out:?}");
    assert_eq!(e.s.ntasks(), 0);
}

#[test]
fn equal_keys_submitted_twice_run_once() {
    let mut e = TestEnv::new();
    e.worker("w1", 2);
    e.submit(&[("x", &[]), ("a", &["x"])], &["a"]);
    e.submit(&[("x", &[]), ("b", &["x"])], &["b"]);
    e.expect(&["run x on w1"]);
    e.finish("x");
    e.expect(&["run a on w1", "run b on w1"]);
    assert_eq!(e.s.groups().iter().map(|g| g.total).sum::<u64>(), 3);
}

#[test]
fn a_dependency_listed_several_times_counts_once() {
    let mut e = TestEnv::new();
    e.worker("w1", 1);
    e.submit(&[("a", &[]), ("b", &["a", "a", "a"])], &["b"]);
    e.expect(&["run a on w1"]);
    e.finish("a");
    e.expect(&["run b on w1"]);
    e.finish("b");
    e.expect(&["done b", "free a on w1"]);
}

#[test]
fn already_computed_keys_are_reported_at_once() {
    let mut e = TestEnv::new();
    e.worker("w1", 1);
    e.submit(&[("a", &[])], &["a"]);
    e.finish("a");
    e.take();
    e.submit(&[("a", &[])], &["a"]);
    e.expect(&["done a"]);
    e.release("a");
    e.expect(&[]);
    e.release("a");
    e.expect(&["free a on w1", "forget a"]);
}

#[test]
fn root_tasks_are_queued_in_priority_order_up_to_the_saturation_limit() {
    let mut e = TestEnv::new();
    e.worker("w1", 2);
    let tasks: Vec<(String, Vec<&str>)> = (0..6).map(|i| (format!("r{i}"), vec![])).collect();
    let t: Vec<(&str, &[&str])> = tasks.iter().map(|(k, d)| (k.as_str(), &d[..])).collect();
    let wanted: Vec<&str> = tasks.iter().map(|(k, _)| k.as_str()).collect();
    e.submit(&t, &wanted);
    e.expect(&["run r0 on w1", "run r1 on w1"]);
    e.finish("r1");
    e.expect(&["done r1", "run r2 on w1"]);
}

#[test]
fn a_seceded_task_frees_its_slot_for_the_tasks_it_waits_on() {
    let mut e =
        TestEnv::with_config(SchedulerConfig { worker_saturation: 1.0, ..SchedulerConfig::default() });
    e.worker("w1", 1);
    e.submit(&[("parent", &[])], &["parent"]);
    e.expect(&["run parent on w1"]);
    // It submits two children: they wait behind it, which would never end.
    e.submit(&[("c1", &[]), ("c2", &[])], &["c1", "c2"]);
    e.expect(&[]);
    e.secede("parent", true);
    e.expect(&["run c1 on w1"]);
    e.finish("c1");
    e.expect(&["done c1", "run c2 on w1"]);
    // Back on its thread: the next root task waits for it again.
    e.secede("parent", false);
    e.submit(&[("c3", &[])], &["c3"]);
    e.finish("c2");
    e.expect(&["done c2"]);
    e.finish("parent");
    e.expect(&["done parent", "run c3 on w1"]);
    assert_eq!(e.state("parent"), Some(TaskState::Memory));
}

#[test]
fn short_root_tasks_queue_deeper_on_workers_and_slow_ones_do_not() {
    let mut e = TestEnv::with_config(SchedulerConfig {
        worker_saturation: 1.0,
        backlog_us: 1000.0,
        ..SchedulerConfig::default()
    });
    e.worker("w1", 1);
    let keys: Vec<String> =
        (0..100).map(|i| format!("fast-{i:09x}")).chain((0..3).map(|i| format!("slow-{i:09x}"))).collect();
    let t: Vec<(&str, &[&str])> = keys.iter().map(|k| (k.as_str(), &[][..])).collect();
    let wanted: Vec<&str> = keys.iter().map(|k| k.as_str()).collect();
    e.submit(&t, &wanted);
    // Nothing measured yet: one task, as Dask.
    assert_eq!(e.take(), [format!("run {} on w1", keys[0])]);
    // 10 µs tasks with 1 ms of backlog: 100 wanted, 64 at most per thread.
    e.finish_with(&keys[0], 8, 10.0);
    let runs = e.take().iter().filter(|a| a.starts_with("run fast")).count();
    assert_eq!(runs, 64);
    // The slow group behind them is unmeasured: it waits for an empty
    // worker instead of being handed out at the fast group's depth.
    let mut slow_started_with = Vec::new();
    for k in &keys[1..100] {
        let busy = e.s.workers()[0].processing;
        e.finish_with(k, 8, 10.0);
        if e.take().iter().any(|a| a.starts_with("run slow")) {
            slow_started_with.push(busy - 1);
        }
    }
    assert_eq!(slow_started_with, [0]);
}

#[test]
fn an_input_that_cannot_be_fetched_is_recomputed_and_its_task_waits_for_it() {
    let mut e = TestEnv::new();
    e.worker("w1", 1);
    e.worker("w2", 1);
    e.submit(&[("a", &[]), ("z", &[]), ("b", &["a", "z"])], &["b"]);
    e.expect(&["run a on w2", "run z on w1"]);
    e.finish_bytes("a", 10);
    e.finish_bytes("z", 10_000);
    e.expect(&["run b on w1"]);
    // w1 cannot get `a` from w2: w2 no longer counts as holding it, `a`
    // runs again, and `b` waits for it instead of failing.
    e.missing("b", "a", &["w2"]);
    assert_eq!(e.state("b"), Some(TaskState::Waiting));
    let acts = e.take();
    assert!(acts.contains(&"free a on w2".to_string()), "{acts:?}");
    assert!(acts.iter().any(|a| a.starts_with("run a on")), "{acts:?}");
    e.finish_bytes("a", 10);
    assert!(e.take().iter().any(|a| a.starts_with("run b on")));
    e.finish("b");
    e.expect(&["done b", "free z on w1", "free a on w1"]);
    assert_eq!(e.state("b"), Some(TaskState::Memory));
}

#[test]
fn an_input_still_held_elsewhere_is_fetched_again_without_recomputing() {
    let mut e = TestEnv::new();
    e.worker("w1", 1);
    e.worker("w2", 1);
    e.submit(&[("a", &[]), ("b", &["a"])], &["b"]);
    e.expect(&["run a on w2"]);
    e.finish("a");
    e.expect(&["run b on w2"]);
    // A worker that names no holder of `a` (a confused report): `b` simply runs again.
    e.missing("b", "a", &[]);
    assert_eq!(e.state("a"), Some(TaskState::Memory));
    let acts = e.take();
    assert_eq!(acts.iter().filter(|a| a.starts_with("run b on")).count(), 1, "{acts:?}");
}

#[test]
fn user_priority_beats_graph_order() {
    let mut e = TestEnv::new();
    e.worker("w1", 1);
    e.submit_annotated(&[("a", &[]), ("b", &[])], &["a", "b"], &[("b", ann(10, 0, &[]))]);
    e.expect(&["run b on w1"]);
}

#[test]
fn tasks_go_where_their_inputs_are() {
    let mut e = TestEnv::new();
    e.worker("w1", 1);
    e.worker("w2", 1);
    e.submit(&[("big", &[]), ("small", &[]), ("c", &["big", "small"])], &["c"]);
    e.expect(&["run big on w2", "run small on w1"]);
    e.finish_bytes("small", 10);
    e.finish_bytes("big", 10_000_000);
    e.expect(&["run c on w2"]);
}

#[test]
fn resource_tasks_run_only_where_the_resource_is_free() {
    let mut e = TestEnv::new();
    e.worker("cpu", 4);
    e.worker_with("gpu", 4, &[("GPU", 1.0)]);
    let gpu = ann(0, 0, &[("GPU", 1.0)]);
    e.submit_annotated(&[("g1", &[]), ("g2", &[])], &["g1", "g2"], &[("g1", gpu.clone()), ("g2", gpu)]);
    e.expect(&["run g1 on gpu"]);
    e.finish("g1");
    e.expect(&["done g1", "run g2 on gpu"]);
}

#[test]
fn restricted_tasks_run_by_priority_across_different_needs() {
    let mut e = TestEnv::new();
    e.worker_with("gpu", 4, &[("GPU", 1.0), ("MEM", 1.0)]);
    // A quarter of the GPU each: four at once; the whole MEM: one.
    let quarter = ann(0, 0, &[("GPU", 0.25)]);
    let urgent = ann(5, 0, &[("MEM", 1.0)]);
    let tasks: Vec<String> = (0..6).map(|i| format!("q{i}")).collect();
    let mut spec: Vec<(&str, &[&str])> = tasks.iter().map(|t| (t.as_str(), &[][..])).collect();
    spec.push(("m1", &[]));
    spec.push(("m2", &[]));
    let mut anns: Vec<(&str, _)> = tasks.iter().map(|t| (t.as_str(), quarter.clone())).collect();
    anns.push(("m1", urgent.clone()));
    anns.push(("m2", urgent));
    let wanted: Vec<&str> = spec.iter().map(|(k, _)| *k).collect();
    e.submit_annotated(&spec, &wanted, &anns);
    // The higher priority first, then four quarters; the rest wait.
    e.expect(&["run m1 on gpu", "run q0 on gpu", "run q1 on gpu", "run q2 on gpu", "run q3 on gpu"]);
    e.finish("q1");
    e.expect(&["done q1", "run q4 on gpu"]);
    e.finish("m1");
    e.expect(&["done m1", "run m2 on gpu"]);
    // The worker offers more GPU later (the local runtime's first GPU graph).
    e.set_resource("gpu", "GPU", 2.0);
    e.expect(&["run q5 on gpu"]);
}

#[test]
fn resource_tasks_wait_for_a_worker_that_has_the_resource() {
    let mut e = TestEnv::new();
    e.worker("cpu", 1);
    e.submit_annotated(&[("g", &[])], &["g"], &[("g", ann(0, 0, &[("GPU", 1.0)]))]);
    e.expect(&[]);
    assert_eq!(e.state("g"), Some(TaskState::Queued));
    e.worker_with("gpu", 1, &[("GPU", 2.0)]);
    e.expect(&["run g on gpu"]);
}

#[test]
fn failures_are_retried_then_propagate_to_dependents() {
    let mut e = TestEnv::new();
    e.worker("w1", 1);
    e.submit_annotated(&[("a", &[]), ("b", &["a"]), ("c", &[])], &["b", "c"], &[("a", ann(0, 1, &[]))]);
    e.expect(&["run a on w1"]);
    e.fail("a", "boom");
    e.expect(&["run a on w1"]);
    e.fail("a", "boom again");
    e.expect(&["erred b: dependency a failed: boom again", "run c on w1"]);
    assert_eq!(e.state("a"), Some(TaskState::Erred));
    e.finish("c");
    e.expect(&["done c"]);
    e.release("b");
    e.expect(&["forget b", "forget a"]);
}

#[test]
fn wanting_a_task_whose_input_failed_reports_the_error_once() {
    let mut e = TestEnv::new();
    e.worker("w1", 1);
    e.submit(&[("a", &[])], &["a"]);
    e.take();
    e.fail("a", "broken");
    e.expect(&["erred a: broken"]);
    e.submit(&[("b", &["a"])], &["b"]);
    e.expect(&["erred b: dependency a failed: broken"]);
}

#[test]
fn a_failing_wanted_task_reports_its_own_error() {
    let mut e = TestEnv::new();
    e.worker("w1", 1);
    e.submit(&[("a", &[])], &["a"]);
    e.take();
    e.fail("a", "bad input");
    e.expect(&["erred a: bad input"]);
    // Wanting it again gives the same error without running it again.
    e.submit(&[("a", &[])], &["a"]);
    e.expect(&["erred a: bad input"]);
}

#[test]
fn releasing_a_running_computation_cancels_and_forgets_it() {
    let mut e = TestEnv::new();
    e.worker("w1", 2);
    e.submit(&[("a", &[]), ("b", &[]), ("c", &["a", "b"])], &["c"]);
    e.expect(&["run a on w1", "run b on w1"]);
    e.finish("a");
    e.expect(&[]);
    e.release("c");
    e.expect(&["cancel b on w1", "free a on w1", "forget c", "forget b", "forget a"]);
    // The late result of the cancelled task is dropped on the worker.
    assert_eq!(e.s.ntasks(), 0);
}

#[test]
fn stale_reports_change_nothing() {
    let mut e = TestEnv::new();
    let w = e.worker("w1", 1);
    e.submit(&[("a", &[])], &["a"]);
    let a = e.id("a");
    e.release("a");
    e.take();
    let mut out = Vec::new();
    e.s.task_finished(w, a, 1, 8, 1.0, &mut out);
    assert_eq!(out, vec![Action::Free { worker: w, task: a }]);
    out.clear();
    e.s.task_failed(w, a, 1, TaskError::user("late"), &mut out);
    assert_eq!(out, vec![Action::Free { worker: w, task: a }], "a late failure frees whatever it left");
    e.s.validate().expect("valid");
}

#[test]
fn a_late_report_of_a_cancelled_attempt_is_not_taken_for_the_new_one() {
    let mut e = TestEnv::new();
    let w = e.worker("w1", 1);
    // `keep` depends on `a`, so `a` stays known (released) after a cancel.
    e.submit(&[("a", &[]), ("keep", &["a"])], &["keep"]);
    e.finish("a");
    e.finish("keep");
    e.take();
    let a = e.id("a");
    let mut out = Vec::new();
    e.s.want(&Key::new("a"), &mut out).expect("known");
    let first = e.s.current_run(a).expect("running");
    e.s.release(a, &mut out);
    e.s.want(&Key::new("a"), &mut out).expect("known");
    let second = e.s.current_run(a).expect("running again");
    assert_ne!(first, second);
    out.clear();
    // The cancelled attempt reports late, as a failure and as a result: both ignored.
    e.s.task_failed(w, a, first, TaskError::cancelled(), &mut out);
    e.s.task_finished(w, a, first, 8, 1.0, &mut out);
    assert_eq!(e.s.state(a), Some(TaskState::Processing));
    assert_eq!(out, vec![Action::Free { worker: w, task: a }, Action::Free { worker: w, task: a }]);
    out.clear();
    e.s.task_finished(w, a, second, 8, 1.0, &mut out);
    assert_eq!(out, vec![Action::Done { task: a }]);
    e.s.validate().expect("valid");
}

#[test]
fn bad_submissions_are_refused_without_changing_state() {
    let mut e = TestEnv::new();
    e.worker("w1", 1);
    let mut out = Vec::new();
    let t = |k: &str, deps: &[&str]| NewTask {
        key: Key::new(k),
        deps: deps.iter().map(|d| Key::new(*d)).collect(),
        order: 0,
        annotations: None,
    };
    let missing = e.s.submit(vec![t("a", &["nope"])], &[Key::new("a")], &mut out);
    assert!(matches!(missing, Err(SchedulerError::MissingDependency { .. })), "{missing:?}");
    let cycle = e.s.submit(vec![t("a", &["b"]), t("b", &["a"])], &[Key::new("a")], &mut out);
    assert!(matches!(cycle, Err(SchedulerError::Cycle(_))), "{cycle:?}");
    let selfdep = e.s.submit(vec![t("a", &["a"])], &[], &mut out);
    assert!(matches!(selfdep, Err(SchedulerError::Cycle(_))));
    let unknown = e.s.submit(vec![], &[Key::new("zzz")], &mut out);
    assert!(matches!(unknown, Err(SchedulerError::UnknownKey(_))));
    assert!(out.is_empty());
    assert_eq!(e.s.ntasks(), 0);
    e.s.validate().expect("valid");
}

#[test]
fn a_lost_worker_results_are_recomputed_from_lineage() {
    let mut e = TestEnv::new();
    e.worker("w1", 1);
    e.worker("w2", 1);
    e.submit(&[("a", &[]), ("b", &["a"]), ("c", &[]), ("d", &["b", "c"])], &["d"]);
    e.expect(&["run a on w2", "run c on w1"]);
    e.finish("a");
    e.expect(&["run b on w2"]);
    e.finish("b");
    e.expect(&["free a on w2"]);
    // w2 dies holding b (a was already freed): b must be recomputed, and a
    // with it, once w1 (busy with c) has a free slot.
    e.kill("w2");
    e.expect(&[]);
    assert_eq!(e.state("b"), Some(TaskState::Waiting));
    assert_eq!(e.state("a"), Some(TaskState::Queued));
    e.finish("c");
    e.expect(&["run a on w1"]);
    e.finish("a");
    e.expect(&["run b on w1"]);
    e.finish("b");
    e.expect(&["run d on w1", "free a on w1"]);
    e.finish("d");
    e.expect(&["done d", "free c on w1", "free b on w1"]);
}

#[test]
fn tasks_running_on_a_dead_worker_move_and_killed_worker_ends_it() {
    let mut e = TestEnv::with_config(SchedulerConfig {
        worker_saturation: 1.0,
        allowed_failures: 1,
        ..SchedulerConfig::default()
    });
    e.worker("w1", 1);
    e.submit(&[("a", &[])], &["a"]);
    e.expect(&["run a on w1"]);
    e.kill("w1");
    e.expect(&[]);
    assert_eq!(e.state("a"), Some(TaskState::Queued));
    e.worker("w2", 1);
    e.expect(&["run a on w2"]);
    e.kill("w2");
    let got = e.take();
    assert_eq!(got.len(), 1);
    assert!(got[0].starts_with("erred a: task a was running on 2 workers that died"), "{got:?}");
}

#[test]
fn a_dependent_running_elsewhere_is_stopped_when_its_input_is_lost() {
    let mut e = TestEnv::new();
    e.worker("w1", 1);
    e.worker("w2", 1);
    e.submit(&[("a", &[]), ("x", &[]), ("b", &["a", "x"])], &["b"]);
    e.expect(&["run a on w2", "run x on w1"]);
    e.finish_bytes("a", 8);
    e.finish_bytes("x", 1_000_000);
    e.expect(&["run b on w1"]);
    e.kill("w2");
    e.expect(&["cancel b on w1", "run a on w1"]);
    assert_eq!(e.state("b"), Some(TaskState::Waiting));
    e.finish("a");
    e.expect(&["run b on w1"]);
}

#[test]
fn deep_chains_submit_cancel_and_forget_without_recursion() {
    let mut e = TestEnv::with_config(SchedulerConfig { story_capacity: 0, ..SchedulerConfig::default() });
    e.worker("w1", 1);
    let n = 100_000;
    let keys: Vec<String> = (0..n).map(|i| format!("t{i}")).collect();
    let deps: Vec<Vec<&str>> =
        (0..n).map(|i| if i == 0 { vec![] } else { vec![keys[i - 1].as_str()] }).collect();
    let tasks: Vec<(&str, &[&str])> = keys.iter().zip(&deps).map(|(k, d)| (k.as_str(), &d[..])).collect();
    let mut out = Vec::new();
    let new = tasks
        .iter()
        .enumerate()
        .map(|(i, (k, d))| NewTask {
            key: Key::new(*k),
            deps: d.iter().map(|x| Key::new(*x)).collect(),
            order: i as u32,
            annotations: None,
        })
        .collect();
    e.s.submit(new, &[Key::new(keys[n - 1].as_str())], &mut out).expect("submit");
    assert_eq!(out.len(), 1);
    let last = e.s.lookup(&Key::new(keys[n - 1].as_str())).expect("known");
    out.clear();
    e.s.release(last, &mut out);
    assert_eq!(e.s.ntasks(), 0);
    assert_eq!(out.iter().filter(|a| matches!(a, Action::Forget { .. })).count(), n);
}

#[test]
fn the_story_records_transitions() {
    let mut e = TestEnv::new();
    e.worker("w1", 1);
    e.submit(&[("a", &[])], &["a"]);
    e.finish("a");
    let story: Vec<(TaskState, TaskState)> =
        e.s.story_of(&Key::new("a")).iter().map(|s| (s.from, s.to)).collect();
    assert_eq!(
        story,
        vec![
            (TaskState::Released, TaskState::Waiting),
            (TaskState::Waiting, TaskState::Queued),
            (TaskState::Queued, TaskState::Processing),
            (TaskState::Processing, TaskState::Memory),
        ]
    );
    let g = &e.s.groups()[0];
    assert_eq!((g.total, g.done, g.in_state(TaskState::Memory)), (1, 1, 1));
}

/// Random graphs, random completion order, random worker deaths and joins:
/// every wanted result must equal direct evaluation and every invariant
/// must hold after every event.
#[test]
fn random_runs_with_worker_deaths_give_exact_results() {
    for seed in 1..=30u64 {
        let mut sim = Sim::new(seed * 7919);
        for _ in 0..1 + sim.rand(4) {
            sim.add_random_worker(3);
        }
        let tasks = sim.random_graph();
        let wanted = sim.random_outputs(tasks.len());
        sim.submit(&tasks, &wanted);
        let mut steps = 0;
        while sim.running() > 0 || sim.live_workers() == 0 {
            steps += 1;
            assert!(steps < 100_000, "seed {seed}: no progress");
            let dice = sim.rand(100);
            if dice < 3 && sim.live_workers() > 0 {
                sim.kill_random_worker();
            } else if dice < 6 || sim.live_workers() == 0 {
                sim.add_random_worker(2);
            } else {
                sim.step();
            }
        }
        check_and_release(&mut sim, &wanted, seed);
    }
}

/// Every wanted key has its exact value; releasing them all leaves nothing.
fn check_and_release(sim: &mut Sim, wanted: &[String], seed: u64) {
    for k in wanted {
        let got = sim.done.get(k).copied();
        assert_eq!(got, Some(sim.expected(k)), "seed {seed}: {k} (erred: {:?})", sim.erred.get(k));
    }
    for k in wanted {
        sim.release(k);
    }
    assert_eq!(sim.env.s.ntasks(), 0, "seed {seed}: tasks left after releasing everything");
}

/// As above, plus transient failures within each task's retries, late
/// duplicate reports, and clients dropping and retaking references
/// mid-run: results must still be exact and every invariant hold.
#[test]
fn random_runs_with_failures_retries_and_churn_give_exact_results() {
    let (mut failures, mut repeats) = (0, 0);
    for seed in 1..=30u64 {
        let mut sim = Sim::new(seed * 104_729);
        for _ in 0..1 + sim.rand(3) {
            sim.add_random_worker(3);
        }
        let tasks = sim.random_graph();
        let mut retries = std::collections::HashMap::new();
        for (k, _) in &tasks {
            if sim.rand(100) < 30 {
                retries.insert(k.clone(), 1 + sim.rand(2) as u32);
            }
        }
        let wanted = sim.random_outputs(tasks.len());
        sim.submit_with_retries(&tasks, &wanted, &retries);
        let mut steps = 0;
        while sim.running() > 0 || sim.live_workers() == 0 {
            steps += 1;
            assert!(steps < 100_000, "seed {seed}: no progress");
            let dice = sim.rand(100);
            if dice < 2 && sim.live_workers() > 0 {
                sim.kill_random_worker();
            } else if dice < 4 || sim.live_workers() == 0 {
                sim.add_random_worker(2);
            } else if dice < 6 {
                let k = wanted[sim.rand(wanted.len())].clone();
                sim.want_and_release(&k);
            } else if dice < 7 {
                // The client drops its last reference and submits the graph again.
                let k = wanted[sim.rand(wanted.len())].clone();
                sim.release(&k);
                sim.done.remove(&k);
                sim.submit_with_retries(&tasks, std::slice::from_ref(&k), &retries);
            } else {
                sim.chaos_step();
            }
        }
        check_and_release(&mut sim, &wanted, seed);
        failures += sim.failures;
        repeats += sim.repeats;
    }
    assert!(failures > 20 && repeats > 20, "chaos happened: {failures} failures, {repeats} repeats");
}

#[test]
fn a_paused_worker_gets_no_new_task_until_it_resumes() {
    let mut e = TestEnv::new();
    e.worker("w1", 1);
    e.worker("w2", 1);
    e.pause("w1", true);
    e.submit(&[("a", &[]), ("b", &["a"]), ("c", &[])], &["b", "c"]);
    // Only w2 takes work: a, then b beside its input, while c waits.
    e.expect(&["run a on w2"]);
    e.finish("a");
    e.expect(&["run b on w2"]);
    e.pause("w2", true);
    e.finish("b");
    // Both are paused: c waits, though both have free threads.
    e.expect(&["done b", "free a on w2"]);
    assert_eq!(e.state("c"), Some(TaskState::Queued));
    e.pause("w1", false);
    e.expect(&["run c on w1"]);
    e.finish("c");
    e.expect(&["done c"]);
}

#[test]
fn a_small_costly_result_gets_a_copy_that_survives_its_worker() {
    let mut e = TestEnv::with_config(SchedulerConfig { replicate_after_us: 1000.0, ..Default::default() });
    e.worker("w1", 1);
    e.submit(&[("a", &[]), ("b", &["a"])], &["b"]);
    e.expect(&["run a on w1"]);
    e.worker("w2", 1);
    // a alone took 600 µs: not worth a copy.
    e.finish_with("a", 8, 600.0);
    e.expect(&["run b on w1"]);
    // b took 600 µs on top of a's: worth one, on the other worker.
    e.finish_with("b", 8, 600.0);
    e.expect(&["done b", "free a on w1", "copy b from w1 to w2"]);
    e.replicated("b", "w2");
    e.expect(&[]);
    e.kill("w1");
    // Nothing is computed again.
    e.expect(&[]);
    assert_eq!(e.state("b"), Some(TaskState::Memory));
    e.release("b");
    e.expect(&["free b on w2", "forget b", "forget a"]);
}

#[test]
fn a_copy_that_arrives_after_its_result_was_freed_is_freed() {
    let mut e = TestEnv::with_config(SchedulerConfig { replicate_after_us: 100.0, ..Default::default() });
    e.worker("w1", 1);
    e.submit(&[("a", &[]), ("c", &["a"])], &["c"]);
    e.expect(&["run a on w1"]);
    e.worker("w2", 1);
    e.finish_with("a", 8, 500.0);
    e.expect(&["run c on w1", "copy a from w1 to w2"]);
    e.finish_with("c", 8, 1.0);
    e.expect(&["done c", "free a on w1", "copy c from w1 to w2"]);
    assert_eq!(e.state("a"), Some(TaskState::Released));
    e.replicated("a", "w2");
    e.expect(&["free a on w2"]);
}

#[test]
fn a_result_pinned_to_its_worker_gets_no_copy_and_is_made_again_when_it_goes() {
    let mut e = TestEnv::with_config(SchedulerConfig { replicate_after_us: 100.0, ..Default::default() });
    e.worker("w1", 1);
    e.submit(&[("split", &[]), ("collect", &["split"])], &["collect"]);
    e.expect(&["run split on w1"]);
    e.worker("w2", 1);
    // A split: its pieces are files on w1, so a copy of its sizes elsewhere
    // would hold none of them.
    let t = e.id("split");
    e.s.pin(t);
    e.finish_with("split", 8, 500.0);
    e.expect(&["run collect on w1"]);
    e.kill("w1");
    e.expect(&["run split on w2"]);
}

#[test]
fn workers_that_close_on_purpose_do_not_count_toward_killed_worker() {
    let mut e = TestEnv::with_config(SchedulerConfig { allowed_failures: 1, ..Default::default() });
    e.worker("w1", 1);
    e.submit(&[("a", &[])], &["a"]);
    e.expect(&["run a on w1"]);
    for (closing, next) in [("w1", "w2"), ("w2", "w3"), ("w3", "w4")] {
        e.worker(next, 1);
        e.expect(&[]);
        e.close(closing);
        e.expect(&[&format!("run a on {next}")]);
    }
    // A death counts: one is allowed, the second fails it.
    e.kill("w4");
    e.worker("w5", 1);
    e.expect(&["run a on w5"]);
    e.kill("w5");
    e.expect(&["erred a: task a was running on 2 workers that died (allowed failures: 1)"]);
}

#[test]
fn a_retiring_worker_hands_its_results_over_and_its_tasks_move_before_it_goes() {
    let mut e = TestEnv::new();
    e.worker("w1", 1);
    e.submit(&[("a", &[]), ("b", &[]), ("c", &["a", "b"])], &["c"]);
    e.expect(&["run a on w1"]);
    e.finish("a");
    e.expect(&["run b on w1"]);
    e.worker("w2", 1);
    let w1 = e.wid("w1");
    e.retire("w1");
    // b moves to w2; a, needed by c and only on w1, is copied there.
    e.expect(&["cancel b on w1", "copy a from w1 to w2", "run b on w2"]);
    assert!(!e.s.retired(w1));
    e.replicated("a", "w2");
    assert!(e.s.retired(w1));
    e.close("w1");
    // Nothing is computed again: c runs on w2 once b is there.
    e.expect(&[]);
    e.finish("b");
    e.expect(&["run c on w2"]);
}
