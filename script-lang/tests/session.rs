//! Session-level tests: delayed and futures semantics, errors, cancellation,
//! and shipping a closure to another process.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use brisk_engine::CancelToken;
use brisk_engine::Value;
use brisk_engine::runner::{TaskContext, UdfRunner};
use brisk_script::{ErrorKind, Session};
use common::json;

/// A session whose `print` output is collected.
fn session() -> (Session, Arc<Mutex<Vec<String>>>) {
    let s = Session::new();
    let out = Arc::new(Mutex::new(Vec::new()));
    let sink = out.clone();
    s.set_output(Arc::new(move |line: &str| sink.lock().expect("sink").push(line.to_string())));
    (s, out)
}

fn eval_ok(s: &mut Session, text: &str) -> rhai::Dynamic {
    match s.eval_value(text, "<test>") {
        Ok(v) => v,
        Err(e) => panic!("{text}\nfailed: {e}"),
    }
}

/// Evaluate `text`, interrupting it after `after` as Ctrl-C would; the
/// evaluation must end as interrupted within a few seconds.
fn eval_interrupted_after(s: &mut Session, text: &str, after: Duration) {
    let cancel: CancelToken = s.cancel_token();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(after);
        cancel.cancel();
    });
    let t0 = Instant::now();
    let r = s.eval_value(text, "<test>");
    stopper.join().expect("join");
    let e = r.expect_err("interrupted");
    assert_eq!(e.kind, ErrorKind::Cancelled, "{e}");
    assert!(t0.elapsed() < Duration::from_secs(5), "took {:?}", t0.elapsed());
}

/// Wait (up to 5 s) until the runtime has no running task and holds nothing.
fn wait_until_drained(s: &Session) {
    let rt = s.state().client();
    let deadline = Instant::now() + Duration::from_secs(5);
    while (rt.snapshot().busy_threads > 0 || rt.snapshot().tasks_held > 0) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(rt.snapshot().busy_threads, 0, "a task is still running");
    assert_eq!(rt.snapshot().tasks_held, 0, "the runtime still holds tasks");
}

#[test]
fn variables_and_functions_live_across_inputs() {
    let (mut s, _) = session();
    let _ = eval_ok(&mut s, "fn inc(x) { x + 1 }");
    let _ = eval_ok(&mut s, "let k = 10;");
    // A closure defined in a later input calls a function of an earlier one.
    let v = eval_ok(&mut s, "delayed(|x| inc(x) * k).call(1).compute()");
    assert_eq!(v.as_int().ok(), Some(20));
}

#[test]
fn shared_sub_expressions_run_once() {
    let (mut s, _) = session();
    let _ = eval_ok(&mut s, "let x = delayed(|v| v * 2).call(21); let a = x + 1; let b = x - 1;");
    let v = eval_ok(&mut s, "compute(a, b)");
    assert_eq!(json(&v, "r"), "[43,41]");
    let groups = s.state().client().snapshot().groups;
    let lambda = groups.iter().find(|g| &*g.name == "lambda").expect("lambda group");
    assert_eq!(lambda.total, 1, "x was computed once for both results");
}

#[test]
fn the_same_expression_built_twice_has_the_same_key() {
    let (mut s, _) = session();
    let _ = eval_ok(&mut s, "fn inc(x) { x + 1 }");
    let v = eval_ok(
        &mut s,
        "delayed(inc).call(1).key == delayed(inc).call(1).key && delayed(inc).call(1).key != delayed(inc).call(2).key",
    );
    assert_eq!(v.as_bool().ok(), Some(true));
}

#[test]
fn keys_stay_equal_across_inputs_until_the_function_changes() {
    let (mut s, _) = session();
    let _ = eval_ok(&mut s, "fn inc(x) { x + 1 }");
    let _ = eval_ok(&mut s, "let a = delayed(inc).call(1).key;");
    let _ = eval_ok(&mut s, "let b = delayed(inc).call(1).key;");
    assert_eq!(eval_ok(&mut s, "a == b").as_bool().ok(), Some(true));
    let _ = eval_ok(&mut s, "fn inc(x) { x + 2 }");
    assert_eq!(eval_ok(&mut s, "delayed(inc).call(1).key != a").as_bool().ok(), Some(true));
    assert_eq!(eval_ok(&mut s, "delayed(inc).call(1).compute()").as_int().ok(), Some(3));
}

#[test]
fn futures_report_status_and_cancel() {
    let (mut s, out) = session();
    let _ = eval_ok(
        &mut s,
        r#"
        let f = submit(|x| x + 1, 1);
        print(f.result());
        print(f.status);
        print(f.done());
        let slow = submit(|x| { let i = 0; while true { i += 1; } i }, 1);
        slow.cancel();
        print(slow.status);
        try { slow.result(); } catch (e) { print(e); }
        "#,
    );
    let lines = out.lock().expect("out").clone();
    assert_eq!(lines[..3], ["2", "finished", "true"]);
    assert_eq!(lines[3], "cancelled");
    assert!(lines[4].starts_with("future lambda-") && lines[4].ends_with("was cancelled"), "{lines:?}");
    // The spinning task was stopped: once the futures are gone, nothing is left.
    let _ = eval_ok(&mut s, "f = (); slow = ();");
    wait_until_drained(&s);
}

#[test]
fn interrupting_a_compute_keeps_the_session_usable() {
    let (mut s, _) = session();
    let spin = "delayed(|x| { let i = 0; while true { i += 1; } i }).call(1).compute()";
    eval_interrupted_after(&mut s, spin, Duration::from_millis(200));
    let v = eval_ok(&mut s, "delayed(|x| x * 3).call(5).compute()");
    assert_eq!(v.as_int().ok(), Some(15));
    wait_until_drained(&s);
}

#[test]
fn interrupting_a_sync_compute_stops_the_running_task() {
    let (mut s, _) = session();
    let _ = eval_ok(&mut s, r#"config(#{scheduler: "sync"})"#);
    let spin = "delayed(|x| { let i = 0; while true { i += 1; } i }).call(1).compute()";
    eval_interrupted_after(&mut s, spin, Duration::from_millis(200));
    assert_eq!(eval_ok(&mut s, "delayed(|x| x + 1).call(1).compute()").as_int().ok(), Some(2));
    wait_until_drained(&s);
}

#[test]
fn an_interrupt_also_stops_a_plain_script_loop() {
    let (mut s, _) = session();
    eval_interrupted_after(&mut s, "let i = 0; while true { i += 1; }", Duration::from_millis(100));
    assert_eq!(eval_ok(&mut s, "1 + 1").as_int().ok(), Some(2));
}

#[test]
fn retries_end_with_the_error_of_a_deterministic_failure() {
    let (mut s, _) = session();
    // Retried twice, failing each time: the compute ends with the error.
    let e = s
        .eval_value("annotate(#{retries: 2}, || delayed(|x| x / 0).call(1)).compute()", "<t>")
        .expect_err("fails");
    assert_eq!(e.kind, ErrorKind::Task);
    assert!(e.message.contains("Division by zero"), "{e}");
}

#[test]
fn sync_scheduler_runs_futures_when_waited_on() {
    let (mut s, _) = session();
    let _ = eval_ok(&mut s, r#"config(#{scheduler: "sync"})"#);
    let v = eval_ok(
        &mut s,
        "let fs = map(|x| x * x, [1, 2, 3]); let t = submit(|v| v.len(), fs); gather(fs) + [t.result()]",
    );
    assert_eq!(json(&v, "r"), "[1,4,9,3]");
}

/// The shipped form of a closure, written by the parent process.
const SHIP_ENV: &str = "BRISK_TEST_SHIPPED_UDF";

/// Ship a closure (capturing a value, calling a function from an earlier
/// input) to a second process, which compiles the chunks itself and runs it.
#[test]
fn a_closure_runs_the_same_in_another_process() {
    let (mut s, _) = session();
    let _ = eval_ok(&mut s, "fn offset(x) { x + 0.5 }");
    let _ = eval_ok(&mut s, "let k = 10; let f = |x| offset(x * k);");
    let f = s.scope().get_value::<rhai::FnPtr>("f").expect("f is a closure");
    let udf = brisk_script::ship::ship(&f, s.state().code()).expect("ship");
    let bytes = rmp_serde::to_vec(&udf).expect("encode");
    let dir = std::env::temp_dir().join(format!("brisk-ship-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("udf.msgpack");
    std::fs::write(&path, bytes).expect("write");
    let exe = std::env::current_exe().expect("test binary");
    let out = std::process::Command::new(exe)
        .args(["--exact", "ship_child", "--nocapture", "--test-threads=1"])
        .env(SHIP_ENV, &path)
        .output()
        .expect("child");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "child failed: {text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("RESULT 40.5"), "{text}");
}

/// The child side of the test above; does nothing in a normal test run.
#[test]
fn ship_child() {
    let Some(path) = std::env::var_os(SHIP_ENV) else { return };
    brisk_script::ship::init();
    let bytes = std::fs::read(path).expect("read");
    let udf: brisk_engine::runner::Udf = rmp_serde::from_slice(&bytes).expect("decode");
    let runner = brisk_script::ship::RhaiUdfs::new(brisk_script::api::worker_engine);
    let key = brisk_engine::Key::new("t");
    let cancelled = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let ctx = TaskContext::new(&key, &cancelled);
    let v = runner.call(&udf, vec![Value::Int(4)], &ctx).expect("runs");
    println!("RESULT {v}");
}

#[test]
fn closures_that_capture_lazy_values_are_refused_at_submit() {
    let (mut s, _) = session();
    let e = s.eval_value("let d = delayed(|x| x).call(1); submit(|x| x + d, 1)", "<t>").expect_err("refused");
    assert!(e.message.contains("captured value #1 of closure 'lambda' is a value of type Delayed"), "{e}");
}

#[test]
fn gather_passes_plain_values_through() {
    let (mut s, _) = session();
    let v = eval_ok(&mut s, "[gather(5), gather([1, submit(|x| x, 2)])]");
    assert_eq!(json(&v, "r"), "[5,[1,2]]");
}

#[test]
fn scatter_splits_one_level_of_an_array() {
    let (mut s, _) = session();
    let v = eval_ok(&mut s, "let fs = scatter([1, [2, 3]]); [fs.len(), fs[0].status, gather(fs)]");
    assert_eq!(json(&v, "r"), r#"[2,"finished",[1,[2,3]]]"#);
}

#[test]
fn persisted_values_are_reused_not_recomputed() {
    let (mut s, _) = session();
    let _ = eval_ok(&mut s, "let x = delayed(|v| v * 2).call(21).persist();");
    let v = eval_ok(&mut s, "compute(x + 1, x - 1) + [x.compute()]");
    assert_eq!(json(&v, "r"), "[43,41,42]");
    let groups = s.state().client().snapshot().groups;
    let lambda = groups.iter().find(|g| &*g.name == "lambda").expect("lambda group");
    assert_eq!((lambda.total, lambda.done), (1, 1), "the persisted task ran once");
    // Dropping the persisted value releases it.
    let _ = eval_ok(&mut s, "x = ();");
    assert_eq!(s.state().client().snapshot().tasks_held, 0);
}

#[test]
fn visualize_writes_graphviz_and_refuses_unknown_files() {
    let (mut s, _) = session();
    let dir = std::env::temp_dir().join(format!("brisk-viz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("g.dot");
    let _ = eval_ok(&mut s, "fn inc(x) { x + 1 } let d = delayed(inc).call(delayed(inc).call(1));");
    let _ = eval_ok(&mut s, &format!("d.visualize({:?})", path.display().to_string()));
    let dot = std::fs::read_to_string(&path).expect("written");
    assert!(
        dot.starts_with("digraph {") && dot.matches("[shape=circle, label=\"inc\"]").count() == 2,
        "{dot}"
    );
    let e = s.eval_value("d.visualize(\"g.txt\")", "<t>").expect_err("bad extension");
    assert!(e.message.contains("unknown file type \"txt\""), "{e}");
    let e = s.eval_value("d.visualize(\"/nonexistent-dir/g.dot\")", "<t>").expect_err("unwritable");
    assert!(e.message.contains("cannot write /nonexistent-dir/g.dot"), "{e}");
    let info = eval_ok(&mut s, "d.graph_info()");
    assert_eq!(json(&info, "r"), r#"{"bytes":null,"layers":2,"literal_bytes":24,"tasks":2}"#);
    let info = eval_ok(&mut s, "zeros([100, 30], #{chunks: 10}).graph_info()");
    assert_eq!(json(&info, "r"), r#"{"bytes":24000,"layers":1,"literal_bytes":0,"tasks":30}"#);
}

/// Every example in the API reference runs in a fresh session; those that
/// start or join a cluster need the brisk binary, a scheduler or SLURM, and
/// run in `tests/cluster.rs` and `tests/slurm.rs` instead.
#[test]
fn every_documented_example_runs() {
    const NEED_A_CLUSTER: &[&str] =
        &["local_cluster", "local_cuda_cluster", "connect", "scale", "close", "dashboard_link"];
    let deployed = |example: &str| {
        ["slurm_cluster", "jobqueue_cluster", "cluster.", "kube_cluster", "k.add_worker_group"]
            .iter()
            .any(|c| example.contains(c))
    };
    // GPU examples run where there is a GPU (scripts/gpu-tests.sh).
    let gpu = brisk_engine::array::gpu::default_device().is_ok();
    let needs_gpu = |example: &str| example.contains("to_gpu") || example.contains("\"gpu\"");
    for d in brisk_script::api::docs::all().filter(|d| {
        !NEED_A_CLUSTER.contains(&d.name) && !deployed(d.example) && (gpu || !needs_gpu(d.example))
    }) {
        let (mut s, _) = session();
        if let Err(e) = s.eval_value(d.example, &format!("<example of {}>", d.name)) {
            panic!("the example of {} fails: {e}\n{}", d.name, d.example);
        }
    }
}

/// Every function the session registers is in the API reference, and
/// every entry names something that exists.
#[test]
fn every_registered_function_is_documented() {
    let (s, _) = session();
    let sigs = s.engine().gen_fn_signatures(false);
    let mut names: Vec<String> = sigs
        .iter()
        .filter_map(|sig| sig.split('(').next())
        .map(|n| n.trim_start_matches("get$").to_string())
        .filter(|n| n.chars().next().is_some_and(|c| c.is_ascii_alphabetic()))
        // `blob` and `pad` are Rhai's own, registered again with a memory check.
        .filter(|n| {
            !n.contains('$')
                && !matches!(
                    n.as_str(),
                    "to_string" | "to_debug" | "delayed_call" | "message" | "blob" | "pad"
                )
        })
        .collect();
    names.sort();
    names.dedup();
    let missing: Vec<&String> =
        names.iter().filter(|n| brisk_script::api::docs::lookup(n).is_none()).collect();
    assert!(missing.is_empty(), "registered but not documented: {missing:?}");
    for d in brisk_script::api::docs::all() {
        assert!(names.iter().any(|n| n == d.name), "documented but not registered: {}", d.name);
    }
    assert!(brisk_script::api::docs::help("submit").is_some_and(|h| h.contains("Example:")));
}

#[test]
fn completion_knows_api_variables_methods_and_options() {
    let (mut s, _) = session();
    let _ = eval_ok(
        &mut s,
        "fn twice(x) { x * 2 } let total = 5; let fut = submit(|x| x, 1); let d = delayed(|x| x).call(1);",
    );
    let c = s.complete("tot", 3);
    assert_eq!((c.start, c.candidates.clone()), (0, vec!["total".to_string()]));
    assert!(s.complete("twi", 3).candidates.contains(&"twice".to_string()));
    assert!(s.complete("let x = gat", 11).candidates.contains(&"gather".to_string()));
    let m = s.complete("fut.re", 6);
    assert_eq!(m.start, 4);
    assert!(m.candidates.contains(&"result".to_string()), "{m:?}");
    let m = s.complete("fut.", 4).candidates;
    assert!(m.contains(&"status".to_string()) && m.contains(&"cancel".to_string()), "{m:?}");
    assert!(!m.contains(&"persist".to_string()), "persist is a Delayed method, not a Future one: {m:?}");
    assert!(s.complete("d.", 2).candidates.contains(&"persist".to_string()));
    let o = s.complete("config(#{sch", 12);
    assert_eq!(o.candidates, vec!["scheduler".to_string()]);
}

#[test]
fn an_error_inside_a_function_points_into_the_input_that_defines_it() {
    let (mut s, _) = session();
    let _ = s.eval_value("let a = 1;\nfn bad(x) {\n    x.nope()\n}", "<input 1>").expect("defines");
    let e = s.eval_value("bad(1)", "<input 2>").expect_err("fails");
    assert_eq!((e.origin.as_str(), e.line, e.column), ("<input 1>", Some(3), Some(7)), "{e}");
}

/// The collection protocol: `persist()` on every kind of collection gives
/// the same kind back, backed by results the client holds. Later graphs
/// read those results (the persisted tasks run once), the answers stay the
/// same, and dropping the collection releases everything.
#[test]
fn every_collection_persists_to_the_same_kind() {
    let (mut s, _) = session();
    let script = r#"
        let b = from_sequence([1, 2, 3, 4, 5, 6], #{npartitions: 3}).map(|x| x * 10);
        let df = from_columns(#{x: [1, 2, 3, 4, 5, 6], y: [6, 5, 4, 3, 2, 1]}, #{npartitions: 2});
        let f = df.map_partitions(|p| p);
        let kinds = [];
        let pb = b.persist();
        let pf = f.persist();
        let ps = (f["x"] + f["y"]).persist();
        let pd = delayed(|v| v * 2).call(21).persist();
        let pa = arange(0, 10, 1, #{chunks: 5}).persist();
        for v in [pb, pf, ps, pd, pa] { kinds.push(type_of(v)); }
        kinds
    "#;
    let kinds = eval_ok(&mut s, script);
    assert_eq!(json(&kinds, "kinds"), r#"["Bag","DataFrame","Series","Delayed","Array"]"#);
    let before = s.state().client().snapshot().groups;
    let total = |groups: &[brisk_engine::diagnostics::GroupProgress], name: &str| {
        groups.iter().filter(|g| &*g.name == name).map(|g| g.total).sum::<u64>()
    };
    let (map_runs, part_runs) = (total(&before, "map"), total(&before, "map_partitions"));
    assert_eq!((map_runs, part_runs), (3, 2), "each partition ran once: {before:?}");
    let v = eval_ok(
        &mut s,
        r#"[pb.sum().compute(), pb.count().compute(), pf["x"].sum().compute(), ps.max().compute(),
            pf.compute().num_rows(), pd.compute(), pa.sum().compute(), (pa * 2).sum().compute()]"#,
    );
    assert_eq!(json(&v, "results"), "[210,6,21,7,6,42,45,90]");
    let after = s.state().client().snapshot().groups;
    assert_eq!(
        (total(&after, "map"), total(&after, "map_partitions")),
        (map_runs, part_runs),
        "computing persisted collections did not run their tasks again"
    );
    let _ = eval_ok(&mut s, "pb = (); pf = (); ps = (); pd = (); pa = (); b = (); f = (); df = ();");
    wait_until_drained(&s);
}

/// Front ends show what an input gave through `Outcome`, without Rhai types:
/// nothing for a statement, text for a value, and HTML too for a table.
#[test]
fn eval_gives_an_outcome_front_ends_render() {
    let (mut s, _) = session();
    let stmt = s.eval("let x = 40;", "<test>").expect("statement");
    assert!(stmt.is_empty() && stmt.text().is_none() && stmt.rendered().is_none());
    let v = s.eval("x + 2", "<test>").expect("value");
    assert_eq!(v.text().as_deref(), Some("42"));
    assert_eq!(v.rendered().map(|r| (r.plain, r.html)), Some(("42".to_string(), None)));
    let t = s.eval("[#{a: 1, b: \"x\"}, #{a: 2, b: \"y\"}]", "<test>").expect("records");
    let r = t.rendered().expect("a table");
    assert!(r.plain.contains('a') && r.plain.contains('y'), "{}", r.plain);
    assert!(r.html.is_some_and(|h| h.contains("<table")), "records render as an HTML table");
    assert_eq!(s.eval("x", "<test>").expect("x").into_value().as_int().ok(), Some(40));
}

/// What is built on a persisted collection keeps its results alive after
/// the persisted collection itself is dropped, and releases them after.
#[test]
fn collections_built_on_persisted_ones_keep_their_results() {
    let (mut s, _) = session();
    let _ = eval_ok(
        &mut s,
        r#"
        let p = from_sequence([1, 2, 3, 4], #{npartitions: 2}).map(|x| x * 10).persist();
        let q = p.map(|x| x + 1);
        let a = arange(0, 6, 1, #{chunks: 2}).persist();
        let b = a * 2;
        p = (); a = ();
        "#,
    );
    let runs = |s: &Session| {
        s.state()
            .client()
            .snapshot()
            .groups
            .iter()
            .filter(|g| &*g.name == "map")
            .map(|g| g.total)
            .sum::<u64>()
    };
    let before = runs(&s);
    let v = eval_ok(&mut s, "[q.sum().compute(), b.sum().compute()]");
    assert_eq!(json(&v, "sums"), "[104,30]");
    // q's own map runs inside its sum's tasks (bag stages fuse into the next
    // task), so a "map" task now would be the persisted one running again.
    assert_eq!(runs(&s), before, "the persisted map did not run again");
    let _ = eval_ok(&mut s, "q = (); b = ();");
    wait_until_drained(&s);
}

/// A call with the wrong number of arguments says how many the function
/// takes, for script functions, closures, the API and Rhai's own functions,
/// called plainly or as methods; a name that exists nowhere is still
/// "Function not found".
#[test]
fn a_wrong_number_of_arguments_is_said_so() {
    let (mut s, _) = session();
    let _ = eval_ok(&mut s, "fn f(a, b) { a + b }\nfn g(x) { this + x }\nlet h = |x| x;");
    let cases = [
        ("f(1, 2, 3)", "f takes 2 arguments (fn f(a, b)), called with 3"),
        ("f()", "f takes 2 arguments (fn f(a, b)), called with 0"),
        ("1.g(2, 3)", "g takes 1 argument (fn g(x)), called with 2"),
        ("h.call(1, 2)", "this closure takes 1 argument, called with 2"),
        (
            "from_array()",
            "from_array takes 1 or 2 arguments (from_array(data, #{chunks, dtype}) -> Array), called with 0",
        ),
        ("to_json(1, 2, 3, 4)", "to_json takes 1 to 3 arguments (to_json(value) -> string), called with 4"),
        ("\"abc\".sub_string()", "sub_string takes 1 or 2 arguments, called with 0"),
        ("[1, 2].len(3)", "len takes 0 arguments (len(x) -> int), called with 1"),
        ("no_such_fn(1)", "Function not found: no_such_fn (i64)"),
        ("f(\"a\", 1).len(1, 2, 3)", "len takes 0 arguments (len(x) -> int), called with 3"),
    ];
    for (code, expected) in cases {
        let e = s.eval_value(code, "<test>").expect_err(code);
        assert_eq!(e.kind, ErrorKind::Runtime, "{code}: {e}");
        assert_eq!(e.message, expected, "{code}");
    }
    // A function defined in an earlier input is found there too.
    let e = s.eval_value("let r = f(1);", "<later>").expect_err("arity");
    assert_eq!(e.message, "f takes 2 arguments (fn f(a, b)), called with 1");
}

#[test]
fn the_local_scheduler_says_it_keeps_no_story() {
    let (mut s, _) = session();
    let e =
        s.eval_value("let f = submit(|x| x + 1, 1); f.result(); f.story()", "<test>").expect_err("no story");
    assert!(e.to_string().contains("keeps no story"), "{e}");
}

#[test]
fn a_timeout_stops_a_running_closure_and_frees_its_thread() {
    let (mut s, out) = session();
    let _ = eval_ok(&mut s, "config(#{num_workers: 1});");
    let start = Instant::now();
    let v = eval_ok(
        &mut s,
        r#"
fn forever(x) { let s = 0; while true { s += 1; } x }
let f = annotate(#{timeout: "200ms"}, || submit(forever, 1));
let msg = "no timeout";
try { f.result(); } catch (e) { msg = e.message; }
print(msg);
submit(|x| x + 1, 1).result()
"#,
    );
    assert_eq!(v.as_int().ok(), Some(2));
    assert!(start.elapsed() < Duration::from_secs(20), "took {:?}", start.elapsed());
    let lines = out.lock().expect("out").clone();
    assert!(lines[0].contains("ran longer than its timeout of 200ms"), "{lines:?}");
    for (bad, says) in [("\"soon\"", "not a duration"), ("-1", "positive"), ("[1]", "timeout must be")] {
        let e = s.eval_value(&format!("annotate(#{{timeout: {bad}}}, || 1)"), "<test>").expect_err(bad);
        assert!(e.to_string().contains(says), "{bad}: {e}");
    }
}

#[test]
fn coordination_waits_stop_on_an_interrupt_in_the_session_and_in_a_sync_task() {
    let (mut s, _) = session();
    eval_interrupted_after(&mut s, r#"Queue("never").get()"#, Duration::from_millis(200));
    eval_interrupted_after(&mut s, r#"Lock("l").acquire(); Lock("l").acquire()"#, Duration::from_millis(200));
    // A task that waits inline (sync mode) stops too, and nothing waits on.
    let _ = eval_ok(&mut s, r#"config(#{scheduler: "sync"})"#);
    eval_interrupted_after(
        &mut s,
        r#"submit(|| Event("never").wait()).result()"#,
        Duration::from_millis(200),
    );
    // What a task's Lock or Semaphore holds is freed when it ends, even failed.
    let _ = eval_ok(&mut s, r#"config(#{scheduler: "threads"})"#);
    let freed = r#"try { submit(|| { Lock("h").acquire(); throw "boom" }).result() } catch { }
submit(|| { Semaphore(1, "one").acquire() }).result();
[Lock("h").acquire(#{timeout: 2}), Semaphore(1, "one").acquire(#{timeout: 2})]"#;
    assert_eq!(json(&eval_ok(&mut s, freed), "freed"), "[true,true]");
    let _ = eval_ok(&mut s, r#"config(#{scheduler: "sync"})"#);
    let _ = eval_ok(&mut s, r#"Queue("q").put(5)"#);
    assert_eq!(eval_ok(&mut s, r#"submit(|| Queue("q").get()).result()"#).as_int().ok(), Some(5));
    wait_until_drained(&s);
}

#[test]
fn coordination_refuses_bad_input_with_clear_errors() {
    let (mut s, _) = session();
    for (bad, says) in [
        (r#"Variable("")"#, "Variable expects a non-empty name"),
        ("Variable(1)", "Variable expects a non-empty name"),
        (r#"Queue("q", #{maxsize: -1})"#, "maxsize is a whole number, 0 or more"),
        (r#"Queue("q", #{size: 1})"#, "has no option"),
        (r#"Semaphore(0, "s")"#, "max_leases is a whole number, 1 or more"),
        (r#"Semaphore(#{max_leases: 2})"#, "Semaphore expects a non-empty name"),
        (r#"Queue("q").get(#{timeout: -1})"#, "timeout is a number of seconds"),
        (r#"Queue("q").get(#{batch: "x"})"#, "batch is true, false or a whole number"),
        (r#"Lock("l").acquire(#{blocking: 1})"#, "blocking is true or false"),
        (r#"submit(|l| l.acquire(), Lock("l"))"#, "make it by name inside the closure"),
        (r#"Variable("unset").get(#{timeout: 0.05})"#, "Variable.get 'unset': timed out"),
        (r#"Lock("l").release()"#, "not held by this Lock"),
        (r#"Semaphore(1, "s").release()"#, "holds no lease"),
        (r#"Semaphore(1, "t").acquire(); Semaphore(2, "t").acquire()"#, "exists with max_leases=1, not 2"),
        (r#"publish_dataset("", 1)"#, "non-empty name"),
        ("publish_dataset(#{})", "give a name and a value"),
        (r#"get_dataset("nothing")"#, "no dataset named 'nothing' is published"),
        (r#"Variable("y").set(|x| x)"#, "cannot be sent to a worker"),
    ] {
        let e = s.eval_value(bad, "<test>").expect_err(bad);
        assert!(e.to_string().contains(says), "{bad}: {e}");
    }
    // A lazy collection is computed when published or set from the session.
    let v = eval_ok(
        &mut s,
        r#"publish_dataset("d", from_sequence([1, 2, 3], #{npartitions: 2}).map(|x| x * 2)); get_dataset("d")"#,
    );
    assert_eq!(json(&v, "d"), "[2,4,6]");
}

/// Worker threads of this process (`brisk-worker-*`), from /proc.
fn worker_threads() -> usize {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else { return 0 };
    dir.filter_map(Result::ok)
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .filter(|name| name.starts_with("brisk-worker"))
        .count()
}

#[test]
fn tasks_that_wait_on_tasks_they_submitted_lend_their_threads_and_the_pool_shrinks_back() {
    let (mut s, _) = session();
    let _ = eval_ok(&mut s, "config(#{num_workers: 2});");
    let base = worker_threads();
    let v = eval_ok(
        &mut s,
        r#"
fn fib(n) { if n < 2 { return n } let c = get_client(); c.submit(fib, n - 1).result() + c.submit(fib, n - 2).result() }
submit(fib, 9).result()
"#,
    );
    assert_eq!(v.as_int().ok(), Some(34));
    wait_until_drained(&s);
    // Threads lent to waiting tasks leave once those tasks are done.
    let deadline = Instant::now() + Duration::from_secs(5);
    while worker_threads() > base && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(worker_threads() <= base, "{} worker threads, {base} before", worker_threads());
    // Inline (sync mode), a waiting task runs its children itself.
    let _ = eval_ok(&mut s, r#"config(#{scheduler: "sync"})"#);
    let v = eval_ok(&mut s, "submit(fib, 8).result()");
    assert_eq!(v.as_int().ok(), Some(21));
    let _ = eval_ok(&mut s, r#"config(#{scheduler: "threads", num_workers: 2})"#);
    // A task waiting on a child that never ends stops on an interrupt.
    eval_interrupted_after(
        &mut s,
        r#"submit(|| get_client().submit(|| Event("never").wait()).result()).result()"#,
        Duration::from_millis(300),
    );
    for (bad, says) in [
        ("secede()", "only inside a task"),
        ("worker_client()", "only inside a task"),
        ("Lock(\"x\").acquire(#{blocking: false, timeout: 1})", "a timeout is for a blocking acquire"),
        ("submit(|| get_client().submit(|l| 1, Lock(\"l\"))).result()", "make it by name"),
    ] {
        let e = s.eval_value(bad, "<test>").expect_err(bad);
        assert!(e.to_string().contains(says), "{bad}: {e}");
    }
}
