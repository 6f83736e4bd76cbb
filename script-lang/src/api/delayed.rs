//! `delayed(f)`, `d.call(...)`, `delayed_value(v)`, `compute(...)`,
//! operators and indexing on lazy values (dask.delayed).

use std::sync::Arc;

use brisk_engine::graph::{Layer, LayerRef, Task, materialize};
use brisk_engine::local::{Future, gather};
use brisk_engine::ops::{Builtin, Func, Op};
use brisk_engine::{Graph, Key};
use rhai::{Array, Dynamic, Engine, EvalAltResult, FnPtr, Map};

use super::args::{ArgBuilder, collection_of};
use crate::convert::to_dynamic;
use crate::error::{engine_error, runtime};
use crate::session::SessionState;

type Res<T> = Result<T, Box<EvalAltResult>>;

/// A lazy value: the layer that computes it and its key. Holds the futures
/// it reads so that their results stay alive until it is computed.
#[derive(Clone)]
pub struct Delayed {
    pub layer: LayerRef,
    pub key: Key,
    pub held: Arc<Vec<Future>>,
}

/// A function made lazy by `delayed(f)`.
#[derive(Clone)]
pub struct DelayedFn {
    pub func: Func,
    pub label: String,
}

impl DelayedFn {
    pub fn from_fn_ptr(state: &SessionState, f: &FnPtr) -> Res<DelayedFn> {
        let udf = crate::ship::ship(f, state.code()).map_err(runtime)?;
        Ok(DelayedFn { label: udf.label.clone(), func: Func::Udf(Arc::new(udf)) })
    }
}

/// Build one task calling `func` on `args`; its key is `<label>-<token>`.
pub fn call_task(state: &SessionState, func: &Func, label: &str, args: &[Dynamic]) -> Res<Delayed> {
    let mut b = ArgBuilder::default();
    b.token.str(label);
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
        Func::Frame(op) => {
            b.token.serde(op);
        }
    }
    let mut built = Vec::with_capacity(args.len());
    for (i, a) in args.iter().enumerate() {
        built.push(b.arg(a, &format!("argument {} of '{label}'", i + 1)).map_err(runtime)?);
    }
    let name = b.token.name(label);
    let key = Key::new(name.as_str());
    let mut task = Task::new(key.clone(), Op::Call { func: func.clone(), args: built }, b.deps);
    task.annotations = state.annotations();
    let layer = Layer::new(name, vec![task], b.layers);
    Ok(Delayed { layer, key, held: Arc::new(b.futures) })
}

fn value_task(state: &SessionState, v: &Dynamic) -> Res<Delayed> {
    if let Some(d) = v.read_lock::<Delayed>() {
        return Ok(d.clone());
    }
    let d = call_task(state, &Func::Builtin(Builtin::Identity), "literal", std::slice::from_ref(v))?;
    Ok(d)
}

/// Compute everything lazy inside `values` in one graph (shared work runs
/// once) and return the values with the results put in place.
pub fn compute_all(state: &SessionState, values: &[Dynamic]) -> Res<Vec<Dynamic>> {
    let mut layers = Vec::new();
    let mut outputs = Vec::new();
    for v in values {
        collect(v, &mut layers, &mut outputs, 0);
    }
    if outputs.is_empty() {
        return Ok(values.to_vec());
    }
    let graph: Graph = materialize(&layers);
    let runtime = state.runtime();
    let futures = runtime.submit(graph, &outputs).map_err(engine_error)?;
    let results = gather(&futures, &state.cancel).map_err(engine_error)?;
    drop(futures);
    let mut it = results.iter();
    Ok(values.iter().map(|v| replace(v, &mut it, 0)).collect())
}

/// Lazy values inside `v` (arrays and maps are traversed, as Dask does,
/// down to `convert::MAX_DEPTH`).
fn collect(v: &Dynamic, layers: &mut Vec<LayerRef>, outputs: &mut Vec<Key>, depth: usize) {
    if let Some((layer, key)) = collection_of(v) {
        layers.push(layer);
        outputs.push(key);
    } else if depth > crate::convert::MAX_DEPTH {
    } else if let Some(a) = v.read_lock::<Array>() {
        a.iter().for_each(|x| collect(x, layers, outputs, depth + 1));
    } else if let Some(m) = v.read_lock::<Map>() {
        m.values().for_each(|x| collect(x, layers, outputs, depth + 1));
    }
}

fn replace<'a>(
    v: &Dynamic,
    results: &mut impl Iterator<Item = &'a brisk_engine::Value>,
    depth: usize,
) -> Dynamic {
    if collection_of(v).is_some() {
        let r = results.next().map(to_dynamic).unwrap_or(Dynamic::UNIT);
        // A Series computes to a local Series, not a one-column frame.
        if v.is::<super::LazySeries>()
            && let Some(f) = r.read_lock::<super::LocalFrame>()
        {
            return Dynamic::from(super::LocalSeries(f.0.clone()));
        }
        return r;
    }
    if depth > crate::convert::MAX_DEPTH {
        return v.clone();
    }
    if let Some(a) = v.read_lock::<Array>() {
        return Dynamic::from_array(a.iter().map(|x| replace(x, results, depth + 1)).collect());
    }
    if let Some(m) = v.read_lock::<Map>() {
        let mut out = Map::new();
        for (k, x) in m.iter() {
            out.insert(k.clone(), replace(x, results, depth + 1));
        }
        return Dynamic::from_map(out);
    }
    v.clone()
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

pub fn register(engine: &mut Engine, state: &Arc<SessionState>) {
    engine.register_type_with_name::<Delayed>("Delayed");
    engine.register_type_with_name::<DelayedFn>("DelayedFunction");
    let st = state.clone();
    engine.register_fn("delayed", move |f: FnPtr| lazy_fn(&st, &f));
    engine.register_fn("delayed", |d: Delayed| d);
    engine.register_fn("delayed", |x: Dynamic| -> Res<Delayed> {
        Err(super::wrong_type("delayed", "a function or a lazy value (use delayed_value for data)", &x))
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
    let st = state.clone();
    engine.register_fn("compute", move |d: &mut Delayed| -> Res<Dynamic> {
        let mut out = compute_all(&st, &[Dynamic::from(d.clone())])?;
        Ok(out.pop().unwrap_or(Dynamic::UNIT))
    });
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
                super::type_name(&i)
            )));
        }
        call_task(&st, &Func::Builtin(Builtin::GetItem), "getitem", &[Dynamic::from(x.clone()), i])
    });
    engine.register_get("key", |d: &mut Delayed| d.key.to_string());
    let st = state.clone();
    engine.register_fn("persist", move |d: &mut Delayed| persist(&st, d));
    engine.register_fn("visualize", |d: &mut Delayed, path: &str| -> Res<()> {
        let graph = materialize(std::slice::from_ref(&d.layer));
        super::write_graph(&graph, path)
    });
    engine.register_fn("graph_info", |d: &mut Delayed| graph_info(&d.layer));
    engine.register_fn("to_string", |d: &mut Delayed| super::display_scalar(&Dynamic::from(d.clone())));
    engine.register_fn("to_debug", |d: &mut Delayed| super::display_scalar(&Dynamic::from(d.clone())));
}

/// `x.graph_info()`: tasks, layers and literal bytes of the graph behind `root`.
pub fn graph_info(root: &LayerRef) -> Map {
    let g = materialize(std::slice::from_ref(root));
    let mut m = Map::new();
    m.insert("tasks".into(), Dynamic::from_int(g.len() as i64));
    m.insert("layers".into(), Dynamic::from_int(layer_count(root) as i64));
    // Literal data carried in the graph (shipped with it to workers).
    let nbytes: u64 = g.tasks().iter().map(|t| literal_bytes(&t.op)).sum();
    m.insert("bytes".into(), Dynamic::from_int(nbytes as i64));
    m
}

/// How many distinct layers are reachable from `root`.
pub fn layer_count(root: &LayerRef) -> usize {
    let mut names = layer_names(root);
    names.sort_unstable();
    names.dedup();
    names.len()
}

/// Names of every layer reachable from `root`.
fn layer_names(root: &LayerRef) -> Vec<Arc<str>> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![root];
    while let Some(l) = stack.pop() {
        if seen.insert(Arc::as_ptr(l)) {
            out.push(l.name.clone());
            stack.extend(l.deps.iter());
        }
    }
    out
}

fn literal_bytes(op: &Op) -> u64 {
    use brisk_engine::ops::Arg;
    fn arg(a: &Arg) -> u64 {
        match a {
            Arg::Lit(v) => v.nbytes(),
            Arg::List(xs) => xs.iter().map(arg).sum(),
            Arg::Map(xs) => xs.iter().map(|(_, x)| arg(x)).sum(),
            Arg::Dep(_) => 0,
        }
    }
    match op {
        Op::Literal(v) => v.nbytes(),
        Op::Call { args, .. } => args.iter().map(arg).sum(),
        Op::Fused(steps) => steps.iter().map(|s| literal_bytes(&s.op)).sum(),
    }
}

/// `x.persist()`: compute now, keep the result in the runtime's memory, and
/// return a lazy value backed by it (later graphs read it, nothing reruns).
fn persist(state: &SessionState, d: &Delayed) -> Res<Delayed> {
    let graph = materialize(std::slice::from_ref(&d.layer));
    let mut futures = state.runtime().submit(graph, std::slice::from_ref(&d.key)).map_err(engine_error)?;
    let future = futures.pop().ok_or_else(|| runtime("persist got no future"))?;
    // The local scheduler persists synchronously, as Dask's local schedulers do.
    future.result(&state.cancel).map_err(engine_error)?;
    let layer = Layer::new(format!("persisted-{}", d.key), Vec::new(), Vec::new());
    Ok(Delayed { layer, key: d.key.clone(), held: Arc::new(vec![future]) })
}
