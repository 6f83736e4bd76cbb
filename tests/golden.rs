//! Golden tests of what `brisk run` prints. Every script under
//! `tests/golden/` and every example under `examples/` is run from the
//! repository root (so paths in messages are relative to it), and its
//! output is compared with the expected files beside it:
//!
//! - `tests/golden/NAME.out` (`tests/golden/examples/NAME.out` for an
//!   example): the exact stdout;
//! - `NAME.err`, where the script is expected to fail or to write to
//!   stderr: `exit: CODE` on the first line, then the exact stderr. Without
//!   it, the script must exit 0 with nothing on stderr.
//!
//! A script that writes files writes them under `/tmp/brisk-golden-NAME`
//! (NAME being the script's), which is removed before and after it runs,
//! so nothing is left behind and no earlier run's files are read.
//!
//! Task keys carry tokens that change with the hashing (`inc-3f2a…`); on
//! both streams every `NAME-` followed by 8 or more hex digits reads as
//! `NAME-<token>`, so the expected files do not depend on them; the
//! repository's absolute path, should it show, reads as `$ROOT`.
//!
//! After a deliberate change of output, rewrite the expected files and
//! review the difference with git:
//!
//! ```sh
//! BRISK_BLESS=1 cargo test -p brisk --test golden
//! git diff tests/golden
//! ```

#[path = "support/cluster.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

/// How many lines of each side a mismatch shows.
const DIFF_LINES: usize = 12;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().expect("repository root")
}

/// One script and where its expected output lives, relative to the root.
struct Case {
    script: PathBuf,
    out: PathBuf,
    err: PathBuf,
}

/// The `.rhai` files of `dir`, sorted, each with its expected files in `expected`.
fn cases_in(root: &Path, dir: &str, expected: &str) -> Vec<Case> {
    let mut scripts: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
        .unwrap_or_else(|e| panic!("cannot list {dir}: {e}"))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "rhai") && support::gpu_allowed(p))
        .map(|p| Path::new(dir).join(p.file_name().expect("file name")))
        .collect();
    scripts.sort();
    scripts
        .into_iter()
        .map(|script| {
            let stem = script.file_stem().expect("stem").to_string_lossy().into_owned();
            let beside = |ext: &str| Path::new(expected).join(format!("{stem}.{ext}"));
            Case { out: beside("out"), err: beside("err"), script }
        })
        .collect()
}

/// Where the script may write files: `/tmp/brisk-golden-NAME`.
fn scratch_dir(case: &Case) -> PathBuf {
    let stem = case.script.file_stem().expect("stem").to_string_lossy();
    Path::new("/tmp").join(format!("brisk-golden-{stem}"))
}

/// What a run printed, with tokens and the root's absolute path replaced.
struct Ran {
    stdout: String,
    stderr: String,
    code: Option<i32>,
}

fn run(root: &Path, case: &Case, tmp: &Path) -> Ran {
    run_on(root, case, tmp, None)
}

/// As `run`, with the session connected to the scheduler at `cluster`.
fn run_on(root: &Path, case: &Case, tmp: &Path, cluster: Option<&str>) -> Ran {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_brisk"));
    match cluster {
        Some(a) => cmd.env("BRISK_SCHEDULER_ADDRESS", a),
        None => cmd.env_remove("BRISK_SCHEDULER_ADDRESS"),
    };
    let out = cmd
        .arg("run")
        .arg("--no-progress")
        .arg(&case.script)
        .current_dir(root)
        .env("TMPDIR", tmp)
        .env("NO_COLOR", "1")
        .output()
        .unwrap_or_else(|e| panic!("cannot run brisk on {}: {e}", case.script.display()));
    let clean = |bytes: &[u8]| {
        let text = String::from_utf8_lossy(bytes).replace(&root.display().to_string(), "$ROOT");
        mask_tokens(&text)
    };
    Ran { stdout: clean(&out.stdout), stderr: clean(&out.stderr), code: out.status.code() }
}

/// `NAME-` then 8 or more hex digits (a task key's token) becomes `NAME-<token>`.
fn mask_tokens(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'-' && names_a_task(&bytes[..i]) {
            let digits = bytes[i + 1..].iter().take_while(|b| b.is_ascii_hexdigit()).count();
            let next = bytes.get(i + 1 + digits);
            let ends = next.is_none_or(|b| !(b.is_ascii_alphanumeric() || *b == b'_'));
            if digits >= 8 && ends {
                out.push_str("-<token>");
                i += 1 + digits;
                continue;
            }
        }
        let ch = text[i..].chars().next().expect("a char");
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

/// Whether the text ends with a word (ASCII letters, digits and `_`) that
/// holds a letter: the name part of a key, not a number as in `1-20000000`.
fn names_a_task(before: &[u8]) -> bool {
    let mut word = before.iter().rev().take_while(|b| b.is_ascii_alphanumeric() || **b == b'_');
    word.any(|b| b.is_ascii_alphabetic() || *b == b'_')
}

/// The expected exit code and stderr: `exit: CODE` then the text.
fn parse_err(text: &str) -> Option<(i32, String)> {
    let (first, rest) = text.split_once('\n').unwrap_or((text, ""));
    let code = first.strip_prefix("exit: ")?.trim().parse().ok()?;
    Some((code, rest.to_string()))
}

fn format_err(ran: &Ran) -> String {
    format!("exit: {}\n{}", exit_text(ran.code), ran.stderr)
}

/// An exit code, or `signal` for a process that a signal ended.
fn exit_text(code: Option<i32>) -> String {
    code.map_or_else(|| "signal".to_string(), |c| c.to_string())
}

/// A short line diff: the common head and tail are dropped, and up to
/// `DIFF_LINES` lines of what differs are shown from each side.
fn diff(expected: &str, got: &str) -> String {
    let (e, g): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), got.lines().collect());
    let head = e.iter().zip(&g).take_while(|(a, b)| a == b).count();
    let tail = e[head..].iter().rev().zip(g[head..].iter().rev()).take_while(|(a, b)| a == b).count();
    let (e_mid, g_mid) = (&e[head..e.len() - tail], &g[head..g.len() - tail]);
    let mut text = format!("  first difference at line {} (- expected, + got)\n", head + 1);
    if head > 0 {
        text += &format!("    {}\n", e[head - 1]);
    }
    for (sign, side) in [("-", e_mid), ("+", g_mid)] {
        for line in side.iter().take(DIFF_LINES) {
            text += &format!("  {sign} {line}\n");
        }
        if side.len() > DIFF_LINES {
            text += &format!("  {sign} ... ({} more lines)\n", side.len() - DIFF_LINES);
        }
    }
    if e_mid.is_empty() && g_mid.is_empty() {
        text += "  (the lines are the same: the difference is a final newline)\n";
    }
    text
}

/// Compare one run with its expected files; `None` when they agree.
fn check(root: &Path, case: &Case, ran: &Ran) -> Option<String> {
    let name = case.script.display();
    let mut problems = Vec::new();
    match std::fs::read_to_string(root.join(&case.out)) {
        Ok(want) if want == ran.stdout => {}
        Ok(want) => problems.push(format!(
            "stdout differs from {}:\n{}",
            case.out.display(),
            diff(&want, &ran.stdout)
        )),
        Err(_) => problems.push(format!("{} is missing", case.out.display())),
    }
    match std::fs::read_to_string(root.join(&case.err)) {
        Ok(text) => match parse_err(&text) {
            None => problems.push(format!("{} must start with a line `exit: CODE`", case.err.display())),
            Some((code, want)) => {
                if ran.code != Some(code) {
                    problems.push(format!("exit code {}, expected {code}", exit_text(ran.code)));
                }
                if want != ran.stderr {
                    problems.push(format!(
                        "stderr differs from {}:\n{}",
                        case.err.display(),
                        diff(&want, &ran.stderr)
                    ));
                }
            }
        },
        Err(_) => {
            if ran.code != Some(0) || !ran.stderr.is_empty() {
                problems.push(format!(
                    "expected exit 0 and no stderr ({} is absent), got exit {} and stderr:\n{}",
                    case.err.display(),
                    exit_text(ran.code),
                    ran.stderr
                ));
            }
        }
    }
    (!problems.is_empty()).then(|| format!("{name}:\n{}", problems.join("\n")))
}

/// Rewrite the expected files of one case from what it printed.
fn bless(root: &Path, case: &Case, ran: &Ran) {
    let write = |path: &Path, text: &str| {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("create the expected files' folder");
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    };
    write(&case.out, &ran.stdout);
    if ran.code == Some(0) && ran.stderr.is_empty() {
        let _ = std::fs::remove_file(root.join(&case.err));
    } else {
        write(&case.err, &format_err(ran));
    }
}

#[test]
fn golden_scripts_and_examples_print_what_they_printed_before() {
    let root = repo();
    let blessing = std::env::var_os("BRISK_BLESS").is_some_and(|v| v == "1");
    let mut cases = cases_in(&root, "tests/golden", "tests/golden");
    let n_golden = cases.len();
    cases.extend(cases_in(&root, "examples", "tests/golden/examples"));
    assert!(n_golden >= 10 && cases.len() > n_golden, "expected the golden scripts and examples to be found");
    // Shuffle pieces go to a folder of this run, removed at the end.
    let tmp = std::env::temp_dir().join(format!("brisk-golden-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("temporary folder");
    let mut failures = Vec::new();
    for case in &cases {
        let scratch = scratch_dir(case);
        let _ = std::fs::remove_dir_all(&scratch);
        let ran = run(&root, case, &tmp);
        let _ = std::fs::remove_dir_all(&scratch);
        if blessing {
            bless(&root, case, &ran);
        } else if let Some(problem) = check(&root, case, &ran) {
            failures.push(problem);
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    if blessing {
        eprintln!("blessed {} scripts: review the change with `git diff tests/golden`", cases.len());
        return;
    }
    assert!(
        failures.is_empty(),
        "{} of {} golden scripts differ:\n\n{}\n\nIf the new output is right, rewrite the expected files and review the diff:\n    BRISK_BLESS=1 cargo test -p brisk --test golden && git diff tests/golden\n",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
}

/// Scripts whose output names the scheduler they run on, so it differs on a
/// cluster by design.
const LOCAL_ONLY: &[(&str, &str)] = &[
    ("config", "prints config().scheduler and the local thread count"),
    ("futures", "prints the client and its workers"),
    ("printing", "prints the client"),
];

/// The same scripts and examples, on a scheduler with two worker processes:
/// the same stdout, the same errors. The cluster's invariants hold after
/// each, and nothing of it is left at the end.
#[test]
fn golden_scripts_and_examples_print_the_same_on_a_cluster() {
    if std::env::var_os("BRISK_BLESS").is_some() {
        return;
    }
    let root = repo();
    let mut cases = cases_in(&root, "tests/golden", "tests/golden");
    cases.extend(cases_in(&root, "examples", "tests/golden/examples"));
    cases.retain(|c| {
        let stem = c.script.file_stem().expect("stem").to_string_lossy().into_owned();
        !LOCAL_ONLY.iter().any(|(name, _)| *name == stem)
    });
    let cluster = support::TestCluster::start(2);
    let tmp = std::env::temp_dir().join(format!("brisk-golden-cluster-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("temporary folder");
    let mut failures = Vec::new();
    for case in &cases {
        let scratch = scratch_dir(case);
        let _ = std::fs::remove_dir_all(&scratch);
        let ran = run_on(&root, case, &tmp, Some(&cluster.address));
        let _ = std::fs::remove_dir_all(&scratch);
        if let Some(problem) = check(&root, case, &ran) {
            failures.push(problem);
        }
        cluster.validate();
    }
    let _ = std::fs::remove_dir_all(&tmp);
    assert!(
        failures.is_empty(),
        "{} of {} golden scripts differ on a cluster:\n\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
    cluster.finish();
}

#[test]
fn tokens_are_masked_and_diffs_are_short() {
    assert_eq!(
        mask_tokens("task inc-3f2a00b1c2d3e4f5 failed; add-12ab is short; x-deadbeef9"),
        "task inc-<token> failed; add-12ab is short; x-<token>"
    );
    assert_eq!(mask_tokens("range 1-20000000, é-abcdef12"), "range 1-20000000, é-abcdef12");
    let d = diff("a\nb\nc\nd\n", "a\nB\nc\nd\n");
    assert!(d.contains("line 2") && d.contains("- b") && d.contains("+ B") && !d.contains("- d"), "{d}");
    assert_eq!(parse_err("exit: 1\nerror: x\n"), Some((1, "error: x\n".to_string())));
}
