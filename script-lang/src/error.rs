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
