//! Graphviz output of a task graph (`x.visualize("g.dot")`), drawn as Dask
//! draws it: a circle per task (its group and block index), a box per
//! result, arrows along the data flow.

use std::fmt::Write;

use super::task::Graph;
use crate::ops::{Func, Op};

/// The graph as Graphviz `dot` text. External inputs (futures, persisted
/// results) are drawn as grey boxes.
pub fn to_dot(graph: &Graph) -> String {
    let mut out = String::from("digraph {\n  graph [rankdir=BT];\n  node [fontsize=10];\n");
    let id = |k: &crate::key::Key| format!("\"{}\"", escape(&k.to_string()));
    for t in graph.tasks() {
        let what = match &t.op {
            Op::Literal(_) => "literal".to_string(),
            Op::Call { func: Func::Udf(u), .. } => u.label.clone(),
            Op::Call { func: Func::Builtin(b), .. } => b.name().to_string(),
            Op::Call { func: Func::Array(a), .. } => a.name(),
            Op::Call { func: Func::Bag(b), .. } => b.name().to_string(),
            Op::Call { func: Func::Frame(f), .. } => f.name().to_string(),
            Op::Call { func: Func::Block(b), .. } => match &b.func {
                Func::Udf(u) => u.label.clone(),
                _ => "map_blocks".to_string(),
            },
            Op::Fused(steps) => format!("fused ({} steps)", steps.len()),
        };
        let index: Vec<String> = t.key.index().iter().map(u32::to_string).collect();
        let label = if index.is_empty() { what } else { format!("{what} ({})", index.join(", ")) };
        let _ = writeln!(out, "  {} [shape=circle, label=\"{}\"];", id(&t.key), escape(&label));
        for d in &t.deps {
            let _ = writeln!(out, "  {} -> {};", id(d), id(&t.key));
        }
    }
    for k in graph.external_keys() {
        let _ = writeln!(
            out,
            "  {} [shape=box, style=filled, fillcolor=lightgrey, label=\"{}\"];",
            id(&k),
            escape(k.group())
        );
    }
    out.push_str("}\n");
    out
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::task::Task;
    use crate::key::Key;
    use crate::ops::{Arg, Builtin};
    use crate::value::Value;

    #[test]
    fn tasks_edges_and_external_inputs_are_drawn() {
        let g = Graph::from_tasks(vec![
            Task::new(Key::new("a-00000000"), Op::Literal(Value::Int(1)), vec![]),
            Task::new(
                Key::new("add-11111111"),
                Op::Call { func: Func::Builtin(Builtin::Add), args: vec![Arg::Dep(0), Arg::Dep(1)] },
                vec![Key::new("a-00000000"), Key::new("ext-22222222")],
            ),
        ]);
        let dot = to_dot(&g);
        assert!(dot.starts_with("digraph {"));
        assert!(dot.contains("\"a-00000000\" -> \"add-11111111\";"), "{dot}");
        assert!(dot.contains("\"ext-22222222\" -> \"add-11111111\";"), "{dot}");
        assert!(dot.contains("\"add-11111111\" [shape=circle, label=\"add\"];"), "{dot}");
        assert!(
            dot.contains("\"ext-22222222\" [shape=box, style=filled, fillcolor=lightgrey, label=\"ext\"];"),
            "{dot}"
        );
    }
}
