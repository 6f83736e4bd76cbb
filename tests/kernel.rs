//! The Jupyter kernel against real Jupyter clients from PyPI: the official
//! conformance suite (jupyter_kernel_test), nbclient running a notebook,
//! and jupyter_client for interrupts, restart, a bad signature, two
//! clients and live progress (`tests/reference/kernel_clients.py`).
//! `.ci/run` installs the packages (tests/requirements.txt).

use std::path::PathBuf;
use std::process::Command;

fn python_with_jupyter() -> Option<PathBuf> {
    let py = std::env::var_os("BRISK_PYTHON").map(PathBuf::from).unwrap_or_else(|| "python3".into());
    let ok = Command::new(&py)
        .args(["-c", "import jupyter_client, nbclient, nbformat, jupyter_kernel_test"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        return Some(py);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "jupyter_client, nbclient and jupyter_kernel_test are needed on CI; .ci/run sets BRISK_PYTHON ({})",
        py.display()
    );
    eprintln!("skipped: no Python with the Jupyter client packages (see scripts/python-env.sh)");
    None
}

#[test]
fn real_jupyter_clients_drive_the_kernel() {
    let Some(py) = python_with_jupyter() else { return };
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/reference/kernel_clients.py");
    let out = Command::new(&py).arg(&script).arg(env!("CARGO_BIN_EXE_brisk")).output().expect("python");
    let report = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the Jupyter client tests failed:\n{report}");
    assert!(report.contains("OK"), "{report}");
}

/// `brisk kernel install` / `uninstall` as a person runs them.
#[test]
fn install_and_uninstall_from_the_command_line() {
    let prefix = std::env::temp_dir().join(format!("brisk-kernel-cli-{}", std::process::id()));
    let brisk = env!("CARGO_BIN_EXE_brisk");
    let out = Command::new(brisk).args(["kernel", "install", "--prefix"]).arg(&prefix).output().expect("run");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let spec = prefix.join("share/jupyter/kernels/brisk/kernel.json");
    let text = std::fs::read_to_string(&spec).expect("kernel.json");
    assert!(text.contains("\"display_name\": \"brisk (Rhai)\"") && text.contains(brisk), "{text}");
    let out =
        Command::new(brisk).args(["kernel", "uninstall", "--prefix"]).arg(&prefix).output().expect("run");
    assert!(out.status.success());
    assert!(!spec.exists());
    // Nothing to remove, a missing connection file, no action: clear errors.
    let out =
        Command::new(brisk).args(["kernel", "uninstall", "--prefix"]).arg(&prefix).output().expect("run");
    assert!(String::from_utf8_lossy(&out.stderr).contains("no brisk kernel is installed at"));
    let out =
        Command::new(brisk).args(["kernel", "--connection-file", "/nonexistent.json"]).output().expect("run");
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && e.contains("cannot read the connection file /nonexistent.json"), "{e}");
    let bad = prefix.with_extension("json");
    std::fs::write(&bad, "{not json").expect("write");
    let out = Command::new(brisk).args(["kernel", "--connection-file"]).arg(&bad).output().expect("run");
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read the connection file"));
    let out = Command::new(brisk).arg("kernel").output().expect("run");
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs install, uninstall or --connection-file"));
}
