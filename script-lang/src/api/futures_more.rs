//! Waiting with a deadline and letting go: `f.result(#{timeout})`,
//! `wait(futures, #{timeout, return_when})`, `cancel(futures)` (also
//! `c.cancel`) and `fire_and_forget`, as `distributed`'s.

use std::sync::Arc;
use std::time::Instant;

use brisk_engine::Future;
use brisk_engine::client::{ReturnWhen, hold_until_settled, wait_until};
use brisk_engine::ops::{Arg, Func, Op};
use rhai::{Array, Dynamic, Engine, EvalAltResult, FnPtr, Map};

use super::args::{options, shipped};
use super::fndoc::{FnDoc, doc};
use super::futures::futures_in;
use crate::convert::{to_dynamic, to_value};
use crate::error::{engine_error, runtime};
use crate::state::SessionState;
use crate::types::{Client, RFuture};

type Res<T> = Result<T, Box<EvalAltResult>>;

/// This area's entries of the API reference.
pub(super) const DOCS: &[FnDoc] = &[
    doc(
        "fire_and_forget",
        "fire_and_forget(future_or_futures)",
        "Let the tasks run to the end though the script keeps no future of them (a dropped future otherwise releases its task), as distributed's fire_and_forget.",
        "fire_and_forget(submit(|x| x + 1, 1))",
    ),
    doc(
        "run",
        "c.run(f, args...) -> map",
        "Call `f` once on every worker now, beside its tasks (Client.run): a map from each worker's address to what the call gave there. A failure on any worker is raised, naming it. Arguments are plain values.",
        "client().run(|x| x + 1, 41).values()",
    ),
    doc(
        "who_has",
        "c.who_has(future_or_futures) -> map; c.who_has()",
        "Where results are held (Client.who_has): each future's key in memory, with the addresses of the workers that hold it; with no argument, every result this client holds.",
        "let f = submit(|x| x + 1, 1);\nf.result();\nclient().who_has(f)",
    ),
];

/// `timeout` seconds from now, if given.
fn deadline(m: &Map, what: &str) -> Res<Option<(Instant, f64)>> {
    Ok(super::coordinate::timeout(m, what)?.map(|d| (Instant::now() + d, d.as_secs_f64())))
}

fn result(state: &SessionState, f: &Future, m: Map) -> Res<Dynamic> {
    let m = options(Some(m), "result", &["timeout"])?;
    if let Some((at, secs)) = deadline(&m, "result")?
        && !wait_until(std::slice::from_ref(f), &state.cancel, Some(at), ReturnWhen::AllCompleted)
            .map_err(engine_error)?
    {
        return Err(runtime(format!("result: timed out after {secs} s waiting for {}", f.key())));
    }
    f.result(&state.cancel).map(|v| to_dynamic(&v)).map_err(engine_error)
}

/// `wait(futures, #{timeout, return_when})`: `#{done, not_done}`, as
/// Dask's; past the timeout, an error.
fn wait(state: &SessionState, v: &Array, m: Map) -> Res<Map> {
    let m = options(Some(m), "wait", &["timeout", "return_when"])?;
    let futs = futures_in(v, "wait")?;
    let when = match m.get("return_when").map(|d| d.clone().into_string()) {
        None => ReturnWhen::AllCompleted,
        Some(Ok(s)) if s == "ALL_COMPLETED" => ReturnWhen::AllCompleted,
        Some(Ok(s)) if s == "FIRST_COMPLETED" => ReturnWhen::FirstCompleted,
        Some(Ok(s)) if s == "FIRST_EXCEPTION" => ReturnWhen::FirstException,
        _ => {
            return Err(runtime(
                "wait: return_when is \"ALL_COMPLETED\", \"FIRST_COMPLETED\" or \"FIRST_EXCEPTION\"",
            ));
        }
    };
    let limit = deadline(&m, "wait")?;
    if !wait_until(&futs, &state.cancel, limit.map(|(at, _)| at), when).map_err(engine_error)? {
        let secs = limit.map_or(0.0, |(_, s)| s);
        let left = futs.iter().filter(|f| !f.done()).count();
        return Err(runtime(format!(
            "wait: timed out after {secs} s with {left} of {} futures pending",
            futs.len()
        )));
    }
    let (done, not_done): (Vec<Future>, Vec<Future>) = futs.into_iter().partition(Future::done);
    let arr =
        |fs: Vec<Future>| Dynamic::from_array(fs.into_iter().map(|f| Dynamic::from(RFuture(f))).collect());
    let mut out = Map::new();
    out.insert("done".into(), arr(done));
    out.insert("not_done".into(), arr(not_done));
    Ok(out)
}

fn futures_of(v: &Dynamic, what: &str) -> Res<Vec<Future>> {
    if let Some(f) = v.read_lock::<RFuture>() {
        return Ok(vec![f.0.clone()]);
    }
    match v.read_lock::<Array>() {
        Some(a) => futures_in(&a, what),
        None => Err(runtime(format!("{what} takes a future or an array of futures"))),
    }
}

/// Hold the futures on a thread of their own until they settle.
fn fire_and_forget(v: &Dynamic) -> Res<()> {
    let futs = futures_of(v, "fire_and_forget")?;
    if futs.iter().all(Future::done) {
        return Ok(());
    }
    std::thread::Builder::new()
        .name("brisk-fire-and-forget".into())
        .spawn(move || hold_until_settled(futs))
        .map(|_| ())
        .map_err(|e| runtime(format!("fire_and_forget: no thread to hold the futures: {e}")))
}

/// `c.run(f, args...)`: `f` once on every worker now; worker address →
/// what it gave. A failure anywhere is raised, naming the worker.
fn run(state: &SessionState, f: &FnPtr, args: &[Dynamic]) -> Res<Map> {
    let (udf, _) = shipped(state, f)?;
    let args = args
        .iter()
        .enumerate()
        .map(|(i, a)| to_value(a, &format!("argument {} of run", i + 1)).map(Arg::Lit))
        .collect::<Result<Vec<_>, _>>()?;
    let op = Op::Call { func: Func::Udf(udf), args };
    let results = state.client().run_everywhere(op, &state.cancel).map_err(engine_error)?;
    let mut out = Map::new();
    for (worker, result) in results {
        match result {
            Ok(v) => out.insert(worker.into(), to_dynamic(&v)),
            Err(e) => return Err(runtime(format!("run: on {worker}: {e}"))),
        };
    }
    Ok(out)
}

/// `c.who_has(futures)`: key → addresses of the workers holding it (a
/// result not in memory is left out); no argument: every held result.
fn who_has(c: &Client, v: Option<&Dynamic>) -> Res<Map> {
    let keys = match v {
        Some(v) => Some(futures_of(v, "who_has")?.iter().map(|f| f.key().clone()).collect::<Vec<_>>()),
        None => None,
    };
    let held = c.state.client().who_has(keys.as_deref());
    Ok(held
        .into_iter()
        .map(|(k, ws)| (k.to_string().into(), ws.into_iter().map(Dynamic::from).collect::<Array>().into()))
        .collect())
}

fn cancel(v: &Dynamic) -> Res<()> {
    futures_of(v, "cancel")?.iter().for_each(Future::cancel);
    Ok(())
}

pub(super) fn register(engine: &mut Engine, state: &Arc<SessionState>) {
    let st = state.clone();
    engine.register_fn("result", move |f: &mut RFuture, m: Map| result(&st, &f.0, m));
    let st = state.clone();
    engine.register_fn("wait", move |v: Array, m: Map| wait(&st, &v, m));
    engine.register_fn("fire_and_forget", |v: Dynamic| fire_and_forget(&v));
    engine.register_fn("cancel", |v: Array| cancel(&Dynamic::from_array(v)));
    engine.register_fn("cancel", |_: &mut Client, v: Dynamic| cancel(&v));
    engine.register_fn("who_has", |c: &mut Client| who_has(c, None));
    engine.register_fn("run", |c: &mut Client, f: FnPtr| run(&c.state, &f, &[]));
    engine.register_fn("run", |c: &mut Client, f: FnPtr, a: Dynamic| run(&c.state, &f, &[a]));
    engine.register_fn("run", |c: &mut Client, f: FnPtr, a: Dynamic, b: Dynamic| run(&c.state, &f, &[a, b]));
    engine.register_fn("run", |c: &mut Client, f: FnPtr, a: Dynamic, b: Dynamic, d: Dynamic| {
        run(&c.state, &f, &[a, b, d])
    });
    engine.register_fn("who_has", |c: &mut Client, v: Dynamic| who_has(c, Some(&v)));
}
