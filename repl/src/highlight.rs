//! Syntax colours for the prompt: keywords, strings, numbers, comments.
//! A small lexer of its own: colouring must never fail on half-typed input.

const KEYWORDS: &[&str] = &[
    "let", "const", "fn", "if", "else", "for", "in", "while", "loop", "do", "until", "break", "continue",
    "return", "throw", "try", "catch", "switch", "true", "false", "this", "import", "export", "as",
    "private",
];

const KEYWORD: &str = "\x1b[1;34m";
const STRING: &str = "\x1b[32m";
const NUMBER: &str = "\x1b[33m";
const COMMENT: &str = "\x1b[90m";
const RESET: &str = "\x1b[0m";

/// `line` with ANSI colours (the text itself is unchanged).
pub fn colour(line: &str) -> String {
    let mut out = String::with_capacity(line.len() + 32);
    let chars: Vec<(usize, char)> = line.char_indices().collect();
    let mut i = 0;
    let end_of = |k: usize| chars.get(k).map_or(line.len(), |(b, _)| *b);
    while i < chars.len() {
        let (start, c) = chars[i];
        let (colour, next) = if c == '/' && chars.get(i + 1).is_some_and(|(_, d)| *d == '/') {
            (Some(COMMENT), chars.len())
        } else if c == '"' || c == '`' || c == '\'' {
            let mut j = i + 1;
            while j < chars.len() && chars[j].1 != c {
                j += if chars[j].1 == '\\' { 2 } else { 1 };
            }
            (Some(STRING), (j + 1).min(chars.len()))
        } else if c.is_ascii_digit() {
            let mut j = i + 1;
            while j < chars.len()
                && (chars[j].1.is_ascii_alphanumeric() || chars[j].1 == '_' || chars[j].1 == '.')
            {
                j += 1;
            }
            (Some(NUMBER), j)
        } else if c.is_alphabetic() || c == '_' {
            let mut j = i + 1;
            while j < chars.len() && (chars[j].1.is_alphanumeric() || chars[j].1 == '_') {
                j += 1;
            }
            let word = &line[start..end_of(j)];
            (KEYWORDS.contains(&word).then_some(KEYWORD), j)
        } else {
            (None, i + 1)
        };
        let text = &line[start..end_of(next)];
        match colour {
            Some(code) => {
                out.push_str(code);
                out.push_str(text);
                out.push_str(RESET);
            }
            None => out.push_str(text),
        }
        i = next;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strip(s: &str) -> String {
        let mut out = String::new();
        let mut in_escape = false;
        for c in s.chars() {
            match (in_escape, c) {
                (false, '\x1b') => in_escape = true,
                (true, 'm') => in_escape = false,
                (true, _) => {}
                (false, c) => out.push(c),
            }
        }
        out
    }

    #[test]
    fn colours_change_nothing_but_colour() {
        for line in ["let x = 1.5 + f(\"a\\\"b\") // done", "fn ünï(a) { `x` }", "\"open", "1e5", ""] {
            assert_eq!(strip(&colour(line)), line);
        }
        let c = colour("let s = \"hi\"; 42");
        assert!(
            c.contains("\x1b[1;34mlet\x1b[0m")
                && c.contains("\x1b[32m\"hi\"\x1b[0m")
                && c.contains("\x1b[33m42\x1b[0m")
        );
    }
}
