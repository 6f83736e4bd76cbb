//! Which array tasks run on a GPU, and how. A task runs here when one of
//! its arguments is a GPU block or its op makes one (`OnGpu`, `ToGpu`).
//! Elementwise steps of a fused chain stay one lazy expression until
//! something else needs the block, so `(x + x.T) * 2` is one kernel, and a
//! reduction right after it folds the expression as it computes it. A
//! task's blocks from different GPUs of the host are first brought to one
//! (`together`). Ops without a device kernel (`unique`, integer powers,
//! the creation ops made small on the host: `arange`, `linspace`, `eye`,
//! file readers) run on host copies with the CPU path's exact results (the
//! blocks go down and back up); `native` lists the ones that do not.

use std::sync::Arc;

use super::chunk::GpuChunk;
use super::expr::{Expr, Term, materialize};
use crate::array::chunk::Chunk;
use crate::array::dtype::Scalar;
use crate::array::error::ArrayError;
use crate::array::op::ArrayOp;
use crate::error::TaskError;
use crate::ops::{Arg, Func, Op, Step, StepInput};
use crate::value::Value;

fn has_gpu(v: &Value) -> bool {
    match v {
        Value::Gpu(_) => true,
        Value::List(items) => items.iter().any(has_gpu),
        _ => false,
    }
}

fn has_host_array(v: &Value) -> bool {
    match v {
        Value::Array(_) => true,
        Value::List(items) => items.iter().any(has_host_array),
        _ => false,
    }
}

/// Whether this task is the GPU's.
pub fn wants_gpu(op: &ArrayOp, args: &[Value]) -> bool {
    matches!(op, ArrayOp::OnGpu(_) | ArrayOp::ToGpu) || args.iter().any(has_gpu)
}

fn gpu_arg(v: &Value) -> Result<&GpuChunk, ArrayError> {
    match v {
        Value::Gpu(g) => Ok(g),
        other => Err(ArrayError::Value(format!("expected a GPU block, got {}", other.type_name()))),
    }
}

fn term(v: &Value) -> Result<Term, ArrayError> {
    Ok(match v {
        Value::Gpu(g) => Term::Expr(Expr::leaf(g.as_ref().clone())),
        Value::Bool(b) => Term::Scalar(Scalar::Bool(*b)),
        Value::Int(i) => Term::Scalar(Scalar::Int(*i)),
        Value::Float(f) => Term::Scalar(Scalar::Float(*f)),
        Value::Array(_) => return Err(mixed()),
        other => {
            return Err(ArrayError::Value(format!(
                "expected an array or a number, got {}",
                other.type_name()
            )));
        }
    })
}

/// CuPy refuses to mix device and host arrays; so does brisk.
fn mixed() -> ArrayError {
    ArrayError::Value(
        "cannot mix a GPU array and a CPU array in one operation: move one with x.to_gpu() or x.to_cpu()"
            .into(),
    )
}

pub fn gpu_value(g: GpuChunk) -> Value {
    Value::Gpu(Arc::new(g))
}

fn partials(v: &Value) -> Result<Vec<GpuChunk>, ArrayError> {
    match v {
        Value::List(items) => items.iter().map(|x| gpu_arg(x).cloned()).collect(),
        other => Err(ArrayError::Value(format!("expected a reduction partial, got {}", other.type_name()))),
    }
}

fn list(p: Vec<GpuChunk>) -> Value {
    Value::list(p.into_iter().map(gpu_value).collect())
}

/// An elementwise op as an expression of its arguments, or `None` when the
/// op is not elementwise.
fn elementwise(op: &ArrayOp, args: &[Value]) -> Option<Result<Expr, ArrayError>> {
    let go = || -> Result<Expr, ArrayError> {
        let need = |n: usize| {
            if args.len() == n {
                Ok(())
            } else {
                Err(ArrayError::Value(format!("{} takes {n} argument(s), got {}", op.name(), args.len())))
            }
        };
        match op {
            ArrayOp::Binary(b) => {
                need(2)?;
                // Integer powers refuse negative exponents: the host's.
                if *b == crate::array::elementwise::BinOp::Pow && int_pow(&term(&args[0])?, &term(&args[1])?)
                {
                    return Err(ArrayError::Value("host".into()));
                }
                Expr::binary(*b, term(&args[0])?, term(&args[1])?)
            }
            ArrayOp::Unary(u) => {
                need(1)?;
                Expr::unary(*u, Expr::leaf(gpu_arg(&args[0])?.clone()))
            }
            ArrayOp::Where => {
                need(3)?;
                Expr::where_(term(&args[0])?, term(&args[1])?, term(&args[2])?)
            }
            ArrayOp::AsType(t) => {
                need(1)?;
                Ok(Expr::cast(Expr::leaf(gpu_arg(&args[0])?.clone()), *t))
            }
            ArrayOp::Kernel(f) => Expr::user(f.clone(), args.iter().map(term).collect::<Result<_, _>>()?),
            _ => Err(ArrayError::Value("not elementwise".into())),
        }
    };
    match op {
        ArrayOp::Binary(_) | ArrayOp::Unary(_) | ArrayOp::Where | ArrayOp::AsType(_) | ArrayOp::Kernel(_) => {
            match go() {
                Err(ArrayError::Value(m)) if m == "host" => None,
                r => Some(r),
            }
        }
        _ => None,
    }
}

/// Whether `x ** y` computes in integers (then the host runs it, refusing
/// negative exponents as NumPy does).
fn int_pow(x: &Term, y: &Term) -> bool {
    Expr::binary(crate::array::elementwise::BinOp::Pow, x.clone(), y.clone())
        .is_ok_and(|e| e.dtype == crate::array::dtype::DType::I64)
}

/// Run one array task that involves a GPU.
/// The CPU kernels (`array::exec::execute_host`), passed in: the host path
/// calls this module, so this module takes it as an argument instead of
/// importing it back.
pub type Host<'a> = &'a dyn Fn(&ArrayOp, &[Value]) -> Result<Value, ArrayError>;

pub fn execute(op: &ArrayOp, args: &[Value], host: Host<'_>) -> Result<Value, ArrayError> {
    let moved = together(args)?;
    let args = moved.as_deref().unwrap_or(args);
    if let Some(e) = elementwise(op, args) {
        return Ok(gpu_value(materialize(&e?)?));
    }
    if let Some(v) = native(op, args, host)? {
        return Ok(v);
    }
    on_host(op, args, host)
}

/// A task's GPU blocks on one device, the one that holds most of their
/// bytes (blocks made on different GPUs of the host meet here; each move
/// is one copy between devices); `None` when they already share one.
fn together(args: &[Value]) -> Result<Option<Vec<Value>>, ArrayError> {
    fn tally(v: &Value, bytes: &mut Vec<(usize, u64)>) {
        match v {
            Value::Gpu(g) => {
                let d = g.device().ordinal();
                match bytes.iter_mut().find(|(o, _)| *o == d) {
                    Some((_, b)) => *b += g.nbytes(),
                    None => bytes.push((d, g.nbytes())),
                }
            }
            Value::List(items) => items.iter().for_each(|x| tally(x, bytes)),
            _ => {}
        }
    }
    fn moved(v: &Value, to: &Arc<brisk_gpu::Device>) -> Result<Value, ArrayError> {
        Ok(match v {
            Value::Gpu(g) if g.device().ordinal() != to.ordinal() => gpu_value(g.to_device(to)?),
            Value::List(items) if items.iter().any(has_gpu) => {
                Value::list(items.iter().map(|x| moved(x, to)).collect::<Result<_, _>>()?)
            }
            other => other.clone(),
        })
    }
    let mut bytes = Vec::new();
    args.iter().for_each(|v| tally(v, &mut bytes));
    if bytes.len() < 2 {
        return Ok(None);
    }
    let most = bytes.iter().max_by_key(|(_, b)| *b).map_or(0, |(o, _)| *o);
    let to = brisk_gpu::runtime()?.device(most)?.clone();
    Ok(Some(args.iter().map(|v| moved(v, &to)).collect::<Result<_, _>>()?))
}

/// The ops with device kernels; `None` sends the task to the host.
fn native(op: &ArrayOp, args: &[Value], host: Host<'_>) -> Result<Option<Value>, ArrayError> {
    let one = || -> Result<&GpuChunk, ArrayError> {
        match args {
            [v] => gpu_arg(v),
            _ => Err(ArrayError::Value(format!("{} takes 1 argument, got {}", op.name(), args.len()))),
        }
    };
    Ok(Some(match op {
        ArrayOp::ToGpu => match args {
            [Value::Array(c)] => gpu_value(GpuChunk::from_host(c, &super::chunk::default_device()?)?),
            [v @ Value::Gpu(_)] => v.clone(),
            _ => return Err(ArrayError::Value("to_gpu takes one array block".into())),
        },
        ArrayOp::ToCpu => match args {
            [Value::Gpu(g)] => Value::array(g.to_host()?),
            [v @ Value::Array(_)] => v.clone(),
            _ => return Err(ArrayError::Value("to_cpu takes one array block".into())),
        },
        ArrayOp::OnGpu(inner) => {
            let device = super::chunk::default_device()?;
            match inner.as_ref() {
                ArrayOp::Random { seed, shape, dist, dtype }
                    if !matches!(dist, crate::array::create::Dist::Integers { .. }) =>
                {
                    gpu_value(super::create::random(&device, *seed, shape, *dist, *dtype)?)
                }
                ArrayOp::Full { shape, value, dtype } => {
                    gpu_value(super::create::full(&device, shape, *value, *dtype)?)
                }
                // Small or read from files: made on the host, then moved.
                other => {
                    let v = host(other, args)?;
                    upload(v, &device)?
                }
            }
        }
        ArrayOp::Transpose(axes) => gpu_value(one()?.transpose(axes)?),
        ArrayOp::Slice(ranges) => gpu_value(one()?.slice(ranges)?),
        ArrayOp::Reshape(to) => gpu_value(one()?.reshape(to)?),
        ArrayOp::ExpandDims(axis) => gpu_value(one()?.expand_dims(*axis)?),
        ArrayOp::Cumsum(axis) => gpu_value(super::scan::cumsum(one()?, *axis)?),
        ArrayOp::Len => Value::Int(one()?.shape().first().copied().unwrap_or(1) as i64),
        ArrayOp::Mask => match args {
            [x, c] => gpu_value(super::scan::mask(gpu_arg(x)?, gpu_arg(c)?)?),
            _ => {
                return Err(ArrayError::Value(format!("getitem-mask takes 2 arguments, got {}", args.len())));
            }
        },
        ArrayOp::Histogram { bins, lo, hi } => gpu_value(super::scan::histogram(one()?, *bins, *lo, *hi)?),
        ArrayOp::Item(k) => match args {
            [Value::List(items)] => items
                .get(*k)
                .cloned()
                .ok_or_else(|| ArrayError::Value(format!("no item {k} in a list of {}", items.len())))?,
            _ => return Ok(None),
        },
        ArrayOp::Partial { red, axes, place } if red.is_arg() => {
            list(super::arg::partial(*red, one()?, axes, place)?)
        }
        ArrayOp::Partial { red, axes, .. } => match super::reduce::partial(*red, one()?, axes)? {
            Some(p) => list(p),
            None => return Ok(None),
        },
        ArrayOp::Combine { red } => match merged(*red, args)? {
            Some(p) => list(p),
            None => return Ok(None),
        },
        ArrayOp::Aggregate { red, axes, keepdims, out } if !red.is_arg() => {
            let parts = args.iter().map(partials).collect::<Result<Vec<_>, _>>()?;
            match super::reduce::aggregate(*red, &parts, axes, *keepdims, *out)? {
                Some(r) => gpu_value(r),
                None => return Ok(None),
            }
        }
        ArrayOp::Aggregate { red, axes, keepdims, out } => {
            let Some(p) = merged(*red, args)? else { return Ok(None) };
            match super::reduce::finalize(*red, &p, axes, *keepdims, *out)? {
                Some(r) => gpu_value(r),
                None => return Ok(None),
            }
        }
        ArrayOp::Matmul { nk } => {
            let blocks = args.iter().map(|v| gpu_arg(v).cloned()).collect::<Result<Vec<_>, _>>()?;
            if blocks.len() != 2 * nk {
                return Err(ArrayError::Value(format!(
                    "matmul takes {} arguments, got {}",
                    2 * nk,
                    blocks.len()
                )));
            }
            match super::linalg::matmul_sum(&blocks[..*nk], &blocks[*nk..])? {
                Some(r) => gpu_value(r),
                None => return Ok(None),
            }
        }
        ArrayOp::Unique => match args {
            [Value::Gpu(g)] => match super::unique::few_distinct(g)? {
                Some(u) => gpu_value(u),
                None => return Ok(None),
            },
            _ => return Ok(None),
        },
        ArrayOp::Ml(m) => {
            // All of a statistic's blocks on the device, or it runs on host
            // copies (where a host block among them is refused as mixed).
            let Some(blocks) = args
                .iter()
                .map(|v| match v {
                    Value::Gpu(g) => Some(g.as_ref().clone()),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()
            else {
                return Ok(None);
            };
            match crate::ml::gpu::run(m, &blocks)? {
                Some(v) => v,
                None => return Ok(None),
            }
        }
        ArrayOp::Gram { .. } => {
            let blocks = args.iter().map(|v| gpu_arg(v).cloned()).collect::<Result<Vec<_>, _>>()?;
            match super::linalg::gram_sum(&blocks)? {
                Some(r) => gpu_value(r),
                None => return Ok(None),
            }
        }
        ArrayOp::PlaceLike => match args {
            [v, Value::Gpu(g)] => upload(v.clone(), g.device())?,
            [v, _] => download(v)?,
            _ => return Err(ArrayError::Value("place-like takes 2 arguments".into())),
        },
        ArrayOp::Qr => match super::linalg::qr_factor(one()?)? {
            Some(p) => list(p),
            None => return Ok(None),
        },
        ArrayOp::QrStack => {
            let rs = args
                .iter()
                .map(|v| match v {
                    Value::List(_) => partials(v)?
                        .get(1)
                        .cloned()
                        .ok_or_else(|| ArrayError::Value("QR parts missing".into())),
                    other => gpu_arg(other).cloned(),
                })
                .collect::<Result<Vec<_>, _>>()?;
            let stacked = super::layout::concat_grid(&rs, &[rs.len(), 1])?;
            match super::linalg::qr_factor(&stacked)? {
                Some(p) => list(p),
                None => return Ok(None),
            }
        }
        ArrayOp::QrFormQ => {
            let [v] = args else { return Err(ArrayError::Value("qr-form-q takes one QR value".into())) };
            let parts = partials(v)?;
            if super::linalg::is_factored(&parts) {
                gpu_value(super::linalg::form_q(&parts)?)
            } else {
                return Ok(None);
            }
        }
        ArrayOp::QrQ { offset, rows } => {
            let [parts, q2] = args else { return Err(ArrayError::Value("qr-q takes 2 arguments".into())) };
            let (parts, q2) = (partials(parts)?, gpu_arg(q2)?);
            let cols = q2.shape().get(1).copied().unwrap_or(0);
            let span = |start, stop| (crate::array::shape::AxisSlice { start, stop, step: 1 }, false);
            let piece = q2.slice(&[span(*offset, offset + rows), span(0, cols)])?;
            if super::linalg::is_factored(&parts) {
                gpu_value(super::linalg::apply_q(&parts, &piece)?)
            } else {
                let Some(q) = parts.first() else { return Err(ArrayError::Value("QR parts missing".into())) };
                match super::linalg::matmul_sum(std::slice::from_ref(q), &[piece])? {
                    Some(r) => gpu_value(r),
                    None => return Ok(None),
                }
            }
        }
        ArrayOp::Svd => match super::linalg::svd(one()?)? {
            Some(p) => list(p),
            None => return Ok(None),
        },
        ArrayOp::SvdVals => match super::linalg::singular_values(one()?)? {
            Some(s) => Value::list(vec![Value::Unit, gpu_value(s), Value::Unit]),
            None => return Ok(None),
        },
        ArrayOp::Solve | ArrayOp::SolveUpper => {
            let [a, b] = args else {
                return Err(ArrayError::Value(format!("{} takes 2 arguments", op.name())));
            };
            let (a, b) = (gpu_arg(a)?, gpu_arg(b)?);
            let r = if matches!(op, ArrayOp::Solve) {
                super::linalg::solve(a, b)?
            } else {
                super::linalg::solve_upper(a, b)?
            };
            match r {
                Some(x) => gpu_value(x),
                None => return Ok(None),
            }
        }
        // The last step of `compute`: the result comes to the host.
        ArrayOp::Concat { numblocks } => {
            let blocks = args.iter().map(|v| gpu_arg(v).cloned()).collect::<Result<Vec<_>, _>>()?;
            Value::array(super::layout::concat_grid(&blocks, numblocks)?.to_host()?)
        }
        ArrayOp::Rechunk { pieces, numblocks } => {
            if pieces.len() != args.len() {
                return Err(ArrayError::Value(format!(
                    "rechunk takes {} arguments, got {}",
                    pieces.len(),
                    args.len()
                )));
            }
            let mut blocks = Vec::with_capacity(args.len());
            for (v, ranges) in args.iter().zip(pieces) {
                let r: Vec<_> = ranges.iter().map(|&x| (x, false)).collect();
                blocks.push(gpu_arg(v)?.slice(&r)?);
            }
            gpu_value(super::layout::concat_grid(&blocks, numblocks)?)
        }
        ArrayOp::AddAll => {
            let mut it = args.iter();
            let first =
                gpu_arg(it.next().ok_or_else(|| ArrayError::Value("nothing to add".into()))?)?.clone();
            let mut acc = Expr::leaf(first);
            for v in it {
                acc = Expr::binary(crate::array::elementwise::BinOp::Add, Term::Expr(acc), term(v)?)?;
            }
            gpu_value(materialize(&acc)?)
        }
        ArrayOp::KernelPartial { fold, axes } => {
            gpu_value(super::reduce::user_partial(fold, &Expr::leaf(one()?.clone()), axes)?)
        }
        ArrayOp::KernelCombine { fold } => gpu_value(super::reduce::user_combine(fold, &blocks(args)?)?),
        ArrayOp::KernelAggregate { fold, post, axes, keepdims, sizes } => {
            gpu_value(super::reduce::user_aggregate(fold, post, &blocks(args)?, axes, *keepdims, *sizes)?)
        }
        ArrayOp::RawBlocks { kernel, launch } => gpu_value(super::raw::map_block(kernel, launch, one()?)?),
        _ => return Ok(None),
    }))
}

fn blocks(args: &[Value]) -> Result<Vec<GpuChunk>, ArrayError> {
    args.iter().map(|v| gpu_arg(v).cloned()).collect()
}

fn merged(red: crate::array::reduce::Reduction, args: &[Value]) -> Result<Option<Vec<GpuChunk>>, ArrayError> {
    if !red.is_arg() {
        let parts = args.iter().map(partials).collect::<Result<Vec<_>, _>>()?;
        return super::reduce::merge_all(red, &parts);
    }
    let mut it = args.iter();
    let mut acc = partials(it.next().ok_or_else(|| ArrayError::Value("no partials to combine".into()))?)?;
    for v in it {
        acc = super::arg::merge(red, &acc, &partials(v)?)?;
    }
    Ok(Some(acc))
}

/// Blocks of a value moved to the host, recursively.
fn download(v: &Value) -> Result<Value, ArrayError> {
    Ok(match v {
        Value::Gpu(g) => Value::array(g.to_host()?),
        Value::List(items) => Value::list(items.iter().map(download).collect::<Result<_, _>>()?),
        other => other.clone(),
    })
}

/// Blocks of a value moved to `device`, recursively.
fn upload(v: Value, device: &Arc<brisk_gpu::Device>) -> Result<Value, ArrayError> {
    Ok(match v {
        Value::Array(c) => gpu_value(GpuChunk::from_host(&c, device)?),
        Value::List(items) => {
            Value::list(items.iter().map(|x| upload(x.clone(), device)).collect::<Result<_, _>>()?)
        }
        other => other,
    })
}

/// The CPU kernel on host copies, its blocks moved back to the device.
fn on_host(op: &ArrayOp, args: &[Value], host: Host<'_>) -> Result<Value, ArrayError> {
    if args.iter().any(has_host_array) && !matches!(op, ArrayOp::OnGpu(_)) {
        return Err(mixed());
    }
    let device = args
        .iter()
        .find_map(|v| first_gpu(v).map(|g| g.device().clone()))
        .map(Ok)
        .unwrap_or_else(super::chunk::default_device)?;
    let down = args.iter().map(download).collect::<Result<Vec<_>, _>>()?;
    let r = host(op, &down)?;
    // Writers and scalars stay as they are.
    upload(r, &device)
}

fn first_gpu(v: &Value) -> Option<&GpuChunk> {
    match v {
        Value::Gpu(g) => Some(g),
        Value::List(items) => items.iter().find_map(first_gpu),
        _ => None,
    }
}

/// A step's value inside a fused GPU chain: done, or an elementwise
/// expression not yet evaluated.
#[derive(Clone)]
enum Slot {
    Done(Value),
    Lazy(Expr),
}

impl Slot {
    fn value(self) -> Result<Value, ArrayError> {
        match self {
            Slot::Done(v) => Ok(v),
            Slot::Lazy(e) => Ok(gpu_value(materialize(&e)?)),
        }
    }
}

fn step_is_gpu(step: &Step) -> bool {
    match &step.op {
        Op::Call { func: Func::Array(op), .. } => matches!(op.as_ref(), ArrayOp::OnGpu(_) | ArrayOp::ToGpu),
        Op::Fused(steps) => steps.iter().any(step_is_gpu),
        _ => false,
    }
}

/// Runs one step the ordinary way.
pub type RunStep<'a> = dyn FnMut(&Step, &[Value]) -> Result<Value, TaskError> + 'a;

/// Run a fused chain that involves a GPU, keeping elementwise steps lazy;
/// `None` when nothing in it is on a GPU.
pub fn run_fused(
    steps: &[Step],
    inputs: &[Value],
    run_step: &mut RunStep<'_>,
) -> Option<Result<Value, TaskError>> {
    if !inputs.iter().any(has_gpu) && !steps.iter().any(step_is_gpu) {
        return None;
    }
    Some(fused(steps, inputs, run_step))
}

fn fused(steps: &[Step], inputs: &[Value], run_step: &mut RunStep<'_>) -> Result<Value, TaskError> {
    let mut slots: Vec<Slot> = Vec::with_capacity(steps.len());
    for step in steps {
        let mut ins: Vec<Slot> = Vec::with_capacity(step.inputs.len());
        for i in &step.inputs {
            let s = match *i {
                StepInput::External(j) => inputs.get(j as usize).cloned().map(Slot::Done),
                StepInput::Step(j) => slots.get(j as usize).cloned(),
            };
            ins.push(s.ok_or_else(|| TaskError::internal("fused step refers to a missing input"))?);
        }
        // An elementwise step on expressions extends them.
        if let Op::Call { func: Func::Array(op), args } = &step.op
            && let Some(e) = lazy_step(op, args, &ins)
        {
            slots.push(Slot::Lazy(e?));
            continue;
        }
        // A reduction of an expression folds it as it is computed.
        if let Op::Call { func: Func::Array(op), args } = &step.op
            && let ArrayOp::Partial { red, axes, .. } = op.as_ref()
            && let [Arg::Dep(i)] = args.as_slice()
            && let Some(Slot::Lazy(e)) = ins.get(*i as usize)
            && let Some(p) = super::reduce::partial_expr(*red, e, axes)?
        {
            slots.push(Slot::Done(list(p)));
            continue;
        }
        if let Op::Call { func: Func::Array(op), args } = &step.op
            && let ArrayOp::KernelPartial { fold, axes } = op.as_ref()
            && let [Arg::Dep(i)] = args.as_slice()
            && let Some(Slot::Lazy(e)) = ins.get(*i as usize)
        {
            slots.push(Slot::Done(gpu_value(super::reduce::user_partial(fold, e, axes)?)));
            continue;
        }
        let values = ins.into_iter().map(Slot::value).collect::<Result<Vec<_>, _>>()?;
        slots.push(Slot::Done(run_step(step, &values)?));
    }
    Ok(slots.pop().ok_or_else(|| TaskError::internal("empty fused task"))?.value()?)
}

/// The step as an expression when it is elementwise on GPU values.
fn lazy_step(op: &ArrayOp, args: &[Arg], ins: &[Slot]) -> Option<Result<Expr, ArrayError>> {
    if !matches!(
        op,
        ArrayOp::Binary(_) | ArrayOp::Unary(_) | ArrayOp::Where | ArrayOp::AsType(_) | ArrayOp::Kernel(_)
    ) {
        return None;
    }
    // Every argument a dependency or a number; at least one on the GPU.
    let mut terms = Vec::with_capacity(args.len());
    let mut any_gpu = false;
    for a in args {
        let t = match a {
            Arg::Dep(i) => match ins.get(*i as usize)? {
                Slot::Lazy(e) => {
                    any_gpu = true;
                    Term::Expr(e.clone())
                }
                Slot::Done(v @ Value::Gpu(_)) => {
                    any_gpu = true;
                    term(v).ok()?
                }
                Slot::Done(v) => term(v).ok()?,
            },
            Arg::Lit(v) => term(v).ok()?,
            _ => return None,
        };
        terms.push(t);
    }
    if !any_gpu {
        return None;
    }
    let r = match (op, terms.as_slice()) {
        (ArrayOp::Binary(b), [x, y]) => {
            if *b == crate::array::elementwise::BinOp::Pow && int_pow(x, y) {
                return None;
            }
            Expr::binary(*b, x.clone(), y.clone())
        }
        (ArrayOp::Unary(u), [Term::Expr(x)]) => Expr::unary(*u, x.clone()),
        (ArrayOp::Where, [c, x, y]) => Expr::where_(c.clone(), x.clone(), y.clone()),
        (ArrayOp::AsType(t), [Term::Expr(x)]) => Ok(Expr::cast(x.clone(), *t)),
        (ArrayOp::Kernel(f), ts) => Expr::user(f.clone(), ts.to_vec()),
        _ => return None,
    };
    Some(r)
}

/// A host block on the first GPU (for tests and `to_gpu` of results).
pub fn to_device(c: &Chunk) -> Result<GpuChunk, ArrayError> {
    GpuChunk::from_host(c, &super::chunk::default_device()?)
}
