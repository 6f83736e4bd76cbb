//! Building task arguments from script values: lazy values and futures
//! inside the arguments (also inside arrays and maps) become dependencies,
//! everything else a literal; all of it feeds the deterministic token.

use brisk_engine::Future;
use brisk_engine::Key;
use brisk_engine::graph::{LayerRef, Tokenizer};
use brisk_engine::ops::Arg;
use rhai::{Array, Dynamic, Map};
use std::collections::HashMap as FxHashMap;

use super::RFuture;
use crate::collection::Lazy;
use crate::convert::to_value;

#[derive(Default)]
pub struct ArgBuilder {
    pub deps: Vec<Key>,
    index: FxHashMap<Key, u32>,
    pub layers: Vec<LayerRef>,
    pub futures: Vec<Future>,
    pub token: Tokenizer,
}

impl ArgBuilder {
    fn dep(&mut self, key: Key) -> Arg {
        self.token.key(&key);
        if let Some(&i) = self.index.get(&key) {
            return Arg::Dep(i);
        }
        let i = self.deps.len() as u32;
        self.index.insert(key.clone(), i);
        self.deps.push(key);
        Arg::Dep(i)
    }

    pub fn arg(&mut self, d: &Dynamic, what: &str) -> Result<Arg, String> {
        if let Some(lazy) = Lazy::of(d) {
            // The computed value, as `compute` would give it.
            let (layer, key) = lazy.collection().finalize();
            self.layers.push(layer);
            return Ok(self.dep(key));
        }
        if let Some(f) = d.read_lock::<RFuture>() {
            self.futures.push(f.0.clone());
            return Ok(self.dep(f.0.key().clone()));
        }
        if d.is_array() && contains_lazy(d, 0) {
            let a = d.read_lock::<Array>().ok_or("array is locked")?.clone();
            self.token.str("list").u64(a.len() as u64);
            let items = a.iter().map(|x| self.arg(x, what)).collect::<Result<Vec<_>, _>>()?;
            return Ok(Arg::List(items));
        }
        if d.is_map() && contains_lazy(d, 0) {
            let m = d.read_lock::<Map>().ok_or("map is locked")?.clone();
            self.token.str("map").u64(m.len() as u64);
            let mut items = Vec::with_capacity(m.len());
            for (k, x) in m.iter() {
                self.token.str(k);
                items.push((k.to_string(), self.arg(x, what)?));
            }
            return Ok(Arg::Map(items));
        }
        let v = to_value(d, what)?;
        self.token.value(&v);
        Ok(Arg::Lit(v))
    }
}

/// Whether a value holds a lazy value or future anywhere inside (not
/// looking deeper than values may nest, see `convert::MAX_DEPTH`).
fn contains_lazy(d: &Dynamic, depth: usize) -> bool {
    if Lazy::is(d) || d.is::<RFuture>() {
        return true;
    }
    if depth > crate::convert::MAX_DEPTH {
        return false;
    }
    if let Some(a) = d.read_lock::<Array>() {
        return a.iter().any(|x| contains_lazy(x, depth + 1));
    }
    if let Some(m) = d.read_lock::<Map>() {
        return m.values().any(|x| contains_lazy(x, depth + 1));
    }
    false
}

/// A closure in shipped form and the token that identifies it (its own
/// source and captures, not the whole session's).
pub fn shipped(
    state: &crate::SessionState,
    f: &rhai::FnPtr,
) -> Result<(std::sync::Arc<brisk_engine::runner::Udf>, String), Box<rhai::EvalAltResult>> {
    let udf = crate::ship::ship(f, state.code()).map_err(crate::error::runtime)?;
    let mut t = Tokenizer::new();
    t.str(&udf.entry).u64(state.fn_source(&udf.entry).unwrap_or(0));
    udf.curry.iter().for_each(|c| {
        t.value(c);
    });
    Ok((std::sync::Arc::new(udf), t.finish()))
}

/// The trailing options map of `function`, refusing keys it does not know.
pub fn options(m: Option<Map>, function: &str, allowed: &[&str]) -> Result<Map, Box<rhai::EvalAltResult>> {
    let m = m.unwrap_or_default();
    if let Some(k) = m.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(crate::error::runtime(format!(
            "{function} has no option \"{k}\" (options: {})",
            allowed.join(", ")
        )));
    }
    Ok(m)
}
