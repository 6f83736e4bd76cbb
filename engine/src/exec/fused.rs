//! Loop fusion for fused chains of elementwise array steps. A fused task
//! such as `add → mul → mean-chunk` would otherwise write and re-read a
//! whole block per step; these kernels are memory-bound, so that traffic is
//! most of their time. Here the chain becomes one expression evaluated tile
//! by tile (64×64 elements, in cache), with a trailing `sum`/`mean` partial
//! reduced straight from the tiles, so a block is read once and only the
//! result is written.
//!
//! It applies to f64 blocks of one 2-d (or 1-d) shape, each C- or
//! F-contiguous (a transposed block is read in tiles), and number literals;
//! anything else runs step by step as before, with identical results
//! (the same operations in the same order per element).

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
    !matches!(op, UnOp::Not | UnOp::IsNan | UnOp::IsFinite)
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
    let mut leaf_sources: Vec<StepInput> = Vec::new();
    for (k, step) in steps.iter().enumerate().take(body_end).skip(start) {
        let (op, args) = array_op(step)?;
        let mut kids = Vec::with_capacity(args.len());
        for a in args {
            kids.push(match a {
                Arg::Lit(Value::Int(i)) => Node::Const(*i as f64),
                Arg::Lit(Value::Float(f)) => Node::Const(*f),
                Arg::Dep(d) => match *step.inputs.get(*d as usize)? {
                    StepInput::Step(j) if (j as usize) >= start => nodes[j as usize].take()?,
                    src => {
                        leaf_sources.push(src);
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
    leaf_sources: &[StepInput],
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
    let leaves = leaf_sources.iter().map(|s| fetch(s, &results)).collect::<Result<Vec<_>, _>>()?;
    let blocks: Option<Vec<&Nd<f64>>> = leaves
        .iter()
        .map(|v| match v {
            Value::Array(c) => match &**c {
                Chunk::F64(a) => Some(a),
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

/// A leaf as the evaluator reads it.
enum Leaf<'a> {
    /// Contiguous elements; column-major when `fortran` (a transposed view).
    Contiguous { data: &'a [f64], fortran: bool },
    /// Any other view (a slice of a bigger block), read through ndarray.
    Strided(&'a Nd<f64>),
}

fn eval(expr: &Node, blocks: &[&Nd<f64>], tail: &Tail) -> Option<Value> {
    let shape = blocks.first()?.shape().to_vec();
    if shape.len() > 2 || blocks.iter().any(|b| b.shape() != shape.as_slice()) {
        return None;
    }
    let (rows, cols) = match shape.as_slice() {
        [r, c] => (*r, *c),
        [c] => (1, *c),
        _ => return None,
    };
    if rows * cols == 0 {
        return None;
    }
    let mut leaves = Vec::with_capacity(blocks.len());
    for b in blocks {
        leaves.push(match (b.as_slice(), b.as_slice_memory_order()) {
            (Some(data), _) => Leaf::Contiguous { data, fortran: false },
            (None, Some(data)) if b.ndim() == 2 && b.t().is_standard_layout() => {
                Leaf::Contiguous { data, fortran: true }
            }
            _ if b.ndim() == 2 => Leaf::Strided(b),
            _ => return None,
        });
    }
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
            // Reduced axes of the 2-d view: rows (axis 0 of a 2-d block) and/or columns.
            let over_rows = nd == 2 && axes.contains(&0);
            let over_cols = axes.contains(&(nd - 1));
            let mut acc = vec![0.0; if over_cols { 1 } else { cols } * if over_rows { 1 } else { rows }];
            let acc_cols = if over_cols { 1 } else { cols };
            for_tiles(rows, cols, |i0, ti, j0, tj| {
                let at = At { rows, cols, i0, ti, j0, tj };
                let tile = scratch.eval(expr, &leaves, at);
                for ii in 0..ti {
                    let r = if over_rows { 0 } else { i0 + ii };
                    let row = tile.row(at, ii);
                    if over_cols {
                        acc[r] += row.iter().sum::<f64>();
                    } else {
                        for (a, &v) in acc[r * acc_cols + j0..][..tj].iter_mut().zip(row) {
                            *a += v;
                        }
                    }
                }
                scratch.give(tile);
            });
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
                    UnOp::Not | UnOp::IsNan | UnOp::IsFinite => |x| x,
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
