//! Out of memory is an error, never an abort: each case runs a real `brisk
//! run` under an address-space limit (`prlimit --as`), as a harsh user's
//! machine would be, and must end with exit code 1 and the one clear
//! "not enough memory" message, not with SIGABRT (134) or a panic.

use std::path::PathBuf;
use std::process::{Command, Output};

/// The address-space limit the cases run under.
const LIMIT: &str = "3000000000";

fn have_prlimit() -> bool {
    Command::new("prlimit").arg("--version").output().is_ok_and(|o| o.status.success())
}

struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn run_limited(dir: &Scratch, name: &str, script: &str) -> Output {
    let path = dir.0.join(format!("{name}.rhai"));
    std::fs::write(&path, script).expect("write script");
    Command::new("prlimit")
        .arg(format!("--as={LIMIT}"))
        .arg(env!("CARGO_BIN_EXE_brisk"))
        .arg("run")
        .arg(&path)
        .env_remove("BRISK_MEMORY_LIMIT")
        .output()
        .expect("run brisk under prlimit")
}

#[test]
fn running_out_of_memory_is_an_error_not_an_abort() {
    if !have_prlimit() {
        eprintln!("skipped: no prlimit on this machine");
        return;
    }
    let dir = Scratch(std::env::temp_dir().join(format!("brisk-memory-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).expect("scratch dir");
    let cases: &[(&str, &str, &str)] = &[
        (
            "result",
            "random([100000, 100000]).compute()",
            "the result of compute (an array of shape (100000, 100000) f64)",
        ),
        ("persist", "random([100000, 100000]).persist()", "the result of persist"),
        (
            "block",
            "random([100000, 100000], #{chunks: [100000, 100000]}).sum().compute()",
            "a random block of shape (100000, 100000) f64",
        ),
        ("blob", "submit(|x| blob(100000000000).len(), 1).result()", "blob of 100000000000 items"),
        (
            "closure_string",
            "submit(|x| { let s = \"ab\"; loop { s += s; } }, 1).result()",
            "the values and graphs of this script",
        ),
        (
            "closure_array",
            "from_sequence([1, 2], #{npartitions: 1}).map(|x| { let a = [x]; loop { a += a; } }).compute()",
            "the values and graphs of this script",
        ),
        ("script_string", "let s = \"ab\"; loop { s += s; }", "the values and graphs of this script"),
        ("script_pad", "let s = \"\"; s.pad(100000000000, 'x');", "pad of 100000000000 items"),
        (
            "sequence",
            "from_sequence(0..10000000000000).count().compute()",
            "from_sequence of 10000000000000 numbers",
        ),
        ("graph", "random([10000000, 1], #{chunks: 1}).sum().compute()", "(10000000 tasks)"),
        (
            "shuffle",
            "from_columns(#{a: [1, 2, 3]}).shuffle(\"a\", #{npartitions: 5000000}).compute()",
            "shuffle into 5000000 partitions",
        ),
    ];
    for (name, script, what) in cases {
        let out = run_limited(&dir, name, script);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: exit status {:?}, stderr:\n{err}", out.status);
        assert!(err.contains("not enough memory: "), "{name}: {err}");
        assert!(err.contains(what), "{name}: expected {what:?} in:\n{err}");
        assert!(err.contains("available (memory limit "), "{name}: {err}");
        assert!(!err.contains("panicked") && !err.contains("memory allocation of"), "{name}: {err}");
    }
}

#[test]
fn a_refused_computation_leaves_the_session_working() {
    if !have_prlimit() {
        eprintln!("skipped: no prlimit on this machine");
        return;
    }
    let dir = Scratch(std::env::temp_dir().join(format!("brisk-memory-after-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).expect("scratch dir");
    let script = r#"
        let x = random([2000, 1000], #{seed: 1});
        let refused = "no";
        try { random([100000, 100000]).compute(); } catch (e) { refused = `${e}`; }
        print(refused.contains("not enough memory") && refused.contains("74.5 GiB"));
        print(x.shape);
        print((ones([2000, 1000]) * 2).sum().compute());
    "#;
    let out = run_limited(&dir, "after", script);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(text.lines().collect::<Vec<_>>(), ["true", "[2000, 1000]", "4000000.0"]);
}
