//! `cumsum`, `cumprod`, `cummax` and `cummin` of a frame or Series: the
//! task graph of `crate::frame::cumulative`'s scan (each partition's own
//! running values, a chain of carries, the carries folded in); and
//! `ewm(..).mean()`, whose loop state is carried partition to partition.

use super::dataframe::{DataFrame, block};
use super::shuffle::{deps_args, invalid, task};
use crate::collections::array::Ctx;
use crate::frame::cumulative::{CumAgg, CumStep};
use crate::frame::dtype::{DType, Schema};
use crate::frame::error::FrameError;
use crate::frame::ewm::Ewm;
use crate::frame::op::FrameOp;
use crate::graph::layer::Layer;
use crate::graph::token::Tokenizer;
use crate::key::Key;

impl DataFrame {
    /// The running aggregate of every column but the index (integer and
    /// float columns only; pandas would concatenate strings).
    pub fn cumulative(&self, ctx: &Ctx, agg: CumAgg) -> Result<DataFrame, FrameError> {
        let label = agg.name();
        let index = self.divisions.as_ref().map(|d| d.on.as_str());
        let columns: Vec<String> =
            self.schema.names().filter(|n| Some(*n) != index).map(String::from).collect();
        if let Some((n, t)) = self
            .schema
            .cols
            .iter()
            .find(|(n, t)| columns.contains(n) && !matches!(t, DType::Int64 | DType::Float64))
        {
            return Err(invalid(format!(
                "{label}: column \"{n}\" is {t}; select integer and float columns first (df[[...]])"
            )));
        }
        let (layer, parts) = self.partitions(ctx);
        let tok = Tokenizer::new().str(&self.token).str(label).finish();
        let name: std::sync::Arc<str> = std::sync::Arc::from(format!("{label}-{tok}"));
        let local: std::sync::Arc<str> = std::sync::Arc::from(format!("{label}-local-{tok}"));
        let carries: std::sync::Arc<str> = std::sync::Arc::from(format!("{label}-carry-{tok}"));
        let op = |step| FrameOp::Cumulative { agg, columns: columns.clone(), step };
        let mut local_tasks = Vec::with_capacity(parts.len());
        let mut local_keys = Vec::with_capacity(parts.len());
        for (i, p) in parts.iter().enumerate() {
            let key = block(&local, i);
            local_tasks.push(task(ctx, key.clone(), op(CumStep::Local), deps_args(1), vec![p.clone()]));
            local_keys.push(key);
        }
        // carry[i]: what comes before partition i, for i ≥ 1.
        let mut carry_tasks = Vec::new();
        let mut carry: Option<Key> = None;
        let mut tasks = Vec::with_capacity(parts.len());
        let mut keys = Vec::with_capacity(parts.len());
        for (i, l) in local_keys.iter().enumerate() {
            match &carry {
                // Partition 0 needs no carry: its running values are the answer.
                None => keys.push(l.clone()),
                Some(c) => {
                    let key = block(&name, i);
                    let deps = vec![l.clone(), c.clone()];
                    tasks.push(task(ctx, key.clone(), op(CumStep::Apply), deps_args(2), deps));
                    keys.push(key);
                }
            }
            if i + 1 < local_keys.len() {
                let last = block(&carries, 2 * i);
                carry_tasks.push(task(ctx, last.clone(), op(CumStep::Last), deps_args(1), vec![l.clone()]));
                carry = Some(match carry {
                    None => last,
                    Some(before) => {
                        let merged = block(&carries, 2 * i + 1);
                        let deps = vec![before, last];
                        carry_tasks.push(task(ctx, merged.clone(), op(CumStep::Merge), deps_args(2), deps));
                        merged
                    }
                });
            }
        }
        let local = Layer::new(local, local_tasks, vec![layer]);
        let carries = Layer::new(carries, carry_tasks, vec![local.clone()]);
        let out = Layer::new(name, tasks, vec![local, carries]);
        let mut f = DataFrame::of_keys(out, keys, self.schema.as_ref().clone(), label);
        // Row for row the same rows, in the same partitions.
        f.rows = self.rows.clone();
        Ok(f)
    }
}

impl DataFrame {
    /// `ewm(..).mean()` (or `.var()`, `.std()`: `spec.stat`) of every
    /// numeric column but the index (float results): a chain of states,
    /// partition i's output from state i - 1.
    pub fn ewm(&self, ctx: &Ctx, spec: Ewm) -> Result<DataFrame, FrameError> {
        if !(spec.alpha > 0.0 && spec.alpha <= 1.0) {
            return Err(invalid(format!("ewm: alpha={} is not in (0, 1]", spec.alpha)));
        }
        let index = self.divisions.as_ref().map(|d| d.on.as_str());
        let columns: Vec<String> =
            self.schema.names().filter(|n| Some(*n) != index).map(String::from).collect();
        if let Some((n, t)) = self.schema.cols.iter().find(|(n, t)| columns.contains(n) && !t.is_numeric()) {
            return Err(invalid(format!(
                "ewm: column \"{n}\" is {t}; select numeric columns first (df[[...]])"
            )));
        }
        let (layer, parts) = self.partitions(ctx);
        let tok = Tokenizer::new().str(&self.token).str("ewm").serde(&spec).finish();
        let name: std::sync::Arc<str> = std::sync::Arc::from(format!("ewm-{tok}"));
        let states: std::sync::Arc<str> = std::sync::Arc::from(format!("ewm-state-{tok}"));
        let op = |state_only| FrameOp::Ewm { spec, columns: columns.clone(), state_only };
        let (mut tasks, mut keys, mut state_tasks) = (Vec::new(), Vec::new(), Vec::new());
        let mut state: Option<Key> = None;
        for (i, p) in parts.iter().enumerate() {
            let mut deps = vec![p.clone()];
            deps.extend(state.clone());
            let key = block(&name, i);
            tasks.push(task(ctx, key.clone(), op(false), deps_args(deps.len()), deps.clone()));
            keys.push(key);
            if i + 1 < parts.len() {
                let s = block(&states, i);
                state_tasks.push(task(ctx, s.clone(), op(true), deps_args(deps.len()), deps));
                state = Some(s);
            }
        }
        let states = Layer::new(states, state_tasks, vec![layer.clone()]);
        let schema = Schema::new(
            self.schema
                .cols
                .iter()
                .map(|(n, t)| (n.clone(), if columns.contains(n) { DType::Float64 } else { *t }))
                .collect(),
        );
        let mut f = DataFrame::of_keys(Layer::new(name, tasks, vec![layer, states]), keys, schema, "ewm");
        // Row for row the same rows, in the same partitions.
        f.rows = self.rows.clone();
        Ok(f)
    }
}
