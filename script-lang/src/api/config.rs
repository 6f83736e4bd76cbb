//! `config()` / `config(#{...})` (dask.config) and `annotate(#{...}, || ...)`.
//! Their option maps are parsed in `crate::state`, into typed structs; an
//! unknown key or a bad value is an `ApiError` that names it.

use std::sync::Arc;

use rhai::{Dynamic, Engine, EvalAltResult, FnPtr, Map, NativeCallContext};

use super::fndoc::{FnDoc, doc};
use crate::state::{SessionState, annotations};

type Res<T> = Result<T, Box<EvalAltResult>>;

/// This area's entries of the API reference (`docs::all` chains the areas
/// in the order of the guide).
pub(super) const DOCS: &[FnDoc] = &[
    doc(
        "config",
        "config() -> map | config(#{...}) -> map",
        "Read or set session options: scheduler (\"threads\", \"sync\", or \"distributed\" for the cluster of local_cluster or connect), num_workers, array.backend, optimization.fuse, memory_limit (a size such as \"4GiB\", bytes, or \"auto\": 80% of the machine or of the process's limits; results, blocks and graphs that cannot fit are refused), distributed.worker.memory.target / spill / pause / terminate (the fractions of their memory limit at which local_cluster's workers spill, force spilling, pause and are restarted: 0.6, 0.7, 0.8, 0.95, or false for never). Unknown keys are errors.",
        "config(#{scheduler: \"sync\"});\nconfig().scheduler",
    ),
    doc(
        "annotate",
        "annotate(#{priority, retries, resources}, || expr)",
        "Annotate every task built inside the closure: priority (higher first), retries (0–100), resources such as #{GPU: 1}.",
        "annotate(#{retries: 2, priority: 10}, || delayed(|x| x + 1).call(1)).compute()",
    ),
];

pub fn register(engine: &mut Engine, state: &Arc<SessionState>) {
    let st = state.clone();
    engine.register_fn("config", move || st.config().to_map());
    let st = state.clone();
    engine.register_fn("config", move |m: Map| -> Res<Map> {
        let next = st.config().with(&m)?;
        st.set_config(next.clone())?;
        Ok(next.to_map())
    });
    let st = state.clone();
    engine.register_fn("annotate", move |ctx: NativeCallContext<'_>, m: Map, f: FnPtr| -> Res<Dynamic> {
        let a = annotations(&m)?;
        st.push_annotations(a);
        let r = f.call_within_context::<Dynamic>(&ctx, ());
        st.pop_annotations();
        r
    });
}
