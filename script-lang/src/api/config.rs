//! `config()` / `config(#{...})` (dask.config) and `annotate(#{...}, || ...)`.
//! Option maps are parsed into typed structs; an unknown key or a bad value
//! is an error that names it.

use std::sync::Arc;

use brisk_engine::graph::Annotations;
use rhai::{Dynamic, Engine, EvalAltResult, FnPtr, Map, NativeCallContext};

use crate::error::runtime;
use crate::session::SessionState;

type Res<T> = Result<T, Box<EvalAltResult>>;

/// Session options.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionConfig {
    /// `"threads"` (default) or `"sync"`.
    pub scheduler: String,
    pub num_workers: usize,
    /// `"cpu"`; `"gpu"` needs the GPU module.
    pub array_backend: String,
    pub fuse: bool,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            scheduler: "threads".into(),
            num_workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            array_backend: "cpu".into(),
            fuse: true,
        }
    }
}

const KEYS: &[&str] = &["scheduler", "num_workers", "array.backend", "optimization.fuse"];

impl SessionConfig {
    pub fn to_map(&self) -> Map {
        let mut m = Map::new();
        m.insert("scheduler".into(), Dynamic::from(self.scheduler.clone()));
        m.insert("num_workers".into(), Dynamic::from_int(self.num_workers as i64));
        m.insert("array.backend".into(), Dynamic::from(self.array_backend.clone()));
        m.insert("optimization.fuse".into(), Dynamic::from_bool(self.fuse));
        m
    }

    /// A copy with the options of `m` applied, or an error naming the bad one.
    pub fn with(&self, m: &Map) -> Result<SessionConfig, String> {
        let mut c = self.clone();
        for (k, v) in m {
            match k.as_str() {
                "scheduler" => {
                    let s = v
                        .clone()
                        .into_string()
                        .map_err(|t| format!("config: scheduler must be a string, not {t}"))?;
                    match s.as_str() {
                        "threads" | "sync" | "synchronous" | "single-threaded" => {
                            c.scheduler = if s == "threads" { s } else { "sync".into() };
                        }
                        "distributed" | "processes" => {
                            return Err(format!(
                                "config: scheduler \"{s}\" needs a cluster, which this build does not have yet; use \"threads\" or \"sync\""
                            ));
                        }
                        other => {
                            return Err(format!(
                                "config: unknown scheduler \"{other}\" (expected \"threads\", \"sync\" or \"distributed\")"
                            ));
                        }
                    }
                }
                "num_workers" => {
                    let n = v.as_int().map_err(|t| format!("config: num_workers must be an int, not {t}"))?;
                    if !(1..=1024).contains(&n) {
                        return Err(format!("config: num_workers must be between 1 and 1024, got {n}"));
                    }
                    c.num_workers = n as usize;
                }
                "array.backend" => {
                    let s = v
                        .clone()
                        .into_string()
                        .map_err(|t| format!("config: array.backend must be a string, not {t}"))?;
                    match s.as_str() {
                        "cpu" | "numpy" => c.array_backend = "cpu".into(),
                        "gpu" | "cupy" => {
                            return Err(
                                "config: array.backend \"gpu\" needs a GPU, and no GPU was found".into()
                            );
                        }
                        other => {
                            return Err(format!(
                                "config: unknown array.backend \"{other}\" (expected \"cpu\" or \"gpu\")"
                            ));
                        }
                    }
                }
                "optimization.fuse" => {
                    c.fuse = v
                        .as_bool()
                        .map_err(|t| format!("config: optimization.fuse must be a bool, not {t}"))?;
                }
                other => {
                    return Err(format!("config: unknown option \"{other}\" (known: {})", KEYS.join(", ")));
                }
            }
        }
        Ok(c)
    }
}

/// Parse `annotate`'s option map.
/// Most retries a task may ask for: a deterministic failure retried
/// without end would look like a hang.
pub const MAX_RETRIES: i64 = 100;

/// One `annotate` block's options; a field it does not set is inherited
/// from the enclosing block (so an inner `priority: 0` does override).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AnnotationScope {
    pub priority: Option<i64>,
    pub retries: Option<u32>,
    pub resources: Vec<(String, f64)>,
}

impl AnnotationScope {
    /// The annotations in force under a stack of scopes (innermost last).
    pub fn merge(stack: &[AnnotationScope]) -> Annotations {
        let mut a = Annotations::default();
        for s in stack {
            a.priority = s.priority.unwrap_or(a.priority);
            a.retries = s.retries.unwrap_or(a.retries);
            for (name, amount) in &s.resources {
                a.resources.retain(|(n, _)| n != name);
                a.resources.push((name.clone(), *amount));
            }
        }
        a
    }
}

fn annotations(m: &Map) -> Result<AnnotationScope, String> {
    let mut a = AnnotationScope::default();
    for (k, v) in m {
        match k.as_str() {
            "priority" => {
                a.priority =
                    Some(v.as_int().map_err(|t| format!("annotate: priority must be an int, not {t}"))?)
            }
            "retries" => {
                let n = v.as_int().map_err(|t| format!("annotate: retries must be an int, not {t}"))?;
                if !(0..=MAX_RETRIES).contains(&n) {
                    return Err(format!("annotate: retries must be between 0 and {MAX_RETRIES}, got {n}"));
                }
                a.retries = Some(n as u32);
            }
            "resources" => {
                let r = v.read_lock::<Map>().ok_or("annotate: resources must be a map like #{GPU: 1}")?;
                for (name, amount) in r.iter() {
                    let x = amount
                        .as_float()
                        .or_else(|_| amount.as_int().map(|i| i as f64))
                        .map_err(|t| format!("annotate: resource {name} must be a number, not {t}"))?;
                    if !(x.is_finite() && x >= 0.0) {
                        return Err(format!("annotate: resource {name} must be 0 or more, got {x}"));
                    }
                    a.resources.push((name.to_string(), x));
                }
            }
            other => {
                return Err(format!(
                    "annotate: unknown option \"{other}\" (known: priority, retries, resources)"
                ));
            }
        }
    }
    Ok(a)
}

pub fn register(engine: &mut Engine, state: &Arc<SessionState>) {
    let st = state.clone();
    engine.register_fn("config", move || st.config().to_map());
    let st = state.clone();
    engine.register_fn("config", move |m: Map| -> Res<Map> {
        let next = st.config().with(&m).map_err(runtime)?;
        st.set_config(next.clone());
        Ok(next.to_map())
    });
    let st = state.clone();
    engine.register_fn("annotate", move |ctx: NativeCallContext<'_>, m: Map, f: FnPtr| -> Res<Dynamic> {
        let a = annotations(&m).map_err(runtime)?;
        st.push_annotations(a);
        let r = f.call_within_context::<Dynamic>(&ctx, ());
        st.pop_annotations();
        r
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_and_bad_options_are_named() {
        let c = SessionConfig::default();
        let mut m = Map::new();
        m.insert("schedular".into(), Dynamic::from("sync"));
        let e = c.with(&m).expect_err("unknown");
        assert!(e.contains("unknown option \"schedular\""), "{e}");
        let mut m = Map::new();
        m.insert("num_workers".into(), Dynamic::from_int(0));
        assert!(c.with(&m).expect_err("range").contains("between 1 and 1024, got 0"));
        let mut m = Map::new();
        m.insert("scheduler".into(), Dynamic::from("sync"));
        assert_eq!(c.with(&m).expect("ok").scheduler, "sync");
    }

    #[test]
    fn annotations_are_checked() {
        let mut m = Map::new();
        m.insert("retries".into(), Dynamic::from_int(-1));
        assert!(annotations(&m).expect_err("neg").contains("retries must be between 0 and 100, got -1"));
        m.insert("retries".into(), Dynamic::from_int(1_000_000));
        assert!(annotations(&m).expect_err("huge").contains("got 1000000"));
        let mut r = Map::new();
        r.insert("GPU".into(), Dynamic::from_int(1));
        let mut m = Map::new();
        m.insert("resources".into(), Dynamic::from_map(r));
        m.insert("priority".into(), Dynamic::from_int(5));
        let outer = annotations(&m).expect("ok");
        assert_eq!((outer.priority, outer.resources.clone()), (Some(5), vec![("GPU".to_string(), 1.0)]));
        let mut m = Map::new();
        m.insert("priority".into(), Dynamic::from_int(0));
        let inner = annotations(&m).expect("ok");
        let merged = AnnotationScope::merge(&[outer, inner]);
        assert_eq!((merged.priority, merged.resources.len()), (0, 1), "inner priority 0 overrides");
    }
}
