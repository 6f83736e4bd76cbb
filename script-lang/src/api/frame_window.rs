//! Windows over a frame's rows in Rhai: `rolling(window, #{min_periods})`
//! then `sum mean min max count std variance median` or `apply(f)`, and
//! `ewm(#{com | span | halflife | alpha, adjust, ignore_na,
//! min_periods}).mean()`. Both reach across partition edges; their
//! results keep the frame's rows, so they can be assigned back to it.

use std::sync::Arc;

use brisk_engine::collections::frame::DataFrame;
use brisk_engine::frame::ewm::Ewm;
use brisk_engine::frame::rolling::{RollAgg, Window};
use rhai::{Dynamic, Engine, EvalAltResult, FnPtr, Map};

use super::args::{ctx, options, positive, shipped};
use super::dataframe::err;
use super::fndoc::{FnDoc, doc};
use crate::error::runtime;
use crate::state::SessionState;
use crate::types::{LazyFrame, LazySeries};

type Res<T> = Result<T, Box<EvalAltResult>>;

/// This area's entries of the API reference.
pub(super) const DOCS: &[FnDoc] = &[
    doc(
        "rolling",
        "df.rolling(window, #{min_periods}) / s.rolling(...), then .sum() .mean() .min() .max() .count() .std() .variance() .median() or .apply(f)",
        "Rolling aggregates over `window` rows, across partition edges (each partition gets the rows before it, as Dask's map_overlap). As pandas: a window gives a value once it holds `min_periods` present values (the window by default); missing values are skipped; `count` counts them over `min_periods` rows. `apply(f)` calls the closure on each window's values (an array, `()` for a missing one). Numeric columns only; results are float64.",
        "from_columns(#{x: [1, 2, 3, 4, 5]}, #{npartitions: 3}).rolling(2).mean().compute()",
    ),
    doc(
        "ewm",
        "df.ewm(#{com | span | halflife | alpha, adjust, ignore_na, min_periods}) / s.ewm(...), then .mean()",
        "Exponentially weighted means, as pandas' ewm: give exactly one of `com`, `span`, `halflife` or `alpha`; `adjust` (true by default) divides by the sum of the weights; missing values keep their place in the decay unless `ignore_na`. Each partition starts from the state the one before it left.",
        "from_columns(#{x: [1.0, 2.0, (), 4.0]}, #{npartitions: 2})[\"x\"].ewm(#{span: 3}).mean().compute()",
    ),
];

/// `df.rolling(window)` (or a Series'), waiting for its aggregation.
#[derive(Clone)]
pub struct Rolling {
    f: DataFrame,
    win: Window,
    /// The column when it came from a Series.
    series: Option<String>,
}

/// `df.ewm(...)` (or a Series'), waiting for `mean()`.
#[derive(Clone)]
pub struct Ewma {
    f: DataFrame,
    spec: Ewm,
    series: Option<String>,
}

fn result(f: DataFrame, series: &Option<String>) -> Res<Dynamic> {
    Ok(match series {
        Some(name) => Dynamic::from(LazySeries { s: f.column(name).map_err(err)? }),
        None => Dynamic::from(LazyFrame { f }),
    })
}

fn window(w: i64, m: Option<Map>) -> Res<Window> {
    let window = positive(&Dynamic::from(w), "rolling: window")?;
    let m = options(m, "rolling", &["min_periods"])?;
    let min_periods = match m.get("min_periods") {
        None => window,
        Some(d) if d.is_unit() => window,
        Some(d) => {
            d.as_int().ok().and_then(|i| usize::try_from(i).ok()).filter(|&i| i <= window).ok_or_else(
                || runtime(format!("rolling: min_periods is a whole number from 0 to the window, {window}")),
            )?
        }
    };
    Ok(Window { window, min_periods })
}

fn number(m: &Map, k: &str) -> Res<Option<f64>> {
    match m.get(k) {
        None => Ok(None),
        Some(d) if d.is_unit() => Ok(None),
        Some(d) => d
            .as_float()
            .or_else(|_| d.as_int().map(|i| i as f64))
            .map(Some)
            .map_err(|_| runtime(format!("ewm: {k} is a number"))),
    }
}

/// pandas' decay parameters to one `alpha`, with its checks.
fn ewm_spec(m: Option<Map>) -> Res<Ewm> {
    let m = options(m, "ewm", &["com", "span", "halflife", "alpha", "adjust", "ignore_na", "min_periods"])?;
    let given: Vec<(&str, f64)> = ["com", "span", "halflife", "alpha"]
        .into_iter()
        .filter_map(|k| number(&m, k).transpose().map(|v| v.map(|v| (k, v))))
        .collect::<Res<_>>()?;
    let alpha = match given.as_slice() {
        [("com", c)] if *c >= 0.0 => 1.0 / (1.0 + c),
        [("span", s)] if *s >= 1.0 => 2.0 / (s + 1.0),
        [("halflife", h)] if *h > 0.0 => 1.0 - (-std::f64::consts::LN_2 / h).exp(),
        [("alpha", a)] if *a > 0.0 && *a <= 1.0 => *a,
        [(k, v)] => {
            let need = match *k {
                "com" => "at least 0",
                "span" => "at least 1",
                "halflife" => "more than 0",
                _ => "in (0, 1]",
            };
            return Err(runtime(format!("ewm: {k}={v} must be {need}")));
        }
        _ => return Err(runtime("ewm: give exactly one of com, span, halflife and alpha")),
    };
    let flag = |k: &str, default: bool| -> Res<bool> {
        m.get(k)
            .map_or(Ok(default), |d| d.as_bool().map_err(|_| runtime(format!("ewm: {k} is true or false"))))
    };
    let min_periods = match m.get("min_periods") {
        None => 0,
        Some(d) => d
            .as_int()
            .ok()
            .and_then(|i| usize::try_from(i).ok())
            .ok_or_else(|| runtime("ewm: min_periods is a whole number, 0 or more"))?,
    };
    Ok(Ewm { alpha, adjust: flag("adjust", true)?, ignore_na: flag("ignore_na", false)?, min_periods })
}

pub(super) fn register(engine: &mut Engine, state: &Arc<SessionState>) {
    engine.register_type_with_name::<Rolling>("Rolling");
    engine.register_fn("rolling", |f: &mut LazyFrame, w: i64| -> Res<Rolling> {
        Ok(Rolling { f: f.f.clone(), win: window(w, None)?, series: None })
    });
    engine.register_fn("rolling", |f: &mut LazyFrame, w: i64, m: Map| -> Res<Rolling> {
        Ok(Rolling { f: f.f.clone(), win: window(w, Some(m))?, series: None })
    });
    engine.register_fn("rolling", |s: &mut LazySeries, w: i64| -> Res<Rolling> {
        Ok(Rolling { f: s.s.to_frame(), win: window(w, None)?, series: Some(s.s.name.clone()) })
    });
    engine.register_fn("rolling", |s: &mut LazySeries, w: i64, m: Map| -> Res<Rolling> {
        Ok(Rolling { f: s.s.to_frame(), win: window(w, Some(m))?, series: Some(s.s.name.clone()) })
    });
    for (name, agg) in [
        ("sum", RollAgg::Sum),
        ("mean", RollAgg::Mean),
        ("min", RollAgg::Min),
        ("max", RollAgg::Max),
        ("count", RollAgg::Count),
        ("std", RollAgg::Std),
        ("variance", RollAgg::Var),
        ("median", RollAgg::Median),
    ] {
        let st = state.clone();
        engine.register_fn(name, move |r: &mut Rolling| -> Res<Dynamic> {
            result(r.f.rolling(&ctx(&st), r.win, agg).map_err(err)?, &r.series)
        });
    }
    let st = state.clone();
    engine.register_fn("apply", move |r: &mut Rolling, f: FnPtr| -> Res<Dynamic> {
        let (udf, token) = shipped(&st, &f)?;
        result(r.f.rolling_apply(&ctx(&st), r.win, udf, &token).map_err(err)?, &r.series)
    });
    engine.register_fn("to_string", |r: &mut Rolling| {
        format!("Rolling [window={}, min_periods={}]", r.win.window, r.win.min_periods)
    });
    engine.register_type_with_name::<Ewma>("ExponentialMovingWindow");
    engine.register_fn("ewm", |f: &mut LazyFrame, m: Map| -> Res<Ewma> {
        Ok(Ewma { f: f.f.clone(), spec: ewm_spec(Some(m))?, series: None })
    });
    engine.register_fn("ewm", |s: &mut LazySeries, m: Map| -> Res<Ewma> {
        Ok(Ewma { f: s.s.to_frame(), spec: ewm_spec(Some(m))?, series: Some(s.s.name.clone()) })
    });
    let st = state.clone();
    engine.register_fn("mean", move |e: &mut Ewma| -> Res<Dynamic> {
        result(e.f.ewm_mean(&ctx(&st), e.spec).map_err(err)?, &e.series)
    });
    engine
        .register_fn("to_string", |e: &mut Ewma| format!("ExponentialMovingWindow [alpha={}]", e.spec.alpha));
}
