//! Whole task results moved between device and host memory: a CUDA
//! worker's results past its device memory limit go to the host (and on to
//! disk), and come back to the device when a task reads them; a GPU result
//! travels between processes as its host copy. A result may hold several
//! GPU blocks (a list: a QR's `[H, R, tau]`), so the walk is recursive.
//! Between two CUDA workers of one host a result travels [`Shipped`]: its
//! GPU blocks by CUDA IPC handle, device to device.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::chunk::{GpuChunk, c_strides, default_device};
use crate::array::dtype::DType;
use crate::array::error::{ArrayError, fmt_shape};
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

/// A result on its way to another process of this host: its GPU blocks as
/// handles to staging memory the sender lends until the receiver has
/// copied them ([`export`], [`import`]), everything else as it is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Shipped {
    Value(Value),
    Block { handle: Vec<u8>, bytes: u64, kept: bool, dtype: DType, shape: Vec<usize> },
    List(Vec<Shipped>),
}

/// `v` with its GPU blocks lent through staging memory; the leases in
/// `leases` must live until the receiver is done.
pub fn export(v: &Value, leases: &mut Vec<brisk_gpu::Lease>) -> Result<Shipped, ArrayError> {
    Ok(match v {
        Value::Gpu(g) => {
            let c = g.contiguous()?;
            let (e, lease) = c.buf.export()?;
            leases.push(lease);
            Shipped::Block {
                handle: e.handle,
                bytes: e.bytes as u64,
                kept: e.kept,
                dtype: c.dtype,
                shape: c.shape,
            }
        }
        Value::List(items) if items.iter().any(|x| device_bytes(x) > 0) => {
            Shipped::List(items.iter().map(|x| export(x, leases)).collect::<Result<_, _>>()?)
        }
        // A map's blocks (rare) travel as host copies.
        other => Shipped::Value(to_host(other)?),
    })
}

/// The value [`export`] shipped, its blocks copied onto this thread's GPU.
pub fn import(s: &Shipped) -> Result<Value, ArrayError> {
    Ok(match s {
        Shipped::Value(v) => v.clone(),
        Shipped::List(items) => Value::list(items.iter().map(import).collect::<Result<Vec<_>, _>>()?),
        Shipped::Block { handle, bytes, kept, dtype, shape } => {
            let len = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
            if len.and_then(|n| n.checked_mul(dtype.itemsize())) != Some(*bytes as usize) {
                return Err(ArrayError::Value(format!(
                    "a shipped block of shape {} {dtype} cannot hold {bytes} bytes",
                    fmt_shape(shape)
                )));
            }
            let device = default_device()?;
            let from = brisk_gpu::Exported { handle: handle.clone(), bytes: *bytes as usize, kept: *kept };
            let what = || format!("a block of shape {} {dtype} from a peer", fmt_shape(shape));
            let buf = brisk_gpu::Buffer::import(&device, &from, &what)?;
            Value::Gpu(Arc::new(GpuChunk {
                buf: Arc::new(buf),
                dtype: *dtype,
                strides: c_strides(shape),
                shape: shape.clone(),
                offset: 0,
            }))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What holds no GPU block ships as it is, and a block whose byte
    /// count disagrees with its shape is refused before any device is
    /// touched (no GPU needed).
    #[test]
    fn host_values_ship_as_they_are_and_bad_blocks_are_refused() {
        let v = Value::list(vec![Value::Int(3), Value::Str("s".into())]);
        let mut leases = Vec::new();
        let shipped = export(&v, &mut leases).expect("export");
        assert_eq!(shipped, Shipped::Value(v.clone()));
        assert!(leases.is_empty());
        assert_eq!(import(&shipped).expect("import"), v);
        let bad = Shipped::Block {
            handle: vec![0; 64],
            bytes: 7,
            kept: false,
            dtype: DType::F64,
            shape: vec![2, 2],
        };
        let e = import(&Shipped::List(vec![bad])).expect_err("7 bytes cannot be a 2x2 f64 block");
        assert!(e.to_string().contains("shape (2, 2) f64 cannot hold 7 bytes"), "{e}");
    }
}
