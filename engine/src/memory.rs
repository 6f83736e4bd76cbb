//! The process's memory budget.
//!
//! Rust aborts the whole process when an allocation fails, so "out of
//! memory" can only be an error if the request is refused *before* it
//! allocates. Everything whose size is known ahead (a chunk, the result of a
//! compute, a graph, a sequence, a partition count) asks [`check`] first; the
//! answer compares it with what is left of the budget.
//!
//! The budget defaults to [`DEFAULT_FRACTION`] of the tightest of: the
//! machine's memory, the cgroup's limit, and the process's address-space and
//! data-size limits (so `prlimit --as` and containers are honoured).
//! `set_limit` (the session's `memory_limit` setting, or `BRISK_MEMORY_LIMIT`)
//! replaces it. Use is read from `/proc/self/status` in the unit that the
//! binding limit counts: resident memory against RAM, virtual size against an
//! address-space limit, the data segment against a data limit.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::fmt;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

/// The share of the machine (or of a limit) that brisk lets itself use.
pub const DEFAULT_FRACTION: f64 = 0.8;

/// Requests below this size are not checked: reading the process's use
/// costs a few microseconds, and a small request cannot be what breaks it.
pub const CHECK_FROM: u64 = 1 << 20;

/// A request that does not fit.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct MemoryError {
    /// What asked, in the user's words: "the result of compute (array (100000, 100000) f64)".
    pub what: String,
    pub needed: u64,
    pub available: u64,
    pub limit: u64,
}

impl fmt::Display for MemoryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "not enough memory: {} needed {}, {} available (memory limit {}; \
             set a larger one with config(#{{memory_limit: \"...\"}}) or BRISK_MEMORY_LIMIT)",
            self.what,
            fmt_bytes(self.needed),
            fmt_bytes(self.available),
            fmt_bytes(self.limit)
        )
    }
}

/// What the budget's use is measured in: the unit the binding limit counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counts {
    /// Resident memory (`VmRSS`): against the machine or a cgroup.
    Resident,
    /// Virtual size (`VmSize`): against `RLIMIT_AS`.
    Virtual,
    /// The data segment (`VmData`): against `RLIMIT_DATA`.
    Data,
}

/// A budget: its size and the unit its use is measured in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    pub bytes: u64,
    pub counts: Counts,
}

/// 0: not set, use the default.
static LIMIT: AtomicU64 = AtomicU64::new(0);
static DEFAULT: OnceLock<Budget> = OnceLock::new();

/// The budget in force.
pub fn budget() -> Budget {
    let d = default_budget();
    match LIMIT.load(Ordering::Relaxed) {
        0 => d,
        bytes => Budget { bytes, ..d },
    }
}

/// The budget's size in bytes.
pub fn limit() -> u64 {
    budget().bytes
}

/// Set the budget (`None`: back to the default).
pub fn set_limit(bytes: Option<u64>) {
    LIMIT.store(bytes.unwrap_or(0), Ordering::Relaxed);
}

/// The budget when nobody set one: `BRISK_MEMORY_LIMIT` if it parses, else
/// a fraction of the tightest limit this process lives under.
pub fn default_budget() -> Budget {
    *DEFAULT.get_or_init(|| {
        let machine = machine_limit();
        if let Some(bytes) = std::env::var("BRISK_MEMORY_LIMIT").ok().and_then(|s| parse_size(&s).ok()) {
            return Budget { bytes, counts: machine.counts };
        }
        Budget { bytes: (machine.bytes as f64 * DEFAULT_FRACTION) as u64, counts: machine.counts }
    })
}

/// The tightest of the machine's memory, the cgroup's limit and the
/// process's limits: what all of brisk's processes on it share.
pub fn machine_bytes() -> u64 {
    machine_limit().bytes
}

/// The tightest limit on this process, before the fraction.
fn machine_limit() -> Budget {
    let mut best = Budget { bytes: u64::MAX, counts: Counts::Resident };
    let mut take = |bytes: Option<u64>, counts: Counts| {
        if let Some(b) = bytes.filter(|&b| b > 0 && b < best.bytes) {
            best = Budget { bytes: b, counts };
        }
    };
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok();
    take(meminfo.as_deref().and_then(|s| status_kib(s, "MemTotal:")), Counts::Resident);
    take(cgroup_limit(), Counts::Resident);
    let limits = std::fs::read_to_string("/proc/self/limits").ok();
    take(limits.as_deref().and_then(|s| rlimit(s, "Max address space")), Counts::Virtual);
    take(limits.as_deref().and_then(|s| rlimit(s, "Max data size")), Counts::Data);
    if best.bytes == u64::MAX {
        // Nothing to read (not Linux): assume a modest machine rather than none.
        best.bytes = 8 << 30;
    }
    best
}

/// cgroup v2's `memory.max` or v1's `memory.limit_in_bytes`, when set.
fn cgroup_limit() -> Option<u64> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok();
    let mut candidates = Vec::new();
    for line in own.as_deref().unwrap_or("").lines() {
        let mut parts = line.splitn(3, ':');
        let (_, ctrl, path) = (parts.next()?, parts.next()?, parts.next()?);
        if ctrl.is_empty() {
            candidates.push(format!("/sys/fs/cgroup{path}/memory.max"));
        } else if ctrl.split(',').any(|c| c == "memory") {
            candidates.push(format!("/sys/fs/cgroup/memory{path}/memory.limit_in_bytes"));
        }
    }
    candidates.push("/sys/fs/cgroup/memory.max".into());
    candidates.push("/sys/fs/cgroup/memory/memory.limit_in_bytes".into());
    candidates
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .filter_map(|s| s.trim().parse::<u64>().ok())
        // v1 writes "no limit" as a number near i64::MAX.
        .filter(|&b| b < (1 << 60))
        .min()
}

/// The soft limit of `name` in `/proc/self/limits`, if not unlimited.
fn rlimit(limits: &str, name: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with(name))?;
    line[name.len()..].split_whitespace().next()?.parse().ok()
}

/// A `Name:   1234 kB` field of `/proc` text, in bytes.
fn status_kib(text: &str, field: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(field))?;
    let kib: u64 = line[field.len()..].split_whitespace().next()?.parse().ok()?;
    Some(kib * 1024)
}

/// What the process uses now, in the unit `counts` names (0 where unknown).
pub fn used(counts: Counts) -> u64 {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return 0;
    };
    let field = match counts {
        Counts::Resident => "VmRSS:",
        Counts::Virtual => "VmSize:",
        Counts::Data => "VmData:",
    };
    status_kib(&status, field).unwrap_or(0)
}

/// Resident memory of process `pid` (0 when it cannot be read): what a
/// nanny measures its worker by.
pub fn resident(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| status_kib(&s, "VmRSS:"))
        .unwrap_or(0)
}

/// Refuse `needed` bytes if they do not fit in what is left; `what` names
/// the request for the message (built only on refusal).
pub fn check(needed: u64, what: impl FnOnce() -> String) -> Result<(), MemoryError> {
    if needed < CHECK_FROM {
        return Ok(());
    }
    let b = budget();
    let fits = |available: u64| needed <= available && needed <= isize::MAX as u64;
    let mut available = b.bytes.saturating_sub(used(b.counts));
    if !fits(available) && release() {
        // Freed memory the allocator kept counts as used until handed back.
        available = b.bytes.saturating_sub(used(b.counts));
    }
    // Nothing over isize::MAX can be allocated at all.
    if fits(available) {
        return Ok(());
    }
    Err(MemoryError { what: what(), needed, available, limit: b.bytes })
}

/// The allocator's way to hand freed memory back to the system now.
static RELEASE: OnceLock<fn()> = OnceLock::new();

/// Say how to hand freed memory back (the binary, which chose the
/// allocator, does: mimalloc keeps freed blocks for a second before it
/// returns them, and resident memory counts them meanwhile).
pub fn set_release(f: fn()) {
    let _ = RELEASE.set(f);
}

/// Hand freed memory back to the system, if the allocator was said to be
/// able to; `true` if it was.
pub fn release() -> bool {
    match RELEASE.get() {
        Some(f) => {
            f();
            true
        }
        None => false,
    }
}

/// What one task costs while its graph is built and scheduled (key, op,
/// dependencies, scheduler state): an estimate, for refusing graphs whose
/// size alone cannot fit.
pub const TASK_BYTES: u64 = 1024;

/// Refuse a graph of `tasks` tasks that cannot fit (`what` names it).
pub fn check_tasks(tasks: u64, what: impl FnOnce() -> String) -> Result<(), MemoryError> {
    check(times(tasks, TASK_BYTES), || format!("{} ({tasks} tasks)", what()))
}

/// `n` items of `each` bytes, saturating: a count from user input can be
/// anything, and an overflow must read as "too much", not wrap to little.
pub fn times(n: u64, each: u64) -> u64 {
    n.saturating_mul(each)
}

/// A vector with room for `n` items, or an error instead of an abort.
pub fn try_vec<T>(n: usize, what: impl Fn() -> String) -> Result<Vec<T>, MemoryError> {
    let bytes = times(n as u64, std::mem::size_of::<T>() as u64);
    check(bytes, &what)?;
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        let b = budget();
        MemoryError {
            what: what(),
            needed: bytes,
            available: b.bytes.saturating_sub(used(b.counts)),
            limit: b.bytes,
        }
    })?;
    Ok(v)
}

/// Live heap bytes, as counted by [`Counting`]; threads batch their
/// changes so the count costs no shared write per allocation.
static HEAP: AtomicI64 = AtomicI64::new(0);
static COUNTING: AtomicBool = AtomicBool::new(false);
/// A thread's uncounted change is published past this many bytes.
const BATCH: i64 = 256 << 10;
/// Allocations this big are remembered per thread, for [`check_step`].
const BIG: usize = 1 << 20;

thread_local! {
    static PENDING: Cell<i64> = const { Cell::new(0) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(delta: i64, size: usize) {
    let local = PENDING.try_with(|p| {
        let v = p.get() + delta;
        if v.abs() >= BATCH {
            HEAP.fetch_add(v, Ordering::Relaxed);
            p.set(0);
        } else {
            p.set(v);
        }
        if size >= BIG {
            LARGEST.with(|l| l.set(l.get().max(size)));
        }
    });
    // A thread being torn down has no locals left: count directly.
    if local.is_err() {
        HEAP.fetch_add(delta, Ordering::Relaxed);
    }
}

/// A global allocator that counts live heap bytes (brisk's binary wraps
/// mimalloc in it). Rhai scripts grow values one operation at a time, and
/// the count is what lets [`check_step`] stop a script before its values
/// outgrow the budget: an allocation that fails cannot be recovered from.
#[derive(Debug, Default)]
pub struct Counting<A>(pub A);

// SAFETY: every method forwards to the inner allocator with the same
// arguments and only adds bookkeeping that neither allocates nor unwinds
// (thread-local cells and atomics).
#[allow(unsafe_code)]
unsafe impl<A: GlobalAlloc> GlobalAlloc for Counting<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged; the caller's contract is ours.
        let p = unsafe { self.0.alloc(layout) };
        if !p.is_null() {
            note(layout.size() as i64, layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let p = unsafe { self.0.alloc_zeroed(layout) };
        if !p.is_null() {
            note(layout.size() as i64, layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged.
        unsafe { self.0.dealloc(ptr, layout) };
        note(-(layout.size() as i64), 0);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let p = unsafe { self.0.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            note(new_size as i64 - layout.size() as i64, new_size);
        }
        p
    }
}

/// Live heap bytes, when the binary counts them (`None` in tests and in
/// programs that embed the engine without [`Counting`]).
pub fn heap_used() -> Option<u64> {
    if !COUNTING.load(Ordering::Relaxed) {
        return None;
    }
    Some(HEAP.load(Ordering::Relaxed).max(0) as u64)
}

/// Say that this process's allocator is [`Counting`] (call once, first
/// thing in `main`).
pub fn start_counting() {
    COUNTING.store(true, Ordering::Relaxed);
}

/// What the process held before any work, outside the heap: code, thread
/// stacks, the allocator's reservations. An address-space limit counts them.
static OVERHEAD: OnceLock<u64> = OnceLock::new();

/// The check a script makes between two operations: refuse to go on when
/// the heap, plus twice the largest block this thread just allocated (the
/// next doubling of a string or an array that grows without end), would
/// pass the budget. Cheap: two thread-local cells and an atomic load.
pub fn check_step() -> Result<(), MemoryError> {
    let Some(heap) = heap_used() else {
        return Ok(());
    };
    let largest = LARGEST.try_with(|l| l.replace(0)).unwrap_or(0) as u64;
    let b = budget();
    let overhead = *OVERHEAD.get_or_init(|| match b.counts {
        Counts::Resident => 0,
        counts => used(counts).saturating_sub(heap),
    });
    let room = b.bytes.saturating_sub(overhead);
    let next = heap.saturating_add(largest.saturating_mul(2));
    if next <= room {
        return Ok(());
    }
    Err(MemoryError {
        what: "the values and graphs of this script".into(),
        needed: next,
        available: room.saturating_sub(heap),
        limit: b.bytes,
    })
}

/// Bytes for people: `74.5 GiB`, `512 B`.
pub fn fmt_bytes(b: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if b < 1024 {
        return format!("{b} B");
    }
    let mut v = b as f64 / 1024.0;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1} {}", UNITS[u])
}

/// Why a size was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SizeError(String);

/// A size as people write it: `4GiB`, `512 MB`, `1e9`, `100000` (bytes).
/// Units as Dask's `parse_bytes`: decimal `kB MB GB TB`, binary `KiB MiB GiB TiB`.
pub fn parse_size(s: &str) -> Result<u64, SizeError> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == 'e' || c == 'E' || c == '+'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "t" | "tb" => 1e12,
        "kib" => 1024.0,
        "mib" => 1048576.0,
        "gib" => 1073741824.0,
        "tib" => 1099511627776.0,
        _ => {
            return Err(SizeError(format!(
                "unknown unit in \"{s}\" (use B, kB, MB, GB, TB, KiB, MiB, GiB or TiB)"
            )));
        }
    };
    match num.parse::<f64>() {
        Ok(v) if v.is_finite() && v * scale >= 1.0 && v * scale < u64::MAX as f64 => Ok((v * scale) as u64),
        _ => Err(SizeError(format!("\"{s}\" is not a positive size"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resident_memory_of_a_process_is_read() {
        assert!(resident(std::process::id()) > 1 << 20);
        assert_eq!(resident(u32::MAX), 0);
    }

    #[test]
    fn sizes_parse_as_dask_writes_them() {
        assert_eq!(parse_size("4GiB"), Ok(4 << 30));
        assert_eq!(parse_size("512 MB"), Ok(512_000_000));
        assert_eq!(parse_size("1e9"), Ok(1_000_000_000));
        assert_eq!(parse_size("100000"), Ok(100_000));
        assert_eq!(parse_size("1.5kib"), Ok(1536));
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("-5GB").is_err());
        assert!(parse_size("0").is_err());
        assert!(parse_size("1e30TB").is_err());
        assert!(parse_size("").is_err());
    }

    #[test]
    fn proc_text_is_read_in_bytes() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max data size             unlimited            unlimited            bytes\n\
                      Max address space         4000000000           unlimited            bytes\n";
        assert_eq!(rlimit(limits, "Max address space"), Some(4_000_000_000));
        assert_eq!(rlimit(limits, "Max data size"), None);
        assert_eq!(status_kib("VmRSS:\t    2200 kB\n", "VmRSS:"), Some(2200 * 1024));
    }

    #[test]
    fn a_request_over_the_budget_is_refused_with_its_numbers() {
        let e = check(u64::MAX / 2, || "a test".into()).expect_err("too big");
        assert_eq!(e.needed, u64::MAX / 2);
        let text = e.to_string();
        assert!(text.starts_with("not enough memory: a test needed 8.0 EiB, "), "{text}");
        assert!(text.contains("available (memory limit "), "{text}");
        assert!(check(1 << 10, || unreachable!()).is_ok());
        assert!(try_vec::<u64>(usize::MAX / 16, || "many".into()).is_err());
        assert_eq!(try_vec::<u8>(10, || "few".into()).map(|v| v.capacity() >= 10), Ok(true));
        assert_eq!(times(u64::MAX, 2), u64::MAX);
    }

    #[test]
    fn the_default_budget_is_below_the_machine() {
        let b = default_budget();
        assert!(b.bytes > 0);
        if std::env::var("BRISK_MEMORY_LIMIT").is_err() {
            assert!(b.bytes <= machine_limit().bytes);
        }
    }
}
