//! Whole task results moved between device and host memory: a CUDA
//! worker's results past its device memory limit go to the host (and on to
//! disk), and come back to the device when a task reads them; a GPU result
//! travels between processes as its host copy. A result may hold several
//! GPU blocks (a list: a QR's `[H, R, tau]`), so the walk is recursive.

use std::sync::Arc;

use super::chunk::{GpuChunk, default_device};
use crate::array::error::ArrayError;
use crate::value::Value;

/// Bytes of device memory the GPU blocks inside `v` hold (a view counts
/// the whole buffer it keeps alive).
pub fn device_bytes(v: &Value) -> u64 {
    match v {
        Value::Gpu(g) => g.buffer().len() as u64,
        Value::List(items) => items.iter().map(device_bytes).sum(),
        Value::Map(m) => m.values().map(device_bytes).sum(),
        _ => 0,
    }
}

/// `v` with every GPU block replaced by its host copy (the same value when
/// it holds none).
pub fn to_host(v: &Value) -> Result<Value, ArrayError> {
    Ok(match v {
        Value::Gpu(g) => Value::Array(Arc::new(g.to_host()?)),
        Value::List(items) if items.iter().any(|x| device_bytes(x) > 0) => {
            Value::list(items.iter().map(to_host).collect::<Result<Vec<_>, _>>()?)
        }
        Value::Map(m) if m.values().any(|x| device_bytes(x) > 0) => Value::Map(Arc::new(
            m.iter().map(|(k, x)| Ok((k.clone(), to_host(x)?))).collect::<Result<_, ArrayError>>()?,
        )),
        other => other.clone(),
    })
}

/// `v` with every host array block uploaded to this thread's GPU: the way
/// back for a value [`to_host`] moved (its blocks were all on the device).
pub fn to_device(v: &Value) -> Result<Value, ArrayError> {
    Ok(match v {
        Value::Array(c) => Value::Gpu(Arc::new(GpuChunk::from_host(c, &default_device()?)?)),
        Value::List(items) => Value::list(items.iter().map(to_device).collect::<Result<Vec<_>, _>>()?),
        Value::Map(m) => Value::Map(Arc::new(
            m.iter().map(|(k, x)| Ok((k.clone(), to_device(x)?))).collect::<Result<_, ArrayError>>()?,
        )),
        other => other.clone(),
    })
}
