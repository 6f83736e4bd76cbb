//! What the writers share: the `overwrite` and `append` options (Dask's
//! names) and running a staged write, then putting it in place.

use brisk_engine::Key;
use brisk_engine::graph::LayerRef;
use brisk_engine::staging::{Mode, Staged, WriteError};
use rhai::{Dynamic, EvalAltResult, Map};

use super::args::{options, wrong_type};
use crate::error::runtime;
use crate::state::SessionState;

type Res<T> = Result<T, Box<EvalAltResult>>;

pub(super) fn err(e: WriteError) -> Box<EvalAltResult> {
    runtime(e.to_string())
}

/// `#{overwrite, append}` (each true or false; not both).
pub(super) fn mode(m: Option<Map>, function: &str) -> Res<Mode> {
    let m = options(m, function, &["overwrite", "append"])?;
    let flag = |k: &str| -> Res<bool> {
        match m.get(k) {
            None => Ok(false),
            Some(d) => d.as_bool().map_err(|_| wrong_type(&format!("{function}: {k}"), "true or false", d)),
        }
    };
    match (flag("overwrite")?, flag("append")?) {
        (true, true) => Err(runtime(format!("{function}: overwrite and append cannot both be true"))),
        (true, false) => Ok(Mode::Overwrite),
        (false, true) => Ok(Mode::Append),
        (false, false) => Ok(Mode::Create),
    }
}

/// Run the write tasks, then move their output into place; an error
/// before the commit drops `staged`, which removes what was written.
pub(super) fn run(state: &SessionState, staged: Staged, layer: LayerRef, keys: &[Key]) -> Res<Vec<Dynamic>> {
    state.compute(&[layer], keys)?;
    let paths = staged.commit().map_err(err)?;
    Ok(paths.into_iter().map(|p| Dynamic::from(p.display().to_string())).collect())
}
