//! Calendar arithmetic on nanoseconds since the epoch: parsing dates as
//! readers and `astype` meet them, and the civil date of a day count.
//! Imports nothing, so every reader and kernel can use it.

/// Nanoseconds since the epoch of `YYYY-MM-DD`, optionally followed by
/// ` ` or `T` and `HH:MM`, `:SS`, `.fraction` and `Z`.
pub fn parse_datetime(s: &str) -> Option<i64> {
    let num = |t: &str, len: usize| -> Option<i64> {
        (t.len() == len && t.bytes().all(|b| b.is_ascii_digit())).then(|| t.parse().ok()).flatten()
    };
    let s = s.strip_suffix('Z').unwrap_or(s);
    let (date, time) = match s.find([' ', 'T']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let mut d = date.split('-');
    let (y, m, dd) = (num(d.next()?, 4)?, num(d.next()?, 2)?, num(d.next()?, 2)?);
    if d.next().is_some() || !(1..=12).contains(&m) || dd < 1 || dd > days_in_month(y, m) {
        return None;
    }
    let mut ns = days_from_civil(y, m, dd) * 86_400_000_000_000;
    if let Some(time) = time {
        let (hms, frac) = match time.split_once('.') {
            Some((a, f)) => (a, Some(f)),
            None => (time, None),
        };
        let mut p = hms.split(':');
        let h = num(p.next()?, 2)?;
        let mi = num(p.next()?, 2)?;
        let sec = match p.next() {
            Some(x) => num(x, 2)?,
            None => 0,
        };
        if p.next().is_some() || h > 23 || mi > 59 || sec > 59 || (frac.is_some() && hms.len() != 8) {
            return None;
        }
        ns += ((h * 60 + mi) * 60 + sec) * 1_000_000_000;
        if let Some(f) = frac {
            if f.is_empty() || f.len() > 9 || !f.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            ns += f.parse::<i64>().ok()? * 10i64.pow(9 - f.len() as u32);
        }
    }
    Some(ns)
}

pub fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        4 | 6 | 9 | 11 => 30,
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a calendar date (Hinnant's `days_from_civil`).
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The calendar date of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
pub fn civil(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calendar_dates_from_day_counts() {
        assert_eq!(civil(0), (1970, 1, 1));
        assert_eq!(civil(-1), (1969, 12, 31));
        assert_eq!(civil(11_016), (2000, 2, 29));
        assert_eq!(civil(20_780), (2026, 11, 23));
        assert_eq!(civil(-719_468), (0, 3, 1));
        for days in [-800_000, -1, 0, 1, 11_016, 20_780, 2_000_000] {
            let (y, m, d) = civil(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(parse_datetime("1970-01-02"), Some(86_400_000_000_000));
        assert_eq!(parse_datetime("1970-01-01T00:00:01.5Z"), Some(1_500_000_000));
        assert_eq!(parse_datetime("1969-12-31 23:59"), Some(-60_000_000_000));
        for bad in ["2023-02-29", "2024-13-01", "24-01-01", "2024-01-01 25:00", "2024-01-01 10:00:00.", "x"] {
            assert_eq!(parse_datetime(bad), None, "{bad}");
        }
    }
}
