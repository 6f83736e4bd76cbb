//! The script API, one module per area (STYLE habit 12). `register_client`
//! adds everything a session has (collections, compute, futures, config);
//! `register_values` adds what tasks may also use on workers.

mod args;
mod array;
mod bag;
mod config;
mod dataframe;
mod delayed;
pub mod docs;
mod frame_order;
mod futures;

use std::sync::Arc;

use rhai::{Dynamic, Engine};

pub use array::{LazyArray, chunk_from_nested, summary as array_summary, to_nested};
pub use bag::LazyBag;
pub use config::{AnnotationScope, SessionConfig};
pub use dataframe::{LazyFrame, LazySeries, LocalFrame, LocalSeries, local_frame_html};
pub use delayed::{Delayed, DelayedFn};
pub use futures::{Client, RFuture};

use crate::error::TaskFailure;
use crate::session::SessionState;

/// The session engine's API.
pub fn register_client(engine: &mut Engine, state: &Arc<SessionState>) {
    register_values(engine);
    let st = state.clone();
    engine.register_fn("display", move |v: Dynamic| st.display(&rendered(&v)));
    delayed::register(engine, state);
    array::register(engine, state);
    bag::register(engine, state);
    dataframe::register(engine, state);
    frame_order::register(engine, state);
    futures::register(engine, state);
    config::register(engine, state);
}

/// Functions every engine has, on clients and on workers.
pub fn register_values(engine: &mut Engine) {
    fn to_json(v: &Dynamic) -> Result<String, Box<rhai::EvalAltResult>> {
        let value = crate::convert::to_value(v, "to_json's argument").map_err(crate::error::runtime)?;
        Ok(value.to_json())
    }
    engine.register_fn("to_json", |v: Dynamic| to_json(&v));
    // Rhai's own `to_json` for maps names custom values by type; this one
    // writes computed arrays as nested lists.
    engine.register_fn("to_json", |m: &mut rhai::Map| to_json(&Dynamic::from_map(m.clone())));
    array::register_local(engine);
    dataframe::register_local(engine);
    engine.register_type_with_name::<TaskFailure>("TaskFailure");
    engine.register_fn("to_string", |f: &mut TaskFailure| f.to_string());
    engine.register_fn("to_debug", |f: &mut TaskFailure| f.to_string());
    engine.register_get("message", |f: &mut TaskFailure| f.error.message.clone());
    engine.register_get("key", |f: &mut TaskFailure| f.key.clone());
}

/// An engine for worker threads: the value API, no client functions (a task
/// cannot start computations of its own).
pub fn worker_engine() -> Engine {
    crate::ship::init();
    let mut engine = Engine::new();
    register_values(&mut engine);
    engine
}

/// "expected X, got a T (value)" for a wrongly typed argument.
pub fn wrong_type(function: &str, expected: &str, got: &Dynamic) -> Box<rhai::EvalAltResult> {
    let shown = display_scalar(got);
    let shown = if shown.chars().count() > 40 {
        format!("{}…", shown.chars().take(40).collect::<String>())
    } else {
        shown
    };
    crate::error::runtime(format!("{function} expects {expected}, got {} ({shown})", type_name(got)))
}

/// The user-facing name of a value's type.
pub fn type_name(d: &Dynamic) -> String {
    if d.is::<Delayed>() {
        "Delayed".into()
    } else if d.is::<LazyArray>() {
        "Array".into()
    } else if d.is::<LazyBag>() {
        "Bag".into()
    } else if d.is::<LazyFrame>() {
        "DataFrame".into()
    } else if d.is::<LazySeries>() {
        "Series".into()
    } else if d.is::<LocalFrame>() {
        "LocalDataFrame".into()
    } else if d.is::<LocalSeries>() {
        "LocalSeries".into()
    } else if d.is::<brisk_engine::array::Chunk>() {
        "ndarray".into()
    } else if d.is::<RFuture>() {
        "Future".into()
    } else if d.is::<DelayedFn>() {
        "DelayedFunction".into()
    } else if d.is::<Client>() {
        "Client".into()
    } else {
        let n = d.type_name();
        n.rsplit("::").next().unwrap_or(n).to_string()
    }
}

/// A value as every front end shows it: text, and HTML for tables.
pub fn rendered(d: &Dynamic) -> crate::session::Rendered {
    crate::session::Rendered { plain: display(d), html: crate::display::html(d) }
}

/// How a value prints in the REPL: tables for maps and records.
pub fn display(d: &Dynamic) -> String {
    crate::display::render(d)
}

/// How a single value prints (lazy values, futures, failures by name).
pub fn display_scalar(d: &Dynamic) -> String {
    if let Some(x) = d.read_lock::<Delayed>() {
        return format!("Delayed('{}')", x.key);
    }
    if let Some(x) = d.read_lock::<LazyArray>() {
        return array::repr(&x);
    }
    if let Some(x) = d.read_lock::<LazyBag>() {
        return bag::repr(&x);
    }
    if let Some(x) = d.read_lock::<LazyFrame>() {
        return dataframe::repr(&x.f);
    }
    if let Some(x) = d.read_lock::<LazySeries>() {
        return dataframe::series_repr(&x.s);
    }
    if let Some(x) = d.read_lock::<LocalFrame>() {
        return dataframe::local_frame_text(&x.0);
    }
    if let Some(x) = d.read_lock::<LocalSeries>() {
        return dataframe::local_series_text(&x.0);
    }
    if let Some(c) = d.read_lock::<brisk_engine::array::Chunk>() {
        return crate::display::chunk_text(&c);
    }
    if let Some(f) = d.read_lock::<RFuture>() {
        return format!("{:?}", f.0);
    }
    if let Some(f) = d.read_lock::<TaskFailure>() {
        return f.to_string();
    }
    if d.is_string() {
        return format!("{d:?}");
    }
    d.to_string()
}

/// Write a task graph for `visualize`: Graphviz text for `.dot`, and an
/// image through the `dot` program for `.svg`/`.png` when it is installed.
pub fn write_graph(graph: &brisk_engine::Graph, path: &str) -> Result<(), Box<rhai::EvalAltResult>> {
    let text = brisk_engine::graph::dot::to_dot(graph);
    let ext = std::path::Path::new(path).extension().and_then(|e| e.to_str()).unwrap_or("");
    match ext {
        "dot" | "gv" => std::fs::write(path, text)
            .map_err(|e| crate::error::runtime(format!("visualize: cannot write {path}: {e}"))),
        "svg" | "png" | "pdf" => {
            use std::io::Write;
            let mut child = std::process::Command::new("dot")
                .arg(format!("-T{ext}"))
                .arg("-o")
                .arg(path)
                .stdin(std::process::Stdio::piped())
                .spawn()
                .map_err(|e| {
                    crate::error::runtime(format!(
                        "visualize: writing {path} needs Graphviz's `dot` program ({e}); write a .dot file instead"
                    ))
                })?;
            if let Some(mut stdin) = child.stdin.take() {
                stdin
                    .write_all(text.as_bytes())
                    .map_err(|e| crate::error::runtime(format!("visualize: dot failed: {e}")))?;
            }
            let status =
                child.wait().map_err(|e| crate::error::runtime(format!("visualize: dot failed: {e}")))?;
            if status.success() {
                Ok(())
            } else {
                Err(crate::error::runtime(format!("visualize: dot could not write {path} ({status})")))
            }
        }
        other => Err(crate::error::runtime(format!(
            "visualize: unknown file type \"{other}\" for {path} (use .dot, or .svg/.png/.pdf with Graphviz installed)"
        ))),
    }
}
