//! "Is this input complete?": the REPL's multi-line entry and Jupyter's
//! is_complete_request use the same rule. Rhai's parser decides: an input
//! that ends too early (an open brace, bracket, parenthesis, a back-tick
//! string) is incomplete; any other error is left for evaluation to report.

use rhai::{Engine, LexError, ParseErrorType};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InputState {
    Complete,
    Incomplete,
    /// Will not parse, whatever follows; evaluation reports why.
    Invalid(String),
}

/// Classify `text` (meta commands starting with `:` are always complete).
pub fn input_state(text: &str) -> InputState {
    if text.trim_start().starts_with(':') || text.trim().is_empty() {
        return InputState::Complete;
    }
    let engine = Engine::new_raw();
    let Err(e) = engine.compile(text) else { return InputState::Complete };
    let at_end = {
        let lines = text.trim_end().lines().count().max(1);
        e.position().line().is_none_or(|l| l >= lines)
    };
    match e.err_type() {
        ParseErrorType::UnexpectedEOF => InputState::Incomplete,
        ParseErrorType::MissingToken(..) if at_end => InputState::Incomplete,
        // Only back-tick strings may span lines; an open "…" string is an error.
        ParseErrorType::BadInput(LexError::UnterminatedString) if text.matches('`').count() % 2 == 1 => {
            InputState::Incomplete
        }
        other => InputState::Invalid(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_constructs_continue_and_errors_do_not() {
        for text in
            ["fn twice(a) {", "let a = [1, 2", "#{a: 1,", "foo(1,", "let x = 1 +", "let s = `two\nlines"]
        {
            assert_eq!(input_state(text), InputState::Incomplete, "{text:?}");
        }
        for text in ["let a = 1;", "fn twice(a) {\n a * 2\n}", ":help", "", "let s = `done`;"] {
            assert_eq!(input_state(text), InputState::Complete, "{text:?}");
        }
        assert!(matches!(input_state("let x = ;"), InputState::Invalid(_)));
        assert!(
            matches!(input_state("let s = \"open"), InputState::Invalid(_)),
            "plain strings cannot span lines"
        );
    }
}
