//! `Session`: one Rhai engine with the whole API, a scope that lives across
//! inputs, the current client (a local runtime) and the configuration. The
//! REPL, `brisk run` and the Jupyter kernel each own one; none of them
//! registers functions of its own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use brisk_engine::graph::{Annotations, LayerRef, materialize};
use brisk_engine::local::{LocalConfig, Runtime};
use brisk_engine::runner::{Code, SourceChunk};
use brisk_engine::{CancelToken, Client, Future, Graph, Key, Value};
use rhai::{AST, Dynamic, Engine, EvalAltResult, Scope};

use crate::api::{self, AnnotationScope, SessionConfig};
use crate::error::{ScriptError, engine_error};
use crate::ship::{self, RhaiUdfs};

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

/// What registered functions share with the session.
pub struct SessionState {
    /// Whatever runs the session's graphs: the embedded local runtime, or
    /// (later) a client of a remote scheduler. Nothing else knows which.
    client: RwLock<Arc<dyn Client>>,
    config: Mutex<SessionConfig>,
    code: Mutex<Arc<Code>>,
    /// For each script function (closures included), the input that
    /// defines it: its hash (task tokens use it, so a key changes when the
    /// function is redefined, not whenever anything else is typed) and its
    /// origin (where errors inside the function are placed).
    fn_sources: Mutex<HashMap<String, (u64, Arc<str>)>>,
    annotations: Mutex<Vec<AnnotationScope>>,
    udfs: Arc<RhaiUdfs>,
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
        self.gather(&futures)?;
        Ok(futures)
    }

    /// The results of `futures`, in order; an interrupt stops the wait.
    pub fn gather(&self, futures: &[Future]) -> Res<Vec<Value>> {
        self.client().gather(futures, &self.cancel).map_err(engine_error)
    }

    pub fn config(&self) -> SessionConfig {
        lock(&self.config).clone()
    }

    /// Apply a configuration; a new scheduler or thread count starts a new
    /// local runtime (futures of the old one report that it shut down).
    pub fn set_config(&self, next: SessionConfig) {
        let mut cur = lock(&self.config);
        let restart =
            cur.scheduler != next.scheduler || cur.num_workers != next.num_workers || cur.fuse != next.fuse;
        *cur = next.clone();
        drop(cur);
        if restart {
            let client = make_client(&next, &self.udfs);
            *self.client.write().unwrap_or_else(|e| e.into_inner()) = client;
        }
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

    fn push_chunk(&self, origin: &str, text: &str, ast: &AST) {
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
        *code = Arc::new(Code { id: ship::code_id(&chunks), chunks });
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

    fn print(&self, s: &str) {
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

fn make_client(config: &SessionConfig, udfs: &Arc<RhaiUdfs>) -> Arc<dyn Client> {
    let local = LocalConfig {
        threads: config.num_workers,
        sync: config.scheduler == "sync",
        fuse: config.fuse,
        resources: Vec::new(),
    };
    Arc::new(Runtime::new(local, udfs.clone()))
}

/// A scripting session.
pub struct Session {
    engine: Engine,
    scope: Scope<'static>,
    ast: AST,
    state: Arc<SessionState>,
    signatures: std::sync::OnceLock<Vec<crate::complete::Signature>>,
}

impl Session {
    pub fn new() -> Session {
        Self::with_config(SessionConfig::default())
    }

    pub fn with_config(config: SessionConfig) -> Session {
        ship::init();
        let udfs = Arc::new(RhaiUdfs::new(api::worker_engine));
        let client = make_client(&config, &udfs);
        let stdout: OutputSink = Arc::new(|s: &str| println!("{s}"));
        let state = Arc::new(SessionState {
            client: RwLock::new(client),
            config: Mutex::new(config),
            code: Mutex::new(Arc::new(Code { id: ship::code_id(&[]), chunks: Vec::new() })),
            fn_sources: Mutex::new(HashMap::new()),
            annotations: Mutex::new(Vec::new()),
            udfs,
            output: RwLock::new(stdout),
            debug: RwLock::new(Arc::new(|s: &str| eprintln!("{s}"))),
            display: RwLock::new(None),
            cancel: CancelToken::new(),
        });
        let mut engine = Engine::new();
        api::register_client(&mut engine, &state);
        let st = state.clone();
        engine.on_print(move |s| st.print(s));
        let st = state.clone();
        engine.on_debug(move |s, _, pos| {
            let sink = st.debug.read().unwrap_or_else(|e| e.into_inner()).clone();
            sink(&format!("[{pos:?}] {s}"));
        });
        let cancel = state.cancel.clone();
        engine.on_progress(move |_| cancel.is_cancelled().then(|| Dynamic::from("interrupted")));
        Session {
            engine,
            scope: Scope::new(),
            ast: AST::empty(),
            state,
            signatures: std::sync::OnceLock::new(),
        }
    }

    pub fn state(&self) -> &Arc<SessionState> {
        &self.state
    }

    /// Send `print` output somewhere else (the kernel, a test buffer).
    pub fn set_output(&self, sink: OutputSink) {
        *self.state.output.write().unwrap_or_else(|e| e.into_inner()) = sink;
    }

    /// Send `debug(x)` output somewhere else (the kernel's stderr stream).
    pub fn set_debug_output(&self, sink: OutputSink) {
        *self.state.debug.write().unwrap_or_else(|e| e.into_inner()) = sink;
    }

    /// Send `display(v)` output somewhere else (the Jupyter kernel).
    pub fn set_display(&self, sink: DisplaySink) {
        *self.state.display.write().unwrap_or_else(|e| e.into_inner()) = Some(sink);
    }

    /// Interrupt the running evaluation and any compute it waits for.
    pub fn cancel_token(&self) -> CancelToken {
        self.state.cancel.clone()
    }

    pub fn scope(&self) -> &Scope<'static> {
        &self.scope
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Completion candidates for `line` at byte offset `pos` (REPL Tab,
    /// Jupyter complete_request).
    pub fn complete(&self, line: &str, pos: usize) -> crate::complete::Completion {
        // The registered functions never change after construction: list them once.
        let sigs = self.signatures.get_or_init(|| crate::complete::signatures(&self.engine));
        let fns: Vec<String> = self.ast.iter_functions().map(|f| f.name.to_string()).collect();
        crate::complete::complete(sigs, &self.scope, &fns, line, pos)
    }

    /// Evaluate one input (a file, a REPL entry, a notebook cell) as its own
    /// chunk: its functions stay defined, its variables stay in scope.
    pub fn eval(&mut self, text: &str, origin: &str) -> Result<Dynamic, ScriptError> {
        self.state.cancel.reset();
        let ast = self.engine.compile(text).map_err(|e| ScriptError::syntax(&e, origin))?;
        self.state.push_chunk(origin, text, &ast);
        self.ast += ast;
        let result = self.engine.eval_ast_with_scope::<Dynamic>(&mut self.scope, &self.ast);
        self.ast.clear_statements();
        result.map_err(|e| ScriptError::runtime(&e, origin, |name| self.state.fn_origin(name)))
    }
}

impl Default for Session {
    fn default() -> Self {
        Self::new()
    }
}
