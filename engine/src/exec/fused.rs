//! Loop fusion for fused chains of elementwise array steps. A fused task
//! such as `add → mul → mean-chunk` would otherwise write and re-read a
//! whole block per step; these kernels are memory-bound, so that traffic is
//! most of their time. Here the chain becomes one expression evaluated tile
//! by tile (64×64 elements, in cache), with a trailing `sum`/`mean` partial
//! reduced straight from the tiles, so a block is read once and only the
//! result is written.
//!
//! It applies to f64 blocks of at most two dimensions, each C- or
//! F-contiguous (a transposed block is read in tiles) or broadcast against
//! the others as NumPy's (a row of column statistics, a column, a single
//! value), and number literals. A chain may start by taking rows of a block
//! (a `train_test_split` part): the rows are then read where they lie
//! instead of being copied out first. Anything else runs step by step as
//! before, with identical elements (the same operations in the same order
//! per element); a fused sum adds in another order.

use ndarray::{ArrayD, IxDyn};

use crate::array::chunk::{Chunk, Nd};
use crate::array::dtype::Scalar;
use crate::array::elementwise::{BinOp, UnOp, max_nan, min_nan};
use crate::array::op::ArrayOp;
use crate::array::reduce::Reduction;
use crate::ops::{Arg, Func, Op, Step, StepInput};
use crate::value::Value;

const T: usize = 64;

/// Runs one step of a fused chain the ordinary way.
pub type RunStep<'a> = dyn FnMut(&Step, &[Value]) -> Result<Value, crate::error::TaskError> + 'a;

/// A node of the fused expression.
#[derive(Debug)]
enum Node {
    /// The i-th leaf block.
    Leaf(usize),
    Const(f64),
    Bin(BinOp, Box<Node>, Box<Node>),
    Un(UnOp, Box<Node>),
}

/// What the chain ends with.
enum Tail {
    /// The elementwise result itself.
    Block,
    /// A `sum` or `mean` partial over these axes.
    Reduce(Reduction, Vec<usize>),
}

fn fusable_bin(op: BinOp) -> bool {
    matches!(
        op,
        BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Pow | BinOp::Maximum | BinOp::Minimum
    )
}

fn fusable_un(op: UnOp) -> bool {
    !matches!(op, UnOp::Not | UnOp::IsNan | UnOp::IsFinite | UnOp::IsInf)
}

fn array_op(step: &Step) -> Option<(&ArrayOp, &[Arg])> {
    match &step.op {
        Op::Call { func: Func::Array(op), args } => Some((op, args)),
        _ => None,
    }
}

fn is_elementwise(step: &Step) -> bool {
    match array_op(step) {
        Some((ArrayOp::Binary(b), _)) => fusable_bin(*b),
        Some((ArrayOp::Unary(u), _)) => fusable_un(*u),
        _ => false,
    }
}

/// The op of a step that takes rows of its one block (a take, a split's
/// part).
fn row_take(step: &Step) -> Option<&ArrayOp> {
    match array_op(step) {
        Some((op, [Arg::Dep(0)])) if op.takes_rows() => Some(op),
        _ => None,
    }
}

/// Where a leaf of the expression comes from: a step's input, read whole or
/// (`pick`) only the rows a row-taking op keeps.
struct LeafSource<'s> {
    input: StepInput,
    pick: Option<&'s ArrayOp>,
}

/// Run a fused chain as one loop if it qualifies; `None` (decided before
/// anything runs) leaves it to the step-by-step path. `run_step` runs the
/// steps before the elementwise suffix (creation, transposes) as usual, and
/// the rest too if the blocks turn out not to qualify.
pub fn try_run(
    steps: &[Step],
    inputs: &[Value],
    run_step: &mut RunStep<'_>,
) -> Option<Result<Value, crate::error::TaskError>> {
    let n = steps.len();
    let last = steps.last()?;
    let tail = match array_op(last) {
        Some((ArrayOp::Partial { red: red @ (Reduction::Sum | Reduction::Mean), axes, .. }, _)) => {
            Tail::Reduce(*red, axes.clone())
        }
        _ if is_elementwise(last) => Tail::Block,
        _ => return None,
    };
    let body_end = if matches!(tail, Tail::Block) { n } else { n - 1 };
    let mut start = body_end;
    while start > 0 && is_elementwise(&steps[start - 1]) {
        start -= 1;
    }
    // A take of rows first in the chain is read in place.
    if start > 0 && row_take(&steps[start - 1]).is_some() {
        start -= 1;
    }
    // One elementwise step alone gains nothing; with a reduction it saves a pass.
    let ops = body_end - start;
    if ops == 0 || (ops == 1 && matches!(tail, Tail::Block)) {
        return None;
    }
    if let Tail::Reduce(..) = tail
        && !matches!(last.inputs.as_slice(), [StepInput::Step(j)] if *j as usize + 1 == body_end)
    {
        return None;
    }
    // The expression of the body; each body step's result feeds exactly
    // one later body step (a fused chain is linear), other inputs are leaves.
    let mut nodes: Vec<Option<Node>> = (0..n).map(|_| None).collect();
    let mut leaf_sources: Vec<LeafSource<'_>> = Vec::new();
    for (k, step) in steps.iter().enumerate().take(body_end).skip(start) {
        if let Some(take) = row_take(step) {
            // Only the first body step can be a take, so its input is a leaf.
            let input = *step.inputs.first()?;
            leaf_sources.push(LeafSource { input, pick: Some(take) });
            nodes[k] = Some(Node::Leaf(leaf_sources.len() - 1));
            continue;
        }
        let (op, args) = array_op(step)?;
        let mut kids = Vec::with_capacity(args.len());
        for a in args {
            kids.push(match a {
                Arg::Lit(Value::Int(i)) => Node::Const(*i as f64),
                Arg::Lit(Value::Float(f)) => Node::Const(*f),
                Arg::Dep(d) => match *step.inputs.get(*d as usize)? {
                    StepInput::Step(j) if (j as usize) >= start => nodes[j as usize].take()?,
                    input => {
                        leaf_sources.push(LeafSource { input, pick: None });
                        Node::Leaf(leaf_sources.len() - 1)
                    }
                },
                _ => return None,
            });
        }
        nodes[k] = Some(match (op, kids.pop(), kids.pop()) {
            (ArrayOp::Binary(b), Some(r), Some(l)) if kids.is_empty() => {
                Node::Bin(*b, Box::new(l), Box::new(r))
            }
            (ArrayOp::Unary(u), Some(a), None) => Node::Un(*u, Box::new(a)),
            _ => return None,
        });
    }
    let expr = nodes[body_end - 1].take()?;
    Some(run(steps, inputs, run_step, start, &expr, &leaf_sources, &tail))
}

/// Run the prefix, then the expression (or, if the blocks do not qualify,
/// the remaining steps one by one).
fn run(
    steps: &[Step],
    inputs: &[Value],
    run_step: &mut RunStep<'_>,
    start: usize,
    expr: &Node,
    leaf_sources: &[LeafSource<'_>],
    tail: &Tail,
) -> Result<Value, crate::error::TaskError> {
    let mut results: Vec<Option<Value>> = Vec::with_capacity(steps.len());
    let fetch = |i: &StepInput, results: &[Option<Value>]| -> Result<Value, crate::error::TaskError> {
        match *i {
            StepInput::External(j) => inputs.get(j as usize).cloned(),
            StepInput::Step(j) => results.get(j as usize).cloned().flatten(),
        }
        .ok_or_else(|| crate::error::TaskError::internal("fused step refers to a missing input"))
    };
    let mut run_range =
        |from: usize, to: usize, results: &mut Vec<Option<Value>>| -> Result<(), crate::error::TaskError> {
            for step in &steps[from..to] {
                let vals = step.inputs.iter().map(|i| fetch(i, results)).collect::<Result<Vec<_>, _>>()?;
                results.push(Some(run_step(step, &vals)?));
            }
            Ok(())
        };
    run_range(0, start, &mut results)?;
    let leaves = leaf_sources.iter().map(|s| fetch(&s.input, &results)).collect::<Result<Vec<_>, _>>()?;
    let blocks: Option<Vec<Input<'_>>> = leaves
        .iter()
        .zip(leaf_sources)
        .map(|(v, src)| match v {
            Value::Array(c) => match &**c {
                Chunk::F64(a) => {
                    let pick = match src.pick {
                        // Rows of a 2-d block, each one in it (else the take reports it).
                        Some(op) => {
                            let n = *a.shape().first().filter(|_| a.ndim() == 2)?;
                            Some(op.picked_rows(n).filter(|p| p.iter().all(|&r| r < n))?)
                        }
                        None => None,
                    };
                    Some(Input { block: a, pick })
                }
                _ => None,
            },
            _ => None,
        })
        .collect();
    if let Some(v) = blocks.and_then(|b| eval(expr, &b, tail)) {
        return Ok(v);
    }
    run_range(start, steps.len(), &mut results)?;
    results.pop().flatten().ok_or_else(|| crate::error::TaskError::internal("empty fused task"))
}

/// A leaf's block, and the rows of it the chain reads when it starts by
/// taking rows.
struct Input<'a> {
    block: &'a Nd<f64>,
    pick: Option<Vec<usize>>,
}

impl Input<'_> {
    fn shape(&self) -> Vec<usize> {
        let mut s = self.block.shape().to_vec();
        if let (Some(p), Some(first)) = (&self.pick, s.first_mut()) {
            *first = p.len();
        }
        s
    }
}

/// A leaf as the evaluator reads it, in the 2-d view of the result.
enum Leaf<'a> {
    /// Contiguous elements; column-major when `fortran` (a transposed view).
    Contiguous {
        data: &'a [f64],
        fortran: bool,
    },
    /// Any other view (a slice of a bigger block), read through ndarray.
    Strided(&'a Nd<f64>),
    /// The rows `pick` of a C-ordered block as wide as the result.
    Picked {
        data: &'a [f64],
        pick: &'a [usize],
    },
    /// One row, the same for every row of the result.
    Row(&'a [f64]),
    /// One column, the same for every column of the result.
    Col(&'a [f64]),
    Scalar(f64),
}

/// The shape NumPy broadcasts `shapes` to, if they broadcast.
fn broadcast(shapes: &[Vec<usize>]) -> Option<Vec<usize>> {
    let nd = shapes.iter().map(Vec::len).max()?;
    let mut out = vec![1; nd];
    for s in shapes {
        for (o, &d) in out[nd - s.len()..].iter_mut().zip(s) {
            match (*o, d) {
                (a, b) if a == b => {}
                (1, b) => *o = b,
                (_, 1) => {}
                _ => return None,
            }
        }
    }
    Some(out)
}

/// How the evaluator reads `input` against a result of `rows × cols`.
fn leaf<'a>(input: &'a Input<'_>, rows: usize, cols: usize) -> Option<Leaf<'a>> {
    let b = input.block;
    let s = input.shape();
    let (lr, lc) = match s.as_slice() {
        [r, c] => (*r, *c),
        [c] => (1, *c),
        [] => (1, 1),
        _ => return None,
    };
    if let Some(pick) = &input.pick {
        // A take is the chain's own rows, never broadcast.
        if (lr, lc) != (rows, cols) {
            return None;
        }
        return Some(Leaf::Picked { data: b.as_slice()?, pick });
    }
    if (lr, lc) == (rows, cols) {
        return Some(match (b.as_slice(), b.as_slice_memory_order()) {
            (Some(data), _) => Leaf::Contiguous { data, fortran: false },
            (None, Some(data)) if b.ndim() == 2 && b.t().is_standard_layout() => {
                Leaf::Contiguous { data, fortran: true }
            }
            _ if b.ndim() == 2 => Leaf::Strided(b),
            _ => return None,
        });
    }
    // Broadcast leaves hold one row, one column or one value, read in their
    // logical order (a reversed view is not, and runs step by step).
    let data = b.as_slice()?;
    match (lr, lc) {
        (1, 1) => data.first().map(|&v| Leaf::Scalar(v)),
        (1, c) if c == cols => Some(Leaf::Row(data)),
        (r, 1) if r == rows => Some(Leaf::Col(data)),
        _ => None,
    }
}

fn eval(expr: &Node, inputs: &[Input<'_>], tail: &Tail) -> Option<Value> {
    let shapes: Vec<Vec<usize>> = inputs.iter().map(Input::shape).collect();
    let shape = broadcast(&shapes)?;
    let (rows, cols) = match shape.as_slice() {
        [r, c] => (*r, *c),
        [c] => (1, *c),
        _ => return None,
    };
    if rows * cols == 0 {
        return None;
    }
    let leaves = inputs.iter().map(|i| leaf(i, rows, cols)).collect::<Option<Vec<_>>>()?;
    let mut scratch = Scratch::default();
    match tail {
        Tail::Block => {
            let mut out = vec![0.0; rows * cols];
            for_tiles(rows, cols, |i0, ti, j0, tj| {
                let at = At { rows, cols, i0, ti, j0, tj };
                let tile = scratch.eval(expr, &leaves, at);
                for ii in 0..ti {
                    out[(i0 + ii) * cols + j0..][..tj].copy_from_slice(tile.row(at, ii));
                }
                scratch.give(tile);
            });
            let a = ArrayD::from_shape_vec(IxDyn(&shape), out).ok()?;
            Some(Value::array(Chunk::from_array(a)))
        }
        Tail::Reduce(red, axes) => {
            let nd = shape.len();
            if axes.iter().any(|&a| a >= nd) {
                return None;
            }
            // Reduced axes of the 2-d view: rows (axis 0 of a 2-d block) and/or columns.
            let over_rows = nd == 2 && axes.contains(&0);
            let over_cols = axes.contains(&(nd - 1));
            // Sums over rows go column by column (independent adds, so they
            // vectorise); a whole-block sum adds those columns at the end.
            let acc_rows = if over_rows { 1 } else { rows };
            let mut acc = vec![0.0; acc_rows * if over_cols && !over_rows { 1 } else { cols }];
            let acc_cols = acc.len() / acc_rows;
            for_tiles(rows, cols, |i0, ti, j0, tj| {
                let at = At { rows, cols, i0, ti, j0, tj };
                let tile = scratch.eval(expr, &leaves, at);
                for ii in 0..ti {
                    let row = tile.row(at, ii);
                    if over_rows {
                        for (a, &v) in acc[j0..][..tj].iter_mut().zip(row) {
                            *a += v;
                        }
                    } else if over_cols {
                        acc[i0 + ii] += row.iter().sum::<f64>();
                    } else {
                        for (a, &v) in acc[(i0 + ii) * acc_cols + j0..][..tj].iter_mut().zip(row) {
                            *a += v;
                        }
                    }
                }
                scratch.give(tile);
            });
            if over_rows && over_cols {
                acc = vec![acc.iter().sum()];
            }
            let mut out_shape = shape.clone();
            for &a in axes {
                out_shape[a] = 1;
            }
            let count: usize = axes.iter().map(|&a| shape[a]).product();
            let sum = Chunk::from_array(ArrayD::from_shape_vec(IxDyn(&out_shape), acc).ok()?);
            let parts = match red {
                Reduction::Mean => {
                    let n =
                        Chunk::full(&out_shape, Scalar::Float(count as f64), crate::array::dtype::DType::F64);
                    vec![Value::array(sum), Value::array(n)]
                }
                _ => vec![Value::array(sum)],
            };
            Some(Value::list(parts))
        }
    }
}

/// Visit the 2-d block in row bands of T, each cut into T-column tiles.
fn for_tiles(rows: usize, cols: usize, mut f: impl FnMut(usize, usize, usize, usize)) {
    for i0 in (0..rows).step_by(T) {
        for j0 in (0..cols).step_by(T) {
            f(i0, T.min(rows - i0), j0, T.min(cols - j0));
        }
    }
}

/// A tile's values: a buffer of `ti × tj` elements, or rows read in place
/// from a C-ordered leaf (element `(ii, jj)` at `(i0 + ii) * cols + j0 + jj`).
enum Tile<'a> {
    Buf(Vec<f64>),
    Rows(&'a [f64]),
    /// Rows of a C-ordered block by number: element `(ii, jj)` at
    /// `pick[i0 + ii] * cols + j0 + jj`.
    Picked(&'a [f64], &'a [usize]),
    /// The same row for every row of the tile: element `(ii, jj)` at `j0 + jj`.
    Row(&'a [f64]),
}

/// Where a tile lies in the block.
#[derive(Clone, Copy)]
struct At {
    rows: usize,
    cols: usize,
    i0: usize,
    ti: usize,
    j0: usize,
    tj: usize,
}

impl Tile<'_> {
    fn row(&self, at: At, ii: usize) -> &[f64] {
        match self {
            Tile::Buf(v) => &v[ii * at.tj..][..at.tj],
            Tile::Rows(d) => &d[(at.i0 + ii) * at.cols + at.j0..][..at.tj],
            Tile::Picked(d, pick) => &d[pick[at.i0 + ii] * at.cols + at.j0..][..at.tj],
            Tile::Row(d) => &d[at.j0..][..at.tj],
        }
    }
}

/// Reusable tile buffers.
#[derive(Default)]
struct Scratch {
    free: Vec<Vec<f64>>,
}

impl Scratch {
    fn take(&mut self, n: usize) -> Vec<f64> {
        let mut v = self.free.pop().unwrap_or_default();
        v.clear();
        v.resize(n, 0.0);
        v
    }

    fn give(&mut self, t: Tile<'_>) {
        if let Tile::Buf(v) = t {
            self.free.push(v);
        }
    }

    fn eval<'a>(&mut self, node: &Node, leaves: &[Leaf<'a>], at: At) -> Tile<'a> {
        let At { rows, i0, ti, j0, tj, .. } = at;
        let n = ti * tj;
        match node {
            Node::Const(c) => {
                let mut v = self.take(n);
                v.fill(*c);
                Tile::Buf(v)
            }
            Node::Leaf(k) => match &leaves[*k] {
                Leaf::Contiguous { data, fortran: false } => Tile::Rows(data),
                Leaf::Contiguous { data, fortran: true } => {
                    let mut v = self.take(n);
                    // Element (i, j) of a column-major block is at j*rows + i;
                    // 8 × 8 squares keep both sides' cache lines few.
                    for jb in (0..tj).step_by(8) {
                        for ib in (0..ti).step_by(8) {
                            for jj in jb..(jb + 8).min(tj) {
                                let col = &data[(j0 + jj) * rows + i0 + ib..][..(8).min(ti - ib)];
                                for (d, &x) in col.iter().enumerate() {
                                    v[(ib + d) * tj + jj] = x;
                                }
                            }
                        }
                    }
                    Tile::Buf(v)
                }
                Leaf::Strided(a) => {
                    let mut v = self.take(n);
                    let tile = a.slice(ndarray::s![i0..i0 + ti, j0..j0 + tj]);
                    for (x, &y) in v.iter_mut().zip(tile.iter()) {
                        *x = y;
                    }
                    Tile::Buf(v)
                }
                Leaf::Picked { data, pick } => Tile::Picked(data, pick),
                Leaf::Row(data) => Tile::Row(data),
                Leaf::Col(data) => {
                    let mut v = self.take(n);
                    for (ii, row) in v.chunks_exact_mut(tj).enumerate() {
                        row.fill(data[i0 + ii]);
                    }
                    Tile::Buf(v)
                }
                Leaf::Scalar(c) => {
                    let mut v = self.take(n);
                    v.fill(*c);
                    Tile::Buf(v)
                }
            },
            Node::Un(op, a) => {
                let f: fn(f64) -> f64 = match op {
                    UnOp::Neg => |x| -x,
                    UnOp::Abs => f64::abs,
                    UnOp::Sqrt => f64::sqrt,
                    UnOp::Exp => f64::exp,
                    UnOp::Log => f64::ln,
                    UnOp::Log10 => f64::log10,
                    UnOp::Sin => f64::sin,
                    UnOp::Cos => f64::cos,
                    UnOp::Tan => f64::tan,
                    UnOp::Tanh => f64::tanh,
                    UnOp::Floor => f64::floor,
                    UnOp::Ceil => f64::ceil,
                    UnOp::Round => f64::round_ties_even,
                    UnOp::Log1p => f64::ln_1p,
                    UnOp::Expm1 => f64::exp_m1,
                    UnOp::Sign => |x| {
                        if x > 0.0 {
                            1.0
                        } else if x < 0.0 {
                            -1.0
                        } else if x == 0.0 {
                            0.0
                        } else {
                            x
                        }
                    },
                    UnOp::Not | UnOp::IsNan | UnOp::IsFinite | UnOp::IsInf => |x| x,
                };
                let x = self.eval(a, leaves, at);
                self.map(x, at, f)
            }
            Node::Bin(op, a, b) => {
                macro_rules! apply {
                    ($f:expr) => {
                        self.bin(a, b, leaves, at, $f)
                    };
                }
                match op {
                    BinOp::Add => apply!(|p: f64, q: f64| p + q),
                    BinOp::Sub => apply!(|p: f64, q: f64| p - q),
                    BinOp::Mul => apply!(|p: f64, q: f64| p * q),
                    BinOp::Div => apply!(|p: f64, q: f64| p / q),
                    BinOp::Pow => apply!(f64::powf),
                    BinOp::Maximum => apply!(max_nan::<f64>),
                    BinOp::Minimum => apply!(min_nan::<f64>),
                    // `fusable_bin` admits no other operator into a fused chain.
                    _ => unreachable!("{op:?} is never fused"),
                }
            }
        }
    }

    /// `f(a, b)` elementwise; a number on either side is applied as it is,
    /// not spread into a tile first.
    fn bin<'a>(
        &mut self,
        a: &Node,
        b: &Node,
        leaves: &[Leaf<'a>],
        at: At,
        f: impl Fn(f64, f64) -> f64,
    ) -> Tile<'a> {
        if let Node::Const(c) = *b {
            let x = self.eval(a, leaves, at);
            return self.map(x, at, |p| f(p, c));
        }
        if let Node::Const(c) = *a {
            let y = self.eval(b, leaves, at);
            return self.map(y, at, |q| f(c, q));
        }
        let x = self.eval(a, leaves, at);
        let y = self.eval(b, leaves, at);
        self.combine(x, y, at, f)
    }

    /// `f(x)` elementwise, in place when the tile is a buffer.
    fn map<'a>(&mut self, x: Tile<'a>, at: At, f: impl Fn(f64) -> f64) -> Tile<'a> {
        match x {
            Tile::Buf(mut v) => {
                v.iter_mut().for_each(|x| *x = f(*x));
                Tile::Buf(v)
            }
            rows_in_place => {
                let mut v = self.take(at.ti * at.tj);
                for ii in 0..at.ti {
                    for (o, &x) in v[ii * at.tj..][..at.tj].iter_mut().zip(rows_in_place.row(at, ii)) {
                        *o = f(x);
                    }
                }
                Tile::Buf(v)
            }
        }
    }

    /// `f(x, y)` elementwise, written over one of the operands' buffers when
    /// there is one.
    fn combine<'a>(&mut self, x: Tile<'a>, y: Tile<'a>, at: At, f: impl Fn(f64, f64) -> f64) -> Tile<'a> {
        match (x, y) {
            (Tile::Buf(mut v), y) => {
                for ii in 0..at.ti {
                    for (o, &q) in v[ii * at.tj..][..at.tj].iter_mut().zip(y.row(at, ii)) {
                        *o = f(*o, q);
                    }
                }
                self.give(y);
                Tile::Buf(v)
            }
            (x, Tile::Buf(mut v)) => {
                for ii in 0..at.ti {
                    for (o, &p) in v[ii * at.tj..][..at.tj].iter_mut().zip(x.row(at, ii)) {
                        *o = f(p, *o);
                    }
                }
                Tile::Buf(v)
            }
            (x, y) => {
                let mut v = self.take(at.ti * at.tj);
                for ii in 0..at.ti {
                    let o = &mut v[ii * at.tj..][..at.tj];
                    for ((o, &p), &q) in o.iter_mut().zip(x.row(at, ii)).zip(y.row(at, ii)) {
                        *o = f(p, q);
                    }
                }
                Tile::Buf(v)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    use super::*;
    use crate::array::reduce::BlockPlace;
    use crate::exec::{TaskContext, execute};
    use crate::key::Key;
    use crate::ops::Func;
    use crate::runner::NoUdfs;

    fn step(op: ArrayOp, args: Vec<Arg>, inputs: Vec<StepInput>) -> Step {
        Step { key: Key::new("s"), op: Op::Call { func: Func::Array(Arc::new(op)), args }, inputs }
    }

    fn bin(op: BinOp, l: StepInput, r: StepInput) -> Step {
        step(ArrayOp::Binary(op), vec![Arg::Dep(0), Arg::Dep(1)], vec![l, r])
    }

    fn sum(axes: Vec<usize>, of: u32) -> Step {
        let place = BlockPlace { offsets: vec![], shape: vec![] };
        step(
            ArrayOp::Partial { red: Reduction::Sum, axes, place },
            vec![Arg::Dep(0)],
            vec![StepInput::Step(of)],
        )
    }

    fn block(shape: &[usize], seed: f64) -> Value {
        let n: usize = shape.iter().product();
        let v = (0..n).map(|i| ((i as f64 + seed) * 0.7311).sin() * 3.0 + 0.5).collect();
        Value::array(Chunk::from_array(ArrayD::from_shape_vec(IxDyn(shape), v).expect("shape")))
    }

    /// The chain run one step at a time, as when it does not qualify.
    fn stepwise(steps: &[Step], inputs: &[Value]) -> Result<Value, crate::error::TaskError> {
        let cancelled = Arc::new(AtomicBool::new(false));
        let key = Key::new("t");
        let ctx = TaskContext::new(&key, &cancelled);
        let mut out: Vec<Value> = Vec::new();
        for s in steps {
            let vals: Vec<Value> = s
                .inputs
                .iter()
                .map(|i| match *i {
                    StepInput::External(j) => inputs[j as usize].clone(),
                    StepInput::Step(j) => out[j as usize].clone(),
                })
                .collect();
            out.push(execute(&s.op, &vals, &NoUdfs, &ctx)?);
        }
        Ok(out.pop().expect("steps"))
    }

    /// The chain through `try_run`, and how many of its steps ran one by
    /// one (none when the loop took it all).
    fn through(steps: &[Step], inputs: &[Value]) -> (Result<Value, crate::error::TaskError>, usize) {
        let cancelled = Arc::new(AtomicBool::new(false));
        let key = Key::new("t");
        let ctx = TaskContext::new(&key, &cancelled);
        let mut calls = 0;
        let mut one = |s: &Step, v: &[Value]| {
            calls += 1;
            execute(&s.op, v, &NoUdfs, &ctx)
        };
        let r = try_run(steps, inputs, &mut one).expect("the chain qualifies");
        (r, calls)
    }

    /// The chain as one loop, no step run on its own.
    fn fused(steps: &[Step], inputs: &[Value]) -> Result<Value, crate::error::TaskError> {
        let (r, calls) = through(steps, inputs);
        assert_eq!(calls, 0, "the chain ran step by step");
        r
    }

    fn values(v: &Value) -> Vec<f64> {
        let one = |v: &Value| match v {
            Value::Array(c) => match &**c {
                Chunk::F64(a) => a.iter().copied().collect::<Vec<_>>(),
                other => panic!("not f64: {other:?}"),
            },
            other => panic!("not an array: {other:?}"),
        };
        match v {
            Value::List(parts) => parts.iter().flat_map(one).collect(),
            v => one(v),
        }
    }

    fn close(a: &[f64], b: &[f64]) {
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= 1e-12 * (1.0 + y.abs()), "{x} vs {y}");
        }
    }

    /// `(x − mean) / scale` summed, the means and scales a row broadcast
    /// over a block's rows (a StandardScaler's transform): one loop, the
    /// step-by-step sums to rounding.
    #[test]
    fn broadcast_rows_fuse_into_a_sum() {
        let x = block(&[300, 70], 0.0);
        let mean = block(&[70], 1.0);
        let scale = block(&[1, 70], 2.0);
        for axes in [vec![0, 1], vec![0], vec![1]] {
            let steps = vec![
                bin(BinOp::Sub, StepInput::External(0), StepInput::External(1)),
                bin(BinOp::Div, StepInput::Step(0), StepInput::External(2)),
                sum(axes.clone(), 1),
            ];
            let inputs = [x.clone(), mean.clone(), scale.clone()];
            close(
                &values(&fused(&steps, &inputs).expect("fused")),
                &values(&stepwise(&steps, &inputs).expect("steps")),
            );
        }
    }

    /// A column, a single value and a transposed block broadcast and
    /// combine element for element as the step-by-step path does.
    #[test]
    fn columns_and_scalars_broadcast_exactly() {
        let x = block(&[130, 90], 0.0);
        let col = block(&[130, 1], 3.0);
        let one = block(&[], 4.0);
        let row = block(&[1, 90], 5.0);
        let steps = vec![
            bin(BinOp::Mul, StepInput::External(0), StepInput::External(1)),
            bin(BinOp::Sub, StepInput::Step(0), StepInput::External(2)),
            bin(BinOp::Maximum, StepInput::External(3), StepInput::Step(1)),
        ];
        let inputs = [x, col.clone(), one, row.clone()];
        assert_eq!(
            values(&fused(&steps, &inputs).expect("fused")),
            values(&stepwise(&steps, &inputs).expect("steps"))
        );
        // A column against a row makes the whole grid.
        let steps = vec![
            bin(BinOp::Add, StepInput::External(0), StepInput::External(1)),
            bin(BinOp::Mul, StepInput::Step(0), StepInput::External(0)),
        ];
        let inputs = [col, row];
        let f = fused(&steps, &inputs).expect("fused");
        assert_eq!(values(&f), values(&stepwise(&steps, &inputs).expect("steps")));
        match &f {
            Value::Array(c) => assert_eq!(c.shape(), [130, 90]),
            other => panic!("{other:?}"),
        }
    }

    /// A reversed row (negative strides) is not read in memory order: the
    /// chain runs step by step and gives NumPy's elements.
    #[test]
    fn a_reversed_row_runs_step_by_step() {
        let row = match block(&[1, 40], 1.0) {
            Value::Array(c) => match &*c {
                Chunk::F64(a) => a.to_owned().slice_move(ndarray::s![.., ..;-1]).into_dyn(),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        };
        let steps = vec![
            bin(BinOp::Sub, StepInput::External(0), StepInput::External(1)),
            bin(BinOp::Mul, StepInput::Step(0), StepInput::External(1)),
        ];
        let inputs = [block(&[70, 40], 0.0), Value::array(Chunk::from_array(row))];
        let (r, calls) = through(&steps, &inputs);
        assert_eq!(calls, 2, "the chain ran step by step");
        assert_eq!(values(&r.expect("runs")), values(&stepwise(&steps, &inputs).expect("steps")));
    }

    /// A split's part summed is read in place: the same sums as copying its
    /// rows out first, with and without elementwise steps between.
    #[test]
    fn a_take_of_rows_is_read_in_place() {
        let x = block(&[1000, 37], 0.0);
        for test in [false, true] {
            let take = crate::ml::op::MlOp::SplitRows { seed: 3, block: 1, n_test: 211, shuffle: true, test };
            let t = step(ArrayOp::Ml(take.clone()), vec![Arg::Dep(0)], vec![StepInput::External(0)]);
            let steps = vec![t.clone(), sum(vec![0, 1], 0)];
            let inputs = [x.clone()];
            close(
                &values(&fused(&steps, &inputs).expect("fused")),
                &values(&stepwise(&steps, &inputs).expect("steps")),
            );
            let steps = vec![
                t,
                step(ArrayOp::Unary(UnOp::Abs), vec![Arg::Dep(0)], vec![StepInput::Step(0)]),
                bin(BinOp::Add, StepInput::Step(1), StepInput::External(1)),
            ];
            let inputs = [x.clone(), block(&[37], 9.0)];
            let f = fused(&steps, &inputs).expect("fused");
            assert_eq!(values(&f), values(&stepwise(&steps, &inputs).expect("steps")));
            match &f {
                Value::Array(c) => assert_eq!(c.shape(), [if test { 211 } else { 789 }, 37]),
                other => panic!("{other:?}"),
            }
        }
    }

    /// A take of rows the block does not have (a peer's op) is not read:
    /// the chain falls back and the take reports it.
    #[test]
    fn a_bad_take_falls_back_to_its_error() {
        let t = step(ArrayOp::TakeRows(vec![0, 5000]), vec![Arg::Dep(0)], vec![StepInput::External(0)]);
        let steps = vec![t, sum(vec![0, 1], 0)];
        let (r, calls) = through(&steps, &[block(&[10, 3], 0.0)]);
        assert_eq!(calls, 1, "the take ran on its own");
        let e = r.expect_err("row 5000");
        assert!(e.message.contains("row 5000 of a block of 10 rows"), "{e}");
    }
}
