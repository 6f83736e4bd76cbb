//! Aggregations as trees, as Dask's `reduction`/`aca`: every partition
//! gives a small partial, partials are merged in groups of `SPLIT_EVERY`,
//! and the last merge computes the answer. Series reductions keep exact
//! integer sums and merge means and variances by Chan's formula; groupby
//! partials are frames of sums, counts, minima and maxima per group.

use polars::prelude::*;
use serde::{Deserialize, Serialize};

use super::group::{GroupSpec, SEP, partial_name};
use super::red::Red;

use super::dtype::DType;
use crate::value::Value;

/// The running statistics of one column in one or more partitions.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Stats {
    pub n: i64,
    pub sum_i: i64,
    pub sum_f: f64,
    pub mean: f64,
    pub m2: f64,
    pub min: Option<Value>,
    pub max: Option<Value>,
}

fn better(a: &Value, b: &Value, less: bool) -> bool {
    let ord = match (a, b) {
        (Value::Int(x), Value::Int(y)) => x.cmp(y),
        (Value::Float(x), Value::Float(y)) => x.total_cmp(y),
        (Value::Str(x), Value::Str(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        _ => return false,
    };
    if less { ord.is_lt() } else { ord.is_gt() }
}

impl Stats {
    /// The statistics of a column, skipping missing values (and NaN).
    pub fn of(s: &Series) -> PolarsResult<Stats> {
        let mut st = Stats::default();
        let add_f = |st: &mut Stats, x: f64| {
            st.n += 1;
            let d = x - st.mean;
            st.mean += d / st.n as f64;
            st.m2 += d * (x - st.mean);
            st.sum_f += x;
        };
        match s.dtype() {
            DataType::Float64 | DataType::Float32 => {
                let s = s.cast(&DataType::Float64)?;
                let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
                for x in s.f64()?.iter().flatten().filter(|x| !x.is_nan()) {
                    add_f(&mut st, x);
                    lo = lo.min(x);
                    hi = hi.max(x);
                }
                if st.n > 0 {
                    st.min = Some(Value::Float(lo));
                    st.max = Some(Value::Float(hi));
                }
            }
            DataType::String => {
                let ca = s.str()?;
                for x in ca.iter().flatten() {
                    st.n += 1;
                    let v = Value::str(x);
                    if st.min.as_ref().is_none_or(|m| better(&v, m, true)) {
                        st.min = Some(v.clone());
                    }
                    if st.max.as_ref().is_none_or(|m| better(&v, m, false)) {
                        st.max = Some(v);
                    }
                }
            }
            DataType::Boolean => {
                for x in s.bool()?.iter().flatten() {
                    add_f(&mut st, f64::from(u8::from(x)));
                    st.sum_i += i64::from(x);
                    let v = Value::Bool(x);
                    if st.min.as_ref().is_none_or(|m| better(&v, m, true)) {
                        st.min = Some(v.clone());
                    }
                    if st.max.as_ref().is_none_or(|m| better(&v, m, false)) {
                        st.max = Some(v);
                    }
                }
            }
            _ => {
                let s = s.cast(&DataType::Int64)?;
                let (mut lo, mut hi) = (i64::MAX, i64::MIN);
                for x in s.i64()?.iter().flatten() {
                    add_f(&mut st, x as f64);
                    st.sum_i = st.sum_i.wrapping_add(x);
                    lo = lo.min(x);
                    hi = hi.max(x);
                }
                if st.n > 0 {
                    st.min = Some(Value::Int(lo));
                    st.max = Some(Value::Int(hi));
                }
            }
        }
        Ok(st)
    }

    /// Chan et al.'s parallel merge of counts, means and squared deviations.
    pub fn merge(&mut self, o: &Stats) {
        if o.n == 0 {
            return;
        }
        if self.n == 0 {
            *self = o.clone();
            return;
        }
        let n = self.n + o.n;
        let d = o.mean - self.mean;
        self.m2 += o.m2 + d * d * (self.n as f64) * (o.n as f64) / n as f64;
        self.mean += d * o.n as f64 / n as f64;
        self.n = n;
        self.sum_i = self.sum_i.wrapping_add(o.sum_i);
        self.sum_f += o.sum_f;
        if let Some(m) = &o.min
            && self.min.as_ref().is_none_or(|s| better(m, s, true))
        {
            self.min = Some(m.clone());
        }
        if let Some(m) = &o.max
            && self.max.as_ref().is_none_or(|s| better(m, s, false))
        {
            self.max = Some(m.clone());
        }
    }

    /// The answer of `red` for a column of type `t` (NaN where pandas
    /// gives NaN: the mean of nothing, the variance of one value).
    pub fn finish(&self, red: Red, t: DType) -> Value {
        let nan = Value::Float(f64::NAN);
        match red {
            Red::Count | Red::Size => Value::Int(self.n),
            Red::Sum if t == DType::Float64 => Value::Float(self.sum_f),
            Red::Sum => Value::Int(self.sum_i),
            Red::Mean if self.n == 0 => nan,
            Red::Mean => Value::Float(self.mean),
            Red::Var | Red::Std if self.n < 2 => nan,
            Red::Var => Value::Float(self.m2 / (self.n - 1) as f64),
            Red::Std => Value::Float((self.m2 / (self.n - 1) as f64).sqrt()),
            Red::Min => self.min.clone().unwrap_or(nan),
            Red::Max => self.max.clone().unwrap_or(nan),
            Red::NUnique => Value::Int(self.n),
        }
    }

    pub fn to_value(&self) -> Value {
        let opt = |v: &Option<Value>| v.clone().unwrap_or(Value::Unit);
        Value::list(vec![
            Value::Int(self.n),
            Value::Int(self.sum_i),
            Value::Float(self.sum_f),
            Value::Float(self.mean),
            Value::Float(self.m2),
            opt(&self.min),
            opt(&self.max),
        ])
    }

    pub fn from_value(v: &Value) -> Option<Stats> {
        let Value::List(items) = v else { return None };
        let [n, si, sf, mean, m2, min, max] = items.as_slice() else { return None };
        let f = |v: &Value| if let Value::Float(x) = v { Some(*x) } else { None };
        let opt = |v: &Value| if matches!(v, Value::Unit) { None } else { Some(v.clone()) };
        Some(Stats {
            n: if let Value::Int(n) = n { *n } else { return None },
            sum_i: if let Value::Int(s) = si { *s } else { return None },
            sum_f: f(sf)?,
            mean: f(mean)?,
            m2: f(m2)?,
            min: opt(min),
            max: opt(max),
        })
    }
}

/// How a partial column of a grouped aggregation merges.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Merge {
    Sum,
    Min,
    Max,
}

fn numeric(s: &Series) -> PolarsResult<Series> {
    match s.dtype() {
        DataType::Boolean => s.cast(&DataType::Int64),
        _ => Ok(s.clone()),
    }
}

/// Where a column holds a value (`None`: everywhere), computed once per
/// column of a partition.
fn valid_of(
    cache: &mut Vec<(String, Option<BooleanChunked>)>,
    col: &str,
    s: &Series,
) -> PolarsResult<Option<BooleanChunked>> {
    if let Some((_, v)) = cache.iter().find(|(c, _)| c == col) {
        return Ok(v.clone());
    }
    let na = super::expr::missing(s)?;
    let v = if na.any() { Some(!&na) } else { None };
    cache.push((col.to_string(), v.clone()));
    Ok(v)
}

/// `s` with the rows where `valid` is false set to missing (so polars'
/// sums, minima and maxima skip NaN as pandas does).
fn masked(s: &Series, valid: Option<&BooleanChunked>) -> PolarsResult<Series> {
    let Some(valid) = valid else { return Ok(s.clone()) };
    let nulls = Series::full_null(s.name().clone(), s.len(), s.dtype());
    s.zip_with(valid, &nulls)
}

impl GroupSpec {
    /// The partial columns, each with how it merges.
    pub(crate) fn partials(&self) -> Vec<(String, Merge)> {
        let mut out: Vec<(String, Merge)> = Vec::new();
        let mut add = |name: String, m: Merge| {
            if !out.iter().any(|(n, _)| *n == name) {
                out.push((name, m));
            }
        };
        for (_, col, red, _) in &self.aggs {
            match red {
                Red::Sum => add(partial_name("sum", col), Merge::Sum),
                Red::Count => add(partial_name("count", col), Merge::Sum),
                Red::Mean => {
                    add(partial_name("sum", col), Merge::Sum);
                    add(partial_name("count", col), Merge::Sum);
                }
                Red::Std | Red::Var => {
                    add(partial_name("sum", col), Merge::Sum);
                    add(partial_name("count", col), Merge::Sum);
                    add(partial_name("sumsq", col), Merge::Sum);
                }
                Red::Min => add(partial_name("min", col), Merge::Min),
                Red::Max => add(partial_name("max", col), Merge::Max),
                Red::Size => add(partial_name("size", ""), Merge::Sum),
                Red::NUnique => add(partial_name("nunique", col), Merge::Sum),
            }
        }
        out
    }

    /// One partition's partial: per group, the partial columns (in one
    /// pass of our own where the keys and values allow, else by polars).
    pub fn partial(&self, df: &DataFrame) -> PolarsResult<DataFrame> {
        if let Some(p) = super::fastagg::frame_partial(self, df) {
            return Ok(p);
        }
        self.polars_partial(df)
    }

    /// The partial through polars' group_by.
    pub(crate) fn polars_partial(&self, df: &DataFrame) -> PolarsResult<DataFrame> {
        // pandas drops rows whose key is missing (`dropna=True`).
        let mut df = df.drop_nulls(Some(&self.by))?;
        let h = df.height();
        let mut cols: Vec<Column> =
            self.by.iter().map(|b| df.column(b).cloned()).collect::<PolarsResult<_>>()?;
        let mut valid_cache: Vec<(String, Option<BooleanChunked>)> = Vec::new();
        for (name, _) in self.partials() {
            let (kind, col) = name.split_once(SEP).unwrap_or((name.as_str(), ""));
            let c = match kind {
                "size" => Series::new(name.as_str().into(), vec![1i64; h]),
                "nunique" => {
                    // Distinct (key, value) pairs; each counts one.
                    continue;
                }
                _ => {
                    let s = df.column(col)?.as_materialized_series().clone();
                    let valid = valid_of(&mut valid_cache, col, &s)?;
                    match kind {
                        "count" => match &valid {
                            Some(v) => v.cast(&DataType::Int64)?,
                            None => Series::new(name.as_str().into(), vec![1i64; h]),
                        },
                        "sum" => masked(&numeric(&s)?, valid.as_ref())?,
                        "sumsq" => {
                            let f = s.cast(&DataType::Float64)?;
                            masked(&(&f * &f)?, valid.as_ref())?
                        }
                        _ => masked(&s, valid.as_ref())?,
                    }
                }
            };
            cols.push(c.with_name(name.as_str().into()).into_column());
        }
        let nunique: Vec<&String> = self.aggs.iter().filter(|a| a.2 == Red::NUnique).map(|a| &a.1).collect();
        if !nunique.is_empty() {
            return Err(polars_err!(ComputeError: "groupby nunique is not supported yet"));
        }
        df = DataFrame::new(h, cols)?;
        self.regroup(&df)
    }

    /// Merge partials (already stacked) per group.
    pub fn regroup(&self, df: &DataFrame) -> PolarsResult<DataFrame> {
        let partials = self.partials();
        let gb = df.group_by(self.by.iter().map(|s| s.as_str()))?;
        let mut out: Vec<Column> = gb.keys();
        let nkeys = out.len();
        for m in [Merge::Sum, Merge::Min, Merge::Max] {
            let names: Vec<&str> = partials.iter().filter(|p| p.1 == m).map(|p| p.0.as_str()).collect();
            if names.is_empty() {
                continue;
            }
            let sel = gb.clone().select(names.iter().copied());
            #[allow(deprecated)]
            let r = match m {
                Merge::Sum => sel.sum()?,
                Merge::Min => sel.min()?,
                Merge::Max => sel.max()?,
            };
            for (c, name) in r.columns()[nkeys..].iter().zip(&names) {
                out.push(c.clone().with_name((*name).into()));
            }
        }
        // Put the columns back in partial order.
        let mut ordered: Vec<Column> = out[..nkeys].to_vec();
        for (name, _) in &partials {
            if let Some(c) = out.iter().find(|c| c.name().as_str() == name) {
                ordered.push(c.clone());
            }
        }
        DataFrame::new_infer_height(ordered)
    }

    /// The answer from merged partials: one row per group, sorted by key.
    pub fn finish(&self, df: &DataFrame) -> PolarsResult<DataFrame> {
        let get = |kind: &str, col: &str| -> PolarsResult<Series> {
            Ok(df.column(&partial_name(kind, col))?.as_materialized_series().clone())
        };
        let mut cols: Vec<Column> =
            self.by.iter().map(|b| df.column(b).cloned()).collect::<PolarsResult<_>>()?;
        for (out, col, red, t) in &self.aggs {
            let s = match red {
                Red::Sum if *t == DType::Float64 => get("sum", col)?.cast(&DataType::Float64)?,
                Red::Sum => get("sum", col)?.cast(&DataType::Int64)?,
                Red::Count => get("count", col)?,
                Red::Size => get("size", "")?,
                Red::Min => get("min", col)?,
                Red::Max => get("max", col)?,
                Red::Mean => {
                    let n = get("count", col)?.cast(&DataType::Float64)?;
                    (&get("sum", col)?.cast(&DataType::Float64)? / &n)?
                }
                Red::Var | Red::Std => {
                    let n = get("count", col)?.cast(&DataType::Float64)?;
                    let s = get("sum", col)?.cast(&DataType::Float64)?;
                    let ss = get("sumsq", col)?;
                    let n_ca = n.f64()?;
                    let vals: Float64Chunked = n_ca
                        .iter()
                        .zip(s.f64()?.iter())
                        .zip(ss.f64()?.iter())
                        .map(|((n, s), ss)| {
                            let (n, s, ss) = (n?, s.unwrap_or(0.0), ss.unwrap_or(0.0));
                            if n < 2.0 {
                                return Some(f64::NAN);
                            }
                            let var = ((ss - s * s / n) / (n - 1.0)).max(0.0);
                            Some(if *red == Red::Std { var.sqrt() } else { var })
                        })
                        .collect();
                    vals.into_series()
                }
                Red::NUnique => get("nunique", col)?,
            };
            cols.push(s.with_name(out.as_str().into()).into_column());
        }
        let out = DataFrame::new(df.height(), cols)?;
        out.sort(self.by.iter().map(|s| s.as_str()).collect::<Vec<_>>(), SortMultipleOptions::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_merge_matches_one_pass() {
        let a = Series::new("x".into(), [Some(1.0f64), None, Some(4.0)]);
        let b = Series::new("x".into(), [2.0f64, f64::NAN, 8.0]);
        let mut s = Stats::of(&a).expect("a");
        s.merge(&Stats::of(&b).expect("b"));
        let all = Series::new("x".into(), [1.0f64, 4.0, 2.0, 8.0]);
        let one = Stats::of(&all).expect("all");
        assert_eq!(s.n, 4);
        for red in [Red::Mean, Red::Var, Red::Std, Red::Sum, Red::Min, Red::Max] {
            let (Value::Float(x), Value::Float(y)) =
                (s.finish(red, DType::Float64), one.finish(red, DType::Float64))
            else {
                panic!("floats")
            };
            assert!((x - y).abs() < 1e-12, "{red:?}: {x} vs {y}");
        }
        assert_eq!(Stats::from_value(&s.to_value()), Some(s));
        assert!(matches!(Stats::default().finish(Red::Mean, DType::Int64), Value::Float(f) if f.is_nan()));
    }

    #[test]
    fn grouped_partials_merge_to_the_answer() {
        let spec = GroupSpec {
            by: vec!["k".into()],
            aggs: vec![
                ("x".into(), "x".into(), Red::Mean, DType::Float64),
                ("n".into(), "x".into(), Red::Count, DType::Float64),
                ("size".into(), "".into(), Red::Size, DType::Int64),
                ("hi".into(), "x".into(), Red::Max, DType::Float64),
            ],
        };
        let a = df!("k" => [Some("a"), Some("b"), None], "x" => [Some(1.0f64), None, Some(9.0)]).expect("a");
        let b = df!("k" => ["a", "a"], "x" => [3.0f64, 5.0]).expect("b");
        let pa = spec.partial(&a).expect("pa");
        let pb = spec.partial(&b).expect("pb");
        let merged = spec.regroup(&pa.vstack(&pb).expect("stack")).expect("merge");
        let out = spec.finish(&merged).expect("finish");
        assert_eq!(out.height(), 2);
        let x: Vec<Option<f64>> = out.column("x").expect("x").f64().expect("f64").iter().collect();
        assert_eq!(x[0], Some(3.0));
        assert!(x[1].is_none_or(f64::is_nan));
        let n: Vec<Option<i64>> = out.column("n").expect("n").i64().expect("i64").iter().collect();
        assert_eq!(n, vec![Some(3), Some(0)]);
        let size: Vec<Option<i64>> = out.column("size").expect("s").i64().expect("i64").iter().collect();
        assert_eq!(size, vec![Some(3), Some(1)]);
    }
}
