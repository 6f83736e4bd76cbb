//! The script API, one module per area (STYLE habit 12). `register_client`
//! adds everything a session has (collections, compute, futures, config);
//! `register_values` adds what tasks may also use on workers.

mod args;
mod array;
mod array_args;
mod array_create;
mod array_docs;
mod array_more;
mod bag;
mod bag_more;
mod cluster;
mod config;
mod coordinate;
mod dataframe;
mod dataframe_docs;
mod delayed;
mod deploy;
pub mod docs;
mod fndoc;
mod frame_call;
mod frame_category;
mod frame_order;
mod frame_reshape;
mod frame_stats;
mod frame_window;
mod futures;
mod futures_more;
mod gpu_kernels;
mod kube;
mod ml;
mod series_expr;
mod series_text;
mod series_where;
mod sized;
mod task_client;
mod to_delayed;
mod write;

use std::sync::Arc;

use rhai::{Dynamic, Engine};

pub use array_create::{chunk_from_nested, to_nested};

use crate::error::TaskFailure;
use crate::print::rendered;
use crate::state::SessionState;
use fndoc::{FnDoc, doc};

/// This area's entries of the API reference (`docs::all` chains the areas
/// in the order of the guide).
const DOCS: &[FnDoc] = &[
    doc(
        "to_json",
        "to_json(value) -> string",
        "JSON text of a local value: numbers, strings, arrays, maps; lazy values must be computed first.",
        "to_json(#{a: [1, 2.5], b: \"x\"})",
    ),
    doc(
        "display",
        "display(value)",
        "Show a value now, as the end of an input shows it: a table where it has one. In Jupyter each call is its own output (text and HTML), so one cell can show several values.",
        "display(#{rows: 3, cols: 2});\ndisplay(from_array([1, 2, 3]).compute())",
    ),
];

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
    frame_call::register(engine, state);
    frame_stats::register(engine, state);
    frame_reshape::register(engine, state);
    frame_category::register(engine, state);
    to_delayed::register(engine, state);
    frame_window::register(engine, state);
    futures::register(engine, state);
    futures_more::register(engine, state);
    coordinate::register(engine, state);
    gpu_kernels::register(engine, state);
    ml::register(engine, state);
    cluster::register(engine, state);
    deploy::register(engine, state);
    kube::register(engine, state);
    config::register(engine, state);
}

/// Functions every engine has, on clients and on workers.
pub fn register_values(engine: &mut Engine) {
    fn to_json(v: &Dynamic) -> Result<String, Box<rhai::EvalAltResult>> {
        let value = crate::convert::to_value(v, "to_json's argument")?;
        Ok(value.to_json())
    }
    engine.register_fn("to_json", |v: Dynamic| to_json(&v));
    // Rhai's own `to_json` for maps names custom values by type; this one
    // writes computed arrays as nested lists.
    engine.register_fn("to_json", |m: &mut rhai::Map| to_json(&Dynamic::from_map(m.clone())));
    sized::register(engine);
    gpu_kernels::register_values(engine);
    array::register_local(engine);
    bag_more::register_values(engine);
    dataframe::register_local(engine);
    frame_call::register_local(engine);
    engine.register_type_with_name::<TaskFailure>("TaskFailure");
    engine.register_fn("to_string", |f: &mut TaskFailure| f.to_string());
    engine.register_fn("to_debug", |f: &mut TaskFailure| f.to_string());
    engine.register_get("message", |f: &mut TaskFailure| f.error.message.clone());
    engine.register_get("key", |f: &mut TaskFailure| f.key.clone());
    // A bug on purpose, for the tests that prove a front end survives one
    // (in a cell, in a task); only there when the environment asks for it.
    if std::env::var_os("BRISK_TEST_PANIC").is_some() {
        engine.register_fn("brisk_test_panic", |what: &str| -> bool { panic!("{what}") });
    }
}

/// An engine for worker threads: the value API and the coordination
/// primitives (through the task's scheduler), no client functions (a task
/// cannot start computations of its own).
pub fn worker_engine() -> Engine {
    crate::ship::init();
    let mut engine = Engine::new();
    register_values(&mut engine);
    coordinate::register_task(&mut engine);
    task_client::register_task(&mut engine);
    engine
}
