//! The API reference: one entry per script function, with a summary and a
//! Rhai example. It is the single doc source for `:help`, completion and
//! Jupyter's inspect; tests check that every registered function has an
//! entry and that every example runs.

/// Documentation of one function, method or property.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FnDoc {
    /// The name scripts use (`delayed`, `result`, `status`).
    pub name: &'static str,
    /// How it is called.
    pub signature: &'static str,
    /// One or two sentences.
    pub summary: &'static str,
    /// A self-contained script that uses it (run by the tests).
    pub example: &'static str,
}

const fn doc(
    name: &'static str,
    signature: &'static str,
    summary: &'static str,
    example: &'static str,
) -> FnDoc {
    FnDoc { name, signature, summary, example }
}

/// Every documented entry, in the order of the guide.
pub const DOCS: &[FnDoc] = &[
    doc(
        "delayed",
        "delayed(f) -> function",
        "Make a function lazy: `d.call(args...)` builds a task instead of running it. Arguments may be lazy values, futures, or arrays and maps holding them (dask.delayed).",
        "fn inc(x) { x + 1 }\nlet d = delayed(inc);\nlet x = d.call(1);\nx.compute()",
    ),
    doc(
        "delayed_value",
        "delayed_value(v) -> Delayed",
        "Wrap a plain value (or an array of lazy values) as a lazy value.",
        "let v = delayed_value([1, 2, 3]);\nv.compute()",
    ),
    doc(
        "compute",
        "compute(a, b, ...) -> array | x.compute() -> value",
        "Run lazy values in one graph, so shared work runs once. With one lazy value (or as a method) it returns the value; with several, an array. Arrays and maps are searched for lazy values.",
        "let a = delayed(|x| x * 2).call(21);\ncompute(a + 1, a - 1)",
    ),
    doc(
        "persist",
        "x.persist() -> Delayed",
        "Compute now and keep the result in memory; later graphs read it instead of recomputing.",
        "let x = delayed(|v| v * 2).call(21).persist();\ncompute(x + 1, x * 2)",
    ),
    doc(
        "visualize",
        "x.visualize(path)",
        "Write the task graph as Graphviz: `.dot` text, or `.svg`/`.png`/`.pdf` when the `dot` program is installed.",
        "let x = delayed(|v| v + 1).call(1);\nx.visualize(\"/tmp/brisk-doc-graph.dot\")",
    ),
    doc(
        "graph_info",
        "x.graph_info() -> map",
        "Tasks and layers of a lazy value's graph, and the literal data it carries in bytes.",
        "delayed(|v| v + 1).call(1).graph_info()",
    ),
    doc(
        "key",
        "x.key / f.key",
        "The key of a lazy value or future: `<name>-<token>`.",
        "delayed(|v| v).call(1).key",
    ),
    doc(
        "submit",
        "submit(f, args...) -> Future",
        "Run a function now on the cluster and return a future (Client.submit). Futures may be arguments.",
        "let f = submit(|a, b| a + b, 1, 2);\nf.result()",
    ),
    doc(
        "map",
        "map(f, array) -> array of Future",
        "Submit one task per element (Client.map); with two arrays, one per pair.",
        "gather(map(|x| x * x, [1, 2, 3]))",
    ),
    doc(
        "gather",
        "gather(futures) -> array",
        "Wait for futures and return their results, in order; plain values pass through.",
        "gather(map(|x| x + 1, [1, 2]))",
    ),
    doc(
        "wait",
        "wait(futures)",
        "Block until every future has finished or failed.",
        "wait(map(|x| x, [1, 2]))",
    ),
    doc(
        "as_completed",
        "for f in as_completed(futures) { ... }",
        "Futures in the order they finish.",
        "let seen = [];\nfor f in as_completed(map(|x| x, [3, 1, 2])) { seen.push(f.result()); }\nseen.len()",
    ),
    doc(
        "result",
        "f.result() -> value",
        "Wait for the future and return its result; a failed task raises its error (catchable with try/catch).",
        "submit(|x| x * 10, 4).result()",
    ),
    doc(
        "done",
        "f.done() -> bool",
        "Whether the future has finished, failed or been cancelled.",
        "let f = submit(|x| x, 1);\nf.result();\nf.done()",
    ),
    doc(
        "status",
        "f.status",
        "\"pending\", \"finished\", \"error\" or \"cancelled\".",
        "let f = submit(|x| x, 1);\nf.result();\nf.status",
    ),
    doc(
        "cancel",
        "f.cancel()",
        "Cancel this future: the task stops if nothing else needs it; waiting on it raises \"future KEY was cancelled\".",
        "let f = submit(|x| x, 1);\nf.cancel();\nf.status",
    ),
    doc(
        "exception",
        "f.exception() -> string | ()",
        "The error of a failed future, or () if it did not fail.",
        "let f = submit(|x| x / 0, 1);\nwait([f]);\nf.exception()",
    ),
    doc(
        "scatter",
        "scatter(value) -> Future | array of Future",
        "Move local data to the cluster; an array gives one future per element (Client.scatter).",
        "let f = scatter(#{rows: 3});\nsubmit(|d| d.rows, f).result()",
    ),
    doc(
        "client",
        "client() -> Client",
        "The session's client: `c.submit`, `c.map`, `c.gather`, `c.scatter`, `c.compute`, `c.workers()`.",
        "let c = client();\nc.gather(c.map(|x| x + 1, [1, 2]))",
    ),
    doc(
        "workers",
        "c.workers() -> array of maps",
        "The workers of the cluster: name, address, threads, running tasks, memory, spilled bytes, GPU.",
        "client().workers()[0].threads",
    ),
    doc(
        "config",
        "config() -> map | config(#{...}) -> map",
        "Read or set session options: scheduler (\"threads\" or \"sync\"), num_workers, array.backend, optimization.fuse. Unknown keys are errors.",
        "config(#{scheduler: \"sync\"});\nconfig().scheduler",
    ),
    doc(
        "annotate",
        "annotate(#{priority, retries, resources}, || expr)",
        "Annotate every task built inside the closure: priority (higher first), retries (0–100), resources such as #{GPU: 1}.",
        "annotate(#{retries: 2, priority: 10}, || delayed(|x| x + 1).call(1)).compute()",
    ),
    doc(
        "to_json",
        "to_json(value) -> string",
        "JSON text of a local value: numbers, strings, arrays, maps; lazy values must be computed first.",
        "to_json(#{a: [1, 2.5], b: \"x\"})",
    ),
];

/// The entry for `name`, if documented.
pub fn lookup(name: &str) -> Option<&'static FnDoc> {
    DOCS.iter().find(|d| d.name == name)
}

/// Text for `:help NAME` and Jupyter's inspect.
pub fn help(name: &str) -> Option<String> {
    let d = lookup(name)?;
    Some(format!("{}\n\n{}\n\nExample:\n{}", d.signature, d.summary, indent(d.example)))
}

/// One line per entry, for `:help` with no name.
pub fn index() -> String {
    let width = DOCS.iter().map(|d| d.name.len()).max().unwrap_or(0);
    DOCS.iter()
        .map(|d| format!("{:width$}  {}", d.name, first_sentence(d.summary)))
        .collect::<Vec<_>>()
        .join("\n")
}

fn first_sentence(s: &str) -> &str {
    match s.find(". ") {
        Some(i) => &s[..=i],
        None => s,
    }
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("    {l}")).collect::<Vec<_>>().join("\n")
}
