//! Building task arguments from script values: lazy values and futures
//! inside the arguments (also inside arrays and maps) become dependencies,
//! everything else a literal; all of it feeds the deterministic token.

use brisk_engine::Future;
use brisk_engine::Key;
use brisk_engine::graph::{LayerRef, Tokenizer};
use brisk_engine::ops::Arg;
use rhai::{Array, Dynamic, Map};
use std::collections::HashMap as FxHashMap;

use crate::collection::Lazy;
use crate::convert::{ConvertError, to_value};
use crate::error::{ApiError, runtime};

type Res<T> = Result<T, Box<rhai::EvalAltResult>>;
use crate::print::display_scalar;
use crate::types::{RFuture, type_name};

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

    pub fn arg(&mut self, d: &Dynamic, what: &str) -> Result<Arg, ConvertError> {
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
            let a = d
                .read_lock::<Array>()
                .ok_or_else(|| ConvertError::Locked { what: what.into(), kind: "array" })?
                .clone();
            self.token.str("list").u64(a.len() as u64);
            let items = a.iter().map(|x| self.arg(x, what)).collect::<Result<Vec<_>, _>>()?;
            return Ok(Arg::List(items));
        }
        if d.is_map() && contains_lazy(d, 0) {
            let m = d
                .read_lock::<Map>()
                .ok_or_else(|| ConvertError::Locked { what: what.into(), kind: "map" })?
                .clone();
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
    state: &crate::state::SessionState,
    f: &rhai::FnPtr,
) -> Result<(std::sync::Arc<brisk_engine::runner::Udf>, String), Box<rhai::EvalAltResult>> {
    let udf = crate::ship::ship(f, state.code())?;
    let mut t = Tokenizer::new();
    t.str(&udf.entry).u64(state.fn_source(&udf.entry).unwrap_or(0));
    udf.curry.iter().for_each(|c| {
        t.value(c);
    });
    Ok((std::sync::Arc::new(udf), t.finish()))
}

/// The trailing options map of `function`, refusing keys it does not know.
pub fn options(m: Option<Map>, function: &str, allowed: &[&str]) -> Result<Map, ApiError> {
    let m = m.unwrap_or_default();
    if let Some(k) = m.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(ApiError::UnknownOption {
            function: function.to_string(),
            option: k.to_string(),
            allowed: allowed.join(", "),
        });
    }
    Ok(m)
}

/// "expected X, got a T (value)" for a wrongly typed argument.
pub fn wrong_type(function: &str, expected: &str, got: &Dynamic) -> Box<rhai::EvalAltResult> {
    wrong_type_error(function, expected, got).into()
}

/// The typed error behind `wrong_type`.
pub fn wrong_type_error(function: &str, expected: &str, got: &Dynamic) -> ApiError {
    let shown = display_scalar(got);
    let shown = if shown.chars().count() > 40 {
        format!("{}…", shown.chars().take(40).collect::<String>())
    } else {
        shown
    };
    ApiError::WrongType {
        function: function.to_string(),
        expected: expected.to_string(),
        got: type_name(got),
        shown,
    }
}

/// The context builders take: the annotations in force.
pub(super) fn ctx(state: &crate::state::SessionState) -> brisk_engine::collections::array::Ctx {
    brisk_engine::collections::array::Ctx { annotations: state.annotations(), gpu: state.gpu_backend() }
}

/// `"10MB"`, `"64 KiB"`, or a number of bytes (Dask's `parse_bytes`).
pub(super) fn bytes_arg(d: &Dynamic, what: &str) -> Res<u64> {
    if d.is_int() {
        return positive(d, what).map(|n| n as u64);
    }
    let Ok(s) = d.clone().into_string() else {
        return Err(runtime(format!("{what} must be a number of bytes or a size like \"64MB\", got {d}")));
    };
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "kib" => 1024.0,
        "mib" => 1048576.0,
        "gib" => 1073741824.0,
        _ => return Err(runtime(format!("{what}: unknown unit in \"{s}\" (B, kB, MB, GB, KiB, MiB, GiB)"))),
    };
    match num.parse::<f64>() {
        Ok(v) if v * scale >= 1.0 => Ok((v * scale) as u64),
        _ => Err(runtime(format!("{what} must be a positive size, got \"{s}\""))),
    }
}

pub(super) fn positive(d: &Dynamic, what: &str) -> Res<usize> {
    match d.as_int() {
        Ok(n) if n > 0 => Ok(n as usize),
        _ => Err(runtime(format!("{what} must be a positive integer, got {d}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_typed_and_keep_their_messages() {
        let mut m = Map::new();
        m.insert("blocksize".into(), Dynamic::from_int(1));
        m.insert("colour".into(), Dynamic::from_int(1));
        let e = options(Some(m), "read_csv", &["blocksize", "sep"]).expect_err("unknown option");
        assert_eq!(
            e,
            ApiError::UnknownOption {
                function: "read_csv".into(),
                option: "colour".into(),
                allowed: "blocksize, sep".into()
            }
        );
        assert_eq!(e.to_string(), "read_csv has no option \"colour\" (options: blocksize, sep)");
        let e = wrong_type_error("delayed", "a function", &Dynamic::from_int(3));
        assert!(matches!(&e, ApiError::WrongType { got, .. } if got == "i64"), "{e:?}");
        assert_eq!(e.to_string(), "delayed expects a function, got i64 (3)");
    }
}
