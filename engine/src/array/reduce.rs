//! Reduction kernels, in the three steps of a tree reduction (Dask's
//! `chunk`, `combine`, `aggregate`): each block becomes a *partial* with the
//! reduced axes kept at length 1, partials of neighbouring blocks merge
//! elementwise (they always have equal shapes), and the last partial is
//! finalized into the result. Mean and variance carry counts and use Chan's
//! parallel update, so merging in any tree shape stays accurate.

use ndarray::{ArrayD, Axis, IxDyn, Zip};
use serde::{Deserialize, Serialize};

use super::chunk::{Chunk, Elem, Nd};
use super::dtype::DType;
use super::elementwise::{Num, max_nan, min_nan, zip2};
use super::error::ArrayError;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Reduction {
    Sum,
    Prod,
    Min,
    Max,
    Any,
    All,
    Mean,
    Var {
        ddof: u32,
    },
    Std {
        ddof: u32,
    },
    ArgMin,
    ArgMax,
    /// The `nan*` reductions: NaN values are skipped (as missing). On
    /// integer and bool data, where nothing is NaN, each is its plain form.
    NanSum,
    NanProd,
    NanMin,
    NanMax,
    NanMean,
    NanVar {
        ddof: u32,
    },
    NanStd {
        ddof: u32,
    },
}

impl Reduction {
    pub fn name(self) -> &'static str {
        match self {
            Reduction::Sum => "sum",
            Reduction::Prod => "prod",
            Reduction::Min => "min",
            Reduction::Max => "max",
            Reduction::Any => "any",
            Reduction::All => "all",
            Reduction::Mean => "mean",
            Reduction::Var { .. } => "variance",
            Reduction::Std { .. } => "std",
            Reduction::ArgMin => "argmin",
            Reduction::ArgMax => "argmax",
            Reduction::NanSum => "nansum",
            Reduction::NanProd => "nanprod",
            Reduction::NanMin => "nanmin",
            Reduction::NanMax => "nanmax",
            Reduction::NanMean => "nanmean",
            Reduction::NanVar { .. } => "nanvar",
            Reduction::NanStd { .. } => "nanstd",
        }
    }

    /// Whether NaN values are skipped (the `nan*` family).
    pub fn skips_nan(self) -> bool {
        self != self.plain()
    }

    /// The reduction that keeps NaN: `nansum` → `sum`; others themselves.
    /// A `nan*` partial has the plain one's parts, so it merges and
    /// finishes as the plain one (except min and max, which must still
    /// skip a NaN that stands for an all-NaN slice).
    pub fn plain(self) -> Reduction {
        match self {
            Reduction::NanSum => Reduction::Sum,
            Reduction::NanProd => Reduction::Prod,
            Reduction::NanMin => Reduction::Min,
            Reduction::NanMax => Reduction::Max,
            Reduction::NanMean => Reduction::Mean,
            Reduction::NanVar { ddof } => Reduction::Var { ddof },
            Reduction::NanStd { ddof } => Reduction::Std { ddof },
            r => r,
        }
    }

    pub fn is_arg(self) -> bool {
        matches!(self, Reduction::ArgMin | Reduction::ArgMax)
    }

    /// The dtype of the result for an input of type `t`.
    pub fn out_dtype(self, t: DType) -> DType {
        match self.plain() {
            Reduction::Sum | Reduction::Prod => t.sum_type(),
            Reduction::Min | Reduction::Max => t,
            Reduction::Any | Reduction::All => DType::Bool,
            Reduction::Mean | Reduction::Var { .. } | Reduction::Std { .. } => t.to_float(),
            Reduction::ArgMin | Reduction::ArgMax => DType::I64,
            // `plain` leaves none of the `nan*` family.
            _ => t.to_float(),
        }
    }
}

/// Where a block lies, for arg reductions over every axis: the flat index
/// of an element in the whole array needs the block's offsets and the
/// array's shape.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BlockPlace {
    pub offsets: Vec<usize>,
    pub shape: Vec<usize>,
}

/// Reduce each of `axes` (sorted) with `f`, keeping them at length 1.
fn fold_axes<T: Elem>(a: &Nd<T>, axes: &[usize], init: T, f: impl Fn(T, T) -> T + Copy) -> Nd<T> {
    let mut cur = a.clone();
    for &ax in axes {
        let r = cur.fold_axis(Axis(ax), init, |&acc, &x| f(acc, x));
        cur = r.insert_axis(Axis(ax)).into_shared();
    }
    cur
}

fn reduced_len(shape: &[usize], axes: &[usize]) -> usize {
    axes.iter().map(|&a| shape[a]).product()
}

/// The chunk step: a block into its partial.
pub fn partial(
    red: Reduction,
    block: &Chunk,
    axes: &[usize],
    place: &BlockPlace,
) -> Result<Vec<Chunk>, ArrayError> {
    let n = reduced_len(block.shape(), axes);
    if n == 0
        && matches!(red.plain(), Reduction::Min | Reduction::Max | Reduction::ArgMin | Reduction::ArgMax)
    {
        return Err(ArrayError::Value(format!(
            "zero-size array to reduction operation {} which has no identity",
            red.name()
        )));
    }
    if red.skips_nan() {
        return match block {
            Chunk::F32(a) => nan_partial(red, a, axes),
            Chunk::F64(a) => nan_partial(red, a, axes),
            // Nothing to skip.
            _ => partial(red.plain(), block, axes, place),
        };
    }
    Ok(match red {
        Reduction::Sum | Reduction::Prod | Reduction::Min | Reduction::Max => {
            let t = red.out_dtype(block.dtype());
            vec![match t {
                DType::Bool => Chunk::Bool(simple::<bool>(red, &block.cast(), axes)),
                DType::I64 => Chunk::I64(simple::<i64>(red, &block.cast(), axes)),
                DType::F32 => Chunk::F32(simple::<f32>(red, &block.cast(), axes)),
                DType::F64 => Chunk::F64(simple::<f64>(red, &block.cast(), axes)),
            }]
        }
        Reduction::Any => vec![Chunk::Bool(fold_axes(&block.cast::<bool>(), axes, false, |a, b| a | b))],
        Reduction::All => vec![Chunk::Bool(fold_axes(&block.cast::<bool>(), axes, true, |a, b| a & b))],
        Reduction::Mean => {
            let sum = match block.dtype().to_float() {
                DType::F32 => Chunk::F32(fold_axes(&block.cast::<f32>(), axes, 0.0, |a, b| a + b)),
                _ => Chunk::F64(fold_axes(&block.cast::<f64>(), axes, 0.0, |a, b| a + b)),
            };
            let count = Chunk::full(sum.shape(), super::dtype::Scalar::Float(n as f64), DType::F64);
            vec![sum, count]
        }
        Reduction::Var { .. } | Reduction::Std { .. } => {
            let x = block.cast::<f64>();
            let sum = fold_axes(&x, axes, 0.0, |a, b| a + b);
            let mean = sum.mapv(|s| if n == 0 { 0.0 } else { s / n as f64 }).into_shared();
            let dev = zip2(&x, &mean, |v, m| (v - m) * (v - m))?.into_shared();
            let m2 = fold_axes(&dev, axes, 0.0, |a, b| a + b);
            let count = Nd::from_elem(mean.raw_dim(), n as f64);
            vec![Chunk::F64(count), Chunk::F64(mean), Chunk::F64(m2)]
        }
        Reduction::ArgMin | Reduction::ArgMax => match block {
            Chunk::Bool(a) => arg_partial(red, a, axes, place),
            Chunk::I64(a) => arg_partial(red, a, axes, place),
            Chunk::F32(a) => arg_partial(red, a, axes, place),
            Chunk::F64(a) => arg_partial(red, a, axes, place),
        },
        // Taken above.
        _ => return Err(mismatch()),
    })
}

/// NumPy's `nanmin`: a NaN loses to any number; two NaNs give NaN.
fn min_skip<T: Num>(a: T, b: T) -> T {
    if b.is_nan() || (!a.is_nan() && a <= b) { a } else { b }
}

/// NumPy's `nanmax`.
fn max_skip<T: Num>(a: T, b: T) -> T {
    if b.is_nan() || (!a.is_nan() && a >= b) { a } else { b }
}

/// The partial of a `nan*` reduction of a float block, in the plain
/// reduction's parts: sums and products over the block with each NaN as
/// the identity, counts of the values that are not NaN, and min/max that
/// stay NaN only where every value was.
fn nan_partial<T: Num + num_traits::Float>(
    red: Reduction,
    a: &Nd<T>,
    axes: &[usize],
) -> Result<Vec<Chunk>, ArrayError> {
    let (zero, one, nan) = (<T as Num>::zero(), <T as Num>::one(), <T as num_traits::Float>::nan());
    let cleaned = |fill: T| a.mapv(|v| if Num::is_nan(v) { fill } else { v }).into_shared();
    let present = || a.mapv(|v| if Num::is_nan(v) { 0.0 } else { 1.0 }).into_shared();
    Ok(match red {
        Reduction::NanSum => vec![T::wrap(simple(Reduction::Sum, &cleaned(zero), axes))],
        Reduction::NanProd => vec![T::wrap(simple(Reduction::Prod, &cleaned(one), axes))],
        Reduction::NanMin => vec![T::wrap(fold_axes(a, axes, nan, min_skip))],
        Reduction::NanMax => vec![T::wrap(fold_axes(a, axes, nan, max_skip))],
        Reduction::NanMean => {
            let sum = fold_axes(&cleaned(zero), axes, zero, <T as Num>::add);
            vec![T::wrap(sum), Chunk::F64(fold_axes(&present(), axes, 0.0, |p, q| p + q))]
        }
        _ => {
            let x = a.mapv(|v| v.to_f64().unwrap_or(f64::NAN)).into_shared();
            let count = fold_axes(&present(), axes, 0.0, |p, q| p + q);
            let zeroed = x.mapv(|v| if v.is_nan() { 0.0 } else { v }).into_shared();
            let sum = fold_axes(&zeroed, axes, 0.0, |p, q| p + q);
            let mean = Zip::from(&sum).and(&count).map_collect(|&s, &c| if c > 0.0 { s / c } else { 0.0 });
            let mean = mean.into_shared();
            let dev = zip2(&x, &mean, |v, m| if v.is_nan() { 0.0 } else { (v - m) * (v - m) })?.into_shared();
            let m2 = fold_axes(&dev, axes, 0.0, |p, q| p + q);
            vec![Chunk::F64(count), Chunk::F64(mean), Chunk::F64(m2)]
        }
    })
}

fn simple<T: Num>(red: Reduction, a: &Nd<T>, axes: &[usize]) -> Nd<T> {
    // Every axis of a contiguous block: one pass over its memory (the
    // axis-at-a-time fold walks it through views, at a third the speed).
    if axes.len() == a.ndim()
        && a.ndim() > 0
        && let Some(x) = a.as_slice_memory_order()
        && !x.is_empty()
    {
        let v = match red {
            Reduction::Sum => pairwise(x, T::zero(), T::add),
            Reduction::Prod => pairwise(x, T::one(), T::mul),
            Reduction::Min => x.iter().fold(T::highest(), |m, &v| min_nan(m, v)),
            _ => x.iter().fold(T::lowest(), |m, &v| max_nan(m, v)),
        };
        return Nd::from_elem(IxDyn(&vec![1; a.ndim()]), v);
    }
    match red {
        Reduction::Sum => fold_axes(a, axes, T::zero(), T::add),
        Reduction::Prod => fold_axes(a, axes, T::one(), T::mul),
        Reduction::Min => fold_axes(a, axes, T::highest(), min_nan),
        _ => fold_axes(a, axes, T::lowest(), max_nan),
    }
}

/// `x` folded by `f` pairwise, as NumPy sums: halves until 1,024 values,
/// those in 8 interleaved lanes (which vectorize), so rounding grows with
/// log n rather than n.
fn pairwise<T: Copy>(x: &[T], init: T, f: impl Fn(T, T) -> T + Copy) -> T {
    const LEAF: usize = 1024;
    if x.len() > LEAF {
        let (a, b) = x.split_at(x.len() / 2);
        return f(pairwise(a, init, f), pairwise(b, init, f));
    }
    let mut lanes = [init; 8];
    let mut it = x.chunks_exact(8);
    for c in &mut it {
        for (l, &v) in lanes.iter_mut().zip(c) {
            *l = f(*l, v);
        }
    }
    let tail = it.remainder().iter().fold(init, |acc, &v| f(acc, v));
    let quads = [f(lanes[0], lanes[1]), f(lanes[2], lanes[3]), f(lanes[4], lanes[5]), f(lanes[6], lanes[7])];
    f(f(f(quads[0], quads[1]), f(quads[2], quads[3])), tail)
}

fn first<T: Elem>(a: &Nd<T>) -> T {
    a.iter().next().copied().unwrap_or_else(|| T::from_bool(false))
}

/// Bools order as false < true for min/max/sums-as-bool.
impl Num for bool {
    fn add(a: bool, b: bool) -> bool {
        a | b
    }
    fn sub(a: bool, b: bool) -> bool {
        a ^ b
    }
    fn mul(a: bool, b: bool) -> bool {
        a & b
    }
    fn div(a: bool, _: bool) -> bool {
        a
    }
    fn floordiv(a: bool, _: bool) -> bool {
        a
    }
    fn rem(_: bool, _: bool) -> bool {
        false
    }
    fn pow(a: bool, b: bool) -> bool {
        a | !b
    }
    fn is_nan(self) -> bool {
        false
    }
    fn neg(self) -> bool {
        self
    }
    fn abs(self) -> bool {
        self
    }
    fn zero() -> bool {
        false
    }
    fn one() -> bool {
        true
    }
    fn lowest() -> bool {
        false
    }
    fn highest() -> bool {
        true
    }
}

/// Whether `x` beats the current best `b` (strictly: ties keep the first
/// occurrence; a NaN beats everything, as NumPy's arg reductions).
fn better<T: Num>(red: Reduction, x: T, b: T) -> bool {
    if b.is_nan() {
        return false;
    }
    if x.is_nan() {
        return true;
    }
    if red == Reduction::ArgMin { x < b } else { x > b }
}

fn arg_partial<T: Num>(red: Reduction, a: &Nd<T>, axes: &[usize], place: &BlockPlace) -> Vec<Chunk> {
    let nd = a.ndim();
    if axes.len() == 1 {
        // Along one axis: the index along it, plus the block's offset.
        let ax = axes[0];
        let offset = place.offsets.get(ax).copied().unwrap_or(0) as i64;
        let mut vals = ArrayD::from_elem(a.view().remove_axis(Axis(ax)).raw_dim(), first(a));
        let mut idx = ArrayD::from_elem(vals.raw_dim(), 0i64);
        Zip::from(&mut vals).and(&mut idx).and(a.lanes(Axis(ax))).for_each(|v, i, lane| {
            let mut best = 0usize;
            for (j, &x) in lane.iter().enumerate() {
                if j == 0 || better(red, x, lane[best]) {
                    best = j;
                }
            }
            *v = lane[best];
            *i = best as i64 + offset;
        });
        return vec![
            T::wrap(vals.insert_axis(Axis(ax)).into_shared()),
            Chunk::I64(idx.insert_axis(Axis(ax)).into_shared()),
        ];
    }
    // Over every axis: the flat (C-order) index in the whole array.
    let mut best: Option<(T, Vec<usize>)> = None;
    for (ix, &x) in a.indexed_iter() {
        if best.as_ref().is_none_or(|(b, _)| better(red, x, *b)) {
            best = Some((x, (0..nd).map(|d| ix[d]).collect()));
        }
    }
    let (v, pos) = best.unwrap_or((first(a), vec![0; nd]));
    let mut flat = 0i64;
    for (d, p) in pos.iter().enumerate() {
        let global = p + place.offsets.get(d).copied().unwrap_or(0);
        let dim = place.shape.get(d).copied().unwrap_or(1);
        flat = flat * dim as i64 + global as i64;
    }
    let ones = IxDyn(&vec![1; nd]);
    vec![T::wrap(Nd::from_elem(ones.clone(), v)), Chunk::I64(Nd::from_elem(ones, flat))]
}

fn mismatch() -> ArrayError {
    ArrayError::Value("internal: reduction partials of different kinds".into())
}

/// The combine step: merge partial `b` (of later blocks) into `a`.
pub fn merge(red: Reduction, a: &[Chunk], b: &[Chunk]) -> Result<Vec<Chunk>, ArrayError> {
    fn typed<T: Num>(x: &Chunk) -> Result<&Nd<T>, ArrayError> {
        T::get(x).ok_or_else(mismatch)
    }
    fn both<T: Num>(a: &Chunk, b: &Chunk, f: impl Fn(T, T) -> T) -> Result<Chunk, ArrayError> {
        Ok(Chunk::from_array(zip2(typed::<T>(a)?, typed::<T>(b)?, f)?))
    }
    fn simple(a: &Chunk, b: &Chunk, red: Reduction) -> Result<Chunk, ArrayError> {
        macro_rules! go {
            ($t:ty) => {
                match red {
                    Reduction::Sum => both::<$t>(a, b, <$t as Num>::add),
                    Reduction::Prod => both::<$t>(a, b, <$t as Num>::mul),
                    Reduction::Min => both::<$t>(a, b, min_nan),
                    Reduction::Max => both::<$t>(a, b, max_nan),
                    Reduction::NanMin => both::<$t>(a, b, min_skip),
                    Reduction::NanMax => both::<$t>(a, b, max_skip),
                    Reduction::Any => both::<$t>(a, b, <$t as Num>::add),
                    _ => both::<$t>(a, b, <$t as Num>::mul),
                }
            };
        }
        match a.dtype() {
            DType::Bool => go!(bool),
            DType::I64 => go!(i64),
            DType::F32 => go!(f32),
            DType::F64 => go!(f64),
        }
    }
    let [a0, rest_a @ ..] = a else { return Err(mismatch()) };
    let [b0, rest_b @ ..] = b else { return Err(mismatch()) };
    let red = match red {
        Reduction::NanMin | Reduction::NanMax => red,
        r => r.plain(),
    };
    Ok(match red {
        Reduction::Sum
        | Reduction::Prod
        | Reduction::Min
        | Reduction::Max
        | Reduction::NanMin
        | Reduction::NanMax
        | Reduction::Any
        | Reduction::All => {
            vec![simple(a0, b0, red)?]
        }
        Reduction::Mean => {
            let (Some(ca), Some(cb)) = (rest_a.first(), rest_b.first()) else { return Err(mismatch()) };
            vec![simple(a0, b0, Reduction::Sum)?, simple(ca, cb, Reduction::Sum)?]
        }
        Reduction::Var { .. } | Reduction::Std { .. } => {
            let ([ma, m2a], [mb, m2b]) = (rest_a, rest_b) else { return Err(mismatch()) };
            let (na, nb) = (typed::<f64>(a0)?, typed::<f64>(b0)?);
            let (ma, mb, m2a, m2b) =
                (typed::<f64>(ma)?, typed::<f64>(mb)?, typed::<f64>(m2a)?, typed::<f64>(m2b)?);
            let n = zip2(na, nb, |x, y| x + y)?.into_shared();
            let delta = zip2(mb, ma, |x, y| x - y)?.into_shared();
            let frac_b = zip2(nb, &n, |x, y| if y > 0.0 { x / y } else { 0.0 })?.into_shared();
            // Chan et al.: mean = ma + δ·nb/n, M2 = M2a + M2b + δ²·na·nb/n.
            let mean = Zip::from(ma).and(&delta).and(&frac_b).map_collect(|&m, &d, &f| m + d * f);
            let cross = Zip::from(&delta).and(na).and(&frac_b).map_collect(|&d, &a, &f| d * d * a * f);
            let m2 = Zip::from(m2a).and(m2b).and(&cross).map_collect(|&x, &y, &c| x + y + c);
            vec![Chunk::F64(n), Chunk::from_array(mean), Chunk::from_array(m2)]
        }
        Reduction::ArgMin | Reduction::ArgMax => {
            let (Some(ia), Some(ib)) = (rest_a.first(), rest_b.first()) else { return Err(mismatch()) };
            let (ia, ib) = (typed::<i64>(ia)?, typed::<i64>(ib)?);
            fn pick<T: Num>(
                red: Reduction,
                a: &Chunk,
                b: &Chunk,
                ia: &Nd<i64>,
                ib: &Nd<i64>,
            ) -> Result<Vec<Chunk>, ArrayError> {
                let (va, vb) = (typed::<T>(a)?, typed::<T>(b)?);
                // Ties (and two NaNs) keep the first occurrence: the smaller index.
                let tie = |x: T, y: T| x == y || (x.is_nan() && y.is_nan());
                let mut take_b = zip2(va, vb, |x, y| better(red, y, x))?;
                Zip::from(&mut take_b).and(va).and(vb).and(ia).and(ib).for_each(|t, &x, &y, &i, &j| {
                    *t = *t || (tie(x, y) && j < i);
                });
                let v = Zip::from(&take_b).and(va).and(vb).map_collect(|&t, &x, &y| if t { y } else { x });
                let i = Zip::from(&take_b).and(ia).and(ib).map_collect(|&t, &x, &y| if t { y } else { x });
                Ok(vec![Chunk::from_array(v), Chunk::from_array(i)])
            }
            match a0.dtype() {
                DType::Bool => pick::<bool>(red, a0, b0, ia, ib)?,
                DType::I64 => pick::<i64>(red, a0, b0, ia, ib)?,
                DType::F32 => pick::<f32>(red, a0, b0, ia, ib)?,
                DType::F64 => pick::<f64>(red, a0, b0, ia, ib)?,
            }
        }
        // `red` is plain here but for min and max, taken above.
        _ => return Err(mismatch()),
    })
}

/// The aggregate step: the last partial into the result, of type `out`;
/// the reduced axes are dropped unless `keepdims`.
pub fn finalize(
    red: Reduction,
    p: &[Chunk],
    axes: &[usize],
    keepdims: bool,
    out: DType,
) -> Result<Chunk, ArrayError> {
    // np.nanvar is NaN where ddof leaves no degrees of freedom; np.var
    // divides by zero.
    let nan_dof = red.skips_nan();
    let red = red.plain();
    let r = match (red, p) {
        (Reduction::Mean, [sum, count]) => {
            let q = zip2(&sum.cast::<f64>(), &count.cast::<f64>(), |s, c| s / c)?;
            Chunk::from_array(q).astype(out)
        }
        (Reduction::Var { ddof } | Reduction::Std { ddof }, [n, _, m2]) => {
            let d = f64::from(ddof);
            let v = zip2(&n.cast::<f64>(), &m2.cast::<f64>(), |n, m2| {
                if nan_dof && n - d <= 0.0 { f64::NAN } else { m2 / (n - d).max(0.0) }
            })?;
            let v = if matches!(red, Reduction::Std { .. }) { v.mapv(f64::sqrt) } else { v };
            Chunk::from_array(v).astype(out)
        }
        (Reduction::ArgMin | Reduction::ArgMax, [_, idx]) => idx.clone(),
        (_, [x]) => x.astype(out),
        _ => return Err(mismatch()),
    };
    if keepdims {
        return Ok(r);
    }
    Ok(squeeze(&r, axes))
}

/// Drop the given length-1 axes.
pub fn squeeze(c: &Chunk, axes: &[usize]) -> Chunk {
    fn go<T: Elem>(a: &Nd<T>, axes: &[usize]) -> Chunk {
        let mut cur = a.clone();
        for &ax in axes.iter().rev() {
            if ax < cur.ndim() && cur.shape()[ax] == 1 {
                cur = cur.index_axis_move(Axis(ax), 0);
            }
        }
        T::wrap(cur)
    }
    crate::each_chunk!(c, a => go(a, axes))
}

/// Cumulative sum (or product) along `axis`, in the type a sum has
/// (bools and integers as i64).
pub fn cumulative(c: &Chunk, axis: usize, prod: bool) -> Result<Chunk, ArrayError> {
    if axis >= c.ndim() {
        return Err(ArrayError::Axis { axis: axis as i64, ndim: c.ndim() });
    }
    fn go<T: Num>(a: &Nd<T>, axis: usize, prod: bool) -> Chunk {
        let mut out = a.as_standard_layout().into_owned();
        let f = if prod { T::mul } else { T::add };
        out.accumulate_axis_inplace(Axis(axis), |&prev, cur| *cur = f(prev, *cur));
        T::wrap(out.into_shared())
    }
    Ok(match c.dtype().sum_type() {
        DType::F32 => go(&c.cast::<f32>(), axis, prod),
        DType::F64 => go(&c.cast::<f64>(), axis, prod),
        _ => go(&c.cast::<i64>(), axis, prod),
    })
}

/// Counts of values in `bins` equal bins over `[lo, hi]`: each bin is
/// half-open except the last, values outside and NaN are not counted.
pub fn histogram(c: &Chunk, bins: usize, lo: f64, hi: f64) -> Result<Chunk, ArrayError> {
    check_histogram(bins, lo, hi)?;
    let mut counts = vec![0i64; bins];
    let width = (hi - lo) / bins as f64;
    for v in c.cast::<f64>().iter() {
        if !(*v >= lo && *v <= hi) {
            continue;
        }
        let k = (((v - lo) / width) as usize).min(bins - 1);
        counts[k] += 1;
    }
    Ok(Chunk::from_array(
        ArrayD::from_shape_vec(IxDyn(&[bins]), counts).map_err(|e| ArrayError::Shape(e.to_string()))?,
    ))
}

/// The arguments `histogram` accepts: some bins over a finite range.
pub fn check_histogram(bins: usize, lo: f64, hi: f64) -> Result<(), ArrayError> {
    if bins == 0
        || lo.partial_cmp(&hi) != Some(std::cmp::Ordering::Less)
        || !lo.is_finite()
        || !hi.is_finite()
    {
        return Err(ArrayError::Value(format!(
            "histogram needs bins > 0 and a finite range lo < hi, got {bins} bins over [{lo}, {hi}]"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_block_sums_pairwise_as_numpy() {
        // 0.1 summed 10⁶ times: a running sum drifts by ~1e-6, NumPy's
        // pairwise sum stays within ~1e-10 of 100,000.
        let n = 1_000_000;
        let c = Chunk::from_vec(&[1000, 1000], vec![0.1; n]).expect("chunk");
        let p = partial(Reduction::Sum, &c, &[0, 1], &BlockPlace::default()).expect("sum");
        let v = p[0].cast::<f64>().iter().copied().collect::<Vec<_>>();
        assert_eq!(p[0].shape(), &[1, 1]);
        assert!((v[0] - 100_000.0).abs() < 1e-8, "{}", v[0]);
        let m =
            Chunk::from_vec(&[3, 3], vec![4.0, -2.0, f64::NAN, 1.0, 9.0, 0.0, 3.0, 5.0, 7.0]).expect("chunk");
        let max = partial(Reduction::Max, &m, &[0, 1], &BlockPlace::default()).expect("max");
        assert!(max[0].cast::<f64>().iter().all(|v| v.is_nan()), "NaN wins, as np.max");
        let i = Chunk::from_vec(&[2, 3], vec![1i64, 2, 3, 4, 5, 6]).expect("chunk");
        let prod = partial(Reduction::Prod, &i, &[0, 1], &BlockPlace::default()).expect("prod");
        assert_eq!(prod[0].to_json(), "[[720]]");
    }

    fn reduce_blocks(red: Reduction, blocks: &[Chunk], axes: &[usize], out: DType) -> Chunk {
        let mut acc: Option<Vec<Chunk>> = None;
        let mut offset = 0;
        let total: usize = blocks.iter().map(|b| b.shape()[0]).sum();
        for b in blocks {
            let mut shape = b.shape().to_vec();
            shape[0] = total;
            let mut offsets = vec![0; b.ndim()];
            offsets[0] = offset;
            offset += b.shape()[0];
            let p = partial(red, b, axes, &BlockPlace { offsets, shape }).expect("partial");
            acc = Some(match acc {
                None => p,
                Some(a) => merge(red, &a, &p).expect("merge"),
            });
        }
        finalize(red, &acc.expect("blocks"), axes, false, out).expect("finalize")
    }

    #[test]
    fn tree_reductions_match_direct_ones() {
        // [[1, 2], [3, 4] | [5, NaN-free 6], ...] in two row blocks.
        let a = Chunk::from_vec(&[2, 3], vec![1.0, 5.0, 3.0, 4.0, 2.0, 6.0]).expect("a");
        let b = Chunk::from_vec(&[1, 3], vec![7.0, 0.0, 9.0]).expect("b");
        let r = |red, axes: &[usize]| {
            reduce_blocks(red, &[a.clone(), b.clone()], axes, red.out_dtype(DType::F64))
        };
        assert_eq!(r(Reduction::Sum, &[0]).to_json(), "[12.0,7.0,18.0]");
        assert_eq!(r(Reduction::Sum, &[0, 1]).to_json(), "37.0");
        assert_eq!(r(Reduction::Max, &[0]).to_json(), "[7.0,5.0,9.0]");
        assert_eq!(r(Reduction::Mean, &[0]).to_json(), "[4.0,2.3333333333333335,6.0]");
        assert_eq!(r(Reduction::ArgMax, &[0]).to_json(), "[2,0,2]");
        assert_eq!(r(Reduction::ArgMin, &[0, 1]).to_json(), "7");
        assert_eq!(r(Reduction::ArgMax, &[0, 1]).to_json(), "8");
        let var = r(Reduction::Var { ddof: 0 }, &[0, 1]);
        let xs = [1.0, 5.0, 3.0, 4.0, 2.0, 6.0, 7.0, 0.0, 9.0];
        let m = xs.iter().sum::<f64>() / 9.0;
        let direct = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / 9.0;
        let got = var.get(&[]).expect("scalar").as_f64();
        assert!((got - direct).abs() < 1e-12, "{got} vs {direct}");
        let std1 = r(Reduction::Std { ddof: 1 }, &[0, 1]).get(&[]).expect("s").as_f64();
        assert!((std1 - (direct * 9.0 / 8.0).sqrt()).abs() < 1e-12);
    }

    #[test]
    fn nan_and_types() {
        let a = Chunk::from_vec(&[3], vec![1.0, f64::NAN, 3.0]).expect("a");
        let r = |red| reduce_blocks(red, std::slice::from_ref(&a), &[0], red.out_dtype(DType::F64));
        assert_eq!(r(Reduction::Max).to_json(), "null");
        assert_eq!(r(Reduction::ArgMin).to_json(), "1");
        let b = Chunk::from_vec(&[3], vec![true, true, false]).expect("b");
        let s = reduce_blocks(Reduction::Sum, std::slice::from_ref(&b), &[0], DType::I64);
        assert_eq!((s.dtype(), s.to_json()), (DType::I64, "2".to_string()));
        assert_eq!(
            reduce_blocks(Reduction::All, std::slice::from_ref(&b), &[0], DType::Bool).to_json(),
            "false"
        );
        assert_eq!(reduce_blocks(Reduction::Any, &[b], &[0], DType::Bool).to_json(), "true");
        let empty = Chunk::from_vec::<f64>(&[0], vec![]).expect("e");
        let e = partial(Reduction::Min, &empty, &[0], &BlockPlace::default()).expect_err("empty");
        assert!(e.to_string().contains("zero-size array"), "{e}");
    }
}
