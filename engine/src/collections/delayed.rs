//! The lazy single value (Dask's `Delayed`): one task's layer and its key.

use crate::client::Future;
use crate::graph::layer::LayerRef;
use crate::key::Key;

use super::{Collection, held_layer};

#[derive(Clone, Debug)]
pub struct Delayed {
    pub layer: LayerRef,
    pub key: Key,
}

impl Collection for Delayed {
    fn partitions(&self) -> (LayerRef, Vec<Key>) {
        (self.layer.clone(), vec![self.key.clone()])
    }

    /// A delayed value is its own result: no extra task.
    fn finalize(&self) -> (LayerRef, Key) {
        (self.layer.clone(), self.key.clone())
    }

    fn persisted(&self, _keys: Vec<Key>, futures: Vec<Future>) -> Delayed {
        Delayed { layer: held_layer(format!("persisted-{}", self.key), futures), key: self.key.clone() }
    }
}
