//! Layering check (CI): no import cycles between the source files of a crate.
//!
//! The project requires the engine and the script layer (and the kernel and the REPL with them) to be
//! free of import cycles at file level, so that every file can be read, tested and moved on top of the
//! files it imports. This test builds a "file imports file" graph for each crate from `use` trees and
//! inline paths (`crate::`, `super::`, `self::`, child modules in scope, imported modules), ignoring
//! comments, string literals and `#[cfg(test)]` code, and fails with every strongly connected component:
//! its files and, for each edge inside it, the names the first file takes from the second.
//!
//! It is std only and does not ask the compiler: a small lexer and the set of module files (`a.rs`,
//! `a/mod.rs`) are enough. A path resolves to the deepest module file it names; the rest are items, so
//! `crate::Value` (a re-export in `lib.rs`) is an edge to `lib.rs`, and `crate::value::Value` is not.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

/// The crate source trees checked, relative to the workspace root.
const CRATES: [&str; 5] = ["engine/src", "k8s/src", "script-lang/src", "kernel/src", "repl/src"];

/// A module path: `[]` is the crate root, `["a", "b"]` is `a::b`.
type Module = Vec<String>;
/// Edges `from -> to` between module files, with the names `from` takes from `to`.
type Edges = BTreeMap<(Module, Module), BTreeSet<String>>;

/// Splits Rust source into words, `::` and single punctuation characters, dropping whitespace,
/// comments (doc comments included), string, raw string and character literals, and lifetimes' quotes.
fn lex(src: &str) -> Vec<String> {
    let c: Vec<char> = src.chars().collect();
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let is_word = |ch: char| ch.is_alphanumeric() || ch == '_';
    // The index after the first `end` at or after `i`; with `esc`, a backslash hides the next char.
    let until = |mut i: usize, end: &[char], esc: bool| {
        while i < c.len() && !c[i..].starts_with(end) {
            i += if esc && c[i] == '\\' { 2 } else { 1 };
        }
        (i + end.len()).min(c.len())
    };
    let (mut toks, mut i) = (Vec::new(), 0);
    while i < c.len() {
        i = match (c[i], at(i + 1)) {
            ('/', '/') => until(i, &['\n'], false),
            ('/', '*') => {
                let mut depth = 0;
                while i < c.len() {
                    match (c[i], at(i + 1)) {
                        ('/', '*') => (depth, i) = (depth + 1, i + 2),
                        ('*', '/') => (depth, i) = (depth - 1, i + 2),
                        _ => i += 1,
                    }
                    if depth == 0 {
                        break;
                    }
                }
                i
            }
            ('"', _) => until(i + 1, &['"'], true),
            ('\'', '\\') => until(i + 1, &['\''], true),
            ('\'', _) if at(i + 2) == '\'' => i + 3,
            (':', ':') => {
                toks.push("::".to_string());
                i + 2
            }
            (ch, _) if is_word(ch) => {
                let end = (i..c.len()).find(|&j| !is_word(c[j])).unwrap_or(c.len());
                let word: String = c[i..end].iter().collect();
                let hashes = (end..c.len()).take_while(|&j| c[j] == '#').count();
                match (word.as_str(), at(end)) {
                    ("r" | "br" | "cr", '"' | '#') if at(end + hashes) == '"' => {
                        let close: Vec<char> =
                            std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
                        until(end + hashes + 1, &close, false)
                    }
                    ("b" | "c", '"') => until(end + 1, &['"'], true),
                    ("b", '\'') if at(end + 1) == '\\' => until(end + 1, &['\''], true),
                    ("b", '\'') => end + 3,
                    _ => {
                        toks.push(word);
                        end
                    }
                }
            }
            (ch, _) => {
                if !ch.is_whitespace() && ch != '\'' {
                    toks.push(ch.to_string());
                }
                i + 1
            }
        };
    }
    toks
}

/// The token at `i`, or `""` past the end.
fn tok(toks: &[String], i: usize) -> &str {
    toks.get(i).map_or("", String::as_str)
}

fn is_ident(t: &str) -> bool {
    t.starts_with(|ch: char| ch.is_alphabetic() || ch == '_')
}

/// Removes every item or statement under `#[cfg(test)]`. Returns the remaining tokens and the names
/// of the removed `mod name;` declarations: child modules whose files only exist in tests.
fn strip_cfg_test(toks: &[String]) -> (Vec<String>, Vec<String>) {
    const ATTR: [&str; 7] = ["#", "[", "cfg", "(", "test", ")", "]"];
    let (mut out, mut test_mods, mut i) = (Vec::new(), Vec::new(), 0);
    while i < toks.len() {
        if !toks[i..].iter().map(String::as_str).take(ATTR.len()).eq(ATTR) {
            out.push(toks[i].clone());
            i += 1;
            continue;
        }
        // The item (further attributes included) ends at `;` or at the brace closing its body (a brace
        // group's `;` is left over), or before the brace closing the enclosing block (a last field).
        let start = i + ATTR.len();
        let (mut depth, mut end) = (0, start);
        while end < toks.len() {
            let t = tok(toks, end);
            depth += i32::from(matches!(t, "(" | "[" | "{")) - i32::from(matches!(t, ")" | "]" | "}"));
            if depth < 0 {
                break;
            }
            end += 1;
            if depth == 0 && (t == ";" || t == "}") {
                break;
            }
        }
        if let [.., m, name, semi] = &toks[start..end]
            && m == "mod"
            && semi == ";"
        {
            test_mods.push(name.clone());
        }
        i = end;
    }
    (out, test_mods)
}

/// The leaves of the use tree starting at `i` (full path, name bound) and the index of its `;`.
fn use_leaves(toks: &[String], mut i: usize) -> (Vec<(Vec<String>, String)>, usize) {
    let (mut out, mut segs, mut bases, mut alias) = (Vec::new(), Vec::<String>::new(), vec![0], None);
    while i < toks.len() {
        match tok(toks, i) {
            "{" => bases.push(segs.len()),
            t @ ("," | "}" | ";") => {
                let n = segs.len();
                if n > bases.last().copied().unwrap_or(0) {
                    let own = if segs[n - 1] == "self" && n > 1 { n - 2 } else { n - 1 };
                    out.push((segs.clone(), alias.take().unwrap_or_else(|| segs[own].clone())));
                }
                if t == ";" {
                    break;
                }
                if t == "}" {
                    bases.pop();
                }
                segs.truncate(bases.last().copied().unwrap_or(0));
            }
            "as" => (alias, i) = (Some(tok(toks, i + 1).to_string()), i + 1),
            "::" | "$" => {}
            t => segs.push(t.to_string()),
        }
        i += 1;
    }
    (out, i)
}

/// Every path in a file: the module it is written in (inline `mod x { .. }` blocks included), its
/// segments, and for a `use` leaf the name it binds. `$crate` reads as `crate`.
fn paths(file: &Module, toks: &[String]) -> Vec<(Module, Vec<String>, Option<String>)> {
    let (mut out, mut inline, mut depth, mut i) = (Vec::new(), Vec::<(i32, String)>::new(), 0, 0);
    while i < toks.len() {
        let cur: Module = file.iter().chain(inline.iter().map(|(_, m)| m)).cloned().collect();
        let (t, prev) = (tok(toks, i), if i == 0 { "" } else { tok(toks, i - 1) });
        match t {
            "{" => depth += 1,
            "}" => {
                depth -= 1;
                if inline.last().is_some_and(|(d, _)| *d == depth) {
                    inline.pop();
                }
            }
            "mod" if tok(toks, i + 2) == "{" => inline.push((depth, tok(toks, i + 1).to_string())),
            "use" => {
                let (leaves, end) = use_leaves(toks, i + 1);
                out.extend(leaves.into_iter().map(|(path, bind)| (cur.clone(), path, Some(bind))));
                i = end;
            }
            _ if is_ident(t) && prev != "::" && prev != "." && tok(toks, i + 1) == "::" => {
                let mut segs = vec![t.to_string()];
                while tok(toks, i + 1) == "::" && is_ident(tok(toks, i + 2)) {
                    segs.push(tok(toks, i + 2).to_string());
                    i += 2;
                }
                out.push((cur, segs, None));
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// Resolves `path`, written in module `cur`, to the deepest module file it names and the item it
/// takes there (`None` when it names the module itself). Paths outside the crate resolve to `None`.
fn resolve(
    path: &[String],
    cur: &[String],
    aliases: &BTreeMap<String, Module>,
    modules: &BTreeSet<Module>,
) -> Option<(Module, Option<String>)> {
    let (first, mut rest) = path.split_first()?;
    let child: Module = cur.iter().chain([first]).cloned().collect();
    let mut full: Module = match first.as_str() {
        "crate" => Vec::new(),
        "self" => cur.to_vec(),
        "super" => cur[..cur.len().saturating_sub(1)].to_vec(),
        name => match aliases.get(name) {
            Some(module) => module.clone(),
            None if modules.contains(&child) => child, // a child module in scope: `use csv::CsvSpec;`
            None => return None,
        },
    };
    while let Some((_, tail)) = rest.split_first().filter(|(s, _)| *s == "super") {
        full.pop();
        rest = tail;
    }
    full.extend(rest.iter().filter(|s| *s != "self").cloned());
    let depth = (1..=full.len()).take_while(|&k| modules.contains(&full[..k])).count();
    Some((full[..depth].to_vec(), full.get(depth).cloned()))
}

fn parse_module(path: &str) -> Module {
    path.split("::").filter(|s| !s.is_empty()).map(String::from).collect()
}

/// The import edges between the files of one crate, given as `(module path, text)` pairs (`""` is
/// the crate root, `"a::b"` is `a/b.rs` or `a/b/mod.rs`). Test-only files are left out.
fn import_edges(files: &[(String, String)]) -> Edges {
    let parsed: Vec<(Module, Vec<String>, Vec<String>)> = (files.iter())
        .map(|(m, text)| {
            let (toks, test_mods) = strip_cfg_test(&lex(text));
            (parse_module(m), toks, test_mods)
        })
        .collect();
    let test_only: Vec<Module> = (parsed.iter())
        .flat_map(|(m, _, tests)| tests.iter().map(|t| m.iter().chain([t]).cloned().collect()))
        .collect();
    let live: Vec<_> = parsed.iter().filter(|(m, ..)| !test_only.iter().any(|t| m.starts_with(t))).collect();
    let modules: BTreeSet<Module> = live.iter().map(|(m, ..)| m.clone()).collect();
    // `#[macro_export]` macros are named at the crate root but live in the file that defines them.
    let macros: BTreeMap<&str, &Module> = (live.iter())
        .flat_map(|(m, toks, _)| {
            toks.windows(3).filter(|w| w[..2] == ["macro_rules", "!"]).map(move |w| (&*w[2], m))
        })
        .collect();
    let mut edges = Edges::new();
    for (file, toks, _) in live {
        // Use leaves first, so that module imports (`use crate::bag::text;`) are aliases for the rest.
        let (uses, inline): (Vec<_>, Vec<_>) = paths(file, toks).into_iter().partition(|(.., b)| b.is_some());
        let mut aliases = BTreeMap::new();
        for (cur, path, bind) in uses.into_iter().chain(inline) {
            let Some((mut target, item)) = resolve(&path, &cur, &aliases, &modules) else { continue };
            if let (Some(bind), None) = (bind, &item) {
                aliases.insert(bind, target.clone());
            }
            if let Some(m) = item.as_deref().filter(|_| target.is_empty()).and_then(|i| macros.get(i)) {
                target = m.to_vec();
            }
            if &target != file {
                let name = item.or_else(|| target.last().cloned()).unwrap_or_else(|| "crate".to_string());
                edges.entry((file.clone(), target)).or_default().insert(name);
            }
        }
    }
    edges
}

/// Tarjan's strongly connected components of a graph given as successor lists.
fn components(adj: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct State {
        next: usize,
        index: Vec<usize>,
        low: Vec<usize>,
        stack: Vec<usize>,
        out: Vec<Vec<usize>>,
    }
    fn visit(v: usize, adj: &[Vec<usize>], s: &mut State) {
        (s.index[v], s.low[v], s.next) = (s.next, s.next, s.next + 1);
        s.stack.push(v);
        for &w in &adj[v] {
            if s.index[w] == usize::MAX {
                visit(w, adj, s);
                s.low[v] = s.low[v].min(s.low[w]);
            } else if s.stack.contains(&w) {
                s.low[v] = s.low[v].min(s.index[w]);
            }
        }
        if s.low[v] == s.index[v] {
            let root = s.stack.iter().rposition(|&w| w == v).expect("a visited node is on the stack");
            let component = s.stack.split_off(root);
            s.out.push(component);
        }
    }
    let n = adj.len();
    let mut s =
        State { next: 0, index: vec![usize::MAX; n], low: vec![0; n], stack: Vec::new(), out: Vec::new() };
    for v in 0..n {
        if s.index[v] == usize::MAX {
            visit(v, adj, &mut s);
        }
    }
    s.out
}

/// The import cycles of one crate (see `import_edges` for the input), written out with `file_of`
/// naming the files: each cycle's files and the edges inside it. Empty when there is none.
fn cycle_report(files: &[(String, String)], file_of: &dyn Fn(&Module) -> String) -> String {
    let edges = import_edges(files);
    let nodes: Vec<&Module> =
        edges.keys().flat_map(|(a, b)| [a, b]).collect::<BTreeSet<_>>().into_iter().collect();
    let id = |m: &Module| nodes.binary_search(&m).expect("every edge end is a node");
    let mut adj = vec![Vec::new(); nodes.len()];
    for (a, b) in edges.keys() {
        adj[id(a)].push(id(b));
    }
    let mut cycles: Vec<BTreeSet<&Module>> = (components(&adj).into_iter())
        .filter(|c| c.len() > 1)
        .map(|c| c.into_iter().map(|v| nodes[v]).collect())
        .collect();
    cycles.sort();
    let mut out = String::new();
    for (k, cycle) in cycles.iter().enumerate() {
        let _ = writeln!(out, "  cycle {} ({} files):", k + 1, cycle.len());
        for m in cycle {
            let _ = writeln!(out, "    {}", file_of(m));
        }
        let _ = writeln!(out, "    edges (file -> file it imports: names taken):");
        for ((a, b), names) in edges.iter().filter(|((a, b), _)| cycle.contains(a) && cycle.contains(b)) {
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            let _ = writeln!(out, "      {} -> {}: {}", file_of(a), file_of(b), names.join(", "));
        }
    }
    out
}

/// Every `.rs` file under `dir` as (module path, path relative to `dir`, text), sorted.
fn module_files(dir: &Path) -> Vec<(String, String, String)> {
    let (mut out, mut pending) = (Vec::new(), vec![dir.to_path_buf()]);
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).expect("read a source directory") {
            let path = entry.expect("read a directory entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(dir).expect("a file under the source root");
                let mut segs: Vec<String> =
                    rel.with_extension("").iter().map(|s| s.to_string_lossy().into_owned()).collect();
                let last = segs.last().map(String::as_str);
                if last == Some("mod") || (segs.len() == 1 && matches!(last, Some("lib" | "main"))) {
                    segs.pop();
                }
                let text = std::fs::read_to_string(&path).expect("read a source file");
                out.push((segs.join("::"), rel.to_string_lossy().replace('\\', "/"), text));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn no_import_cycles_between_source_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut failures = String::new();
    for dir in CRATES {
        let files = module_files(&root.join(dir));
        let pairs: Vec<(String, String)> =
            files.iter().map(|(m, _, text)| (m.clone(), text.clone())).collect();
        assert!(files.len() > 1, "{dir}: no sources found; has the workspace layout changed?");
        assert!(
            !import_edges(&pairs).is_empty(),
            "{dir}: no imports between files found; the parser is broken"
        );
        let rel: BTreeMap<Module, &str> =
            files.iter().map(|(m, r, _)| (parse_module(m), r.as_str())).collect();
        let report = cycle_report(&pairs, &|m| format!("{dir}/{}", rel.get(m).copied().unwrap_or("?")));
        if !report.is_empty() {
            let _ = write!(failures, "{dir}:\n{report}");
        }
    }
    assert!(
        failures.is_empty(),
        "import cycles between source files (move names so that an edge goes):\n{failures}"
    );
}

#[test]
fn the_checker_finds_imports_and_cycles() {
    let pairs = |files: &[(&str, &str)]| -> Vec<(String, String)> {
        files.iter().map(|(m, t)| (m.to_string(), t.to_string())).collect()
    };
    let show = |m: &Module| if m.is_empty() { "crate".to_string() } else { m.join("::") };
    let edges = |files: &[(&str, &str)]| -> Vec<String> {
        (import_edges(&pairs(files)).into_iter())
            .map(|((a, b), names)| {
                format!("{} -> {}: {}", show(&a), show(&b), Vec::from_iter(names).join(","))
            })
            .collect()
    };
    let report = |files: &[(&str, &str)]| cycle_report(&pairs(files), &|m| format!("src/{}.rs", m.join("/")));

    // A cycle, reported with its files and the names each side takes; a chain is no cycle, a parent's
    // `mod child;` is no edge, and neither is a file's import of its own items.
    let text =
        report(&[("", "mod a; mod b; mod c;"), ("a", "use crate::b::{B, b2};"), ("b", "use crate::a::A;")]);
    assert!(text.contains("cycle 1 (2 files):\n    src/a.rs\n    src/b.rs\n"), "{text}");
    assert!(text.contains("src/a.rs -> src/b.rs: B, b2\n      src/b.rs -> src/a.rs: A\n"), "{text}");
    let chain = [
        ("", "mod a; mod b; mod c;"),
        ("a", "use crate::b::B; use self::K::*;"),
        ("b", "use crate::c::C;"),
        ("c", ""),
    ];
    assert_eq!(report(&chain), "");
    assert_eq!(edges(&chain), ["a -> b: B", "b -> c: C"]);

    // Nested brace groups with `self` and `as`, `pub use`, `pub(crate) use`, `super::`, child modules.
    let grouped = [
        ("", "pub mod x; use crate::{x::{self, y::{Y1, Y2 as Why}}, z};"),
        ("x", "pub mod y; pub(crate) use y::Y3; pub use self::y::Y4;"),
        ("x::y", "use super::super::z::{Z as _, *};"),
        ("z", "use crate::x::{self}; fn f() -> u8 { x::g() + super::x::h() }"),
    ];
    let expected = ["crate -> x: x", "crate -> x::y: Y1,Y2", "crate -> z: z", "x -> x::y: Y3,Y4"];
    assert_eq!(edges(&grouped), [&expected[..], &["x::y -> z: *,Z", "z -> x: g,h,x"]].concat());

    // Inline paths (`$crate`, turbofish, not methods), imported modules, inline modules, macros.
    let inline = [
        ("", "mod p; mod q; fn f(x: X) { x.p::<u8>() }"),
        ("p", "use crate::q as qq;\nfn f() { crate::q::V::new(); qq::w::<u8>(); crate::m!(); }"),
        (
            "q",
            "#[macro_export] macro_rules! m { () => { use $crate::p::P; $crate::p::R }; }\n\
             mod i { use super::L; self::h!(); }",
        ),
    ];
    assert_eq!(edges(&inline), ["p -> q: V,m,q,w", "q -> p: P,R"]);
    assert!(report(&inline).contains("cycle 1 (2 files)"));

    // Comments, doc comments, strings, raw strings and chars are not imports.
    let a = "//! See [`crate::b::B`].\n/// crate::b::B\n// use crate::b::B;\n\
             /* crate::b /* nested */ crate::b */\n\
             fn f() -> (&'static str, char, char) { (r#\"crate::b::B\"#, '\"', '\\'') }\n\
             const S: &str = \"crate::b::B \\\" crate::b::C\"; const T: &[u8] = b\"super::b\";";
    assert_eq!(edges(&[("", "mod a; mod b;"), ("a", a), ("b", "use crate::a::A;")]), ["b -> a: A"]);

    // `#[cfg(test)]` items and test-only files are left out, even where they would close a cycle.
    let tested = [
        ("", "mod a; mod b;\n#[cfg(test)]\nmod testing;"),
        (
            "a",
            "use crate::b::B;\n#[cfg(test)]\n#[allow(unused)]\nmod tests { use crate::b::X; use super::*; }\n\
             fn g() { crate::b::h() }\nstruct S { #[cfg(test)] t: crate::b::T }\nfn k() { crate::b::k() }",
        ),
        (
            "b",
            "#[cfg(test)]\nuse crate::a::{A1, A2};\nfn f() { #[cfg(test)] crate::a::g(); }\n\
             #[cfg(test)] mod tests;",
        ),
        ("testing", "use crate::a::A; use crate::b::B;"),
        ("b::tests", "use crate::a::A;"),
    ];
    assert_eq!(edges(&tested), ["a -> b: B,h,k"]);
    assert_eq!(report(&tested), "");
}
