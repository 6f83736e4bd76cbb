//! Which tasks work on GPU blocks: they take the `GPU` resource (Dask's
//! `resources={"GPU": ...}`), so a scheduler runs them only where a GPU is
//! free, and never on a worker without one. A block is on the GPU when a
//! creation or reader op made it there (`OnGpu`), `to_gpu` put it there,
//! or an array op made it from a GPU block; `to_cpu` brings it back (the
//! copy itself still needs the device). Other ops that read a GPU block
//! need the device too, but what they make is a host value.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::array::op::ArrayOp;
use crate::graph::task::{Annotations, Task};
use crate::key::Key;
use crate::ops::{Func, Op, StepInput};
use crate::value::Value;

/// The resource's name, as workers offer it.
pub const GPU: &str = "GPU";

/// Whether `op` needs a GPU, and whether its result is a GPU block, given
/// which of its dependencies are GPU blocks.
fn effect(op: &Op, inputs: &[bool]) -> (bool, bool) {
    let any = inputs.iter().any(|&g| g);
    match op {
        Op::Literal(v) => (false, matches!(v, Value::Gpu(_))),
        Op::Call { func: Func::Array(a), .. } => match a.as_ref() {
            ArrayOp::OnGpu(_) | ArrayOp::ToGpu => (true, true),
            ArrayOp::ToCpu => (true, false),
            _ => (any, any),
        },
        Op::Call { .. } => (any, false),
        Op::Fused(steps) => {
            let mut made: Vec<bool> = Vec::with_capacity(steps.len());
            let mut needs = false;
            for s in steps {
                let ins: Vec<bool> = s
                    .inputs
                    .iter()
                    .map(|i| match *i {
                        StepInput::External(j) => inputs.get(j as usize).copied().unwrap_or(false),
                        StepInput::Step(j) => made.get(j as usize).copied().unwrap_or(false),
                    })
                    .collect();
                let (n, o) = effect(&s.op, &ins);
                needs |= n;
                made.push(o);
            }
            (needs, made.last().copied().unwrap_or(false))
        }
    }
}

/// Whether any op could put a block on the GPU: else, with no GPU value
/// held either, the graph has no GPU task and the pass is skipped.
fn makes_gpu_block(op: &Op) -> bool {
    match op {
        Op::Literal(v) => matches!(v, Value::Gpu(_)),
        Op::Call { func: Func::Array(a), .. } => matches!(a.as_ref(), ArrayOp::OnGpu(_) | ArrayOp::ToGpu),
        Op::Call { .. } => false,
        Op::Fused(steps) => steps.iter().any(|s| makes_gpu_block(&s.op)),
    }
}

/// Whether a task of the graph may put a block on the GPU.
pub fn makes_gpu_blocks(tasks: &[Task]) -> bool {
    tasks.iter().any(|t| makes_gpu_block(&t.op))
}

/// Give every task that works on GPU blocks the resource `GPU: share`,
/// unless it already names an amount of `GPU` (the user's annotation
/// wins). `held_on_gpu` says whether a dependency outside the graph (a
/// persisted block) is in device memory; `maybe_held` is false when none
/// can be (no GPU opened in this process). Returns how many tasks take it.
pub fn take_gpu(
    tasks: &mut [Task],
    maybe_held: bool,
    held_on_gpu: impl Fn(&Key) -> bool,
    share: f64,
) -> usize {
    if !maybe_held && !makes_gpu_blocks(tasks) {
        return 0;
    }
    let index: FxHashMap<&Key, usize> = tasks.iter().enumerate().map(|(i, t)| (&t.key, i)).collect();
    let n = tasks.len();
    let mut made: Vec<Option<bool>> = vec![None; n];
    let mut needs = vec![false; n];
    // Dependencies first, without recursion (chains can be long).
    let mut stack: Vec<(usize, bool)> = Vec::new();
    for start in 0..n {
        stack.push((start, false));
        while let Some((i, expanded)) = stack.pop() {
            if made[i].is_some() {
                continue;
            }
            let t = &tasks[i];
            if !expanded {
                stack.push((i, true));
                for d in &t.deps {
                    if let Some(&j) = index.get(d)
                        && made[j].is_none()
                    {
                        stack.push((j, false));
                    }
                }
                continue;
            }
            // A cycle (refused by the scheduler later) reads as host values.
            let inputs: Vec<bool> = t
                .deps
                .iter()
                .map(|d| match index.get(d) {
                    Some(&j) => made[j].unwrap_or(false),
                    None => maybe_held && held_on_gpu(d),
                })
                .collect();
            let (n, o) = effect(&t.op, &inputs);
            needs[i] = n;
            made[i] = Some(o);
        }
    }
    drop(index);
    // Tasks without annotations share one.
    let plain = Arc::new(Annotations { resources: vec![(GPU.into(), share)], ..Annotations::default() });
    let mut count = 0;
    for (t, need) in tasks.iter_mut().zip(needs) {
        if !need {
            continue;
        }
        count += 1;
        t.annotations = Some(match &t.annotations {
            None => plain.clone(),
            Some(a) if a.resources.iter().any(|(name, _)| name == GPU) => a.clone(),
            Some(a) => {
                let mut a = a.as_ref().clone();
                a.resources.push((GPU.into(), share));
                Arc::new(a)
            }
        });
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{Arg, Step};

    fn array(key: &str, op: ArrayOp, deps: &[&str]) -> Task {
        let args = (0..deps.len() as u32).map(Arg::Dep).collect();
        Task::new(
            Key::new(key),
            Op::Call { func: Func::Array(Arc::new(op)), args },
            deps.iter().map(|d| Key::new(*d)).collect(),
        )
    }

    fn gpu_of(tasks: &[Task]) -> Vec<f64> {
        tasks
            .iter()
            .map(|t| {
                t.annotations
                    .as_ref()
                    .map_or(0.0, |a| a.resources.iter().filter(|(n, _)| n == GPU).map(|(_, x)| *x).sum())
            })
            .collect()
    }

    /// A small block made on the host.
    fn host_block() -> ArrayOp {
        ArrayOp::Full {
            value: crate::array::dtype::Scalar::Int(1),
            shape: vec![2],
            dtype: crate::array::dtype::DType::I64,
        }
    }

    #[test]
    fn gpu_blocks_and_what_reads_them_take_the_gpu() {
        let host = host_block();
        let mut tasks = vec![
            // Listed out of order: the pass follows dependencies.
            array("sum", ArrayOp::Concat { numblocks: vec![2] }, &["neg", "cpu"]),
            array("neg", ArrayOp::Unary(crate::array::elementwise::UnOp::Neg), &["up"]),
            array("up", ArrayOp::ToGpu, &["host"]),
            array("host", host.clone(), &[]),
            array("cpu", ArrayOp::ToCpu, &["neg"]),
            array("after", ArrayOp::Unary(crate::array::elementwise::UnOp::Neg), &["cpu"]),
            array("made", ArrayOp::OnGpu(Box::new(host.clone())), &[]),
            array("held", ArrayOp::Unary(crate::array::elementwise::UnOp::Neg), &["persisted"]),
            array("other", ArrayOp::Unary(crate::array::elementwise::UnOp::Neg), &["elsewhere"]),
        ];
        // A user's own amount stays.
        tasks[1].annotations =
            Some(Arc::new(Annotations { resources: vec![(GPU.into(), 1.0)], ..Annotations::default() }));
        let n = take_gpu(&mut tasks, true, |k| k.to_string() == "persisted", 0.25);
        assert_eq!(gpu_of(&tasks), vec![0.25, 1.0, 0.25, 0.0, 0.25, 0.0, 0.25, 0.25, 0.0]);
        assert_eq!(n, 6);
    }

    #[test]
    fn fused_chains_and_host_graphs() {
        let host = host_block();
        let step = |key: &str, op: ArrayOp, input: StepInput| Step {
            key: Key::new(key),
            op: Op::Call { func: Func::Array(Arc::new(op)), args: vec![Arg::Dep(0)] },
            inputs: vec![input],
        };
        // host -> to_gpu -> to_cpu fused: needs the GPU, makes a host block.
        let fused = Task::new(
            Key::new("f"),
            Op::Fused(vec![
                step("u", ArrayOp::ToGpu, StepInput::External(0)),
                step("d", ArrayOp::ToCpu, StepInput::Step(0)),
            ]),
            vec![Key::new("host")],
        );
        let mut tasks = vec![
            array("host", host.clone(), &[]),
            fused,
            array("next", ArrayOp::Unary(crate::array::elementwise::UnOp::Neg), &["f"]),
        ];
        assert_eq!(take_gpu(&mut tasks, false, |_| true, 0.5), 1);
        assert_eq!(gpu_of(&tasks), vec![0.0, 0.5, 0.0]);
        // A host graph in a process without a GPU is not looked at.
        let mut host_only = vec![array("a", host.clone(), &[]), array("b", host, &["a"])];
        assert_eq!(take_gpu(&mut host_only, false, |_| panic!("not asked"), 0.5), 0);
    }
}
