//! `Session`: one Rhai engine with the whole API, a scope that lives across
//! inputs, and the session's state (`crate::state`: the client, the
//! configuration, the sinks). The REPL, `brisk run` and the Jupyter kernel
//! each own one; none of them registers functions of its own.

use std::collections::BTreeSet;
use std::sync::Arc;

use brisk_engine::CancelToken;
use rhai::{AST, Dynamic, Engine, EvalAltResult, Scope};

use crate::api;
use crate::error::ScriptError;
use crate::ship::{self, RhaiUdfs};
use crate::state::{DisplaySink, OutputSink, Rendered, SessionConfig, SessionState};

/// What an input gave, ready for a front end to show: nothing (the unit
/// value), or a value that renders as text and, where it has a table, HTML.
/// Front ends show it without touching Rhai types; embedders and tests can
/// take the value itself.
#[derive(Clone, Debug)]
pub struct Outcome(Dynamic);

impl Outcome {
    /// Whether the input gave no value to show.
    pub fn is_empty(&self) -> bool {
        self.0.is_unit()
    }

    /// The value as the REPL prints it; `None` when there is none.
    pub fn text(&self) -> Option<String> {
        (!self.is_empty()).then(|| crate::print::display(&self.0))
    }

    /// The value as text and HTML (Jupyter's `execute_result`); `None` when there is none.
    pub fn rendered(&self) -> Option<Rendered> {
        (!self.is_empty()).then(|| crate::print::rendered(&self.0))
    }

    /// The value itself.
    pub fn into_value(self) -> Dynamic {
        self.0
    }
}

/// A scripting session.
pub struct Session {
    engine: Engine,
    scope: Scope<'static>,
    ast: AST,
    state: Arc<SessionState>,
    signatures: std::sync::OnceLock<Vec<crate::complete::Signature>>,
}

/// Functions a session also has as values, so `read_text(p).map(parse_json)`
/// reads as Dask's `.map(json.loads)`; `:vars` leaves them out.
pub const PRELUDE: &[&str] = &["parse_json"];

impl Session {
    pub fn new() -> Session {
        Self::with_config(SessionConfig::default())
    }

    pub fn with_config(config: SessionConfig) -> Session {
        ship::init();
        let udfs = Arc::new(RhaiUdfs::new(api::worker_engine));
        let state = Arc::new(SessionState::new(config, udfs));
        let mut engine = Engine::new();
        api::register_client(&mut engine, &state);
        let st = state.clone();
        engine.on_print(move |s| st.print(s));
        let st = state.clone();
        engine.on_debug(move |s, _, pos| st.debug(&format!("[{pos:?}] {s}")));
        let cancel = state.cancel.clone();
        engine.on_progress(move |_| ship::progress_token(cancel.is_cancelled(), "interrupted"));
        let mut scope = Scope::new();
        for name in PRELUDE {
            if let Ok(f) = rhai::FnPtr::new(*name) {
                scope.push_constant(*name, f);
            }
        }
        Session { engine, scope, ast: AST::empty(), state, signatures: std::sync::OnceLock::new() }
    }

    /// Join the scheduler named by `BRISK_SCHEDULER_ADDRESS` (Dask's
    /// `DASK_SCHEDULER_ADDRESS`), with `BRISK_TOKEN`, when it is set: the
    /// session's graphs then run on that cluster from the first line.
    pub fn connect_from_env(&self) -> Result<(), String> {
        let Some(address) = std::env::var("BRISK_SCHEDULER_ADDRESS").ok().filter(|a| !a.is_empty()) else {
            return Ok(());
        };
        let security = brisk_distributed::Security::from_flags(None, Default::default())
            .map_err(|e| format!("cannot connect to BRISK_SCHEDULER_ADDRESS={address}: {e}"))?;
        self.connect(&address, security).map_err(|e| format!("{e} (BRISK_SCHEDULER_ADDRESS)"))
    }

    /// Join the scheduler at `address`: the session's graphs run there.
    pub fn connect(&self, address: &str, security: brisk_distributed::Security) -> Result<(), String> {
        let client = brisk_distributed::RemoteClient::connect(address, security, self.state.config().fuse)
            .map_err(|e| format!("cannot connect to {address}: {e}"))?;
        self.state.attach_cluster(crate::state::Cluster {
            client: Arc::new(client),
            local: None,
            adaptive: None,
            deployed: None,
        });
        Ok(())
    }

    pub fn state(&self) -> &Arc<SessionState> {
        &self.state
    }

    /// Send `print` output somewhere else (the kernel, a test buffer).
    pub fn set_output(&self, sink: OutputSink) {
        self.state.set_output(sink);
    }

    /// Send `debug(x)` output somewhere else (the kernel's stderr stream).
    pub fn set_debug_output(&self, sink: OutputSink) {
        self.state.set_debug_output(sink);
    }

    /// Send `display(v)` output somewhere else (the Jupyter kernel).
    pub fn set_display(&self, sink: DisplaySink) {
        self.state.set_display(sink);
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
    pub fn eval(&mut self, text: &str, origin: &str) -> Result<Outcome, ScriptError> {
        self.eval_value(text, origin).map(Outcome)
    }

    /// `eval`, giving the value itself (for embedding and tests). A panic
    /// inside (a bug in brisk) is an `ErrorKind::Internal` error and the
    /// session, its variables and functions stay usable.
    pub fn eval_value(&mut self, text: &str, origin: &str) -> Result<Dynamic, ScriptError> {
        let result = crate::error::catch_panic(origin, || self.eval_chunk(text, origin));
        // After a panic the statements are still there: the next input must not run them again.
        self.ast.clear_statements();
        result
    }

    fn eval_chunk(&mut self, text: &str, origin: &str) -> Result<Dynamic, ScriptError> {
        self.state.cancel.reset();
        let ast = self.engine.compile(text).map_err(|e| ScriptError::syntax(&e, origin))?;
        self.state.push_chunk(origin, text, &ast);
        self.ast += ast;
        let result = self.engine.eval_ast_with_scope::<Dynamic>(&mut self.scope, &self.ast);
        self.ast.clear_statements();
        result.map_err(|e| self.runtime_error(&e, origin, text))
    }

    /// A runtime error placed in its chunk. A call that found no function
    /// because it passed the wrong number of arguments says how many the
    /// function takes (Rhai only says "Function not found").
    fn runtime_error(&self, e: &EvalAltResult, origin: &str, text: &str) -> ScriptError {
        let mut error = ScriptError::runtime(e, origin, |name| self.state.fn_origin(name));
        if let EvalAltResult::ErrorFunctionNotFound(call, _) = e.unwrap_inner()
            && let Some((name, called)) = crate::error::called_function(call)
            && let Some(why) = self.wrong_arity(name, called, is_method_call(&error, origin, text, name))
        {
            error.message = why;
        }
        error
    }

    /// The script's functions named `name`, else the engine's, by number of
    /// parameters (from Rhai's metadata), checked against `called`, the
    /// number Rhai counts (with the value before the dot of a method call).
    fn wrong_arity(&self, name: &str, called: usize, method: bool) -> Option<String> {
        let defs: Vec<Vec<String>> = self
            .ast
            .iter_functions()
            .filter(|f| f.name == name)
            .map(|f| f.params.iter().map(|p| p.to_string()).collect())
            .collect();
        let mut arities: BTreeSet<usize> = defs.iter().map(Vec::len).collect();
        // One script definition is shown; with several, listing one would mislead.
        let mut shown = match &defs[..] {
            [params] if !name.starts_with("anon$") => Some(format!("fn {name}({})", params.join(", "))),
            _ => None,
        };
        if defs.is_empty() {
            for sig in self.engine.gen_fn_signatures(true) {
                if let Some(params) = sig.strip_prefix(name).and_then(|rest| rest.strip_prefix('('))
                    && let Some(end) = params.rfind(") -> ").or_else(|| params.rfind(')'))
                {
                    let n = crate::error::top_level_items(&params[..end]);
                    // A native method's first parameter is the value before the dot.
                    if !method {
                        arities.insert(n);
                    } else if n > 0 {
                        arities.insert(n - 1);
                    }
                }
            }
            shown = crate::api::docs::lookup(name).map(|d| d.signature.to_string());
        }
        // The value before the dot is no argument to a person (a script function takes it as `this`).
        let called = if method { called.saturating_sub(1) } else { called };
        crate::error::wrong_arity(name, called, &arities, shown.as_deref())
    }
}

/// Whether the failed call of `name` at the error's position is written
/// `x.name(..)`: Rhai then counts `x` among the arguments, a person does not.
/// (`f.call(..)` is not: Rhai names the function called, without `f`.)
fn is_method_call(error: &ScriptError, origin: &str, text: &str, name: &str) -> bool {
    let (Some(line), Some(column)) = (error.line, error.column) else { return false };
    let Some(src) = text.lines().nth(line.saturating_sub(1)).filter(|_| error.origin == origin) else {
        return false;
    };
    let before: Vec<char> = src.chars().take(column.saturating_sub(1)).collect();
    let at: String = src.chars().skip(before.len()).take(name.chars().count()).collect();
    at == name && before.iter().rev().find(|c| !c.is_whitespace()) == Some(&'.')
}

impl Default for Session {
    fn default() -> Self {
        Self::new()
    }
}
