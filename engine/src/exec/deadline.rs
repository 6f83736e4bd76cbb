//! Deadlines for running tasks (`annotate(#{timeout: "10s"})`, beyond
//! Dask: dask#1183). One thread sleeps until the nearest deadline and
//! raises the cancel flag of each task past its own; a Rhai closure stops
//! at its next progress check and builtins at their next cancel check.
//! The task then fails with a timeout error, and its thread is free again.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// A task's cancel flag and its "expired" mark.
type Flags = (Arc<AtomicBool>, Arc<AtomicBool>);

struct Watch {
    /// (deadline, id) → the flags to raise then.
    due: Mutex<BTreeMap<(Instant, u64), Flags>>,
    wake: Condvar,
}

fn watch() -> &'static Watch {
    static WATCH: OnceLock<&'static Watch> = OnceLock::new();
    WATCH.get_or_init(|| {
        let w: &'static Watch = Box::leak(Box::new(Watch { due: Mutex::default(), wake: Condvar::new() }));
        let spawned = std::thread::Builder::new().name("brisk-deadlines".into()).spawn(move || w.run());
        if let Err(e) = spawned {
            // Without the thread no deadline fires; tasks run as if none was set.
            eprintln!("brisk: cannot start the task deadline thread: {e}");
        }
        w
    })
}

impl Watch {
    fn run(&self) {
        let mut due = self.due.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let now = Instant::now();
            while let Some(entry) = due.first_entry() {
                if entry.key().0 > now {
                    break;
                }
                let (cancel, expired) = entry.remove();
                expired.store(true, Ordering::SeqCst);
                cancel.store(true, Ordering::SeqCst);
            }
            due = match due.keys().next().map(|(at, _)| at.saturating_duration_since(now)) {
                Some(wait) => self.wake.wait_timeout(due, wait).unwrap_or_else(|e| e.into_inner()).0,
                None => self.wake.wait(due).unwrap_or_else(|e| e.into_inner()),
            };
        }
    }
}

/// A deadline set on one run of a task; dropping it (the run ended) takes
/// it off the watch.
pub struct Deadline {
    /// `None`: too far ahead to ever come.
    slot: Option<(Instant, u64)>,
    expired: Arc<AtomicBool>,
}

impl Deadline {
    /// Raise `cancel` once `timeout` has passed.
    pub fn arm(timeout: Duration, cancel: &Arc<AtomicBool>) -> Deadline {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let expired = Arc::new(AtomicBool::new(false));
        let Some(at) = Instant::now().checked_add(timeout) else { return Deadline { slot: None, expired } };
        let slot = (at, NEXT.fetch_add(1, Ordering::Relaxed));
        let w = watch();
        let mut due = w.due.lock().unwrap_or_else(|e| e.into_inner());
        let first = due.keys().next().is_none_or(|k| slot < *k);
        due.insert(slot, (cancel.clone(), expired.clone()));
        drop(due);
        if first {
            w.wake.notify_one();
        }
        Deadline { slot: Some(slot), expired }
    }

    /// Whether the deadline passed (and the cancel flag was raised for it).
    pub fn expired(&self) -> bool {
        self.expired.load(Ordering::SeqCst)
    }
}

impl Drop for Deadline {
    fn drop(&mut self) {
        if let Some(slot) = &self.slot {
            watch().due.lock().unwrap_or_else(|e| e.into_inner()).remove(slot);
        }
    }
}

/// "10s", "1.5 s", "500ms", "2m", "1h" or a number of seconds, as a
/// positive duration.
pub fn parse_timeout(text: &str) -> Result<Duration, String> {
    parse_duration(text).and_then(|d| seconds(d.as_secs_f64()))
}

/// A duration as Dask writes one ("10s", "1.5 s", "500ms", "2m", "1h",
/// "1d", or a number of seconds); zero allowed.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: f64 =
        number.parse().map_err(|_| format!("{text:?} is not a duration like \"10s\" or \"500ms\""))?;
    let scale = match unit.trim() {
        "" | "s" | "sec" | "secs" | "second" | "seconds" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "m" | "min" | "mins" | "minute" | "minutes" => 60.0,
        "h" | "hour" | "hours" => 3600.0,
        "d" | "day" | "days" => 86400.0,
        u => return Err(format!("{text:?}: unknown unit {u:?} (ms, s, m, h or d)")),
    };
    let secs = n * scale;
    if !(secs.is_finite() && (0.0..1e9).contains(&secs)) {
        return Err(format!("{text:?} is not a duration like \"10s\" or \"500ms\""));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A timeout as users write it: "10s", "250ms", "1.5s".
pub fn fmt(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 1.0 {
        format!("{}ms", (s * 1000.0).round())
    } else {
        format!("{}s", (s * 1000.0).round() / 1000.0)
    }
}

/// `secs` as a positive, finite duration.
pub fn seconds(secs: f64) -> Result<Duration, String> {
    if !(secs.is_finite() && secs > 0.0 && secs < 1e9) {
        return Err(format!("a timeout must be a positive number of seconds, got {secs}"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_raises_the_flag_once_it_passes_and_not_after_it_is_dropped() {
        let flag = Arc::new(AtomicBool::new(false));
        let d = Deadline::arm(Duration::from_millis(30), &flag);
        let late = Deadline::arm(Duration::from_millis(40), &Arc::new(AtomicBool::new(false)));
        drop(late);
        let other = Arc::new(AtomicBool::new(false));
        drop(Deadline::arm(Duration::from_millis(10), &other));
        let start = Instant::now();
        while !flag.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(2));
        }
        assert!(d.expired() && flag.load(Ordering::SeqCst));
        assert!(start.elapsed() < Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(30));
        assert!(!other.load(Ordering::SeqCst), "a dropped deadline fired");
    }

    #[test]
    fn timeouts_parse_with_units_and_refuse_nonsense() {
        assert_eq!(parse_timeout("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_timeout("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_timeout("1.5 m"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_timeout("3"), Ok(Duration::from_secs(3)));
        assert!(parse_timeout("soon").is_err());
        assert!(parse_timeout("0s").is_err());
        assert!(parse_timeout("5 fortnights").expect_err("unit").contains("unknown unit"));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86400)));
        assert!(parse_duration("1e300s").is_err());
        assert!(parse_duration("").is_err());
    }
}
