//! `Session`: one Rhai engine with the whole API, a scope that lives across
//! inputs, and the session's state (`crate::state`: the client, the
//! configuration, the sinks). The REPL, `brisk run` and the Jupyter kernel
//! each own one; none of them registers functions of its own.

use std::sync::Arc;

use brisk_engine::CancelToken;
use rhai::{AST, Dynamic, Engine, Scope};

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

    /// `eval`, giving the value itself (for embedding and tests).
    pub fn eval_value(&mut self, text: &str, origin: &str) -> Result<Dynamic, ScriptError> {
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
