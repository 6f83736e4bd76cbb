//! Frame-wide statistics in Rhai: `df.sum()` and the other reductions of
//! every column (one row), `df.median()`, `df.quantile(q)`, `corr` and
//! `cov` of frames and Series, and the running aggregates `cumsum`,
//! `cumprod`, `cummax`, `cummin` of frames and Series.

use std::sync::Arc;

use brisk_engine::frame::cumulative::CumAgg;
use rhai::{Dynamic, Engine, EvalAltResult, Map};

use super::args::{ctx, options};
use super::dataframe::err;
use super::fndoc::{FnDoc, doc};
use crate::error::runtime;
use crate::state::SessionState;
use crate::types::{Delayed, LazyFrame, LazySeries};

type Res<T> = Result<T, Box<EvalAltResult>>;

/// This area's entries of the API reference.
pub(super) const DOCS: &[FnDoc] = &[
    doc(
        "sum",
        "df.sum(#{numeric_only}) / df.mean() / min / max / count / std / variance -> DataFrame",
        "The reduction of every column (the index column aside), as one row whose columns are the frame's: pandas' Series indexed by column name, turned on its side (a brisk frame has no hidden index). A column the reduction does not fit (a string's mean) is an error unless `numeric_only: true` leaves the non-numeric columns out.",
        "from_columns(#{a: [1, 2, 3], b: [0.5, (), 2.5]}).sum().compute()",
    ),
    doc(
        "median",
        "df.median(#{numeric_only}) / df.quantile(q, #{numeric_only}) -> DataFrame",
        "One row: each numeric column's median or `q` quantile, from up to 1,000 sample points per partition (exact below that, as `s.quantile`).",
        "from_columns(#{a: [1, 2, 3, 10], b: [0.5, 1.5, (), 2.5]}, #{npartitions: 2}).median().compute()",
    ),
    doc(
        "corr",
        "df.corr(#{numeric_only}) -> DataFrame / s.corr(other) -> Delayed",
        "Pearson correlations of every pair of numeric columns over the rows where both are present, as pandas: a matrix whose first column `index` names the rows. Of two Series of the same rows: one number.",
        "let df = from_columns(#{a: [1, 2, 3, 4], b: [2.0, 4.5, 6.0, 8.5]});\ndf.corr().compute()",
    ),
    doc(
        "cov",
        "df.cov(#{ddof, numeric_only}) -> DataFrame / s.cov(other, #{ddof}) -> Delayed",
        "Covariances of every pair of numeric columns over the rows where both are present (`ddof` 1 by default, as pandas), as a matrix like `corr`'s; of two Series, one number.",
        "let df = from_columns(#{a: [1, 2, 3, 4], b: [2.0, 4.5, 6.0, 8.5]});\ndf[\"a\"].cov(df[\"b\"]).compute()",
    ),
    doc(
        "idxmax",
        "df.idxmax(#{numeric_only}) -> DataFrame / s.idxmax() -> Delayed",
        "The label of the row where each numeric column (or the Series) is largest: its value of the index `set_index` made, else its position in the frame; ties give the first, missing values are skipped, as pandas.",
        "from_columns(#{k: [\"a\", \"b\", \"c\"], x: [3, 9, 1]}).set_index(\"k\")[\"x\"].idxmax().compute()",
    ),
    doc(
        "idxmin",
        "df.idxmin(#{numeric_only}) -> DataFrame / s.idxmin() -> Delayed",
        "The label of the row where each numeric column (or the Series) is smallest, as `idxmax`.",
        "from_columns(#{x: [3, 9, 1], y: [0.5, -1.0, 2.0]}, #{npartitions: 2}).idxmin().compute()",
    ),
    doc(
        "cumsum",
        "df.cumsum() / cumprod / cummax / cummin -> DataFrame; the same of a Series -> Series",
        "Running sums, products, maxima and minima down the rows, across partitions (each partition's own, then the carry from those before folded in, as Dask). Missing values stay missing and are skipped. Integer and float columns; the index column is left as it is.",
        "from_columns(#{x: [1, 2, (), 4]}, #{npartitions: 2})[\"x\"].cumsum().compute()",
    ),
    doc(
        "cummax",
        "df.cummax() / s.cummax() -> DataFrame / Series",
        "The largest value so far down the rows, across partitions, as `cumsum` sums.",
        "from_columns(#{x: [3, 1, 4, 1, 5]}, #{npartitions: 2})[\"x\"].cummax().compute()",
    ),
    doc(
        "cummin",
        "df.cummin() / s.cummin() -> DataFrame / Series",
        "The smallest value so far down the rows, across partitions, as `cumsum` sums.",
        "from_columns(#{x: [3, 1, 4, 0, 5]}, #{npartitions: 2}).cummin().compute()",
    ),
];

fn numeric_only(m: Option<Map>, what: &str, more: &[&str]) -> Res<(bool, Map)> {
    let mut allowed = vec!["numeric_only"];
    allowed.extend_from_slice(more);
    let m = options(m, what, &allowed)?;
    let flag = match m.get("numeric_only") {
        None => false,
        Some(d) => d.as_bool().map_err(|_| runtime(format!("{what}: numeric_only is true or false")))?,
    };
    Ok((flag, m))
}

fn ddof(m: &Map, what: &str) -> Res<u32> {
    match m.get("ddof") {
        None => Ok(1),
        Some(d) => d
            .as_int()
            .ok()
            .and_then(|i| u32::try_from(i).ok())
            .ok_or_else(|| runtime(format!("{what}: ddof is a whole number, 0 or more"))),
    }
}

fn quantile(state: &SessionState, f: &LazyFrame, q: &Dynamic, m: Option<Map>) -> Res<LazyFrame> {
    let q = q
        .as_float()
        .or_else(|_| q.as_int().map(|i| i as f64))
        .map_err(|_| runtime("quantile: q is a number"))?;
    let (num, _) = numeric_only(m, "quantile", &[])?;
    Ok(LazyFrame { f: f.f.quantile_all(&ctx(state), q, num).map_err(err)? })
}

fn moments(state: &SessionState, f: &LazyFrame, corr: bool, m: Option<Map>) -> Res<LazyFrame> {
    let what = if corr { "corr" } else { "cov" };
    let more: &[&str] = if corr { &["method"] } else { &["ddof"] };
    let (num, m) = numeric_only(m, what, more)?;
    if let Some(method) = m.get("method")
        && method.clone().into_string().ok().as_deref() != Some("pearson")
    {
        return Err(runtime("corr: method is \"pearson\" (the one Dask has)"));
    }
    let ddof = ddof(&m, what)?;
    Ok(LazyFrame { f: f.f.moments(&ctx(state), corr, ddof, num).map_err(err)? })
}

fn pair(state: &SessionState, s: &LazySeries, o: &LazySeries, corr: bool, m: Option<Map>) -> Res<Delayed> {
    let what = if corr { "corr" } else { "cov" };
    let m = options(m, what, if corr { &[] } else { &["ddof"] })?;
    let (layer, key) = s.s.moment_with(&ctx(state), &o.s, corr, ddof(&m, what)?).map_err(err)?;
    Ok(Delayed { layer, key })
}

pub(super) fn register(engine: &mut Engine, state: &Arc<SessionState>) {
    for (name, red) in super::dataframe::REDUCTIONS {
        let reduce = move |st: &SessionState, f: &LazyFrame, m: Option<Map>| -> Res<LazyFrame> {
            let (num, _) = numeric_only(m, name, &[])?;
            Ok(LazyFrame { f: f.f.reduce_all(&ctx(st), red, num).map_err(err)? })
        };
        let st = state.clone();
        engine.register_fn(name, move |f: &mut LazyFrame| reduce(&st, f, None));
        let st = state.clone();
        engine.register_fn(name, move |f: &mut LazyFrame, m: Map| reduce(&st, f, Some(m)));
    }
    let st = state.clone();
    engine.register_fn("median", move |f: &mut LazyFrame| quantile(&st, f, &Dynamic::from(0.5), None));
    let st = state.clone();
    engine.register_fn("median", move |f: &mut LazyFrame, m: Map| {
        quantile(&st, f, &Dynamic::from(0.5), Some(m))
    });
    let st = state.clone();
    engine.register_fn("quantile", move |f: &mut LazyFrame, q: Dynamic| quantile(&st, f, &q, None));
    let st = state.clone();
    engine
        .register_fn("quantile", move |f: &mut LazyFrame, q: Dynamic, m: Map| quantile(&st, f, &q, Some(m)));
    for (name, corr) in [("corr", true), ("cov", false)] {
        let st = state.clone();
        engine.register_fn(name, move |f: &mut LazyFrame| moments(&st, f, corr, None));
        let st = state.clone();
        engine.register_fn(name, move |f: &mut LazyFrame, m: Map| moments(&st, f, corr, Some(m)));
        let st = state.clone();
        engine.register_fn(name, move |s: &mut LazySeries, o: LazySeries| pair(&st, s, &o, corr, None));
        let st = state.clone();
        engine.register_fn(name, move |s: &mut LazySeries, o: LazySeries, m: Map| {
            pair(&st, s, &o, corr, Some(m))
        });
    }
    for (name, max) in [("idxmax", true), ("idxmin", false)] {
        let best = move |st: &SessionState, f: &LazyFrame, m: Option<Map>| -> Res<LazyFrame> {
            let (num, _) = numeric_only(m, name, &[])?;
            Ok(LazyFrame { f: f.f.idx_best(&ctx(st), max, num).map_err(err)? })
        };
        let st = state.clone();
        engine.register_fn(name, move |f: &mut LazyFrame| best(&st, f, None));
        let st = state.clone();
        engine.register_fn(name, move |f: &mut LazyFrame, m: Map| best(&st, f, Some(m)));
        let st = state.clone();
        engine.register_fn(name, move |s: &mut LazySeries| -> Res<Delayed> {
            let (layer, key) = s.s.idx_best(&ctx(&st), max).map_err(err)?;
            Ok(Delayed { layer, key })
        });
    }
    for agg in [CumAgg::Sum, CumAgg::Prod, CumAgg::Max, CumAgg::Min] {
        let st = state.clone();
        engine.register_fn(agg.name(), move |f: &mut LazyFrame| -> Res<LazyFrame> {
            Ok(LazyFrame { f: f.f.cumulative(&ctx(&st), agg).map_err(err)? })
        });
        let st = state.clone();
        engine.register_fn(agg.name(), move |s: &mut LazySeries| -> Res<LazySeries> {
            let f = s.s.to_frame().cumulative(&ctx(&st), agg).map_err(err)?;
            Ok(LazySeries { s: f.column(&s.s.name).map_err(err)? })
        });
    }
}
