//! Completion, shared by every front end (the REPL's Tab, Jupyter's
//! complete_request): API functions, variables and script functions in
//! scope, methods of the value left of a dot (by its type), option keys
//! inside `#{ }`, and file paths inside string literals.

use std::collections::BTreeSet;

use rhai::{Dynamic, Engine, Scope};

/// Candidates replacing `line[start..pos]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    pub start: usize,
    pub candidates: Vec<String>,
}

/// Keys of the option maps the API takes (config, annotate, arrays).
const OPTION_KEYS: &[&str] = &[
    "scheduler",
    "num_workers",
    "array.backend",
    "optimization.fuse",
    "memory_limit",
    "priority",
    "retries",
    "resources",
    "timeout",
    "chunks",
    "dtype",
    "seed",
    "mean",
    "std",
    "axis",
    "keepdims",
    "split_every",
    "ddof",
    "drop_axis",
    "bins",
    "range",
    "oversample",
    "n_power_iter",
    "split_out",
    "on",
    "left_on",
    "right_on",
    "how",
    "suffixes",
    "ascending",
    "subset",
    "keep",
    "npartitions",
    "filters",
    "columns",
];

const KEYWORDS: &[&str] = &[
    "let", "const", "fn", "if", "else", "for", "in", "while", "loop", "do", "until", "break", "continue",
    "return", "throw", "try", "catch", "switch", "true", "false", "this", "print", "debug",
];

/// One function the engine knows: its name and the type of its first
/// parameter (the receiver when called as a method).
#[derive(Clone, Debug)]
pub struct Signature {
    pub name: String,
    pub receiver: Option<String>,
}

/// The functions an engine has, from Rhai's metadata, without operators,
/// indexers and internal helpers; getters appear as property names.
pub fn signatures(engine: &Engine) -> Vec<Signature> {
    engine
        .gen_fn_signatures(true)
        .iter()
        .filter_map(|sig| {
            let (name, rest) = sig.split_once('(')?;
            let name = name.strip_prefix("get$").unwrap_or(name);
            if !name.starts_with(|c: char| c.is_ascii_alphabetic())
                || name.contains('$')
                || name == "delayed_call"
            {
                return None;
            }
            let first = rest.split([',', ')']).next().unwrap_or("");
            let receiver = first.split_once(": ").map(|(_, t)| normalize_type(t.trim_start_matches("&mut ")));
            Some(Signature { name: name.to_string(), receiver })
        })
        .collect()
}

/// One spelling per type, so a value's type and a parameter's type compare.
fn normalize_type(t: &str) -> String {
    let t = t.rsplit("::").next().unwrap_or(t).to_ascii_lowercase();
    match t.as_str() {
        "i64" | "int" => "int".into(),
        "f64" | "float" => "float".into(),
        "immutablestring" | "string" | "&str" | "str" => "string".into(),
        "vec<dynamic>" | "array" => "array".into(),
        "map" | "btreemap<identifier, dynamic>" => "map".into(),
        "fnptr" | "fn" => "fn".into(),
        _ => t,
    }
}

/// Complete `line` at byte offset `pos`, given the engine's `signatures`.
pub fn complete(
    sigs: &[Signature],
    scope: &Scope<'_>,
    script_fns: &[String],
    line: &str,
    pos: usize,
) -> Completion {
    let mut pos = pos.min(line.len());
    while !line.is_char_boundary(pos) {
        pos -= 1;
    }
    let before = &line[..pos];
    if let Some(quote) = open_string_start(before) {
        let partial = &before[quote + 1..];
        return Completion { start: quote + 1, candidates: complete_path(partial) };
    }
    let start = word_start(before);
    let prefix = &before[start..];
    let mut out: BTreeSet<String> = BTreeSet::new();
    if before[..start].ends_with('.') {
        let receiver_end = start - 1;
        let receiver_start = word_start(&before[..receiver_end]);
        let receiver = &before[receiver_start..receiver_end];
        let ty = scope.get(receiver).map(value_type);
        for s in sigs {
            let fits = match (&ty, &s.receiver) {
                (Some(t), Some(r)) => r == t || r == "dynamic",
                (None, Some(_)) => true,
                _ => false,
            };
            if fits && s.name.starts_with(prefix) {
                out.insert(s.name.clone());
            }
        }
    } else if inside_option_map(before) {
        out.extend(OPTION_KEYS.iter().filter(|k| k.starts_with(prefix)).map(|k| k.to_string()));
    } else {
        out.extend(sigs.iter().map(|s| &s.name).filter(|n| n.starts_with(prefix)).cloned());
        out.extend(scope.iter_raw().map(|(n, _, _)| n.to_string()).filter(|n| n.starts_with(prefix)));
        out.extend(script_fns.iter().filter(|n| n.starts_with(prefix) && !n.contains('$')).cloned());
        out.extend(KEYWORDS.iter().filter(|k| k.starts_with(prefix)).map(|k| k.to_string()));
    }
    Completion { start, candidates: out.into_iter().collect() }
}

/// Where the identifier that ends `s` starts (a char boundary, also after
/// non-ASCII text).
fn word_start(s: &str) -> usize {
    s.char_indices()
        .rev()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '_'))
        .map_or(0, |(i, c)| i + c.len_utf8())
}

fn value_type(d: &Dynamic) -> String {
    normalize_type(&crate::types::type_name(d))
}

/// Where a string literal left open before the cursor starts, if one is.
fn open_string_start(before: &str) -> Option<usize> {
    let mut open: Option<(usize, char)> = None;
    let mut escaped = false;
    for (i, c) in before.char_indices() {
        match open {
            Some(_) if escaped => escaped = false,
            Some((_, '"')) if c == '\\' => escaped = true,
            Some((_, q)) if c == q => open = None,
            Some(_) => {}
            None if c == '"' || c == '`' => open = Some((i, c)),
            None => {}
        }
    }
    open.map(|(i, _)| i)
}

/// Whether the innermost open bracket before the cursor is an object map.
fn inside_option_map(before: &str) -> bool {
    let mut stack: Vec<&str> = Vec::new();
    let bytes = before.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'{' if i > 0 && bytes[i - 1] == b'#' => stack.push("map"),
            b'{' | b'(' | b'[' => stack.push("other"),
            b'}' | b')' | b']' => {
                stack.pop();
            }
            _ => {}
        }
    }
    stack.last() == Some(&"map")
}

/// Files and directories that start with `partial` (directories end in `/`).
fn complete_path(partial: &str) -> Vec<String> {
    let (dir, file_prefix) = match partial.rfind('/') {
        Some(i) => (&partial[..=i], &partial[i + 1..]),
        None => ("", partial),
    };
    let read_from = if dir.is_empty() { "." } else { dir };
    let Ok(entries) = std::fs::read_dir(read_from) else { return Vec::new() };
    let mut out: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            if !name.starts_with(file_prefix) || (file_prefix.is_empty() && name.starts_with('.')) {
                return None;
            }
            let slash = if e.file_type().is_ok_and(|t| t.is_dir()) { "/" } else { "" };
            Some(format!("{dir}{name}{slash}"))
        })
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_and_maps_are_recognised() {
        assert_eq!(open_string_start(r#"read("da"#), Some(5));
        assert_eq!(open_string_start(r#"f("a", "b")"#), None);
        assert_eq!(open_string_start(r#"f("a\"b"#), Some(2));
        assert!(inside_option_map("config(#{sch"));
        assert!(!inside_option_map("config(#{a: 1}, x"));
        assert!(!inside_option_map("f([1, 2"));
    }

    #[test]
    fn words_start_on_char_boundaries() {
        assert_eq!(word_start("let é = gat"), 9);
        assert_eq!(word_start("é"), 2);
        assert_eq!(word_start("éx"), 2);
        assert_eq!(word_start("abc"), 0);
        let c = complete(&[], &Scope::new(), &[], "let é", 6);
        assert!(c.start == 6 && c.candidates.contains(&"let".to_string()), "after é: {c:?}");
        let c = complete(&[], &Scope::new(), &[], "let é", 5);
        assert_eq!(c.start, 4, "inside é the cursor backs off: {c:?}");
        // A cursor inside a multi-byte character backs off instead of panicking.
        let c = complete(&[], &Scope::new(), &[], "é", 1);
        assert_eq!(c.start, 0);
    }

    #[test]
    fn paths_complete_with_directories_marked() {
        let dir = std::env::temp_dir().join(format!("brisk-complete-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).expect("dir");
        std::fs::write(dir.join("data.csv"), "x").expect("file");
        let base = format!("{}/", dir.display());
        let got = complete_path(&format!("{base}d"));
        assert_eq!(got, vec![format!("{base}data.csv")]);
        let got = complete_path(&format!("{base}s"));
        assert_eq!(got, vec![format!("{base}sub/")]);
    }
}
