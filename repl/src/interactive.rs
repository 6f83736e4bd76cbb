//! The interactive REPL (rustyline): one Session for the whole run,
//! multi-line input decided by Rhai's parser, Tab completion and `:help`
//! from the shared script-lang sources, colours, history on disk, meta
//! commands, Ctrl-C that cancels a compute and keeps the session.

use std::borrow::Cow;
use std::cell::RefCell;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::rc::Rc;
use std::time::Instant;

use brisk_script::input::{InputState, input_state};
use brisk_script::{Outcome, ScriptError, Session};
use rustyline::completion::Completer;
use rustyline::error::ReadlineError;
use rustyline::highlight::{CmdKind, Highlighter};
use rustyline::hint::{Hinter, HistoryHinter};
use rustyline::history::DefaultHistory;
use rustyline::validate::Validator;
use rustyline::{Context, Editor, Helper};

struct BriskHelper {
    session: Rc<RefCell<Session>>,
    hinter: HistoryHinter,
    colour: bool,
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

    fn hint(&self, line: &str, pos: usize, ctx: &Context<'_>) -> Option<String> {
        self.hinter.hint(line, pos, ctx)
    }
}

impl Highlighter for BriskHelper {
    fn highlight<'l>(&self, line: &'l str, _: usize) -> Cow<'l, str> {
        if self.colour { Cow::Owned(crate::highlight::colour(line)) } else { Cow::Borrowed(line) }
    }

    fn highlight_hint<'h>(&self, hint: &'h str) -> Cow<'h, str> {
        if self.colour { Cow::Owned(format!("\x1b[90m{hint}\x1b[0m")) } else { Cow::Borrowed(hint) }
    }

    fn highlight_char(&self, _: &str, _: usize, _: CmdKind) -> bool {
        self.colour
    }
}

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
    let mut rl: Editor<BriskHelper, DefaultHistory> = Editor::new()?;
    rl.set_helper(Some(BriskHelper { session: session.clone(), hinter: HistoryHinter::new(), colour }));
    let history = history_path();
    if let Some(p) = &history {
        let _ = rl.load_history(p);
    }
    println!(
        "brisk {} — Rhai on a lazy task-graph engine. :help lists the API; Ctrl-D exits.",
        env!("CARGO_PKG_VERSION")
    );
    let mut n = 0;
    // An unfinished statement typed so far (open brace, bracket, string).
    let mut pending = String::new();
    loop {
        let prompt = if pending.is_empty() { "brisk> " } else { "  ...> " };
        match rl.readline(prompt) {
            Ok(line) => {
                if pending.is_empty() && line.trim().is_empty() {
                    continue;
                }
                if pending.is_empty()
                    && let Some(meta) = line.trim().strip_prefix(':')
                {
                    remember(&mut rl, &line, history.as_deref());
                    if meta_command(meta, &session, colour) {
                        break;
                    }
                    continue;
                }
                if !pending.is_empty() {
                    pending.push('\n');
                }
                pending.push_str(&line);
                if input_state(&pending) == InputState::Incomplete {
                    continue;
                }
                let text = std::mem::take(&mut pending);
                remember(&mut rl, &text, history.as_deref());
                n += 1;
                evaluate(&session, &text, &format!("<input {n}>"), colour);
            }
            // Ctrl-C at the prompt drops the line and anything unfinished.
            Err(ReadlineError::Interrupted) => pending.clear(),
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Add an input to the history and save it (a failure to save is not worth
/// interrupting anyone for).
fn remember(rl: &mut Editor<BriskHelper, DefaultHistory>, text: &str, path: Option<&std::path::Path>) {
    let _ = rl.add_history_entry(text);
    if let Some(p) = path {
        if let Some(dir) = p.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = rl.save_history(p);
    }
}

/// Evaluate one input, print its value or its error (with a caret under
/// the position when it is in this input).
fn evaluate(session: &Rc<RefCell<Session>>, text: &str, origin: &str, colour: bool) {
    let bar = std::io::stderr()
        .is_terminal()
        .then(|| crate::dash::inline::Panel::start(session.borrow().state().clone(), colour));
    let result = session.borrow_mut().eval(text, origin);
    drop(bar);
    print_result(result, text, origin, colour);
}

fn print_result(result: Result<Outcome, ScriptError>, text: &str, origin: &str, colour: bool) {
    match result {
        Ok(outcome) => {
            if let Some(shown) = outcome.text() {
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
                .map(|(name, _, v)| (name.to_string(), brisk_script::types::type_name(v)))
                .collect();
            vars.sort();
            for (name, ty) in vars {
                println!("{name}: {ty}");
            }
        }
        "clear" => print!("\x1b[2J\x1b[H"),
        "load" if !rest.is_empty() => match std::fs::read_to_string(rest) {
            Ok(text) => evaluate(session, &text, rest, colour),
            Err(e) => eprintln!("error: cannot read {rest}: {e}"),
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
            let work = || (!rest.is_empty()).then(|| session.borrow_mut().eval(rest, "<dash>"));
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
