//! Running one frame task on its dependency values: read the source, apply
//! the stages, feed the sink; merge partials; finish.

use std::sync::Arc;

use polars::prelude::*;

use super::agg::Stats;

use super::red::Red;

use super::call::Closures;
use super::dtype::{DType, Schema};
use super::group::GroupSpec;
use super::op::{DUPLICATED, Finish, FrameOp, Keep, Sink, Source, Then};
use super::partition::{Frame, concat};
use super::values::from_values;
use super::{argbest, csv, cumulative, expr, json, moments, parquet, quantile, rolling, shuffle, udf};
use crate::error::TaskError;
use crate::value::Value;

fn frame_arg(v: &Value) -> Result<&DataFrame, TaskError> {
    match v {
        Value::Frame(f) => Ok(&f.0),
        other => Err(TaskError::internal(format!("a frame kernel got a {}", other.type_name()))),
    }
}

fn frames(args: &[Value]) -> Result<Vec<&DataFrame>, TaskError> {
    args.iter().map(frame_arg).collect()
}

fn err(e: PolarsError) -> TaskError {
    TaskError::user(e.to_string().lines().next().unwrap_or("polars error").to_string())
}

fn frame(df: DataFrame) -> Value {
    Value::Frame(Arc::new(Frame(df)))
}

/// Run a frame kernel (closures through `udfs`). Polars may panic on
/// input it does not expect; a panic becomes the task's error, never the
/// worker's death.
pub fn execute(
    op: &FrameOp,
    args: &[Value],
    udfs: &dyn crate::runner::UdfRunner,
    ctx: &crate::runner::TaskContext<'_>,
) -> Result<Value, TaskError> {
    let first = || frame_arg(args.first().ok_or_else(|| TaskError::internal("no input frame"))?);
    match op {
        FrameOp::MapPartitions { udf, schema } => {
            return Ok(frame(udf::map_partition(udf, schema, first()?, udfs, ctx)?));
        }
        FrameOp::Apply { udf, by, schema } => {
            return Ok(frame(udf::apply(udf, by, schema, first()?, udfs, ctx)?));
        }
        FrameOp::RollingApply { udf, window, columns } => {
            let before = args.get(1).map(frame_arg).transpose()?;
            return Ok(frame(udf::rolling_apply(udf, *window, columns, first()?, before, udfs, ctx)?));
        }
        _ => {}
    }
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(op, args, &Closures::new(udfs, ctx))))
    {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| p.downcast_ref::<&str>().copied())
                .unwrap_or("unknown panic");
            Err(TaskError::panic(format!("dataframe kernel failed: {msg}")))
        }
    }
}

fn run(op: &FrameOp, args: &[Value], cl: &Closures<'_>) -> Result<Value, TaskError> {
    match op {
        FrameOp::Run { source, columns, stages, sink } => {
            if let (Source::Csv { spec, path, start, end }, Sink::Group(g)) = (source, sink)
                && let Some(partial) = super::fastcsv::read_group(spec, path, *start, *end, stages, g)?
            {
                return Ok(frame(partial));
            }
            let mut df = match source {
                Source::Dep => {
                    let df = frame_arg(args.first().ok_or_else(|| TaskError::internal("no input frame"))?)?;
                    match columns {
                        Some(cols) => df.select(cols.iter().map(|c| c.as_str())).map_err(err)?,
                        None => df.clone(),
                    }
                }
                Source::Csv { spec, path, start, end } => {
                    csv::read(spec, path, *start, *end, columns.as_deref())?
                }
                Source::Json { schema, path, start, end } => {
                    json::read(schema, path, *start, *end, columns.as_deref())?
                }
                Source::Parquet { schema, path, offset, len } => {
                    parquet::read(path, *offset, *len, columns.as_deref(), schema)?
                }
                Source::Records(schema) => {
                    records(schema, args.first().ok_or_else(|| TaskError::internal("no input records"))?)?
                }
            };
            for s in stages {
                df = s.apply_in(df, Some(cl)).map_err(|e| cl.take_error().unwrap_or_else(|| err(e)))?;
            }
            partial(sink, df, args)
        }
        FrameOp::Combine(sink) => combine(sink, args),
        FrameOp::Finish(f) => finish(f, args),
        FrameOp::Collect { spec, out, schema, then } => {
            let Some(df) = shuffle::collect(spec, *out, args)? else {
                return Ok(frame(DataFrame::empty_with_schema(&schema.to_polars())));
            };
            Ok(frame(match then {
                Then::Rows => df,
                Then::Sort { by, descending } => sort(&df, by, descending).map_err(err)?,
                Then::Group(g) => g.finish(&g.regroup(&df).map_err(err)?).map_err(err)?,
            }))
        }
        FrameOp::Join(spec) => {
            let [l, r] = args else { return Err(TaskError::internal("a join needs two inputs")) };
            Ok(frame(shuffle::join(spec, frame_arg(l)?, frame_arg(r)?).map_err(err)?))
        }
        FrameOp::Slice { part, of } => {
            let df = frame_arg(args.first().ok_or_else(|| TaskError::internal("no input frame"))?)?;
            let (h, of) = (df.height(), (*of).max(1) as usize);
            let lo = h * *part as usize / of;
            let hi = h * (*part as usize + 1) / of;
            Ok(frame(df.slice(lo as i64, hi - lo)))
        }
        FrameOp::MapPartitions { .. } | FrameOp::Apply { .. } | FrameOp::RollingApply { .. } => {
            Err(TaskError::internal("a closure kernel without a script engine"))
        }
        FrameOp::SideBySide { by, columns } => {
            let all = frames(args)?;
            let Some(first) = all.first() else { return Err(TaskError::internal("no grouped results")) };
            let mut out: Vec<Column> =
                by.iter().map(|b| first.column(b).cloned()).collect::<PolarsResult<_>>().map_err(err)?;
            for df in &all {
                for c in df.columns() {
                    if !by.iter().any(|b| b.as_str() == c.name().as_str()) {
                        out.push(c.clone());
                    }
                }
            }
            let df = DataFrame::new(first.height(), out).map_err(err)?;
            Ok(frame(df.select(columns.iter().map(String::as_str)).map_err(err)?))
        }
        FrameOp::Rolling { window, agg, columns } => {
            let part = frame_arg(args.first().ok_or_else(|| TaskError::internal("no input frame"))?)?;
            let before = args.get(1).map(frame_arg).transpose()?;
            Ok(frame(rolling::rolling(part, before, *window, *agg, columns).map_err(err)?))
        }
        FrameOp::RollingTime { span, on, min_periods, agg, columns } => {
            let part = frame_arg(args.first().ok_or_else(|| TaskError::internal("no input frame"))?)?;
            let before = args.get(1).map(frame_arg).transpose()?;
            let out = crate::frame::rolling_time::rolling_time(
                part,
                before,
                *span,
                on,
                *min_periods,
                *agg,
                columns,
            );
            Ok(frame(out.map_err(err)?))
        }
        FrameOp::TimeEdge { on, span } => {
            let (before, part) = match args {
                [part] => (None, frame_arg(part)?),
                [before, part] => (Some(frame_arg(before)?), frame_arg(part)?),
                _ => return Err(TaskError::internal("a time edge takes one or two frames")),
            };
            Ok(frame(crate::frame::rolling_time::edge(before, part, on, *span).map_err(err)?))
        }
        FrameOp::Conform(schema) => {
            let part = frame_arg(args.first().ok_or_else(|| TaskError::internal("no input frame"))?)?;
            Ok(frame(conform(part, schema).map_err(err)?))
        }
        FrameOp::Shift { periods, diff, columns } => {
            let part = frame_arg(args.first().ok_or_else(|| TaskError::internal("no input frame"))?)?;
            let edge = args.get(1).map(frame_arg).transpose()?;
            Ok(frame(rolling::shift(part, edge, *periods, *diff, columns).map_err(err)?))
        }
        FrameOp::Cumulative { agg, columns, step } => {
            let part = frame_arg(args.first().ok_or_else(|| TaskError::internal("no input frame"))?)?;
            let carry = args.get(1).map(frame_arg).transpose()?;
            Ok(frame(cumulative::step(*agg, columns, *step, part, carry).map_err(err)?))
        }
        FrameOp::Ewm { spec, columns, state_only } => {
            let part = frame_arg(args.first().ok_or_else(|| TaskError::internal("no input frame"))?)?;
            let before = args.get(1).map(frame_arg).transpose()?;
            Ok(frame(spec.step(columns, part, before, *state_only).map_err(err)?))
        }
        FrameOp::FromValue(schema) => {
            let v = args.first().ok_or_else(|| TaskError::internal("no input value"))?;
            Ok(frame(udf::to_frame(v, schema, "from_delayed")?))
        }
        FrameOp::FromBlock(columns) => match args.first() {
            Some(Value::Array(c)) => Ok(frame(
                super::to_block::block_frame(c, columns).map_err(|e| TaskError::user(e.to_string()))?,
            )),
            Some(other) => Err(TaskError::user(format!(
                "from_dask_array: a block is {}, not an array",
                other.type_name()
            ))),
            None => Err(TaskError::internal("no input block")),
        },
        FrameOp::FillBins { on, step, zero } => {
            let part = frame_arg(args.first().ok_or_else(|| TaskError::internal("no input frame"))?)?;
            Ok(frame(super::bins::fill(part, on, *step, zero).map_err(err)?))
        }
        FrameOp::Zip { from, to } => {
            let [l, r] = args else { return Err(TaskError::internal("align needs two inputs")) };
            let (l, r) = (frame_arg(l)?, frame_arg(r)?);
            if l.height() != r.height() {
                return Err(TaskError::user(format!(
                    "the Series \"{from}\" has {} rows in a partition where the frame has {} (was one of them repartitioned?); build the Series from this frame",
                    r.height(),
                    l.height()
                )));
            }
            let col = r.column(from).map_err(err)?.clone().with_name(to.as_str().into());
            let mut out = l.clone();
            out.with_column(col).map_err(err)?;
            Ok(frame(out))
        }
    }
}

/// `df` with exactly `schema`'s columns, in its order: each cast to its
/// type, a column it lacks all missing.
fn conform(df: &DataFrame, schema: &Schema) -> PolarsResult<DataFrame> {
    let h = df.height();
    let cols = schema
        .cols
        .iter()
        .map(|(name, t)| {
            let dt = t.to_polars();
            match df.column(name) {
                Ok(c) => c.cast(&dt),
                Err(_) => Ok(Column::full_null(name.as_str().into(), h, &dt)),
            }
        })
        .collect::<PolarsResult<Vec<_>>>()?;
    DataFrame::new(h, cols)
}

/// A stable sort with missing values last (pandas' `na_position="last"`).
fn sort(df: &DataFrame, by: &[String], descending: &[bool]) -> PolarsResult<DataFrame> {
    df.sort(
        by.iter().map(String::as_str),
        SortMultipleOptions::default()
            .with_order_descending_multi(descending.iter().copied())
            .with_nulls_last(true)
            .with_maintain_order(true),
    )
}

/// The rows with the `n` largest (or smallest) values of `on`, in that
/// order; ties keep the earlier row (pandas' `keep="first"`).
fn top(df: &DataFrame, on: &str, n: usize, largest: bool) -> PolarsResult<DataFrame> {
    let df = df.drop_nulls(Some(&[on.to_string()]))?;
    Ok(sort(&df, &[on.to_string()], &[largest])?.head(Some(n)))
}

fn partial(sink: &Sink, df: DataFrame, args: &[Value]) -> Result<Value, TaskError> {
    Ok(match sink {
        Sink::Frame => frame(df),
        Sink::Head(n) => frame(df.head(Some(*n))),
        Sink::Stats(c) => {
            let s = df.column(c).map_err(err)?.as_materialized_series().clone();
            Stats::of(&s).map_err(err)?.to_value()
        }
        Sink::Unique(c) => {
            let col = df.select([c.as_str()]).map_err(err)?.drop_nulls::<String>(None).map_err(err)?;
            frame(col.unique_stable(None, UniqueKeepStrategy::First, None).map_err(err)?)
        }
        Sink::Group(spec) => frame(spec.partial(&df).map_err(err)?),
        Sink::WriteCsv(path) => {
            let mut df = df;
            csv::write(path, &mut df)?;
            Value::Str(path.clone())
        }
        Sink::WriteParquet(path) => {
            let mut df = df;
            parquet::write(path, &mut df)?;
            Value::Str(path.clone())
        }
        Sink::WriteJson(path) => {
            super::json::write(path, &df)?;
            Value::Str(path.clone())
        }
        Sink::Split(spec, input) => {
            let bounds = match spec.by {
                shuffle::Partitioner::Range { .. } => {
                    Some(frame_arg(args.last().ok_or_else(|| TaskError::internal("no sort boundaries"))?)?)
                }
                shuffle::Partitioner::Hash(_) => None,
            };
            shuffle::split(spec, *input, &df, bounds)?
        }
        Sink::Sample { on, k } => frame(shuffle::sample(&df, on, *k).map_err(err)?),
        Sink::Top { on, n, largest } => frame(top(&df, on, *n, *largest).map_err(err)?),
        Sink::Tail(n) => frame(df.tail(Some(*n))),
        Sink::Distinct { subset, keep } => {
            frame(distinct(&df, subset.as_deref(), *keep, false).map_err(err)?)
        }
        Sink::Describe(cols) => quantile::describe_partial(&df, cols).map_err(err)?,
        Sink::StatsOf(cols) => Value::list(
            cols.iter()
                .map(|c| Ok(Stats::of(df.column(c)?.as_materialized_series())?.to_value()))
                .collect::<PolarsResult<Vec<_>>>()
                .map_err(err)?,
        ),
        Sink::Moments(cols) => moments::partial(&df, cols).map_err(err)?,
        Sink::ArgBest { columns, index, max } => {
            argbest::partial(&df, columns, index.as_deref(), *max).map_err(err)?
        }
    })
}

/// The distinct rows of `df` (a partition, or stacked partials when
/// `stacked`) by `subset`. Partials concatenate in partition order, so
/// keeping the first (or last) row per partition and again per combine
/// keeps the global first (last).
fn distinct(df: &DataFrame, subset: Option<&[String]>, keep: Keep, stacked: bool) -> PolarsResult<DataFrame> {
    match keep {
        Keep::First => df.unique_stable(subset, UniqueKeepStrategy::First, None),
        Keep::Last => df.unique_stable(subset, UniqueKeepStrategy::Last, None),
        Keep::Unique => {
            // A value is duplicated if it occurs twice here, or if any of
            // the partials it came in already says so.
            let cols: Vec<String> = match subset {
                Some(s) => s.to_vec(),
                None => df
                    .get_column_names()
                    .into_iter()
                    .filter(|c| c.as_str() != DUPLICATED)
                    .map(|c| c.to_string())
                    .collect(),
            };
            let mut dup = df.select(cols.iter().map(|c| c.as_str()))?.is_duplicated()?;
            if stacked {
                dup = &dup | df.column(DUPLICATED)?.bool()?;
            }
            let mut flagged = df.clone();
            flagged.with_column(dup.with_name(DUPLICATED.into()).into_column())?;
            // The first row of each value carries the flag of all of them.
            flagged.unique_stable(Some(&cols), UniqueKeepStrategy::First, None)
        }
    }
}

fn combine(sink: &Sink, args: &[Value]) -> Result<Value, TaskError> {
    Ok(match sink {
        Sink::Frame => frame(concat(&frames(args)?).map_err(err)?),
        Sink::Head(n) => frame(concat(&frames(args)?).map_err(err)?.head(Some(*n))),
        Sink::Stats(_) => {
            let mut st = Stats::default();
            for a in args {
                st.merge(&Stats::from_value(a).ok_or_else(|| TaskError::internal("bad statistics partial"))?);
            }
            st.to_value()
        }
        Sink::Unique(_) => {
            let all = concat(&frames(args)?).map_err(err)?;
            frame(all.unique_stable(None, UniqueKeepStrategy::First, None).map_err(err)?)
        }
        Sink::Group(spec) => frame(spec.regroup(&concat(&frames(args)?).map_err(err)?).map_err(err)?),
        Sink::WriteCsv(_) | Sink::WriteParquet(_) | Sink::WriteJson(_) | Sink::Split(..) => {
            Value::list(args.to_vec())
        }
        Sink::Sample { .. } => frame(concat(&frames(args)?).map_err(err)?),
        Sink::Tail(n) => frame(concat(&frames(args)?).map_err(err)?.tail(Some(*n))),
        Sink::Top { on, n, largest } => {
            frame(top(&concat(&frames(args)?).map_err(err)?, on, *n, *largest).map_err(err)?)
        }
        Sink::Distinct { subset, keep } => frame(
            distinct(&concat(&frames(args)?).map_err(err)?, subset.as_deref(), *keep, true).map_err(err)?,
        ),
        Sink::Describe(_) => quantile::describe_combine(args)
            .map_err(err)?
            .ok_or_else(|| TaskError::internal("bad describe partial"))?,
        Sink::StatsOf(cols) => {
            let mut acc = vec![Stats::default(); cols.len()];
            for a in args {
                let Value::List(parts) = a else { return Err(TaskError::internal("bad statistics partial")) };
                if parts.len() != acc.len() {
                    return Err(TaskError::internal("bad statistics partial"));
                }
                for (st, p) in acc.iter_mut().zip(parts.iter()) {
                    st.merge(
                        &Stats::from_value(p).ok_or_else(|| TaskError::internal("bad statistics partial"))?,
                    );
                }
            }
            Value::list(acc.iter().map(Stats::to_value).collect())
        }
        Sink::Moments(_) => {
            moments::merge(args).ok_or_else(|| TaskError::internal("bad co-moment partial"))?
        }
        Sink::ArgBest { index, max, .. } => argbest::merge(args, index.is_none(), *max)
            .ok_or_else(|| TaskError::internal("bad idxmax partial"))?,
    })
}

fn finish(f: &Finish, args: &[Value]) -> Result<Value, TaskError> {
    let one = args.first().ok_or_else(|| TaskError::internal("finish without input"))?;
    Ok(match f {
        Finish::Reduce(red, t) => Stats::from_value(one)
            .ok_or_else(|| TaskError::internal("bad statistics partial"))?
            .finish(*red, *t),
        Finish::NUnique => Value::Int(frame_arg(one)?.height() as i64),
        Finish::Unique => one.clone(),
        Finish::Singles => {
            let df = frame_arg(one)?;
            let dup = df.column(DUPLICATED).map_err(err)?.bool().map_err(err)?;
            frame(df.filter(&!dup).map_err(err)?.drop(DUPLICATED).map_err(err)?)
        }
        Finish::Head(n) => frame(frame_arg(one)?.head(Some(*n))),
        Finish::Group(spec) => frame(spec.finish(frame_arg(one)?).map_err(err)?),
        Finish::ValueCounts { column } => {
            let df = frame_arg(one)?;
            let spec = GroupSpec {
                by: vec![column.clone()],
                aggs: vec![("count".into(), String::new(), Red::Size, DType::Int64)],
            };
            let out = spec.finish(df).map_err(err)?;
            let sorted = out
                .sort(
                    ["count", column.as_str()],
                    SortMultipleOptions::default().with_order_descending_multi([true, false]),
                )
                .map_err(err)?;
            frame(sorted)
        }
        Finish::Divisions { on, outputs } => {
            frame(shuffle::divisions(frame_arg(one)?, on, *outputs).map_err(err)?)
        }
        Finish::Quantile { on, qs, list } => {
            let q = quantile::quantiles(frame_arg(one)?, on, qs).map_err(err)?;
            if *list {
                Value::list(q.into_iter().map(Value::Float).collect())
            } else {
                Value::Float(q.first().copied().unwrap_or(f64::NAN))
            }
        }
        Finish::GroupNUnique { by, col, out } => {
            // Each row is a distinct (keys, value): count the present values.
            let df = frame_arg(one)?;
            let present =
                !expr::missing(df.column(col).map_err(err)?.as_materialized_series()).map_err(err)?;
            let ones =
                present.into_series().cast(&DataType::Int64).map_err(err)?.with_name(out.as_str().into());
            let mut keyed = df.select(by.iter().map(String::as_str)).map_err(err)?;
            keyed.with_column(ones.into_column()).map_err(err)?;
            let gb = keyed.group_by(by.iter().map(String::as_str)).map_err(err)?;
            #[allow(deprecated)]
            let summed = gb.select([out.as_str()]).sum().map_err(err)?;
            let mut counted = summed;
            let last = counted.get_column_names().last().map(|n| n.to_string()).unwrap_or_default();
            counted.rename(&last, out.as_str().into()).map_err(err)?;
            frame(sort(&counted, by, &vec![false; by.len()]).map_err(err)?)
        }
        Finish::Describe(cols) => frame(
            quantile::describe_finish(one, cols)
                .map_err(err)?
                .ok_or_else(|| TaskError::internal("bad describe partial"))?,
        ),
        Finish::Top { on, n, largest } => frame(top(frame_arg(one)?, on, *n, *largest).map_err(err)?),
        Finish::Row(red, cols) => {
            let Value::List(parts) = one else { return Err(TaskError::internal("bad statistics partial")) };
            let mut out = Vec::with_capacity(cols.len());
            for ((name, t), p) in cols.iter().zip(parts.iter()) {
                let st = Stats::from_value(p).ok_or_else(|| TaskError::internal("bad statistics partial"))?;
                let rt = red.dtype(*t).map_err(|e| TaskError::user(e.to_string()))?;
                let col = match (rt, st.finish(*red, *t)) {
                    // A datetime's extremes are its nanoseconds.
                    (DType::Datetime, Value::Int(ns)) => Series::new(name.as_str().into(), [ns])
                        .cast(&rt.to_polars())
                        .map_err(err)?
                        .into_column(),
                    (rt, v) => {
                        let one = from_values(&Schema::new(vec![(name.clone(), rt)]), &[vec![v]])
                            .map_err(|e| TaskError::user(e.to_string()))?;
                        one.columns().first().cloned().ok_or_else(|| TaskError::internal("no column"))?
                    }
                };
                out.push(col);
            }
            frame(DataFrame::new(1, out).map_err(err)?)
        }
        Finish::QuantileRow(cols, q) => frame(
            quantile::quantile_row(one, cols, *q)
                .map_err(err)?
                .ok_or_else(|| TaskError::internal("bad describe partial"))?,
        ),
        Finish::ArgBest { columns, label, scalar } => {
            let labels = argbest::labels(one).ok_or_else(|| TaskError::internal("bad idxmax partial"))?;
            if *scalar {
                labels.into_iter().next().unwrap_or(Value::Unit)
            } else {
                let schema = Schema::new(columns.iter().map(|c| (c.clone(), *label)).collect());
                let cols: Vec<Vec<Value>> = labels.into_iter().map(|l| vec![l]).collect();
                frame(from_values(&schema, &cols).map_err(|e| TaskError::user(e.to_string()))?)
            }
        }
        Finish::Moments { columns, corr, ddof, pair } => {
            let k = columns.len();
            let m = moments::matrix(one, k, *corr, f64::from(*ddof))
                .ok_or_else(|| TaskError::internal("bad co-moment partial"))?;
            if *pair {
                Value::Float(m.get(1).copied().unwrap_or(f64::NAN))
            } else {
                let mut cols = vec![Series::new("index".into(), columns.clone()).into_column()];
                for (j, name) in columns.iter().enumerate() {
                    let col: Vec<f64> = (0..k).map(|i| m[i * k + j]).collect();
                    cols.push(Series::new(name.as_str().into(), col).into_column());
                }
                frame(DataFrame::new(k, cols).map_err(err)?)
            }
        }
    })
}

/// A bag partition of maps as a frame of `schema`; a key a record lacks
/// is a missing value.
fn records(schema: &Schema, v: &Value) -> Result<DataFrame, TaskError> {
    let Value::List(items) = v else {
        return Err(TaskError::user(format!("to_dataframe: a partition is {}, not records", v.type_name())));
    };
    let mut cols: Vec<Vec<Value>> = vec![Vec::with_capacity(items.len()); schema.cols.len()];
    for (i, r) in items.iter().enumerate() {
        let Value::Map(m) = r else {
            return Err(TaskError::user(format!("to_dataframe: record {i} is {}, not a map", r.type_name())));
        };
        for ((name, _), col) in schema.cols.iter().zip(cols.iter_mut()) {
            col.push(m.get(name).cloned().unwrap_or(Value::Unit));
        }
    }
    from_values(schema, &cols).map_err(|e| TaskError::user(format!("to_dataframe: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::error::FrameError;
    use crate::frame::values::infer_dtype;
    use crate::value::rows;

    #[test]
    fn frames_round_trip_through_ipc_and_msgpack() {
        let df = df!("a" => [Some(1i64), None], "s" => ["x", "y"]).expect("df");
        let v = frame(df);
        let bytes = rmp_serde::to_vec(&v).expect("encode");
        let back: Value = rmp_serde::from_slice(&bytes).expect("decode");
        assert_eq!(v, back);
    }

    #[test]
    fn values_build_typed_columns() {
        let schema = Schema::new(vec![("a".into(), DType::Float64), ("b".into(), DType::Str)]);
        let df =
            from_values(&schema, &[vec![Value::Int(1), Value::Unit], vec![Value::str("x"), Value::Unit]])
                .expect("frame");
        assert_eq!(df.column("a").expect("a").dtype(), &DataType::Float64);
        let e = from_values(&schema, &[vec![Value::str("no")], vec![Value::Unit]]).expect_err("bad");
        assert!(
            matches!(&e, FrameError::DType(m) if m.contains("column \"a\" is float64, but holds a string")),
            "{e}"
        );
        assert_eq!(infer_dtype("c", &[Value::Int(1), Value::Float(2.0)]).ok(), Some(DType::Float64));
        assert!(infer_dtype("c", &[Value::Int(1), Value::str("x")]).is_err());
        let r = rows(&df);
        assert_eq!(r[0].to_json(), r#"{"a":1.0,"b":"x"}"#);
    }
}
