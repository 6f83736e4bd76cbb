//! `rolling("1h")`: windows of time over a datetime column (the index
//! `set_index` made, or `on`), across partitions as Dask's `map_overlap`
//! with a time `before`: a chain of edges carries to each partition the
//! earlier rows its windows reach (`crate::frame::rolling_time`).

use std::sync::Arc;

use super::dataframe::{DataFrame, block};
use super::shuffle::{deps_args, invalid, task};
use crate::collections::array::Ctx;
use crate::frame::dtype::{DType, Schema};
use crate::frame::error::FrameError;
use crate::frame::op::FrameOp;
use crate::frame::rolling::RollAgg;
use crate::graph::layer::Layer;
use crate::graph::token::Tokenizer;
use crate::key::Key;

impl DataFrame {
    /// `agg` of every other column over windows of `span` ns of `on` (the
    /// index when `None`), which must be datetime and sorted; results are
    /// float64 and `on` is kept.
    pub fn rolling_time(
        &self,
        ctx: &Ctx,
        span: i64,
        on: Option<&str>,
        min_periods: usize,
        agg: RollAgg,
    ) -> Result<DataFrame, FrameError> {
        if span <= 0 {
            return Err(invalid(format!("rolling: a window of {span} ns")));
        }
        let on = match (on, self.divisions.as_ref()) {
            (Some(on), _) => on.to_string(),
            (None, Some(d)) => d.on.clone(),
            (None, None) => {
                return Err(invalid(
                    "rolling: a window of time needs a datetime index (set_index) or #{on: column}",
                ));
            }
        };
        match self.schema.get(&on) {
            Some(DType::Datetime) => {}
            Some(t) => return Err(invalid(format!("rolling: column \"{on}\" is {t}, not datetime64[ns]"))),
            None => {
                return Err(FrameError::UnknownColumn { column: on, columns: self.schema.listing() });
            }
        }
        // The index (`set_index`'s) stays as it is, as pandas keeps it.
        let index = self.divisions.as_ref().map(|d| d.on.clone());
        let kept = |n: &String| *n == on || Some(n) == index.as_ref();
        if let Some((n, t)) = self.schema.cols.iter().find(|(n, t)| !kept(n) && !t.is_numeric()) {
            return Err(invalid(format!(
                "rolling: column \"{n}\" is {t}; select numeric columns first (df[[...]])"
            )));
        }
        let columns: Vec<String> =
            self.schema.cols.iter().map(|(n, _)| n).filter(|n| !kept(n)).cloned().collect();
        let (layer, parts) = self.partitions(ctx);
        let tok = Tokenizer::new()
            .str(&self.token)
            .str("rolling-time")
            .u64(span as u64)
            .str(&on)
            .u64(min_periods as u64)
            .str(agg.name())
            .finish();
        let edges: Arc<str> = Arc::from(format!("rolling-edge-{tok}"));
        let name: Arc<str> = Arc::from(format!("rolling-{tok}"));
        let (mut edge_tasks, mut tasks, mut keys) = (Vec::new(), Vec::new(), Vec::new());
        let mut prev: Option<Key> = None;
        for (i, p) in parts.iter().enumerate() {
            let key = block(&name, i);
            let mut deps = vec![p.clone()];
            deps.extend(prev.clone());
            let op =
                FrameOp::RollingTime { span, on: on.clone(), min_periods, agg, columns: columns.clone() };
            tasks.push(task(ctx, key.clone(), op, deps_args(deps.len()), deps));
            keys.push(key);
            if i + 1 < parts.len() {
                let edge = block(&edges, i);
                let mut deps: Vec<Key> = prev.clone().into_iter().collect();
                deps.push(p.clone());
                let op = FrameOp::TimeEdge { on: on.clone(), span };
                edge_tasks.push(task(ctx, edge.clone(), op, deps_args(deps.len()), deps));
                prev = Some(edge);
            }
        }
        let edges = Layer::new(edges, edge_tasks, vec![layer.clone()]);
        let schema = Schema::new(
            self.schema
                .cols
                .iter()
                .map(|(n, t)| (n.clone(), if kept(n) { *t } else { DType::Float64 }))
                .collect(),
        );
        let mut f = DataFrame::of_keys(Layer::new(name, tasks, vec![layer, edges]), keys, schema, "rolling");
        // Row for row the same rows, in the same partitions, and index.
        f.rows = self.rows.clone();
        f.divisions = self.divisions.clone();
        Ok(f)
    }
}
