//! The closed, serializable vocabulary of task operations and `execute`.
//! User closures appear only as `Udf` (source text, an entry point and the
//! captured values); the engine runs them through the `UdfRunner` trait that
//! the script layer implements, so the engine never depends on Rhai.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

use crate::array::ArrayOp;
use crate::error::TaskError;
use crate::graph::Key;
use crate::value::Value;

/// What a task does.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Op {
    /// A constant (`delayed_value`, `scatter`).
    Literal(Value),
    /// Call a function on arguments built from dependencies and literals.
    Call { func: Func, args: Vec<Arg> },
    /// A fused linear chain (see `graph::fuse`): steps run in order on one
    /// thread; the last step's result is the task's result.
    Fused(Vec<Step>),
}

impl Op {
    /// The shuffle folders this task writes or reads pieces in.
    pub fn shuffle_pieces(&self) -> Vec<&crate::shuffle::Pieces> {
        use crate::bag::BagOp;
        use crate::frame::{FrameOp, Sink};
        match self {
            Op::Literal(_) => Vec::new(),
            Op::Fused(steps) => steps.iter().flat_map(|s| s.op.shuffle_pieces()).collect(),
            Op::Call { func, .. } => match func {
                Func::Bag(b) => match b.as_ref() {
                    BagOp::Split { pieces, .. } | BagOp::Group { pieces, .. } => vec![pieces],
                    _ => Vec::new(),
                },
                Func::Frame(f) => match f.as_ref() {
                    FrameOp::Run { sink: Sink::Split(spec, _), .. } | FrameOp::Collect { spec, .. } => {
                        vec![&spec.pieces]
                    }
                    _ => Vec::new(),
                },
                Func::Udf(_) | Func::Builtin(_) | Func::Array(_) => Vec::new(),
            },
        }
    }
}

/// A callable: a shipped user closure or a native builtin.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Func {
    Udf(Arc<Udf>),
    Builtin(Builtin),
    /// An array kernel (`crate::array::ops`).
    Array(Arc<ArrayOp>),
    /// A bag kernel (`crate::bag`), which may call closures per record.
    Bag(Arc<crate::bag::BagOp>),
    /// A dataframe kernel (`crate::frame`).
    Frame(Arc<crate::frame::FrameOp>),
}

/// Native functions that need no script engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Builtin {
    /// Its single argument, unchanged (aliases, finalize of one key).
    Identity,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Neg,
    /// `x[i]` on lists (int index) and maps (string key).
    GetItem,
}

impl Builtin {
    pub fn name(self) -> &'static str {
        match self {
            Builtin::Identity => "identity",
            Builtin::Add => "add",
            Builtin::Sub => "sub",
            Builtin::Mul => "mul",
            Builtin::Div => "truediv",
            Builtin::Rem => "mod",
            Builtin::Neg => "neg",
            Builtin::GetItem => "getitem",
        }
    }
}

/// An argument: a dependency (by position in the task's `deps`), a literal,
/// or a list/map that contains either (Dask substitutes keys inside lists).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Arg {
    Dep(u32),
    Lit(Value),
    List(Vec<Arg>),
    Map(Vec<(String, Arg)>),
}

/// A user closure in shipped form: the source chunks that define it, the name
/// of the function to call and the values it captured. Every executor, local
/// or remote, compiles the chunks (cached per thread) and calls `entry`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Udf {
    /// For keys and messages: `"inc"`, or `"lambda"` for anonymous closures.
    pub label: String,
    pub entry: String,
    pub code: Arc<Code>,
    /// Captured values, passed before the call's own arguments.
    pub curry: Vec<Value>,
}

/// The source text a closure needs, as separately compiled chunks (one per
/// REPL input or script file, so positions and closure names reproduce).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Code {
    /// Hash of every chunk: executors cache compiled code by it.
    pub id: u128,
    pub chunks: Vec<SourceChunk>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SourceChunk {
    /// Where the text came from (a file name or `"<input 3>"`), for messages.
    pub origin: Arc<str>,
    pub text: Arc<str>,
}

/// One step of a fused chain.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Step {
    pub key: Key,
    pub op: Op,
    /// Where this step's `Arg::Dep(i)` values come from.
    pub inputs: Vec<StepInput>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum StepInput {
    /// The fused task's i-th dependency.
    External(u32),
    /// The result of an earlier step.
    Step(u32),
}

/// What a running task can see of its surroundings.
pub struct TaskContext<'a> {
    pub key: &'a Key,
    /// Set when the scheduler cancels this attempt.
    pub cancelled: &'a Arc<AtomicBool>,
    /// Set when the client that runs this task inline (sync mode) is
    /// interrupted (Ctrl-C): the task stops, and is not failed.
    pub interrupt: Option<&'a Arc<AtomicBool>>,
}

impl TaskContext<'_> {
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed) || self.interrupt.is_some_and(|i| i.load(Ordering::Relaxed))
    }
}

/// Runs shipped closures. Implemented by the script layer.
pub trait UdfRunner: Send + Sync {
    fn call(&self, udf: &Udf, args: Vec<Value>, ctx: &TaskContext<'_>) -> Result<Value, TaskError>;

    /// `udf(x)` for each item (bag `map`, `filter`, keys): a runner can look
    /// the closure up once for all of them. An error comes with the index
    /// of the item that caused it.
    fn call_each(
        &self,
        udf: &Udf,
        items: &[Value],
        ctx: &TaskContext<'_>,
    ) -> Result<Vec<Value>, (usize, TaskError)> {
        items
            .iter()
            .enumerate()
            .map(|(i, x)| self.call(udf, vec![x.clone()], ctx).map_err(|e| (i, e)))
            .collect()
    }
}

/// A runner for graphs without closures (tests, the scheduler benchmark).
pub struct NoUdfs;

impl UdfRunner for NoUdfs {
    fn call(&self, udf: &Udf, _: Vec<Value>, _: &TaskContext<'_>) -> Result<Value, TaskError> {
        Err(TaskError::user(format!("no script engine here to run closure '{}'", udf.label)))
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
            match func {
                Func::Udf(udf) => udfs.call(udf, args, ctx),
                Func::Builtin(b) => builtin(*b, args),
                Func::Array(op) => Ok(crate::array::ops::execute(op, &args)?),
                Func::Bag(op) => crate::bag::execute(op, &args, udfs, ctx),
                Func::Frame(op) => crate::frame::execute(op, &args, udfs, ctx),
            }
        }
        Op::Fused(steps) => {
            let mut one = |step: &Step, step_inputs: &[Value]| {
                let sub = TaskContext { key: &step.key, cancelled: ctx.cancelled, interrupt: ctx.interrupt };
                execute(&step.op, step_inputs, udfs, &sub)
            };
            // Chains of array arithmetic run as one loop over the blocks.
            if let Some(r) = crate::array::expr::try_run(steps, inputs, &mut one) {
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
                let sub = TaskContext { key: &step.key, cancelled: ctx.cancelled, interrupt: ctx.interrupt };
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

fn builtin(b: Builtin, args: Vec<Value>) -> Result<Value, TaskError> {
    use Value::{Float, Int};
    let arity = match b {
        Builtin::Identity | Builtin::Neg => 1,
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

    fn run(op: &Op, inputs: &[Value]) -> Result<Value, TaskError> {
        let cancelled = Arc::new(AtomicBool::new(false));
        let key = Key::new("t");
        execute(op, inputs, &NoUdfs, &TaskContext { key: &key, cancelled: &cancelled, interrupt: None })
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
