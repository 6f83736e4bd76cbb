//! GPU chunks: an array block in device memory (`brisk-gpu` buffers), with
//! NumPy's layout rules (strides, so transposes and slices are views, as on
//! the host). Operations on them run as kernels generated from the same
//! operator vocabulary as the CPU path (`expr`), reductions (`reduce`),
//! creation on the device (`create`), scans (`scan`) and cuBLAS (`linalg`); `exec` decides
//! which runs where. Work is queued on the device's stream and a task ends
//! when its kernels are queued: only bringing a result to the host waits.

pub mod exec;
pub mod expr;

mod arg;
mod chunk;
mod create;
mod ctype;
mod layout;
mod linalg;
pub mod place;
pub mod raw;
mod reduce;
pub mod resource;
mod scan;
#[cfg(test)]
mod tests;
mod unique;
pub mod user;

pub use chunk::{GpuChunk, c_strides, default_device};
pub use layout::concat_grid;
