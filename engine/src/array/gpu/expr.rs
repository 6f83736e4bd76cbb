//! Elementwise work on the GPU as one generated kernel. A chain of
//! operators (`(x + x.T) * 2`, `where(x > 0, x, 0)`, casts) becomes an
//! expression over its leaf blocks (views with their own strides, broadcast
//! by stride 0) and scalars (kernel arguments, so a new value compiles
//! nothing); the CUDA source is generated from it with the CPU path's
//! NumPy semantics (type promotion, integer division and modulo, NaN in
//! `maximum`), compiled once by NVRTC and cached on disk. Only the result
//! is written: the chain reads each leaf once.

use std::fmt::Write;
use std::sync::Arc;

use brisk_gpu::{KArg, Launch};

use super::chunk::GpuChunk;
pub use super::ctype::{ctype, store_type};
use super::user::UserFn;
use crate::array::dtype::{DType, Scalar};
use crate::array::elementwise::{BinOp, UnOp, broadcast_shapes, result_dtype, unary_dtype};
use crate::array::error::ArrayError;

/// A node of an expression; its leaves and scalars live in the `Expr`.
#[derive(Clone, Debug)]
enum Node {
    Leaf(usize),
    Scalar(usize),
    /// An operator computed in `work`, giving `out`.
    Bin {
        op: BinOp,
        work: DType,
        out: DType,
        a: Box<Node>,
        b: Box<Node>,
    },
    Un {
        op: UnOp,
        out: DType,
        a: Box<Node>,
    },
    Where {
        out: DType,
        c: Box<Node>,
        a: Box<Node>,
        b: Box<Node>,
    },
    Cast {
        out: DType,
        a: Box<Node>,
    },
    /// A user's kernel (`elementwise_kernel`, a reduction's map) called
    /// on its arguments, each cast to its parameter's type.
    User {
        f: Arc<UserFn>,
        args: Vec<Node>,
    },
}

/// An elementwise expression of one shape over GPU blocks and scalars.
#[derive(Clone, Debug)]
pub struct Expr {
    node: Node,
    pub dtype: DType,
    pub shape: Vec<usize>,
    /// Every leaf is a view of exactly `shape`.
    leaves: Vec<GpuChunk>,
    scalars: Vec<Scalar>,
    /// The device of an expression without leaves (a constant).
    home: Option<std::sync::Arc<brisk_gpu::Device>>,
}

/// One side of an operation: an expression, or a plain number.
#[derive(Clone, Debug)]
pub enum Term {
    Expr(Expr),
    Scalar(Scalar),
}

impl Term {
    fn dtype(&self) -> Option<DType> {
        match self {
            Term::Expr(e) => Some(e.dtype),
            Term::Scalar(_) => None,
        }
    }

    fn scalar(&self) -> Option<Scalar> {
        match self {
            Term::Expr(_) => None,
            Term::Scalar(s) => Some(*s),
        }
    }

    fn shape(&self) -> &[usize] {
        match self {
            Term::Expr(e) => &e.shape,
            Term::Scalar(_) => &[],
        }
    }
}

fn scalar_dtype(s: Scalar) -> DType {
    match s {
        Scalar::Bool(_) => DType::Bool,
        Scalar::Int(_) => DType::I64,
        Scalar::Float(_) => DType::F64,
    }
}

/// A view of `c` broadcast to `shape` (stride 0 on new and stretched axes).
fn broadcast_to(c: &GpuChunk, shape: &[usize]) -> Result<GpuChunk, ArrayError> {
    if c.shape() == shape {
        return Ok(c.clone());
    }
    let extra = shape
        .len()
        .checked_sub(c.ndim())
        .ok_or_else(|| ArrayError::Shape(format!("cannot broadcast {:?} to {:?}", c.shape(), shape)))?;
    let mut strides = vec![0isize; shape.len()];
    for d in 0..c.ndim() {
        let (n, want) = (c.shape()[d], shape[d + extra]);
        strides[d + extra] = match (n, want) {
            (n, w) if n == w => c.strides()[d],
            (1, _) => 0,
            _ => return Err(ArrayError::Broadcast { a: c.shape().to_vec(), b: shape.to_vec() }),
        };
    }
    Ok(GpuChunk { shape: shape.to_vec(), strides, ..c.clone() })
}

impl Node {
    fn shifted(self, leaves: usize, scalars: usize) -> Node {
        match self {
            Node::Leaf(i) => Node::Leaf(i + leaves),
            Node::Scalar(i) => Node::Scalar(i + scalars),
            Node::Bin { op, work, out, a, b } => Node::Bin {
                op,
                work,
                out,
                a: Box::new(a.shifted(leaves, scalars)),
                b: Box::new(b.shifted(leaves, scalars)),
            },
            Node::Un { op, out, a } => Node::Un { op, out, a: Box::new(a.shifted(leaves, scalars)) },
            Node::Where { out, c, a, b } => Node::Where {
                out,
                c: Box::new(c.shifted(leaves, scalars)),
                a: Box::new(a.shifted(leaves, scalars)),
                b: Box::new(b.shifted(leaves, scalars)),
            },
            Node::Cast { out, a } => Node::Cast { out, a: Box::new(a.shifted(leaves, scalars)) },
            Node::User { f, args } => {
                Node::User { f, args: args.into_iter().map(|n| n.shifted(leaves, scalars)).collect() }
            }
        }
    }
}

/// Terms joined: their nodes (renumbered), the shape, leaves and scalars.
type Joined = (Vec<Node>, Vec<usize>, Vec<GpuChunk>, Vec<Scalar>);

/// Join terms into one shape: their nodes (renumbered), leaves (broadcast)
/// and scalars.
fn join(terms: Vec<Term>) -> Result<Joined, ArrayError> {
    let mut shape: Vec<usize> = Vec::new();
    for t in &terms {
        shape = broadcast_shapes(&shape, t.shape())?;
    }
    // Every leaf on the first leaf's device (blocks made on different GPUs
    // of the host meet here).
    let target = terms.iter().find_map(|t| match t {
        Term::Expr(e) => e.leaves.first().map(|l| l.device().clone()),
        Term::Scalar(_) => None,
    });
    let (mut nodes, mut leaves, mut scalars) = (Vec::new(), Vec::new(), Vec::new());
    for t in terms {
        match t {
            Term::Scalar(s) => {
                nodes.push(Node::Scalar(scalars.len()));
                scalars.push(s);
            }
            Term::Expr(e) => {
                nodes.push(e.node.shifted(leaves.len(), scalars.len()));
                for l in &e.leaves {
                    let l = match &target {
                        Some(d) => l.to_device(d)?,
                        None => l.clone(),
                    };
                    leaves.push(broadcast_to(&l, &shape)?);
                }
                scalars.extend(e.scalars);
            }
        }
    }
    Ok((nodes, shape, leaves, scalars))
}

impl Expr {
    pub fn leaf(c: GpuChunk) -> Expr {
        Expr {
            node: Node::Leaf(0),
            dtype: c.dtype(),
            shape: c.shape().to_vec(),
            leaves: vec![c],
            scalars: vec![],
            home: None,
        }
    }

    /// Every element `v`, as `dtype`, on `device`.
    pub fn constant(
        device: &std::sync::Arc<brisk_gpu::Device>,
        v: Scalar,
        dtype: DType,
        shape: &[usize],
    ) -> Expr {
        Expr {
            node: Node::Cast { out: dtype, a: Box::new(Node::Scalar(0)) },
            dtype,
            shape: shape.to_vec(),
            leaves: vec![],
            scalars: vec![v],
            home: Some(device.clone()),
        }
    }

    /// `a op b`, typed as the CPU path types it.
    pub fn binary(op: BinOp, a: Term, b: Term) -> Result<Expr, ArrayError> {
        let out = result_dtype(op, a.dtype(), b.dtype(), [a.scalar(), b.scalar()]).map_err(|e| match e {
            ArrayError::Value(_) => {
                ArrayError::DType(format!("{} is not defined for these operands", op.symbol()))
            }
            e => e,
        })?;
        let work = if matches!(op, BinOp::Gt | BinOp::Ge | BinOp::Lt | BinOp::Le | BinOp::Eq | BinOp::Ne) {
            match (a.dtype(), b.dtype()) {
                (Some(x), Some(y)) => DType::promote(x, y),
                (Some(x), None) => x.promote_scalar(b.scalar().unwrap_or(Scalar::Bool(false))),
                (None, Some(y)) => y.promote_scalar(a.scalar().unwrap_or(Scalar::Bool(false))),
                (None, None) => DType::F64,
            }
        } else {
            out
        };
        let (mut nodes, shape, leaves, scalars) = join(vec![a, b])?;
        let (Some(nb), Some(na)) = (nodes.pop(), nodes.pop()) else {
            return Err(ArrayError::Value("binary operation without operands".into()));
        };
        Ok(Expr {
            node: Node::Bin { op, work, out, a: Box::new(na), b: Box::new(nb) },
            dtype: out,
            shape,
            leaves,
            scalars,
            home: None,
        })
    }

    pub fn unary(op: UnOp, a: Expr) -> Result<Expr, ArrayError> {
        let out = unary_dtype(op, a.dtype)?;
        Ok(Expr { node: Node::Un { op, out, a: Box::new(a.node) }, dtype: out, ..a })
    }

    pub fn cast(a: Expr, out: DType) -> Expr {
        if a.dtype == out {
            return a;
        }
        Expr { node: Node::Cast { out, a: Box::new(a.node) }, dtype: out, ..a }
    }

    /// `where(c, a, b)` with the CPU path's result type.
    pub fn where_(c: Term, a: Term, b: Term) -> Result<Expr, ArrayError> {
        let out = match (a.dtype(), b.dtype()) {
            (Some(x), Some(y)) => DType::promote(x, y),
            (Some(x), None) => x.promote_scalar(b.scalar().unwrap_or(Scalar::Bool(false))),
            (None, Some(y)) => y.promote_scalar(a.scalar().unwrap_or(Scalar::Bool(false))),
            (None, None) => {
                let t = |s: Option<Scalar>| s.map(scalar_dtype).unwrap_or(DType::Bool);
                DType::promote(t(a.scalar()), t(b.scalar()))
            }
        };
        let (mut nodes, shape, leaves, scalars) = join(vec![c, a, b])?;
        let (Some(nb), Some(na), Some(nc)) = (nodes.pop(), nodes.pop(), nodes.pop()) else {
            return Err(ArrayError::Value("where without operands".into()));
        };
        Ok(Expr {
            node: Node::Where { out, c: Box::new(nc), a: Box::new(na), b: Box::new(nb) },
            dtype: out,
            shape,
            leaves,
            scalars,
            home: None,
        })
    }

    /// A user's function of the terms (broadcast together).
    pub fn user(f: Arc<UserFn>, terms: Vec<Term>) -> Result<Expr, ArrayError> {
        if terms.len() != f.params.len() {
            return Err(ArrayError::Value(format!(
                "{} takes {} argument(s), got {}",
                f.label,
                f.params.len(),
                terms.len()
            )));
        }
        let home = terms.iter().find_map(|t| match t {
            Term::Expr(e) if e.leaves.is_empty() => e.home.clone(),
            _ => None,
        });
        let dtype = f.out.1;
        let (nodes, shape, leaves, scalars) = join(terms)?;
        Ok(Expr { node: Node::User { f, args: nodes }, dtype, shape, leaves, scalars, home })
    }

    /// The blocks the expression reads, numbered as `parts` names them.
    pub fn leaves(&self) -> &[GpuChunk] {
        &self.leaves
    }

    /// The leaf itself when the expression is one plain leaf.
    pub fn as_leaf(&self) -> Option<&GpuChunk> {
        match self.node {
            Node::Leaf(0) if self.leaves.len() == 1 => self.leaves.first(),
            _ => None,
        }
    }

    pub fn device(&self) -> Result<std::sync::Arc<brisk_gpu::Device>, ArrayError> {
        match (self.leaves.first(), &self.home) {
            (Some(l), _) => Ok(l.device().clone()),
            (None, Some(d)) => Ok(d.clone()),
            (None, None) => super::chunk::default_device(),
        }
    }
}

/// Helpers with NumPy's semantics, shared by every generated kernel, and
/// the constants users' kernels expect (NVRTC has no math headers).
pub const PRELUDE: &str = r#"
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif
typedef unsigned long long u64;
typedef long long i64;
template <typename T> __device__ __forceinline__ bool b_isnan(T v) { return v != v; }
template <typename T> __device__ __forceinline__ T b_sign(T v) { return b_isnan(v) ? v : (T)((v > (T)0) - (v < (T)0)); }
template <typename T> __device__ __forceinline__ T b_max(T a, T b) { return (b_isnan(a) || a >= b) ? a : b; }
template <typename T> __device__ __forceinline__ T b_min(T a, T b) { return (b_isnan(a) || a <= b) ? a : b; }
__device__ __forceinline__ i64 b_add(i64 a, i64 b) { return (i64)((u64)a + (u64)b); }
__device__ __forceinline__ i64 b_sub(i64 a, i64 b) { return (i64)((u64)a - (u64)b); }
__device__ __forceinline__ i64 b_mul(i64 a, i64 b) { return (i64)((u64)a * (u64)b); }
__device__ __forceinline__ float b_add(float a, float b) { return a + b; }
__device__ __forceinline__ float b_sub(float a, float b) { return a - b; }
__device__ __forceinline__ float b_mul(float a, float b) { return a * b; }
__device__ __forceinline__ double b_add(double a, double b) { return a + b; }
__device__ __forceinline__ double b_sub(double a, double b) { return a - b; }
__device__ __forceinline__ double b_mul(double a, double b) { return a * b; }
__device__ __forceinline__ i64 b_floordiv(i64 a, i64 b) {
  if (b == 0) return 0;
  i64 q = (a == (i64)0x8000000000000000LL && b == -1) ? a : a / b;
  return ((a % b != 0) && ((a < 0) != (b < 0))) ? q - 1 : q;
}
__device__ __forceinline__ i64 b_rem(i64 a, i64 b) {
  if (b == 0 || b == -1) return 0;
  i64 r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
__device__ __forceinline__ float b_floordiv(float a, float b) { return floorf(a / b); }
__device__ __forceinline__ double b_floordiv(double a, double b) { return floor(a / b); }
__device__ __forceinline__ float b_rem(float a, float b) { float r = fmodf(a, b); return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
__device__ __forceinline__ double b_rem(double a, double b) { double r = fmod(a, b); return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
__device__ __forceinline__ i64 b_pow(i64 a, i64 e) { u64 base = (u64)a, acc = 1; u64 k = e < 0 ? 0 : (u64)e; while (k) { if (k & 1) acc *= base; base *= base; k >>= 1; } return (i64)acc; }
__device__ __forceinline__ float b_pow(float a, float b) { return powf(a, b); }
__device__ __forceinline__ double b_pow(double a, double b) { return pow(a, b); }
__device__ __forceinline__ i64 b_abs(i64 a) { return a < 0 ? (i64)(0ULL - (u64)a) : a; }
/* Rust's `as`: NaN is 0, out-of-range saturates. */
template <typename F> __device__ __forceinline__ i64 b_f2i(F v) {
  if (v != v) return 0;
  if (v >= (F)9223372036854775807.0) return (i64)0x7fffffffffffffffLL;
  if (v <= (F)-9223372036854775808.0) return (i64)0x8000000000000000LL;
  return (i64)v;
}
"#;

/// CUDA source for the expression's parts: kernel parameters, their
/// arguments, per-row setup and the value at `(r, c)` (row `r` of the
/// leading axes, column `c` of the last).
pub struct Parts {
    /// `, const double* __restrict__ l0, i64 t0_0, ...` (after the kernel's own).
    pub params: String,
    pub args: Vec<KArg>,
    /// Statements at the top of the row loop (leaf row bases): only for
    /// strided leaves of three or more axes.
    pub row_setup: String,
    /// The value, of C type `ctype(expr.dtype)`, written with `(r)` and
    /// `(c)` in parentheses so that it can be the body of a macro
    /// `VAL(r, c)` (kernels unroll by reading several elements at once).
    pub value: String,
    /// Definitions of the users' functions the value calls: they go
    /// before the kernel, after the prelude.
    pub funcs: String,
    /// The first user kernel's name: generated kernels are named after it,
    /// so that a launch failure names the user's kernel.
    pub user: Option<String>,
}

impl Parts {
    /// `base`, or `base_<user kernel>`.
    pub fn kernel_name(&self, base: &str) -> String {
        match &self.user {
            Some(u) => format!("{base}_{u}"),
            None => base.to_string(),
        }
    }
}

/// Whether a leaf is one C-ordered run of exactly the expression's shape.
fn plain(l: &GpuChunk) -> bool {
    l.is_c_contiguous()
}

pub fn parts(e: &Expr) -> Parts {
    parts_staged(e, &[])
}

/// As `parts`, but the leaves `staged` are read through a macro
/// `S<i>(r, c)` that the kernel defines: a tile of the leaf it has put in
/// shared memory (a transposed leaf read row by row would touch a
/// different memory line in every thread of a warp).
pub fn parts_staged(e: &Expr, staged: &[usize]) -> Parts {
    let nd = e.shape.len();
    let mut params = String::new();
    let mut args = Vec::new();
    let mut row_setup = String::new();
    let lead: Vec<usize> = if nd == 0 { vec![] } else { e.shape[..nd - 1].to_vec() };
    for (i, l) in e.leaves.iter().enumerate() {
        let _ = write!(params, ", const {}* __restrict__ l{i}", store_type(l.dtype()));
        args.push(KArg::U64(l.ptr()));
        if !plain(l) {
            // Strides of every axis; the row base is found once per row.
            for d in 0..nd {
                let _ = write!(params, ", i64 t{i}_{d}");
                args.push(KArg::I64(l.strides()[d] as i64));
            }
            // Up to two axes the index is computed inline (no setup).
            if nd <= 2 {
                continue;
            }
            let _ = writeln!(row_setup, "    i64 b{i} = 0;");
            let _ = writeln!(row_setup, "    {{ u64 q = r;");
            // The outermost axis needs no modulo: what is left of the row
            // index is below its length (64-bit division is slow).
            for d in (1..lead.len()).rev() {
                let _ = writeln!(row_setup, "      b{i} += (i64)(q % (u64)d{d}) * t{i}_{d}; q /= (u64)d{d};");
            }
            let _ = writeln!(row_setup, "      b{i} += (i64)q * t{i}_0;");
            let _ = writeln!(row_setup, "    }}");
        }
    }
    for (i, s) in e.scalars.iter().enumerate() {
        match s {
            Scalar::Float(f) => {
                let _ = write!(params, ", double s{i}");
                args.push(KArg::F64(*f));
            }
            Scalar::Int(v) => {
                let _ = write!(params, ", i64 s{i}");
                args.push(KArg::I64(*v));
            }
            Scalar::Bool(b) => {
                let _ = write!(params, ", i64 s{i}");
                args.push(KArg::I64(i64::from(*b)));
            }
        }
    }
    let mut fns: Vec<Arc<UserFn>> = Vec::new();
    user_fns(&e.node, &mut fns);
    let funcs = fns.iter().enumerate().map(|(i, f)| f.definition(&format!("uk{i}"))).collect();
    let mut value = String::new();
    emit(&e.node, &Src { e, staged, fns: &fns }, &mut value);
    let user = fns.first().map(|f| f.label.split(':').next().unwrap_or_default().trim().to_string());
    Parts { params, args, row_setup, value, funcs, user }
}

/// The distinct user functions under `n`, each once.
fn user_fns(n: &Node, out: &mut Vec<Arc<UserFn>>) {
    match n {
        Node::Leaf(_) | Node::Scalar(_) => {}
        Node::Bin { a, b, .. } => {
            user_fns(a, out);
            user_fns(b, out);
        }
        Node::Un { a, .. } | Node::Cast { a, .. } => user_fns(a, out),
        Node::Where { c, a, b, .. } => {
            user_fns(c, out);
            user_fns(a, out);
            user_fns(b, out);
        }
        Node::User { f, args } => {
            if !out.iter().any(|g| g == f) {
                out.push(f.clone());
            }
            args.iter().for_each(|a| user_fns(a, out));
        }
    }
}

fn node_dtype(n: &Node, e: &Expr) -> DType {
    match n {
        Node::Leaf(i) => e.leaves[*i].dtype(),
        Node::Scalar(i) => scalar_dtype(e.scalars[*i]),
        Node::Bin { out, .. } | Node::Un { out, .. } | Node::Where { out, .. } | Node::Cast { out, .. } => {
            *out
        }
        Node::User { f, .. } => f.out.1,
    }
}

/// `x` (of type `from`) converted to `to` with the CPU path's casts.
pub(super) fn emit_cast(from: DType, to: DType, x: &str, out: &mut String) {
    let _ = match (from, to) {
        (f, t) if f == t => write!(out, "{x}"),
        (_, DType::Bool) => write!(out, "(({x}) != 0)"),
        (DType::F32 | DType::F64, DType::I64) => write!(out, "b_f2i({x})"),
        (_, t) => write!(out, "(({})({x}))", ctype(t)),
    };
}

/// What `emit` writes from: the expression and its leaves read from
/// shared memory.
struct Src<'a> {
    e: &'a Expr,
    staged: &'a [usize],
    /// The users' functions, `uk<i>`.
    fns: &'a [Arc<UserFn>],
}

fn emit_as(n: &Node, s: &Src<'_>, to: DType, out: &mut String) {
    let mut inner = String::new();
    emit(n, s, &mut inner);
    emit_cast(node_dtype(n, s.e), to, &inner, out);
}

fn emit(n: &Node, s: &Src<'_>, out: &mut String) {
    let e = s.e;
    match n {
        Node::Leaf(i) if s.staged.contains(i) => {
            let _ = if e.leaves[*i].dtype() == DType::Bool {
                write!(out, "(S{i}((r), (c)) != 0)")
            } else {
                write!(out, "S{i}((r), (c))")
            };
        }
        Node::Leaf(i) => {
            let l = &e.leaves[*i];
            let nd = e.shape.len();
            let idx = if plain(l) {
                "((r) * cols + (c))".to_string()
            } else {
                match nd {
                    0 => "0".to_string(),
                    1 => format!("((i64)(c) * t{i}_0)"),
                    2 => format!("((i64)(r) * t{i}_0 + (i64)(c) * t{i}_1)"),
                    _ => format!("(b{i} + (i64)(c) * t{i}_{})", nd - 1),
                }
            };
            if l.dtype() == DType::Bool {
                let _ = write!(out, "(l{i}[{idx}] != 0)");
            } else {
                let _ = write!(out, "l{i}[{idx}]");
            }
        }
        Node::Scalar(i) => {
            let _ = match e.scalars[*i] {
                Scalar::Bool(_) => write!(out, "(s{i} != 0)"),
                _ => write!(out, "s{i}"),
            };
        }
        Node::Cast { out: t, a } => emit_as(a, s, *t, out),
        Node::User { f, args } => {
            let i = s.fns.iter().position(|g| g == f).unwrap_or(0);
            let _ = write!(out, "uk{i}(");
            for (k, (a, (_, t))) in args.iter().zip(&f.params).enumerate() {
                if k > 0 {
                    out.push_str(", ");
                }
                emit_as(a, s, *t, out);
            }
            out.push(')');
        }
        Node::Where { out: t, c, a, b } => {
            out.push('(');
            emit_as(c, s, DType::Bool, out);
            out.push_str(" ? ");
            emit_as(a, s, *t, out);
            out.push_str(" : ");
            emit_as(b, s, *t, out);
            out.push(')');
        }
        Node::Un { op, out: t, a } => {
            let from = node_dtype(a, e);
            let mut x = String::new();
            // Float functions of integers compute in the float type.
            emit_as(a, s, if t.is_float() { *t } else { from }, &mut x);
            let _ = match (op, from) {
                (UnOp::Neg, DType::I64) => write!(out, "b_sub(0LL, {x})"),
                (UnOp::Neg, _) => write!(out, "(-{x})"),
                (UnOp::Not, DType::Bool) => write!(out, "(!{x})"),
                (UnOp::Not, _) => write!(out, "(~{x})"),
                (UnOp::Abs, DType::Bool) => write!(out, "{x}"),
                (UnOp::Abs, DType::I64) => write!(out, "b_abs({x})"),
                (UnOp::Abs, _) => write!(out, "fabs({x})"),
                (UnOp::Round, DType::Bool | DType::I64) => write!(out, "{x}"),
                (UnOp::Round, _) => write!(out, "rint({x})"),
                (UnOp::IsNan, _) => write!(out, "b_isnan({x})"),
                (UnOp::IsFinite, DType::Bool | DType::I64) => write!(out, "true"),
                (UnOp::IsFinite, _) => write!(out, "isfinite({x})"),
                (UnOp::IsInf, DType::Bool | DType::I64) => write!(out, "false"),
                (UnOp::IsInf, _) => write!(out, "isinf({x})"),
                (UnOp::Sign, _) => write!(out, "b_sign({x})"),
                (UnOp::Log1p, _) => write!(out, "log1p({x})"),
                (UnOp::Expm1, _) => write!(out, "expm1({x})"),
                (UnOp::Sqrt, _) => write!(out, "sqrt({x})"),
                (UnOp::Exp, _) => write!(out, "exp({x})"),
                (UnOp::Log, _) => write!(out, "log({x})"),
                (UnOp::Log10, _) => write!(out, "log10({x})"),
                (UnOp::Sin, _) => write!(out, "sin({x})"),
                (UnOp::Cos, _) => write!(out, "cos({x})"),
                (UnOp::Tan, _) => write!(out, "tan({x})"),
                (UnOp::Tanh, _) => write!(out, "tanh({x})"),
                (UnOp::Floor, _) => write!(out, "floor({x})"),
                (UnOp::Ceil, _) => write!(out, "ceil({x})"),
            };
        }
        Node::Bin { op, work, a, b, .. } => {
            let (mut x, mut y) = (String::new(), String::new());
            emit_as(a, s, *work, &mut x);
            emit_as(b, s, *work, &mut y);
            let boolean = *work == DType::Bool;
            let _ = match op {
                BinOp::Add | BinOp::Or | BinOp::Maximum if boolean => write!(out, "({x} || {y})"),
                BinOp::Mul | BinOp::And | BinOp::Minimum if boolean => write!(out, "({x} && {y})"),
                BinOp::Gt if boolean => write!(out, "({x} && !{y})"),
                BinOp::Ge if boolean => write!(out, "({x} || !{y})"),
                BinOp::Lt if boolean => write!(out, "(!{x} && {y})"),
                BinOp::Le if boolean => write!(out, "(!{x} || {y})"),
                BinOp::Add => write!(out, "b_add({x}, {y})"),
                BinOp::Sub => write!(out, "b_sub({x}, {y})"),
                BinOp::Mul => write!(out, "b_mul({x}, {y})"),
                BinOp::Div => write!(out, "({x} / {y})"),
                BinOp::FloorDiv => write!(out, "b_floordiv({x}, {y})"),
                BinOp::Rem => write!(out, "b_rem({x}, {y})"),
                BinOp::Pow => write!(out, "b_pow({x}, {y})"),
                BinOp::Maximum => write!(out, "b_max({x}, {y})"),
                BinOp::Minimum => write!(out, "b_min({x}, {y})"),
                BinOp::Gt => write!(out, "({x} > {y})"),
                BinOp::Ge => write!(out, "({x} >= {y})"),
                BinOp::Lt => write!(out, "({x} < {y})"),
                BinOp::Le => write!(out, "({x} <= {y})"),
                BinOp::Eq => write!(out, "({x} == {y})"),
                BinOp::Ne => write!(out, "({x} != {y})"),
                BinOp::And => write!(out, "({x} & {y})"),
                BinOp::Or => write!(out, "({x} | {y})"),
            };
        }
    }
}

/// Rows (the leading axes) and columns (the last axis) of a shape; a
/// 0-d shape is one row of one column.
pub fn rows_cols(shape: &[usize]) -> (usize, usize) {
    match shape.split_last() {
        None => (1, 1),
        Some((&c, lead)) => (lead.iter().product(), c),
    }
}

/// Parameters `, u64 d0, ...` for the leading axes and their arguments.
pub fn lead_dims(shape: &[usize]) -> (String, Vec<KArg>) {
    let nd = shape.len();
    let mut p = String::new();
    let mut a = Vec::new();
    for (d, &n) in shape.iter().enumerate().take(nd.saturating_sub(1)) {
        let _ = write!(p, ", u64 d{d}");
        a.push(KArg::U64(n as u64));
    }
    (p, a)
}

/// A 2-d launch over rows and columns.
pub fn row_col_launch(rows: usize, cols: usize) -> Launch {
    let gx = cols.div_ceil(256).clamp(1, 1024);
    let gy = rows.clamp(1, (16384 / gx).max(1)).min(65535);
    Launch { grid: (gx as u32, gy as u32, 1), block: (256, 1, 1), shared: 0 }
}

/// Evaluate the expression into a new C-ordered block.
pub fn materialize(e: &Expr) -> Result<GpuChunk, ArrayError> {
    let device = e.device()?;
    let out = GpuChunk::alloc(&device, e.dtype, &e.shape)?;
    evaluate_into(e, &out)?;
    Ok(out)
}

/// Evaluate the expression into `dst`, a view of the same shape and type
/// (a region of a bigger block, for joins).
pub fn evaluate_into(e: &Expr, dst: &GpuChunk) -> Result<(), ArrayError> {
    if dst.shape() != e.shape.as_slice() || dst.dtype() != e.dtype {
        return Err(ArrayError::Shape(format!(
            "cannot write a {} {} result into a {} {} block",
            crate::array::error::fmt_shape(&e.shape),
            e.dtype,
            crate::array::error::fmt_shape(dst.shape()),
            dst.dtype()
        )));
    }
    if dst.is_empty() {
        return Ok(());
    }
    let device = dst.device().clone();
    let p = parts(e);
    let name = p.kernel_name("ew");
    let (dims, dim_args) = lead_dims(&e.shape);
    let (rows, cols) = rows_cols(&e.shape);
    let nd = e.shape.len();
    // The destination is addressed as a leaf is: plainly, or by strides.
    let (out_params, out_setup, out_idx, mut out_args) = if dst.is_c_contiguous() {
        (String::new(), String::new(), "r * cols + c".to_string(), vec![])
    } else {
        let mut params = String::new();
        let mut args = vec![];
        for d in 0..nd {
            let _ = write!(params, ", i64 o_{d}");
            args.push(KArg::I64(dst.strides()[d] as i64));
        }
        let mut setup = String::from("    i64 ob = 0;\n");
        if nd > 1 {
            setup.push_str("    { u64 q = r;\n");
            for d in (1..nd - 1).rev() {
                let _ = writeln!(setup, "      ob += (i64)(q % (u64)d{d}) * o_{d}; q /= (u64)d{d};");
            }
            setup.push_str("      ob += (i64)q * o_0;\n");
            setup.push_str("    }\n");
        }
        let idx = if nd == 0 { "ob".to_string() } else { format!("ob + (i64)c * o_{}", nd - 1) };
        (params, setup, idx, args)
    };
    let mut src = String::from(PRELUDE);
    src.push_str(&p.funcs);
    let _ = write!(
        src,
        r#"
extern "C" __global__ void {name}(unsigned char* __restrict__ out_raw, u64 rows, u64 cols{dims}{out_params}{params}) {{
  {st}* out = ({st}*)out_raw;
  for (u64 r = blockIdx.y; r < rows; r += gridDim.y) {{
{out_setup}{setup}    for (u64 c = (u64)blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += (u64)gridDim.x * blockDim.x) {{
      out[{out_idx}] = ({st})({value});
    }}
  }}
}}
"#,
        st = store_type(e.dtype),
        params = p.params,
        setup = p.row_setup,
        value = p.value,
    );
    let k = device.kernel(&src, &name)?;
    let mut args = vec![KArg::U64(dst.ptr()), KArg::U64(rows as u64), KArg::U64(cols as u64)];
    args.extend(dim_args);
    args.append(&mut out_args);
    args.extend(p.args);
    device.launch(&k, row_col_launch(rows, cols), &args)?;
    // The leaves stay alive until here: their frees queue after the kernel.
    Ok(())
}
