//! Windows over a frame's rows in Rhai: `rolling(window, #{min_periods})`
//! then `sum mean min max count std variance median` or `apply(f)`, and
//! `ewm(#{com | span | halflife | alpha, adjust, ignore_na,
//! min_periods}).mean()`. Both reach across partition edges; their
//! results keep the frame's rows, so they can be assigned back to it.
//! And `resample(rule)`: time bins of a datetime column, aggregated.

use std::sync::Arc;

use brisk_engine::collections::frame::{Assigned, DataFrame};
use brisk_engine::frame::ewm::{Ewm, EwmStat};
use brisk_engine::frame::red::Red;
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
        "df.rolling(window, #{min_periods}) / df.rolling(\"1h\", #{on, min_periods}) / s.rolling(...), then .sum() .mean() .min() .max() .count() .std() .variance() .median() or .apply(f)",
        "Rolling aggregates over `window` rows, across partition edges (each partition gets the rows before it, as Dask's map_overlap). As pandas: a window gives a value once it holds `min_periods` present values (the window by default); missing values are skipped; `count` counts them over `min_periods` rows. `apply(f)` calls the closure on each window's values (an array, `()` for a missing one). A window of time (\"1h\", \"30min\", \"2D\") over the datetime index (or `on`, which must be sorted) holds the rows of the last span, `(t - span, t]`, as pandas' (min_periods 1 by default); the time column is kept. Numeric columns only; results are float64.",
        "from_columns(#{x: [1, 2, 3, 4, 5]}, #{npartitions: 3}).rolling(2).mean().compute()",
    ),
    doc(
        "resample",
        "df.resample(rule, #{on}) then .sum() .mean() .min() .max() .count() .std() .variance() or .agg(#{col: how})",
        "Rows binned by a datetime column (the index `set_index` made, or `on`) floored to `rule` (a fixed frequency: \"30s\", \"15min\", \"7h\", \"D\", \"3D\"; bins start at the first day's midnight, as pandas' origin \"start_day\", so a rule that does not divide a day first computes the earliest time), aggregated per bin, with a row for every bin from the first to the last as pandas (sums and counts 0 in an empty bin, others missing); one partition, the bin column first.",
        "let df = from_columns(#{t: [\"2024-01-01 00:10\", \"2024-01-01 00:20\", \"2024-01-01 02:05\"], v: [1, 2, 3]});\nlet df = df.assign(#{t: to_datetime(df[\"t\"])});\ndf.resample(\"1h\", #{on: \"t\"}).sum().compute()",
    ),
    doc(
        "ewm",
        "df.ewm(#{com | span | halflife | alpha, adjust, ignore_na, min_periods}) / s.ewm(...), then .mean(), .variance(#{bias}) (pandas' var) or .std(#{bias})",
        "Exponentially weighted means, variances and deviations, as pandas' ewm: give exactly one of `com`, `span`, `halflife` or `alpha`; `adjust` (true by default) divides by the sum of the weights; missing values keep their place in the decay unless `ignore_na`; `bias: true` leaves out the unbiasing factor. Each partition starts from the state the one before it left.",
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
    /// A window of time (`rolling("1h")`): its nanoseconds and the
    /// datetime column (`None`: the index).
    time: Option<(i64, Option<String>)>,
}

/// `rolling("1h", #{min_periods, on})`: a window of time; `min_periods`
/// is 1 by default, as pandas'.
fn time_window(f: DataFrame, series: Option<String>, freq: &str, m: Option<Map>) -> Res<Rolling> {
    let m = options(m, "rolling", &["min_periods", "on"])?;
    let span = brisk_engine::frame::text::frequency(freq).map_err(|_| {
        runtime(format!("rolling: \"{freq}\" is not a window of time (such as \"1h\", \"30min\", \"2D\")"))
    })?;
    let min_periods = match m.get("min_periods") {
        None => 1,
        Some(d) => d
            .as_int()
            .ok()
            .and_then(|i| usize::try_from(i).ok())
            .ok_or_else(|| runtime("rolling: min_periods is a whole number, 0 or more"))?,
    };
    let on = match m.get("on") {
        None => None,
        Some(d) => Some(d.clone().into_string().map_err(|_| runtime("rolling: on is a column name"))?),
    };
    Ok(Rolling { f, win: Window { window: 0, min_periods }, series, time: Some((span, on)) })
}

/// A Series with the index of its frame beside it, for windows of time.
fn indexed(s: &brisk_engine::collections::frame::Series) -> Res<(DataFrame, Option<String>)> {
    let Some(d) = s.frame.divisions.as_ref() else {
        return Err(runtime(
            "rolling: a window of time needs a datetime index (set_index) on the Series' frame",
        ));
    };
    if d.on == s.name {
        return Err(runtime(format!(
            "rolling: \"{}\" is the index itself; roll another column over it",
            s.name
        )));
    }
    let base = s.frame.assign(vec![(s.name.clone(), Assigned::Series(s.clone()))]).map_err(err)?;
    let cols = vec![d.on.clone(), s.name.clone()];
    Ok((base.project(&cols).map_err(err)?, Some(d.on.clone())))
}

/// `df.resample(rule)`, waiting for its aggregation.
#[derive(Clone)]
pub struct Resampler {
    f: DataFrame,
    on: String,
    step: i64,
}

fn resampler(f: &LazyFrame, rule: &str, m: Option<Map>) -> Res<Resampler> {
    let m = options(m, "resample", &["on"])?;
    let on = match m.get("on") {
        Some(d) => d.clone().into_string().map_err(|_| runtime("resample: on is a column name"))?,
        None => {
            f.f.divisions
                .as_ref()
                .map(|d| d.on.clone())
                .ok_or_else(|| runtime("resample needs a datetime index (set_index) or #{on: column}"))?
        }
    };
    let step = brisk_engine::frame::text::frequency(rule)
        .map_err(|e| runtime(e.to_string().replace("dt_floor", "resample")))?;
    Ok(Resampler { f: f.f.clone(), on, step })
}

/// pandas starts bins at the first day's midnight (`origin="start_day"`):
/// the same bins as from the epoch exactly when the rule divides a day;
/// for other rules the first time is computed first.
fn origin(state: &SessionState, r: &Resampler) -> Res<i64> {
    const DAY: i64 = 86_400_000_000_000;
    if DAY % r.step == 0 {
        return Ok(0);
    }
    let column = r.f.column(&r.on).map_err(err)?;
    if column.dtype != brisk_engine::frame::dtype::DType::Datetime {
        return Ok(0); // `resample` refuses it with the reason.
    }
    let (layer, key) = column.reduce(&ctx(state), Red::Min).map_err(err)?;
    let first = state.compute(&[layer], &[key])?.pop();
    Ok(match first {
        Some(brisk_engine::Value::Int(t)) => t - t.rem_euclid(DAY),
        _ => 0,
    })
}

fn resample(state: &SessionState, r: &Resampler, aggs: Vec<(String, Red)>) -> Res<LazyFrame> {
    let origin = origin(state, r)?;
    Ok(LazyFrame { f: r.f.resample(&ctx(state), &r.on, r.step, origin, &aggs).map_err(err)? })
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
    Ok(Ewm {
        alpha,
        adjust: flag("adjust", true)?,
        ignore_na: flag("ignore_na", false)?,
        min_periods,
        stat: EwmStat::Mean,
    })
}

pub(super) fn register(engine: &mut Engine, state: &Arc<SessionState>) {
    engine.register_type_with_name::<Rolling>("Rolling");
    engine.register_fn("rolling", |f: &mut LazyFrame, w: i64| -> Res<Rolling> {
        Ok(Rolling { f: f.f.clone(), win: window(w, None)?, series: None, time: None })
    });
    engine.register_fn("rolling", |f: &mut LazyFrame, w: i64, m: Map| -> Res<Rolling> {
        Ok(Rolling { f: f.f.clone(), win: window(w, Some(m))?, series: None, time: None })
    });
    engine.register_fn("rolling", |s: &mut LazySeries, w: i64| -> Res<Rolling> {
        Ok(Rolling { f: s.s.to_frame(), win: window(w, None)?, series: Some(s.s.name.clone()), time: None })
    });
    engine.register_fn("rolling", |s: &mut LazySeries, w: i64, m: Map| -> Res<Rolling> {
        Ok(Rolling {
            f: s.s.to_frame(),
            win: window(w, Some(m))?,
            series: Some(s.s.name.clone()),
            time: None,
        })
    });
    engine.register_fn("rolling", |f: &mut LazyFrame, w: &str| time_window(f.f.clone(), None, w, None));
    engine.register_fn("rolling", |f: &mut LazyFrame, w: &str, m: Map| {
        time_window(f.f.clone(), None, w, Some(m))
    });
    engine.register_fn("rolling", |s: &mut LazySeries, w: &str| -> Res<Rolling> {
        let (f, on) = indexed(&s.s)?;
        let mut r = time_window(f, Some(s.s.name.clone()), w, None)?;
        r.time = r.time.map(|(span, _)| (span, on));
        Ok(r)
    });
    engine.register_fn("rolling", |s: &mut LazySeries, w: &str, m: Map| -> Res<Rolling> {
        if m.contains_key("on") {
            return Err(runtime(
                "rolling: a Series rolls over its frame's index; give on to the frame's rolling",
            ));
        }
        let (f, on) = indexed(&s.s)?;
        let mut r = time_window(f, Some(s.s.name.clone()), w, Some(m))?;
        r.time = r.time.map(|(span, _)| (span, on));
        Ok(r)
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
            let f = match &r.time {
                Some((span, on)) => r.f.rolling_time(&ctx(&st), *span, on.as_deref(), r.win.min_periods, agg),
                None => r.f.rolling(&ctx(&st), r.win, agg),
            };
            result(f.map_err(err)?, &r.series)
        });
    }
    let st = state.clone();
    engine.register_fn("apply", move |r: &mut Rolling, f: FnPtr| -> Res<Dynamic> {
        if r.time.is_some() {
            return Err(runtime(
                "rolling: apply over windows of time is not supported; use a window of rows",
            ));
        }
        let (udf, token) = shipped(&st, &f)?;
        result(r.f.rolling_apply(&ctx(&st), r.win, udf, &token).map_err(err)?, &r.series)
    });
    engine.register_fn("to_string", |r: &mut Rolling| {
        format!("Rolling [window={}, min_periods={}]", r.win.window, r.win.min_periods)
    });
    engine.register_type_with_name::<Resampler>("Resampler");
    engine.register_fn("resample", |f: &mut LazyFrame, rule: &str| resampler(f, rule, None));
    engine.register_fn("resample", |f: &mut LazyFrame, rule: &str, m: Map| resampler(f, rule, Some(m)));
    for (name, red) in super::dataframe::REDUCTIONS {
        let st = state.clone();
        engine.register_fn(name, move |r: &mut Resampler| -> Res<LazyFrame> {
            // Every other column the reduction fits (all of them for count).
            let cols =
                r.f.schema
                    .cols
                    .iter()
                    .filter(|(n, t)| *n != r.on && (red == Red::Count || t.is_numeric()))
                    .map(|(n, _)| (n.clone(), red))
                    .collect();
            resample(&st, r, cols)
        });
    }
    let st = state.clone();
    engine.register_fn("agg", move |r: &mut Resampler, m: Map| -> Res<LazyFrame> {
        let aggs = m
            .iter()
            .map(|(c, how)| {
                let how = how
                    .clone()
                    .into_string()
                    .map_err(|_| runtime("resample agg: give #{column: \"sum\"}"))?;
                let red = Red::parse(&how)
                    .ok_or_else(|| runtime(format!("resample agg: unknown aggregation \"{how}\"")))?;
                Ok((c.to_string(), red))
            })
            .collect::<Res<Vec<_>>>()?;
        resample(&st, r, aggs)
    });
    engine.register_fn("to_string", |r: &mut Resampler| format!("Resampler [on={}, {} ns]", r.on, r.step));
    engine.register_type_with_name::<Ewma>("ExponentialMovingWindow");
    engine.register_fn("ewm", |f: &mut LazyFrame, m: Map| -> Res<Ewma> {
        Ok(Ewma { f: f.f.clone(), spec: ewm_spec(Some(m))?, series: None })
    });
    engine.register_fn("ewm", |s: &mut LazySeries, m: Map| -> Res<Ewma> {
        Ok(Ewma { f: s.s.to_frame(), spec: ewm_spec(Some(m))?, series: Some(s.s.name.clone()) })
    });
    let st = state.clone();
    engine.register_fn("mean", move |e: &mut Ewma| -> Res<Dynamic> {
        result(e.f.ewm(&ctx(&st), e.spec).map_err(err)?, &e.series)
    });
    for name in ["variance", "std"] {
        let stat = move |m: Map| -> Res<EwmStat> {
            let m = options(Some(m), name, &["bias"])?;
            let bias = match m.get("bias") {
                None => false,
                Some(b) => b.as_bool().map_err(|_| runtime(format!("ewm {name}: bias is true or false")))?,
            };
            Ok(if name == "variance" { EwmStat::Var { bias } } else { EwmStat::Std { bias } })
        };
        let st = state.clone();
        engine.register_fn(name, move |e: &mut Ewma, m: Map| -> Res<Dynamic> {
            let spec = Ewm { stat: stat(m)?, ..e.spec };
            result(e.f.ewm(&ctx(&st), spec).map_err(err)?, &e.series)
        });
        let st = state.clone();
        engine.register_fn(name, move |e: &mut Ewma| -> Res<Dynamic> {
            let spec = Ewm { stat: stat(Map::new())?, ..e.spec };
            result(e.f.ewm(&ctx(&st), spec).map_err(err)?, &e.series)
        });
    }
    engine
        .register_fn("to_string", |e: &mut Ewma| format!("ExponentialMovingWindow [alpha={}]", e.spec.alpha));
}
