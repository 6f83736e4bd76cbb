//! Futures (distributed's `Client.submit/map/gather/scatter`, `wait`,
//! `as_completed`): work that starts now and is fetched later.

use std::sync::{Arc, Mutex};

use brisk_engine::client::{AsCompleted, Status};
use brisk_engine::graph::{Task, materialize};
use brisk_engine::{Future, Graph, Key};
use rhai::{Array, Dynamic, Engine, EvalAltResult, FnPtr, Map};

use super::args::wrong_type;
use super::delayed::{call_task, call_task_salted};
use super::fndoc::{FnDoc, doc};
use crate::collection::compute_all;
use crate::convert::to_dynamic;
use crate::error::{engine_error, runtime};
use crate::state::SessionState;
use crate::types::{AsCompletedIter, Client, DelayedFn, RFuture, type_name};

type Res<T> = Result<T, Box<EvalAltResult>>;

fn submit_call(state: &SessionState, f: &FnPtr, args: &[Dynamic]) -> Res<RFuture> {
    let df = DelayedFn::from_fn_ptr(state, f)?;
    let d = call_task(state, &df.func, &df.label, args)?;
    let graph = materialize(std::slice::from_ref(&d.layer));
    let mut futs = state.submit(graph, std::slice::from_ref(&d.key))?;
    futs.pop().map(RFuture).ok_or_else(|| runtime("submit returned no future"))
}

/// `run_command(argv, #{env, cwd, resources, timeout})`: an external
/// program as a task (`Builtin::RunCommand` runs it). Where it runs and for
/// how long are annotations, as `annotate` gives them; each call is a new
/// task, since a program has effects.
fn run_command(state: &SessionState, argv: Dynamic, opts: Map) -> Res<RFuture> {
    let mut call = Map::new();
    let mut placed = Map::new();
    for (k, v) in opts {
        match k.as_str() {
            "env" | "cwd" => call.insert(k, v),
            "resources" | "timeout" => placed.insert(k, v),
            other => {
                return Err(runtime(format!(
                    "run_command: unknown option '{other}' (env, cwd, resources, timeout)"
                )));
            }
        };
    }
    // Unique across calls and across clients of one scheduler.
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    static BORN: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let born = *BORN.get_or_init(|| {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        t.as_nanos() as u64 ^ (u64::from(std::process::id()) << 32)
    });
    let salt = born.wrapping_add(CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    state.push_annotations(crate::state::annotations(&placed)?);
    let func = brisk_engine::ops::Func::Builtin(brisk_engine::ops::Builtin::RunCommand);
    let d = call_task_salted(state, &func, "run_command", &[argv, Dynamic::from_map(call)], Some(salt));
    state.pop_annotations();
    let d = d?;
    let graph = materialize(std::slice::from_ref(&d.layer));
    let mut futs = state.submit(graph, std::slice::from_ref(&d.key))?;
    futs.pop().map(RFuture).ok_or_else(|| runtime("run_command returned no future"))
}

/// One task per element, submitted as one graph.
fn map_call(state: &SessionState, f: &FnPtr, items: &[Array]) -> Res<Array> {
    let df = DelayedFn::from_fn_ptr(state, f)?;
    let n = items.first().map_or(0, Vec::len);
    if let Some(bad) = items.iter().find(|a| a.len() != n) {
        return Err(runtime(format!("map: arrays have different lengths ({n} and {})", bad.len())));
    }
    let mut layers = Vec::new();
    let mut tasks: Vec<Task> = Vec::with_capacity(n);
    let mut keys = Vec::with_capacity(n);
    for i in 0..n {
        let args: Vec<Dynamic> = items.iter().map(|a| a[i].clone()).collect();
        let d = call_task(state, &df.func, &df.label, &args)?;
        keys.push(d.key.clone());
        layers.extend(d.layer.deps.iter().cloned());
        tasks.extend(d.layer.tasks.iter().cloned());
    }
    let mut graph: Graph = materialize(&layers);
    for t in tasks {
        graph.insert(t);
    }
    let futs = state.submit(graph, &keys)?;
    Ok(futs.into_iter().map(|f| Dynamic::from(RFuture(f))).collect())
}

fn scatter(state: &SessionState, v: &Dynamic) -> Res<Dynamic> {
    if let Some(a) = v.read_lock::<Array>() {
        // Dask scatters each element of a list to its own future (one level).
        let items = a.clone();
        drop(a);
        return items.iter().map(|x| scatter_one(state, x)).collect::<Res<Array>>().map(Dynamic::from_array);
    }
    scatter_one(state, v)
}

fn scatter_one(state: &SessionState, v: &Dynamic) -> Res<Dynamic> {
    let value = crate::convert::to_value(v, "scatter's argument")?;
    let mut futs = state.scatter(vec![value])?;
    let f = futs.pop().ok_or_else(|| runtime("scatter returned no future"))?;
    Ok(Dynamic::from(RFuture(f)))
}

pub(super) fn futures_in(v: &Array, what: &str) -> Res<Vec<Future>> {
    v.iter()
        .map(|x| {
            x.read_lock::<RFuture>().map(|f| f.0.clone()).ok_or_else(|| {
                runtime(format!("{what} expects an array of futures, found a {}", type_name(x)))
            })
        })
        .collect()
}

/// Results of the futures in `v`, which may be a future or an array of them
/// (nested arrays are gathered too, down to `convert::MAX_DEPTH`).
fn gather(state: &SessionState, v: Dynamic, depth: usize) -> Res<Dynamic> {
    if let Some(f) = v.read_lock::<RFuture>() {
        return f.0.result(&state.cancel).map(|x| to_dynamic(&x)).map_err(engine_error);
    }
    if depth <= crate::convert::MAX_DEPTH
        && let Some(a) = v.read_lock::<Array>()
    {
        let a = a.clone();
        let futs: Vec<Future> =
            a.iter().filter_map(|x| x.read_lock::<RFuture>().map(|f| f.0.clone())).collect();
        // All at once through the client: a cluster's client fetches the
        // results from each worker in batches, not one request per future.
        let mut values = state.gather(&futs)?.into_iter();
        return a
            .into_iter()
            .map(|x| {
                if x.is::<RFuture>() {
                    let v = values.next().ok_or_else(|| runtime("gather: a result went missing"))?;
                    Ok(to_dynamic(&v))
                } else {
                    gather(state, x, depth + 1)
                }
            })
            .collect::<Res<Array>>()
            .map(Dynamic::from_array);
    }
    Ok(v)
}

fn status_name(f: &Future) -> String {
    f.status().name().to_string()
}

macro_rules! register_submit {
    ($engine:ident, $state:ident; $($a:ident),*) => {{
        let st = $state.clone();
        $engine.register_fn("submit", move |f: FnPtr, $($a: Dynamic),*| -> Res<RFuture> {
            submit_call(&st, &f, &[$($a),*])
        });
        $engine.register_fn("submit", move |c: &mut Client, f: FnPtr, $($a: Dynamic),*| -> Res<RFuture> {
            submit_call(&c.state, &f, &[$($a),*])
        });
    }};
}

/// This area's entries of the API reference (`docs::all` chains the areas
/// in the order of the guide).
pub(super) const DOCS: &[FnDoc] = &[
    doc(
        "submit",
        "submit(f, args...) -> Future",
        "Run a function now on the cluster and return a future (Client.submit). Futures may be arguments.",
        "let f = submit(|a, b| a + b, 1, 2);\nf.result()",
    ),
    doc(
        "run_command",
        "run_command(argv, #{env, cwd, resources, timeout}) -> Future",
        "Run a program as a task on a worker (as a Dask user submits subprocess.run): its result is #{stdout, stderr, returncode}; a non-zero exit fails the task with stderr's last lines; a timeout or cancel stops it and what it started. env adds variables, cwd sets its folder; resources (#{GPU: 1}) picks a worker that offers them, where the program sees that worker's GPU (CUDA_VISIBLE_DEVICES). Each call runs anew.",
        "run_command([\"echo\", \"hello\"]).result().stdout",
    ),
    doc(
        "map",
        "map(f, array) -> array of Future",
        "Submit one task per element (Client.map); with two arrays, one per pair.",
        "gather(map(|x| x * x, [1, 2, 3]))",
    ),
    doc(
        "gather",
        "gather(futures) -> array",
        "Wait for futures and return their results, in order; plain values pass through.",
        "gather(map(|x| x + 1, [1, 2]))",
    ),
    doc(
        "wait",
        "wait(futures) / wait(futures, #{timeout, return_when}) -> #{done, not_done}",
        "Block until every future has finished or failed. With options, as distributed's wait: until `return_when` (\"ALL_COMPLETED\", \"FIRST_COMPLETED\", \"FIRST_EXCEPTION\") holds, an error past `timeout` seconds; the futures come back split into `done` and `not_done`.",
        "wait(map(|x| x, [1, 2]))",
    ),
    doc(
        "as_completed",
        "for f in as_completed(futures) { ... }",
        "Futures in the order they finish.",
        "let seen = [];\nfor f in as_completed(map(|x| x, [3, 1, 2])) { seen.push(f.result()); }\nseen.len()",
    ),
    doc(
        "result",
        "f.result([#{timeout}]) -> value",
        "Wait for the future and return its result; a failed task raises its error (catchable with try/catch), and so does waiting past `timeout` seconds (the task runs on; on the sync scheduler, where the waiting thread runs the tasks, the deadline is checked between them).",
        "submit(|x| x * 10, 4).result()",
    ),
    doc(
        "done",
        "f.done() -> bool",
        "Whether the future has finished, failed or been cancelled.",
        "let f = submit(|x| x, 1);\nf.result();\nf.done()",
    ),
    doc(
        "status",
        "f.status",
        "\"pending\", \"finished\", \"error\" or \"cancelled\".",
        "let f = submit(|x| x, 1);\nf.result();\nf.status",
    ),
    doc(
        "cancel",
        "f.cancel() / cancel(futures) / c.cancel(futures)",
        "Cancel this future (or each of an array): the task stops if nothing else needs it; waiting on it raises \"future KEY was cancelled\".",
        "let f = submit(|x| x, 1);\nf.cancel();\nf.status",
    ),
    doc(
        "exception",
        "f.exception() -> string | ()",
        "The error of a failed future, or () if it did not fail.",
        "let f = submit(|x| x / 0, 1);\nwait([f]);\nf.exception()",
    ),
    doc(
        "scatter",
        "scatter(value) -> Future | array of Future",
        "Move local data to the cluster; an array gives one future per element (Client.scatter).",
        "let f = scatter(#{rows: 3});\nsubmit(|d| d.rows, f).result()",
    ),
    doc(
        "client",
        "client() -> Client",
        "The session's client: `c.submit`, `c.map`, `c.gather`, `c.scatter`, `c.compute`, `c.workers()`.",
        "let c = client();\nc.gather(c.map(|x| x + 1, [1, 2]))",
    ),
    doc(
        "story",
        "c.story(key | future | collection | array of them) -> array of maps; f.story(); x.story()",
        "What the cluster's scheduler remembers of the keys: each transition with its time (seconds since the scheduler started), from, to, worker and cause (\"finished on w1\", \"failed on w0: ...\", \"worker w2 left: ...\"). The local scheduler keeps none.",
        "let f = submit(|x| x + 1, 1);\nf.result();\n// On a cluster; the local scheduler keeps no story and says so.\ntry { f.story().map(|r| r.to) } catch (e) { [] }",
    ),
    doc(
        "workers",
        "c.workers() -> array of maps",
        "The workers of the cluster: name, address, threads, running tasks, memory, spilled bytes, GPU, pid; a CUDA worker's also device_memory (bytes of results on its GPU), device_memory_limit, device_spilled (bytes of GPU results moved to host memory or disk) and device_transferred (bytes of GPU blocks received from other CUDA workers device to device).",
        "client().workers()[0].threads",
    ),
];

pub fn register(engine: &mut Engine, state: &Arc<SessionState>) {
    engine.register_type_with_name::<RFuture>("Future");
    engine.register_type_with_name::<Client>("Client");
    engine.register_type_with_name::<AsCompletedIter>("AsCompleted");
    engine.register_iterator_result::<AsCompletedIter, RFuture>();
    let st = state.clone();
    engine.register_fn("run_command", move |argv: Dynamic| run_command(&st, argv, Map::new()));
    let st = state.clone();
    engine.register_fn("run_command", move |argv: Dynamic, opts: Map| run_command(&st, argv, opts));
    register_submit!(engine, state;);
    register_submit!(engine, state; a);
    register_submit!(engine, state; a, b);
    register_submit!(engine, state; a, b, c);
    register_submit!(engine, state; a, b, c, d);
    register_submit!(engine, state; a, b, c, d, e);
    register_submit!(engine, state; a, b, c, d, e, g);
    engine.register_fn("submit", |x: Dynamic| -> Res<RFuture> {
        Err(wrong_type("submit", "a function first", &x))
    });
    engine.register_fn("map", |f: Dynamic, _: Dynamic| -> Res<Array> {
        Err(if f.is::<FnPtr>() {
            runtime("map expects a function and an array")
        } else {
            wrong_type("map", "a function first", &f)
        })
    });
    let st = state.clone();
    engine.register_fn("map", move |f: FnPtr, a: Array| map_call(&st, &f, &[a]));
    let st = state.clone();
    engine.register_fn("map", move |f: FnPtr, a: Array, b: Array| map_call(&st, &f, &[a, b]));
    engine.register_fn("map", |c: &mut Client, f: FnPtr, a: Array| map_call(&c.state, &f, &[a]));
    let st = state.clone();
    engine.register_fn("gather", move |v: Dynamic| gather(&st, v, 0));
    engine.register_fn("gather", |c: &mut Client, v: Dynamic| gather(&c.state, v, 0));
    let st = state.clone();
    engine.register_fn("scatter", move |v: Dynamic| scatter(&st, &v));
    engine.register_fn("scatter", |c: &mut Client, v: Dynamic| scatter(&c.state, &v));
    let st = state.clone();
    engine.register_fn("wait", move |v: Array| -> Res<()> {
        let futs = futures_in(&v, "wait")?;
        brisk_engine::client::wait(&futs, &st.cancel).map_err(engine_error)
    });
    let st = state.clone();
    engine.register_fn("wait", move |f: RFuture| -> Res<()> {
        brisk_engine::client::wait(&[f.0], &st.cancel).map_err(engine_error)
    });
    let st = state.clone();
    engine.register_fn("as_completed", move |v: Array| -> Res<AsCompletedIter> {
        let futs = futures_in(&v, "as_completed")?;
        Ok(AsCompletedIter(Arc::new(Mutex::new(Some(AsCompleted::new(futs, st.cancel.clone()))))))
    });
    let st = state.clone();
    engine.register_fn("result", move |f: &mut RFuture| -> Res<Dynamic> {
        f.0.result(&st.cancel).map(|v| to_dynamic(&v)).map_err(engine_error)
    });
    engine.register_fn("done", |f: &mut RFuture| f.0.done());
    engine.register_get("status", |f: &mut RFuture| status_name(&f.0));
    engine.register_get("key", |f: &mut RFuture| f.0.key().to_string());
    engine.register_fn("cancel", |f: &mut RFuture| f.0.cancel());
    engine.register_fn("exception", |f: &mut RFuture| -> Dynamic {
        match f.0.status() {
            Status::Error(e) => Dynamic::from(e.to_string()),
            _ => Dynamic::UNIT,
        }
    });
    engine.register_fn("to_string", |f: &mut RFuture| format!("{:?}", f.0));
    engine.register_fn("to_debug", |f: &mut RFuture| format!("{:?}", f.0));

    let st = state.clone();
    engine.register_fn("client", move || Client { state: st.clone() });
    // As Dask's: in the session, the session's client (in a task, its worker's).
    let st = state.clone();
    engine.register_fn("get_client", move || Client { state: st.clone() });
    for name in ["worker_client", "secede", "rejoin"] {
        engine.register_fn(name, move || -> Res<()> {
            Err(runtime(format!("{name}: only inside a task (in the session, use client())")))
        });
    }
    engine.register_fn("compute", |c: &mut Client, v: Dynamic| -> Res<Dynamic> {
        let mut out = compute_all(&c.state, &[v])?;
        Ok(out.pop().unwrap_or(Dynamic::UNIT))
    });
    engine.register_fn("workers", |c: &mut Client| -> Array {
        let int = |n: u64| Dynamic::from_int(i64::try_from(n).unwrap_or(i64::MAX));
        c.state
            .client()
            .workers()
            .into_iter()
            .map(|w| {
                let mut m = Map::new();
                m.insert("name".into(), Dynamic::from(w.name));
                m.insert("address".into(), Dynamic::from(w.address));
                m.insert("threads".into(), int(w.threads as u64));
                m.insert("running".into(), int(w.running as u64));
                m.insert("in_memory".into(), int(w.in_memory as u64));
                m.insert("memory".into(), int(w.memory));
                m.insert("memory_limit".into(), w.memory_limit.map_or(Dynamic::UNIT, int));
                m.insert("spilled".into(), int(w.spilled));
                m.insert("gpu".into(), Dynamic::from(w.gpu));
                // A CUDA worker's results in device memory, its limit, and
                // those moved to the host or disk for room.
                if let Some(d) = w.device {
                    m.insert("device_memory".into(), int(d.used));
                    m.insert("device_memory_limit".into(), int(d.limit));
                    m.insert("device_spilled".into(), int(d.spilled));
                    m.insert("device_transferred".into(), int(d.transferred));
                }
                m.insert("pid".into(), int(u64::from(w.pid)));
                let mut r = Map::new();
                for (k, v) in w.resources {
                    r.insert(k.into(), Dynamic::from_float(v));
                }
                m.insert("resources".into(), Dynamic::from_map(r));
                Dynamic::from_map(m)
            })
            .collect()
    });
    engine.register_fn("to_string", |c: &mut Client| c.state.client().describe());
    let st = state.clone();
    engine.register_fn("story", move |f: &mut RFuture| st.story(&[f.0.key().clone()]));
    engine.register_fn("story", |c: &mut Client, what: Dynamic| -> Res<Array> {
        let mut keys = Vec::new();
        match what.read_lock::<Array>() {
            Some(a) => a.iter().try_for_each(|x| story_keys(x, &mut keys))?,
            None => story_keys(&what, &mut keys)?,
        }
        c.state.story(&keys)
    });
}

/// The keys `c.story(what)` asks about: a key's name, a future or a
/// collection's partitions (`c.story` also takes a flat array of them).
fn story_keys(what: &Dynamic, keys: &mut Vec<Key>) -> Res<()> {
    if let Some(s) = what.read_lock::<rhai::ImmutableString>() {
        keys.push(Key::new(s.as_str()));
    } else if let Some(f) = what.read_lock::<RFuture>() {
        keys.push(f.0.key().clone());
    } else if let Some(l) = crate::collection::Lazy::of(what) {
        keys.extend(l.collection().partitions().1);
    } else {
        return Err(wrong_type("story", "a key, a future, a collection or an array of them", what));
    }
    Ok(())
}
