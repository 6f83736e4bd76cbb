//! One-pass groupby partials, the commonest dataframe task: the group ids,
//! accumulators and partial frames shared by both sides, and the frame
//! side (one pass over the key and value columns, where polars' group_by
//! would first build every group's row list). The CSV side, straight from
//! the bytes of a block, is `fastcsv`.
//!
//! It applies only where it gives exactly the general path's answer:
//! unquoted blocks (no `"` anywhere), keys of type string or int64,
//! numeric value columns, filters of the form `column op number`. Any
//! other block, and any field that does not parse, falls back to the
//! general path (polars' parser), which also names a bad line.

use polars::prelude::*;
use rustc_hash::FxHashMap;

use super::dtype::DType;
use super::group::{GroupSpec, partial_names};

/// One accumulator column of the partial, indexed by group.
pub(crate) enum Acc {
    SumI(Vec<i64>),
    SumF(Vec<f64>),
    Count(Vec<i64>),
    SumSq(Vec<f64>),
    MinI(Vec<Option<i64>>),
    MaxI(Vec<Option<i64>>),
    MinF(Vec<Option<f64>>),
    MaxF(Vec<Option<f64>>),
    Size(Vec<i64>),
}

#[derive(Clone, Copy)]
pub(crate) enum Num {
    I(i64),
    F(f64),
}

impl Num {
    pub(crate) fn f(self) -> f64 {
        match self {
            Num::I(i) => i as f64,
            Num::F(f) => f,
        }
    }
}

/// One value column of a batch of rows (see `Partial::add_batch`): floats
/// with NaN for a missing value, or ints.
pub(crate) enum Vals {
    F(Vec<f64>),
    I(Vec<Option<i64>>),
}

impl Vals {
    /// `None` for a float in an int column (not met: an int64 column's
    /// fields parse to ints), which sends the block to the general path.
    pub(crate) fn push(&mut self, x: Option<Num>) -> Option<()> {
        match (self, x) {
            (Vals::F(v), x) => v.push(x.map_or(f64::NAN, Num::f)),
            (Vals::I(v), None) => v.push(None),
            (Vals::I(v), Some(Num::I(i))) => v.push(Some(i)),
            (Vals::I(_), Some(Num::F(_))) => return None,
        }
        Some(())
    }

    pub(crate) fn clear(&mut self) {
        match self {
            Vals::F(v) => v.clear(),
            Vals::I(v) => v.clear(),
        }
    }

    pub(crate) fn col(&self) -> Col<'_> {
        match self {
            Vals::F(v) => Col::F(v),
            Vals::I(v) => Col::I(v),
        }
    }
}

/// A value column as `Partial::add_batch` reads it: floats (NaN missing),
/// ints that may be missing, or ints without missing values (a frame's
/// column as it is, with no copy).
#[derive(Clone, Copy)]
pub(crate) enum Col<'a> {
    F(&'a [f64]),
    I(&'a [Option<i64>]),
    Ints(&'a [i64]),
}

/// The accumulators of a groupby partial, one column per partial of the
/// spec, indexed by group; `values` are the source columns (by field
/// index) each row's parsed values come in.
pub(crate) struct Partial {
    accs: Vec<(usize, Acc)>,
    pub(crate) values: Vec<(usize, DType)>,
    groups: usize,
}

impl Partial {
    /// Accumulators for `g`, where `field` gives a column's index and type;
    /// `None` unless every value column is int64 or float64.
    pub(crate) fn new(g: &GroupSpec, field: impl Fn(&str) -> Option<(usize, DType)>) -> Option<Partial> {
        let mut values: Vec<(usize, DType)> = Vec::new();
        let mut accs = Vec::new();
        for (kind, col) in partial_names(g) {
            if kind == "size" {
                accs.push((usize::MAX, Acc::Size(Vec::new())));
                continue;
            }
            let (i, t) = field(&col)?;
            if !matches!(t, DType::Int64 | DType::Float64) {
                return None;
            }
            let slot = match values.iter().position(|(f, _)| *f == i) {
                Some(s) => s,
                None => {
                    values.push((i, t));
                    values.len() - 1
                }
            };
            let int = t == DType::Int64;
            let acc = match kind.as_str() {
                "sum" if int => Acc::SumI(Vec::new()),
                "sum" => Acc::SumF(Vec::new()),
                "count" => Acc::Count(Vec::new()),
                "sumsq" => Acc::SumSq(Vec::new()),
                "min" if int => Acc::MinI(Vec::new()),
                "max" if int => Acc::MaxI(Vec::new()),
                "min" => Acc::MinF(Vec::new()),
                "max" => Acc::MaxF(Vec::new()),
                _ => return None,
            };
            accs.push((slot, acc));
        }
        Some(Partial { accs, values, groups: 0 })
    }

    /// Room for one more group; its id.
    pub(crate) fn push_group(&mut self) -> usize {
        for (_, a) in &mut self.accs {
            match a {
                Acc::SumI(v) | Acc::Count(v) | Acc::Size(v) => v.push(0),
                Acc::SumF(v) | Acc::SumSq(v) => v.push(0.0),
                Acc::MinI(v) | Acc::MaxI(v) => v.push(None),
                Acc::MinF(v) | Acc::MaxF(v) => v.push(None),
            }
        }
        self.groups += 1;
        self.groups - 1
    }

    /// Add a batch of rows: row `r` goes to group `gids[r]` (none for
    /// `NO_GROUP`), its values in `cols` (by slot). One tight loop per
    /// accumulator, with no dispatch per row; each group's values are
    /// still added in row order.
    pub(crate) fn add_batch(&mut self, gids: &[u32], cols: &[Col<'_>]) -> Option<()> {
        const NONE: usize = NO_GROUP as usize;
        let rows = || gids.iter().map(|&g| g as usize);
        for (slot, a) in &mut self.accs {
            if let Acc::Size(v) = a {
                for g in rows().filter(|&g| g != NONE) {
                    v[g] += 1;
                }
                continue;
            }
            match (cols[*slot], a) {
                (Col::F(x), Acc::SumF(v)) => {
                    for (g, &x) in rows().zip(x).filter(|(g, _)| *g != NONE).filter(|(_, x)| !x.is_nan()) {
                        v[g] += x;
                    }
                }
                (Col::F(x), Acc::Count(v)) => {
                    for (g, &x) in rows().zip(x).filter(|(g, _)| *g != NONE) {
                        v[g] += i64::from(!x.is_nan());
                    }
                }
                (Col::F(x), Acc::SumSq(v)) => {
                    for (g, &x) in rows().zip(x).filter(|(g, _)| *g != NONE).filter(|(_, x)| !x.is_nan()) {
                        v[g] += x * x;
                    }
                }
                (Col::F(x), a) => {
                    for (g, &x) in rows().zip(x).filter(|(g, _)| *g != NONE).filter(|(_, x)| !x.is_nan()) {
                        fold(a, g, Num::F(x))?;
                    }
                }
                (Col::Ints(x), Acc::SumI(v)) => {
                    for (g, &i) in rows().zip(x).filter(|(g, _)| *g != NONE) {
                        v[g] = v[g].wrapping_add(i);
                    }
                }
                (Col::Ints(x), Acc::Count(v)) => {
                    for (g, _) in rows().zip(x).filter(|(g, _)| *g != NONE) {
                        v[g] += 1;
                    }
                }
                (Col::Ints(x), a) => {
                    for (g, &i) in rows().zip(x).filter(|(g, _)| *g != NONE) {
                        fold(a, g, Num::I(i))?;
                    }
                }
                (Col::I(x), a) => {
                    for (g, x) in rows().zip(x).filter(|(g, _)| *g != NONE) {
                        if let Some(i) = *x {
                            fold(a, g, Num::I(i))?;
                        }
                    }
                }
            }
        }
        Some(())
    }

    /// The partial's frame: `keys` (one column per key, a value per
    /// group), then the partial columns, as `GroupSpec::partial` names them.
    pub(crate) fn frame(self, g: &GroupSpec, keys: Vec<Column>) -> Option<DataFrame> {
        let mut cols = keys;
        for ((kind, col), (_, a)) in partial_names(g).into_iter().zip(self.accs) {
            let name = super::group::partial_name(&kind, &col);
            let name: PlSmallStr = name.as_str().into();
            let s = match a {
                Acc::SumI(v) | Acc::Count(v) | Acc::Size(v) => Series::new(name, v),
                Acc::SumF(v) | Acc::SumSq(v) => Series::new(name, v),
                Acc::MinI(v) | Acc::MaxI(v) => Series::new(name, v),
                Acc::MinF(v) | Acc::MaxF(v) => Series::new(name, v),
            };
            cols.push(s.into_column());
        }
        DataFrame::new(self.groups, cols).ok()
    }
}

/// Add value `x` of group `g` to one accumulator (not `size`); `None` when
/// an int accumulator meets a float.
#[inline]
pub(crate) fn fold(a: &mut Acc, g: usize, x: Num) -> Option<()> {
    match (a, x) {
        (Acc::SumI(v), Num::I(i)) => v[g] = v[g].wrapping_add(i),
        (Acc::SumF(v), x) => v[g] += x.f(),
        (Acc::Count(v), _) => v[g] += 1,
        (Acc::SumSq(v), x) => v[g] += x.f() * x.f(),
        (Acc::MinI(v), Num::I(i)) => v[g] = Some(v[g].map_or(i, |m| m.min(i))),
        (Acc::MaxI(v), Num::I(i)) => v[g] = Some(v[g].map_or(i, |m| m.max(i))),
        (Acc::MinF(v), x) => v[g] = Some(v[g].map_or(x.f(), |m| m.min(x.f()))),
        (Acc::MaxF(v), x) => v[g] = Some(v[g].map_or(x.f(), |m| m.max(x.f()))),
        _ => return None,
    }
    Some(())
}

/// A groupby partial of a frame in one pass over its key column and one
/// over each value column, for one string or int64 key and int64/float64
/// values (polars' group_by builds every group's row list first, then
/// gathers each aggregate); `None` otherwise. Each group's values are
/// added in row order, as the row-by-row path adds them.
pub(crate) fn frame_partial(g: &GroupSpec, df: &DataFrame) -> Option<DataFrame> {
    let [key] = g.by.as_slice() else { return None };
    let columns = df.columns();
    let field = |c: &str| -> Option<(usize, DType)> {
        let i = columns.iter().position(|col| col.name().as_str() == c)?;
        Some((i, DType::of_polars(columns[i].dtype())?))
    };
    let mut acc = Partial::new(g, field)?;
    let k = df.column(key).ok()?.as_materialized_series();
    let name: PlSmallStr = key.as_str().into();
    let (gids, key_col) = match k.dtype() {
        DataType::String => {
            let (gids, keys) = string_gids(k.str().ok()?);
            (gids, Series::new(name, keys))
        }
        DataType::Int64 => {
            let (gids, keys) = gids_of(k.i64().ok()?.iter());
            (gids, Series::new(name, keys))
        }
        _ => return None,
    };
    for _ in 0..key_col.len() {
        acc.push_group();
    }
    // Each value column as it is when it has no missing values; else
    // copied once, a missing value as NaN or `None`.
    let sources: Vec<Result<Col<'_>, Vals>> = acc
        .values
        .iter()
        .map(|&(i, t)| {
            let s = columns[i].as_materialized_series();
            Some(if t == DType::Int64 {
                let ca = s.i64().ok()?;
                ca.cont_slice().map(Col::Ints).map_err(|_| Vals::I(ca.iter().collect()))
            } else {
                let ca = s.f64().ok()?;
                ca.cont_slice()
                    .map(Col::F)
                    .map_err(|_| Vals::F(ca.iter().map(|v| v.unwrap_or(f64::NAN)).collect()))
            })
        })
        .collect::<Option<_>>()?;
    let cols: Vec<Col<'_>> = sources.iter().map(|s| s.as_ref().map_or_else(Vals::col, |c| *c)).collect();
    acc.add_batch(&gids, &cols)?;
    acc.frame(g, vec![key_col.into_column()])
}

/// The group id of rows whose key is missing: they belong to no group.
pub(crate) const NO_GROUP: u32 = u32::MAX;

/// Each row's group id (`NO_GROUP` for a missing key) and the keys in
/// group order.
fn gids_of<K: std::hash::Hash + Eq + Copy>(keys: impl Iterator<Item = Option<K>>) -> (Vec<u32>, Vec<K>) {
    let mut ids: FxHashMap<K, u32> = FxHashMap::default();
    let mut order: Vec<K> = Vec::new();
    let gids = keys
        .map(|k| match k {
            None => NO_GROUP,
            Some(k) => *ids.entry(k).or_insert_with(|| {
                order.push(k);
                (order.len() - 1) as u32
            }),
        })
        .collect();
    (gids, order)
}

/// Group ids of short strings as numbers (an Arrow view, or a CSV
/// field's bytes and length): an open-addressed table probed linearly
/// from a multiplicative hash, the one lookup every row makes. Short keys
/// differ in a few bytes only (`k1`, `k2`, ...), which the multiply
/// spreads to the top bits the index is taken from. Cheaper than a
/// general hash map's entry call.
pub(crate) struct ShortKeys {
    /// The keys by slot, 0 for an empty slot; each one's group in `groups`
    /// (apart, so the probed keys take 16 bytes a slot, not 32).
    pub(crate) keys: Vec<u128>,
    groups: Vec<u32>,
    pub(crate) len: usize,
    /// The group of key 0 itself.
    zero: Option<u32>,
}

impl ShortKeys {
    pub(crate) fn new() -> ShortKeys {
        ShortKeys { keys: vec![0; 64], groups: vec![0; 64], len: 0, zero: None }
    }

    pub(crate) fn start(&self, key: u128) -> usize {
        let x = (key as u64 ^ ((key >> 64) as u64).rotate_left(29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (x >> (64 - self.keys.len().trailing_zeros())) as usize
    }

    /// The group of `key`, `next` when it is new.
    #[inline]
    pub(crate) fn get_or_insert(&mut self, key: u128, next: u32) -> u32 {
        if key == 0 {
            return *self.zero.get_or_insert(next);
        }
        let mask = self.keys.len() - 1;
        let mut i = self.start(key);
        loop {
            let k = self.keys[i];
            if k == key {
                return self.groups[i];
            }
            if k == 0 {
                break;
            }
            i = (i + 1) & mask;
        }
        self.keys[i] = key;
        self.groups[i] = next;
        self.len += 1;
        if self.len * 2 > self.keys.len() {
            self.grow();
        }
        next
    }

    /// Twice the room, the keys placed anew (rare: kept out of the lookup
    /// so that the lookup inlines).
    #[cold]
    pub(crate) fn grow(&mut self) {
        let n = self.keys.len() * 2;
        let keys = std::mem::replace(&mut self.keys, vec![0; n]);
        let groups = std::mem::replace(&mut self.groups, vec![0; n]);
        for (k, g) in keys.into_iter().zip(groups).filter(|(k, _)| *k != 0) {
            let mut i = self.start(k);
            while self.keys[i] != 0 {
                i = (i + 1) & (n - 1);
            }
            self.keys[i] = k;
            self.groups[i] = g;
        }
    }
}

/// `gids_of` for a string column. A key of up to 12 bytes lies whole in
/// its 16-byte Arrow view (length, then the bytes), so it is hashed and
/// compared as one `u128`, with no string compare; longer keys go by text
/// (and so do all keys of a column with missing values).
pub(crate) fn string_gids(ca: &StringChunked) -> (Vec<u32>, Vec<&str>) {
    if ca.null_count() > 0 {
        return gids_of(ca.iter());
    }
    let mut gids = Vec::with_capacity(ca.len());
    let mut short = ShortKeys::new();
    let mut long: FxHashMap<&str, u32> = FxHashMap::default();
    let mut order: Vec<&str> = Vec::new();
    for arr in ca.downcast_iter() {
        for (i, v) in arr.views().iter().enumerate() {
            let next = order.len() as u32;
            let g = if v.length <= 12 {
                // Bytes past the length are zero by Arrow's rules; masked anyway.
                let bits = v.as_u128();
                let key = if v.length == 12 { bits } else { bits & ((1u128 << (32 + 8 * v.length)) - 1) };
                short.get_or_insert(key, next)
            } else {
                *long.entry(arr.value(i)).or_insert(next)
            };
            if g == next {
                order.push(arr.value(i));
            }
            gids.push(g);
        }
    }
    (gids, order)
}
