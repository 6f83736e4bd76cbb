//! `shift(periods)` and `diff(periods)` across partition edges: each
//! partition is computed with the |periods| rows on the side its values
//! come from (before it for a positive shift, after it for a negative
//! one), gathered across as many partitions as it takes, as Dask's
//! `map_overlap` does for `shift` and `diff`.

use super::dataframe::{DataFrame, block};
use super::shuffle::{deps_args, invalid, task};
use crate::collections::array::Ctx;
use crate::frame::dtype::{DType, Schema};
use crate::frame::error::FrameError;
use crate::frame::op::{FrameOp, Sink};
use crate::graph::layer::Layer;
use crate::graph::token::Tokenizer;
use crate::key::Key;

impl DataFrame {
    /// `shift(periods)` of every column but the index (`set_index`'s), or
    /// with `diff` each value minus the one `periods` rows before it
    /// (integer and float columns only: pandas' diff of bools is a
    /// comparison, not a number). As pandas, the rows moved in from outside
    /// the frame are missing, and an integer column becomes float64 (a
    /// shift by 0 keeps it).
    pub fn shift(&self, ctx: &Ctx, periods: i64, diff: bool) -> Result<DataFrame, FrameError> {
        let label = if diff { "diff" } else { "shift" };
        let index = self.divisions.as_ref().map(|d| d.on.as_str());
        let columns: Vec<String> =
            self.schema.names().filter(|n| Some(*n) != index).map(String::from).collect();
        if diff
            && let Some((n, t)) = self
                .schema
                .cols
                .iter()
                .find(|(n, t)| Some(n.as_str()) != index && !matches!(t, DType::Int64 | DType::Float64))
        {
            return Err(invalid(format!(
                "diff: column \"{n}\" is {t}; select integer and float columns first (df[[...]])"
            )));
        }
        let k = usize::try_from(periods.unsigned_abs())
            .map_err(|_| invalid(format!("{label}: periods={periods} is out of range")))?;
        let (layer, parts) = self.partitions(ctx);
        let mut t = Tokenizer::new();
        t.str(&self.token).str(label).serde(&periods);
        let tok = t.finish();
        let edges: std::sync::Arc<str> = std::sync::Arc::from(format!("{label}-edge-{tok}"));
        let name: std::sync::Arc<str> = std::sync::Arc::from(format!("{label}-{tok}"));
        // edge[i]: the k rows before partition i (periods > 0) or after it.
        let n = parts.len();
        let mut edge: Vec<Option<Key>> = vec![None; n];
        let mut edge_tasks = Vec::new();
        if k > 0 {
            let mut carried: Option<Key> = None;
            let order: Vec<usize> =
                if periods > 0 { (0..n.saturating_sub(1)).collect() } else { (1..n).rev().collect() };
            for i in order {
                let key = block(&edges, i);
                // The rows next to partition i on the far side, and partition i,
                // in row order; the k of them nearest the next partition.
                let (deps, sink) = if periods > 0 {
                    let mut d: Vec<Key> = carried.clone().into_iter().collect();
                    d.push(parts[i].clone());
                    (d, Sink::Tail(k))
                } else {
                    let mut d = vec![parts[i].clone()];
                    d.extend(carried.clone());
                    (d, Sink::Head(k))
                };
                edge_tasks.push(task(ctx, key.clone(), FrameOp::Combine(sink), deps_args(deps.len()), deps));
                edge[if periods > 0 { i + 1 } else { i - 1 }] = Some(key.clone());
                carried = Some(key);
            }
        }
        let mut tasks = Vec::with_capacity(n);
        let mut keys = Vec::with_capacity(n);
        for (i, p) in parts.iter().enumerate() {
            let key = block(&name, i);
            let mut deps = vec![p.clone()];
            deps.extend(edge[i].clone());
            let op = FrameOp::Shift { periods, diff, columns: columns.clone() };
            tasks.push(task(ctx, key.clone(), op, deps_args(deps.len()), deps));
            keys.push(key);
        }
        let floats = diff || periods != 0;
        let schema = Schema::new(
            self.schema
                .cols
                .iter()
                .map(|(c, t)| {
                    let moved = columns.contains(c);
                    let t = if moved && floats && (diff || *t == DType::Int64) { DType::Float64 } else { *t };
                    (c.clone(), t)
                })
                .collect(),
        );
        let edges = Layer::new(edges, edge_tasks, vec![layer.clone()]);
        let mut f = DataFrame::of_keys(Layer::new(name, tasks, vec![layer, edges]), keys, schema, label);
        // Row for row the same rows, in the same partitions.
        f.rows = self.rows.clone();
        Ok(f)
    }
}
