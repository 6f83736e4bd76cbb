//! Fixtures shared by the test files of brisk-script (`mod common;` in
//! each): the Python that the comparisons with NumPy, pandas and plain
//! Python run on, the reference scripts under `tests/reference/`, errors of
//! a fresh Session, and numbers compared with a tolerance in JSON text.

// Each test file is its own crate and uses only some of these.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use brisk_script::Session;
use rhai::Dynamic;

/// The local schedulers every comparison runs on.
pub const SCHEDULERS: [&str; 2] = ["threads", "sync"];

/// Whether this Python can `import module`.
pub fn imports(py: &Path, module: &str) -> bool {
    Command::new(py).args(["-c", &format!("import {module}")]).output().is_ok_and(|o| o.status.success())
}

/// What a test needs of Python, and what it says when that is missing.
pub struct Need {
    /// A module the Python must import; `None`: any Python that runs.
    pub module: Option<&'static str>,
    /// The failure on CI (`$CI` set), where the test must run; `{python}`
    /// stands for the path that was tried.
    pub on_ci: &'static str,
    /// The line printed elsewhere, where the test is then skipped.
    pub skipped: &'static str,
}

/// The Python of the comparisons: `$BRISK_PYTHON` (set by `.ci/run`, made
/// by `scripts/python-env.sh`), else `python3`, if it has what `need`
/// names. Without one, the test is skipped (`None`), except on CI.
#[track_caller]
pub fn python(need: &Need) -> Option<PathBuf> {
    let py = std::env::var_os("BRISK_PYTHON").map(PathBuf::from).unwrap_or_else(|| "python3".into());
    let ok = match need.module {
        Some(m) => imports(&py, m),
        None => Command::new(&py).arg("--version").output().is_ok_and(|o| o.status.success()),
    };
    if ok {
        return Some(py);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{}",
        need.on_ci.replace("{python}", &py.display().to_string())
    );
    eprintln!("{}", need.skipped);
    None
}

/// A script under `tests/reference/`.
pub fn reference(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/reference").join(name)
}

/// Run Python with these arguments and return its stdout; if it fails,
/// panic with `failure` followed by its stderr.
#[track_caller]
pub fn run_python<I, S>(py: &Path, args: I, failure: &str) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let out = Command::new(py).args(args).output().expect("python");
    assert!(out.status.success(), "{failure}{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf8")
}

/// A reference script (`tests/reference/NAME`) with the inputs its `gen`
/// step wrote to a fresh folder, `D` in the scripts compared with it.
pub struct Reference {
    py: PathBuf,
    script: PathBuf,
    pub dir: PathBuf,
}

impl Reference {
    /// `python NAME gen DIR`, DIR being `brisk-TAG-PID` in the temporary folder.
    #[track_caller]
    pub fn generate(py: PathBuf, name: &str, tag: &str) -> Reference {
        let dir = std::env::temp_dir().join(format!("brisk-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let script = reference(name);
        run_python(&py, [script.as_os_str(), OsStr::new("gen"), dir.as_os_str()], "");
        Reference { py, script, dir }
    }

    /// Evaluate `helpers` then `cases` in a new Session on `scheduler`,
    /// with `D` set to the inputs' folder, and have the reference script's
    /// `check` step compare the result (written as JSON) with what `other`
    /// gives; its report is the failure message.
    #[track_caller]
    pub fn check(&self, scheduler: &str, helpers: &str, cases: &str, origin: &str, other: &str) {
        let mut s = Session::new();
        let setup = format!(
            "config(#{{scheduler: \"{scheduler}\"}});\nlet D = \"{}\";\n{helpers}",
            self.dir.display()
        );
        let result =
            s.eval_value(&format!("{setup}{cases}"), origin).unwrap_or_else(|e| panic!("{scheduler}: {e}"));
        let out = self.dir.join(format!("brisk-{scheduler}.json"));
        std::fs::write(&out, json(&result, "results")).expect("write");
        let check = Command::new(&self.py)
            .arg(&self.script)
            .arg("check")
            .arg(&self.dir)
            .arg(&out)
            .output()
            .expect("python");
        let report = String::from_utf8_lossy(&check.stdout);
        assert!(check.status.success(), "{scheduler}: brisk and {other} differ:\n{report}");
    }
}

/// A script's value as JSON (`name` names it if it cannot be converted).
pub fn json(v: &Dynamic, name: &str) -> String {
    brisk_script::convert::to_value(v, name).expect("value").to_json()
}

/// The error that `code` ends with in a fresh Session (it must fail).
#[track_caller]
pub fn error_of(code: &str) -> String {
    let mut s = Session::new();
    match s.eval_value(code, "<t>") {
        Ok(v) => panic!("{code} should fail, gave {v}"),
        Err(e) => e.to_string(),
    }
}

/// Compare two JSON values: numbers to `tol` relative (1e-9 for f64
/// results, 1e-5 for f32 ones), everything else exactly.
pub fn same(a: &str, b: &str, tol: f64) -> bool {
    let parse = |s: &str| -> Vec<String> {
        s.replace(['[', ']'], " ").split([',', ' ']).filter(|t| !t.is_empty()).map(str::to_string).collect()
    };
    let (x, y) = (parse(a), parse(b));
    if x.len() != y.len() || a.matches('[').count() != b.matches('[').count() {
        return false;
    }
    x.iter().zip(&y).all(|(p, q)| match (p.parse::<f64>(), q.parse::<f64>()) {
        (Ok(u), Ok(v)) => (u - v).abs() <= tol * (1.0 + v.abs()),
        _ => p == q,
    })
}

/// Split `{"k":v,...}` of the top-level map into (key, raw JSON) pairs.
pub fn entries(json: &str) -> Vec<(String, String)> {
    let body = json.trim().trim_start_matches('{').trim_end_matches('}');
    let mut out = Vec::new();
    let (mut depth, mut start, mut in_str) = (0i32, 0usize, false);
    let bytes = body.as_bytes();
    for (i, &c) in bytes.iter().enumerate() {
        match c {
            b'"' => in_str = !in_str,
            b'[' | b'{' if !in_str => depth += 1,
            b']' | b'}' if !in_str => depth -= 1,
            b',' if !in_str && depth == 0 => {
                out.push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&body[start..]);
    out.iter()
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let (k, v) = e.split_once(':').expect("key: value");
            (k.trim().trim_matches('"').to_string(), v.trim().to_string())
        })
        .collect()
}

/// The map under key `name` of a JSON object, as text.
pub fn section<'a>(json: &'a str, name: &str) -> &'a str {
    let start = json.find(&format!("\"{name}\":")).expect("section") + name.len() + 3;
    let mut depth = 0;
    for (i, c) in json[start..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return &json[start..start + i + 1];
                }
            }
            _ => {}
        }
    }
    panic!("unterminated section {name}");
}

/// The number under key `name` of a flat JSON object, as text.
pub fn number(json: &str, name: &str) -> f64 {
    let key = format!("\"{name}\":");
    let at = json.find(&key).expect("key") + key.len();
    json[at..].split([',', '}']).next().expect("num").parse().expect("float")
}
