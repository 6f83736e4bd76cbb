//! Narrowing: a task whose list result is only ever picked apart (every
//! task reading it takes items by index, `Item(k)`) computes just the items
//! read, when its op has a cheaper form for them. `svd(x)[1]` then computes
//! singular values without the factors U and V, as NumPy's
//! `compute_uv=False`, though `svd` builds one task for all three.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use super::task::Graph;
use crate::array::op::ArrayOp;
use crate::key::Key;
use crate::ops::{Func, Op};

/// The graph with such tasks narrowed; `keep` (outputs, held results) are
/// read whole by someone outside the graph and stay as they are.
pub fn narrow(graph: Graph, keep: &[Key]) -> Graph {
    // For each key: the items its readers take, or None once one reads it whole.
    let mut used: HashMap<&Key, Option<BTreeSet<usize>>> = HashMap::new();
    for t in graph.tasks() {
        let item = match &t.op {
            Op::Call { func: Func::Array(op), .. } => match op.as_ref() {
                ArrayOp::Item(k) => Some(*k),
                _ => None,
            },
            _ => None,
        };
        for d in &t.deps {
            let entry = used.entry(d).or_insert_with(|| Some(BTreeSet::new()));
            match (entry.as_mut(), item) {
                (Some(set), Some(k)) if t.deps.len() == 1 => {
                    set.insert(k);
                }
                _ => *entry = None,
            }
        }
    }
    let keep: HashSet<&Key> = keep.iter().collect();
    let narrowed: HashMap<Key, ArrayOp> = graph
        .tasks()
        .iter()
        .filter(|t| !keep.contains(&t.key))
        .filter_map(|t| {
            let Op::Call { func: Func::Array(op), .. } = &t.op else { return None };
            let items = used.get(&t.key)?.as_ref().filter(|s| !s.is_empty())?;
            Some((t.key.clone(), op.narrow(items)?))
        })
        .collect();
    if narrowed.is_empty() {
        return graph;
    }
    // A narrowed task computes another value, so it gets another key: a
    // runtime holding the whole value under the old key must not hand it
    // out for this one, nor this one for it.
    let renamed: HashMap<Key, Key> = narrowed.iter().map(|(k, op)| (k.clone(), rename(k, op))).collect();
    Graph::from_tasks(graph.into_tasks().into_iter().map(|mut t| {
        if let Some(op) = narrowed.get(&t.key)
            && let Op::Call { func, .. } = &mut t.op
        {
            *func = Func::Array(Arc::new(op.clone()));
            t.key = renamed[&t.key].clone();
        }
        for d in &mut t.deps {
            if let Some(k) = renamed.get(d) {
                *d = k.clone();
            }
        }
        t
    }))
}

/// `svd-<token>` becomes `svd-values-<token>`: the op's name, same token.
fn rename(key: &Key, op: &ArrayOp) -> Key {
    let name = key.name();
    let group = crate::key::group_of(name);
    let token = if group.len() < name.len() { &name[group.len() + 1..] } else { name };
    Key::block(Arc::from(format!("{}-{token}", op.name())), key.index())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::task::Task;
    use crate::ops::Arg;

    fn array(name: &str, op: ArrayOp, deps: &[&str]) -> Task {
        Task::new(
            Key::new(name),
            Op::Call {
                func: Func::Array(Arc::new(op)),
                args: (0..deps.len()).map(|i| Arg::Dep(i as u32)).collect(),
            },
            deps.iter().map(|d| Key::new(*d)).collect(),
        )
    }

    fn op_of(g: &Graph, key: &str) -> String {
        let t = g.tasks().iter().find(|t| t.key.name().starts_with(key)).expect("task");
        match &t.op {
            Op::Call { func: Func::Array(op), .. } => op.name(),
            _ => "other".into(),
        }
    }

    #[test]
    fn an_svd_read_only_for_its_values_computes_only_them() {
        let g = || {
            Graph::from_tasks(vec![
                array("x", ArrayOp::Transpose(vec![0, 1]), &[]),
                array("svd", ArrayOp::Svd, &["x"]),
                array("s", ArrayOp::Item(1), &["svd"]),
                array("s2", ArrayOp::Item(1), &["svd"]),
            ])
        };
        let n = narrow(g(), &[Key::new("s")]);
        assert_eq!(op_of(&n, "svd"), "svd-values");
        let s = &n.tasks()[n.position(&Key::new("s")).expect("s")];
        assert_eq!(s.deps, vec![Key::new("svd-values-svd")], "readers follow the new key");
        // Held or requested whole: left as it is.
        assert_eq!(op_of(&narrow(g(), &[Key::new("svd")]), "svd"), "svd");
        // A reader of U, or one that reads the whole list: the full SVD.
        let mut tasks = g().into_tasks();
        tasks.push(array("u", ArrayOp::Item(0), &["svd"]));
        assert_eq!(op_of(&narrow(Graph::from_tasks(tasks), &[]), "svd"), "svd");
        let mut tasks = g().into_tasks();
        tasks.push(array("all", ArrayOp::Concat { numblocks: vec![1] }, &["svd"]));
        assert_eq!(op_of(&narrow(Graph::from_tasks(tasks), &[]), "svd"), "svd");
    }
}
