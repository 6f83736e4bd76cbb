//! Log lines of the cluster's processes, on stderr: one line per event
//! (a peer joined, left, was refused), prefixed with who speaks.

use std::sync::atomic::{AtomicBool, Ordering};

/// Set by `set_quiet`, or by `BRISK_LOG=warning` in the environment (how
/// `local_cluster` keeps its processes from chattering into a session).
static QUIET: AtomicBool = AtomicBool::new(false);

fn quiet() -> bool {
    static FROM_ENV: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    QUIET.load(Ordering::Relaxed)
        || *FROM_ENV.get_or_init(|| std::env::var("BRISK_LOG").is_ok_and(|v| v == "warning"))
}

/// Stop informational lines (a session's own client, which should not
/// chatter into a script's output); warnings still go out.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

pub fn info(who: &str, msg: &str) {
    if !quiet() {
        eprintln!("brisk {who}: {msg}");
    }
}

pub fn warn(who: &str, msg: &str) {
    eprintln!("brisk {who}: warning: {msg}");
}
