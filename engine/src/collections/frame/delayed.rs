//! `from_delayed`: a frame whose partitions are other tasks' values, as
//! Dask's `dd.from_delayed`.

use std::sync::Arc;

use super::dataframe::{DataFrame, MAX_PARTITIONS, block};
use super::shuffle::{invalid, task};
use crate::collections::array::Ctx;
use crate::frame::dtype::Schema;
use crate::frame::error::FrameError;
use crate::frame::op::FrameOp;
use crate::graph::layer::{Layer, LayerRef};
use crate::graph::token::Tokenizer;
use crate::key::Key;
use crate::ops::Arg;

impl DataFrame {
    /// `from_delayed(values, #{meta})`: a frame whose partitions are other
    /// tasks' values (frames, or rows as maps), each made a partition of
    /// `schema` by one small task, as Dask's `dd.from_delayed`.
    pub fn from_values(
        ctx: &Ctx,
        parts: Vec<(LayerRef, Key)>,
        schema: Schema,
    ) -> Result<DataFrame, FrameError> {
        if parts.is_empty() || parts.len() > MAX_PARTITIONS {
            return Err(invalid(format!("from_delayed: give from 1 to {} values", MAX_PARTITIONS)));
        }
        let mut t = Tokenizer::new();
        t.str("from_delayed").serde(&schema);
        parts.iter().for_each(|(_, k)| {
            t.key(k);
        });
        let name: Arc<str> = Arc::from(t.name("from_delayed"));
        let schema_arc = Arc::new(schema.clone());
        let (mut tasks, mut keys, mut layers) = (Vec::new(), Vec::new(), Vec::new());
        for (i, (layer, key)) in parts.into_iter().enumerate() {
            let out = block(&name, i);
            let op = FrameOp::FromValue(schema_arc.clone());
            tasks.push(task(ctx, out.clone(), op, vec![Arg::Dep(0)], vec![key]));
            keys.push(out);
            layers.push(layer);
        }
        Ok(DataFrame::of_keys(Layer::new(name, tasks, layers), keys, schema, "from_delayed"))
    }
}
