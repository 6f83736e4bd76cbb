//! Culling: drop the tasks that the requested outputs do not need.
//!
//! `materialize` culls at layer granularity; this pass works per task, so a
//! request for one block of a large array computes only that block's inputs.

use super::task::Graph;
use crate::key::Key;

/// The subgraph of tasks reachable (through dependencies) from `outputs`.
///
/// Output keys that the graph does not define are ignored: they are external
/// results the runtime already holds. Kept tasks stay in their relative
/// order, so positions still roughly follow construction order. The walk uses
/// an explicit stack: chains can be hundreds of thousands of tasks deep.
pub fn cull(graph: Graph, outputs: &[Key]) -> Graph {
    let tasks = graph.tasks();
    let mut keep = vec![false; tasks.len()];
    let mut stack: Vec<usize> = Vec::new();
    for key in outputs {
        if let Some(i) = graph.position(key)
            && !keep[i]
        {
            keep[i] = true;
            stack.push(i);
        }
    }
    while let Some(i) = stack.pop() {
        for d in &tasks[i].deps {
            if let Some(j) = graph.position(d)
                && !keep[j]
            {
                keep[j] = true;
                stack.push(j);
            }
        }
    }
    if keep.iter().all(|&k| k) {
        return graph;
    }
    Graph::from_tasks(graph.into_tasks().into_iter().zip(keep).filter(|(_, k)| *k).map(|(t, _)| t))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::task::Task;
    use crate::ops::Op;
    use crate::value::Value;

    fn k(name: &str) -> Key {
        Key::new(name)
    }

    fn task(name: &str, deps: &[&str]) -> Task {
        Task::new(k(name), Op::Literal(Value::Int(0)), deps.iter().map(|d| k(d)).collect())
    }

    fn keys(g: &Graph) -> Vec<String> {
        g.tasks().iter().map(|t| t.key.to_string()).collect()
    }

    /// a → b → c, a → d, e alone; x → y.
    fn sample() -> Graph {
        Graph::from_tasks([
            task("e", &[]),
            task("c", &["b"]),
            task("a", &[]),
            task("b", &["a"]),
            task("d", &["a"]),
            task("x", &[]),
            task("y", &["x", "ext"]),
        ])
    }

    #[test]
    fn keeps_only_reachable_tasks_in_their_original_order() {
        let g = cull(sample(), &[k("c")]);
        assert_eq!(keys(&g), ["c", "a", "b"]);
        let g = cull(sample(), &[k("d"), k("c")]);
        assert_eq!(keys(&g), ["c", "a", "b", "d"]);
        // Lookups work on the culled graph.
        assert_eq!(g.position(&k("b")), Some(2));
        assert!(!g.contains(&k("e")));
    }

    #[test]
    fn external_and_unknown_outputs_are_ignored() {
        let g = cull(sample(), &[k("ext"), k("nope"), k("y")]);
        assert_eq!(keys(&g), ["x", "y"]);
        assert_eq!(g.external_keys(), vec![k("ext")]);
        assert!(cull(sample(), &[k("nope")]).is_empty());
        assert!(cull(sample(), &[]).is_empty());
    }

    #[test]
    fn duplicate_outputs_and_shared_dependencies_are_kept_once() {
        let g = Graph::from_tasks([
            task("a", &[]),
            task("b", &["a", "a"]),
            task("c", &["a"]),
            task("d", &["b", "c"]),
        ]);
        let out = cull(g.clone(), &[k("d"), k("d"), k("b")]);
        assert_eq!(keys(&out), ["a", "b", "c", "d"]);
    }

    #[test]
    fn everything_needed_returns_the_same_graph() {
        let g = sample();
        let out = cull(g.clone(), &[k("c"), k("d"), k("e"), k("y")]);
        assert_eq!(keys(&out), keys(&g));
    }

    #[test]
    fn deep_chains_cull_without_recursion() {
        let n = 200_000;
        let mut tasks = vec![task("n-0", &[])];
        for i in 1..n {
            tasks.push(task(&format!("n-{i}"), &[&format!("n-{}", i - 1)]));
        }
        tasks.push(task("unused", &["n-5"]));
        let g = Graph::from_tasks(tasks);
        let out = cull(g.clone(), &[k(&format!("n-{}", n - 1))]);
        assert_eq!(out.len(), n);
        assert!(!out.contains(&k("unused")));
        let half = cull(g.clone(), &[k("n-99")]);
        assert_eq!(half.len(), 100);
    }
}
