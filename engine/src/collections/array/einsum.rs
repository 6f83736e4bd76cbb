//! `einsum(spec, a, b, ...)` as NumPy's, built from what the arrays
//! already have: each operand's labels that nothing else needs are summed
//! out first; two operands whose shared labels are all contracted meet in
//! a `tensordot` (one GEMM per output block); shared labels that live on
//! (batch labels, as `bij,bjk->bik`) broadcast and multiply, then the
//! contracted ones are summed. Ellipses and a label repeated within one
//! operand (diagonals, traces) are refused.

use super::base::{Array, Ctx};
use super::dims::expand_dims;
use super::elementwise::{Operand, binary};
use super::linalg::tensordot;
use super::matmul::transpose;
use super::reduction::reduction;
use crate::array::elementwise::BinOp;
use crate::array::error::ArrayError;
use crate::array::reduce::Reduction;

fn refuse(msg: String) -> ArrayError {
    ArrayError::Value(format!("einsum: {msg}"))
}

/// The spec's input labels and output labels (implicit: the labels seen
/// once, in alphabetical order, as NumPy).
fn parse(spec: &str, operands: &[Array]) -> Result<(Vec<Vec<char>>, Vec<char>), ArrayError> {
    let spec: String = spec.chars().filter(|c| !c.is_whitespace()).collect();
    if spec.contains('.') {
        return Err(refuse("ellipses (...) are not supported; name every axis".into()));
    }
    let (lhs, rhs) = match spec.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (spec.as_str(), None),
    };
    let inputs: Vec<Vec<char>> = lhs.split(',').map(|s| s.chars().collect()).collect();
    if inputs.len() != operands.len() {
        return Err(refuse(format!(
            "the spec names {} operands but {} were given",
            inputs.len(),
            operands.len()
        )));
    }
    let mut sizes: Vec<(char, usize, usize)> = Vec::new();
    for (k, (labels, a)) in inputs.iter().zip(operands).enumerate() {
        if let Some(c) = labels.iter().find(|c| !c.is_ascii_alphabetic()) {
            return Err(refuse(format!("invalid subscript '{c}': subscripts are letters")));
        }
        if labels.len() != a.ndim() {
            return Err(refuse(format!(
                "operand {k} has {} dimensions but its subscripts \"{}\" name {}",
                a.ndim(),
                labels.iter().collect::<String>(),
                labels.len()
            )));
        }
        for (i, &c) in labels.iter().enumerate() {
            if labels[..i].contains(&c) {
                return Err(refuse(format!(
                    "label '{c}' repeats within operand {k}; diagonals and traces are not supported"
                )));
            }
            let n = a.shape()[i];
            match sizes.iter().find(|(l, _, _)| *l == c) {
                Some(&(_, m, j)) if m != n => {
                    return Err(refuse(format!(
                        "label '{c}' has length {m} in operand {j} but {n} in operand {k}"
                    )));
                }
                Some(_) => {}
                None => sizes.push((c, n, k)),
            }
        }
    }
    let output: Vec<char> = match rhs {
        Some(r) => {
            let out: Vec<char> = r.chars().collect();
            for (i, &c) in out.iter().enumerate() {
                if out[..i].contains(&c) {
                    return Err(refuse(format!("output label '{c}' repeats")));
                }
                if !inputs.iter().any(|l| l.contains(&c)) {
                    return Err(refuse(format!("output label '{c}' is in no operand")));
                }
            }
            out
        }
        None => {
            let mut once: Vec<char> = sizes
                .iter()
                .map(|(c, _, _)| *c)
                .filter(|c| inputs.iter().flatten().filter(|x| *x == c).count() == 1)
                .collect();
            once.sort_unstable();
            once
        }
    };
    Ok((inputs, output))
}

/// Sum out the labels of `a` that are not in `keep`.
fn sum_out(ctx: &Ctx, a: Array, labels: Vec<char>, keep: &[char]) -> Result<(Array, Vec<char>), ArrayError> {
    let gone: Vec<i64> =
        (0..labels.len()).filter(|&i| !keep.contains(&labels[i])).map(|i| i as i64).collect();
    if gone.is_empty() {
        return Ok((a, labels));
    }
    let left: Vec<char> = labels.into_iter().filter(|c| keep.contains(c)).collect();
    Ok((reduction(ctx, &a, Reduction::Sum, Some(&gone), false, None)?, left))
}

/// `a` (labelled `from`) with its axes in the order of `to` (a superset),
/// length 1 where `to` has a label `from` lacks.
fn align(ctx: &Ctx, a: &Array, from: &[char], to: &[char]) -> Result<Array, ArrayError> {
    let mut order: Vec<usize> = (0..from.len()).collect();
    order.sort_by_key(|&i| to.iter().position(|c| *c == from[i]));
    let perm: Vec<i64> = order.iter().map(|&i| i as i64).collect();
    let mut out = if order.iter().enumerate().all(|(i, &j)| i == j) {
        a.clone()
    } else {
        transpose(ctx, a, Some(&perm))?
    };
    for (pos, c) in to.iter().enumerate() {
        if !from.contains(c) {
            out = expand_dims(ctx, &out, pos as i64)?;
        }
    }
    Ok(out)
}

/// `einsum(spec, operands)`.
pub fn einsum(ctx: &Ctx, spec: &str, operands: &[Array]) -> Result<Array, ArrayError> {
    if operands.is_empty() {
        return Err(refuse("needs at least one operand".into()));
    }
    for a in operands {
        a.known("einsum")?;
    }
    let (inputs, output) = parse(spec, operands)?;
    // What the operands from `k` on (and the output) still need.
    let needed = |k: usize| -> Vec<char> {
        let mut n = output.clone();
        n.extend(inputs[k..].iter().flatten());
        n
    };
    let (mut cur, mut labels) = sum_out(ctx, operands[0].clone(), inputs[0].clone(), &needed(1))?;
    for k in 1..operands.len() {
        let later = needed(k + 1);
        let mut keep_b = later.clone();
        keep_b.extend(&labels);
        let (b, lb) = sum_out(ctx, operands[k].clone(), inputs[k].clone(), &keep_b)?;
        let mut keep_a = later.clone();
        keep_a.extend(&lb);
        (cur, labels) = sum_out(ctx, cur, labels, &keep_a)?;
        let shared: Vec<char> = labels.iter().copied().filter(|c| lb.contains(c)).collect();
        let batch = shared.iter().any(|c| later.contains(c));
        if !batch {
            let pa: Vec<i64> =
                shared.iter().filter_map(|c| labels.iter().position(|x| x == c)).map(|i| i as i64).collect();
            let pb: Vec<i64> =
                shared.iter().filter_map(|c| lb.iter().position(|x| x == c)).map(|i| i as i64).collect();
            cur = tensordot(ctx, &cur, &b, &pa, &pb)?;
            labels = labels.iter().chain(&lb).copied().filter(|c| !shared.contains(c)).collect();
            continue;
        }
        let mut all = labels.clone();
        all.extend(lb.iter().filter(|c| !labels.contains(c)));
        let x = align(ctx, &cur, &labels, &all)?;
        let y = align(ctx, &b, &lb, &all)?;
        let product = binary(ctx, BinOp::Mul, &Operand::Array(x), &Operand::Array(y))?;
        (cur, labels) = sum_out(ctx, product, all, &later)?;
    }
    let (cur, labels) = sum_out(ctx, cur, labels, &output)?;
    let perm: Vec<i64> =
        output.iter().filter_map(|c| labels.iter().position(|x| x == c)).map(|i| i as i64).collect();
    if perm.iter().enumerate().all(|(i, &j)| i as i64 == j) {
        Ok(cur)
    } else {
        transpose(ctx, &cur, Some(&perm))
    }
}
