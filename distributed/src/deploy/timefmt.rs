//! Batch systems' walltimes (`"01:00:00"`, SLURM's `"2-12:00:00"`, LSF's
//! `"[HH:]MM"`). Durations as Dask writes them (`"5s"`) are
//! `brisk_engine::exec::deadline::parse_duration`'s.

use std::time::Duration;

use super::System;

/// A walltime in the format of `system`: SLURM takes `MM`, `MM:SS`,
/// `HH:MM:SS`, `D-HH`, `D-HH:MM` and `D-HH:MM:SS`; PBS `HH:MM:SS` (or
/// seconds); LSF `[HH:]MM`.
pub fn parse_walltime(system: System, text: &str) -> Result<Duration, String> {
    let bad =
        || format!("walltime {text:?} is not a {} walltime ({})", system.name(), system.walltime_help());
    let t = text.trim();
    let num = |s: &str| -> Result<u64, String> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) || s.len() > 9 {
            return Err(bad());
        }
        s.parse::<u64>().map_err(|_| bad())
    };
    let secs = match system {
        System::Slurm => {
            let (days, rest) = match t.split_once('-') {
                Some((d, r)) => (Some(num(d)?), r),
                None => (None, t),
            };
            let parts: Vec<u64> = rest.split(':').map(num).collect::<Result<_, _>>()?;
            match (days, parts.as_slice()) {
                (None, [m]) => m * 60,
                (None, [m, s]) => m * 60 + s,
                (None, [h, m, s]) => h * 3600 + m * 60 + s,
                (Some(d), [h]) => d * 86400 + h * 3600,
                (Some(d), [h, m]) => d * 86400 + h * 3600 + m * 60,
                (Some(d), [h, m, s]) => d * 86400 + h * 3600 + m * 60 + s,
                _ => return Err(bad()),
            }
        }
        System::Pbs => {
            let parts: Vec<u64> = t.split(':').map(num).collect::<Result<_, _>>()?;
            match parts.as_slice() {
                [s] => *s,
                [m, s] => m * 60 + s,
                [h, m, s] => h * 3600 + m * 60 + s,
                _ => return Err(bad()),
            }
        }
        System::Lsf => {
            let parts: Vec<u64> = t.split(':').map(num).collect::<Result<_, _>>()?;
            match parts.as_slice() {
                [m] => m * 60,
                [h, m] => h * 3600 + m * 60,
                _ => return Err(bad()),
            }
        }
    };
    if secs == 0 {
        return Err(format!("walltime {text:?} is zero"));
    }
    Ok(Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walltimes_parse_in_each_systems_format() {
        let s = |t| parse_walltime(System::Slurm, t).map(|d| d.as_secs());
        assert_eq!(s("30"), Ok(1800));
        assert_eq!(s("01:30"), Ok(90));
        assert_eq!(s("01:00:00"), Ok(3600));
        assert_eq!(s("2-12"), Ok(2 * 86400 + 12 * 3600));
        assert_eq!(s("1-00:30"), Ok(86400 + 1800));
        assert_eq!(s("1-00:00:10"), Ok(86410));
        assert!(s("1:2:3:4").is_err());
        assert!(s("00:00:00").is_err());
        assert!(s("an hour").is_err());
        assert!(s("99999999999999:00").is_err());
        let p = |t| parse_walltime(System::Pbs, t).map(|d| d.as_secs());
        assert_eq!(p("00:30:00"), Ok(1800));
        assert!(p("1-00:00:00").is_err());
        let l = |t| parse_walltime(System::Lsf, t).map(|d| d.as_secs());
        assert_eq!(l("00:30"), Ok(1800));
        assert_eq!(l("45"), Ok(2700));
        assert!(l("00:30:00").is_err());
    }
}
