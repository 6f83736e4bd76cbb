//! Collections and their partitions as `Delayed` values, and back, as
//! Dask's `to_delayed` / `from_delayed`: `b.to_delayed()`,
//! `df.to_delayed()` and `x.to_delayed()` give one Delayed per partition
//! (per block, nested by the block grid, for arrays); `from_delayed(list)`
//! makes a bag of them, `from_delayed(list, #{meta})` a DataFrame.

use std::sync::Arc;

use brisk_engine::array::dtype::DType;
use brisk_engine::collections::Collection;
use brisk_engine::collections::bag as cb;
use brisk_engine::collections::frame::DataFrame;
use brisk_engine::frame::dtype::Schema;
use rhai::{Array as RArray, Dynamic, Engine, EvalAltResult, Map};

use super::args::{ctx, options};
use super::array_args::{dtype_arg, err as array_err, shape_arg};
use super::dataframe::{dtype_of, err};
use super::fndoc::{FnDoc, doc};
use crate::error::runtime;
use crate::state::SessionState;
use crate::types::{Delayed, LazyArray, LazyBag, LazyFrame};

type Res<T> = Result<T, Box<EvalAltResult>>;

/// This area's entries of the API reference.
pub(super) const DOCS: &[FnDoc] = &[
    doc(
        "to_delayed",
        "b.to_delayed() / df.to_delayed() / x.to_delayed() -> array of Delayed",
        "One Delayed per partition (a bag's records as an array, a frame's rows as a LocalDataFrame), or per block of an array, nested as the block grid, as Dask's to_delayed; pass them to `delayed` functions or back to `from_delayed`.",
        "let parts = from_sequence([1, 2, 3, 4], #{npartitions: 2}).to_delayed();\nparts[1].compute()",
    ),
    doc(
        "from_delayed",
        "from_delayed(values) -> Bag / from_delayed(values, #{meta}) -> DataFrame / from_delayed(value, #{shape, dtype}) -> Array",
        "A bag whose partitions are the values (each an array of records), as db.from_delayed; with `meta` (a map of column to dtype), a DataFrame whose partitions are the values (each a frame, an array of row maps or a row map, made one of `meta`'s columns and types), as dd.from_delayed; one Delayed with `shape` (and `dtype`, float64 by default), a one-block Array of what it gives (an ndarray or nested lists of numbers, checked against the shape when it runs), as da.from_delayed — stack or concatenate several.",
        "let rows = delayed(|n| { let r = []; for i in 0..n { r.push(#{i: i}); } r });\nfrom_delayed([rows.call(2), rows.call(3)], #{meta: #{i: \"int64\"}}).compute()",
    ),
];

fn delayed_of(layer: &brisk_engine::graph::LayerRef, keys: Vec<brisk_engine::Key>) -> RArray {
    keys.into_iter().map(|key| Dynamic::from(Delayed { layer: layer.clone(), key })).collect()
}

fn parts_of(values: &RArray) -> Res<Vec<(brisk_engine::graph::LayerRef, brisk_engine::Key)>> {
    values
        .iter()
        .enumerate()
        .map(|(i, d)| {
            d.read_lock::<Delayed>()
                .map(|d| (d.layer.clone(), d.key.clone()))
                .ok_or_else(|| runtime(format!("from_delayed: item {i} is {}, not a Delayed", d.type_name())))
        })
        .collect()
}

fn frame_from(state: &SessionState, values: &RArray, m: Map) -> Res<LazyFrame> {
    let m = options(Some(m), "from_delayed", &["meta"])?;
    let meta = m.get("meta").ok_or_else(|| runtime("from_delayed: give #{meta: #{column: dtype}}"))?;
    let meta =
        meta.read_lock::<Map>().ok_or_else(|| runtime("from_delayed: meta is a map of column to dtype"))?;
    let cols = meta
        .iter()
        .map(|(k, v)| Ok((k.to_string(), dtype_of(v, "from_delayed: meta")?)))
        .collect::<Res<Vec<_>>>()?;
    if cols.is_empty() {
        return Err(runtime("from_delayed: meta names no column"));
    }
    let f = DataFrame::from_values(&ctx(state), parts_of(values)?, Schema::new(cols)).map_err(err)?;
    Ok(LazyFrame { f })
}

/// An array's blocks nested by the block grid.
fn nest(items: &mut std::vec::IntoIter<Dynamic>, shape: &[usize]) -> Dynamic {
    match shape.split_first() {
        None => items.next().unwrap_or(Dynamic::UNIT),
        Some((n, rest)) => Dynamic::from_array((0..*n).map(|_| nest(items, rest)).collect()),
    }
}

pub(super) fn register(engine: &mut Engine, state: &Arc<SessionState>) {
    let st = state.clone();
    engine.register_fn("to_delayed", move |b: &mut LazyBag| {
        let (layer, keys) = b.b.partitions(&ctx(&st));
        delayed_of(&layer, keys)
    });
    let st = state.clone();
    engine.register_fn("to_delayed", move |f: &mut LazyFrame| {
        let (layer, keys) = f.f.partitions(&ctx(&st));
        delayed_of(&layer, keys)
    });
    engine.register_fn("to_delayed", |x: &mut LazyArray| {
        let (layer, keys) = Collection::partitions(&x.a);
        let mut items = delayed_of(&layer, keys).into_iter();
        nest(&mut items, &x.a.numblocks())
    });
    engine.register_fn("from_delayed", |values: RArray| -> Res<LazyBag> {
        Ok(LazyBag { b: cb::from_keys(parts_of(&values)?).map_err(|e| runtime(e.to_string()))? })
    });
    let st = state.clone();
    engine.register_fn("from_delayed", move |values: RArray, m: Map| frame_from(&st, &values, m));
    let st = state.clone();
    engine.register_fn("from_delayed", move |d: Delayed, m: Map| -> Res<Dynamic> {
        if m.contains_key("meta") {
            // One Delayed with meta: a frame of one partition, as dd.from_delayed.
            return frame_from(&st, &vec![Dynamic::from(d)], m).map(Dynamic::from);
        }
        let m = options(Some(m), "from_delayed", &["shape", "dtype", "meta"])?;
        let shape =
            m.get("shape").ok_or_else(|| runtime("from_delayed: give #{shape: [...]} for an array"))?;
        let shape = shape_arg(shape, "from_delayed: shape")?;
        let dtype = m.get("dtype").map(dtype_arg).transpose()?.unwrap_or(DType::F64);
        let a = brisk_engine::collections::array::from_delayed(
            &ctx(&st),
            d.layer.clone(),
            d.key.clone(),
            shape,
            dtype,
        );
        a.map(|a| Dynamic::from(LazyArray::new(a))).map_err(array_err)
    });
}
