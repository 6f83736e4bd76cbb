//! `delayed(f)`, `d.call(...)`, `delayed_value(v)`, `compute(...)`,
//! operators and indexing on lazy values (dask.delayed).

use std::sync::Arc;

use brisk_engine::Key;
use brisk_engine::graph::{Layer, Pin, Task};
use brisk_engine::ops::{Builtin, Func, Op};
use rhai::{Array, Dynamic, Engine, EvalAltResult, FnPtr};

use super::args::ArgBuilder;
use super::args::wrong_type;
use super::fndoc::{FnDoc, doc};
use crate::collection::compute_all;
use crate::error::runtime;
use crate::print::display_scalar;
use crate::state::SessionState;
use crate::types::{Delayed, DelayedFn, type_name};

type Res<T> = Result<T, Box<EvalAltResult>>;

/// Build one task calling `func` on `args`; its key is `<label>-<token>`.
pub fn call_task(state: &SessionState, func: &Func, label: &str, args: &[Dynamic]) -> Res<Delayed> {
    call_task_salted(state, func, label, args, None)
}

/// [`call_task`], with `salt` mixed into the key: a call with effects
/// (Dask's `pure=False`) is a new task each time.
pub fn call_task_salted(
    state: &SessionState,
    func: &Func,
    label: &str,
    args: &[Dynamic],
    salt: Option<u64>,
) -> Res<Delayed> {
    let mut b = ArgBuilder::default();
    b.token.str(label);
    if let Some(s) = salt {
        b.token.u64(s);
    }
    match func {
        Func::Udf(u) => {
            // The function's own source, not the whole session's: the same
            // call typed in a later input is the same task.
            b.token.str(&u.entry).u64(state.fn_source(&u.entry).unwrap_or(0));
            for c in &u.curry {
                b.token.value(c);
            }
        }
        Func::Builtin(x) => {
            b.token.str(x.name());
        }
        Func::Array(op) => {
            b.token.serde(op);
        }
        Func::Bag(op) => {
            b.token.serde(op);
        }
        Func::Block(op) => {
            b.token.serde(op);
        }
        Func::Frame(op) => {
            b.token.serde(op);
        }
    }
    let mut built = Vec::with_capacity(args.len());
    for (i, a) in args.iter().enumerate() {
        built.push(b.arg(a, &format!("argument {} of '{label}'", i + 1))?);
    }
    let name = b.token.name(label);
    let key = Key::new(name.as_str());
    let mut task = Task::new(key.clone(), Op::Call { func: func.clone(), args: built }, b.deps);
    task.annotations = state.annotations();
    // Futures among the arguments stay alive as long as this task's layer.
    let pins: Vec<Pin> = if b.futures.is_empty() { Vec::new() } else { vec![Arc::new(b.futures)] };
    let layer = Layer::pinned(name, vec![task], b.layers, pins);
    Ok(Delayed { layer, key })
}

fn value_task(state: &SessionState, v: &Dynamic) -> Res<Delayed> {
    if let Some(d) = v.read_lock::<Delayed>() {
        return Ok(d.clone());
    }
    let d = call_task(state, &Func::Builtin(Builtin::Identity), "literal", std::slice::from_ref(v))?;
    Ok(d)
}

/// The native function behind a lazy function's `d.call(...)`. Rhai reserves
/// `.call` for function pointers, so `delayed(f)` returns a pointer to this
/// function with the `DelayedFn` curried in.
const CALL: &str = "delayed_call";

macro_rules! register_call {
    ($engine:ident, $state:ident; $($a:ident),*) => {{
        let st = $state.clone();
        $engine.register_fn(CALL, move |f: DelayedFn, $($a: Dynamic),*| -> Res<Delayed> {
            call_task(&st, &f.func, &f.label, &[$($a),*])
        });
    }};
}

/// `delayed(f)`: a function pointer whose calls build lazy tasks.
fn lazy_fn(state: &SessionState, f: &FnPtr) -> Res<FnPtr> {
    let d = DelayedFn::from_fn_ptr(state, f)?;
    let mut p = FnPtr::new(CALL)?;
    p.add_curry(Dynamic::from(d));
    Ok(p)
}

macro_rules! register_compute {
    ($engine:ident, $state:ident; $($a:ident),+) => {{
        let st = $state.clone();
        $engine.register_fn("compute", move |$($a: Dynamic),+| -> Res<Array> {
            compute_all(&st, &[$($a),+])
        });
    }};
}

macro_rules! register_binop {
    ($engine:ident, $state:ident, $op:literal, $b:expr) => {{
        let st = $state.clone();
        $engine.register_fn($op, move |x: Delayed, y: Dynamic| -> Res<Delayed> {
            call_task(&st, &Func::Builtin($b), $b.name(), &[Dynamic::from(x), y])
        });
        let st = $state.clone();
        $engine.register_fn($op, move |x: Dynamic, y: Delayed| -> Res<Delayed> {
            call_task(&st, &Func::Builtin($b), $b.name(), &[x, Dynamic::from(y)])
        });
        let st = $state.clone();
        $engine.register_fn($op, move |x: Delayed, y: Delayed| -> Res<Delayed> {
            call_task(&st, &Func::Builtin($b), $b.name(), &[Dynamic::from(x), Dynamic::from(y)])
        });
    }};
}

impl DelayedFn {
    pub fn from_fn_ptr(state: &SessionState, f: &FnPtr) -> Res<DelayedFn> {
        let udf = crate::ship::ship(f, state.code())?;
        Ok(DelayedFn { label: udf.label.clone(), func: Func::Udf(Arc::new(udf)) })
    }
}

/// This area's entries of the API reference (`docs::all` chains the areas
/// in the order of the guide), with the collection protocol that
/// `collection.rs` registers for every collection (`x.compute()`,
/// `persist`, `visualize`, `graph_info`).
pub(super) const DOCS: &[FnDoc] = &[
    doc(
        "delayed",
        "delayed(f) -> function",
        "Make a function lazy: `d.call(args...)` builds a task instead of running it. Arguments may be lazy values, futures, or arrays and maps holding them (dask.delayed).",
        "fn inc(x) { x + 1 }\nlet d = delayed(inc);\nlet x = d.call(1);\nx.compute()",
    ),
    doc(
        "delayed_value",
        "delayed_value(v) -> Delayed",
        "Wrap a plain value (or an array of lazy values) as a lazy value.",
        "let v = delayed_value([1, 2, 3]);\nv.compute()",
    ),
    doc(
        "compute",
        "compute(a, b, ...) -> array | x.compute() -> value",
        "Run lazy values in one graph, so shared work runs once. With one lazy value (or as a method) it returns the value; with several, an array. Arrays and maps are searched for lazy values.",
        "let a = delayed(|x| x * 2).call(21);\ncompute(a + 1, a - 1)",
    ),
    doc(
        "persist",
        "x.persist() -> same kind of collection",
        "Compute now and keep the result in memory; later graphs read it instead of recomputing.",
        "let x = delayed(|v| v * 2).call(21).persist();\ncompute(x + 1, x * 2)",
    ),
    doc(
        "visualize",
        "x.visualize(path)",
        "Write the task graph as Graphviz: `.dot` text, or `.svg`/`.png`/`.pdf` when the `dot` program is installed.",
        "let x = delayed(|v| v + 1).call(1);\nx.visualize(\"/tmp/brisk-doc-graph.dot\")",
    ),
    doc(
        "graph_info",
        "x.graph_info() -> map",
        "Tasks and layers of a lazy value's graph; `bytes`, the size its result will have where its shape and type say it (an array's, as Dask's nbytes; `()` for a frame, a bag or a Delayed), and `literal_bytes`, the data the graph itself carries.",
        "delayed(|v| v + 1).call(1).graph_info()",
    ),
    doc(
        "key",
        "x.key / f.key",
        "The key of a lazy value or future: `<name>-<token>`.",
        "delayed(|v| v).call(1).key",
    ),
];

pub fn register(engine: &mut Engine, state: &Arc<SessionState>) {
    engine.register_type_with_name::<Delayed>("Delayed");
    engine.register_type_with_name::<DelayedFn>("DelayedFunction");
    let st = state.clone();
    engine.register_fn("delayed", move |f: FnPtr| lazy_fn(&st, &f));
    engine.register_fn("delayed", |d: Delayed| d);
    engine.register_fn("delayed", |x: Dynamic| -> Res<Delayed> {
        Err(wrong_type("delayed", "a function or a lazy value (use delayed_value for data)", &x))
    });
    let st = state.clone();
    engine.register_fn("delayed_value", move |v: Dynamic| value_task(&st, &v));
    register_call!(engine, state;);
    register_call!(engine, state; a);
    register_call!(engine, state; a, b);
    register_call!(engine, state; a, b, c);
    register_call!(engine, state; a, b, c, d);
    register_call!(engine, state; a, b, c, d, e);
    register_call!(engine, state; a, b, c, d, e, f);
    register_call!(engine, state; a, b, c, d, e, f, g);
    register_call!(engine, state; a, b, c, d, e, f, g, h);
    register_compute!(engine, state; a);
    register_compute!(engine, state; a, b);
    register_compute!(engine, state; a, b, c);
    register_compute!(engine, state; a, b, c, d);
    register_compute!(engine, state; a, b, c, d, e);
    register_compute!(engine, state; a, b, c, d, e, f);
    register_compute!(engine, state; a, b, c, d, e, f, g);
    register_compute!(engine, state; a, b, c, d, e, f, g, h);
    crate::collection::register::<Delayed>(engine, state);
    register_binop!(engine, state, "+", Builtin::Add);
    register_binop!(engine, state, "-", Builtin::Sub);
    register_binop!(engine, state, "*", Builtin::Mul);
    register_binop!(engine, state, "/", Builtin::Div);
    register_binop!(engine, state, "%", Builtin::Rem);
    let st = state.clone();
    engine.register_fn("-", move |x: Delayed| -> Res<Delayed> {
        call_task(&st, &Func::Builtin(Builtin::Neg), "neg", &[Dynamic::from(x)])
    });
    let st = state.clone();
    engine.register_indexer_get(move |x: &mut Delayed, i: Dynamic| -> Res<Delayed> {
        if !(i.is_int() || i.is_string()) {
            return Err(runtime(format!(
                "a Delayed value can be indexed by an int or a string, not {}",
                type_name(&i)
            )));
        }
        call_task(&st, &Func::Builtin(Builtin::GetItem), "getitem", &[Dynamic::from(x.clone()), i])
    });
    engine.register_get("key", |d: &mut Delayed| d.key.to_string());
    engine.register_fn("to_string", |d: &mut Delayed| display_scalar(&Dynamic::from(d.clone())));
    engine.register_fn("to_debug", |d: &mut Delayed| display_scalar(&Dynamic::from(d.clone())));
}
