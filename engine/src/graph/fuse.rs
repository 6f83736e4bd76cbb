//! Linear fusion: merge chains of single-dependent tasks into one task.
//!
//! As Dask's `fuse_linear`: every task costs scheduler work and a hop
//! between workers, so a chain `a → b → c → d` where each link is the
//! producer's only consumer runs as one task with `Op::Fused` steps, keyed
//! by the chain's last key (`d`), the one other tasks refer to.

use rustc_hash::{FxHashMap, FxHashSet};

use super::task::{Annotations, Graph, Task};
use crate::key::Key;
use crate::ops::{Op, Step, StepInput};

/// What `None` annotations mean, so that `None` and the defaults compare equal.
const NO_ANNOTATIONS: Annotations =
    Annotations { priority: 0, retries: 0, resources: Vec::new(), timeout: None };

/// Fuse linear chains of `graph`, never swallowing a key in `keep`.
///
/// A task `D` is merged into `T` when `T` is `D`'s only dependent in the
/// graph, `D` is not in `keep` (outputs must stay addressable), both have
/// the same annotations, and `D` is the only dependency of `T` that could
/// be merged (so chains stay linear and the branches of a reduction stay
/// separate, parallel tasks). `T` may have other dependencies and `D` any
/// number of them; they become the fused task's `deps`, deduplicated, in
/// order of first use. Tasks that are already fused are flattened into the
/// new chain, never nested. Tasks not fused are left unchanged, in place.
///
/// One pass, O(tasks + edges). A dependency read by two members of the same
/// chain (`x → a → b`, `x → b`) is not merged: it only becomes single-use
/// after the chain is fused, and chasing that to a fixed point can take a
/// pass per task. Running `fuse` again would merge it.
pub fn fuse(graph: Graph, keep: &[Key]) -> Graph {
    let n = graph.len();
    if n < 2 {
        return graph;
    }
    let keep: FxHashSet<&Key> = keep.iter().collect();
    let mut deps = graph.dependency_positions();
    for d in &mut deps {
        d.sort_unstable();
        d.dedup();
    }
    let mut dependents = graph.dependent_positions();
    for d in &mut dependents {
        // Pushed in task order, so a repeated dependency is adjacent.
        d.dedup();
    }
    let tasks = graph.tasks();
    let fusable: Vec<bool> = tasks.iter().map(fusable_op).collect();

    // absorbs[t] = the one dependency merged into t.
    let mut absorbs: Vec<Option<u32>> = vec![None; n];
    for (t, task) in tasks.iter().enumerate() {
        if !fusable[t] {
            continue;
        }
        let mut candidates = deps[t].iter().copied().filter(|&d| {
            let dep = &tasks[d as usize];
            fusable[d as usize]
                && dependents[d as usize].as_slice() == [t as u32]
                && !keep.contains(&dep.key)
                && same_annotations(dep, task)
        });
        if let (Some(d), None) = (candidates.next(), candidates.next()) {
            absorbs[t] = Some(d);
        }
    }
    if absorbs.iter().all(Option::is_none) {
        return graph;
    }
    let mut absorbed = vec![false; n];
    for d in absorbs.iter().flatten() {
        absorbed[*d as usize] = true;
    }

    let mut slots: Vec<Option<Task>> = graph.into_tasks().into_iter().map(Some).collect();
    let mut chain: Vec<usize> = Vec::new();
    for end in 0..n {
        // A chain is named by its end: a task that absorbs but is not absorbed.
        // Tasks on a cycle (an invalid graph) have no end and stay as they are.
        if absorbed[end] || absorbs[end].is_none() {
            continue;
        }
        chain.clear();
        let mut cur = Some(end as u32);
        while let Some(c) = cur {
            chain.push(c as usize);
            cur = absorbs[c as usize];
        }
        chain.reverse();
        let members: Vec<Task> = chain.iter().filter_map(|&i| slots[i].take()).collect();
        if let Some(fused) = fuse_chain(members) {
            slots[end] = Some(fused);
        }
    }
    Graph::from_tasks(slots.into_iter().flatten())
}

/// Whether a task may take part in fusion. A fused op whose steps refer to
/// inputs that do not exist is left alone, so that running it still reports
/// the error instead of a fused chain silently reading something else.
fn fusable_op(task: &Task) -> bool {
    match &task.op {
        Op::Fused(steps) => {
            !steps.is_empty()
                && steps.iter().enumerate().all(|(i, s)| {
                    s.inputs.iter().all(|inp| match *inp {
                        StepInput::External(e) => (e as usize) < task.deps.len(),
                        StepInput::Step(j) => (j as usize) < i,
                    })
                })
        }
        _ => true,
    }
}

fn same_annotations(a: &Task, b: &Task) -> bool {
    a.annotations.as_deref().unwrap_or(&NO_ANNOTATIONS) == b.annotations.as_deref().unwrap_or(&NO_ANNOTATIONS)
}

/// Merge a chain, given in execution order, into one task keyed by its last
/// member. Each member's only in-chain dependency is the member before it
/// (any earlier member would have two dependents), so that is the only key
/// that maps to a step; every other dependency becomes an external input.
fn fuse_chain(members: Vec<Task>) -> Option<Task> {
    let mut steps: Vec<Step> = Vec::new();
    let mut ext: Vec<Key> = Vec::new();
    let mut ext_index: FxHashMap<Key, u32> = FxHashMap::default();
    // The previous member's key and the step that produces its result.
    let mut prev: Option<(Key, u32)> = None;
    let mut last: Option<(Key, Option<std::sync::Arc<Annotations>>)> = None;
    for task in members {
        let Task { key, op, deps, annotations } = task;
        let inputs: Vec<StepInput> = deps
            .iter()
            .map(|d| match &prev {
                Some((pk, ps)) if pk == d => StepInput::Step(*ps),
                _ => {
                    let next = ext.len() as u32;
                    let e = *ext_index.entry(d.clone()).or_insert_with(|| {
                        ext.push(d.clone());
                        next
                    });
                    StepInput::External(e)
                }
            })
            .collect();
        match op {
            Op::Fused(sub) => {
                let offset = steps.len() as u32;
                for s in sub {
                    let remapped = s
                        .inputs
                        .iter()
                        .map(|inp| match *inp {
                            // In range: checked by `fusable_op`.
                            StepInput::External(e) => inputs[e as usize],
                            StepInput::Step(j) => StepInput::Step(offset + j),
                        })
                        .collect();
                    steps.push(Step { key: s.key, op: s.op, inputs: remapped });
                }
            }
            op => steps.push(Step { key: key.clone(), op, inputs }),
        }
        prev = Some((key.clone(), steps.len().saturating_sub(1) as u32));
        last = Some((key, annotations));
    }
    let (key, annotations) = last?;
    Some(Task { key, op: Op::Fused(steps), deps: ext, annotations })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    use super::*;
    use crate::exec::execute;
    use crate::ops::{Arg, Builtin, Func};
    use crate::runner::{NoUdfs, TaskContext};
    use crate::value::Value;

    fn k(name: &str) -> Key {
        Key::new(name)
    }

    fn lit(name: &str, v: i64) -> Task {
        Task::new(k(name), Op::Literal(Value::Int(v)), vec![])
    }

    fn call(b: Builtin, args: Vec<Arg>) -> Op {
        Op::Call { func: Func::Builtin(b), args }
    }

    /// `name = b(deps[0], deps[1])`, or `b(deps[0], c)` for one dependency.
    fn bin(name: &str, b: Builtin, deps: &[&str], c: i64) -> Task {
        let args = match deps.len() {
            1 => vec![Arg::Dep(0), Arg::Lit(Value::Int(c))],
            _ => vec![Arg::Dep(0), Arg::Dep(1)],
        };
        Task::new(k(name), call(b, args), deps.iter().map(|d| k(d)).collect())
    }

    fn annotated(mut t: Task, priority: i64) -> Task {
        t.annotations = Some(Arc::new(Annotations { priority, ..Annotations::default() }));
        t
    }

    /// Run every task in a topological order (Kahn), iteratively;
    /// `external` supplies keys the graph does not define.
    fn evaluate(g: &Graph, external: &[(&str, i64)]) -> FxHashMap<Key, Value> {
        let mut values: FxHashMap<Key, Value> =
            external.iter().map(|(n, v)| (k(n), Value::Int(*v))).collect();
        let deps = g.dependency_positions();
        let dependents = g.dependent_positions();
        let mut waiting: Vec<usize> = deps.iter().map(Vec::len).collect();
        let mut ready: Vec<usize> = (0..g.len()).filter(|&i| waiting[i] == 0).collect();
        let cancelled = Arc::new(AtomicBool::new(false));
        let mut ran = 0;
        while let Some(i) = ready.pop() {
            let t = &g.tasks()[i];
            let inputs: Vec<Value> = t.deps.iter().map(|d| values[d].clone()).collect();
            let ctx = TaskContext::new(&t.key, &cancelled);
            let v = execute(&t.op, &inputs, &NoUdfs, &ctx).unwrap_or_else(|e| panic!("{}: {e}", t.key));
            values.insert(t.key.clone(), v);
            ran += 1;
            for &j in &dependents[i] {
                waiting[j as usize] -= 1;
                if waiting[j as usize] == 0 {
                    ready.push(j as usize);
                }
            }
        }
        assert_eq!(ran, g.len(), "graph has a cycle");
        values
    }

    /// Every task left in `fused` computes what the same key computes in `g`.
    fn assert_same_values(g: &Graph, fused: &Graph, external: &[(&str, i64)]) {
        let before = evaluate(g, external);
        let after = evaluate(fused, external);
        for t in fused.tasks() {
            assert_eq!(after[&t.key], before[&t.key], "value of {}", t.key);
        }
    }

    fn steps(t: &Task) -> &[Step] {
        match &t.op {
            Op::Fused(s) => s,
            other => panic!("{} is not fused: {other:?}", t.key),
        }
    }

    fn step_keys(t: &Task) -> Vec<String> {
        steps(t).iter().map(|s| s.key.to_string()).collect()
    }

    fn assert_flat(g: &Graph) {
        for t in g.tasks() {
            if let Op::Fused(s) = &t.op {
                assert!(s.iter().all(|s| !matches!(s.op, Op::Fused(_))), "{} nests a fused op", t.key);
            }
        }
    }

    fn chain5() -> Graph {
        Graph::from_tasks([
            lit("a", 3),
            bin("b", Builtin::Add, &["a"], 1),
            bin("c", Builtin::Mul, &["b"], 10),
            bin("d", Builtin::Sub, &["c"], 7),
            bin("e", Builtin::Rem, &["d"], 6),
        ])
    }

    #[test]
    fn five_chain_becomes_one_task_keyed_by_its_end() {
        let g = chain5();
        let f = fuse(g.clone(), &[k("e")]);
        assert_eq!(f.len(), 1);
        let t = &f.tasks()[0];
        assert_eq!(t.key, k("e"));
        assert!(t.deps.is_empty());
        assert_eq!(step_keys(t), ["a", "b", "c", "d", "e"]);
        assert_eq!(steps(t)[2].inputs, [StepInput::Step(1)]);
        assert_same_values(&g, &f, &[]);
        assert_eq!(evaluate(&f, &[])[&k("e")], Value::Int(33 % 6));
    }

    #[test]
    fn diamond_is_not_fused() {
        let g = Graph::from_tasks([
            lit("a", 2),
            bin("b", Builtin::Add, &["a"], 1),
            bin("c", Builtin::Mul, &["a"], 5),
            bin("d", Builtin::Sub, &["b", "c"], 0),
        ]);
        let f = fuse(g.clone(), &[k("d")]);
        assert_eq!(f.len(), 4);
        assert!(f.tasks().iter().all(|t| !matches!(t.op, Op::Fused(_))));
        assert_same_values(&g, &f, &[]);
    }

    #[test]
    fn diamond_with_tails_fuses_only_the_tails() {
        // s → a, a → {b, c} → d → e → f: the tail d → e → f fuses, so does s → a.
        let g = Graph::from_tasks([
            lit("s", 1),
            bin("a", Builtin::Add, &["s"], 1),
            bin("b", Builtin::Add, &["a"], 1),
            bin("c", Builtin::Mul, &["a"], 5),
            bin("d", Builtin::Sub, &["b", "c"], 0),
            bin("e", Builtin::Mul, &["d"], 3),
            bin("f", Builtin::Add, &["e"], 4),
        ]);
        let f = fuse(g.clone(), &[k("f")]);
        let keys: Vec<String> = f.tasks().iter().map(|t| t.key.to_string()).collect();
        assert_eq!(keys, ["a", "b", "c", "f"]);
        let end = f.get(&k("f")).expect("f");
        assert_eq!(step_keys(end), ["d", "e", "f"]);
        assert_eq!(end.deps, [k("b"), k("c")]);
        assert_eq!(step_keys(f.get(&k("a")).expect("a")), ["s", "a"]);
        assert_same_values(&g, &f, &[]);
    }

    #[test]
    fn keep_keys_are_not_swallowed() {
        let g = chain5();
        let f = fuse(g.clone(), &[k("c"), k("e")]);
        let keys: Vec<String> = f.tasks().iter().map(|t| t.key.to_string()).collect();
        assert_eq!(keys, ["c", "e"]);
        assert_eq!(step_keys(f.get(&k("c")).expect("c")), ["a", "b", "c"]);
        assert_eq!(step_keys(f.get(&k("e")).expect("e")), ["d", "e"]);
        assert_eq!(f.get(&k("e")).expect("e").deps, [k("c")]);
        assert_same_values(&g, &f, &[]);
        // Keeping every key fuses nothing.
        let all: Vec<Key> = g.tasks().iter().map(|t| t.key.clone()).collect();
        assert_eq!(fuse(g.clone(), &all).len(), 5);
    }

    #[test]
    fn differing_annotations_block_fusion() {
        let g = Graph::from_tasks([
            lit("a", 3),
            bin("b", Builtin::Add, &["a"], 1),
            annotated(bin("c", Builtin::Mul, &["b"], 10), 5),
            annotated(bin("d", Builtin::Sub, &["c"], 7), 5),
            bin("e", Builtin::Rem, &["d"], 6),
        ]);
        let f = fuse(g.clone(), &[k("e")]);
        let keys: Vec<String> = f.tasks().iter().map(|t| t.key.to_string()).collect();
        assert_eq!(keys, ["b", "d", "e"]);
        let d = f.get(&k("d")).expect("d");
        assert_eq!(step_keys(d), ["c", "d"]);
        assert_eq!(d.annotations.as_deref().map(|a| a.priority), Some(5));
        assert!(matches!(f.get(&k("e")).expect("e").op, Op::Call { .. }));
        assert_same_values(&g, &f, &[]);
    }

    #[test]
    fn default_annotations_equal_none() {
        let mut b = bin("b", Builtin::Add, &["a"], 1);
        b.annotations = Some(Arc::new(Annotations::default()));
        let g = Graph::from_tasks([lit("a", 1), b]);
        assert_eq!(fuse(g, &[k("b")]).len(), 1);
    }

    #[test]
    fn chain_end_may_have_other_and_external_dependencies() {
        // shared feeds both x and z; ext is outside the graph; a → b → z.
        let g = Graph::from_tasks([
            lit("shared", 4),
            lit("a", 3),
            bin("b", Builtin::Add, &["a", "ext"], 0),
            bin("x", Builtin::Mul, &["shared"], 2),
            // z = b - shared, then w = z * ext: ext and shared are external twice.
            bin("z", Builtin::Sub, &["b", "shared"], 0),
            bin("w", Builtin::Mul, &["z", "ext"], 0),
        ]);
        let f = fuse(g.clone(), &[k("w"), k("x")]);
        let keys: Vec<String> = f.tasks().iter().map(|t| t.key.to_string()).collect();
        assert_eq!(keys, ["shared", "x", "w"]);
        let w = f.get(&k("w")).expect("w");
        assert_eq!(step_keys(w), ["a", "b", "z", "w"]);
        assert_eq!(w.deps, [k("ext"), k("shared")]);
        assert_eq!(steps(w)[1].inputs, [StepInput::Step(0), StepInput::External(0)]);
        assert_eq!(steps(w)[2].inputs, [StepInput::Step(1), StepInput::External(1)]);
        assert_eq!(steps(w)[3].inputs, [StepInput::Step(2), StepInput::External(0)]);
        assert_eq!(f.external_keys(), [k("ext")]);
        assert_same_values(&g, &f, &[("ext", 100)]);
    }

    #[test]
    fn two_fusable_dependencies_stay_separate() {
        // A reduction's branches must stay parallel tasks.
        let g = Graph::from_tasks([
            lit("a", 1),
            lit("b", 2),
            bin("a1", Builtin::Add, &["a"], 1),
            bin("b1", Builtin::Add, &["b"], 1),
            bin("s", Builtin::Add, &["a1", "b1"], 0),
        ]);
        let f = fuse(g.clone(), &[k("s")]);
        let keys: Vec<String> = f.tasks().iter().map(|t| t.key.to_string()).collect();
        assert_eq!(keys, ["a1", "b1", "s"]);
        assert!(matches!(f.get(&k("s")).expect("s").op, Op::Call { .. }));
        assert_same_values(&g, &f, &[]);
    }

    #[test]
    fn repeated_dependency_maps_to_the_same_step() {
        // b = a + a: a has one (distinct) dependent.
        let g = Graph::from_tasks([
            lit("a", 21),
            Task::new(k("b"), call(Builtin::Add, vec![Arg::Dep(0), Arg::Dep(1)]), vec![k("a"), k("a")]),
        ]);
        let f = fuse(g.clone(), &[k("b")]);
        assert_eq!(f.len(), 1);
        assert_eq!(steps(&f.tasks()[0])[1].inputs, [StepInput::Step(0), StepInput::Step(0)]);
        assert_eq!(evaluate(&f, &[])[&k("b")], Value::Int(42));
    }

    #[test]
    fn fused_tasks_are_flattened_not_nested() {
        let g = chain5();
        // First pass keeps c, so a-b-c and d-e fuse separately.
        let once = fuse(g.clone(), &[k("c"), k("e")]);
        assert_eq!(once.len(), 2);
        let twice = fuse(once.clone(), &[k("e")]);
        assert_eq!(twice.len(), 1);
        assert_flat(&twice);
        assert_eq!(step_keys(&twice.tasks()[0]), ["a", "b", "c", "d", "e"]);
        assert_same_values(&g, &twice, &[]);
        // Fusing again changes nothing.
        let thrice = fuse(twice.clone(), &[k("e")]);
        assert_eq!(step_keys(&thrice.tasks()[0]), step_keys(&twice.tasks()[0]));
    }

    #[test]
    fn fused_task_with_externals_flattens_into_a_chain() {
        // A pre-fused task p (steps: p0 = x + y, p = p0 * y) followed by q.
        let p = Task::new(
            k("p"),
            Op::Fused(vec![
                Step {
                    key: k("p0"),
                    op: call(Builtin::Add, vec![Arg::Dep(0), Arg::Dep(1)]),
                    inputs: vec![StepInput::External(0), StepInput::External(1)],
                },
                Step {
                    key: k("p"),
                    op: call(Builtin::Mul, vec![Arg::Dep(0), Arg::Dep(1)]),
                    inputs: vec![StepInput::Step(0), StepInput::External(1)],
                },
            ]),
            vec![k("x"), k("y")],
        );
        let g = Graph::from_tasks([
            lit("y", 3),
            bin("x", Builtin::Add, &["ext"], 1),
            p,
            bin("q", Builtin::Sub, &["p", "y"], 0),
            bin("other", Builtin::Add, &["y"], 0),
        ]);
        let f = fuse(g.clone(), &[k("q"), k("other")]);
        let q = f.get(&k("q")).expect("q");
        assert_eq!(step_keys(q), ["x", "p0", "p", "q"]);
        assert_eq!(q.deps, [k("ext"), k("y")]);
        assert_eq!(
            steps(q).iter().map(|s| s.inputs.clone()).collect::<Vec<_>>(),
            [
                vec![StepInput::External(0)],
                vec![StepInput::Step(0), StepInput::External(1)],
                vec![StepInput::Step(1), StepInput::External(1)],
                vec![StepInput::Step(2), StepInput::External(1)],
            ]
        );
        assert_flat(&f);
        assert_same_values(&g, &f, &[("ext", 5)]);
    }

    #[test]
    fn malformed_fused_tasks_are_left_alone() {
        let bad = Task::new(
            k("bad"),
            Op::Fused(vec![Step {
                key: k("bad"),
                op: call(Builtin::Identity, vec![Arg::Dep(0)]),
                inputs: vec![StepInput::External(3)],
            }]),
            vec![k("a")],
        );
        let g = Graph::from_tasks([lit("a", 1), bad, bin("c", Builtin::Add, &["bad"], 1)]);
        assert_eq!(fuse(g, &[k("c")]).len(), 3);
        let empty = Task::new(k("e"), Op::Fused(vec![]), vec![]);
        let g = Graph::from_tasks([empty, bin("f", Builtin::Add, &["e"], 1)]);
        assert_eq!(fuse(g, &[k("f")]).len(), 2);
    }

    #[test]
    fn dependency_read_twice_by_one_chain_is_merged_on_a_second_pass() {
        // x feeds a and b, a → b: x has two dependents, so one pass fuses a-b only.
        let g = Graph::from_tasks([
            lit("x", 2),
            bin("a", Builtin::Add, &["x"], 1),
            bin("b", Builtin::Mul, &["a", "x"], 0),
        ]);
        let once = fuse(g.clone(), &[k("b")]);
        assert_eq!(step_keys(once.get(&k("b")).expect("b")), ["a", "b"]);
        assert_eq!(once.len(), 2);
        let twice = fuse(once, &[k("b")]);
        assert_eq!(twice.len(), 1);
        assert_eq!(step_keys(&twice.tasks()[0]), ["x", "a", "b"]);
        assert_same_values(&g, &twice, &[]);
    }

    #[test]
    fn cycles_are_left_alone() {
        let g = Graph::from_tasks([bin("a", Builtin::Add, &["b"], 1), bin("b", Builtin::Add, &["a"], 1)]);
        assert_eq!(fuse(g, &[]).len(), 2);
    }

    #[test]
    fn long_chains_fuse_without_recursion() {
        let n = 200_000;
        let mut tasks = vec![lit("n-0", 0)];
        for i in 1..n {
            tasks.push(bin(&format!("n-{i}"), Builtin::Add, &[&format!("n-{}", i - 1)], 1));
        }
        let g = Graph::from_tasks(tasks);
        let last = k(&format!("n-{}", n - 1));
        let f = fuse(g, std::slice::from_ref(&last));
        assert_eq!(f.len(), 1);
        assert_eq!(steps(&f.tasks()[0]).len(), n);
        assert_eq!(evaluate(&f, &[])[&last], Value::Int(n as i64 - 1));
    }

    use crate::testing::Rng;

    /// A random DAG of `n` tasks whose values stay small: one-dependency
    /// tasks add or take a remainder; wider tasks are pre-fused
    /// `(sum of deps) % 1009`, so flattening is exercised too.
    fn random_graph(rng: &mut Rng, n: usize) -> Graph {
        let name = |i: usize| format!("t-{i}");
        let mut tasks = Vec::new();
        for i in 0..n {
            let ndeps = if i == 0 { 0 } else { [0, 1, 1, 1, 1, 2, 3][rng.below(7)] };
            let mut deps: Vec<Key> = (0..ndeps)
                .map(|_| {
                    // Mostly recent tasks, so long chains form.
                    let back = if rng.below(4) == 0 { rng.below(i) } else { rng.below(i.min(3)) };
                    k(&name(i - 1 - back))
                })
                .collect();
            if rng.below(10) == 0 {
                deps.push(k("ext"));
            }
            let op = match deps.len() {
                0 => Op::Literal(Value::Int(rng.below(100) as i64)),
                1 if rng.below(2) == 0 => call(Builtin::Add, vec![Arg::Dep(0), Arg::Lit(Value::Int(1))]),
                1 => call(Builtin::Rem, vec![Arg::Dep(0), Arg::Lit(Value::Int(97))]),
                m => {
                    let mut steps = vec![Step {
                        key: k(&format!("{}-s0", name(i))),
                        op: call(Builtin::Add, vec![Arg::Dep(0), Arg::Dep(1)]),
                        inputs: vec![StepInput::External(0), StepInput::External(1)],
                    }];
                    for e in 2..m {
                        steps.push(Step {
                            key: k(&format!("{}-s{}", name(i), e - 1)),
                            op: call(Builtin::Add, vec![Arg::Dep(0), Arg::Dep(1)]),
                            inputs: vec![StepInput::Step(e as u32 - 2), StepInput::External(e as u32)],
                        });
                    }
                    let last = steps.len() as u32 - 1;
                    steps.push(Step {
                        key: k(&name(i)),
                        op: call(Builtin::Rem, vec![Arg::Dep(0), Arg::Lit(Value::Int(1009))]),
                        inputs: vec![StepInput::Step(last)],
                    });
                    Op::Fused(steps)
                }
            };
            let mut t = Task::new(k(&name(i)), op, deps);
            if rng.below(20) == 0 {
                t = annotated(t, 1);
            }
            tasks.push(t);
        }
        // Positions need not be topological: shuffle them.
        for i in (1..tasks.len()).rev() {
            tasks.swap(i, rng.below(i + 1));
        }
        Graph::from_tasks(tasks)
    }

    #[test]
    fn random_graphs_compute_the_same_values() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut total_before = 0;
        let mut total_after = 0;
        for round in 0..200 {
            let n = 1 + rng.below(60);
            let g = random_graph(&mut rng, n);
            let keep: Vec<Key> =
                g.tasks().iter().filter(|_| rng.below(8) == 0).map(|t| t.key.clone()).collect();
            let f = fuse(g.clone(), &keep);
            for key in &keep {
                assert!(f.contains(key), "round {round}: kept key {key} was swallowed");
            }
            // Sinks are never swallowed either: nothing refers to them.
            for (t, ds) in g.tasks().iter().zip(g.dependent_positions()) {
                if ds.is_empty() {
                    assert!(f.contains(&t.key), "round {round}: sink {} vanished", t.key);
                }
            }
            assert_flat(&f);
            // Every step key appears exactly once across the fused graph.
            let count_steps = |g: &Graph| -> usize {
                g.tasks()
                    .iter()
                    .map(|t| match &t.op {
                        Op::Fused(s) => s.len(),
                        _ => 1,
                    })
                    .sum()
            };
            assert_eq!(count_steps(&f), count_steps(&g), "round {round}");
            assert_same_values(&g, &f, &[("ext", 7)]);
            // Fusing again stays flat and correct (it may merge a little
            // more: a dependency used twice inside one chain is merged now).
            let again = fuse(f.clone(), &keep);
            assert!(again.len() <= f.len());
            assert_flat(&again);
            assert_same_values(&g, &again, &[("ext", 7)]);
            total_before += g.len();
            total_after += f.len();
        }
        // About a quarter of these tasks are links of linear chains.
        assert!(
            total_after * 5 < total_before * 4,
            "fusion removed too little: {total_after}/{total_before}"
        );
    }
}
