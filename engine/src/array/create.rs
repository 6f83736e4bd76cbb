//! Kernels that make a block from nothing: seeded random numbers, constant
//! fills, ranges and identity matrices. Each block is computed from its own
//! parameters alone (its seed, its offset), so the same graph gives the same
//! array on any scheduler and in any order.

use ndarray::{ArrayD, IxDyn};
use rand::{RngExt, SeedableRng};
use rand_distr::StandardNormal;
use rand_pcg::Pcg64Mcg;
use serde::{Deserialize, Serialize};

use super::chunk::{Chunk, Elem};
use super::dtype::DType;

/// The distribution of `random`/`normal`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Dist {
    /// Uniform on [0, 1), as `np.random.random`.
    Uniform,
    Normal {
        mean: f64,
        std: f64,
    },
    /// Integers uniform on [low, high), as `np.random.randint`.
    Integers {
        low: i64,
        high: i64,
    },
}

/// The seed of one block: the user's seed mixed with the block index, so
/// blocks are independent streams and reproducible one by one.
pub fn block_seed(seed: u64, index: &[u32]) -> u64 {
    let mut h = xxhash_rust::xxh3::Xxh3::with_seed(seed);
    for i in index {
        h.update(&i.to_le_bytes());
    }
    h.digest()
}

pub fn random(seed: u64, shape: &[usize], dist: Dist, dtype: DType) -> Chunk {
    let n: usize = shape.iter().product();
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let data: Vec<f64> = match dist {
        Dist::Uniform => (0..n).map(|_| rng.random::<f64>()).collect(),
        Dist::Normal { mean, std } => {
            (0..n).map(|_| mean + std * rng.sample::<f64, _>(StandardNormal)).collect()
        }
        Dist::Integers { low, high } => {
            // The caller checked low < high; an empty range gives low.
            let ints: Vec<i64> =
                (0..n).map(|_| if low < high { rng.random_range(low..high) } else { low }).collect();
            let c =
                ArrayD::from_shape_vec(IxDyn(shape), ints).unwrap_or_else(|_| ArrayD::zeros(IxDyn(shape)));
            return Chunk::from_array(c).astype(dtype);
        }
    };
    let c = Chunk::from_array(
        ArrayD::from_shape_vec(IxDyn(shape), data).unwrap_or_else(|_| ArrayD::zeros(IxDyn(shape))),
    );
    c.astype(dtype)
}

/// `start + i * step` for the block's `n` elements, as `np.arange`.
pub fn arange(start: f64, step: f64, n: usize, dtype: DType) -> Chunk {
    fn make<T: Elem>(start: f64, step: f64, n: usize) -> Chunk {
        T::wrap(ArrayD::from_shape_fn(IxDyn(&[n]), |i| T::from_f64(start + i[0] as f64 * step)).into_shared())
    }
    match dtype {
        DType::I64 => {
            // Exact integers, not rounded floats.
            let (s, d) = (start as i64, step as i64);
            Chunk::from_array(ArrayD::from_shape_fn(IxDyn(&[n]), |i| s + i[0] as i64 * d))
        }
        DType::Bool => make::<bool>(start, step, n),
        DType::F32 => make::<f32>(start, step, n),
        DType::F64 => make::<f64>(start, step, n),
    }
}

/// Elements `offset..offset + n` of `np.linspace(start, stop, total)`:
/// `start + i * step`, with the last element exactly `stop`.
pub fn linspace(start: f64, stop: f64, total: usize, offset: usize, n: usize, dtype: DType) -> Chunk {
    let step = if total > 1 { (stop - start) / (total - 1) as f64 } else { 0.0 };
    let a = ArrayD::from_shape_fn(IxDyn(&[n]), |i| {
        let g = offset + i[0];
        if total > 1 && g == total - 1 { stop } else { start + g as f64 * step }
    });
    Chunk::from_array(a).astype(dtype)
}

/// A block of the identity matrix whose top-left element lies `k` columns
/// right of the diagonal (negative: below it).
pub fn eye(rows: usize, cols: usize, k: i64, dtype: DType) -> Chunk {
    let a =
        ArrayD::from_shape_fn(IxDyn(&[rows, cols]), |ix| (ix[1] as i64 - ix[0] as i64 + k == 0) as u8 as f64);
    Chunk::from_array(a).astype(dtype)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_blocks_are_reproducible_and_in_range() {
        let a = random(block_seed(42, &[0, 1]), &[50, 20], Dist::Uniform, DType::F64);
        let b = random(block_seed(42, &[0, 1]), &[50, 20], Dist::Uniform, DType::F64);
        let c = random(block_seed(42, &[1, 0]), &[50, 20], Dist::Uniform, DType::F64);
        assert_eq!(a, b);
        assert_ne!(a, c);
        let xs: Vec<f64> = a.scalars().iter().map(|s| s.as_f64()).collect();
        assert!(xs.iter().all(|x| (0.0..1.0).contains(x)));
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        assert!((mean - 0.5).abs() < 0.05, "{mean}");
        let n = random(7, &[4000], Dist::Normal { mean: 10.0, std: 2.0 }, DType::F32);
        let ys: Vec<f64> = n.scalars().iter().map(|s| s.as_f64()).collect();
        let m = ys.iter().sum::<f64>() / ys.len() as f64;
        let sd = (ys.iter().map(|y| (y - m) * (y - m)).sum::<f64>() / ys.len() as f64).sqrt();
        assert!((m - 10.0).abs() < 0.15 && (sd - 2.0).abs() < 0.15, "{m} {sd}");
        assert_eq!(n.dtype(), DType::F32);
    }

    #[test]
    fn ranges_and_eye() {
        assert_eq!(arange(3.0, 2.0, 3, DType::I64).to_json(), "[3,5,7]");
        assert_eq!(linspace(0.0, 1.0, 5, 3, 2, DType::F64).to_json(), "[0.75,1.0]");
        assert_eq!(eye(2, 3, 1, DType::I64).to_json(), "[[0,0,0],[1,0,0]]");
    }
}
