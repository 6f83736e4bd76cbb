//! The closed, serializable vocabulary of task operations: what a task does
//! (`Op`), the callables (`Func`: a user closure, a builtin, or an array,
//! bag or frame kernel) and their arguments. Running them is `crate::exec`'s.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::array::op::ArrayOp;
use crate::bag::op::BagOp;
use crate::frame::op::FrameOp;
use crate::key::Key;
use crate::pieces::Pieces;
use crate::runner::Udf;
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
    /// The shuffle folders this task writes or reads pieces in; each op
    /// family knows its own.
    pub fn shuffle_pieces(&self) -> Vec<&Pieces> {
        match self {
            Op::Literal(_) => Vec::new(),
            Op::Fused(steps) => steps.iter().flat_map(|s| s.op.shuffle_pieces()).collect(),
            Op::Call { func, .. } => match func {
                Func::Bag(b) => b.shuffle_pieces().into_iter().collect(),
                Func::Frame(f) => f.shuffle_pieces().into_iter().collect(),
                Func::Udf(_) | Func::Builtin(_) | Func::Array(_) | Func::Block(_) => Vec::new(),
            },
        }
    }

    /// The shuffle pieces this task writes, as (folder, input index): a
    /// cluster worker removes them when the task's result is freed.
    pub fn shuffle_splits(&self) -> Vec<(&Pieces, u32)> {
        match self {
            Op::Literal(_) => Vec::new(),
            Op::Fused(steps) => steps.iter().flat_map(|s| s.op.shuffle_splits()).collect(),
            Op::Call { func, .. } => match func {
                Func::Bag(b) => b.shuffle_split().into_iter().collect(),
                Func::Frame(f) => f.shuffle_split().into_iter().collect(),
                Func::Udf(_) | Func::Builtin(_) | Func::Array(_) | Func::Block(_) => Vec::new(),
            },
        }
    }

    /// The files this task reads (a reader's source); each family knows
    /// its own. Writers refuse to write where these lie.
    pub fn files_read(&self) -> Vec<&str> {
        match self {
            Op::Literal(_) => Vec::new(),
            Op::Fused(steps) => steps.iter().flat_map(|s| s.op.files_read()).collect(),
            Op::Call { func, .. } => match func {
                Func::Array(a) => a.file_read().into_iter().collect(),
                Func::Bag(b) => b.file_read().into_iter().collect(),
                Func::Frame(f) => f.file_read().into_iter().collect(),
                Func::Udf(_) | Func::Builtin(_) | Func::Block(_) => Vec::new(),
            },
        }
    }
}

/// `map_blocks`' call of a function on one block. The array's chunks
/// promise each block's shape, and every later step (reductions, joins,
/// broadcasting) trusts them; a function that returns another shape must
/// be an error naming both, not a wrong answer or a panic further on.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BlockCall {
    pub func: Func,
    /// The promised shape; `None` for an axis whose length is unknown.
    pub shape: Vec<Option<usize>>,
}

/// A callable: a shipped user closure or a native builtin.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Func {
    Udf(Arc<Udf>),
    Builtin(Builtin),
    /// An array kernel (`crate::array::op`).
    Array(Arc<ArrayOp>),
    /// A bag kernel (`crate::bag`), which may call closures per record.
    Bag(Arc<BagOp>),
    /// A dataframe kernel (`crate::frame`).
    Frame(Arc<FrameOp>),
    /// A block function (`map_blocks`) whose result is checked against the
    /// block shape its array promises.
    Block(Arc<BlockCall>),
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
    /// An external program (`run_command`): `[argv, #{env, cwd}]`.
    RunCommand,
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
            Builtin::RunCommand => "run_command",
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
