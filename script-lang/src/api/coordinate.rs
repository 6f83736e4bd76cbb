//! Coordination in Rhai, as `distributed`'s: `Variable`, `Queue`, `Lock`,
//! `Event`, `Semaphore` and published datasets, made by name in the
//! session or inside a task's closure (the same name is the same thing
//! everywhere the scheduler reaches). In the session they go through its
//! client; in a task through the task's (`ship::task_side`).
//!
//! The objects hold no state of their own but a name and, for `Lock` and
//! `Semaphore`, a holder id, so they cannot be captured by a closure that
//! is shipped: a task makes its own by name.

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use brisk_engine::client::CancelToken;
use brisk_engine::coordination::{Batch, CoordOp, CoordReply, Coordinator, Deadline};
use brisk_engine::{EngineError, Value};
use rhai::{Array, Dynamic, Engine, EvalAltResult, Map};

use super::args::{options, wrong_type};
use super::fndoc::{FnDoc, doc};
use crate::collection::{Lazy, compute_one};
use crate::convert::{to_dynamic, to_value};
use crate::error::{engine_error, runtime};
use crate::state::SessionState;
use crate::types::Client;

type Res<T> = Result<T, Box<EvalAltResult>>;

/// This area's entries of the API reference.
pub(super) const DOCS: &[FnDoc] = &[
    doc(
        "Variable",
        "Variable(name) then v.set(x), v.get(#{timeout}), v.delete()",
        "A value shared by name between the session and tasks, held by the scheduler (distributed's Variable). `get` waits until it is set (an error past `timeout` seconds); a lazy collection is computed when set from the session.",
        "let v = Variable(\"threshold\");\nv.set(0.5);\nsubmit(|x| x > Variable(\"threshold\").get(), 0.7).result()",
    ),
    doc(
        "Queue",
        "Queue(name, #{maxsize}) then q.put(x, #{timeout}), q.get(#{timeout, batch}), q.qsize()",
        "A first-in first-out queue shared by name (distributed's Queue). `get` waits for an item; `batch: n` waits for n and gives an array, `batch: true` takes what is there now. `put` waits while `maxsize` items (set by the first put; 0 unbounded) are in it. Past `timeout` seconds either is an error.",
        "let q = Queue(\"work\");\nsubmit(|n| { let q = Queue(\"work\"); for i in 0..n { q.put(i * i) } n }, 3).result();\n[q.get(), q.get(#{batch: 2})]",
    ),
    doc(
        "Lock",
        "Lock(name) then l.acquire(#{timeout, blocking}) -> bool, l.release(), l.locked()",
        "A lock shared by name (distributed's Lock): one holder at a time, released only by the Lock that took it. `acquire` gives false past `timeout` seconds, or at once with `blocking: false`. A worker that dies frees what its tasks held.",
        "let l = Lock(\"file\");\nl.acquire();\nlet other = submit(|| Lock(\"file\").acquire(#{timeout: 0.05})).result();\nl.release();\n[other, l.locked()]",
    ),
    doc(
        "Event",
        "Event(name) then e.set(), e.clear(), e.wait(#{timeout}) -> bool, e.is_set()",
        "A flag shared by name (distributed's Event): `wait` returns true once it is set, false past `timeout` seconds.",
        "let e = Event(\"ready\");\nlet f = submit(|| Event(\"ready\").wait(#{timeout: 10}));\ne.set();\nf.result()",
    ),
    doc(
        "Semaphore",
        "Semaphore(max_leases, name) / Semaphore(#{max_leases, name}) then s.acquire(#{timeout}) -> bool, s.release(), s.get_value()",
        "At most `max_leases` holders at once, shared by name (distributed's Semaphore): `acquire` gives false past `timeout` seconds; `get_value` is the number of leases taken. Every user of a name must give the same max_leases.",
        "let s = Semaphore(2, \"db\");\ns.acquire();\ns.acquire();\n[s.acquire(#{timeout: 0}), s.get_value()]",
    ),
    doc(
        "get",
        "v.get(#{timeout}) (Variable); q.get(#{timeout, batch}) (Queue)",
        "A Variable's value, once set; a Queue's next item (or `batch` of them). Past `timeout` seconds, an error.",
        "let v = Variable(\"g\");\nv.set([1, 2]);\nv.get(#{timeout: 1})",
    ),
    doc(
        "set",
        "v.set(x) (Variable); e.set() (Event)",
        "Give a Variable its value (those waiting in `get` go on), or set an Event (those in `wait` go on).",
        "let e = Event(\"go\");\ne.set();\ne.is_set()",
    ),
    doc(
        "delete",
        "v.delete()",
        "Forget a Variable's value: a later `get` waits again.",
        "let v = Variable(\"d\");\nv.set(1);\nv.delete();\ntry { v.get(#{timeout: 0}) } catch { \"unset\" }",
    ),
    doc(
        "put",
        "q.put(x, #{timeout})",
        "Add an item to a Queue; waits while it is full (`maxsize`), an error past `timeout` seconds.",
        "let q = Queue(\"p\");\nq.put(#{id: 1});\nq.get()",
    ),
    doc(
        "qsize",
        "q.qsize() -> int",
        "How many items a Queue holds now.",
        "let q = Queue(\"s\");\nq.put(1);\nq.put(2);\nq.qsize()",
    ),
    doc(
        "acquire",
        "l.acquire(#{timeout, blocking}) (Lock); s.acquire(#{timeout}) (Semaphore) -> bool",
        "Take a Lock or a Semaphore's lease, waiting while others hold it: false past `timeout` seconds (or at once with `blocking: false`).",
        "let l = Lock(\"a\");\n[l.acquire(), l.acquire(#{blocking: false})]",
    ),
    doc(
        "release",
        "l.release() (Lock); s.release() (Semaphore)",
        "Give back what this Lock or Semaphore object took; one that took nothing is refused.",
        "let l = Lock(\"r\");\nl.acquire();\nl.release();\nl.locked()",
    ),
    doc("locked", "l.locked() -> bool", "Whether anyone holds the Lock now.", "Lock(\"free\").locked()"),
    doc(
        "clear",
        "e.clear()",
        "Unset an Event: `wait` waits again.",
        "let e = Event(\"c\");\ne.set();\ne.clear();\ne.is_set()",
    ),
    doc("is_set", "e.is_set() -> bool", "Whether the Event is set now.", "Event(\"unset\").is_set()"),
    doc(
        "get_value",
        "s.get_value() -> int",
        "How many of a Semaphore's leases are taken now.",
        "let s = Semaphore(3, \"v\");\ns.acquire();\ns.get_value()",
    ),
    doc(
        "max_leases",
        "s.max_leases",
        "A Semaphore's number of leases (a property).",
        "Semaphore(4, \"m\").max_leases",
    ),
    doc(
        "publish_dataset",
        "publish_dataset(name, value, #{override}) / c.publish_dataset(#{name: value})",
        "Keep a value on the scheduler under a name for other sessions and tasks (Client.publish_dataset): a lazy collection is computed first and its result kept. Publishing a name again is refused unless `override: true`.",
        "publish_dataset(\"squares\", [1, 4, 9]);\nlet got = get_dataset(\"squares\");\nunpublish_dataset(\"squares\");\ngot",
    ),
    doc(
        "get_dataset",
        "get_dataset(name) / c.get_dataset(name)",
        "A published value; an unknown name is an error that lists the published ones.",
        "publish_dataset(\"g\", 1);\nlet v = get_dataset(\"g\");\nunpublish_dataset(\"g\");\nv",
    ),
    doc(
        "list_datasets",
        "list_datasets() / c.list_datasets() -> array",
        "The names published, in order.",
        "list_datasets()",
    ),
    doc(
        "unpublish_dataset",
        "unpublish_dataset(name) / c.unpublish_dataset(name)",
        "Forget a published value.",
        "publish_dataset(\"u\", 1);\nunpublish_dataset(\"u\");\nlist_datasets().contains(\"u\")",
    ),
];

/// Where requests go: the session's client, or the running task's.
#[derive(Clone)]
enum Via {
    Session(Arc<SessionState>),
    Task(Arc<dyn Coordinator>, CancelToken),
}

impl Via {
    /// The answer to `op`; a refusal (`release` by a stranger, an unknown
    /// dataset) is an error.
    fn ask(&self, op: CoordOp, deadline: Deadline) -> Res<CoordReply> {
        let reply = match self {
            Via::Session(st) => st.client().coordinate(op, deadline, &st.cancel),
            Via::Task(c, cancel) => c.coordinate(op, deadline, cancel),
        };
        match reply.map_err(engine_error)? {
            CoordReply::Failed(e) => Err(engine_error(EngineError::Coordination(e))),
            r => Ok(r),
        }
    }

    /// A value to keep: from the session, a lazy collection is computed.
    fn value(&self, d: Dynamic, what: &str) -> Res<Value> {
        let d = match self {
            Via::Session(st) if Lazy::is(&d) => compute_one(st, d)?,
            _ => d,
        };
        Ok(to_value(&d, what)?)
    }
}

/// Finds the `Via` of the engine a function is registered in.
type Resolve = Arc<dyn Fn(&str) -> Res<Via> + Send + Sync>;

fn task_via(what: &str) -> Res<Via> {
    let side = crate::ship::task_side();
    side.and_then(|s| s.coordinator.map(|c| Via::Task(c, s.cancel))).ok_or_else(|| {
        runtime(format!(
            "{what}: no scheduler to coordinate through here (only in a session or a task it runs)"
        ))
    })
}

/// A holder id for a Lock or Semaphore made through `via`: one no other
/// object has, in any process; a task's are freed when it ends.
fn holder_for(via: &Via) -> u64 {
    let h = new_holder();
    if matches!(via, Via::Task(..))
        && let Some(side) = crate::ship::task_side()
    {
        side.holders.lock().unwrap_or_else(|e| e.into_inner()).push(h);
    }
    h
}

fn new_holder() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(NEXT.fetch_add(1, Ordering::Relaxed));
    h.write_u32(std::process::id());
    h.finish()
}

#[derive(Clone)]
pub struct Variable {
    name: String,
    via: Via,
}

#[derive(Clone)]
pub struct Queue {
    name: String,
    maxsize: u64,
    via: Via,
}

#[derive(Clone)]
pub struct Lock {
    name: String,
    holder: u64,
    via: Via,
}

#[derive(Clone)]
pub struct Event {
    name: String,
    via: Via,
}

#[derive(Clone)]
pub struct Semaphore {
    name: String,
    max_leases: u64,
    holder: u64,
    via: Via,
}

/// `timeout` seconds, if given (`()` is none).
pub(super) fn timeout(m: &Map, what: &str) -> Res<Option<Duration>> {
    let Some(d) = m.get("timeout").filter(|d| !d.is_unit()) else { return Ok(None) };
    let secs = d
        .as_float()
        .or_else(|_| d.as_int().map(|i| i as f64))
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0 && *s < 1e9)
        .ok_or_else(|| runtime(format!("{what}: timeout is a number of seconds, 0 or more")))?;
    Ok(Some(Duration::from_secs_f64(secs)))
}

fn timed_out(what: &str, name: &str, t: Option<Duration>) -> Box<EvalAltResult> {
    let secs = t.map_or(0.0, |d| d.as_secs_f64());
    runtime(format!("{what} '{name}': timed out after {secs} s"))
}

fn name_arg(d: &Dynamic, what: &str) -> Res<String> {
    match d.clone().into_string() {
        Ok(s) if !s.is_empty() => Ok(s),
        _ => Err(wrong_type(what, "a non-empty name (string)", d)),
    }
}

fn count_arg(d: &Dynamic, what: &str, option: &str, min: i64) -> Res<u64> {
    match d.as_int() {
        Ok(n) if n >= min => Ok(n as u64),
        _ => Err(runtime(format!("{what}: {option} is a whole number, {min} or more"))),
    }
}

impl Variable {
    fn set(&mut self, x: Dynamic) -> Res<()> {
        let value = self.via.value(x, "Variable.set's value")?;
        self.via.ask(CoordOp::SetVariable { name: self.name.clone(), value }, Deadline::Never).map(drop)
    }

    fn get(&mut self, m: Map) -> Res<Dynamic> {
        let m = options(Some(m), "Variable.get", &["timeout"])?;
        let t = timeout(&m, "Variable.get")?;
        match self.via.ask(CoordOp::GetVariable { name: self.name.clone() }, Deadline::after(t))? {
            CoordReply::Value(v) => Ok(to_dynamic(&v)),
            _ => Err(timed_out("Variable.get", &self.name, t)),
        }
    }
}

impl Queue {
    fn put(&mut self, x: Dynamic, m: Map) -> Res<()> {
        let m = options(Some(m), "Queue.put", &["timeout"])?;
        let t = timeout(&m, "Queue.put")?;
        let value = self.via.value(x, "Queue.put's value")?;
        let op = CoordOp::Put { queue: self.name.clone(), value, maxsize: self.maxsize };
        match self.via.ask(op, Deadline::after(t))? {
            CoordReply::Done => Ok(()),
            _ => Err(timed_out("Queue.put", &self.name, t)),
        }
    }

    fn get(&mut self, m: Map) -> Res<Dynamic> {
        let m = options(Some(m), "Queue.get", &["timeout", "batch"])?;
        let t = timeout(&m, "Queue.get")?;
        let batch = match m.get("batch") {
            None => Batch::One,
            Some(b) if b.as_bool() == Ok(false) => Batch::One,
            Some(b) if b.as_bool() == Ok(true) => Batch::All,
            Some(b) => match b.as_int() {
                Ok(n) if n >= 1 => Batch::N(n as u64),
                _ => return Err(runtime("Queue.get: batch is true, false or a whole number, 1 or more")),
            },
        };
        match self.via.ask(CoordOp::Get { queue: self.name.clone(), batch }, Deadline::after(t))? {
            CoordReply::Value(v) => Ok(to_dynamic(&v)),
            CoordReply::Values(vs) => Ok(vs.iter().map(to_dynamic).collect::<Array>().into()),
            _ => Err(timed_out("Queue.get", &self.name, t)),
        }
    }

    fn qsize(&mut self) -> Res<i64> {
        match self.via.ask(CoordOp::QueueSize { queue: self.name.clone() }, Deadline::Now)? {
            CoordReply::Count(n) => Ok(n as i64),
            other => Err(unexpected(&other)),
        }
    }
}

fn unexpected(reply: &CoordReply) -> Box<EvalAltResult> {
    runtime(format!("the scheduler gave an unexpected answer: {reply:?}"))
}

fn flag(reply: CoordReply) -> Res<bool> {
    match reply {
        CoordReply::Flag(b) => Ok(b),
        CoordReply::TimedOut => Ok(false),
        other => Err(unexpected(&other)),
    }
}

impl Lock {
    fn acquire(&mut self, m: Map) -> Res<bool> {
        let m = options(Some(m), "Lock.acquire", &["timeout", "blocking"])?;
        let blocking = m.get("blocking").map_or(Ok(true), |b| {
            b.as_bool().map_err(|_| runtime("Lock.acquire: blocking is true or false"))
        })?;
        let t = timeout(&m, "Lock.acquire")?;
        if !blocking && t.is_some() {
            return Err(runtime(
                "Lock.acquire: a timeout is for a blocking acquire; give blocking: false or a timeout",
            ));
        }
        let deadline = if blocking { Deadline::after(t) } else { Deadline::Now };
        flag(self.via.ask(CoordOp::Acquire { lock: self.name.clone(), holder: self.holder }, deadline)?)
    }
}

impl Semaphore {
    fn acquire(&mut self, m: Map) -> Res<bool> {
        let m = options(Some(m), "Semaphore.acquire", &["timeout"])?;
        let t = timeout(&m, "Semaphore.acquire")?;
        let op = CoordOp::AcquireLease {
            semaphore: self.name.clone(),
            max_leases: self.max_leases,
            holder: self.holder,
        };
        flag(self.via.ask(op, Deadline::after(t))?)
    }
}

fn publish(via: &Via, name: &Dynamic, value: Dynamic, m: Map) -> Res<()> {
    let m = options(Some(m), "publish_dataset", &["override"])?;
    let replace = m.get("override").map_or(Ok(false), |b| {
        b.as_bool().map_err(|_| runtime("publish_dataset: override is true or false"))
    })?;
    let name = name_arg(name, "publish_dataset")?;
    let value = via.value(value, &format!("dataset '{name}'"))?;
    via.ask(CoordOp::Publish { name, value, replace }, Deadline::Never).map(drop)
}

fn publish_map(via: &Via, m: Map) -> Res<()> {
    if m.is_empty() {
        return Err(runtime("publish_dataset: give a name and a value, or a map of them"));
    }
    for (name, value) in m {
        publish(via, &Dynamic::from(name.to_string()), value, Map::new())?;
    }
    Ok(())
}

fn get_dataset(via: &Via, name: &Dynamic) -> Res<Dynamic> {
    let name = name_arg(name, "get_dataset")?;
    match via.ask(CoordOp::Dataset { name }, Deadline::Never)? {
        CoordReply::Value(v) => Ok(to_dynamic(&v)),
        other => Err(unexpected(&other)),
    }
}

fn list_datasets(via: &Via) -> Res<Array> {
    match via.ask(CoordOp::Datasets, Deadline::Never)? {
        CoordReply::Names(n) => Ok(n.into_iter().map(Dynamic::from).collect()),
        other => Err(unexpected(&other)),
    }
}

fn unpublish(via: &Via, name: &Dynamic) -> Res<()> {
    let name = name_arg(name, "unpublish_dataset")?;
    via.ask(CoordOp::Unpublish { name }, Deadline::Never).map(drop)
}

/// The session's functions: requests go through its client.
pub(super) fn register(engine: &mut Engine, state: &Arc<SessionState>) {
    let st = state.clone();
    register_with(engine, Arc::new(move |_| Ok(Via::Session(st.clone()))));
    engine.register_fn("publish_dataset", |c: &mut Client, m: Map| {
        publish_map(&Via::Session(c.state.clone()), m)
    });
    engine.register_fn("publish_dataset", |c: &mut Client, n: Dynamic, v: Dynamic| {
        publish(&Via::Session(c.state.clone()), &n, v, Map::new())
    });
    engine.register_fn("publish_dataset", |c: &mut Client, n: Dynamic, v: Dynamic, m: Map| {
        publish(&Via::Session(c.state.clone()), &n, v, m)
    });
    engine.register_fn("get_dataset", |c: &mut Client, n: Dynamic| {
        get_dataset(&Via::Session(c.state.clone()), &n)
    });
    engine.register_fn("list_datasets", |c: &mut Client| list_datasets(&Via::Session(c.state.clone())));
    engine.register_fn("unpublish_dataset", |c: &mut Client, n: Dynamic| {
        unpublish(&Via::Session(c.state.clone()), &n)
    });
}

/// A worker engine's functions: requests go through the running task's
/// scheduler.
pub fn register_task(engine: &mut Engine) {
    register_with(engine, Arc::new(task_via));
}

fn register_with(engine: &mut Engine, via: Resolve) {
    engine.register_type_with_name::<Variable>("Variable");
    engine.register_type_with_name::<Queue>("Queue");
    engine.register_type_with_name::<Lock>("Lock");
    engine.register_type_with_name::<Event>("Event");
    engine.register_type_with_name::<Semaphore>("Semaphore");
    let r = via.clone();
    engine.register_fn("Variable", move |n: Dynamic| -> Res<Variable> {
        Ok(Variable { name: name_arg(&n, "Variable")?, via: r("Variable")? })
    });
    engine.register_fn("set", |v: &mut Variable, x: Dynamic| v.set(x));
    engine.register_fn("get", |v: &mut Variable| v.get(Map::new()));
    engine.register_fn("get", |v: &mut Variable, m: Map| v.get(m));
    engine.register_fn("delete", |v: &mut Variable| -> Res<()> {
        v.via.ask(CoordOp::DeleteVariable { name: v.name.clone() }, Deadline::Never).map(drop)
    });
    engine.register_get("name", |v: &mut Variable| v.name.clone());
    engine.register_fn("to_string", |v: &mut Variable| format!("Variable('{}')", v.name));

    let r = via.clone();
    let queue = move |n: &Dynamic, m: Map| -> Res<Queue> {
        let m = options(Some(m), "Queue", &["maxsize"])?;
        let maxsize = m.get("maxsize").map_or(Ok(0), |d| count_arg(d, "Queue", "maxsize", 0))?;
        Ok(Queue { name: name_arg(n, "Queue")?, maxsize, via: r("Queue")? })
    };
    let q = queue.clone();
    engine.register_fn("Queue", move |n: Dynamic| q(&n, Map::new()));
    engine.register_fn("Queue", move |n: Dynamic, m: Map| queue(&n, m));
    engine.register_fn("put", |q: &mut Queue, x: Dynamic| q.put(x, Map::new()));
    engine.register_fn("put", |q: &mut Queue, x: Dynamic, m: Map| q.put(x, m));
    engine.register_fn("get", |q: &mut Queue| q.get(Map::new()));
    engine.register_fn("get", |q: &mut Queue, m: Map| q.get(m));
    engine.register_fn("qsize", |q: &mut Queue| q.qsize());
    engine.register_get("name", |q: &mut Queue| q.name.clone());
    engine.register_fn("to_string", |q: &mut Queue| format!("Queue('{}')", q.name));

    let r = via.clone();
    engine.register_fn("Lock", move |n: Dynamic| -> Res<Lock> {
        let via = r("Lock")?;
        Ok(Lock { name: name_arg(&n, "Lock")?, holder: holder_for(&via), via })
    });
    engine.register_fn("acquire", |l: &mut Lock| l.acquire(Map::new()));
    engine.register_fn("acquire", |l: &mut Lock, m: Map| l.acquire(m));
    engine.register_fn("release", |l: &mut Lock| -> Res<()> {
        l.via.ask(CoordOp::Release { lock: l.name.clone(), holder: l.holder }, Deadline::Never).map(drop)
    });
    engine.register_fn("locked", |l: &mut Lock| -> Res<bool> {
        flag(l.via.ask(CoordOp::Locked { lock: l.name.clone() }, Deadline::Now)?)
    });
    engine.register_get("name", |l: &mut Lock| l.name.clone());
    engine.register_fn("to_string", |l: &mut Lock| format!("Lock('{}')", l.name));

    let r = via.clone();
    engine.register_fn("Event", move |n: Dynamic| -> Res<Event> {
        Ok(Event { name: name_arg(&n, "Event")?, via: r("Event")? })
    });
    engine.register_fn("set", |e: &mut Event| -> Res<()> {
        e.via.ask(CoordOp::SetEvent { name: e.name.clone() }, Deadline::Never).map(drop)
    });
    engine.register_fn("clear", |e: &mut Event| -> Res<()> {
        e.via.ask(CoordOp::ClearEvent { name: e.name.clone() }, Deadline::Never).map(drop)
    });
    let wait = |e: &mut Event, m: Map| -> Res<bool> {
        let m = options(Some(m), "Event.wait", &["timeout"])?;
        let t = timeout(&m, "Event.wait")?;
        flag(e.via.ask(CoordOp::WaitEvent { name: e.name.clone() }, Deadline::after(t))?)
    };
    engine.register_fn("wait", move |e: &mut Event| wait(e, Map::new()));
    engine.register_fn("wait", wait);
    engine.register_fn("is_set", |e: &mut Event| -> Res<bool> {
        flag(e.via.ask(CoordOp::IsSet { name: e.name.clone() }, Deadline::Now)?)
    });
    engine.register_get("name", |e: &mut Event| e.name.clone());
    engine.register_fn("to_string", |e: &mut Event| format!("Event('{}')", e.name));

    let r = via.clone();
    let semaphore = move |max: &Dynamic, n: &Dynamic| -> Res<Semaphore> {
        let max_leases = count_arg(max, "Semaphore", "max_leases", 1)?;
        let via = r("Semaphore")?;
        Ok(Semaphore { name: name_arg(n, "Semaphore")?, max_leases, holder: holder_for(&via), via })
    };
    let s = semaphore.clone();
    engine.register_fn("Semaphore", move |max: Dynamic, n: Dynamic| s(&max, &n));
    engine.register_fn("Semaphore", move |m: Map| -> Res<Semaphore> {
        let m = options(Some(m), "Semaphore", &["max_leases", "name"])?;
        let max = m.get("max_leases").cloned().unwrap_or(Dynamic::from(1_i64));
        let name = m.get("name").cloned().unwrap_or(Dynamic::UNIT);
        semaphore(&max, &name)
    });
    engine.register_fn("acquire", |s: &mut Semaphore| s.acquire(Map::new()));
    engine.register_fn("acquire", |s: &mut Semaphore, m: Map| s.acquire(m));
    engine.register_fn("release", |s: &mut Semaphore| -> Res<bool> {
        let op =
            CoordOp::ReleaseLease { semaphore: s.name.clone(), max_leases: s.max_leases, holder: s.holder };
        s.via.ask(op, Deadline::Never).map(|_| true)
    });
    engine.register_fn("get_value", |s: &mut Semaphore| -> Res<i64> {
        let op = CoordOp::Leases { semaphore: s.name.clone(), max_leases: s.max_leases };
        match s.via.ask(op, Deadline::Now)? {
            CoordReply::Count(n) => Ok(n as i64),
            other => Err(unexpected(&other)),
        }
    });
    engine.register_get("name", |s: &mut Semaphore| s.name.clone());
    engine.register_get("max_leases", |s: &mut Semaphore| s.max_leases as i64);
    engine.register_fn("to_string", |s: &mut Semaphore| {
        format!("Semaphore('{}', max_leases={})", s.name, s.max_leases)
    });

    let r = via.clone();
    engine.register_fn("publish_dataset", move |n: Dynamic, v: Dynamic| {
        publish(&r("publish_dataset")?, &n, v, Map::new())
    });
    let r = via.clone();
    engine.register_fn("publish_dataset", move |n: Dynamic, v: Dynamic, m: Map| {
        publish(&r("publish_dataset")?, &n, v, m)
    });
    let r = via.clone();
    engine.register_fn("publish_dataset", move |m: Map| publish_map(&r("publish_dataset")?, m));
    let r = via.clone();
    engine.register_fn("get_dataset", move |n: Dynamic| get_dataset(&r("get_dataset")?, &n));
    let r = via.clone();
    engine.register_fn("list_datasets", move || list_datasets(&r("list_datasets")?));
    engine.register_fn("unpublish_dataset", move |n: Dynamic| unpublish(&via("unpublish_dataset")?, &n));
}
