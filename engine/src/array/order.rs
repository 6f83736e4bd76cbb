//! Order statistics of one block: quantiles (`median`, `percentile`) over
//! whole lanes, and the k largest (or smallest) along an axis (`topk`).
//! The lazy side brings each lane into one block first (quantiles) or
//! merges per-block candidates (topk); these kernels see one block.

use ndarray::{ArrayD, Axis, IxDyn};

use super::chunk::{Chunk, Elem, Nd};
use super::error::ArrayError;

/// NumPy's linear interpolation between `a` and `b` at `t` (`_lerp`):
/// written from whichever end is nearer, so `t = 1` gives `b` exactly.
fn lerp(a: f64, b: f64, t: f64) -> f64 {
    let d = b - a;
    if t >= 0.5 { b - d * (1.0 - t) } else { a + d * t }
}

/// The quantile `q` (0..=1) of sorted `v`, as `np.quantile`'s default
/// ("linear") method; NaN for an empty lane.
fn of_sorted(v: &[f64], q: f64) -> f64 {
    let Some(last) = v.len().checked_sub(1) else { return f64::NAN };
    let pos = q * last as f64;
    let lo = (pos.floor() as usize).min(last);
    let hi = (lo + 1).min(last);
    lerp(v[lo], v[hi], pos - lo as f64)
}

/// Check quantiles given as fractions (0..=1).
pub fn check_quantiles(qs: &[f64]) -> Result<(), ArrayError> {
    match qs.iter().find(|q| !(0.0..=1.0).contains(*q)) {
        Some(q) => {
            Err(ArrayError::Value(format!("percentiles must be in the range [0, 100], got {}", q * 100.0)))
        }
        None => Ok(()),
    }
}

/// The quantiles `qs` of `c` over `axes` (each lane whole in this block).
/// With `q_axis` the result has a leading axis of `qs.len()` (NumPy's
/// layout for an array of q); otherwise `qs` holds one q and there is no
/// such axis. A lane with a NaN gives NaN, as NumPy's. `median` is the
/// 0.5 quantile, with the two middle values averaged as `np.median` does.
pub fn quantile(
    c: &Chunk,
    qs: &[f64],
    axes: &[usize],
    keepdims: bool,
    q_axis: bool,
    median: bool,
) -> Result<Chunk, ArrayError> {
    check_quantiles(qs)?;
    let nd = c.ndim();
    if let Some(&a) = axes.iter().find(|&&a| a >= nd) {
        return Err(ArrayError::Axis { axis: a as i64, ndim: nd });
    }
    if axes.iter().enumerate().any(|(i, a)| axes[..i].contains(a)) {
        return Err(ArrayError::Value(format!("repeated axis in {axes:?}")));
    }
    if !q_axis && qs.len() != 1 {
        return Err(ArrayError::Value(format!("one quantile expected, got {}", qs.len())));
    }
    let out_t = c.dtype().to_float();
    let x = c.cast::<f64>();
    // Kept axes first, reduced last: each row of the 2-d view is a lane.
    let kept: Vec<usize> = (0..nd).filter(|d| !axes.contains(d)).collect();
    let perm: Vec<usize> = kept.iter().chain(axes.iter()).copied().collect();
    let kept_shape: Vec<usize> = kept.iter().map(|&d| c.shape()[d]).collect();
    let outer: usize = kept_shape.iter().product();
    let inner: usize = axes.iter().map(|&d| c.shape()[d]).product();
    let permuted = x.view().permuted_axes(IxDyn(&perm));
    let flat: Vec<f64> = permuted.iter().copied().collect();
    let mut out = vec![0.0; qs.len() * outer];
    let mut lane = Vec::with_capacity(inner);
    for r in 0..outer {
        lane.clear();
        lane.extend_from_slice(&flat[r * inner..(r + 1) * inner]);
        let nan = lane.iter().any(|v| v.is_nan());
        lane.sort_unstable_by(f64::total_cmp);
        for (k, &q) in qs.iter().enumerate() {
            out[k * outer + r] = if nan {
                f64::NAN
            } else if median && q == 0.5 && inner > 0 && inner.is_multiple_of(2) {
                (lane[inner / 2 - 1] + lane[inner / 2]) / 2.0
            } else {
                of_sorted(&lane, q)
            };
        }
    }
    let mut shape: Vec<usize> = Vec::with_capacity(nd + 1);
    if q_axis {
        shape.push(qs.len());
    }
    if keepdims {
        shape.extend((0..nd).map(|d| if axes.contains(&d) { 1 } else { c.shape()[d] }));
    } else {
        shape.extend(&kept_shape);
    }
    let a = ArrayD::from_shape_vec(IxDyn(&shape), out).map_err(|e| ArrayError::Shape(e.to_string()))?;
    Ok(Chunk::from_array(a).astype(out_t))
}

/// The `k` largest values along `axis` (the `|k|` smallest when `k < 0`),
/// most extreme first, each with its index along the axis: from
/// `positions` (an earlier step's indices, when candidates are merged) or
/// the position in this block plus `offset`. NaN counts as the largest,
/// as NumPy's sort puts it last; ties keep the earlier index.
pub fn topk(
    values: &Chunk,
    positions: Option<&Chunk>,
    k: i64,
    axis: usize,
    offset: usize,
) -> Result<(Chunk, Chunk), ArrayError> {
    let nd = values.ndim();
    if axis >= nd {
        return Err(ArrayError::Axis { axis: axis as i64, ndim: nd });
    }
    let positions = match positions {
        Some(Chunk::I64(p)) if p.shape() == values.shape() => p.clone(),
        Some(_) => return Err(ArrayError::Value("internal: topk positions do not match the values".into())),
        None => {
            let mut p = ArrayD::from_elem(IxDyn(values.shape()), 0i64);
            for mut lane in p.lanes_mut(Axis(axis)) {
                for (j, v) in lane.iter_mut().enumerate() {
                    *v = offset.saturating_add(j) as i64;
                }
            }
            p.into_shared()
        }
    };
    fn go<T: Elem + PartialOrd>(
        a: &Nd<T>,
        pos: &Nd<i64>,
        k: i64,
        axis: usize,
    ) -> Result<(Chunk, Chunk), ArrayError> {
        let n = a.shape()[axis];
        let take = (k.unsigned_abs() as usize).min(n);
        let mut shape = a.shape().to_vec();
        shape[axis] = take;
        let fill = a.iter().next().copied().unwrap_or_else(|| T::from_bool(false));
        let mut vals = ArrayD::from_elem(IxDyn(&shape), fill);
        let mut idx = ArrayD::from_elem(IxDyn(&shape), 0i64);
        let mut order: Vec<usize> = Vec::with_capacity(n);
        let lanes = a.lanes(Axis(axis)).into_iter().zip(pos.lanes(Axis(axis)));
        for ((lane, p), (mut v, mut i)) in
            lanes.zip(vals.lanes_mut(Axis(axis)).into_iter().zip(idx.lanes_mut(Axis(axis))))
        {
            order.clear();
            order.extend(0..n);
            #[allow(clippy::eq_op)] // x != x: NaN
            let rank = |x: T, y: T| x.partial_cmp(&y).unwrap_or_else(|| (x != x).cmp(&(y != y)));
            order.sort_by(|&s, &t| {
                let c = rank(lane[s], lane[t]);
                let c = if k > 0 { c.reverse() } else { c };
                c.then(p[s].cmp(&p[t]))
            });
            for (slot, &j) in order.iter().take(take).enumerate() {
                v[slot] = lane[j];
                i[slot] = p[j];
            }
        }
        Ok((T::wrap(vals.into_shared()), Chunk::I64(idx.into_shared())))
    }
    crate::each_chunk!(values, a => go(a, &positions, k, axis))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_as_numpy() {
        let c = Chunk::from_vec(&[2, 4], vec![4.0, 1.0, 3.0, 2.0, 10.0, f64::NAN, 0.0, 5.0]).expect("c");
        let m = quantile(&c, &[0.5], &[1], false, false, true).expect("median");
        assert_eq!(m.to_json(), "[2.5,null]");
        let row = Chunk::from_vec(&[4], vec![4.0, 1.0, 3.0, 2.0]).expect("row");
        let p = quantile(&row, &[0.0, 0.3, 1.0], &[0], false, true, false).expect("pct");
        // np.percentile([4, 1, 3, 2], [0, 30, 100]) = [1.0, 1.9, 4.0]
        let v: Vec<f64> = p.cast::<f64>().iter().copied().collect();
        assert_eq!(v.len(), 3);
        assert!((v[1] - 1.9).abs() < 1e-12 && v[0] == 1.0 && v[2] == 4.0, "{v:?}");
        let big = Chunk::from_vec(&[2], vec![1e308, 1e308]).expect("big");
        let p50 = quantile(&big, &[0.5], &[0], false, false, false).expect("p50");
        assert_eq!(p50.to_json(), "1e308", "percentile interpolates as NumPy's");
        assert!(quantile(&c, &[0.5], &[1, 1], false, false, true).is_err(), "repeated axes");
        let bad = quantile(&c, &[1.5], &[1], false, false, true).expect_err("q > 1");
        assert!(bad.to_string().contains("[0, 100]"), "{bad}");
    }

    #[test]
    fn topk_orders_and_keeps_positions() {
        let c = Chunk::from_vec(&[2, 4], vec![4.0, 1.0, f64::NAN, 4.0, 0.0, -1.0, 7.0, 3.0]).expect("c");
        let (v, i) = topk(&c, None, 2, 1, 10).expect("top");
        assert_eq!(v.to_json(), "[[null,4.0],[7.0,3.0]]");
        assert_eq!(i.to_json(), "[[12,10],[12,13]]");
        let (v, i) = topk(&c, None, -3, 1, 0).expect("bottom");
        assert_eq!(v.to_json(), "[[1.0,4.0,4.0],[-1.0,0.0,3.0]]");
        assert_eq!(i.to_json(), "[[1,0,3],[1,0,3]]");
    }
}
