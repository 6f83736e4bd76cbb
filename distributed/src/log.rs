//! Log lines of the cluster's processes, on stderr: one line per event
//! (a peer joined, left, was refused), prefixed with who speaks.

/// `BRISK_LOG=warning` keeps informational lines out (how `local_cluster`
/// keeps its processes from chattering into a session); warnings still go.
fn quiet() -> bool {
    static FROM_ENV: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FROM_ENV.get_or_init(|| std::env::var("BRISK_LOG").is_ok_and(|v| v == "warning"))
}

pub fn info(who: &str, msg: &str) {
    if !quiet() {
        eprintln!("brisk {who}: {msg}");
    }
}

pub fn warn(who: &str, msg: &str) {
    eprintln!("brisk {who}: warning: {msg}");
}
