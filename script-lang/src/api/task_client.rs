//! Tasks that submit tasks, as `distributed`'s `get_client()` /
//! `worker_client()` inside a task: a closure running on a worker (or the
//! local runtime's thread) submits closures of the same script through its
//! worker's client and waits on their futures. While it waits its thread is
//! lent (`secede`), so the tasks it waits on run even when every thread is
//! taken by such waits (a recursive `fib` does not deadlock).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use brisk_engine::graph::{Graph, Task};
use brisk_engine::ops::{Func, Op};
use brisk_engine::{Client, Future, Key};
use rhai::{Array, Dynamic, Engine, EvalAltResult, FnPtr};

use super::args::ArgBuilder;
use super::fndoc::{FnDoc, doc};
use crate::convert::to_dynamic;
use crate::error::{engine_error, runtime};
use crate::ship::{TaskSide, ship, task_side};
use crate::types::RFuture;

type Res<T> = Result<T, Box<EvalAltResult>>;

/// This area's entries of the API reference.
pub(super) const DOCS: &[FnDoc] = &[
    doc(
        "worker_client",
        "worker_client() inside a task -> Client",
        "Inside a task's closure, the worker's client (distributed's worker_client): `c.submit(f, args...)`, `c.map(f, xs)`, `c.gather(futures)` and the futures' `result()` run tasks from the task. A task waiting on them lends its thread meanwhile, so a recursive computation cannot take every thread and stall; `worker_client()` also lends it at once, as Dask's.",
        "fn fib(n) { if n < 2 { return n } let c = worker_client(); let a = c.submit(fib, n - 1); let b = c.submit(fib, n - 2); a.result() + b.result() }\nsubmit(fib, 6).result()",
    ),
    doc(
        "get_client",
        "get_client() -> Client",
        "In the session, its client (as `client()`); inside a task, the worker's, as `worker_client()` but without lending the thread at once.",
        "submit(|| get_client().submit(|x| x * 3, 5).result()).result()",
    ),
    doc(
        "secede",
        "secede() inside a task",
        "Lend this task's thread while it waits on something other than futures (a Queue, an Event): the worker starts another meanwhile and the scheduler stops counting the task against it (distributed's secede).",
        "submit(|| { secede(); let v = Variable(\"late\"); rejoin(); 1 }).result()",
    ),
    doc(
        "rejoin",
        "rejoin() inside a task",
        "Take back the thread lent by `secede()` (distributed's rejoin).",
        "submit(|| { secede(); rejoin(); 2 }).result()",
    ),
];

/// The client of a running task (type name "Client", as the session's).
#[derive(Clone)]
pub struct TaskClient {
    side: TaskSide,
    client: Arc<dyn Client>,
}

fn side(what: &str) -> Res<TaskSide> {
    task_side().ok_or_else(|| runtime(format!("{what}: only inside a task (in the session, use client())")))
}

fn task_client(what: &str) -> Res<TaskClient> {
    let side = side(what)?;
    let client = side
        .client
        .clone()
        .ok_or_else(|| runtime(format!("{what}: this task runs where no client can be reached")))?;
    Ok(TaskClient { side, client })
}

/// `f(args)` as a task of the running task's script, keyed by the closure
/// (its code and captures) and the arguments, as a session's `submit`.
fn task_of(side: &TaskSide, f: &FnPtr, args: &[Dynamic]) -> Res<Task> {
    let udf = ship(f, side.code.clone())?;
    let label = udf.label.clone();
    let mut b = ArgBuilder::default();
    b.token.str(&label).str(&udf.entry).u64((side.code.id >> 64) as u64).u64(side.code.id as u64);
    for c in &udf.curry {
        b.token.value(c);
    }
    let mut built = Vec::with_capacity(args.len());
    for (i, a) in args.iter().enumerate() {
        built.push(b.arg(a, &format!("argument {} of '{label}'", i + 1))?);
    }
    let key = Key::new(b.token.name(&label).as_str());
    Ok(Task::new(key, Op::Call { func: Func::Udf(Arc::new(udf)), args: built }, b.deps))
}

impl TaskClient {
    fn submit(&self, f: &FnPtr, args: &[Dynamic]) -> Res<RFuture> {
        let task = task_of(&self.side, f, args)?;
        let key = task.key.clone();
        let mut futs = self.client.submit(Graph::from_tasks(vec![task]), &[key]).map_err(engine_error)?;
        futs.pop().map(RFuture).ok_or_else(|| runtime("submit returned no future"))
    }

    fn map(&self, f: &FnPtr, xs: &Array) -> Res<Array> {
        let tasks =
            xs.iter().map(|x| task_of(&self.side, f, std::slice::from_ref(x))).collect::<Res<Vec<_>>>()?;
        let keys: Vec<Key> = tasks.iter().map(|t| t.key.clone()).collect();
        let futs = self.client.submit(Graph::from_tasks(tasks), &keys).map_err(engine_error)?;
        Ok(futs.into_iter().map(|f| Dynamic::from(RFuture(f))).collect())
    }
}

/// Run `wait` with the task's thread lent, unless the closure lent it
/// itself (then it stays lent).
fn lending<T>(side: &TaskSide, wait: impl FnOnce() -> T) -> T {
    let Some(seat) = side.seat.as_ref().filter(|_| !side.seceded.load(Ordering::SeqCst)) else {
        return wait();
    };
    seat.secede(&side.key);
    let out = wait();
    seat.rejoin(&side.key);
    out
}

fn result(f: &Future) -> Res<Dynamic> {
    let side = side("result")?;
    lending(&side, || f.result(&side.cancel)).map(|v| to_dynamic(&v)).map_err(engine_error)
}

fn gather(v: &Dynamic) -> Res<Dynamic> {
    let side = side("gather")?;
    if let Some(f) = v.read_lock::<RFuture>() {
        return result(&f.0);
    }
    let Some(a) = v.read_lock::<Array>() else { return Ok(v.clone()) };
    let futs = super::futures::futures_in(&a, "gather")?;
    let values =
        lending(&side, || brisk_engine::client::gather(&futs, &side.cancel)).map_err(engine_error)?;
    Ok(values.iter().map(to_dynamic).collect::<Array>().into())
}

fn set_seceded(seceded: bool) -> Res<()> {
    let side = side(if seceded { "secede" } else { "rejoin" })?;
    let Some(seat) = &side.seat else { return Ok(()) };
    if side.seceded.swap(seceded, Ordering::SeqCst) != seceded {
        if seceded {
            seat.secede(&side.key);
        } else {
            seat.rejoin(&side.key);
        }
    }
    Ok(())
}

macro_rules! register_task_submit {
    ($engine:ident; $($a:ident),*) => {{
        $engine.register_fn("submit", |c: &mut TaskClient, f: FnPtr, $($a: Dynamic),*| -> Res<RFuture> {
            c.submit(&f, &[$($a),*])
        });
    }};
}

/// A worker engine's functions for tasks that submit tasks.
pub fn register_task(engine: &mut Engine) {
    engine.register_type_with_name::<TaskClient>("Client");
    engine.register_type_with_name::<RFuture>("Future");
    engine.register_fn("get_client", || task_client("get_client"));
    engine.register_fn("worker_client", || -> Res<TaskClient> {
        let c = task_client("worker_client")?;
        set_seceded(true)?;
        Ok(c)
    });
    engine.register_fn("secede", || set_seceded(true));
    engine.register_fn("rejoin", || set_seceded(false));
    register_task_submit!(engine;);
    register_task_submit!(engine; a);
    register_task_submit!(engine; a, b);
    register_task_submit!(engine; a, b, d);
    register_task_submit!(engine; a, b, d, e);
    engine.register_fn("map", |c: &mut TaskClient, f: FnPtr, xs: Array| c.map(&f, &xs));
    engine.register_fn("gather", |_: &mut TaskClient, v: Dynamic| gather(&v));
    engine.register_fn("gather", |v: Dynamic| gather(&v));
    engine.register_fn("result", |f: &mut RFuture| result(&f.0));
    engine.register_fn("done", |f: &mut RFuture| f.0.done());
    engine.register_get("status", |f: &mut RFuture| f.0.status().name().to_string());
    engine.register_get("key", |f: &mut RFuture| f.0.key().to_string());
    engine.register_fn("to_string", |f: &mut RFuture| format!("{:?}", f.0));
    engine.register_fn("to_string", |c: &mut TaskClient| c.client.describe());
}
