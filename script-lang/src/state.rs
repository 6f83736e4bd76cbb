//! What registered functions share with the session: the client that runs
//! its graphs (every graph goes through `SessionState::submit`), the
//! configuration and `annotate` scopes, the session's source so far (shipped
//! with closures), and where `print`, `debug` and `display` output goes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use brisk_distributed::worker::MemoryThresholds;
use brisk_distributed::{LocalCluster, RemoteClient};
use brisk_engine::graph::Annotations;
use brisk_engine::graph::layer::{LayerRef, materialize};
use brisk_engine::local::{LocalConfig, Runtime};
use brisk_engine::runner::{Code, SourceChunk, UdfRunner};
use brisk_engine::{CancelToken, Client, Future, Graph, Key, Value};
use rhai::{AST, Dynamic, EvalAltResult, Map};

use crate::error::{ApiError, engine_error};

/// Where `print` output goes.
pub type OutputSink = Arc<dyn Fn(&str) + Send + Sync>;

/// A value rendered for `display(v)`: always text, and HTML where the
/// value has a table.
#[derive(Clone, Debug, PartialEq)]
pub struct Rendered {
    pub plain: String,
    pub html: Option<String>,
}

/// Where `display(v)` output goes (the terminal prints the text; the
/// Jupyter kernel sends a `display_data` message).
pub type DisplaySink = Arc<dyn Fn(&Rendered) + Send + Sync>;

/// A cluster the session is connected to: the client, and the processes
/// when the session started them (`local_cluster`).
pub struct Cluster {
    pub client: Arc<RemoteClient>,
    pub local: Option<Arc<LocalCluster>>,
    /// Adaptive scaling of the local cluster (`c.adapt(#{...})`).
    pub adaptive: Option<Arc<brisk_distributed::deploy::manager::Manager>>,
    /// The batch-job cluster the session's graphs run on (`client(cluster)`);
    /// it stays up when the session moves to another cluster.
    pub deployed: Option<Arc<brisk_distributed::deploy::jobcluster::JobQueueCluster>>,
}

/// What registered functions share with the session.
pub struct SessionState {
    /// Whatever runs the session's graphs: the embedded local runtime, or
    /// the client of a cluster. Nothing else knows which.
    client: RwLock<Arc<dyn Client>>,
    /// The cluster of `local_cluster` or `connect`, while there is one;
    /// `scheduler: "distributed"` runs graphs on it.
    cluster: Mutex<Option<Cluster>>,
    config: Mutex<SessionConfig>,
    code: Mutex<Arc<Code>>,
    /// For each script function (closures included), the input that
    /// defines it: its hash (task tokens use it, so a key changes when the
    /// function is redefined, not whenever anything else is typed) and its
    /// origin (where errors inside the function are placed).
    fn_sources: Mutex<HashMap<String, (u64, Arc<str>)>>,
    annotations: Mutex<Vec<AnnotationScope>>,
    udfs: Arc<dyn UdfRunner>,
    output: RwLock<OutputSink>,
    /// Where `debug(x)` goes: stderr (a stream of its own in Jupyter).
    debug: RwLock<OutputSink>,
    display: RwLock<Option<DisplaySink>>,
    /// Set by Ctrl-C or a kernel interrupt; stops waits and the script.
    pub cancel: CancelToken,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

type Res<T> = Result<T, Box<EvalAltResult>>;

impl SessionState {
    /// A session's state on the embedded local client; `udfs` runs its
    /// closures on the worker threads.
    pub fn new(config: SessionConfig, udfs: Arc<dyn UdfRunner>) -> SessionState {
        let stdout: OutputSink = Arc::new(|s: &str| println!("{s}"));
        SessionState {
            client: RwLock::new(make_client(&config, &udfs)),
            cluster: Mutex::new(None),
            config: Mutex::new(config),
            code: Mutex::new(Arc::new(Code::new(Vec::new()))),
            fn_sources: Mutex::new(HashMap::new()),
            annotations: Mutex::new(Vec::new()),
            udfs,
            output: RwLock::new(stdout),
            debug: RwLock::new(Arc::new(|s: &str| eprintln!("{s}"))),
            display: RwLock::new(None),
            cancel: CancelToken::new(),
        }
    }

    pub(crate) fn set_output(&self, sink: OutputSink) {
        *self.output.write().unwrap_or_else(|e| e.into_inner()) = sink;
    }

    pub(crate) fn set_debug_output(&self, sink: OutputSink) {
        *self.debug.write().unwrap_or_else(|e| e.into_inner()) = sink;
    }

    pub(crate) fn set_display(&self, sink: DisplaySink) {
        *self.display.write().unwrap_or_else(|e| e.into_inner()) = Some(sink);
    }

    pub(crate) fn debug(&self, s: &str) {
        let sink = self.debug.read().unwrap_or_else(|e| e.into_inner()).clone();
        sink(s);
    }

    /// The session's client now (a `config` change may replace it).
    pub fn client(&self) -> Arc<dyn Client> {
        self.client.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Run `graph` for `outputs`. Every graph the session runs, whatever
    /// built it, goes through here.
    pub fn submit(&self, graph: Graph, outputs: &[Key]) -> Res<Vec<Future>> {
        self.client().submit(graph, outputs).map_err(engine_error)
    }

    /// The values of `outputs` of the layers reachable from `roots`.
    pub fn compute(&self, roots: &[LayerRef], outputs: &[Key]) -> Res<Vec<Value>> {
        let futures = self.submit(materialize(roots), outputs)?;
        self.gather(&futures)
    }

    /// Compute `outputs` and keep them on the client, as long as the
    /// futures live. Waits until they are there, as Dask's local
    /// schedulers do, so a failure shows at `persist`.
    pub fn persist(&self, root: &LayerRef, outputs: &[Key]) -> Res<Vec<Future>> {
        let futures = self.submit(materialize(std::slice::from_ref(root)), outputs)?;
        // Waited for, not fetched: on a cluster the results stay on the workers.
        brisk_engine::client::wait_ok(&futures, &self.cancel).map_err(engine_error)?;
        Ok(futures)
    }

    /// Put `values` on the workers (`scatter`); one future each, finished (or
    /// failed) when this returns.
    pub fn scatter(&self, values: Vec<Value>) -> Res<Vec<Future>> {
        let (graph, keys) = brisk_engine::client::scatter_graph(values);
        let futures = self.submit(graph, &keys)?;
        self.gather(&futures)?;
        Ok(futures)
    }

    /// `story()`: what the scheduler remembers of `keys`, one map per
    /// transition (time, key, from, to, worker, cause), oldest first.
    pub fn story(&self, keys: &[Key]) -> Res<rhai::Array> {
        let rows = self.client().story(keys).map_err(engine_error)?;
        Ok(rows
            .into_iter()
            .map(|r| {
                let mut m = Map::new();
                m.insert("time".into(), Dynamic::from_float(r.time));
                m.insert("key".into(), Dynamic::from(r.key.to_string()));
                m.insert("from".into(), Dynamic::from(r.from));
                m.insert("to".into(), Dynamic::from(r.to));
                m.insert("worker".into(), r.worker.map_or(Dynamic::UNIT, Dynamic::from));
                m.insert("cause".into(), Dynamic::from(r.cause));
                Dynamic::from_map(m)
            })
            .collect())
    }

    /// The results of `futures`, in order; an interrupt stops the wait.
    pub fn gather(&self, futures: &[Future]) -> Res<Vec<Value>> {
        self.client().gather(futures, &self.cancel).map_err(engine_error)
    }

    pub fn config(&self) -> SessionConfig {
        lock(&self.config).clone()
    }

    /// Whether new arrays are made on the GPU (`array.backend: "gpu"`).
    pub fn gpu_backend(&self) -> bool {
        lock(&self.config).array_backend == "gpu"
    }

    /// Apply a configuration; a new scheduler or thread count starts a new
    /// local runtime (futures of the old one report that it shut down).
    /// `scheduler: "distributed"` selects the connected cluster.
    pub fn set_config(&self, next: SessionConfig) -> Result<(), ApiError> {
        let remote = if next.scheduler == "distributed" {
            let cluster = lock(&self.cluster);
            let Some(c) = cluster.as_ref() else {
                return Err(ApiError::BadSetting(
                    "config: scheduler \"distributed\" needs a cluster: start one with local_cluster(#{...}) or connect(\"tcp://HOST:PORT\")".into(),
                ));
            };
            Some(c.client.clone())
        } else {
            None
        };
        let mut cur = lock(&self.config);
        let restart =
            cur.scheduler != next.scheduler || cur.num_workers != next.num_workers || cur.fuse != next.fuse;
        *cur = next.clone();
        drop(cur);
        brisk_engine::memory::set_limit(next.memory_limit);
        if restart {
            let client: Arc<dyn Client> = match remote {
                Some(r) => r,
                None => make_client(&next, &self.udfs),
            };
            *self.client.write().unwrap_or_else(|e| e.into_inner()) = client;
        }
        Ok(())
    }

    /// Make `cluster` the session's: graphs run on it from now on. A
    /// cluster connected before is closed first.
    pub fn attach_cluster(&self, cluster: Cluster) {
        self.detach_cluster();
        let client: Arc<dyn Client> = cluster.client.clone();
        *lock(&self.cluster) = Some(cluster);
        lock(&self.config).scheduler = "distributed".into();
        *self.client.write().unwrap_or_else(|e| e.into_inner()) = client;
    }

    /// Close the session's cluster (its processes stop, if the session
    /// started them) and go back to the local threads.
    pub fn detach_cluster(&self) {
        let Some(mut cluster) = lock(&self.cluster).take() else { return };
        cluster.client.close();
        if let Some(m) = cluster.adaptive.take() {
            m.stop();
        }
        if let Some(local) = cluster.local.as_ref() {
            local.stop();
        }
        let mut cfg = lock(&self.config);
        if cfg.scheduler == "distributed" {
            cfg.scheduler = "threads".into();
            let client = make_client(&cfg, &self.udfs);
            drop(cfg);
            *self.client.write().unwrap_or_else(|e| e.into_inner()) = client;
        }
    }

    /// A fresh local runtime in place of the current one (`c.restart()`
    /// without a cluster): its results go and its futures fail.
    pub fn restart_local(&self) {
        let cfg = lock(&self.config);
        let client = make_client(&cfg, &self.udfs);
        drop(cfg);
        *self.client.write().unwrap_or_else(|e| e.into_inner()) = client;
    }

    /// Run `f` on the session's cluster, if it has one.
    pub fn with_cluster<R>(&self, f: impl FnOnce(&mut Cluster) -> R) -> Option<R> {
        lock(&self.cluster).as_mut().map(f)
    }

    /// The session's source so far, as shipped with every closure.
    pub fn code(&self) -> Arc<Code> {
        lock(&self.code).clone()
    }

    /// The hash of the input that defines script function `name`, if any.
    pub fn fn_source(&self, name: &str) -> Option<u64> {
        lock(&self.fn_sources).get(name).map(|(hash, _)| *hash)
    }

    /// Where script function `name` was defined (a file or `<input N>`).
    pub fn fn_origin(&self, name: &str) -> Option<String> {
        lock(&self.fn_sources).get(name).map(|(_, origin)| origin.to_string())
    }

    pub(crate) fn push_chunk(&self, origin: &str, text: &str, ast: &AST) {
        let hash = xxhash_rust::xxh3::xxh3_64(text.as_bytes());
        let origin: Arc<str> = Arc::from(origin);
        let mut sources = lock(&self.fn_sources);
        for f in ast.iter_functions() {
            sources.insert(f.name.to_string(), (hash, origin.clone()));
        }
        drop(sources);
        let mut code = lock(&self.code);
        let mut chunks = code.chunks.clone();
        chunks.push(SourceChunk { origin, text: text.into() });
        *code = Arc::new(Code::new(chunks));
    }

    /// The annotations in force (innermost `annotate` wins per field).
    pub fn annotations(&self) -> Option<Arc<Annotations>> {
        let stack = lock(&self.annotations);
        (!stack.is_empty()).then(|| Arc::new(AnnotationScope::merge(&stack)))
    }

    pub(crate) fn push_annotations(&self, a: AnnotationScope) {
        lock(&self.annotations).push(a);
    }

    pub(crate) fn pop_annotations(&self) {
        lock(&self.annotations).pop();
    }

    pub(crate) fn print(&self, s: &str) {
        let sink = self.output.read().unwrap_or_else(|e| e.into_inner()).clone();
        sink(s);
    }

    /// `display(v)`: to the display sink, or as text to the print sink.
    pub fn display(&self, r: &Rendered) {
        let sink = self.display.read().unwrap_or_else(|e| e.into_inner()).clone();
        match sink {
            Some(f) => f(r),
            None => self.print(&r.plain),
        }
    }
}

fn make_client(config: &SessionConfig, udfs: &Arc<dyn UdfRunner>) -> Arc<dyn Client> {
    let local = LocalConfig {
        threads: config.num_workers,
        sync: config.scheduler == "sync",
        fuse: config.fuse,
        resources: Vec::new(),
    };
    Arc::new(Runtime::new(local, udfs.clone()))
}

/// Session options.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionConfig {
    /// `"threads"` (default) or `"sync"`.
    pub scheduler: String,
    pub num_workers: usize,
    /// `"cpu"`; `"gpu"` needs the GPU module.
    pub array_backend: String,
    pub fuse: bool,
    /// The memory budget in bytes (`None`: the default, a fraction of the
    /// machine). Process-wide: the budget guards the process, not a session.
    pub memory_limit: Option<u64>,
    /// What `local_cluster`'s workers do at which fraction of their limit
    /// (Dask's `distributed.worker.memory.*`).
    pub thresholds: MemoryThresholds,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            scheduler: "threads".into(),
            num_workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            array_backend: "cpu".into(),
            fuse: true,
            memory_limit: None,
            thresholds: MemoryThresholds::default(),
        }
    }
}

const KEYS: &[&str] = &[
    "scheduler",
    "num_workers",
    "array.backend",
    "optimization.fuse",
    "memory_limit",
    "distributed.worker.memory.target",
    "distributed.worker.memory.spill",
    "distributed.worker.memory.pause",
    "distributed.worker.memory.terminate",
];

/// The memory thresholds' config keys, with their part of `MemoryThresholds`.
fn threshold_mut<'a>(t: &'a mut MemoryThresholds, key: &str) -> Option<&'a mut Option<f64>> {
    match key.strip_prefix("distributed.worker.memory.")? {
        "target" => Some(&mut t.target),
        "spill" => Some(&mut t.spill),
        "pause" => Some(&mut t.pause),
        "terminate" => Some(&mut t.terminate),
        _ => None,
    }
}

impl SessionConfig {
    pub fn to_map(&self) -> Map {
        let mut m = Map::new();
        m.insert("scheduler".into(), Dynamic::from(self.scheduler.clone()));
        m.insert("num_workers".into(), Dynamic::from_int(self.num_workers as i64));
        m.insert("array.backend".into(), Dynamic::from(self.array_backend.clone()));
        m.insert("optimization.fuse".into(), Dynamic::from_bool(self.fuse));
        let limit = self.memory_limit.unwrap_or_else(brisk_engine::memory::limit);
        m.insert("memory_limit".into(), Dynamic::from_int(i64::try_from(limit).unwrap_or(i64::MAX)));
        let mut t = self.thresholds;
        for k in &KEYS[5..] {
            if let Some(x) = threshold_mut(&mut t, k) {
                m.insert((*k).into(), x.map_or(Dynamic::FALSE, Dynamic::from_float));
            }
        }
        m
    }

    /// A copy with the options of `m` applied, or an error naming the bad one.
    pub fn with(&self, m: &Map) -> Result<SessionConfig, ApiError> {
        let mut c = self.clone();
        for (k, v) in m {
            if !KEYS.contains(&k.as_str()) {
                return Err(ApiError::UnknownSetting {
                    function: "config",
                    option: k.to_string(),
                    known: KEYS.join(", "),
                });
            }
            c.set(k, v).map_err(ApiError::BadSetting)?;
        }
        Ok(c)
    }

    /// Set one known option, or say why its value is refused.
    fn set(&mut self, k: &str, v: &Dynamic) -> Result<(), String> {
        match k {
            "scheduler" => {
                let s = v
                    .clone()
                    .into_string()
                    .map_err(|t| format!("config: scheduler must be a string, not {t}"))?;
                match s.as_str() {
                    "threads" | "sync" | "synchronous" | "single-threaded" => {
                        self.scheduler = if s == "threads" { s } else { "sync".into() };
                    }
                    "distributed" => self.scheduler = s,
                    "processes" => {
                        return Err(
                            "config: scheduler \"processes\" is spelled local_cluster(#{workers: N}) in brisk".into()
                        );
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
                self.num_workers = n as usize;
            }
            "array.backend" => {
                let s = v
                    .clone()
                    .into_string()
                    .map_err(|t| format!("config: array.backend must be a string, not {t}"))?;
                match s.as_str() {
                    "cpu" | "numpy" => self.array_backend = "cpu".into(),
                    "gpu" | "cupy" => {
                        brisk_engine::array::gpu::default_device()
                            .map_err(|e| format!("config: array.backend \"gpu\" needs a GPU: {e}"))?;
                        self.array_backend = "gpu".into();
                    }
                    other => {
                        return Err(format!(
                            "config: unknown array.backend \"{other}\" (expected \"cpu\" or \"gpu\")"
                        ));
                    }
                }
            }
            "memory_limit" => self.memory_limit = memory_limit("config", v)?,
            k if k.starts_with("distributed.worker.memory.") => {
                // A fraction of the limit in (0, 1], or false: off (Dask's values).
                let t = if v.as_bool() == Ok(false) {
                    None
                } else {
                    let x = v.as_float().or_else(|_| v.as_int().map(|i| i as f64)).map_err(|t| {
                        format!("config: {k} must be a fraction of the memory limit or false, not {t}")
                    })?;
                    brisk_distributed::worker::parse_threshold(&x.to_string())
                        .map_err(|e| format!("config: {k}: {e}"))?
                };
                if let Some(slot) = threshold_mut(&mut self.thresholds, k) {
                    *slot = t;
                }
            }
            "optimization.fuse" => {
                self.fuse =
                    v.as_bool().map_err(|t| format!("config: optimization.fuse must be a bool, not {t}"))?;
            }
            _ => {}
        }
        Ok(())
    }
}

/// A memory limit option (`config`'s, `local_cluster`'s): a size such as
/// `"4GiB"`, a positive number of bytes, or `"auto"` (`None`: the default).
pub(crate) fn memory_limit(function: &str, v: &Dynamic) -> Result<Option<u64>, String> {
    if v.clone().into_string().is_ok_and(|s| s == "auto") {
        Ok(None)
    } else if let Ok(n) = v.as_int() {
        let n = u64::try_from(n).ok().filter(|&n| n > 0);
        n.map(Some)
            .ok_or_else(|| format!("{function}: memory_limit must be a positive number of bytes, got {v}"))
    } else if let Ok(s) = v.clone().into_string() {
        brisk_engine::memory::parse_size(&s).map(Some).map_err(|e| format!("{function}: memory_limit: {e}"))
    } else {
        Err(format!(
            "{function}: memory_limit must be a size like \"4GiB\", a number of bytes or \"auto\", not {}",
            v.type_name()
        ))
    }
}

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
    /// Seconds.
    pub timeout: Option<f64>,
}

impl AnnotationScope {
    /// The annotations in force under a stack of scopes (innermost last).
    pub fn merge(stack: &[AnnotationScope]) -> Annotations {
        let mut a = Annotations::default();
        for s in stack {
            a.priority = s.priority.unwrap_or(a.priority);
            a.retries = s.retries.unwrap_or(a.retries);
            a.timeout = s.timeout.or(a.timeout);
            for (name, amount) in &s.resources {
                a.resources.retain(|(n, _)| n != name);
                a.resources.push((name.clone(), *amount));
            }
        }
        a
    }
}

pub(crate) fn annotations(m: &Map) -> Result<AnnotationScope, ApiError> {
    const KNOWN: [&str; 4] = ["priority", "retries", "resources", "timeout"];
    let mut a = AnnotationScope::default();
    for (k, v) in m {
        if !KNOWN.contains(&k.as_str()) {
            return Err(ApiError::UnknownSetting {
                function: "annotate",
                option: k.to_string(),
                known: KNOWN.join(", "),
            });
        }
        annotation(&mut a, k, v).map_err(ApiError::BadSetting)?;
    }
    Ok(a)
}

/// One known `annotate` option into `a`, or why its value is refused.
fn annotation(a: &mut AnnotationScope, k: &str, v: &Dynamic) -> Result<(), String> {
    match k {
        "priority" => {
            a.priority = Some(v.as_int().map_err(|t| format!("annotate: priority must be an int, not {t}"))?)
        }
        "retries" => {
            let n = v.as_int().map_err(|t| format!("annotate: retries must be an int, not {t}"))?;
            if !(0..=MAX_RETRIES).contains(&n) {
                return Err(format!("annotate: retries must be between 0 and {MAX_RETRIES}, got {n}"));
            }
            a.retries = Some(n as u32);
        }
        "timeout" => {
            let t = if let Some(s) = v.read_lock::<rhai::ImmutableString>() {
                brisk_engine::exec::deadline::parse_timeout(&s)
            } else if let Ok(x) = v.as_float() {
                brisk_engine::exec::deadline::seconds(x)
            } else if let Ok(n) = v.as_int() {
                brisk_engine::exec::deadline::seconds(n as f64)
            } else {
                Err(format!("a {}", v.type_name()))
            };
            let t =
                t.map_err(|e| format!("annotate: timeout must be a duration like \"10s\" or seconds: {e}"))?;
            a.timeout = Some(t.as_secs_f64());
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
        _ => {}
    }
    Ok(())
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
        assert!(matches!(&e, ApiError::UnknownSetting { option, .. } if option == "schedular"), "{e:?}");
        assert!(e.to_string().contains("unknown option \"schedular\""), "{e}");
        let mut m = Map::new();
        m.insert("num_workers".into(), Dynamic::from_int(0));
        let e = c.with(&m).expect_err("range");
        assert!(matches!(&e, ApiError::BadSetting(m) if m.contains("between 1 and 1024, got 0")), "{e:?}");
        let mut m = Map::new();
        m.insert("scheduler".into(), Dynamic::from("sync"));
        assert_eq!(c.with(&m).expect("ok").scheduler, "sync");
    }

    #[test]
    fn annotations_are_checked() {
        let mut m = Map::new();
        m.insert("retries".into(), Dynamic::from_int(-1));
        assert!(
            annotations(&m)
                .expect_err("neg")
                .to_string()
                .contains("retries must be between 0 and 100, got -1")
        );
        m.insert("retries".into(), Dynamic::from_int(1_000_000));
        assert!(annotations(&m).expect_err("huge").to_string().contains("got 1000000"));
        let mut m = Map::new();
        m.insert("priorty".into(), Dynamic::from_int(1));
        let e = annotations(&m).expect_err("unknown");
        assert!(matches!(&e, ApiError::UnknownSetting { function: "annotate", .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            "annotate: unknown option \"priorty\" (known: priority, retries, resources, timeout)"
        );
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
