//! The interactive REPL (rustyline): one Session for the whole run,
//! multi-line input decided by Rhai's parser, Tab completion and `:help`
//! from the shared script-lang sources, colours, history on disk, meta
//! commands, Ctrl-C that cancels a compute and keeps the session.

use std::borrow::Cow;
use std::cell::RefCell;
use std::io::IsTerminal;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::process::ExitCode;
use std::rc::Rc;
use std::time::Instant;

use brisk_script::error::catch_panic;
use brisk_script::input::{InputState, input_state};
use brisk_script::{ScriptError, Session};
use rustyline::completion::Completer;
use rustyline::error::ReadlineError;
use rustyline::highlight::{CmdKind, Highlighter};
use rustyline::hint::{Hinter, HistoryHinter};
use rustyline::history::DefaultHistory;
use rustyline::validate::Validator;
use rustyline::{Context, Editor, Event, EventHandler, Helper};

use crate::typeahead::{self, Chunker, Stash};

struct BriskHelper {
    session: Rc<RefCell<Session>>,
    hinter: HistoryHinter,
    colour: bool,
    /// The start of a line being handed over in pieces (no hint then).
    stash: Stash,
}

impl Completer for BriskHelper {
    type Candidate = String;

    fn complete(&self, line: &str, pos: usize, _: &Context<'_>) -> rustyline::Result<(usize, Vec<String>)> {
        let c = self.session.borrow().complete(line, pos);
        Ok((c.start, c.candidates))
    }
}

impl Hinter for BriskHelper {
    type Hint = String;

    /// No hint for a long line, nor a long hint: a hint makes rustyline
    /// redraw the whole line for every key.
    fn hint(&self, line: &str, pos: usize, ctx: &Context<'_>) -> Option<String> {
        if line.len() >= typeahead::CHUNK || !typeahead::lock(&self.stash).is_empty() {
            return None;
        }
        self.hinter.hint(line, pos, ctx).filter(|h| h.len() < typeahead::CHUNK)
    }
}

impl Highlighter for BriskHelper {
    fn highlight<'l>(&self, line: &'l str, _: usize) -> Cow<'l, str> {
        if self.colour && line.len() <= MAX_COLOURED {
            Cow::Owned(crate::highlight::colour(line))
        } else {
            Cow::Borrowed(line)
        }
    }

    fn highlight_hint<'h>(&self, hint: &'h str) -> Cow<'h, str> {
        if self.colour { Cow::Owned(format!("\x1b[90m{hint}\x1b[0m")) } else { Cow::Borrowed(hint) }
    }

    /// Recolour on each key only while the line is short: the answer
    /// "yes" makes rustyline redraw the whole line for every key.
    fn highlight_char(&self, line: &str, _: usize, _: CmdKind) -> bool {
        self.colour && line.len() < typeahead::CHUNK
    }
}

/// Lines longer than this are drawn without colours (each redraw colours
/// the whole line).
const MAX_COLOURED: usize = 64 << 10;

/// Enter always hands the line over: `run` keeps an unfinished statement
/// and asks for the rest under a continuation prompt.
impl Validator for BriskHelper {}

impl Helper for BriskHelper {}

/// Where history lives: `$BRISK_HISTORY`, else the user's data directory.
fn history_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("BRISK_HISTORY") {
        return Some(PathBuf::from(p));
    }
    let data = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))?;
    Some(data.join("brisk").join("history"))
}

/// Run the REPL until `:quit` or Ctrl-D.
pub fn run(session: Session) -> anyhow::Result<ExitCode> {
    crate::terminal::interrupt_on_ctrl_c(&session, false);
    session.set_output(std::sync::Arc::new(crate::dash::inline::print_line));
    let colour = crate::terminal::colour_on(&std::io::stdout());
    let session = Rc::new(RefCell::new(session));
    // rustyline's buffer of typed-ahead input lives on between lines
    // (feature buffer-redux): without it, lines pasted at once were lost.
    let mut rl: Editor<BriskHelper, DefaultHistory> = Editor::new()?;
    let stash = Stash::default();
    let hinter = HistoryHinter::new();
    rl.set_helper(Some(BriskHelper { session: session.clone(), hinter, colour, stash: stash.clone() }));
    rl.bind_sequence(Event::Any, EventHandler::Conditional(Box::new(Chunker { stash: stash.clone() })));
    let history = history_path();
    if let Some(p) = &history {
        let _ = rl.load_history(p);
    }
    println!(
        "brisk {} — Rhai on a lazy task-graph engine. :help lists the API; Ctrl-D exits.",
        env!("CARGO_PKG_VERSION")
    );
    let mut repl = Repl { rl, session, colour, history, n: 0, pending: String::new() };
    loop {
        let prompt = repl.prompt();
        // A bug in the line editor's helpers (completion, colours) loses the line, not the session.
        let read = catch_unwind(AssertUnwindSafe(|| repl.rl.readline(prompt)));
        let start = std::mem::take(&mut *typeahead::lock(&stash));
        match read {
            Err(panic) => {
                eprintln!("error: {}", ScriptError::internal(&*panic, "the line editor"));
                repl.pending.clear();
            }
            Ok(Ok(line)) => {
                let line = if start.is_empty() {
                    line
                } else {
                    repl.show_whole(prompt, &start, &line);
                    start + line.as_str()
                };
                if repl.accept(&line) {
                    break;
                }
            }
            // Ctrl-C at the prompt drops the line and anything unfinished.
            Ok(Err(ReadlineError::Interrupted)) => repl.pending.clear(),
            Ok(Err(ReadlineError::Eof)) => break,
            // rustyline reads UTF-8 and gives up on a line at the first byte that is not.
            Ok(Err(ReadlineError::Io(e))) if e.kind() == std::io::ErrorKind::InvalidData => repl.not_utf8(),
            Ok(Err(e)) => return Err(e.into()),
        }
    }
    Ok(ExitCode::SUCCESS)
}

struct Repl {
    rl: Editor<BriskHelper, DefaultHistory>,
    session: Rc<RefCell<Session>>,
    colour: bool,
    history: Option<PathBuf>,
    /// Inputs run so far (for their names, `<input N>`).
    n: usize,
    /// An unfinished statement typed so far (open brace, bracket, string).
    pending: String,
}

impl Repl {
    fn prompt(&self) -> &'static str {
        if self.pending.is_empty() { "brisk> " } else { "  ...> " }
    }

    /// One line as entered: a meta command, part of a statement, or the
    /// end of one (then it runs). Returns whether to leave the REPL.
    fn accept(&mut self, line: &str) -> bool {
        if self.pending.is_empty() && line.trim().is_empty() {
            return false;
        }
        if self.pending.is_empty()
            && let Some(meta) = line.trim().strip_prefix(':')
        {
            remember(&mut self.rl, line, self.history.as_deref());
            return meta_command(meta, &self.session, self.colour);
        }
        if !self.pending.is_empty() {
            self.pending.push('\n');
        }
        self.pending.push_str(line);
        if input_state(&self.pending) == InputState::Incomplete {
            return false;
        }
        let text = std::mem::take(&mut self.pending);
        remember(&mut self.rl, &text, self.history.as_deref());
        self.n += 1;
        evaluate(&self.session, &text, &format!("<input {}>", self.n), self.colour);
        false
    }

    /// A line kept aside while it was pasted (see `typeahead`) shows only
    /// its last piece: draw it whole in its place.
    fn show_whole(&mut self, prompt: &str, start: &str, end: &str) {
        let Some((cols, _)) = self.rl.dimensions().filter(|(c, _)| *c > 0) else {
            return println!("{prompt}{start}{end}");
        };
        // The rows the prompt and the last piece took, and the one below.
        let width = ratatui::text::Span::raw(format!("{prompt}{end}")).width();
        let rows = width / cols as usize + 1;
        print!("\x1b[{rows}A\r\x1b[J");
        println!("{prompt}{start}{end}");
    }

    /// A byte that is not UTF-8 ends the line being typed: rustyline gives
    /// the line up, and the input it had read ahead with it. That line, any
    /// unfinished input before it and what is still typed ahead after it
    /// (the rest of a paste) are dropped; the session goes on.
    fn not_utf8(&mut self) {
        typeahead::drop_waiting();
        let before = if self.pending.is_empty() { "" } else { ", with the unfinished input before it" };
        eprintln!(
            "error: the input held a byte that is not UTF-8 text; brisk reads UTF-8 only, so the line and any input typed ahead after it were dropped{before}"
        );
        self.pending.clear();
    }
}

/// Inputs longer than this stay out of the history: recalling one would
/// not help, and the history file is written whole after every input.
const MAX_REMEMBERED: usize = 16 << 10;

/// Add an input to the history and save it (a failure to save is not worth
/// interrupting anyone for).
fn remember(rl: &mut Editor<BriskHelper, DefaultHistory>, text: &str, path: Option<&std::path::Path>) {
    if text.len() > MAX_REMEMBERED {
        return;
    }
    let _ = rl.add_history_entry(text);
    if let Some(p) = path {
        if let Some(dir) = p.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = rl.save_history(p);
    }
}

/// Evaluate one input, print its value or its error (with a caret under
/// the position when it is in this input). A panic in brisk while it runs
/// or prints is reported as an internal error and the session goes on.
fn evaluate(session: &Rc<RefCell<Session>>, text: &str, origin: &str, colour: bool) {
    let bar = std::io::stderr()
        .is_terminal()
        .then(|| crate::dash::inline::Panel::start(session.borrow().state().clone(), colour));
    let result = catch_panic(origin, || session.borrow_mut().eval(text, origin).map(|o| o.text()));
    drop(bar);
    print_result(result, text, origin, colour);
}

fn print_result(result: Result<Option<String>, ScriptError>, text: &str, origin: &str, colour: bool) {
    match result {
        Ok(shown) => {
            if let Some(shown) = shown {
                println!("{shown}");
            }
        }
        Err(e) => eprintln!("{}", brisk_script::error::error_block(&e, text, origin, colour)),
    }
}

/// Meta commands; returns whether to leave the REPL.
fn meta_command(meta: &str, session: &Rc<RefCell<Session>>, colour: bool) -> bool {
    let (cmd, rest) = meta.split_once(char::is_whitespace).unwrap_or((meta, ""));
    let rest = rest.trim();
    match cmd {
        "quit" | "q" | "exit" => return true,
        "help" if rest.is_empty() => println!(
            "{}\n\nmeta commands: :help [NAME]  :vars  :load FILE  :time EXPR  :clear  :dash  :quit",
            brisk_script::api::docs::index()
        ),
        "help" => match brisk_script::api::docs::help(rest) {
            Some(text) => println!("{text}"),
            None => println!("no help for {rest}; :help lists what there is"),
        },
        "vars" => {
            let s = session.borrow();
            let mut vars: Vec<(String, String)> = s
                .scope()
                .iter_raw()
                .filter(|(name, _, _)| !brisk_script::session::PRELUDE.contains(name))
                .map(|(name, _, v)| (name.to_string(), brisk_script::types::type_name(v)))
                .collect();
            vars.sort();
            for (name, ty) in vars {
                println!("{name}: {ty}");
            }
        }
        "clear" => print!("\x1b[2J\x1b[H"),
        "load" if !rest.is_empty() => match crate::source::read_file(std::path::Path::new(rest)) {
            Ok(text) => evaluate(session, &text, rest, colour),
            Err(e) => eprintln!("error: {e:#}"),
        },
        "time" if !rest.is_empty() => {
            let t0 = Instant::now();
            evaluate(session, rest, "<time>", colour);
            println!("took {:.3} s", t0.elapsed().as_secs_f64());
        }
        "dash" => {
            let (state, cancel) = {
                let s = session.borrow();
                (s.state().clone(), s.cancel_token())
            };
            let work = || {
                (!rest.is_empty()).then(|| {
                    catch_panic("<dash>", || session.borrow_mut().eval(rest, "<dash>").map(|o| o.text()))
                })
            };
            match crate::dash::full::show(state, cancel, colour, work) {
                Ok(Some(result)) => print_result(result, rest, "<dash>", colour),
                Ok(None) => {}
                Err(e) => eprintln!("error: the dashboard cannot use this terminal: {e}"),
            }
        }
        _ => println!("unknown command :{meta} (try :help)"),
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use brisk_script::error::error_block;

    #[test]
    fn errors_in_this_input_get_a_caret() {
        let e = ScriptError {
            kind: brisk_script::ErrorKind::Syntax,
            message: "syntax error: Unexpected ';'".into(),
            origin: "<input 1>".into(),
            line: Some(1),
            column: Some(9),
        };
        let block = error_block(&e, "let x = ;", "<input 1>", false);
        assert_eq!(block, "error: <input 1>:1:9: syntax error: Unexpected ';'\n  let x = ;\n          ^");
        assert_eq!(error_block(&e, "let x = ;", "<input 2>", false).lines().count(), 1);
    }
}
