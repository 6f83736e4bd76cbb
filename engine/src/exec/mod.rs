//! Running one task: `execute` dispatches an operation to the builtin, the
//! closure runner or the array, bag or frame kernel it names, and runs
//! fused chains step by step (or as one loop, `fused`, for array arithmetic).

mod command;
pub mod deadline;
mod fused;

use std::sync::Arc;

use crate::error::TaskError;
use crate::ops::{Arg, Builtin, Func, Op, Step, StepInput};
use crate::runner::{TaskContext, UdfRunner};
use crate::value::Value;

fn call(
    func: &Func,
    args: Vec<Value>,
    udfs: &dyn UdfRunner,
    ctx: &TaskContext<'_>,
) -> Result<Value, TaskError> {
    match func {
        Func::Udf(udf) => udfs.call(udf, args, ctx),
        // It polls its cancellation while the program runs.
        Func::Builtin(Builtin::RunCommand) => command::run(args, ctx),
        Func::Builtin(b) => builtin(*b, args),
        Func::Array(op) => Ok(crate::array::exec::execute(op, &args)?),
        Func::Bag(op) => crate::bag::exec::execute(op, &args, udfs, ctx),
        Func::Frame(op) => crate::frame::exec::execute(op, &args, udfs, ctx),
        Func::Block(b) => {
            let v = call(&b.func, args, udfs, ctx)?;
            crate::array::exec::check_block(&v, &b.shape)?;
            Ok(v)
        }
    }
}

/// `execute`, with a panic in the task caught and reported as the task's
/// failure (kind `Panic`), as every executor runs tasks.
pub fn execute_caught(
    op: &Op,
    inputs: &[Value],
    udfs: &dyn UdfRunner,
    ctx: &TaskContext<'_>,
) -> Result<Value, TaskError> {
    let run = std::panic::AssertUnwindSafe(|| execute(op, inputs, udfs, ctx));
    match std::panic::catch_unwind(run) {
        Ok(r) => r,
        Err(panic) => Err(TaskError::panic(format!(
            "task {} panicked: {}",
            ctx.key,
            crate::error::panic_message(&*panic)
        ))),
    }
}

/// `execute_caught` under a deadline: past `timeout` the task's cancel
/// flag is raised and a run that stops for it fails as timed out (a run
/// that finishes anyway keeps its result).
pub fn execute_timed(
    op: &Op,
    inputs: &[Value],
    udfs: &dyn UdfRunner,
    ctx: &TaskContext<'_>,
    timeout: Option<std::time::Duration>,
) -> Result<Value, TaskError> {
    let Some(timeout) = timeout else { return execute_caught(op, inputs, udfs, ctx) };
    let deadline = deadline::Deadline::arm(timeout, ctx.cancelled);
    let result = execute_caught(op, inputs, udfs, ctx);
    match result {
        Err(_) if deadline.expired() => Err(TaskError::user(format!(
            "task {} ran longer than its timeout of {} and was stopped",
            ctx.key,
            deadline::fmt(timeout)
        ))),
        r => r,
    }
}

/// Run one operation on its dependency values.
pub fn execute(
    op: &Op,
    inputs: &[Value],
    udfs: &dyn UdfRunner,
    ctx: &TaskContext<'_>,
) -> Result<Value, TaskError> {
    if ctx.is_cancelled() {
        return Err(TaskError::cancelled());
    }
    match op {
        Op::Literal(v) => Ok(v.clone()),
        Op::Call { func, args } => {
            let args = args.iter().map(|a| build_arg(a, inputs)).collect::<Result<Vec<_>, _>>()?;
            call(func, args, udfs, ctx)
        }
        Op::Fused(steps) => {
            let mut one = |step: &Step, step_inputs: &[Value]| {
                let sub = TaskContext { key: &step.key, ..*ctx };
                execute(&step.op, step_inputs, udfs, &sub)
            };
            // Chains on GPU blocks run as generated kernels.
            if let Some(r) = crate::array::gpu::exec::run_fused(steps, inputs, &mut one) {
                return r;
            }
            // Chains of array arithmetic run as one loop over the blocks.
            if let Some(r) = fused::try_run(steps, inputs, &mut one) {
                return r;
            }
            let mut results: Vec<Value> = Vec::with_capacity(steps.len());
            for step in steps {
                let step_inputs = step
                    .inputs
                    .iter()
                    .map(|i| match *i {
                        StepInput::External(j) => inputs.get(j as usize).cloned(),
                        StepInput::Step(j) => results.get(j as usize).cloned(),
                    })
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| TaskError::internal("fused step refers to a missing input"))?;
                let sub = TaskContext { key: &step.key, ..*ctx };
                results.push(execute(&step.op, &step_inputs, udfs, &sub)?);
            }
            results.pop().ok_or_else(|| TaskError::internal("empty fused task"))
        }
    }
}

fn build_arg(a: &Arg, inputs: &[Value]) -> Result<Value, TaskError> {
    Ok(match a {
        Arg::Dep(i) => inputs
            .get(*i as usize)
            .cloned()
            .ok_or_else(|| TaskError::internal(format!("argument refers to missing dependency {i}")))?,
        Arg::Lit(v) => v.clone(),
        Arg::List(items) => {
            Value::list(items.iter().map(|x| build_arg(x, inputs)).collect::<Result<_, _>>()?)
        }
        Arg::Map(items) => Value::Map(Arc::new(
            items
                .iter()
                .map(|(k, x)| Ok((k.clone(), build_arg(x, inputs)?)))
                .collect::<Result<_, TaskError>>()?,
        )),
    })
}

/// `call` runs `run_command` itself (it polls its cancellation).
fn apart() -> TaskError {
    TaskError::internal("run_command runs apart from the other builtins")
}

fn builtin(b: Builtin, args: Vec<Value>) -> Result<Value, TaskError> {
    use Value::{Float, Int};
    let arity = match b {
        Builtin::Identity | Builtin::Neg => 1,
        Builtin::RunCommand => return Err(apart()),
        _ => 2,
    };
    if args.len() != arity {
        return Err(TaskError::user(format!("{} takes {arity} argument(s), got {}", b.name(), args.len())));
    }
    let mut it = args.into_iter();
    let a = it.next().unwrap_or_default();
    let c = it.next().unwrap_or_default();
    let mismatch = |a: &Value, c: &Value| {
        TaskError::user(format!("{} is not defined for {} and {}", b.name(), a.type_name(), c.type_name()))
    };
    let float = |v: &Value| match v {
        Int(i) => Some(*i as f64),
        Float(f) => Some(*f),
        _ => None,
    };
    Ok(match b {
        Builtin::Identity => a,
        Builtin::RunCommand => return Err(apart()),
        Builtin::Neg => match a {
            Int(i) => Int(i.checked_neg().ok_or_else(|| TaskError::user("integer overflow in neg"))?),
            Float(f) => Float(-f),
            other => return Err(TaskError::user(format!("neg is not defined for {}", other.type_name()))),
        },
        Builtin::GetItem => match (&a, &c) {
            (Value::List(items), Int(i)) => {
                let n = items.len() as i64;
                let j = if *i < 0 { i + n } else { *i };
                if j < 0 || j >= n {
                    return Err(TaskError::user(format!("index {i} out of range for array of length {n}")));
                }
                items[j as usize].clone()
            }
            (Value::Map(m), Value::Str(k)) => m
                .get(&**k)
                .cloned()
                .ok_or_else(|| TaskError::user(format!("key \"{k}\" not found in map")))?,
            _ => return Err(mismatch(&a, &c)),
        },
        Builtin::Add | Builtin::Sub | Builtin::Mul | Builtin::Div | Builtin::Rem => match (&a, &c) {
            (Int(x), Int(y)) if b != Builtin::Div => {
                let r = match b {
                    Builtin::Add => x.checked_add(*y),
                    Builtin::Sub => x.checked_sub(*y),
                    Builtin::Mul => x.checked_mul(*y),
                    _ => {
                        if *y == 0 {
                            return Err(TaskError::user("integer modulo by zero"));
                        }
                        // Python's `%`: the result takes the divisor's sign.
                        x.checked_rem(*y).map(|r| if r != 0 && (r < 0) != (*y < 0) { r + y } else { r })
                    }
                };
                Int(r.ok_or_else(|| TaskError::user(format!("integer overflow in {}({x}, {y})", b.name())))?)
            }
            (Value::Str(x), Value::Str(y)) if b == Builtin::Add => Value::Str(format!("{x}{y}").into()),
            _ => {
                let (Some(x), Some(y)) = (float(&a), float(&c)) else {
                    return Err(mismatch(&a, &c));
                };
                if y == 0.0 && matches!(b, Builtin::Div | Builtin::Rem) {
                    let what = if b == Builtin::Div { "division" } else { "modulo" };
                    return Err(TaskError::user(format!(
                        "{what} by zero ({a} {} {c})",
                        if b == Builtin::Div { "/" } else { "%" }
                    )));
                }
                Float(match b {
                    Builtin::Add => x + y,
                    Builtin::Sub => x - y,
                    Builtin::Mul => x * y,
                    Builtin::Div => x / y,
                    _ => {
                        let r = x % y;
                        if r != 0.0 && (r < 0.0) != (y < 0.0) { r + y } else { r }
                    }
                })
            }
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::Key;
    use crate::runner::{Code, NoUdfs, Udf};
    use std::sync::atomic::AtomicBool;

    fn run(op: &Op, inputs: &[Value]) -> Result<Value, TaskError> {
        let cancelled = Arc::new(AtomicBool::new(false));
        let key = Key::new("t");
        execute(op, inputs, &NoUdfs, &TaskContext::new(&key, &cancelled))
    }

    fn call(b: Builtin, args: Vec<Arg>) -> Op {
        Op::Call { func: Func::Builtin(b), args }
    }

    #[test]
    fn builtins_follow_python_numeric_rules() {
        let add = call(Builtin::Add, vec![Arg::Dep(0), Arg::Dep(1)]);
        assert_eq!(run(&add, &[Value::Int(2), Value::Int(3)]).ok(), Some(Value::Int(5)));
        assert_eq!(run(&add, &[Value::Int(2), Value::Float(0.5)]).ok(), Some(Value::Float(2.5)));
        let div = call(Builtin::Div, vec![Arg::Dep(0), Arg::Lit(Value::Int(2))]);
        assert_eq!(run(&div, &[Value::Int(3)]).ok(), Some(Value::Float(1.5)));
        let err = run(&add, &[Value::str("a"), Value::Int(1)]).expect_err("type error");
        assert!(err.message.contains("add is not defined for string and int"), "{err}");
        let ovf = run(&add, &[Value::Int(i64::MAX), Value::Int(1)]).expect_err("overflow");
        assert!(ovf.message.contains("overflow"));
        let rem = call(Builtin::Rem, vec![Arg::Dep(0), Arg::Dep(1)]);
        assert_eq!(run(&rem, &[Value::Int(-7), Value::Int(3)]).ok(), Some(Value::Int(2)));
        assert_eq!(run(&rem, &[Value::Int(7), Value::Int(-3)]).ok(), Some(Value::Int(-2)));
        assert_eq!(run(&rem, &[Value::Float(-7.5), Value::Int(2)]).ok(), Some(Value::Float(0.5)));
        let zero = run(&div, &[Value::Float(1.0)]).ok();
        assert_eq!(zero, Some(Value::Float(0.5)));
        let by_zero = call(Builtin::Div, vec![Arg::Dep(0), Arg::Lit(Value::Int(0))]);
        let e = run(&by_zero, &[Value::Int(1)]).expect_err("zero");
        assert!(e.message.starts_with("division by zero"), "{e}");
    }

    #[test]
    fn getitem_and_nested_args() {
        let op = call(
            Builtin::GetItem,
            vec![Arg::List(vec![Arg::Dep(0), Arg::Lit(Value::Int(7))]), Arg::Lit(Value::Int(-1))],
        );
        assert_eq!(run(&op, &[Value::Int(1)]).ok(), Some(Value::Int(7)));
        let bad = call(Builtin::GetItem, vec![Arg::Dep(0), Arg::Lit(Value::Int(5))]);
        let e = run(&bad, &[Value::list(vec![])]).expect_err("range");
        assert!(e.message.contains("index 5 out of range for array of length 0"));
    }

    #[test]
    fn fused_steps_run_in_order() {
        let op = Op::Fused(vec![
            Step {
                key: Key::new("a"),
                op: call(Builtin::Add, vec![Arg::Dep(0), Arg::Lit(Value::Int(1))]),
                inputs: vec![StepInput::External(0)],
            },
            Step {
                key: Key::new("b"),
                op: call(Builtin::Mul, vec![Arg::Dep(0), Arg::Dep(1)]),
                inputs: vec![StepInput::Step(0), StepInput::External(1)],
            },
        ]);
        assert_eq!(run(&op, &[Value::Int(1), Value::Int(10)]).ok(), Some(Value::Int(20)));
    }

    #[test]
    fn closures_need_a_runner() {
        let udf = Udf {
            label: "inc".into(),
            entry: "inc".into(),
            code: Arc::new(Code { id: 0, chunks: vec![] }),
            curry: vec![],
        };
        let op = Op::Call { func: Func::Udf(Arc::new(udf)), args: vec![] };
        assert!(run(&op, &[]).is_err());
    }
}
