//! Elementwise kernels with NumPy broadcasting and type promotion:
//! arithmetic, comparisons, logic, math functions, `where`, `clip`.

use ndarray::{ArrayD, IxDyn, Zip};
use num_traits::Float;
use serde::{Deserialize, Serialize};

use super::chunk::{Chunk, Elem, Nd};

use super::dtype::{DType, Scalar};
use super::error::ArrayError;
use super::error::fmt_shape;

/// Binary operators and functions of two arrays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    Rem,
    Pow,
    Maximum,
    Minimum,
    Gt,
    Ge,
    Lt,
    Le,
    Eq,
    Ne,
    And,
    Or,
}

impl BinOp {
    /// The task-group name (Dask's: `add`, `truediv`, …).
    pub fn name(self) -> &'static str {
        match self {
            BinOp::Add => "add",
            BinOp::Sub => "sub",
            BinOp::Mul => "mul",
            BinOp::Div => "truediv",
            BinOp::FloorDiv => "floordiv",
            BinOp::Rem => "mod",
            BinOp::Pow => "pow",
            BinOp::Maximum => "maximum",
            BinOp::Minimum => "minimum",
            BinOp::Gt => "gt",
            BinOp::Ge => "ge",
            BinOp::Lt => "lt",
            BinOp::Le => "le",
            BinOp::Eq => "eq",
            BinOp::Ne => "ne",
            BinOp::And => "and",
            BinOp::Or => "or",
        }
    }

    /// The operator as scripts write it, for messages.
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::FloorDiv => "//",
            BinOp::Rem => "%",
            BinOp::Pow => "**",
            BinOp::Maximum => "maximum",
            BinOp::Minimum => "minimum",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::And => "&",
            BinOp::Or => "|",
        }
    }

    fn is_comparison(self) -> bool {
        matches!(self, BinOp::Gt | BinOp::Ge | BinOp::Lt | BinOp::Le | BinOp::Eq | BinOp::Ne)
    }
}

/// Functions of one array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum UnOp {
    Neg,
    Not,
    Abs,
    Sqrt,
    Exp,
    Log,
    Log10,
    Sin,
    Cos,
    Tan,
    Tanh,
    Floor,
    Ceil,
    Round,
    IsNan,
    IsFinite,
    IsInf,
    Log1p,
    Expm1,
    /// -1, 0 or 1 (NaN stays NaN), in the input's type, as `np.sign`.
    Sign,
}

impl UnOp {
    pub fn name(self) -> &'static str {
        match self {
            UnOp::Neg => "neg",
            UnOp::Not => "invert",
            UnOp::Abs => "abs",
            UnOp::Sqrt => "sqrt",
            UnOp::Exp => "exp",
            UnOp::Log => "log",
            UnOp::Log10 => "log10",
            UnOp::Sin => "sin",
            UnOp::Cos => "cos",
            UnOp::Tan => "tan",
            UnOp::Tanh => "tanh",
            UnOp::Floor => "floor",
            UnOp::Ceil => "ceil",
            UnOp::Round => "round",
            UnOp::IsNan => "isnan",
            UnOp::IsFinite => "isfinite",
            UnOp::IsInf => "isinf",
            UnOp::Log1p => "log1p",
            UnOp::Expm1 => "expm1",
            UnOp::Sign => "sign",
        }
    }

    pub const ALL: [UnOp; 20] = [
        UnOp::Neg,
        UnOp::Not,
        UnOp::Abs,
        UnOp::Sqrt,
        UnOp::Exp,
        UnOp::Log,
        UnOp::Log10,
        UnOp::Sin,
        UnOp::Cos,
        UnOp::Tan,
        UnOp::Tanh,
        UnOp::Floor,
        UnOp::Ceil,
        UnOp::Round,
        UnOp::IsNan,
        UnOp::IsFinite,
        UnOp::IsInf,
        UnOp::Log1p,
        UnOp::Expm1,
        UnOp::Sign,
    ];
}

/// One side of an elementwise operation.
#[derive(Clone, Copy, Debug)]
pub enum Operand<'a> {
    Chunk(&'a Chunk),
    Scalar(Scalar),
}

impl Operand<'_> {
    fn dtype(&self) -> Option<DType> {
        match self {
            Operand::Chunk(c) => Some(c.dtype()),
            Operand::Scalar(_) => None,
        }
    }

    fn shape(&self) -> &[usize] {
        match self {
            Operand::Chunk(c) => c.shape(),
            Operand::Scalar(_) => &[],
        }
    }

    fn typed<T: Elem>(&self) -> Nd<T> {
        match self {
            Operand::Chunk(c) => c.cast::<T>(),
            Operand::Scalar(s) => Nd::from_elem(IxDyn(&[]), T::from_scalar(*s)),
        }
    }

    fn describe(&self) -> String {
        match self {
            Operand::Chunk(c) => format!("{} array", c.dtype()),
            Operand::Scalar(s) => format!("scalar {s}"),
        }
    }
}

/// The shape two shapes broadcast to, or NumPy's error naming both.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Result<Vec<usize>, ArrayError> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let x = if i + a.len() >= n { a[i + a.len() - n] } else { 1 };
        let y = if i + b.len() >= n { b[i + b.len() - n] } else { 1 };
        out[i] = match (x, y) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => {
                return Err(ArrayError::Broadcast { a: a.to_vec(), b: b.to_vec() });
            }
        };
    }
    Ok(out)
}

/// The result type of `a op b`, or an error for operations NumPy refuses.
pub fn result_dtype(
    op: BinOp,
    a: Option<DType>,
    b: Option<DType>,
    scalars: [Option<Scalar>; 2],
) -> Result<DType, ArrayError> {
    let work = work_dtype(op, a, b, scalars)?;
    Ok(if op.is_comparison() { DType::Bool } else { work })
}

/// The type the operation computes in.
fn work_dtype(
    op: BinOp,
    a: Option<DType>,
    b: Option<DType>,
    scalars: [Option<Scalar>; 2],
) -> Result<DType, ArrayError> {
    let promoted = match (a, b, scalars) {
        (Some(x), Some(y), _) => DType::promote(x, y),
        (Some(x), None, [_, Some(s)]) | (None, Some(x), [Some(s), _]) => x.promote_scalar(s),
        _ => return Err(ArrayError::Value(format!("{} needs an array on one side", op.symbol()))),
    };
    Ok(match (op, promoted) {
        (BinOp::Div, t) => t.to_float(),
        (BinOp::Sub, DType::Bool) => {
            return Err(ArrayError::DType(
                "boolean subtract, the `-` operator, is not supported; use `!=` (xor) instead".into(),
            ));
        }
        (BinOp::FloorDiv | BinOp::Rem | BinOp::Pow, DType::Bool) => DType::I64,
        (BinOp::And | BinOp::Or, t) if t.is_float() => {
            return Err(ArrayError::DType(format!(
                "{} is defined for bool and integer arrays, not {t}",
                op.symbol()
            )));
        }
        (_, t) => t,
    })
}

/// `a op b` with broadcasting.
pub fn binary(op: BinOp, a: Operand<'_>, b: Operand<'_>) -> Result<Chunk, ArrayError> {
    let scal = |o: &Operand<'_>| match o {
        Operand::Scalar(s) => Some(*s),
        Operand::Chunk(_) => None,
    };
    let work = work_dtype(op, a.dtype(), b.dtype(), [scal(&a), scal(&b)]).map_err(|e| match e {
        ArrayError::Value(_) => ArrayError::DType(format!(
            "{} is not defined for {} and {}",
            op.symbol(),
            a.describe(),
            b.describe()
        )),
        e => e,
    })?;
    broadcast_shapes(a.shape(), b.shape())?;
    match work {
        DType::Bool => bool_binary(op, &a.typed::<bool>(), &b.typed::<bool>()),
        DType::I64 => num_binary::<i64>(op, &a.typed(), &b.typed()),
        DType::F32 => num_binary::<f32>(op, &a.typed(), &b.typed()),
        DType::F64 => num_binary::<f64>(op, &a.typed(), &b.typed()),
    }
}

/// Map two arrays of one shape (after broadcasting) into a new array.
/// Contiguous operands and scalars take plain loops over slices (which the
/// compiler vectorizes); 2-d operands of opposite memory orders (`x + x.T`)
/// are walked in tiles, so both are read from cache.
pub fn zip2<A: Copy, B: Copy, R: Copy>(
    a: &Nd<A>,
    b: &Nd<B>,
    f: impl Fn(A, B) -> R,
) -> Result<ArrayD<R>, ArrayError> {
    let vec = |shape: &[usize], v: Vec<R>| {
        ArrayD::from_shape_vec(IxDyn(shape), v).map_err(|e| ArrayError::Shape(e.to_string()))
    };
    if let (Some(x), Some(y)) = (a.as_slice(), b.as_slice()) {
        if a.shape() == b.shape() {
            return vec(a.shape(), x.iter().zip(y).map(|(&p, &q)| f(p, q)).collect());
        }
        if y.len() == 1 && b.ndim() <= a.ndim() {
            let q = y[0];
            return vec(a.shape(), x.iter().map(|&p| f(p, q)).collect());
        }
        if x.len() == 1 && a.ndim() <= b.ndim() {
            let p = x[0];
            return vec(b.shape(), y.iter().map(|&q| f(p, q)).collect());
        }
        // One operand repeats along the other's leading axes (a row of
        // column means against a block of rows): row by row over slices.
        if let Some(l) = trailing(a.shape(), b.shape()) {
            let mut out = Vec::with_capacity(x.len());
            for row in x.chunks_exact(l) {
                out.extend(row.iter().zip(y).map(|(&p, &q)| f(p, q)));
            }
            return vec(a.shape(), out);
        }
        if let Some(l) = trailing(b.shape(), a.shape()) {
            let mut out = Vec::with_capacity(y.len());
            for row in y.chunks_exact(l) {
                out.extend(x.iter().zip(row).map(|(&p, &q)| f(p, q)));
            }
            return vec(b.shape(), out);
        }
    }
    if a.shape() == b.shape() {
        if a.ndim() == 2 && a.is_standard_layout() && b.t().is_standard_layout() {
            return Ok(tiled(a, b, f));
        }
        return Ok(Zip::from(a).and(b).map_collect(|&x, &y| f(x, y)));
    }
    let shape = broadcast_shapes(a.shape(), b.shape())?;
    let (Some(av), Some(bv)) = (a.broadcast(IxDyn(&shape)), b.broadcast(IxDyn(&shape))) else {
        return Err(ArrayError::Shape(format!(
            "shapes {} and {} cannot be broadcast together",
            fmt_shape(a.shape()),
            fmt_shape(b.shape())
        )));
    };
    Ok(Zip::from(&av).and(&bv).map_collect(|&x, &y| f(x, y)))
}

/// The length of `small`'s values when `small` (leading 1s aside) is the
/// trailing axes of `big`, so it repeats once per `big`'s leading index.
fn trailing(big: &[usize], small: &[usize]) -> Option<usize> {
    if small.len() > big.len() {
        return None;
    }
    let first = small.iter().position(|&d| d != 1).unwrap_or(small.len());
    let small = &small[first..];
    let l: usize = small.iter().product();
    (!small.is_empty() && small.len() < big.len() && big.ends_with(small) && l > 0).then_some(l)
}

/// `f(a, b)` for a C-ordered `a` and an F-ordered `b` of one 2-d shape,
/// in 64×64 tiles, so the column-major reads of `b` stay in cache.
fn tiled<A: Copy, B: Copy, R: Copy>(a: &Nd<A>, b: &Nd<B>, f: impl Fn(A, B) -> R) -> ArrayD<R> {
    const T: usize = 64;
    let (rows, cols) = (a.shape()[0], a.shape()[1]);
    let (Some(x), Some(y)) = (a.as_slice_memory_order(), b.as_slice_memory_order()) else {
        return Zip::from(a).and(b).map_collect(|&p, &q| f(p, q));
    };
    if rows * cols == 0 {
        return Zip::from(a).and(b).map_collect(|&p, &q| f(p, q));
    }
    // Filled with the first result, then every element is overwritten.
    let mut out: Vec<R> = vec![f(x[0], y[0]); rows * cols];
    for i0 in (0..rows).step_by(T) {
        for j0 in (0..cols).step_by(T) {
            for i in i0..(i0 + T).min(rows) {
                for j in j0..(j0 + T).min(cols) {
                    // a[i, j] is at i*cols + j; b[i, j] (column-major) at j*rows + i.
                    out[i * cols + j] = f(x[i * cols + j], y[j * rows + i]);
                }
            }
        }
    }
    ArrayD::from_shape_vec(IxDyn(&[rows, cols]), out)
        .unwrap_or_else(|_| Zip::from(a).and(b).map_collect(|&p, &q| f(p, q)))
}

fn bool_binary(op: BinOp, a: &Nd<bool>, b: &Nd<bool>) -> Result<Chunk, ArrayError> {
    let out = match op {
        BinOp::Add | BinOp::Or | BinOp::Maximum => zip2(a, b, |x, y| x | y)?,
        BinOp::Mul | BinOp::And | BinOp::Minimum => zip2(a, b, |x, y| x & y)?,
        BinOp::Gt => zip2(a, b, |x, y| x & !y)?,
        BinOp::Ge => zip2(a, b, |x, y| x | !y)?,
        BinOp::Lt => zip2(a, b, |x, y| !x & y)?,
        BinOp::Le => zip2(a, b, |x, y| !x | y)?,
        BinOp::Eq => zip2(a, b, |x, y| x == y)?,
        BinOp::Ne => zip2(a, b, |x, y| x != y)?,
        _ => return Err(ArrayError::DType(format!("{} is not defined for bool arrays", op.symbol()))),
    };
    Ok(Chunk::from_array(out))
}

/// Arithmetic on one numeric element type, with NumPy's semantics:
/// integer division and modulo by zero give 0, `%` takes the divisor's
/// sign, `maximum`/`minimum` propagate NaN, integers wrap on overflow.
pub trait Num: Elem + PartialOrd {
    fn add(a: Self, b: Self) -> Self;
    fn sub(a: Self, b: Self) -> Self;
    fn mul(a: Self, b: Self) -> Self;
    fn div(a: Self, b: Self) -> Self;
    fn floordiv(a: Self, b: Self) -> Self;
    fn rem(a: Self, b: Self) -> Self;
    fn pow(a: Self, b: Self) -> Self;
    fn is_nan(self) -> bool;
    fn neg(self) -> Self;
    fn abs(self) -> Self;
    fn zero() -> Self;
    fn one() -> Self;
    /// The identities of `max` and `min`.
    fn lowest() -> Self;
    fn highest() -> Self;
}

impl Num for i64 {
    fn add(a: i64, b: i64) -> i64 {
        a.wrapping_add(b)
    }
    fn sub(a: i64, b: i64) -> i64 {
        a.wrapping_sub(b)
    }
    fn mul(a: i64, b: i64) -> i64 {
        a.wrapping_mul(b)
    }
    fn div(a: i64, b: i64) -> i64 {
        Self::floordiv(a, b)
    }
    fn floordiv(a: i64, b: i64) -> i64 {
        if b == 0 {
            return 0;
        }
        let q = a.wrapping_div(b);
        if (a % b != 0) && ((a < 0) != (b < 0)) { q - 1 } else { q }
    }
    fn rem(a: i64, b: i64) -> i64 {
        if b == 0 {
            return 0;
        }
        let r = a.wrapping_rem(b);
        if r != 0 && (r < 0) != (b < 0) { r + b } else { r }
    }
    fn pow(a: i64, b: i64) -> i64 {
        // Negative exponents are refused before the kernel runs.
        let (mut base, mut e, mut acc) = (a, b.max(0) as u64, 1i64);
        while e > 0 {
            if e & 1 == 1 {
                acc = acc.wrapping_mul(base);
            }
            base = base.wrapping_mul(base);
            e >>= 1;
        }
        acc
    }
    fn is_nan(self) -> bool {
        false
    }
    fn neg(self) -> i64 {
        self.wrapping_neg()
    }
    fn abs(self) -> i64 {
        self.wrapping_abs()
    }
    fn zero() -> i64 {
        0
    }
    fn one() -> i64 {
        1
    }
    fn lowest() -> i64 {
        i64::MIN
    }
    fn highest() -> i64 {
        i64::MAX
    }
}

macro_rules! float_num {
    ($t:ty) => {
        impl Num for $t {
            fn add(a: $t, b: $t) -> $t {
                a + b
            }
            fn sub(a: $t, b: $t) -> $t {
                a - b
            }
            fn mul(a: $t, b: $t) -> $t {
                a * b
            }
            fn div(a: $t, b: $t) -> $t {
                a / b
            }
            fn floordiv(a: $t, b: $t) -> $t {
                (a / b).floor()
            }
            fn rem(a: $t, b: $t) -> $t {
                let r = a % b;
                if r != 0.0 && (r < 0.0) != (b < 0.0) { r + b } else { r }
            }
            fn pow(a: $t, b: $t) -> $t {
                a.powf(b)
            }
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            fn neg(self) -> $t {
                -self
            }
            fn abs(self) -> $t {
                <$t>::abs(self)
            }
            fn zero() -> $t {
                0.0
            }
            fn one() -> $t {
                1.0
            }
            fn lowest() -> $t {
                <$t>::NEG_INFINITY
            }
            fn highest() -> $t {
                <$t>::INFINITY
            }
        }
    };
}
float_num!(f32);
float_num!(f64);

/// NumPy's `maximum`: NaN wins.
pub fn max_nan<T: Num>(a: T, b: T) -> T {
    if a.is_nan() || a >= b { a } else { b }
}

/// NumPy's `minimum`: NaN wins.
pub fn min_nan<T: Num>(a: T, b: T) -> T {
    if a.is_nan() || a <= b { a } else { b }
}

fn num_binary<T: Num>(op: BinOp, a: &Nd<T>, b: &Nd<T>) -> Result<Chunk, ArrayError> {
    if op == BinOp::Pow && T::DTYPE == DType::I64 && b.iter().any(|&e| e < T::zero()) {
        return Err(ArrayError::Value("integers to negative integer powers are not allowed".into()));
    }
    // Each arm calls `zip2` with its own function, so the loop inlines it.
    macro_rules! go {
        ($f:expr) => {
            Ok(Chunk::from_array(zip2(a, b, $f)?))
        };
    }
    match op {
        BinOp::Add => go!(T::add),
        BinOp::Sub => go!(T::sub),
        BinOp::Mul => go!(T::mul),
        BinOp::Div => go!(T::div),
        BinOp::FloorDiv => go!(T::floordiv),
        BinOp::Rem => go!(T::rem),
        BinOp::Pow => go!(T::pow),
        BinOp::Maximum => go!(max_nan::<T>),
        BinOp::Minimum => go!(min_nan::<T>),
        BinOp::Gt => go!(|x: T, y: T| x > y),
        BinOp::Ge => go!(|x: T, y: T| x >= y),
        BinOp::Lt => go!(|x: T, y: T| x < y),
        BinOp::Le => go!(|x: T, y: T| x <= y),
        BinOp::Eq => go!(|x: T, y: T| x == y),
        BinOp::Ne => go!(|x: T, y: T| x != y),
        BinOp::And | BinOp::Or => {
            let (Some(x), Some(y)) = (as_i64(a), as_i64(b)) else {
                return Err(ArrayError::DType(format!(
                    "{} is not defined for {} arrays",
                    op.symbol(),
                    T::DTYPE
                )));
            };
            let f: fn(i64, i64) -> i64 = if op == BinOp::And { |p, q| p & q } else { |p, q| p | q };
            Ok(Chunk::from_array(zip2(x, y, f)?))
        }
    }
}

fn as_i64<T: Elem>(a: &Nd<T>) -> Option<&Nd<i64>> {
    (a as &dyn std::any::Any).downcast_ref::<Nd<i64>>()
}

/// The result type of a unary function.
pub fn unary_dtype(op: UnOp, t: DType) -> Result<DType, ArrayError> {
    Ok(match op {
        UnOp::Neg if t == DType::Bool => {
            return Err(ArrayError::DType(
                "boolean negative, the unary `-` operator, is not supported; use `!` instead".into(),
            ));
        }
        UnOp::Not if t.is_float() => {
            return Err(ArrayError::DType(format!("! is defined for bool and integer arrays, not {t}")));
        }
        UnOp::Sign if t == DType::Bool => {
            return Err(ArrayError::DType("sign is defined for numbers, not bool".into()));
        }
        UnOp::Neg | UnOp::Not | UnOp::Round | UnOp::Sign => t,
        UnOp::Abs => t,
        UnOp::IsNan | UnOp::IsFinite | UnOp::IsInf => DType::Bool,
        _ => t.to_float(),
    })
}

/// `f(a)` elementwise.
pub fn unary(op: UnOp, a: &Chunk) -> Result<Chunk, ArrayError> {
    let out = unary_dtype(op, a.dtype())?;
    Ok(match (op, a) {
        (UnOp::IsNan, Chunk::F32(x)) => Chunk::from_array(x.map(|v| v.is_nan())),
        (UnOp::IsNan, Chunk::F64(x)) => Chunk::from_array(x.map(|v| v.is_nan())),
        (UnOp::IsFinite, Chunk::F32(x)) => Chunk::from_array(x.map(|v| v.is_finite())),
        (UnOp::IsFinite, Chunk::F64(x)) => Chunk::from_array(x.map(|v| v.is_finite())),
        (UnOp::IsInf, Chunk::F32(x)) => Chunk::from_array(x.map(|v| v.is_infinite())),
        (UnOp::IsInf, Chunk::F64(x)) => Chunk::from_array(x.map(|v| v.is_infinite())),
        (UnOp::IsNan | UnOp::IsInf, _) => Chunk::full(a.shape(), Scalar::Bool(false), DType::Bool),
        (UnOp::Sign, Chunk::I64(x)) => Chunk::from_array(x.map(|v| v.signum())),
        (UnOp::IsFinite, _) => Chunk::full(a.shape(), Scalar::Bool(true), DType::Bool),
        (UnOp::Not, Chunk::Bool(x)) => Chunk::from_array(x.map(|v| !v)),
        (UnOp::Not, Chunk::I64(x)) => Chunk::from_array(x.map(|v| !v)),
        // NumPy rounds halves to even.
        (UnOp::Round, Chunk::F32(x)) => Chunk::from_array(x.map(|v| v.round_ties_even())),
        (UnOp::Round, Chunk::F64(x)) => Chunk::from_array(x.map(|v| v.round_ties_even())),
        (UnOp::Round | UnOp::Abs, Chunk::Bool(_)) => a.clone(),
        (UnOp::Round, Chunk::I64(_)) => a.clone(),
        (UnOp::Neg, Chunk::I64(x)) => Chunk::from_array(x.map(|v| v.wrapping_neg())),
        (UnOp::Abs, Chunk::I64(x)) => Chunk::from_array(x.map(|v| v.wrapping_abs())),
        _ => match out {
            DType::F32 => Chunk::from_array(float_unary(op, &a.cast::<f32>())),
            _ => Chunk::from_array(float_unary(op, &a.cast::<f64>())),
        },
    })
}

fn float_unary<T: Float + Elem>(op: UnOp, a: &Nd<T>) -> ArrayD<T> {
    let f: fn(T) -> T = match op {
        UnOp::Neg => |v| -v,
        UnOp::Abs => T::abs,
        UnOp::Sqrt => T::sqrt,
        UnOp::Exp => T::exp,
        UnOp::Log => T::ln,
        UnOp::Log10 => T::log10,
        UnOp::Sin => T::sin,
        UnOp::Cos => T::cos,
        UnOp::Tan => T::tan,
        UnOp::Tanh => T::tanh,
        UnOp::Floor => T::floor,
        UnOp::Ceil => T::ceil,
        UnOp::Log1p => T::ln_1p,
        UnOp::Expm1 => T::exp_m1,
        UnOp::Sign => |v| {
            if v > T::zero() {
                T::one()
            } else if v < T::zero() {
                -T::one()
            } else if v == T::zero() {
                T::zero()
            } else {
                v
            }
        },
        UnOp::Round | UnOp::Not | UnOp::IsNan | UnOp::IsFinite | UnOp::IsInf => |v| v,
    };
    a.mapv(f)
}

/// `where(cond, a, b)`: elements of `a` where `cond` is true, else of `b`.
pub fn where_(cond: Operand<'_>, a: Operand<'_>, b: Operand<'_>) -> Result<Chunk, ArrayError> {
    let scal = |o: &Operand<'_>| match o {
        Operand::Scalar(s) => Some(*s),
        Operand::Chunk(_) => None,
    };
    let t = match (a.dtype(), b.dtype()) {
        (Some(x), Some(y)) => DType::promote(x, y),
        (Some(x), None) => x.promote_scalar(scal(&b).unwrap_or(Scalar::Bool(false))),
        (None, Some(y)) => y.promote_scalar(scal(&a).unwrap_or(Scalar::Bool(false))),
        (None, None) => match (scal(&a), scal(&b)) {
            (Some(Scalar::Float(_)), _) | (_, Some(Scalar::Float(_))) => DType::F64,
            (Some(Scalar::Int(_)), _) | (_, Some(Scalar::Int(_))) => DType::I64,
            _ => DType::Bool,
        },
    };
    let shape = broadcast_shapes(&broadcast_shapes(cond.shape(), a.shape())?, b.shape())?;
    let c = cond.typed::<bool>();
    fn pick<T: Elem>(shape: &[usize], c: &Nd<bool>, a: Nd<T>, b: Nd<T>) -> Result<Chunk, ArrayError> {
        let err = || ArrayError::Shape(format!("cannot broadcast to {}", fmt_shape(shape)));
        let cv = c.broadcast(IxDyn(shape)).ok_or_else(err)?;
        let av = a.broadcast(IxDyn(shape)).ok_or_else(err)?;
        let bv = b.broadcast(IxDyn(shape)).ok_or_else(err)?;
        Ok(Chunk::from_array(
            Zip::from(&cv).and(&av).and(&bv).map_collect(|&k, &x, &y| if k { x } else { y }),
        ))
    }
    match t {
        DType::Bool => pick(&shape, &c, a.typed::<bool>(), b.typed()),
        DType::I64 => pick(&shape, &c, a.typed::<i64>(), b.typed()),
        DType::F32 => pick(&shape, &c, a.typed::<f32>(), b.typed()),
        DType::F64 => pick(&shape, &c, a.typed::<f64>(), b.typed()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f64s(shape: &[usize], v: &[f64]) -> Chunk {
        Chunk::from_vec(shape, v.to_vec()).expect("chunk")
    }

    fn i64s(shape: &[usize], v: &[i64]) -> Chunk {
        Chunk::from_vec(shape, v.to_vec()).expect("chunk")
    }

    #[test]
    fn broadcasting_follows_numpy() {
        assert_eq!(broadcast_shapes(&[3, 1], &[4]).ok(), Some(vec![3, 4]));
        assert_eq!(broadcast_shapes(&[], &[2, 2]).ok(), Some(vec![2, 2]));
        let e = broadcast_shapes(&[3, 4], &[5]).expect_err("mismatch");
        assert_eq!(e, ArrayError::Broadcast { a: vec![3, 4], b: vec![5] });
        assert_eq!(e.to_string(), "shapes (3, 4) and (5,) cannot be broadcast together");
        let col = f64s(&[2, 1], &[1.0, 2.0]);
        let row = f64s(&[3], &[10.0, 20.0, 30.0]);
        let s = binary(BinOp::Add, Operand::Chunk(&col), Operand::Chunk(&row)).expect("add");
        assert_eq!(s.to_json(), "[[11.0,21.0,31.0],[12.0,22.0,32.0]]");
    }

    #[test]
    fn a_row_against_a_block_of_rows_broadcasts_either_side() {
        let block = f64s(&[2, 2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0]);
        let row = f64s(&[1, 3], &[10.0, 20.0, 30.0]);
        let s = binary(BinOp::Sub, Operand::Chunk(&block), Operand::Chunk(&row)).expect("sub");
        assert_eq!(
            s.to_json(),
            "[[[-9.0,-18.0,-27.0],[-6.0,-15.0,-24.0]],[[-3.0,-12.0,-21.0],[0.0,-9.0,-18.0]]]"
        );
        let s = binary(BinOp::Sub, Operand::Chunk(&row), Operand::Chunk(&block)).expect("sub");
        assert_eq!(s.to_json(), "[[[9.0,18.0,27.0],[6.0,15.0,24.0]],[[3.0,12.0,21.0],[0.0,9.0,18.0]]]");
        let plane = f64s(&[2, 3], &[0.0, 0.0, 0.0, 100.0, 100.0, 100.0]);
        let s = binary(BinOp::Add, Operand::Chunk(&block), Operand::Chunk(&plane)).expect("add");
        assert_eq!(s.shape(), &[2, 2, 3]);
        assert_eq!(s.to_json(), "[[[1.0,2.0,3.0],[104.0,105.0,106.0]],[[7.0,8.0,9.0],[110.0,111.0,112.0]]]");
        assert_eq!(trailing(&[4, 3], &[3]), Some(3));
        assert_eq!(trailing(&[4, 3], &[1, 1, 3]), None, "more axes than the block: not a row of it");
        assert_eq!(trailing(&[4, 3], &[4, 1]), None);
        assert_eq!(trailing(&[4, 0], &[0]), None);
    }

    #[test]
    fn integer_semantics_match_numpy() {
        let a = i64s(&[4], &[7, -7, 7, 5]);
        let b = i64s(&[4], &[2, 2, -2, 0]);
        let r = |op| binary(op, Operand::Chunk(&a), Operand::Chunk(&b)).expect("op").to_json();
        assert_eq!(r(BinOp::FloorDiv), "[3,-4,-4,0]");
        assert_eq!(r(BinOp::Rem), "[1,1,-1,0]");
        assert_eq!(r(BinOp::Div), "[3.5,-3.5,-3.5,null]");
        let e = i64s(&[4], &[2, 3, 0, 1]);
        assert_eq!(
            binary(BinOp::Pow, Operand::Chunk(&a), Operand::Chunk(&e)).expect("pow").to_json(),
            "[49,-343,1,5]"
        );
        let neg = binary(BinOp::Pow, Operand::Chunk(&a), Operand::Scalar(Scalar::Int(-1))).expect_err("neg");
        assert!(neg.to_string().contains("negative integer powers"), "{neg}");
        let half = binary(BinOp::Mul, Operand::Chunk(&a), Operand::Scalar(Scalar::Float(0.5))).expect("mul");
        assert_eq!(half.dtype(), DType::F64);
    }

    #[test]
    fn weak_scalars_keep_float32() {
        let a = Chunk::from_vec(&[2], vec![1.0f32, 2.0]).expect("chunk");
        let r = binary(BinOp::Mul, Operand::Scalar(Scalar::Float(2.0)), Operand::Chunk(&a)).expect("mul");
        assert_eq!(r.dtype(), DType::F32);
        let c = binary(BinOp::Gt, Operand::Chunk(&a), Operand::Scalar(Scalar::Int(1))).expect("gt");
        assert_eq!(c.to_json(), "[false,true]");
    }

    #[test]
    fn refused_operations_name_the_types() {
        let b = Chunk::from_vec(&[2], vec![true, false]).expect("chunk");
        let e = binary(BinOp::Sub, Operand::Chunk(&b), Operand::Chunk(&b)).expect_err("bool sub");
        assert!(e.to_string().contains("boolean subtract"), "{e}");
        let f = f64s(&[1], &[1.0]);
        let e = binary(BinOp::And, Operand::Chunk(&f), Operand::Chunk(&f)).expect_err("float and");
        assert!(e.to_string().contains("not f64"), "{e}");
        assert!(unary(UnOp::Neg, &b).is_err());
    }

    #[test]
    fn unary_functions_and_where() {
        let x = f64s(&[5], &[0.5, 1.5, 2.5, -0.5, f64::NAN]);
        assert_eq!(unary(UnOp::Round, &x).expect("round").to_json(), "[0.0,2.0,2.0,-0.0,null]");
        assert_eq!(unary(UnOp::IsNan, &x).expect("isnan").to_json(), "[false,false,false,false,true]");
        let z = Chunk::from_vec(&[3], vec![-0.0, -2.0, f64::NAN]).expect("z");
        assert_eq!(unary(UnOp::Sign, &z).expect("sign").to_json(), "[0.0,-1.0,null]", "np.sign(-0.0) is 0.0");
        let i = i64s(&[2], &[4, 9]);
        let s = unary(UnOp::Sqrt, &i).expect("sqrt");
        assert_eq!((s.dtype(), s.to_json()), (DType::F64, "[2.0,3.0]".to_string()));
        let c = Chunk::from_vec(&[2], vec![true, false]).expect("c");
        let w =
            where_(Operand::Chunk(&c), Operand::Chunk(&i), Operand::Scalar(Scalar::Float(0.5))).expect("w");
        assert_eq!(w.to_json(), "[4.0,0.5]");
        let mx =
            binary(BinOp::Maximum, Operand::Chunk(&x), Operand::Scalar(Scalar::Float(1.0))).expect("max");
        assert_eq!(mx.to_json(), "[1.0,1.5,2.5,1.0,null]");
    }
}
