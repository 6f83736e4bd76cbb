//! Facts about the machine and this process that the dashboard shows:
//! total memory (Dask's default memory limit of a lone local worker) and
//! CPU time used. Read from `/proc` on Linux; elsewhere they are unknown
//! (`None`) and shown as such.

/// Total physical memory in bytes (`MemTotal` of `/proc/meminfo`).
pub fn total_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_meminfo(&text)
}

fn parse_meminfo(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// CPU seconds (user + system) this process has used, all threads.
pub fn process_cpu_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/self/stat").ok()?;
    parse_stat(&text)
}

/// Fields 14 and 15 of `/proc/self/stat`, in clock ticks of `USER_HZ`,
/// which Linux fixes at 100 for user space on every architecture.
fn parse_stat(text: &str) -> Option<f64> {
    // The command name (field 2) may hold spaces: count from its ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) as f64 / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_parse() {
        assert_eq!(parse_meminfo("MemTotal:       16318480 kB\nMemFree: 1 kB\n"), Some(16318480 * 1024));
        assert_eq!(parse_meminfo("nonsense"), None);
        let stat = "4242 (brisk worker) R 1 2 3 4 5 6 7 8 9 10 250 130 0 0 20 0 9 0 100 0 0";
        assert_eq!(parse_stat(stat), Some(3.8));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn this_machine_answers_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(total_memory().is_some_and(|m| m > 1 << 20));
            assert!(process_cpu_seconds().is_some());
        }
    }
}
