//! Shipped closures. A closure given to `delayed`, `submit`, `map`… becomes
//! an engine `Udf`: the session's source chunks, the function's name and its
//! captured values. Every executor — a local worker thread today, a remote
//! worker process later — compiles the chunks once per thread and calls the
//! function by name. Names of anonymous closures are hashes of their source
//! and position under Rhai's hashing seed, so every brisk process sets the
//! same fixed seed (`init`) and compiles each chunk on its own.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Once};

use brisk_engine::client::{CancelToken, Client, task_client};
use brisk_engine::coordination::Coordinator;
use brisk_engine::runner::{Code, Seat, TaskContext, Udf, UdfRunner};
use brisk_engine::{Key, SourcePos, TaskError, Value};
use rhai::{AST, CallFnOptions, Dynamic, Engine, EvalAltResult, FnPtr, Scope};

use crate::convert::{ConvertError, to_dynamic, to_value};

/// The one hashing seed of every brisk process ("brisk" spelled in ASCII).
const SEED: [u64; 4] =
    [0x6272_6973_6b00_0001, 0x6272_6973_6b00_0002, 0x6272_6973_6b00_0003, 0x6272_6973_6b00_0004];

/// Set Rhai's hashing seed. Call before creating any engine; idempotent.
pub fn init() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rhai::config::hashing::set_hashing_seed(Some(SEED));
    });
}

/// Turn a function pointer into its shipped form. Refuses closures that
/// capture something that cannot travel (a lazy collection, a function).
/// The progress hook's verdict between two operations of a script: stop it
/// when it was cancelled, or when its values are outgrowing the memory
/// budget (a `MemoryError` as the token, reported as that error).
pub fn progress_token(cancelled: bool, why: &str) -> Option<Dynamic> {
    if cancelled {
        return Some(Dynamic::from(why.to_string()));
    }
    brisk_engine::memory::check_step().err().map(Dynamic::from)
}

pub fn ship(f: &FnPtr, code: Arc<Code>) -> Result<Udf, ConvertError> {
    let label = if f.is_anonymous() { "lambda".to_string() } else { f.fn_name().to_string() };
    let curry = f
        .iter_curry()
        .enumerate()
        .map(|(i, d)| to_value(d, &format!("captured value #{} of closure '{label}'", i + 1)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Udf { label, entry: f.fn_name().to_string(), code, curry })
}

/// Runs shipped closures on this thread's own engine, compiling each code
/// version once per thread.
pub struct RhaiUdfs {
    make_engine: fn() -> Engine,
}

impl RhaiUdfs {
    pub fn new(make_engine: fn() -> Engine) -> RhaiUdfs {
        init();
        RhaiUdfs { make_engine }
    }
}

struct ThreadEngine {
    engine: Engine,
    compiled: HashMap<u128, Arc<AST>>,
}

thread_local! {
    static ENGINE: RefCell<Option<ThreadEngine>> = const { RefCell::new(None) };
    /// The cancel flag of the task running on this thread, read by the
    /// engine's progress hook so a cancelled closure stops mid-loop.
    static CURRENT_CANCEL: RefCell<Vec<Arc<AtomicBool>>> = const { RefCell::new(Vec::new()) };
    /// What the running task reaches of its surroundings from Rhai.
    static CURRENT_TASK: RefCell<Option<TaskSide>> = const { RefCell::new(None) };
}

/// The running task's surroundings, for the functions a closure calls
/// inside it: `Variable`, `Queue`… (`coordinator`), `worker_client`
/// (`client`, and `code` to ship the closures it submits), `secede`.
#[derive(Clone)]
pub(crate) struct TaskSide {
    pub key: Key,
    /// Stops its waits: the task's cancel flag and its client's interrupt.
    pub cancel: CancelToken,
    pub coordinator: Option<Arc<dyn Coordinator>>,
    pub client: Option<Arc<dyn Client>>,
    pub seat: Option<Arc<dyn Seat>>,
    pub code: Arc<Code>,
    /// The closure lent its thread itself (`secede()`, `worker_client()`):
    /// a wait on futures then leaves it lent.
    pub seceded: Arc<AtomicBool>,
    /// The Lock and Semaphore objects the closure made: what they hold is
    /// freed when it ends, since nothing else can release it.
    pub holders: Arc<std::sync::Mutex<Vec<u64>>>,
}

impl TaskSide {
    /// Free the locks and leases the closure's objects still hold.
    fn release_holders(&self) {
        let holders = std::mem::take(&mut *self.holders.lock().unwrap_or_else(|e| e.into_inner()));
        if let (false, Some(c)) = (holders.is_empty(), &self.coordinator) {
            // Best effort: a worker whose scheduler is gone frees them anyway.
            let op = brisk_engine::coordination::CoordOp::DropHolders { holders };
            let _ = c.coordinate(op, brisk_engine::coordination::Deadline::Now, &CancelToken::new());
        }
    }
}

/// The running task's surroundings, if this thread runs a task.
pub(crate) fn task_side() -> Option<TaskSide> {
    CURRENT_TASK.with(|c| c.borrow().clone())
}

fn current_task_cancelled() -> bool {
    CURRENT_CANCEL.with(|c| c.borrow().iter().any(|f| f.load(Ordering::Relaxed)))
}

/// Compiled code versions kept per thread (a REPL makes one per input).
const CACHE_VERSIONS: usize = 8;

impl RhaiUdfs {
    /// Run `body` with this thread's engine, `udf`'s compiled code and the
    /// task's cancel flags in place.
    fn with_code<T>(
        &self,
        udf: &Udf,
        ctx: &TaskContext<'_>,
        body: impl FnOnce(&Engine, &AST) -> Result<T, TaskError>,
    ) -> Result<T, TaskError> {
        ENGINE.with(|cell| match cell.try_borrow_mut() {
            Ok(mut slot) => {
                let te = slot.get_or_insert_with(|| self.thread_engine());
                run_in(te, udf, ctx, body)
            }
            // A task run inline inside another's wait (sync mode, a task
            // that waits on tasks it submitted): an engine of its own.
            Err(_) => run_in(&mut self.thread_engine(), udf, ctx, body),
        })
    }

    fn thread_engine(&self) -> ThreadEngine {
        let mut engine = (self.make_engine)();
        engine.on_progress(|_| progress_token(current_task_cancelled(), "cancelled"));
        ThreadEngine { engine, compiled: HashMap::new() }
    }
}

/// Run `body` with `te`, `udf`'s compiled code and the task's cancel flags
/// and surroundings in place (those of a task it runs inside restored after).
fn run_in<T>(
    te: &mut ThreadEngine,
    udf: &Udf,
    ctx: &TaskContext<'_>,
    body: impl FnOnce(&Engine, &AST) -> Result<T, TaskError>,
) -> Result<T, TaskError> {
    let ast = match te.compiled.get(&udf.code.id) {
        Some(ast) => ast.clone(),
        None => {
            let ast = Arc::new(compile_chunks(&te.engine, &udf.code)?);
            if te.compiled.len() >= CACHE_VERSIONS {
                te.compiled.clear();
            }
            te.compiled.insert(udf.code.id, ast.clone());
            ast
        }
    };
    let mut flags = vec![ctx.cancelled.clone()];
    flags.extend(ctx.interrupt.cloned());
    let outer_flags = CURRENT_CANCEL.with(|c| std::mem::replace(&mut *c.borrow_mut(), flags));
    let side = TaskSide {
        key: ctx.key.clone(),
        cancel: CancelToken::of_task(ctx.cancelled.clone(), ctx.interrupt.cloned()),
        coordinator: ctx.coordinator.cloned(),
        client: task_client(ctx),
        seat: ctx.seat.cloned(),
        code: udf.code.clone(),
        seceded: Arc::default(),
        holders: Arc::default(),
    };
    let outer = CURRENT_TASK.with(|c| c.replace(Some(side)));
    let result = body(&te.engine, &ast);
    if let Some(side) = CURRENT_TASK.with(|c| std::mem::replace(&mut *c.borrow_mut(), outer)) {
        side.release_holders();
    }
    CURRENT_CANCEL.with(|c| *c.borrow_mut() = outer_flags);
    result
}

impl UdfRunner for RhaiUdfs {
    /// A lowered closure (`lower`) answers without the engine when it can.
    fn call(&self, udf: &Udf, args: Vec<Value>, ctx: &TaskContext<'_>) -> Result<Value, TaskError> {
        let arity = udf.curry.len() + args.len();
        let known = cached_lowered(udf, arity);
        if let Some(Some(l)) = &known
            && let Some(v) = l.eval_args(&udf.curry, &args)
        {
            return Ok(v);
        }
        self.with_code(udf, ctx, |engine, ast| {
            let is_script = ast.iter_functions().any(|f| f.name == udf.entry && f.params.len() == arity);
            if known.is_none()
                && is_script
                && let Some(l) = lowered(ast, udf, arity)
                && let Some(v) = l.eval_args(&udf.curry, &args)
            {
                return Ok(v);
            }
            let mut all: Vec<Dynamic> = udf.curry.iter().map(to_dynamic).collect();
            all.extend(args.iter().map(to_dynamic));
            match call_entry(engine, ast, &udf.entry, all) {
                Ok(d) => to_value(&d, &format!("the result of '{}'", udf.label)).map_err(TaskError::from),
                Err(e) => Err(task_error(&e, &udf.code, ctx.is_cancelled())),
            }
        })
    }

    /// One lookup of the engine and the code for a whole batch; the
    /// captured values are converted once, and a closure simple enough to
    /// be lowered (`lower`) runs natively on the records it can answer.
    fn call_each(
        &self,
        udf: &Udf,
        items: &[Value],
        ctx: &TaskContext<'_>,
    ) -> Result<Vec<Value>, (usize, TaskError)> {
        let mut failed = 0;
        let out = self.with_code(udf, ctx, |engine, ast| {
            let curry: Vec<Dynamic> = udf.curry.iter().map(to_dynamic).collect();
            let is_script =
                ast.iter_functions().any(|f| f.name == udf.entry && f.params.len() == curry.len() + 1);
            let mut lowered = if is_script { lowered(ast, udf, curry.len() + 1) } else { None };
            let what = format!("the result of '{}'", udf.label);
            let mut scope = Scope::new();
            let mut out = Vec::with_capacity(items.len());
            for (i, x) in items.iter().enumerate() {
                failed = i;
                // What the interpreter's progress hook does, now and then.
                if i % 1024 == 1023 && lowered.is_some() {
                    if ctx.is_cancelled() {
                        return Err(TaskError::cancelled());
                    }
                    // Past the memory budget: the interpreter takes over and
                    // stops with its error.
                    if brisk_engine::memory::check_step().is_err() {
                        lowered = None;
                    }
                }
                if let Some(v) = lowered.as_ref().and_then(|l| l.eval(&udf.curry, x)) {
                    out.push(v);
                    continue;
                }
                let mut args = curry.clone();
                args.push(to_dynamic(x));
                let r = if is_script {
                    let options = CallFnOptions::new().eval_ast(false).rewind_scope(true);
                    engine.call_fn_with_options::<Dynamic>(options, &mut scope, ast, &udf.entry, args)
                } else {
                    call_entry(engine, ast, &udf.entry, args)
                };
                match r {
                    Ok(d) => out.push(to_value(&d, &what).map_err(TaskError::from)?),
                    Err(e) => return Err(task_error(&e, &udf.code, ctx.is_cancelled())),
                }
            }
            Ok(out)
        });
        out.map_err(|e| (failed, e))
    }
}

/// Lowered closures by code version, entry and arity, found once per
/// thread (a session's code holds all its functions). Few: scanned, not
/// hashed, so a lookup copies no name.
type LoweredCache = Vec<((u128, String, usize), Option<Arc<crate::lower::Lowered>>)>;

thread_local! {
    static LOWERED: RefCell<LoweredCache> = const { RefCell::new(Vec::new()) };
}

/// The most entries kept; a thread that meets more starts afresh.
const LOWERED_ENTRIES: usize = 64;

/// What this thread found of `udf` taking `arity` arguments: `None` when
/// it has not looked yet (its code is needed), `Some(None)` when the body
/// cannot be lowered.
fn cached_lowered(udf: &Udf, arity: usize) -> Option<Option<Arc<crate::lower::Lowered>>> {
    LOWERED.with(|cache| {
        cache.borrow().iter().find_map(|((id, entry, n), l)| {
            (*id == udf.code.id && *n == arity && *entry == udf.entry).then(|| l.clone())
        })
    })
}

/// `udf` taking `arity` arguments (a script function of `ast`) lowered to
/// native code, if its body allows.
fn lowered(ast: &AST, udf: &Udf, arity: usize) -> Option<Arc<crate::lower::Lowered>> {
    if let Some(found) = cached_lowered(udf, arity) {
        return found;
    }
    let found = crate::lower::lower(ast, &udf.entry, arity).map(Arc::new);
    LOWERED.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.len() >= LOWERED_ENTRIES {
            cache.clear();
        }
        cache.push(((udf.code.id, udf.entry.clone(), arity), found.clone()));
    });
    found
}

fn call_entry(
    engine: &Engine,
    ast: &AST,
    entry: &str,
    args: Vec<Dynamic>,
) -> Result<Dynamic, Box<EvalAltResult>> {
    let is_script = ast.iter_functions().any(|f| f.name == entry && f.params.len() == args.len());
    if is_script {
        let options = CallFnOptions::new().eval_ast(false).rewind_scope(true);
        engine.call_fn_with_options::<Dynamic>(options, &mut Scope::new(), ast, entry, args)
    } else {
        // A registered (native) function, called through a function pointer.
        FnPtr::new(entry)?.call::<Dynamic>(engine, ast, args)
    }
}

/// Compile every chunk on its own (so closure names match the client's) and
/// merge their functions.
pub fn compile_chunks(engine: &Engine, code: &Code) -> Result<AST, TaskError> {
    let mut ast = AST::empty();
    for chunk in &code.chunks {
        let part = engine.compile(&*chunk.text).map_err(|e| {
            TaskError::internal(format!("shipped code from {} does not compile: {e}", chunk.origin))
        })?;
        ast += part.clone_functions_only();
    }
    Ok(ast)
}

/// A Rhai error inside a closure, as a task error with the closure's position.
fn task_error(e: &EvalAltResult, code: &Code, cancelled: bool) -> TaskError {
    let inner = e.unwrap_inner();
    let memory = crate::error::memory_token(inner);
    if cancelled || (memory.is_none() && matches!(inner, EvalAltResult::ErrorTerminated(..))) {
        return TaskError::cancelled();
    }
    let pos = inner.position();
    let message = match memory {
        Some(m) => m.to_string(),
        None => crate::error::without_position(inner),
    };
    let mut error = TaskError::user(message);
    if let (Some(line), Some(column)) = (pos.line(), pos.position()) {
        let origin = origin_of(e, code);
        error = error.with_position(SourcePos { origin, line: line as u32, column: column as u32 });
    }
    error
}

/// Which chunk an error comes from: the chunk that defines the innermost
/// function of the call stack (Rhai positions are relative to it).
fn origin_of(e: &EvalAltResult, code: &Code) -> String {
    let mut innermost_fn: Option<&str> = None;
    let mut cur = e;
    while let EvalAltResult::ErrorInFunctionCall(name, _, inner, _) = cur {
        innermost_fn = Some(name.as_str());
        cur = inner;
    }
    innermost_fn
        .and_then(|name| chunk_defining(code, name))
        .or_else(|| code.chunks.last().map(|c| c.origin.to_string()))
        .unwrap_or_default()
}

/// The origin of the latest chunk that defines a script function `name`.
/// Compiles chunks again, so it is only for error paths.
fn chunk_defining(code: &Code, name: &str) -> Option<String> {
    let engine = Engine::new_raw();
    code.chunks
        .iter()
        .rev()
        .find(|c| engine.compile(&*c.text).is_ok_and(|ast| ast.iter_functions().any(|f| f.name == name)))
        .map(|c| c.origin.to_string())
}
