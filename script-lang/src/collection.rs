//! The collection protocol in scripts: every lazy script value (Array,
//! DataFrame, Series, Bag, Delayed) is reached through `Lazy`, and
//! `compute`, `persist`, `visualize` and `graph_info` are written once here
//! against the engine's `Collection` trait.

use std::collections::HashSet;
use std::sync::Arc;

use brisk_engine::Key;
use brisk_engine::Value;
use brisk_engine::collections::array::Array;
use brisk_engine::collections::bag::Bag;
use brisk_engine::collections::delayed::Delayed;
use brisk_engine::collections::frame::{DataFrame, Series};
use brisk_engine::collections::{Collection, check_results_fit};
use brisk_engine::graph::{LayerRef, materialize};
use brisk_engine::ops::{Arg, Op};
use rhai::{Array as RArray, Dynamic, Engine, EvalAltResult, Map};

use crate::convert::{MAX_DEPTH, to_dynamic};
use crate::error::runtime;
use crate::state::SessionState;
use crate::types::{LazyArray, LazyBag, LazyFrame, LazySeries, LocalFrame, LocalSeries};

type Res<T> = Result<T, Box<EvalAltResult>>;

/// A script type that wraps an engine collection.
pub trait ScriptCollection: Clone + Send + Sync + 'static {
    type Inner: Collection + Clone;
    fn inner(&self) -> &Self::Inner;
    fn wrap(inner: Self::Inner) -> Self;
}

/// A script type that is its engine collection plus nothing else.
macro_rules! wraps {
    ($script:ident, $inner:ty, $field:ident) => {
        impl ScriptCollection for $script {
            type Inner = $inner;
            fn inner(&self) -> &$inner {
                &self.$field
            }
            fn wrap($field: $inner) -> Self {
                $script { $field }
            }
        }
    };
}

wraps!(LazyArray, Array, a);
wraps!(LazyBag, Bag, b);
wraps!(LazyFrame, DataFrame, f);
wraps!(LazySeries, Series, s);

impl ScriptCollection for Delayed {
    type Inner = Delayed;
    fn inner(&self) -> &Delayed {
        self
    }
    fn wrap(d: Delayed) -> Self {
        d
    }
}

/// Any lazy script value.
pub enum Lazy {
    Array(Array),
    Bag(Bag),
    Frame(DataFrame),
    Series(Series),
    Delayed(Delayed),
}

impl Lazy {
    /// The lazy collection `d` is, if it is one.
    pub fn of(d: &Dynamic) -> Option<Lazy> {
        if let Some(x) = d.read_lock::<LazyArray>() {
            return Some(Lazy::Array(x.a.clone()));
        }
        if let Some(x) = d.read_lock::<LazyBag>() {
            return Some(Lazy::Bag(x.b.clone()));
        }
        if let Some(x) = d.read_lock::<LazyFrame>() {
            return Some(Lazy::Frame(x.f.clone()));
        }
        if let Some(x) = d.read_lock::<LazySeries>() {
            return Some(Lazy::Series(x.s.clone()));
        }
        d.read_lock::<Delayed>().map(|x| Lazy::Delayed(x.clone()))
    }

    /// Whether `d` is a lazy collection (without cloning it).
    pub fn is(d: &Dynamic) -> bool {
        d.is::<LazyArray>()
            || d.is::<LazyBag>()
            || d.is::<LazyFrame>()
            || d.is::<LazySeries>()
            || d.is::<Delayed>()
    }

    pub fn collection(&self) -> &dyn Collection {
        match self {
            Lazy::Array(x) => x,
            Lazy::Bag(x) => x,
            Lazy::Frame(x) => x,
            Lazy::Series(x) => x,
            Lazy::Delayed(x) => x,
        }
    }

    /// The computed value as the script sees it: a Series computes to a
    /// local Series, not a one-column frame.
    fn postcompute(&self, v: &Value) -> Dynamic {
        let d = to_dynamic(v);
        if let Lazy::Series(_) = self
            && let Some(f) = d.read_lock::<LocalFrame>()
        {
            return Dynamic::from(LocalSeries(f.0.clone()));
        }
        d
    }
}

/// Compute everything lazy inside `values` in one graph (shared work runs
/// once) and return the values with the results put in place. Arrays and
/// maps are looked into, as Dask does, down to `convert::MAX_DEPTH`.
pub fn compute_all(state: &SessionState, values: &[Dynamic]) -> Res<Vec<Dynamic>> {
    let mut found = Vec::new();
    for v in values {
        collect(v, &mut found, 0);
    }
    if found.is_empty() {
        return Ok(values.to_vec());
    }
    let all: Vec<&dyn Collection> = found.iter().map(Lazy::collection).collect();
    check_results_fit("compute", &all).map_err(|e| runtime(e.to_string()))?;
    let (layers, keys): (Vec<LayerRef>, Vec<Key>) = found.iter().map(|l| l.collection().finalize()).unzip();
    let results = state.compute(&layers, &keys)?;
    let mut it = found.iter().zip(results.iter());
    Ok(values.iter().map(|v| replace(v, &mut it, 0)).collect())
}

/// `x.compute()` of one value.
pub fn compute_one(state: &SessionState, v: Dynamic) -> Res<Dynamic> {
    let mut out = compute_all(state, &[v])?;
    Ok(out.pop().unwrap_or(Dynamic::UNIT))
}

fn collect(v: &Dynamic, found: &mut Vec<Lazy>, depth: usize) {
    if let Some(l) = Lazy::of(v) {
        found.push(l);
    } else if depth > MAX_DEPTH {
    } else if let Some(a) = v.read_lock::<RArray>() {
        a.iter().for_each(|x| collect(x, found, depth + 1));
    } else if let Some(m) = v.read_lock::<Map>() {
        m.values().for_each(|x| collect(x, found, depth + 1));
    }
}

fn replace<'a>(
    v: &Dynamic,
    results: &mut impl Iterator<Item = (&'a Lazy, &'a Value)>,
    depth: usize,
) -> Dynamic {
    if Lazy::is(v) {
        return results.next().map_or(Dynamic::UNIT, |(l, r)| l.postcompute(r));
    }
    if depth > MAX_DEPTH {
        return v.clone();
    }
    if let Some(a) = v.read_lock::<RArray>() {
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

/// `x.persist()`: compute the partitions now, keep them on the client,
/// and return the same kind of collection read from them (later graphs
/// read the results; nothing reruns).
pub fn persist<C: Collection>(state: &SessionState, c: &C) -> Res<C> {
    check_results_fit("persist", &[c]).map_err(|e| runtime(e.to_string()))?;
    let (layer, keys) = c.partitions();
    let futures = state.persist(&layer, &keys)?;
    Ok(c.persisted(keys, futures))
}

/// `compute`, `persist`, `visualize`, `graph_info` and `story` on a collection type.
pub fn register<T: ScriptCollection>(engine: &mut Engine, state: &Arc<SessionState>) {
    let st = state.clone();
    engine.register_fn("compute", move |x: &mut T| compute_one(&st, Dynamic::from(x.clone())));
    let st = state.clone();
    engine.register_fn("persist", move |x: &mut T| -> Res<T> { persist(&st, x.inner()).map(T::wrap) });
    engine.register_fn("visualize", |x: &mut T, path: &str| -> Res<()> {
        let (layer, _) = x.inner().partitions();
        write_graph(&materialize(std::slice::from_ref(&layer)), path)
    });
    engine.register_fn("graph_info", |x: &mut T| {
        let mut m = graph_info(&x.inner().partitions().0);
        // Dask's nbytes: the result's size, where its shape and type say it.
        let bytes = x
            .inner()
            .result_bytes()
            .map_or(Dynamic::UNIT, |(b, _)| Dynamic::from_int(i64::try_from(b).unwrap_or(i64::MAX)));
        m.insert("bytes".into(), bytes);
        m
    });
    let st = state.clone();
    engine.register_fn("story", move |x: &mut T| st.story(&x.inner().partitions().1));
}

/// `x.graph_info()`: tasks, layers and literal bytes of the graph behind
/// `root`; `bytes`, the result's size, is unknown (`()`) here.
pub fn graph_info(root: &LayerRef) -> Map {
    let g = materialize(std::slice::from_ref(root));
    let mut m = Map::new();
    m.insert("tasks".into(), Dynamic::from_int(g.len() as i64));
    m.insert("layers".into(), Dynamic::from_int(layer_count(root) as i64));
    // Literal data carried in the graph (shipped with it to workers).
    let nbytes: u64 = g.tasks().iter().map(|t| literal_bytes(&t.op)).sum();
    m.insert("literal_bytes".into(), Dynamic::from_int(nbytes as i64));
    m.insert("bytes".into(), Dynamic::UNIT);
    m
}

/// How many distinct layers (by name) are reachable from `root`.
pub fn layer_count(root: &LayerRef) -> usize {
    let mut names = HashSet::new();
    let mut seen = HashSet::new();
    let mut stack = vec![root];
    while let Some(l) = stack.pop() {
        if seen.insert(Arc::as_ptr(l)) {
            names.insert(l.name.clone());
            stack.extend(l.deps.iter());
        }
    }
    names.len()
}

fn literal_bytes(op: &Op) -> u64 {
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

/// Write a task graph for `visualize`: Graphviz text for `.dot`, and an
/// image through the `dot` program for `.svg`/`.png` when it is installed.
pub fn write_graph(graph: &brisk_engine::Graph, path: &str) -> Result<(), Box<rhai::EvalAltResult>> {
    let text = brisk_engine::graph::dot::to_dot(graph);
    let ext = std::path::Path::new(path).extension().and_then(|e| e.to_str()).unwrap_or("");
    match ext {
        "dot" | "gv" => {
            std::fs::write(path, text).map_err(|e| runtime(format!("visualize: cannot write {path}: {e}")))
        }
        "svg" | "png" | "pdf" => {
            use std::io::Write;
            let mut child = std::process::Command::new("dot")
                .arg(format!("-T{ext}"))
                .arg("-o")
                .arg(path)
                .stdin(std::process::Stdio::piped())
                .spawn()
                .map_err(|e| {
                    runtime(format!(
                        "visualize: writing {path} needs Graphviz's `dot` program ({e}); write a .dot file instead"
                    ))
                })?;
            if let Some(mut stdin) = child.stdin.take() {
                stdin
                    .write_all(text.as_bytes())
                    .map_err(|e| runtime(format!("visualize: dot failed: {e}")))?;
            }
            let status = child.wait().map_err(|e| runtime(format!("visualize: dot failed: {e}")))?;
            if status.success() {
                Ok(())
            } else {
                Err(runtime(format!("visualize: dot could not write {path} ({status})")))
            }
        }
        other => Err(runtime(format!(
            "visualize: unknown file type \"{other}\" for {path} (use .dot, or .svg/.png/.pdf with Graphviz installed)"
        ))),
    }
}
