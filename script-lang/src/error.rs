//! Script errors as a user sees them: one sentence, with the file, line and
//! column where it happened. A failure inside a task points into the
//! closure's own source; the call that waited for it is named too.

use std::fmt;

use brisk_engine::{EngineError, SourcePos, TaskError, TaskErrorKind};
use rhai::{Dynamic, EvalAltResult, ParseError, Position};

/// What kind of failure, for exit codes and front ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    Syntax,
    Runtime,
    Task,
    Cancelled,
    /// A bug in brisk (a panic) ended the input; the session goes on.
    Internal,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ScriptError {
    pub kind: ErrorKind,
    pub message: String,
    pub origin: String,
    pub line: Option<usize>,
    pub column: Option<usize>,
}

impl fmt::Display for ScriptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.column) {
            (Some(l), Some(c)) => write!(f, "{}:{l}:{c}: {}", self.origin, self.message),
            (Some(l), None) => write!(f, "{}:{l}: {}", self.origin, self.message),
            _ => write!(f, "{}: {}", self.origin, self.message),
        }
    }
}

impl std::error::Error for ScriptError {}

/// Refusals of the script API that a caller or a test matches on by kind.
/// At the Rhai edge each becomes a runtime error with this message, so
/// scripts see the same text as before.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ApiError {
    /// An options map (`#{...}`) with a key the function does not know.
    #[error("{function} has no option \"{option}\" (options: {allowed})")]
    UnknownOption { function: String, option: String, allowed: String },
    /// An argument of the wrong type.
    #[error("{function} expects {expected}, got {got} ({shown})")]
    WrongType { function: String, expected: String, got: String, shown: String },
    /// A `config` or `annotate` key that does not exist.
    #[error("{function}: unknown option \"{option}\" (known: {known})")]
    UnknownSetting { function: &'static str, option: String, known: String },
    /// A `config` or `annotate` value that is not allowed (the message says why).
    #[error("{0}")]
    BadSetting(String),
    /// A reader's path that does not exist.
    #[error("{function}: no such file: {path}")]
    NoSuchFile { function: String, path: String },
    /// A reader's glob pattern that matches no file.
    #[error("{function}: no files match \"{pattern}\"")]
    NoMatch { function: String, pattern: String },
    /// A glob pattern that cannot be read.
    #[error("{function}: bad pattern \"{pattern}\": {reason}")]
    BadPattern { function: String, pattern: String, reason: String },
    /// A dataset directory whose name cannot be read as a pattern.
    #[error("{function}: bad directory \"{path}\": {reason}")]
    BadDirectory { function: String, path: String, reason: String },
    /// A Parquet dataset directory without parts.
    #[error("{function}: no .parquet files in {path}")]
    NoParquetFiles { function: String, path: String },
    /// A reader given a directory where it reads files.
    #[error("{function}: {path} is a directory")]
    IsDirectory { function: String, path: String },
}

impl From<ApiError> for Box<EvalAltResult> {
    fn from(e: ApiError) -> Self {
        runtime(e.to_string())
    }
}

/// A task failure carried through Rhai as the value of a runtime error, so
/// `try { } catch (e) { }` sees it and the edge can place it precisely.
#[derive(Clone, Debug)]
pub struct TaskFailure {
    pub key: String,
    pub error: TaskError,
}

impl TaskFailure {
    /// What failed, without where.
    pub fn summary(&self) -> String {
        match self.error.kind {
            TaskErrorKind::DependencyFailed => {
                format!("task {} failed because {}", self.key, self.error.message)
            }
            _ => format!("task {} failed: {}", self.key, self.error.message),
        }
    }
}

impl fmt::Display for TaskFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.summary())?;
        if let Some(p) = &self.error.position {
            write!(f, " (at {p})")?;
        }
        Ok(())
    }
}

/// An engine error as a Rhai error (position filled in by Rhai at the call).
pub fn engine_error(e: EngineError) -> Box<EvalAltResult> {
    match e {
        EngineError::Task { key, error } => {
            if error.kind == TaskErrorKind::Cancelled {
                return Box::new(EvalAltResult::ErrorTerminated(Dynamic::from("cancelled"), Position::NONE));
            }
            let f = TaskFailure { key: key.to_string(), error };
            Box::new(EvalAltResult::ErrorRuntime(Dynamic::from(f), Position::NONE))
        }
        EngineError::Cancelled => {
            Box::new(EvalAltResult::ErrorTerminated(Dynamic::from("cancelled"), Position::NONE))
        }
        other => runtime(other.to_string()),
    }
}

/// The memory error a termination token carries, if it is one.
pub fn memory_token(e: &EvalAltResult) -> Option<brisk_engine::memory::MemoryError> {
    match e {
        EvalAltResult::ErrorTerminated(t, _) => {
            t.read_lock::<brisk_engine::memory::MemoryError>().map(|m| m.clone())
        }
        _ => None,
    }
}

/// A plain runtime error with a message.
pub fn runtime(message: impl Into<String>) -> Box<EvalAltResult> {
    Box::new(EvalAltResult::ErrorRuntime(Dynamic::from(message.into()), Position::NONE))
}

impl ScriptError {
    /// A panic caught at a front end's boundary, as one clear sentence.
    pub fn internal(payload: &(dyn std::any::Any + Send), origin: &str) -> ScriptError {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        let at = PANIC_AT.take().map(|at| format!(" at {at}")).unwrap_or_default();
        ScriptError {
            kind: ErrorKind::Internal,
            message: format!("internal error: {what}{at} (this is a bug in brisk)"),
            origin: origin.to_string(),
            line: None,
            column: None,
        }
    }

    pub fn syntax(e: &ParseError, origin: &str) -> ScriptError {
        let pos = e.position();
        ScriptError {
            kind: ErrorKind::Syntax,
            message: format!("syntax error: {}", e.err_type()),
            origin: origin.to_string(),
            line: pos.line(),
            column: pos.position(),
        }
    }

    /// Place a runtime error. `origin_of_fn` finds the chunk that defines a
    /// script function (positions inside functions are relative to it).
    pub fn runtime(
        e: &EvalAltResult,
        origin: &str,
        origin_of_fn: impl Fn(&str) -> Option<String>,
    ) -> ScriptError {
        let inner = e.unwrap_inner();
        if let Some(m) = memory_token(inner) {
            let pos = inner.position();
            return ScriptError {
                kind: ErrorKind::Runtime,
                message: m.to_string(),
                origin: origin.to_string(),
                line: pos.line(),
                column: pos.position(),
            };
        }
        if let EvalAltResult::ErrorTerminated(..) = inner {
            return ScriptError {
                kind: ErrorKind::Cancelled,
                message: "interrupted".into(),
                origin: origin.to_string(),
                line: None,
                column: None,
            };
        }
        // The chunk of the innermost script function on the stack, if any.
        let mut chunk = origin.to_string();
        let mut cur = e;
        while let EvalAltResult::ErrorInFunctionCall(name, _, next, _) = cur {
            if let Some(o) = origin_of_fn(name) {
                chunk = o;
            }
            cur = next;
        }
        let pos = inner.position();
        if let EvalAltResult::ErrorRuntime(v, _) = inner
            && let Some(f) = v.read_lock::<TaskFailure>().map(|f| f.clone())
        {
            let call = match (pos.line(), pos.position()) {
                (Some(l), Some(c)) => format!(" (waited for at {chunk}:{l}:{c})"),
                _ => String::new(),
            };
            let (origin, line, column) = match &f.error.position {
                Some(SourcePos { origin, line, column }) => {
                    (origin.clone(), Some(*line as usize), Some(*column as usize))
                }
                None => (chunk.clone(), pos.line(), pos.position()),
            };
            return ScriptError {
                kind: ErrorKind::Task,
                message: format!("{}{call}", f.summary()),
                origin,
                line,
                column,
            };
        }
        let message = match inner {
            // `throw;` throws nothing: say so rather than print an empty message.
            EvalAltResult::ErrorRuntime(v, _) if v.is_unit() => "throw without a value".to_string(),
            EvalAltResult::ErrorRuntime(v, _) => v.to_string(),
            other => without_position(other),
        };
        ScriptError {
            kind: ErrorKind::Runtime,
            message,
            origin: chunk,
            line: pos.line(),
            column: pos.position(),
        }
    }
}

thread_local! {
    /// Where this thread last panicked, left by `remember_panic` for `ScriptError::internal`.
    static PANIC_AT: std::cell::Cell<Option<String>> = const { std::cell::Cell::new(None) };
}

/// For a panic hook: remember where this thread panicked, so that the error
/// made of the caught panic can say so (the payload has no location).
pub fn remember_panic(info: &std::panic::PanicHookInfo<'_>) {
    if let Some(l) = info.location() {
        PANIC_AT.set(Some(format!("{}:{}", l.file(), l.line())));
    }
}

/// Run one input's work, turning a panic inside it into an internal error:
/// a bug in brisk ends that input, never the session or the process.
pub fn catch_panic<T>(origin: &str, f: impl FnOnce() -> Result<T, ScriptError>) -> Result<T, ScriptError> {
    PANIC_AT.set(None);
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or_else(|payload| Err(ScriptError::internal(&*payload, origin)))
}

/// An error's message without Rhai's " (line l, position p)" suffix.
pub fn without_position(e: &EvalAltResult) -> String {
    let text = e.to_string();
    let pos = e.position();
    match (pos.line(), pos.position()) {
        (Some(l), Some(c)) => {
            let suffix = format!(" (line {l}, position {c})");
            text.strip_suffix(&suffix).map(str::to_string).unwrap_or(text)
        }
        (Some(l), None) => {
            let suffix = format!(" (line {l})");
            text.strip_suffix(&suffix).map(str::to_string).unwrap_or(text)
        }
        _ => text,
    }
}

/// `error: …` plus, for an error in this input, the line and a caret.
pub fn error_block(e: &ScriptError, text: &str, origin: &str, colour: bool) -> String {
    let head = if colour { format!("\x1b[1;31merror\x1b[0m: {e}") } else { format!("error: {e}") };
    if e.origin != origin {
        return head;
    }
    let (Some(line), Some(col)) = (e.line, e.column) else { return head };
    let Some(src) = text.lines().nth(line.saturating_sub(1)) else { return head };
    let pad: String =
        src.chars().take(col.saturating_sub(1)).map(|c| if c == '\t' { '\t' } else { ' ' }).collect();
    format!("{head}\n  {src}\n  {pad}^")
}

/// The name and the number of arguments of a call that Rhai found no
/// function for: its `ErrorFunctionNotFound` text is `f (i64, string)`.
pub fn called_function(text: &str) -> Option<(&str, usize)> {
    let (name, args) = text.split_once(" (")?;
    let args = args.strip_suffix(')')?;
    Some((name, top_level_items(args)))
}

/// How many comma-separated items `list` has outside brackets (`""` has none).
pub fn top_level_items(list: &str) -> usize {
    if list.trim().is_empty() {
        return 0;
    }
    let mut depth = 0i32;
    let mut n = 1;
    for c in list.chars() {
        match c {
            '(' | '<' | '[' | '{' => depth += 1,
            ')' | '>' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => n += 1,
            _ => {}
        }
    }
    n
}

/// Why a call of `name` with `called` arguments found nothing, when
/// functions of that name exist with these numbers of parameters (`shown`:
/// how they are called, where known). `None` when one of them takes that
/// many arguments: then the argument types did not match, which Rhai's own
/// message already says.
pub fn wrong_arity(
    name: &str,
    called: usize,
    arities: &std::collections::BTreeSet<usize>,
    shown: Option<&str>,
) -> Option<String> {
    if arities.is_empty() || arities.contains(&called) {
        return None;
    }
    let counts: Vec<usize> = arities.iter().copied().collect();
    let (first, last) = (counts[0], counts[counts.len() - 1]);
    let takes = match counts.len() {
        1 => first.to_string(),
        _ if last - first + 1 == counts.len() && counts.len() > 2 => format!("{first} to {last}"),
        n => {
            let head: Vec<String> = counts[..n - 1].iter().map(usize::to_string).collect();
            format!("{} or {last}", head.join(", "))
        }
    };
    let noun = if counts == [1] { "argument" } else { "arguments" };
    let who = if name.starts_with("anon$") { "this closure".to_string() } else { name.to_string() };
    let shown = shown.map(|s| format!(" ({s})")).unwrap_or_default();
    Some(format!("{who} takes {takes} {noun}{shown}, called with {called}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn calls_are_counted_and_arities_said() {
        assert_eq!(called_function("f (i64, i64, i64)"), Some(("f", 3)));
        assert_eq!(called_function("f ()"), Some(("f", 0)));
        assert_eq!(called_function("sub_string (&str | ImmutableString | String)"), Some(("sub_string", 1)));
        assert_eq!(called_function("g (Map<a, b>, i64)"), Some(("g", 2)));
        let set = |v: &[usize]| v.iter().copied().collect::<BTreeSet<_>>();
        assert_eq!(
            wrong_arity("f", 3, &set(&[2]), Some("f(a, b)")).as_deref(),
            Some("f takes 2 arguments (f(a, b)), called with 3")
        );
        assert_eq!(
            wrong_arity("f", 0, &set(&[1]), None).as_deref(),
            Some("f takes 1 argument, called with 0")
        );
        assert_eq!(
            wrong_arity("f", 5, &set(&[1, 2]), None).as_deref(),
            Some("f takes 1 or 2 arguments, called with 5")
        );
        assert_eq!(
            wrong_arity("f", 9, &set(&[1, 2, 3]), None).as_deref(),
            Some("f takes 1 to 3 arguments, called with 9")
        );
        assert_eq!(
            wrong_arity("f", 9, &set(&[1, 3, 5]), None).as_deref(),
            Some("f takes 1, 3 or 5 arguments, called with 9")
        );
        assert_eq!(
            wrong_arity("anon$12", 2, &set(&[1]), None).as_deref(),
            Some("this closure takes 1 argument, called with 2")
        );
        assert_eq!(wrong_arity("f", 2, &set(&[2]), None), None, "same count: a type mismatch");
        assert_eq!(wrong_arity("f", 2, &set(&[]), None), None, "no such function");
    }
}
