//! End-to-end tests of the `brisk` binary: `brisk run`, piped input, exit
//! codes and the one clear error message with file, line and column. Every
//! example under `examples/` is run here, so the examples stay true.

#[path = "support/cluster.rs"]
mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn brisk() -> Command {
    Command::new(env!("CARGO_BIN_EXE_brisk"))
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Write a script to a fresh temporary file and run it.
fn run_script(name: &str, text: &str) -> (Output, PathBuf) {
    let dir = std::env::temp_dir().join(format!("brisk-e2e-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(format!("{name}.rhai"));
    std::fs::write(&path, text).expect("write script");
    let out = brisk().arg("run").arg(&path).output().expect("run brisk");
    (out, path)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[track_caller]
fn assert_no_panic(o: &Output) {
    let e = stderr(o);
    assert!(!e.contains("panicked") && !e.contains("RUST_BACKTRACE"), "brisk panicked:\n{e}");
}

#[test]
fn every_example_runs() {
    let mut n = 0;
    for entry in std::fs::read_dir(repo().join("examples")).expect("examples dir") {
        let path = entry.expect("entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("rhai") || !support::gpu_allowed(&path) {
            continue;
        }
        let out = brisk().arg("run").arg(&path).output().expect("run");
        assert!(out.status.success(), "{} failed:\n{}{}", path.display(), stdout(&out), stderr(&out));
        assert_eq!(
            stderr(&out),
            "",
            "{}: no progress bar or noise when stderr is not a terminal",
            path.display()
        );
        n += 1;
    }
    assert!(n >= 3, "expected the examples to be found, ran {n}");
}

#[test]
fn delayed_results_match_direct_evaluation() {
    let (out, _) = run_script(
        "delayed",
        r#"
        fn inc(x) { x + 1 }
        fn add(a, b) { a + b }
        let xs = [];
        for i in 0..1000 { xs.push(delayed(inc).call(i)); }
        let total = delayed(|v| v.reduce(|s, x| s + x, 0)).call(xs);
        let both = compute(total, xs[10] * 2, #{k: xs[0]});
        print(to_json(both));
        "#,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), r#"[500500,22,{"k":1}]"#);
}

#[test]
fn sync_and_threads_schedulers_agree() {
    let script = |sched: &str| {
        format!(
            r#"
            config(#{{scheduler: "{sched}"}});
            let parts = [];
            for i in 0..200 {{ parts.push(delayed(|x| x * x).call(i)); }}
            print(compute(parts).len());
            print(delayed(|v| v.reduce(|s, x| s + x, 0)).call(parts).compute());
            let f = map(|x| x + 1, [1, 2, 3]);
            print(gather(f));
            "#
        )
    };
    let (a, _) = run_script("threads", &script("threads"));
    let (b, _) = run_script("sync", &script("sync"));
    assert!(a.status.success() && b.status.success(), "{}{}", stderr(&a), stderr(&b));
    assert_eq!(stdout(&a), stdout(&b));
    assert_eq!(stdout(&a), "1\n2646700\n[2, 3, 4]\n");
}

#[test]
fn help_and_version() {
    let h = brisk().arg("--help").output().expect("help");
    assert!(h.status.success());
    assert!(stdout(&h).contains("run") && stdout(&h).contains("Rhai"), "{}", stdout(&h));
    let v = brisk().arg("--version").output().expect("version");
    assert!(v.status.success());
    assert_eq!(stdout(&v).trim(), format!("brisk {}", env!("CARGO_PKG_VERSION")));
}

#[test]
fn a_syntax_error_names_file_line_and_column() {
    let (out, path) = run_script("syntax", "let a = 1;\nlet x = ;\n");
    assert_eq!(out.status.code(), Some(1));
    let e = stderr(&out);
    assert_eq!(e.lines().count(), 1, "one clear message: {e}");
    assert!(e.starts_with(&format!("error: {}:2:9: syntax error", path.display())), "{e}");
    assert_no_panic(&out);
}

#[test]
fn a_runtime_error_names_file_line_and_column() {
    let (out, path) = run_script("runtime", "let x = 1;\nlet y = x.no_such_method();\n");
    assert_eq!(out.status.code(), Some(1));
    let e = stderr(&out);
    assert!(
        e.starts_with(&format!("error: {}:2:11: Function not found: no_such_method", path.display())),
        "{e}"
    );
}

#[test]
fn an_error_inside_a_task_points_into_the_closure() {
    let (out, path) = run_script(
        "task",
        "fn inc(x) { x + 1 }\nlet bad = delayed(|v| {\n    let z = v / 0;\n    z\n});\nlet ok = delayed(inc).call(1);\nprint(ok.compute());\nbad.call(3).compute();\n",
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout(&out), "2\n", "the other task ran");
    let e = stderr(&out);
    let p = path.display();
    assert!(e.starts_with(&format!("error: {p}:3:15: task lambda-")), "{e}");
    assert!(e.contains("failed: Division by zero: 3 / 0"), "{e}");
    assert!(e.trim_end().ends_with(&format!("(waited for at {p}:8:13)")), "{e}");
}

#[test]
fn an_error_in_a_dependency_reaches_the_result_that_needs_it() {
    let script = "let a = delayed(|x| x.missing()).call(1);\nlet b = delayed(|x| x + 1).call(a);\nlet f = submit(|x| x * 2, 21);\nprint(f.result());\nb.compute();\n";
    // Fused (the default): a and b run as one task, the error keeps a's position.
    let (out, path) = run_script("dep", script);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout(&out), "42\n");
    let e = stderr(&out);
    assert!(e.starts_with(&format!("error: {}:1:23: task lambda-", path.display())), "{e}");
    assert!(e.contains("Function not found: missing (i64)"), "{e}");
    // Unfused: b reports that its dependency failed, still pointing into a.
    let (out, path) =
        run_script("dep-unfused", &format!("config(#{{\"optimization.fuse\": false}});\n{script}"));
    assert_eq!(out.status.code(), Some(1));
    let e = stderr(&out);
    assert!(e.starts_with(&format!("error: {}:2:23: task lambda-", path.display())), "{e}");
    assert!(
        e.contains("failed because dependency lambda-") && e.contains("Function not found: missing"),
        "{e}"
    );
}

#[test]
fn missing_and_binary_files_are_clear_errors() {
    let out = brisk().args(["run", "/nonexistent/x.rhai"]).output().expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).starts_with("error: cannot read /nonexistent/x.rhai"), "{}", stderr(&out));
    let dir = std::env::temp_dir().join(format!("brisk-bin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("garbage.rhai");
    std::fs::write(&path, [0xff, 0xfe, 0x00, 0x80, 0x41]).expect("write");
    let out = brisk().arg("run").arg(&path).output().expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("is not a UTF-8 text file"), "{}", stderr(&out));
    assert_no_panic(&out);
}

/// Run brisk with `args`, stdin from `stdin`, killing it after `limit`:
/// what is refused must be refused at once, never read without end.
fn run_within(args: &[&str], stdin: Stdio, limit: std::time::Duration) -> Output {
    let mut child = brisk()
        .args(args)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("RUST_BACKTRACE")
        .spawn()
        .expect("spawn");
    wait_within(&mut child, limit, &format!("brisk {args:?}"));
    child.wait_with_output().expect("output")
}

/// Wait for `child` to end, killing it (and failing) after `limit`.
fn wait_within(
    child: &mut std::process::Child,
    limit: std::time::Duration,
    what: &str,
) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what} still ran after {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `brisk run` on what is not a script refuses at once with one clear
/// line and exit code 2: a device that never ends, a directory, a FIFO
/// (opening one waits for a writer), binary data, text with NUL bytes or
/// invalid UTF-8, a file over the 16 MiB cap; piped stdin has the same cap.
#[test]
fn what_is_not_a_script_is_refused_at_once() {
    let dir = std::env::temp_dir().join(format!("brisk-notscript-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let fifo = dir.join("fifo.rhai");
    let _ = std::fs::remove_file(&fifo);
    assert!(Command::new("mkfifo").arg(&fifo).status().expect("mkfifo").success());
    // 10 MB of noise, the same each run (an xorshift), and a file 1 byte over the cap.
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    let blob: Vec<u8> = (0..10_000_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(dir.join("blob.rhai"), &blob).expect("write");
    std::fs::write(dir.join("big.rhai"), vec![b' '; (16 << 20) + 1]).expect("write");
    std::fs::write(dir.join("nul.rhai"), b"let x = 1;\0print(x);\n").expect("write");
    std::fs::write(dir.join("latin1.rhai"), b"print(\"caf\xe9\");\n").expect("write");
    let path = |name: &str| dir.join(name).display().to_string();
    let cases = [
        ("/dev/zero".to_string(), "/dev/zero is not a regular file (a device, FIFO or socket)".to_string()),
        (dir.display().to_string(), format!("{} is a directory, not a script", dir.display())),
        (
            path("fifo.rhai"),
            format!("{} is not a regular file (a device, FIFO or socket)", path("fifo.rhai")),
        ),
        (
            path("blob.rhai"),
            format!("{} is not a UTF-8 text file (invalid byte at offset", path("blob.rhai")),
        ),
        (
            path("big.rhai"),
            format!("{} is 16777217 bytes, more than a script may be (16 MiB)", path("big.rhai")),
        ),
        (path("nul.rhai"), format!("{} is not a text file (a NUL byte at offset 10)", path("nul.rhai"))),
        (
            path("latin1.rhai"),
            format!("{} is not a UTF-8 text file (invalid byte at offset 10)", path("latin1.rhai")),
        ),
    ];
    for (file, expected) in &cases {
        let out = run_within(&["run", file], Stdio::null(), std::time::Duration::from_secs(10));
        let e = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{file}: {e}");
        assert!(e.starts_with(&format!("error: {expected}")), "{file}: expected {expected:?}, got {e:?}");
        assert_eq!(e.lines().count(), 1, "{file}: one clear line: {e}");
    }
    let zero = std::fs::File::open("/dev/zero").expect("/dev/zero");
    let out = run_within(&[], Stdio::from(zero), std::time::Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stderr(&out), "error: stdin holds more than a script may (16 MiB)\n");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A bug in brisk (a panic, provoked here by a function that exists only
/// under BRISK_TEST_PANIC) is one clear "internal error" line, never a
/// crash with a backtrace: in `brisk run` (exit code 70), in piped input,
/// and inside a task, where it is that task's error.
#[test]
fn a_panic_is_an_internal_error_not_a_crash() {
    let dir = std::env::temp_dir().join(format!("brisk-panic-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let script = dir.join("boom.rhai");
    std::fs::write(&script, "let kept = 7;\nprint(kept);\nbrisk_test_panic(\"boom\");\n").expect("write");
    let out = brisk()
        .arg("run")
        .arg(&script)
        .env("BRISK_TEST_PANIC", "1")
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(70), "{}", stderr(&out));
    assert_eq!(stdout(&out), "7\n");
    let e = stderr(&out);
    assert!(
        e.starts_with(&format!("error: {}: internal error: boom at script-lang/src/", script.display()))
            && e.ends_with(" (this is a bug in brisk)\n")
            && e.lines().count() == 1,
        "{e}"
    );
    assert_no_panic(&out);
    // Without the variable the function does not exist.
    let out = brisk().arg("run").arg(&script).env_remove("BRISK_TEST_PANIC").output().expect("run");
    assert!(stderr(&out).contains("Function not found: brisk_test_panic"), "{}", stderr(&out));

    let mut child = brisk()
        .env("BRISK_TEST_PANIC", "1")
        .env_remove("RUST_BACKTRACE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let task = "print(submit(|x| x + 1, 1).result());\nlet f = submit(|x| brisk_test_panic(\"in a task\"), 1);\ntry { f.result() } catch (e) { print(`caught: ${e}`) }\nprint(submit(|x| x * 2, 21).result());\nbrisk_test_panic(\"at the end\");\n";
    child.stdin.take().expect("stdin").write_all(task.as_bytes()).expect("write");
    let out = child.wait_with_output().expect("wait");
    let (o, e) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(70), "{e}");
    let lines: Vec<&str> = o.lines().collect();
    assert_eq!(lines[0], "2");
    assert!(lines[1].starts_with("caught: task lambda-") && lines[1].contains("panicked: in a task"), "{o}");
    assert_eq!(lines[2], "42", "the runtime survived a task's panic: {o}");
    assert!(e.starts_with("error: <stdin>: internal error: at the end at ") && e.lines().count() == 1, "{e}");
    assert!(!e.contains("thread '"), "no panic report besides the error: {e}");
}

#[test]
fn piped_input_runs_without_prompts() {
    let mut child =
        brisk().stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"fn inc(x) { x + 1 }\nprint(delayed(inc).call(41).compute());\n")
        .expect("write");
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "42\n");
}

/// Bad calls of every kind give one clear error, never a panic or a hang.
#[test]
fn bad_input_is_refused_clearly() {
    let cases: &[(&str, &str)] = &[
        ("config(#{schedular: \"sync\"})", "unknown option \"schedular\""),
        ("config(#{num_workers: 0})", "num_workers must be between 1 and 1024, got 0"),
        ("config(#{scheduler: \"bogus\"})", "unknown scheduler \"bogus\""),
        ("config(#{\"array.backend\": \"gpu\"})", "needs a GPU: no GPU: "),
        ("annotate(#{retry: 1}, || 1)", "annotate: unknown option \"retry\""),
        ("annotate(#{resources: #{GPU: 1}}, || delayed(|x| x).call(1)).compute()", "needs resource GPU=1"),
        (
            "delayed(1)",
            "delayed expects a function or a lazy value (use delayed_value for data), got i64 (1)",
        ),
        ("submit(5)", "submit expects a function first, got i64 (5)"),
        ("map(\"inc\", [1])", "map expects a function first, got string (\"inc\")"),
        ("map(|x| x, 5)", "map expects a function and an array"),
        ("wait([1, 2])", "wait expects an array of futures, found a i64"),
        ("as_completed([\"x\"])", "as_completed expects an array of futures"),
        ("map(|x| x, [1], [1, 2])", "map: arrays have different lengths (1 and 2)"),
        ("let d = delayed(|x| x).call(1); delayed(|x| x + d).call(2)", "cannot be sent to a worker"),
        ("let d = delayed(|x| x).call(1); to_json(d)", "Delayed that cannot be sent"),
        ("let d = delayed(|x| x).call(#{a: 1}); d[1.5]", "indexed by an int or a string"),
        ("fn f(x) { f(x) } f(1)", "Stack overflow"),
        ("submit(|x| x.no_such_fn(), 1).result()", "Function not found: no_such_fn"),
    ];
    for (i, (script, expected)) in cases.iter().enumerate() {
        let (out, _) = run_script(&format!("bad{i}"), script);
        assert_no_panic(&out);
        let e = stderr(&out);
        if expected.is_empty() {
            assert!(out.status.success(), "{script}: {e}");
            continue;
        }
        assert_eq!(out.status.code(), Some(1), "{script} should fail: {e}");
        assert!(e.contains(expected), "{script}: expected {expected:?} in {e:?}");
        assert_eq!(e.lines().count(), 1, "{script}: one clear message: {e}");
    }
}

/// SIGINT (Ctrl-C) during a long compute stops it: one clear message, exit
/// code 130, within moments, not when the tasks would have ended.
#[test]
fn ctrl_c_interrupts_a_running_compute() {
    let (_, path) = run_script("sleepy-setup", "");
    let script = path.with_file_name("sleepy.rhai");
    std::fs::write(&script, "let d = delayed(|x| { let i = 0; while true { i += 1; } i });\nprint(\"started\");\ncompute(d.call(1), d.call(2));\n")
        .expect("write");
    let mut child =
        brisk().arg("run").arg(&script).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    // The handler is installed before the script runs: wait for its first line.
    let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut line).expect("read");
    assert_eq!(line, "started\n");
    std::thread::sleep(std::time::Duration::from_millis(200));
    let t0 = std::time::Instant::now();
    let sent = Command::new("kill").args(["-INT", &child.id().to_string()]).status().expect("kill");
    assert!(sent.success());
    let out = child.wait_with_output().expect("wait");
    assert!(t0.elapsed() < std::time::Duration::from_secs(10), "took {:?}", t0.elapsed());
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert_eq!(stderr(&out), format!("error: {}: interrupted\n", script.display()));
    assert_no_panic(&out);
}

/// On a terminal, a compute longer than half a second draws the live panel
/// on stderr (run under a pseudo-terminal made by util-linux `script`),
/// and leaves a one-line summary when it ends.
#[test]
fn the_live_panel_is_drawn_on_a_terminal() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: `script` (util-linux) is not installed, no pseudo-terminal to test with");
        return;
    }
    let (_, path) = run_script(
        "progress",
        "let parts = [];\nfor i in 0..40 { parts.push(delayed(|x| { let s = 0; for j in 0..250000 { s += j; } s + x }).call(i)); }\nprint(`n=${compute(parts)[0].len()}`);\n",
    );
    let cmd = format!("stty cols 100 rows 30; exec {} run {}", env!("CARGO_BIN_EXE_brisk"), path.display());
    let out = Command::new("script").args(["-qefc", &cmd, "/dev/null"]).output().expect("script");
    let raw = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{raw}");
    let text = strip_terminal_codes(&raw);
    assert!(text.contains("n=40"), "the script ran: {text:?}");
    let lines: Vec<&str> = text.lines().collect();
    let header = lines.iter().any(|l| l.starts_with("worker") && l.contains("threads") && l.contains("GPU"));
    assert!(header, "the worker table was drawn: {text}");
    assert!(
        lines.iter().any(|l| l.starts_with("local ") && l.contains('%')),
        "a row for the local worker: {text}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("lambda ") && l.contains("/40")),
        "a bar for the group: {text}"
    );
    assert!(text.contains("tasks/s |"), "a status line: {text}");
    assert!(raw.contains("\x1b[J"), "the panel is cleared: {raw:?}");
    let last = lines.iter().rev().find(|l| !l.trim().is_empty()).expect("output");
    assert!(last.starts_with("40/40 tasks in ") && last.contains("peak memory"), "a summary is left: {text}");
}

/// The REPL on a pseudo-terminal made by util-linux `script`, its screen
/// read as it is drawn.
struct Terminal {
    child: std::process::Child,
    keyboard: std::process::ChildStdin,
    screen: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    reader: std::thread::JoinHandle<()>,
}

impl Terminal {
    /// None (the test is skipped) where `script` is not installed.
    fn open(history: &Path, env: &[(&str, &str)]) -> Option<Terminal> {
        if Command::new("script").arg("--version").output().is_err() {
            eprintln!("skipped: `script` (util-linux) is not installed, no pseudo-terminal to test with");
            return None;
        }
        // `exec`: `script` runs the command through `$SHELL -c`, and a shell
        // left waiting in between (dash, the default `/bin/sh` of Debian)
        // catches the Ctrl-C typed below and kills itself with SIGINT once
        // brisk has exited cleanly, making the exit status 130.
        let command = format!("stty cols 100 rows 30; exec {}", env!("CARGO_BIN_EXE_brisk"));
        let mut child = Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .env("NO_COLOR", "1")
            .env("BRISK_HISTORY", history)
            .envs(env.iter().copied())
            .env_remove("RUST_BACKTRACE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("script");
        let keyboard = child.stdin.take().expect("stdin");
        let mut stdout = child.stdout.take().expect("stdout");
        let screen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let drawn = screen.clone();
        let reader = std::thread::spawn(move || {
            let mut buf = vec![0u8; 1 << 16];
            while let Ok(n) = std::io::Read::read(&mut stdout, &mut buf) {
                if n == 0 {
                    break;
                }
                drawn.lock().expect("screen").extend_from_slice(&buf[..n]);
            }
        });
        std::thread::sleep(std::time::Duration::from_millis(500));
        Some(Terminal { child, keyboard, screen, reader })
    }

    fn type_bytes(&mut self, keys: &[u8]) {
        self.keyboard.write_all(keys).expect("type");
        self.keyboard.flush().expect("flush");
    }

    /// How long until `needle` is on the screen, checked every 20 ms; None
    /// when it is not there within `limit`.
    fn wait_for(&self, needle: &str, limit: std::time::Duration) -> Option<std::time::Duration> {
        let t0 = std::time::Instant::now();
        let mut searched = 0;
        while t0.elapsed() < limit {
            let screen = self.screen.lock().expect("screen");
            if screen[searched..].windows(needle.len()).any(|w| w == needle.as_bytes()) {
                return Some(t0.elapsed());
            }
            searched = screen.len().saturating_sub(needle.len());
            drop(screen);
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        None
    }

    /// Wait for brisk to leave by itself (after `:quit` or Ctrl-D was typed)
    /// and return the screen with terminal control sequences removed.
    fn close(self) -> String {
        // Keep the terminal open until brisk has left by itself: closing it
        // early makes `script` hang up on a REPL that is still shutting down.
        let Terminal { mut child, keyboard, screen, reader } = self;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while child.try_wait().expect("try_wait").is_none() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let exited = child.try_wait().expect("try_wait").is_some();
        if !exited {
            let _ = child.kill();
        }
        drop(keyboard);
        let out = child.wait_with_output().expect("wait");
        reader.join().expect("reader");
        let screen = String::from_utf8_lossy(&screen.lock().expect("screen")).into_owned();
        assert!(exited, "the REPL did not exit within 30 s of the last input: {screen}");
        assert!(
            out.status.success(),
            "the REPL failed ({}): {screen}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        strip_terminal_codes(&screen)
    }
}

/// Drive the REPL on a pseudo-terminal as a person would: each step is
/// typed once the previous one had time to finish. Returns the screen
/// output with terminal control sequences removed.
fn type_into_repl(steps: &[(&str, u64)], history: &Path) -> Option<String> {
    let steps: Vec<(&[u8], u64)> = steps.iter().map(|(k, ms)| (k.as_bytes(), *ms)).collect();
    type_into_repl_with(&steps, history, &[])
}

/// `type_into_repl` with keys that need not be UTF-8 and more environment
/// variables for brisk.
fn type_into_repl_with(steps: &[(&[u8], u64)], history: &Path, env: &[(&str, &str)]) -> Option<String> {
    let mut terminal = Terminal::open(history, env)?;
    for (keys, wait_ms) in steps {
        terminal.type_bytes(keys);
        std::thread::sleep(std::time::Duration::from_millis(*wait_ms));
    }
    Some(terminal.close())
}

/// Remove CSI sequences (`ESC [ ... letter`) and carriage returns. Moving
/// the cursor up (a redrawn panel) and leaving the alternate screen (the
/// full-screen dashboard) start a new line, so what follows reads apart.
fn strip_terminal_codes(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            if chars.peek() == Some(&'[') {
                chars.next();
                let mut params = String::new();
                for d in chars.by_ref() {
                    if d.is_ascii_alphabetic() || d == '~' {
                        if d == 'A' || (d == 'l' && params == "?1049") {
                            out.push('\n');
                        }
                        break;
                    }
                    params.push(d);
                }
            }
        } else if c != '\r' {
            out.push(c);
        }
    }
    out
}

/// The REPL as a person uses it: a multi-line function, Tab completion,
/// Ctrl-C during a long compute (the session survives), `:help`, an error
/// with a caret, `:vars`, history saved, `:quit`.
#[test]
fn the_repl_works_as_a_person_uses_it() {
    let dir = std::env::temp_dir().join(format!("brisk-repl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let history = dir.join("history");
    let _ = std::fs::remove_file(&history);
    let steps: &[(&str, u64)] = &[
        ("fn twice(a) {\n", 600),
        ("  a * 2\n", 600),
        ("}\n", 600),
        ("twice(21)\n", 700),
        ("let total = 40 + 1;\n", 600),
        ("tot\t", 600),
        ("\n", 700),
        ("delayed(|x| { while true {} }).call(1).compute()\n", 1200),
        ("\x03", 800),
        ("1 + 2\n", 700),
        (":help gather\n", 600),
        ("let y = ;\n", 600),
        (":vars\n", 600),
        (":quit\n", 600),
    ];
    let Some(screen) = type_into_repl(steps, &history) else { return };
    let lines: Vec<&str> = screen.lines().map(str::trim_end).collect();
    let has = |s: &str| lines.contains(&s);
    assert!(has("42"), "the multi-line function ran: {screen}");
    assert!(screen.contains("  ...>   a * 2"), "a continuation prompt for the unfinished input: {screen}");
    assert!(has("41"), "Tab completed tot to total: {screen}");
    assert!(screen.contains("<input 5>: interrupted"), "Ctrl-C interrupted the compute: {screen}");
    assert!(
        lines.iter().any(|l| l.starts_with("worker") && l.contains("memory")),
        "the panel showed: {screen}"
    );
    assert!(screen.contains("0/1 tasks in "), "the panel left a summary: {screen}");
    assert!(has("3"), "the session survived the interrupt: {screen}");
    assert!(screen.contains("gather(futures) -> array"), "{screen}");
    assert!(screen.contains("error: <input 7>:1:9: syntax error: Unexpected ';'"), "{screen}");
    assert!(has("          ^"), "a caret under the error: {screen}");
    assert!(has("total: i64"), "{screen}");
    let saved = std::fs::read_to_string(&history).expect("history saved");
    assert!(saved.contains("twice(21)") && saved.contains(":help gather"), "{saved}");
}

/// A bug in brisk while an input runs (a panic, provoked by a function
/// that exists only under BRISK_TEST_PANIC) and a byte that is not UTF-8,
/// typed alone or inside pasted lines, each cost that input only: one
/// clear error, and the session and its variables go on.
#[test]
fn the_repl_survives_a_panic_and_bytes_that_are_not_utf8() {
    let dir = std::env::temp_dir().join(format!("brisk-repl-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let steps: &[(&[u8], u64)] = &[
        (b"let kept = 41;\n", 600),
        (b"brisk_test_panic(\"boom\")\n", 700),
        (b"kept + 1\n", 600),
        (b"let bad = \"caf\xe9\";\n", 600),
        (b"kept + 2\n", 600),
        // Pasted at once: the first line runs; the bad one and what follows it are dropped.
        (b"let a = 1;\nlet b = \"\xff\"; a = 2;\na = 3;\n", 900),
        (b"a * 100 + kept\n", 600),
        (b":quit\n", 600),
    ];
    let Some(screen) = type_into_repl_with(steps, &dir.join("history"), &[("BRISK_TEST_PANIC", "1")]) else {
        return;
    };
    let lines: Vec<&str> = screen.lines().map(str::trim_end).collect();
    let internal = lines.iter().find(|l| l.starts_with("error: <input 2>: internal error: boom at "));
    assert!(internal.is_some_and(|l| l.ends_with("(this is a bug in brisk)")), "{screen}");
    assert!(lines.contains(&"42"), "the session survived the panic: {screen}");
    let bad = "error: the input held a byte that is not UTF-8 text; brisk reads UTF-8 only, so the line and any input typed ahead after it were dropped";
    assert_eq!(lines.iter().filter(|l| **l == bad).count(), 2, "{screen}");
    assert!(lines.contains(&"43"), "the session survived a bad byte: {screen}");
    assert!(lines.contains(&"141"), "the pasted line before the bad one ran, none after it: {screen}");
    assert!(!screen.contains("panicked"), "{screen}");
}

/// Pasting is linear in the length of what is pasted: a 200 KB line typed
/// ahead without bracketed-paste markers (as a terminal that does not
/// bracket pastes, or a program writing to the terminal, sends it), the
/// same bracketed, and several lines at once, all of which run.
#[test]
fn a_long_paste_takes_moments() {
    let dir = std::env::temp_dir().join(format!("brisk-repl-paste-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let history = dir.join("history");
    let _ = std::fs::remove_file(&history);
    let Some(mut terminal) = Terminal::open(&history, &[]) else { return };
    let long = "a".repeat(200_000);
    let limit = std::time::Duration::from_secs(15);
    terminal.type_bytes(format!("let s = \"{long}\"; s.len()\r").as_bytes());
    let took = terminal.wait_for("200000\r\n", limit);
    eprintln!("a 200 KB line typed ahead: {took:?}");
    assert!(took.is_some(), "a 200 KB line typed ahead was not through in {limit:?}");
    terminal.type_bytes(format!("\x1b[200~let t = \"{long}\"; t.len() + 1\x1b[201~\r").as_bytes());
    let took = terminal.wait_for("200001\r\n", limit);
    eprintln!("a 200 KB bracketed paste: {took:?}");
    assert!(took.is_some(), "a 200 KB bracketed paste was not through in {limit:?}");
    terminal.type_bytes(b"let m = 2;\rm * 3\rm * 4\rs.len() + t.len()\r");
    assert!(terminal.wait_for("400000\r\n", limit).is_some(), "lines typed ahead at once all ran");
    terminal.type_bytes(b":quit\r");
    let screen = terminal.close();
    let lines: Vec<&str> = screen.lines().map(str::trim_end).collect();
    assert!(
        lines.contains(&"6") && lines.contains(&"8"),
        "every line typed ahead ran: {}",
        &screen[screen.len() - 500..]
    );
    let remembered = std::fs::read_to_string(&history).expect("history");
    assert!(remembered.len() < 1000 && remembered.contains("m * 4"), "long inputs stay out of the history");
}

/// `:dash` opens the full-screen dashboard; `q` or Esc returns to the prompt
/// with the session intact; `:dash EXPR` runs EXPR while the screen shows,
/// and its error is reported once the screen is left; Ctrl-D exits.
#[test]
fn the_full_screen_dashboard_opens_and_closes() {
    let dir = std::env::temp_dir().join(format!("brisk-dash-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let Some(mut terminal) = Terminal::open(&dir.join("history"), &[]) else { return };
    let typing = |t: &mut Terminal, steps: &[(&str, u64)]| {
        for (keys, ms) in steps {
            t.type_bytes(keys.as_bytes());
            std::thread::sleep(std::time::Duration::from_millis(*ms));
        }
    };
    typing(
        &mut terminal,
        &[
            ("let f = submit(|x| { let i = 0; while i < 200000 { i += 1; } i + x }, 1);\n", 400),
            (":dash\n", 1500),
            ("q", 800),
            ("f.result()\n", 800),
            (":dash delayed(|x| x * 2).call(21).compute()\n", 1500),
            ("q", 800),
            (":dash no_such_name + 1\n", 1200),
            ("\x1b", 800),
            // A program's lines show in the log while it runs, not only in its result.
            (
                ":dash run_command([\"sh\", \"-c\", \"echo printed-by-$((40+2)); sleep 2\"]).result().returncode\n",
                0,
            ),
        ],
    );
    // The program starts and the screen redraws when the machine gets to
    // them: wait for its line rather than for a fixed time.
    let shown = terminal.wait_for("printed-by-42", std::time::Duration::from_secs(30));
    std::thread::sleep(std::time::Duration::from_millis(2500));
    // Ctrl-D at an empty prompt leaves.
    typing(&mut terminal, &[("q", 800), ("40 + 2 + 100\n", 700), ("\x04", 600)]);
    let screen = terminal.close();
    assert!(shown.is_some(), "the program's line was not shown within 30 s: {screen}");
    // The full screen is drawn by cursor moves, and a blank cell that was
    // blank before is skipped: compare with every blank taken out.
    let packed: String = screen.chars().filter(|c| !c.is_whitespace()).collect();
    for needle in [
        "Workers",
        "Progress",
        "stream",
        "Memory",
        "prompt",
        "GPU",
        "lambda",
        "programs' output",
        "printed-by-42",
    ] {
        let needle: String = needle.chars().filter(|c| !c.is_whitespace()).collect();
        assert!(packed.contains(&needle), "{needle:?} not on the screen: {screen}");
    }
    let lines: Vec<&str> = screen.lines().map(str::trim).collect();
    assert!(lines.contains(&"200001"), "the future's result after leaving: {screen}");
    assert!(lines.contains(&"42"), "the expression run under :dash printed its value: {screen}");
    assert!(screen.contains("error: <dash>:1:1: Variable not found: no_such_name"), "{screen}");
    assert!(lines.contains(&"142"), "the terminal and session work after an error: {screen}");
}

/// A shuffle whose graph fails half-way leaves pieces of the splits that
/// finished; brisk removes them when it ends, and removes folders of brisk
/// processes that died when the next one starts.
#[test]
fn shuffle_pieces_of_a_failed_graph_are_removed() {
    let dir = std::env::temp_dir().join(format!("brisk-pieces-{}", std::process::id()));
    let (data, tmp) = (dir.join("data"), dir.join("tmp"));
    let stale = tmp.join("brisk-shuffle-4294967290-left/0");
    for d in [&data, &stale] {
        std::fs::create_dir_all(d).expect("dir");
    }
    for i in 0..6 {
        let mut text = String::from("k,x\n");
        for r in 0..200 {
            text.push_str(&format!("{},{}\n", (r * 7 + i) % 13, r));
        }
        if i == 5 {
            text.push_str("3,abc\n");
        }
        std::fs::write(data.join(format!("part{i}.csv")), text).expect("write");
    }
    let script = dir.join("fail.rhai");
    let files: Vec<String> = (0..6).map(|i| format!("\"{}/part{i}.csv\"", data.display())).collect();
    std::fs::write(
        &script,
        format!(
            "config(#{{scheduler: \"sync\"}});\nread_csv([{}], #{{dtypes: #{{x: \"i64\"}}}}).shuffle(\"k\").compute()\n",
            files.join(", ")
        ),
    )
    .expect("script");
    let out = brisk().arg("run").arg(&script).env("TMPDIR", &tmp).output().expect("run");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("part5.csv"), "{}", stderr(&out));
    assert_no_panic(&out);
    let left: Vec<_> = std::fs::read_dir(&tmp).expect("tmp").flatten().map(|e| e.file_name()).collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    std::fs::remove_dir_all(&dir).expect("clean");
}

/// SIGTERM while a shuffle spills and a write is staged: brisk ends at once
/// (exit code 143, as killed by the signal) and removes the shuffle's
/// folder and the write's hidden staging, which no destructor would.
#[test]
fn sigterm_mid_shuffle_removes_the_spill_folder_and_the_staging() {
    /// Kills a brisk left running and removes the folder, also on failure.
    struct Guard(PathBuf, Option<std::process::Child>);
    impl Drop for Guard {
        fn drop(&mut self) {
            if let Some(c) = self.1.as_mut() {
                let _ = c.kill();
                let _ = c.wait();
            }
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let dir = std::env::temp_dir().join(format!("brisk-sigterm-{}", std::process::id()));
    let mut guard = Guard(dir.clone(), None);
    let (tmp, out) = (dir.join("tmp"), dir.join("out"));
    std::fs::create_dir_all(&tmp).expect("dir");
    let script = dir.join("term.rhai");
    // The last partition's closure never ends; the others' splits write pieces.
    std::fs::write(
        &script,
        format!(
            "let k = []; let x = [];\nfor i in 0..600 {{ k.push(i % 7); x.push(i); }}\n\
             let df = from_columns(#{{k: k, x: x}}, #{{npartitions: 6}});\n\
             let slow = df.map_partitions(|p| {{ if p[\"x\"].max() == 599 {{ let i = 0; while true {{ i += 1; }} }} p }}, #{{meta: #{{k: \"int64\", x: \"int64\"}}}});\n\
             slow.shuffle(\"k\").to_parquet(\"{}\");\n",
            out.display()
        ),
    )
    .expect("script");
    let child = brisk()
        .arg("run")
        .arg(&script)
        .env("TMPDIR", &tmp)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id().to_string();
    guard.1 = Some(child);
    let listing = |d: &Path| -> Vec<String> {
        std::fs::read_dir(d)
            .map(|r| r.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default()
    };
    let t0 = std::time::Instant::now();
    while !listing(&tmp).iter().any(|n| n.starts_with("brisk-shuffle-")) {
        assert!(t0.elapsed() < std::time::Duration::from_secs(60), "the shuffle never spilled");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(
        listing(&dir).iter().any(|n| n.starts_with(".out.brisk-tmp-")),
        "the write is staged: {:?}",
        listing(&dir)
    );
    let t1 = std::time::Instant::now();
    let sent = Command::new("kill").args(["-TERM", &pid]).status().expect("kill");
    assert!(sent.success());
    let done = guard.1.take().expect("child").wait_with_output().expect("wait");
    assert!(t1.elapsed() < std::time::Duration::from_secs(5), "took {:?}", t1.elapsed());
    assert_eq!(done.status.code(), Some(143), "{}", stderr(&done));
    assert_no_panic(&done);
    assert!(listing(&tmp).is_empty(), "left in TMPDIR: {:?}", listing(&tmp));
    let mut left = listing(&dir);
    left.sort();
    assert_eq!(left, ["term.rhai", "tmp"], "no staging, no half-written dataset");
}

/// Keys come from canonical bytes of each operation and its arguments, so
/// the same expressions built by two processes have the same keys, and
/// changing any argument changes the key.
#[test]
fn keys_are_the_same_in_two_processes_and_follow_every_argument() {
    let script = |seed: i64, scale: f64, axis: i64, chunk: i64, col: i64, filter: i64, sep: &str| {
        format!(
            r#"
            fn key_of(x) {{ delayed_value(x).key }}
            let x = random([40, 40], #{{chunks: 20, seed: {seed}}}) * {scale};
            let df = from_columns(#{{g: ["a", "b", "a", "c"], v: [1.0, 2.0, 3.0, {col}.0]}}, #{{npartitions: 2}});
            let b = from_sequence(["a b", "c d", "a c"], #{{npartitions: 2}});
            print(to_json([
                key_of(x),
                key_of(x.sum({axis})),
                key_of(x.rechunk([{chunk}, -1])),
                key_of(df.assign(#{{w: df["v"] * 2}})),
                key_of(df[df["v"] > {filter}]),
                key_of(df.groupby("g").agg(#{{v: "sum"}})),
                key_of(b.str_split("{sep}").flatten().frequencies()),
            ]));
            "#
        )
    };
    let keys = |text: String| -> Vec<String> {
        let (out, _) = run_script("keys", &text);
        assert!(out.status.success(), "{}", stderr(&out));
        let line = stdout(&out);
        line.trim().trim_matches(['[', ']']).split(',').map(|k| k.trim_matches('"').to_string()).collect()
    };
    let base = script(1, 2.5, 0, 10, 4, 1, " ");
    let first = keys(base.clone());
    assert_eq!(first.len(), 7);
    assert_eq!(first, keys(base), "a second process builds the same keys");
    let changed = [
        script(2, 2.5, 0, 10, 4, 1, " "),
        script(1, 2.0, 0, 10, 4, 1, " "),
        script(1, 2.5, 1, 10, 4, 1, " "),
        script(1, 2.5, 0, 8, 4, 1, " "),
        script(1, 2.5, 0, 10, 5, 1, " "),
        script(1, 2.5, 0, 10, 4, 2, " "),
        script(1, 2.5, 0, 10, 4, 1, "c"),
    ];
    // The keys each change moves: its own and those that read it; no other.
    let moved: [&[usize]; 7] = [&[0, 1, 2], &[0, 1, 2], &[1], &[2], &[3, 4, 5], &[4], &[6]];
    for (k, (text, must)) in changed.into_iter().zip(moved).enumerate() {
        let other = keys(text);
        for i in 0..first.len() {
            if must.contains(&i) {
                assert_ne!(first[i], other[i], "change {k}: key {i} did not change with its argument");
            } else {
                assert_eq!(first[i], other[i], "change {k}: key {i} changed, but reads nothing that did");
            }
        }
    }
}

/// `brisk run s.rhai | head`: when the reader of its output goes, brisk
/// stops quietly with 141 (as a program SIGPIPE ends), no panic.
#[test]
fn a_closed_output_pipe_stops_brisk_quietly() {
    use std::io::BufRead;
    let dir = std::env::temp_dir().join(format!("brisk-e2e-{}-pipe", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("lines.rhai");
    std::fs::write(&path, "for i in 0..1000000 { print(`line ${i}`); }\n").expect("write script");
    let mut child = brisk()
        .arg("run")
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("RUST_BACKTRACE")
        .spawn()
        .expect("spawn");
    let mut first = String::new();
    let out = child.stdout.take().expect("stdout");
    std::io::BufReader::new(out).read_line(&mut first).expect("a line");
    assert_eq!(first, "line 0\n");
    // The reader is dropped here: brisk's next writes find the pipe closed.
    let status = wait_within(&mut child, std::time::Duration::from_secs(30), "brisk, its reader gone,");
    let out = child.wait_with_output().expect("output");
    assert_no_panic(&out);
    assert_eq!(status.code(), Some(141), "{}", stderr(&out));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `run_command`: a program as a task, on the local runtime and on a
/// local cluster's worker process. Output, environment, folder, exit
/// status, a missing program, bad options; a timeout and a cancel stop the
/// program and what it started (its process group), leaving nothing behind.
#[test]
fn run_command_runs_programs_as_tasks_and_stops_them() {
    let marker = format!("3{}.25", std::process::id() % 1000);
    let body = format!(
        r#"
let r = run_command(["sh", "-c", "echo out; echo err >&2; echo $GREETING; pwd"], #{{env: #{{GREETING: "hi"}}, cwd: "/"}}).result();
print(r.stdout); print(r.stderr); print(r.returncode);
let f = run_command(["sh", "-c", "echo first >&2; echo bad thing >&2; exit 3"]);
wait([f]); print(f.exception());
let f = run_command(["no-such-program-brisk"]); wait([f]); print(f.exception());
let f = run_command([]); wait([f]); print(f.exception());
try {{ run_command(["echo"], #{{colour: 1}}); }} catch (e) {{ print(e); }}
let t0 = timestamp();
let f = run_command(["sh", "-c", "sleep {marker} & sleep {marker}"], #{{timeout: 1}});
wait([f]); print(f.exception()); print(t0.elapsed < 15.0);
let f = run_command(["sh", "-c", "sleep {marker} & sleep {marker}"]);
sleep(0.5); f.cancel(); sleep(0.5); print(f.status);
let t0 = timestamp();
let out = run_command(["sh", "-c", "echo early; setsid sleep 6 &"]).result().stdout;
out.trim();
print(out == "early" && t0.elapsed < 5.0);
let again = [run_command(["date", "+%N"]), run_command(["date", "+%N"])];
print(again[0].key != again[1].key);
let d = delayed(|x| `from ${{x}}`).call("delayed");
print(run_command(["echo", d]).result().stdout);
let g = submit(|x| `future ${{x}}`, 1);
print(run_command(["echo", g]).result().stdout);
let f = run_command(["echo", 5]); wait([f]); print(f.exception());
"#
    );
    for (name, head) in [("local", ""), ("cluster", "let c = local_cluster(#{workers: 1, threads: 2});\n")] {
        let (out, path) = run_script(&format!("cmd-{name}"), &format!("{head}{body}"));
        assert_no_panic(&out);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        let text = stdout(&out);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(&lines[..6], ["out", "hi", "/", "", "err", ""], "{name}: {text}");
        assert_eq!(lines[6], "0", "{name}: {text}");
        assert!(text.contains("\"sh\" exited with status 3:\nfirst\nbad thing"), "{name}: {text}");
        assert!(text.contains("cannot start \"no-such-program-brisk\""), "{name}: {text}");
        assert!(text.contains("the command must be a non-empty array of strings"), "{name}: {text}");
        assert!(text.contains("unknown option 'colour' (env, cwd, resources, timeout)"), "{name}: {text}");
        assert!(text.contains("longer than its timeout"), "{name}: {text}");
        assert!(text.contains("true\ncancelled\ntrue\ntrue"), "{name}: {text}");
        // Delayed values and futures as arguments: the program runs on their values.
        assert!(text.contains("from delayed\n\nfuture 1\n"), "{name}: {text}");
        assert!(text.contains("item 1 of the command must be a string, got int"), "{name}: {text}");
        // The programs stopped by the timeout and the cancel, and their children, are gone.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let left =
                Command::new("pgrep").args(["-f", &format!("sleep {marker}")]).output().expect("pgrep");
            if left.stdout.is_empty() {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{name}: left running: {}", stdout(&left));
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let _ = std::fs::remove_dir_all(path.parent().expect("dir"));
    }
}

/// Users' GPU kernels where there is no GPU (CI): definitions are checked
/// where they are written, a kernel on host arrays says it needs GPU
/// arrays, a launch says `no GPU`, and a raw kernel captured by a closure
/// travels to a worker process and back. The kernels themselves run in
/// the GPU tests (`engine/src/array/gpu/tests.rs`, `tests/gpu/kernels.rhai`).
#[test]
fn users_kernels_are_checked_without_a_gpu() {
    if brisk_engine::array::gpu::default_device().is_ok() {
        eprintln!("skipped: this machine has a GPU; scripts/gpu-tests.sh runs the kernels");
        return;
    }
    let (out, _) = run_script(
        "user-kernels",
        r#"
fn show(f) { try { f.call(); print("accepted"); } catch (e) { print(`${e}`.split("\n")[0]); } }
show(|| elementwise_kernel("int32 x", "T z", "z = x", "k1"));
show(|| elementwise_kernel("float64 x", "U z", "z = x", "k2"));
show(|| elementwise_kernel("float64 x", "float64 z", "z = x", "9k"));
show(|| elementwise_kernel("raw T x", "T z", "z = x", "k3"));
show(|| reduction_kernel("T x", "T a", "x", "a + b", "", "0", "r1"));
let k = elementwise_kernel("int64 n", "int64 m", "m = n + 1", "inc");
show(|| k.call(random([4])));
let x = random([6, 4], #{chunks: 3});
show(|| k.call(x, x));
show(|| k.call(x.astype("i64")).compute());
let r = reduction_kernel("T x", "T y", "x", "a + b", "y = a", "0", "total");
print(r.call(x, #{axis: 1, keepdims: true}).shape);
show(|| r.call(x, #{axes: 1}));
let raw = raw_kernel("extern \"C\" __global__ void twice(double* y) {}", "twice");
show(|| raw_kernel("__global__ void f() {}", "g"));
show(|| x.map_blocks_gpu(raw, #{block: [32, 64]}));
show(|| x.map_blocks_gpu(raw, #{grid: 0}));
show(|| x.map_blocks_gpu(raw, #{shared_mem: -1}));
show(|| raw.launch(#{grid: 1, block: 32, args: [x.compute()]}));
let c = local_cluster(#{workers: 1, threads: 1});
print(submit(|v| `${raw.name} ${v}`, 7).result());
c.close();
"#,
    );
    assert_no_panic(&out);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let lines: Vec<String> = stdout(&out).lines().map(str::to_string).collect();
    let want = [
        "elementwise_kernel k1: brisk arrays hold bool, int64, float32 and float64; int32 is not one of them",
        "elementwise_kernel k2: the output's type U is not the type of any input, so nothing binds it",
        "elementwise_kernel: the kernel name \"9k\" must be a C identifier",
        "elementwise_kernel k3: raw parameters (\"raw T x\") are not supported here",
        "reduction_kernel r1: the output cannot be named a",
        "elementwise_kernel inc: n is i64: a f64 array cannot be passed as i64",
        "elementwise_kernel inc: takes 1 argument(s), got 2",
        "the GPU kernel inc takes GPU arrays, and this block is in host memory",
        "[6, 1]",
        "total has no option \"axes\"",
        "raw_kernel: the source has no kernel named g",
        "a block of [32, 64, 1] threads: between 1 and 1024 threads in all",
        "a grid of [0, 1, 1] blocks: at least 1 along each axis",
        "shared_mem must be between 0 and 2^32 bytes, got -1",
        "no GPU: ",
        "twice 7",
    ];
    assert_eq!(lines.len(), want.len(), "{lines:#?}");
    for (got, w) in lines.iter().zip(want) {
        assert!(got.contains(w), "expected {w:?} in {got:?}");
    }
}
