//! The shuffle: rows of every input partition moved to the output
//! partition their key picks. It is one mechanism for `shuffle(on)`,
//! groupby with `split_out`, hash joins and sorting (Dask's "disk"
//! shuffle, its default without a distributed client).
//!
//! Memory stays bounded by the partition size, not the data size: a split
//! task cuts one partition into pieces and writes each piece to disk as
//! an Arrow IPC file (`dir/OUT/IN.arrow`); a collect task reads the pieces
//! of one output partition in input order (so the shuffle is stable),
//! stacks them and removes them. Only the row counts of the pieces travel
//! through the scheduler, so the data is never held twice in memory.

use polars::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::TaskError;
use crate::pieces::Pieces;
use crate::value::Value;

/// The hash seed of every shuffle ("brisk"): both sides of a join, and
/// every process, must send a key to the same output.
const SEED: u64 = 0x0062_7269_736b;

/// How rows are assigned to output partitions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Partitioner {
    /// By a hash of these columns. Integers hash as floats, so an `int64`
    /// key meets an equal `float64` key of the other side of a join, and
    /// missing keys all go to one partition.
    Hash(Vec<String>),
    /// By sorted ranges of one column: the boundaries (ascending, without
    /// missing values) are the split task's last input; rows with a
    /// missing value go last, as pandas sorts them.
    Range { on: String, descending: bool },
}

/// One shuffle: where its pieces go and how many outputs it has.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShuffleSpec {
    pub pieces: Pieces,
    pub outputs: u32,
    pub by: Partitioner,
}

impl ShuffleSpec {
    pub fn new(token: &str, outputs: u32, by: Partitioner) -> ShuffleSpec {
        ShuffleSpec { pieces: Pieces::new(token), outputs, by }
    }
}

fn perr(e: PolarsError) -> TaskError {
    TaskError::user(e.to_string().lines().next().unwrap_or("polars error").to_string())
}

/// The output partition of every row.
pub fn assign(spec: &ShuffleSpec, df: &DataFrame, boundaries: Option<&DataFrame>) -> PolarsResult<Vec<u32>> {
    let n = spec.outputs.max(1);
    match &spec.by {
        Partitioner::Hash(cols) => {
            let mut hashes = vec![0u64; df.height()];
            let state = PlSeedableRandomStateQuality::seed_from_u64(SEED);
            for (i, c) in cols.iter().enumerate() {
                let s = df.column(c)?.as_materialized_series();
                let s = match s.dtype() {
                    DataType::Int64 | DataType::Boolean => s.cast(&DataType::Float64)?,
                    DataType::Datetime(..) => s.cast(&DataType::Int64)?.cast(&DataType::Float64)?,
                    _ => s.clone(),
                };
                if i == 0 {
                    let mut buf = Vec::with_capacity(df.height());
                    s.vec_hash(state.clone(), &mut buf)?;
                    hashes = buf;
                } else {
                    s.vec_hash_combine(state.clone(), &mut hashes)?;
                }
            }
            // The high bits are the best mixed.
            Ok(hashes.iter().map(|h| ((u128::from(*h) * u128::from(n)) >> 64) as u32).collect())
        }
        Partitioner::Range { on, descending } => {
            let b =
                boundaries.ok_or_else(|| polars_err!(ComputeError: "a range shuffle without boundaries"))?;
            let col = df.column(on)?.as_materialized_series();
            // The divisions' first and last values are the minimum and
            // maximum; the cuts are the ones between.
            let all = b.column(on)?.as_materialized_series();
            let bcol = &all.slice(1, all.len().saturating_sub(2));
            let cuts = n as usize - 1;
            let place = |p: usize| -> u32 {
                let p = p.min(cuts) as u32;
                if *descending { n - 1 - p } else { p }
            };
            // Missing values sort last in either direction.
            let last = n - 1;
            if matches!(col.dtype(), DataType::String) {
                let bounds: Vec<&str> = bcol.str()?.iter().flatten().collect();
                Ok(col
                    .str()?
                    .iter()
                    .map(|v| match v {
                        Some(v) => place(bounds.partition_point(|b| *b <= v)),
                        None => last,
                    })
                    .collect())
            } else {
                let f = |s: &Series| -> PolarsResult<Series> {
                    match s.dtype() {
                        DataType::Datetime(..) => s.cast(&DataType::Int64)?.cast(&DataType::Float64),
                        _ => s.cast(&DataType::Float64),
                    }
                };
                let bs = f(bcol)?;
                let bounds: Vec<f64> = bs.f64()?.iter().flatten().collect();
                let vs = f(col)?;
                Ok(vs
                    .f64()?
                    .iter()
                    .map(|v| match v {
                        Some(v) if !v.is_nan() => place(bounds.partition_point(|b| *b <= v)),
                        _ => last,
                    })
                    .collect())
            }
        }
    }
}

/// Cut `df` (input partition `input`) into the shuffle's pieces and write
/// the non-empty ones. The result is the row count of every piece.
pub fn split(
    spec: &ShuffleSpec,
    input: u32,
    df: &DataFrame,
    boundaries: Option<&DataFrame>,
) -> Result<Value, TaskError> {
    let parts = assign(spec, df, boundaries).map_err(perr)?;
    let n = spec.outputs.max(1) as usize;
    let mut rows: Vec<Vec<IdxSize>> = vec![Vec::new(); n];
    for (i, p) in parts.iter().enumerate() {
        rows[*p as usize].push(i as IdxSize);
    }
    let mut counts = Vec::with_capacity(n);
    for (out, idx) in rows.into_iter().enumerate() {
        counts.push(Value::Int(idx.len() as i64));
        if idx.is_empty() {
            continue;
        }
        let mut piece = df.take(&IdxCa::from_vec("idx".into(), idx)).map_err(perr)?;
        spec.pieces.write(out as u32, input, |w| {
            IpcStreamWriter::new(w).finish(&mut piece).map_err(|e| e.to_string())
        })?;
    }
    Ok(spec.pieces.sizes(counts))
}

/// Output partition `out`: its pieces from every split (whose results,
/// the piece row counts, are `splits`), stacked in input order, then
/// removed from disk. `None` when no split had a row for it.
pub fn collect(spec: &ShuffleSpec, out: u32, splits: &[Value]) -> Result<Option<DataFrame>, TaskError> {
    let frames = spec
        .pieces
        .take(out, splits)?
        .into_iter()
        .map(|bytes| IpcStreamReader::new(std::io::Cursor::new(bytes)).finish().map_err(perr))
        .collect::<Result<Vec<_>, _>>()?;
    if frames.is_empty() {
        return Ok(None);
    }
    let refs: Vec<&DataFrame> = frames.iter().collect();
    Ok(Some(super::partition::concat(&refs).map_err(perr)?))
}

/// Points of one column's distribution for computing sort boundaries:
/// `k + 1` evenly spaced order statistics (the minimum and maximum among
/// them) and the number of non-missing values they stand for.
pub fn sample(df: &DataFrame, on: &str, k: usize) -> PolarsResult<DataFrame> {
    let s = df.column(on)?.as_materialized_series().drop_nulls();
    let s = match s.dtype() {
        DataType::Float64 => {
            let ca = s.f64()?;
            ca.filter(&ca.is_not_nan())?.into_series()
        }
        _ => s,
    };
    let s = s.sort(SortOptions::default())?;
    let len = s.len();
    let idx: Vec<IdxSize> = if len == 0 {
        Vec::new()
    } else {
        let mut v: Vec<IdxSize> = (0..=k).map(|j| ((len - 1) * j / k.max(1)) as IdxSize).collect();
        v.dedup();
        v
    };
    let points = s.take(&IdxCa::from_vec("idx".into(), idx))?;
    let weight = if points.is_empty() { 0.0 } else { len as f64 / points.len() as f64 };
    let w = Series::new("weight".into(), vec![weight; points.len()]);
    DataFrame::new(points.len(), vec![points.with_name(on.into()).into_column(), w.into_column()])
}

/// Divisions from stacked samples: `outputs + 1` values, the minimum, the
/// `outputs - 1` weighted quantiles that cut the data into parts of about
/// equal size, and the maximum. Empty when there are no values at all.
pub fn divisions(samples: &DataFrame, on: &str, outputs: usize) -> PolarsResult<DataFrame> {
    let sorted = samples.sort([on], SortMultipleOptions::default().with_maintain_order(true))?;
    let h = sorted.height();
    if h == 0 {
        return Ok(sorted.select([on])?.head(Some(0)));
    }
    let w = sorted.column("weight")?.f64()?.clone();
    let total: f64 = w.iter().flatten().sum();
    let mut idx: Vec<IdxSize> = vec![0];
    let mut acc = 0.0;
    let mut j = 1;
    for (i, wi) in w.iter().enumerate() {
        acc += wi.unwrap_or(0.0);
        while j < outputs && acc >= total * j as f64 / outputs as f64 {
            idx.push(i as IdxSize);
            j += 1;
        }
    }
    while idx.len() < outputs {
        idx.push((h - 1) as IdxSize);
    }
    idx.push((h - 1) as IdxSize);
    sorted.select([on])?.take(&IdxCa::from_vec("idx".into(), idx))
}

/// How to join two collected partitions (pandas' `merge`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JoinSpec {
    pub how: JoinHow,
    pub left_on: Vec<String>,
    pub right_on: Vec<String>,
    /// Left and right columns renamed before the join (pandas' `_x`/`_y`
    /// suffixes on names both sides have).
    pub left_rename: Vec<(String, String)>,
    pub right_rename: Vec<(String, String)>,
    /// Key columns cast to float64 first (an int key meeting a float key).
    pub left_cast: Vec<String>,
    pub right_cast: Vec<String>,
    /// The result's columns, in order.
    pub columns: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum JoinHow {
    Inner,
    Left,
    Right,
    Outer,
}

impl JoinHow {
    pub fn parse(s: &str) -> Option<JoinHow> {
        Some(match s {
            "inner" => JoinHow::Inner,
            "left" => JoinHow::Left,
            "right" => JoinHow::Right,
            "outer" => JoinHow::Outer,
            _ => return None,
        })
    }
}

fn prepare(df: &DataFrame, rename: &[(String, String)], cast: &[String]) -> PolarsResult<DataFrame> {
    let mut df = df.clone();
    for c in cast {
        let s = df.column(c)?.cast(&DataType::Float64)?;
        df.with_column(s)?;
    }
    for (old, new) in rename {
        df.rename(old, new.as_str().into())?;
    }
    Ok(df)
}

/// Join one partition of each side. Keys named alike on both sides come
/// out once (pandas' `on=`); missing keys match each other, as in pandas.
pub fn join(spec: &JoinSpec, left: &DataFrame, right: &DataFrame) -> PolarsResult<DataFrame> {
    let l = prepare(left, &spec.left_rename, &spec.left_cast)?;
    let r = prepare(right, &spec.right_rename, &spec.right_cast)?;
    let same_names = spec.left_on == spec.right_on;
    let how = match spec.how {
        JoinHow::Inner => JoinType::Inner,
        JoinHow::Left => JoinType::Left,
        JoinHow::Right => JoinType::Right,
        JoinHow::Outer => JoinType::Full,
    };
    let mut args = JoinArgs::new(how).with_coalesce(if same_names {
        JoinCoalesce::CoalesceColumns
    } else {
        JoinCoalesce::KeepColumns
    });
    args.nulls_equal = true;
    args.maintain_order = MaintainOrderJoin::LeftRight;
    args.suffix = Some("\u{1}right".into());
    let out = l.join(&r, &spec.left_on, &spec.right_on, args, None)?;
    out.select(spec.columns.iter().map(String::as_str))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, n: u32, by: Partitioner) -> ShuffleSpec {
        ShuffleSpec::new(&format!("test-{name}"), n, by)
    }

    #[test]
    fn hash_pieces_round_trip_through_disk_and_are_removed() {
        let s = spec("hash", 3, Partitioner::Hash(vec!["k".into()]));
        let a = df!("k" => [1i64, 2, 3, 1, 2, 3], "v" => [0i64, 1, 2, 3, 4, 5]).expect("df");
        let b = df!("k" => [3i64, 1], "v" => [6i64, 7]).expect("df");
        let sa = split(&s, 0, &a, None).expect("split a");
        let sb = split(&s, 1, &a.head(Some(0)), None).expect("split empty");
        let sc = split(&s, 2, &b, None).expect("split b");
        let mut seen = Vec::new();
        for out in 0..3 {
            let Some(df) = collect(&s, out, &[sa.clone(), sb.clone(), sc.clone()]).expect("collect") else {
                continue;
            };
            let ks: Vec<i64> = df.column("k").expect("k").i64().expect("i64").into_no_null_iter().collect();
            // Every row of a key is in one output, in input order.
            for k in &ks {
                assert!(!seen.iter().any(|(o, x)| *o != out && x == k), "key {k} in two outputs");
            }
            seen.extend(ks.iter().map(|k| (out, *k)));
        }
        assert_eq!(seen.len(), 8);
        assert!(!s.pieces.dir().exists(), "the pieces are removed");
    }

    #[test]
    fn ints_and_floats_hash_alike() {
        let s = spec("alike", 16, Partitioner::Hash(vec!["k".into()]));
        let a = df!("k" => [1i64, 2, 300, -7]).expect("df");
        let b = df!("k" => [1.0f64, 2.0, 300.0, -7.0]).expect("df");
        assert_eq!(assign(&s, &a, None).expect("a"), assign(&s, &b, None).expect("b"));
    }

    #[test]
    fn range_assignment_follows_boundaries_and_puts_missing_last() {
        let b = df!("x" => [0.0f64, 10.0, 20.0, 30.0]).expect("b");
        let a = df!("x" => [Some(5.0f64), Some(10.0), Some(25.0), None, Some(15.0)]).expect("a");
        let up = spec("r", 3, Partitioner::Range { on: "x".into(), descending: false });
        assert_eq!(assign(&up, &a, Some(&b)).expect("up"), vec![0, 1, 2, 2, 1]);
        let down = spec("r", 3, Partitioner::Range { on: "x".into(), descending: true });
        assert_eq!(assign(&down, &a, Some(&b)).expect("down"), vec![2, 1, 0, 2, 1]);
        let s = df!("x" => ["b", "a", "z"]).expect("s");
        let bs = df!("x" => ["a", "m", "z"]).expect("bs");
        let two = spec("s", 2, Partitioner::Range { on: "x".into(), descending: false });
        assert_eq!(assign(&two, &s, Some(&bs)).expect("str"), vec![0, 0, 1]);
    }

    #[test]
    fn divisions_cut_weighted_samples_evenly() {
        let a = df!("x" => (0..1000).map(f64::from).collect::<Vec<_>>()).expect("a");
        let b = df!("x" => (1000..1100).map(f64::from).collect::<Vec<_>>()).expect("b");
        let mut s = sample(&a, "x", 50).expect("sa");
        s.vstack_mut(&sample(&b, "x", 50).expect("sb")).expect("stack");
        let d = divisions(&s, "x", 4).expect("div");
        let v: Vec<f64> = d.column("x").expect("x").f64().expect("f").into_no_null_iter().collect();
        assert_eq!(v.len(), 5);
        assert_eq!((v[0], v[4]), (0.0, 1099.0));
        for (got, want) in v[1..4].iter().zip([275.0, 550.0, 825.0]) {
            assert!((got - want).abs() < 30.0, "{v:?}");
        }
    }

    #[test]
    fn joins_suffix_and_match_missing_keys() {
        let l = df!("k" => [Some(1i64), Some(2), None], "v" => [1i64, 2, 3]).expect("l");
        let r = df!("k" => [Some(1.0f64), None], "v" => [10i64, 30]).expect("r");
        let spec = JoinSpec {
            how: JoinHow::Inner,
            left_on: vec!["k".into()],
            right_on: vec!["k".into()],
            left_rename: vec![("v".into(), "v_x".into())],
            right_rename: vec![("v".into(), "v_y".into())],
            left_cast: vec!["k".into()],
            right_cast: vec![],
            columns: vec!["k".into(), "v_x".into(), "v_y".into()],
        };
        let out = join(&spec, &l, &r).expect("join");
        assert_eq!(out.height(), 2);
        assert_eq!(out.get_column_names(), ["k", "v_x", "v_y"]);
    }
}
