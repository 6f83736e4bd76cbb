//! Errors of array operations. Each message names the shapes, axes or
//! values involved, as NumPy's do, so the script layer can show it as is.

/// Why an array operation was refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ArrayError {
    /// Shapes that do not fit together (broadcasting, reshapes, products).
    #[error("{0}")]
    Shape(String),
    /// Two shapes that NumPy's rules cannot broadcast together.
    #[error("shapes {} and {} cannot be broadcast together", fmt_shape(a), fmt_shape(b))]
    Broadcast { a: Vec<usize>, b: Vec<usize> },
    /// An axis outside the array's dimensions.
    #[error("axis {axis} is out of bounds for array of dimension {ndim}")]
    Axis { axis: i64, ndim: usize },
    /// An operation the element type does not support.
    #[error("{0}")]
    DType(String),
    /// A bad argument value (chunk spec, bins, ranges).
    #[error("{0}")]
    Value(String),
    /// A chunk, a result or a graph that would not fit in the memory budget.
    #[error(transparent)]
    Memory(#[from] crate::memory::MemoryError),
    /// No GPU, a device out of memory, a failed CUDA call.
    #[error("{0}")]
    Gpu(String),
}

impl From<brisk_gpu::GpuError> for ArrayError {
    fn from(e: brisk_gpu::GpuError) -> Self {
        ArrayError::Gpu(e.to_string())
    }
}

impl From<ArrayError> for crate::error::TaskError {
    fn from(e: ArrayError) -> Self {
        crate::error::TaskError::user(e.to_string())
    }
}

/// Normalize a possibly negative axis (`-1` is the last one).
pub fn norm_axis(axis: i64, ndim: usize) -> Result<usize, ArrayError> {
    let n = ndim as i64;
    let a = if axis < 0 { axis + n } else { axis };
    if a < 0 || a >= n { Err(ArrayError::Axis { axis, ndim }) } else { Ok(a as usize) }
}

/// Normalize a list of axes: each in range, none repeated, sorted.
pub fn norm_axes(axes: &[i64], ndim: usize) -> Result<Vec<usize>, ArrayError> {
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let n = norm_axis(a, ndim)?;
        if out.contains(&n) {
            return Err(ArrayError::Value(format!("repeated axis {a} in {axes:?}")));
        }
        out.push(n);
    }
    out.sort_unstable();
    Ok(out)
}

/// `(3, 4)` / `(5,)`, as NumPy prints shapes.
pub fn fmt_shape(shape: &[usize]) -> String {
    match shape {
        [n] => format!("({n},)"),
        _ => format!("({})", shape.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")),
    }
}
