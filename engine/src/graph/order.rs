//! Static task ordering: a priority for every task, as `dask.order`.
//!
//! When more tasks are ready than there are threads, the scheduler runs the
//! lowest number first. The numbering follows a depth-first walk from the
//! outputs, so a branch is finished (and its intermediates freed) before the
//! next one starts: that keeps the results held in memory low.

use super::task::Graph;
use crate::key::Key;

const UNSEEN: u8 = 0;
const ENTERED: u8 = 1;
const DONE: u8 = 2;

/// A priority for each task, indexed by position in `graph.tasks()`: lower
/// runs first, a permutation of `0..n`, each task numbered after all of its
/// dependencies (for an acyclic graph).
///
/// The numbering is the post-order of an iterative depth-first walk that
/// starts from `outputs` in the given order (keys the graph does not define
/// are ignored), then from the tasks nothing depends on, then from any task
/// still unnumbered (only a cyclic graph has those), each in graph order. At
/// every task the walk descends first into the dependency with the most
/// (approximate) total dependencies, as Sethi–Ullman register allocation
/// evaluates the heavier subtree first: the lighter one's result then waits
/// for a shorter time. Ties go to the smaller key, so the result does not
/// depend on hash order or, when every sink is an output, on task positions.
///
/// One refinement over the plain walk, as `dask.order` does: a task whose
/// inputs are all numbered and that is the last consumer of one of them is
/// numbered at once, wherever it lies in the walk, since running it frees
/// that input and holds one result in its place. Without it, `x + x.T`
/// holds both blocks of every transposed pair from the first row of the
/// walk until the pair's second row.
pub fn order(graph: &Graph, outputs: &[Key]) -> Vec<u32> {
    let n = graph.len();
    let tasks = graph.tasks();
    let mut deps = graph.dependency_positions();
    for d in &mut deps {
        d.sort_unstable();
        d.dedup();
    }
    let mut dependents: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (i, ds) in deps.iter().enumerate() {
        for &d in ds {
            dependents[d as usize].push(i as u32);
        }
    }
    let total = total_dependencies(&deps, &dependents);
    for d in &mut deps {
        d.sort_by(|&a, &b| {
            let (a, b) = (a as usize, b as usize);
            total[b].cmp(&total[a]).then_with(|| tasks[a].key.cmp(&tasks[b].key))
        });
    }
    // By key, so eager numbering does not depend on positions either.
    for ds in &mut dependents {
        ds.sort_by(|&a, &b| tasks[a as usize].key.cmp(&tasks[b as usize].key));
    }

    let roots = outputs
        .iter()
        .filter_map(|k| graph.position(k))
        .chain((0..n).filter(|&i| dependents[i].is_empty()))
        .chain(0..n);
    let mut num = Numbering {
        state: vec![UNSEEN; n],
        priority: vec![0; n],
        next: 0,
        missing: deps.iter().map(|d| d.len() as u32).collect(),
        remaining: dependents.iter().map(|d| d.len() as u32).collect(),
        deps: &deps,
        dependents: &dependents,
        work: Vec::new(),
    };
    // (task, expanded): a task is pushed unexpanded; on its first pop it is
    // pushed again expanded, with its unseen dependencies above it (heaviest
    // on top), so it is numbered once all of them are. A task reached again
    // while ENTERED would close a cycle and is skipped; one popped expanded
    // but already DONE was numbered early by `Numbering::number`.
    let mut stack: Vec<(u32, bool)> = Vec::new();
    for root in roots {
        if num.state[root] != UNSEEN {
            continue;
        }
        stack.push((root as u32, false));
        while let Some((i, expanded)) = stack.pop() {
            let iu = i as usize;
            if expanded {
                if num.state[iu] != DONE {
                    num.number(iu);
                }
                continue;
            }
            if num.state[iu] != UNSEEN {
                continue;
            }
            num.state[iu] = ENTERED;
            stack.push((i, true));
            stack.extend(
                deps[iu].iter().rev().filter(|&&d| num.state[d as usize] == UNSEEN).map(|&d| (d, false)),
            );
        }
    }
    num.priority
}

/// The numbering in progress, with the counts that find tasks to run early.
struct Numbering<'a> {
    state: Vec<u8>,
    priority: Vec<u32>,
    next: u32,
    /// Per task, how many of its dependencies are not numbered yet.
    missing: Vec<u32>,
    /// Per task, how many of its dependents are not numbered yet.
    remaining: Vec<u32>,
    deps: &'a [Vec<u32>],
    dependents: &'a [Vec<u32>],
    work: Vec<u32>,
}

impl Numbering<'_> {
    /// Number `t`, then every task that becomes ready and frees an input
    /// by running, transitively (a worklist, not recursion). Each early task
    /// frees at least one result and holds one, so memory never grows.
    fn number(&mut self, t: usize) {
        self.assign(t);
        while let Some(t) = self.work.pop() {
            let t = t as usize;
            for &d in &self.deps[t] {
                let d = d as usize;
                self.remaining[d] -= 1;
                if self.remaining[d] == 1 {
                    // Its one consumer left frees it: run that now if it can.
                    let last =
                        self.dependents[d].iter().map(|&u| u as usize).find(|&u| self.state[u] != DONE);
                    if let Some(u) = last
                        && self.missing[u] == 0
                    {
                        self.assign(u);
                    }
                }
            }
            for &u in &self.dependents[t] {
                let u = u as usize;
                self.missing[u] -= 1;
                if self.missing[u] == 0
                    && self.state[u] != DONE
                    && self.deps[u].iter().any(|&d| self.remaining[d as usize] == 1)
                {
                    self.assign(u);
                }
            }
        }
    }

    fn assign(&mut self, t: usize) {
        self.state[t] = DONE;
        self.priority[t] = self.next;
        self.next += 1;
        self.work.push(t as u32);
    }
}

/// For each task, 1 + the sum over its (distinct, in-graph) dependencies,
/// computed leaves-first (Kahn) without recursion. Shared dependencies are
/// counted once per path, hence "approximate"; the sum saturates. Tasks on a
/// cycle keep 1.
fn total_dependencies(deps: &[Vec<u32>], dependents: &[Vec<u32>]) -> Vec<u64> {
    let n = deps.len();
    let mut waiting: Vec<usize> = deps.iter().map(Vec::len).collect();
    let mut ready: Vec<usize> = (0..n).filter(|&i| waiting[i] == 0).collect();
    let mut total = vec![1u64; n];
    while let Some(i) = ready.pop() {
        total[i] = deps[i].iter().fold(1u64, |acc, &d| acc.saturating_add(total[d as usize]));
        for &j in &dependents[i] {
            let j = j as usize;
            waiting[j] -= 1;
            if waiting[j] == 0 {
                ready.push(j);
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    use std::sync::Arc;

    use rustc_hash::FxHashSet;

    use super::*;
    use crate::graph::task::Task;
    use crate::ops::{Arg, Builtin, Func, Op};
    use crate::value::Value;

    fn k(name: &str) -> Key {
        Key::new(name)
    }

    fn leaf(key: Key) -> Task {
        Task::new(key, Op::Literal(Value::Int(1)), vec![])
    }

    fn add(key: Key, deps: Vec<Key>) -> Task {
        let args = (0..deps.len() as u32).map(Arg::Dep).collect();
        Task::new(key, Op::Call { func: Func::Builtin(Builtin::Add), args }, deps)
    }

    fn named(name: &str, deps: &[&str]) -> Task {
        if deps.is_empty() { leaf(k(name)) } else { add(k(name), deps.iter().map(|d| k(d)).collect()) }
    }

    fn prio_of(g: &Graph, prio: &[u32], name: &str) -> u32 {
        prio[g.position(&k(name)).expect("task")]
    }

    /// A permutation of 0..n in which every dependency comes first.
    fn assert_valid(g: &Graph, prio: &[u32]) {
        assert_eq!(prio.len(), g.len());
        let mut seen = vec![false; g.len()];
        for &p in prio {
            assert!(!std::mem::replace(&mut seen[p as usize], true), "priority {p} given twice");
        }
        for (i, ds) in g.dependency_positions().iter().enumerate() {
            for &d in ds {
                assert!(
                    prio[d as usize] < prio[i],
                    "{} must come before {}",
                    g.tasks()[d as usize].key,
                    g.tasks()[i].key
                );
            }
        }
    }

    /// Run tasks one at a time, always the lowest-numbered ready one, and
    /// return the most results held at once (inputs and the new output both
    /// count while a task runs; outputs are never freed).
    fn max_held(g: &Graph, prio: &[u32], outputs: &[Key]) -> usize {
        let n = g.len();
        let mut deps = g.dependency_positions();
        for d in &mut deps {
            d.sort_unstable();
            d.dedup();
        }
        let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, ds) in deps.iter().enumerate() {
            for &d in ds {
                dependents[d as usize].push(i);
            }
        }
        let keep: FxHashSet<usize> = outputs.iter().filter_map(|key| g.position(key)).collect();
        let mut waiting: Vec<usize> = deps.iter().map(Vec::len).collect();
        let mut users: Vec<usize> = dependents.iter().map(Vec::len).collect();
        let mut ready: BinaryHeap<Reverse<(u32, usize)>> =
            (0..n).filter(|&i| waiting[i] == 0).map(|i| Reverse((prio[i], i))).collect();
        let (mut held, mut most, mut ran) = (0usize, 0usize, 0usize);
        while let Some(Reverse((_, i))) = ready.pop() {
            ran += 1;
            held += 1;
            most = most.max(held);
            for &d in &deps[i] {
                let d = d as usize;
                users[d] -= 1;
                if users[d] == 0 && !keep.contains(&d) {
                    held -= 1;
                }
            }
            if users[i] == 0 && !keep.contains(&i) {
                held -= 1;
            }
            for &j in &dependents[i] {
                waiting[j] -= 1;
                if waiting[j] == 0 {
                    ready.push(Reverse((prio[j], j)));
                }
            }
        }
        assert_eq!(ran, n, "every task runs");
        most
    }

    use crate::testing::Rng;

    /// A random DAG (task i depends only on tasks < i, sometimes on an
    /// external key or on one key twice), in shuffled positions.
    fn random_tasks(rng: &mut Rng, n: usize) -> Vec<Task> {
        let mut tasks = Vec::with_capacity(n);
        for i in 0..n {
            let ndeps = if i == 0 { 0 } else { rng.below(5) };
            let mut deps: Vec<Key> =
                (0..ndeps).map(|_| Key::block(Arc::from("r"), &[rng.below(i) as u32])).collect();
            if rng.below(10) == 0 {
                deps.push(k("ext"));
            }
            tasks.push(add(Key::block(Arc::from("r"), &[i as u32]), deps));
        }
        shuffle(rng, &mut tasks);
        tasks
    }

    fn shuffle(rng: &mut Rng, tasks: &mut [Task]) {
        for i in (1..tasks.len()).rev() {
            tasks.swap(i, rng.below(i + 1));
        }
    }

    #[test]
    fn dependencies_come_first_on_random_dags() {
        let mut rng = Rng(0x1234_5678_9abc_def1);
        for _ in 0..300 {
            let n = 1 + rng.below(80);
            let g = Graph::from_tasks(random_tasks(&mut rng, n));
            let mut outputs: Vec<Key> =
                g.tasks().iter().filter(|_| rng.below(6) == 0).map(|t| t.key.clone()).collect();
            outputs.push(k("ext"));
            outputs.push(k("unknown"));
            assert_valid(&g, &order(&g, &outputs));
            assert_valid(&g, &order(&g, &[]));
        }
    }

    #[test]
    fn order_is_deterministic() {
        let build = || {
            let mut rng = Rng(42);
            Graph::from_tasks(random_tasks(&mut rng, 500))
        };
        let (a, b) = (build(), build());
        let outputs = [a.tasks()[3].key.clone(), a.tasks()[100].key.clone()];
        assert_eq!(order(&a, &outputs), order(&b, &outputs));
    }

    #[test]
    fn order_does_not_depend_on_positions_when_sinks_are_outputs() {
        let mut rng = Rng(7);
        let mut tasks = random_tasks(&mut rng, 300);
        let g1 = Graph::from_tasks(tasks.clone());
        let sinks: Vec<Key> = g1
            .tasks()
            .iter()
            .zip(g1.dependent_positions())
            .filter(|(_, ds)| ds.is_empty())
            .map(|(t, _)| t.key.clone())
            .collect();
        let mut outputs = sinks.clone();
        outputs.sort();
        let p1 = order(&g1, &outputs);
        shuffle(&mut rng, &mut tasks);
        let g2 = Graph::from_tasks(tasks);
        let p2 = order(&g2, &outputs);
        for (i, t) in g1.tasks().iter().enumerate() {
            assert_eq!(p1[i], p2[g2.position(&t.key).expect("same keys")], "{}", t.key);
        }
    }

    #[test]
    fn heavier_dependency_runs_first_and_ties_go_to_the_smaller_key() {
        // out = light + heavy, heavy = chain of three.
        let g = Graph::from_tasks([
            named("out", &["light", "h3"]),
            named("light", &[]),
            named("h1", &[]),
            named("h2", &["h1"]),
            named("h3", &["h2"]),
        ]);
        let p = order(&g, &[k("out")]);
        assert_valid(&g, &p);
        let names = ["h1", "h2", "h3", "light", "out"];
        assert_eq!(names.map(|n| prio_of(&g, &p, n)), [0, 1, 2, 3, 4]);

        let g = Graph::from_tasks([named("s", &["y", "x"]), named("y", &[]), named("x", &[])]);
        let p = order(&g, &[k("s")]);
        assert_eq!(["x", "y", "s"].map(|n| prio_of(&g, &p, n)), [0, 1, 2]);
    }

    #[test]
    fn outputs_are_finished_in_the_order_given_then_the_rest() {
        let g = Graph::from_tasks([
            named("a", &[]),
            named("p", &["a"]),
            named("b", &[]),
            named("q", &["b"]),
            named("c", &[]),
            named("r", &["c"]),
        ]);
        let p = order(&g, &[k("q"), k("missing"), k("p")]);
        assert_valid(&g, &p);
        assert_eq!(["b", "q", "a", "p", "c", "r"].map(|n| prio_of(&g, &p, n)), [0, 1, 2, 3, 4, 5]);
        // No outputs: start from the sinks, in graph order.
        let p = order(&g, &[]);
        assert_eq!(["a", "p", "b", "q", "c", "r"].map(|n| prio_of(&g, &p, n)), [0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn cycles_still_get_a_permutation() {
        let g = Graph::from_tasks([
            named("a", &["c"]),
            named("b", &["a"]),
            named("c", &["b"]),
            named("d", &["c"]),
        ]);
        let mut p = order(&g, &[k("d")]);
        assert_eq!(prio_of(&g, &p, "d"), 3);
        p.sort_unstable();
        assert_eq!(p, [0, 1, 2, 3]);
        assert!(order(&Graph::default(), &[k("x")]).is_empty());
    }

    /// A pairwise tree reduction over `n` leaves; returns the graph and its root.
    fn tree_reduction(n: usize) -> (Graph, Key) {
        let leaf_name: Arc<str> = Arc::from("leaf");
        let sum_name: Arc<str> = Arc::from("sum");
        let mut tasks: Vec<Task> = (0..n).map(|i| leaf(Key::block(leaf_name.clone(), &[i as u32]))).collect();
        let mut level: Vec<Key> = tasks.iter().map(|t| t.key.clone()).collect();
        let mut depth = 0u32;
        while level.len() > 1 {
            depth += 1;
            let mut up = Vec::with_capacity(level.len().div_ceil(2));
            for (j, pair) in level.chunks(2).enumerate() {
                if let [x, y] = pair {
                    let key = Key::block(sum_name.clone(), &[depth, j as u32]);
                    tasks.push(add(key.clone(), vec![x.clone(), y.clone()]));
                    up.push(key);
                } else {
                    up.push(pair[0].clone());
                }
            }
            level = up;
        }
        (Graph::from_tasks(tasks), level[0].clone())
    }

    #[test]
    fn tree_reduction_holds_logarithmically_many_results() {
        let n = 100_000;
        let (g, root) = tree_reduction(n);
        let outputs = [root];
        let p = order(&g, &outputs);
        assert_valid(&g, &p);
        let most = max_held(&g, &p, &outputs);
        let bound = 2.0 * (n as f64).log2() + 4.0;
        assert!((most as f64) <= bound, "held {most} results, bound {bound}");
        // Construction order (all leaves first) would hold every leaf.
        let naive: Vec<u32> = (0..g.len() as u32).collect();
        assert!(max_held(&g, &naive, &outputs) >= n / 2);
    }

    #[test]
    fn transpose_add_holds_few_blocks() {
        // x + x.T on an 8x8 grid of blocks, then a pairwise sum of the results.
        let m = 8u32;
        let x: Arc<str> = Arc::from("x");
        let r: Arc<str> = Arc::from("add");
        let mut tasks = Vec::new();
        for i in 0..m {
            for j in 0..m {
                tasks.push(leaf(Key::block(x.clone(), &[i, j])));
            }
        }
        let mut level = Vec::new();
        for i in 0..m {
            for j in 0..m {
                let key = Key::block(r.clone(), &[i, j]);
                let deps = vec![Key::block(x.clone(), &[i, j]), Key::block(x.clone(), &[j, i])];
                tasks.push(add(key.clone(), deps));
                level.push(key);
            }
        }
        let s: Arc<str> = Arc::from("sum");
        let mut depth = 0;
        while level.len() > 1 {
            depth += 1;
            level = level
                .chunks(2)
                .enumerate()
                .map(|(j, pair)| {
                    let key = Key::block(s.clone(), &[depth, j as u32]);
                    tasks.push(add(key.clone(), pair.to_vec()));
                    key
                })
                .collect();
        }
        let g = Graph::from_tasks(tasks);
        let outputs = [level[0].clone()];
        let p = order(&g, &outputs);
        assert_valid(&g, &p);
        let most = max_held(&g, &p, &outputs);
        // The plain depth-first walk holds 44 here; freeing eagerly, 16.
        assert!(most < 24, "held {most} of {} blocks", m * m);
    }

    #[test]
    fn long_chains_order_without_stack_overflow() {
        let n = 200_000u32;
        let c: Arc<str> = Arc::from("chain");
        let mut tasks = vec![leaf(Key::block(c.clone(), &[0]))];
        for i in 1..n {
            tasks.push(add(Key::block(c.clone(), &[i]), vec![Key::block(c.clone(), &[i - 1])]));
        }
        let g = Graph::from_tasks(tasks);
        let p = order(&g, &[Key::block(c.clone(), &[n - 1])]);
        assert!(p.iter().enumerate().all(|(i, &x)| x == i as u32));
        // Reversed positions and no outputs: same numbering by key.
        let g = Graph::from_tasks(g.into_tasks().into_iter().rev());
        let p = order(&g, &[]);
        assert!(p.iter().enumerate().all(|(i, &x)| x == n - 1 - i as u32));
    }
}
