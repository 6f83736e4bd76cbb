//! Chunk specifications (Dask's `normalize_chunks`): a size per axis, one
//! size for every axis, `"auto"`, or explicit block sizes per axis.

use crate::array::error::fmt_shape;

use crate::array::dtype::DType;

use crate::array::error::ArrayError;

/// What a user may say about chunking one axis.
#[derive(Clone, Debug, PartialEq)]
pub enum AxisChunks {
    /// Blocks of this many elements (the last may be smaller); `-1` means
    /// the whole axis.
    Size(i64),
    /// Explicit block sizes, which must add up to the axis length.
    Sizes(Vec<usize>),
    Auto,
}

/// A chunk specification for a whole array.
#[derive(Clone, Debug, PartialEq)]
pub enum ChunkSpec {
    /// `"auto"`: blocks of about `AUTO_BYTES`.
    Auto,
    /// One entry for every axis.
    PerAxis(Vec<AxisChunks>),
}

/// The most blocks one array may have.
pub const MAX_BLOCKS: usize = 10_000_000;

/// The target block size of `"auto"`, Dask's `array.chunk-size` default.
pub const AUTO_BYTES: usize = 128 * 1024 * 1024;

/// Block sizes per axis for `shape`.
pub fn normalize_chunks(
    spec: &ChunkSpec,
    shape: &[usize],
    dtype: DType,
) -> Result<Vec<Vec<usize>>, ArrayError> {
    let per_axis = match spec {
        ChunkSpec::Auto => vec![AxisChunks::Auto; shape.len()],
        ChunkSpec::PerAxis(v) if v.len() == 1 && shape.len() != 1 => vec![v[0].clone(); shape.len()],
        ChunkSpec::PerAxis(v) => v.clone(),
    };
    if per_axis.len() != shape.len() {
        return Err(ArrayError::Value(format!(
            "chunks {per_axis:?} have {} entries but the shape {} has {} axes",
            per_axis.len(),
            fmt_shape(shape),
            shape.len()
        )));
    }
    let auto = auto_sizes(shape, &per_axis, dtype);
    // Count the blocks before making any: a graph of more than MAX_BLOCKS
    // tasks is a mistake (a typo in a shape), not a computation.
    let mut blocks: u128 = 1;
    for (d, (c, &n)) in per_axis.iter().zip(shape).enumerate() {
        let per = match c {
            AxisChunks::Size(s) if *s > 0 => n.div_ceil(*s as usize).max(1),
            AxisChunks::Auto => n.div_ceil(auto[d].max(1)).max(1),
            AxisChunks::Sizes(v) => v.len().max(1),
            _ => 1,
        };
        blocks = blocks.saturating_mul(per as u128);
    }
    if blocks > MAX_BLOCKS as u128 {
        return Err(ArrayError::Value(format!(
            "chunks {per_axis:?} cut shape {} into {blocks} blocks, more than {MAX_BLOCKS}; use larger chunks",
            fmt_shape(shape)
        )));
    }
    crate::memory::check_tasks(blocks as u64, || {
        format!("the graph of an array of shape {}", fmt_shape(shape))
    })?;
    let mut out = Vec::with_capacity(shape.len());
    for (d, (c, &n)) in per_axis.iter().zip(shape).enumerate() {
        out.push(match c {
            AxisChunks::Size(-1) => vec![n],
            AxisChunks::Size(s) if *s <= 0 => {
                return Err(ArrayError::Value(format!(
                    "chunk size {s} for axis {d} must be positive (or -1 for the whole axis)"
                )));
            }
            AxisChunks::Size(s) => regular(n, *s as usize),
            AxisChunks::Auto => regular(n, auto[d]),
            AxisChunks::Sizes(v) => {
                if v.iter().sum::<usize>() != n || (n > 0 && v.contains(&0)) {
                    return Err(ArrayError::Value(format!(
                        "chunks {v:?} for axis {d} do not add up to its length {n}"
                    )));
                }
                v.clone()
            }
        });
    }
    Ok(out)
}

/// `n` cut into blocks of `size`, the last one smaller.
pub fn regular(n: usize, size: usize) -> Vec<usize> {
    if n == 0 {
        return vec![0];
    }
    let size = size.clamp(1, n);
    let mut v = vec![size; n / size];
    if !n.is_multiple_of(size) {
        v.push(n % size);
    }
    v
}

/// Block sizes for the `Auto` axes: as near a cube as the fixed axes allow,
/// with blocks of about `AUTO_BYTES`.
fn auto_sizes(shape: &[usize], spec: &[AxisChunks], dtype: DType) -> Vec<usize> {
    let mut sizes: Vec<usize> = shape.to_vec();
    let auto: Vec<usize> = (0..shape.len()).filter(|&d| spec[d] == AxisChunks::Auto).collect();
    if auto.is_empty() {
        return sizes;
    }
    let fixed: usize = (0..shape.len())
        .filter(|d| !auto.contains(d))
        .map(|d| match &spec[d] {
            AxisChunks::Size(s) if *s > 0 => (*s as usize).min(shape[d]).max(1),
            AxisChunks::Sizes(v) => v.iter().copied().max().unwrap_or(1).max(1),
            _ => shape[d].max(1),
        })
        .product();
    let budget = (AUTO_BYTES / dtype.itemsize() / fixed.max(1)).max(1) as f64;
    // Give each auto axis an equal share, then hand what short axes leave
    // over to the others.
    let mut left: Vec<usize> = auto.clone();
    let mut budget = budget;
    while !left.is_empty() {
        let share = budget.powf(1.0 / left.len() as f64);
        let short: Vec<usize> = left.iter().copied().filter(|&d| (shape[d] as f64) <= share).collect();
        if short.is_empty() {
            for &d in &left {
                sizes[d] = (share.floor() as usize).max(1);
            }
            break;
        }
        for &d in &short {
            sizes[d] = shape[d];
            budget /= shape[d].max(1) as f64;
        }
        left.retain(|d| !short.contains(d));
    }
    sizes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(v: &[i64]) -> ChunkSpec {
        ChunkSpec::PerAxis(v.iter().map(|&s| AxisChunks::Size(s)).collect())
    }

    #[test]
    fn sizes_numbers_and_explicit_chunks() {
        assert_eq!(
            normalize_chunks(&spec(&[4]), &[10, 5], DType::F64).ok(),
            Some(vec![vec![4, 4, 2], vec![4, 1]])
        );
        assert_eq!(
            normalize_chunks(&spec(&[-1, 2]), &[3, 5], DType::F64).ok(),
            Some(vec![vec![3], vec![2, 2, 1]])
        );
        let explicit = ChunkSpec::PerAxis(vec![AxisChunks::Sizes(vec![1, 2])]);
        assert_eq!(normalize_chunks(&explicit, &[3], DType::F64).ok(), Some(vec![vec![1, 2]]));
        assert_eq!(normalize_chunks(&spec(&[7]), &[0], DType::F64).ok(), Some(vec![vec![0]]));
    }

    #[test]
    fn bad_specs_are_refused() {
        let e = normalize_chunks(&spec(&[2, 2, 2]), &[4, 4], DType::F64).expect_err("axes");
        assert!(e.to_string().contains("shape (4, 4) has 2 axes"), "{e}");
        let e = normalize_chunks(&spec(&[0]), &[4], DType::F64).expect_err("zero");
        assert!(e.to_string().contains("must be positive"), "{e}");
        let bad = ChunkSpec::PerAxis(vec![AxisChunks::Sizes(vec![1, 1])]);
        let e = normalize_chunks(&bad, &[3], DType::F64).expect_err("sum");
        assert!(e.to_string().contains("do not add up to its length 3"), "{e}");
    }

    #[test]
    fn auto_chunks_are_about_128_mib() {
        let c = normalize_chunks(&ChunkSpec::Auto, &[100_000, 100_000], DType::F64).expect("auto");
        let block = c[0][0] * c[1][0] * 8;
        assert!(block <= AUTO_BYTES && block > AUTO_BYTES / 2, "{block}");
        let small = normalize_chunks(&ChunkSpec::Auto, &[10, 1_000_000_000], DType::F64).expect("auto");
        assert_eq!(small[0], vec![10]);
        assert!(small[1][0] * 10 * 8 <= AUTO_BYTES);
        assert_eq!(
            normalize_chunks(&ChunkSpec::Auto, &[5, 5], DType::F64).ok(),
            Some(vec![vec![5], vec![5]])
        );
    }
}
