//! pandas' most used `.str` methods and the datetime parts beyond the
//! date, as column expressions (`Expr::Text`, `Expr::Time`): typed when
//! built, evaluated per partition value by value. Missing values stay
//! missing. Regular expressions are the `regex` crate's (polars' own);
//! a pandas replacement's `\1` becomes `${1}`.

use polars::prelude::*;
use serde::{Deserialize, Serialize};

use super::calendar::parse_datetime;
use super::dtype::DType;
use super::error::FrameError;

/// Which end(s) of a string.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Side {
    Left,
    Right,
    Both,
}

/// The widest `str_pad` (every value of a column that wide would be
/// megabytes; far wider is a mistake that would exhaust memory).
pub const MAX_PAD: usize = 1 << 20;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum TextOp {
    StartsWith(String),
    EndsWith(String),
    /// Every match of `pat` (literal unless `regex`) by `repl`.
    Replace {
        pat: String,
        repl: String,
        regex: bool,
    },
    /// Python's `s[start:stop:step]` on characters.
    Slice {
        start: Option<i64>,
        stop: Option<i64>,
        step: i64,
    },
    /// Whitespace off one or both ends.
    Strip(Side),
    /// Filled with `fill` up to `width` characters (pandas' `str.pad`).
    Pad {
        width: usize,
        side: Side,
        fill: char,
    },
    /// The character at `i` (negative from the end), as `str.get`.
    Get(i64),
    /// The first capture group of the first match, as `str.extract`.
    Extract(String),
    /// `to_datetime`: ISO 8601 without a format, else a strftime format;
    /// `coerce` turns what does not parse into a missing value.
    ToDatetime {
        format: Option<String>,
        coerce: bool,
    },
    /// Part `i` (negative from the end) of Python's `str.split(pat, n)`
    /// (on runs of whitespace when `pat` is `None`; at most `n` splits),
    /// missing past the parts: `str.split(..).str.get(i)`.
    SplitGet {
        pat: Option<String>,
        n: Option<usize>,
        i: i64,
    },
    /// How many parts `str.split(pat, n)` makes: `str.split().str.len()`.
    SplitLen {
        pat: Option<String>,
        n: Option<usize>,
    },
    /// A category column's codes (`cat.codes`): each value's place among
    /// these categories, -1 for a missing value or one not among them.
    Codes(std::sync::Arc<Vec<String>>),
}

/// Python's `str.split(pat, maxsplit)`.
pub fn python_split<'a>(v: &'a str, pat: Option<&str>, n: Option<usize>) -> Vec<&'a str> {
    match pat {
        Some(p) => match n {
            Some(n) => v.splitn(n + 1, p).collect(),
            None => v.split(p).collect(),
        },
        None => {
            let mut out = Vec::new();
            let mut rest = v.trim_start();
            while !rest.is_empty() {
                if n.is_some_and(|n| out.len() == n) {
                    // The remainder as it is, trailing whitespace and all, as Python's.
                    out.push(rest);
                    break;
                }
                let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                out.push(&rest[..end]);
                rest = rest[end..].trim_start();
            }
            out
        }
    }
}

impl TextOp {
    pub fn name(&self) -> &'static str {
        match self {
            TextOp::StartsWith(_) => "str_startswith",
            TextOp::EndsWith(_) => "str_endswith",
            TextOp::Replace { .. } => "str_replace",
            TextOp::Slice { .. } => "str_slice",
            TextOp::Strip(Side::Left) => "str_lstrip",
            TextOp::Strip(Side::Right) => "str_rstrip",
            TextOp::Strip(Side::Both) => "str_strip",
            TextOp::Pad { .. } => "str_pad",
            TextOp::Get(_) => "str_get",
            TextOp::Extract(_) => "str_extract",
            TextOp::ToDatetime { .. } => "to_datetime",
            TextOp::SplitGet { .. } => "str_split",
            TextOp::SplitLen { .. } => "str_split",
            TextOp::Codes(_) => "cat_codes",
        }
    }

    /// The result's type for a string column, or why the op is malformed.
    pub fn dtype(&self) -> Result<DType, FrameError> {
        let bad = |what: String| FrameError::Invalid(format!("{}: {what}", self.name()));
        match self {
            TextOp::Replace { pat, regex: true, .. } => {
                regex::Regex::new(pat).map_err(|e| bad(format!("bad pattern \"{pat}\": {e}")))?;
            }
            TextOp::Extract(pat) => {
                let re = regex::Regex::new(pat).map_err(|e| bad(format!("bad pattern \"{pat}\": {e}")))?;
                if re.captures_len() < 2 {
                    return Err(bad(format!("pattern \"{pat}\" contains no capture groups")));
                }
            }
            TextOp::Slice { step: 0, .. } => return Err(bad("slice step cannot be zero".into())),
            TextOp::SplitGet { pat: Some(p), .. } | TextOp::SplitLen { pat: Some(p), .. } if p.is_empty() => {
                return Err(bad("empty separator (as Python's str.split)".into()));
            }
            TextOp::Pad { width, .. } if *width > MAX_PAD => {
                return Err(bad(format!("width {width} is more than {MAX_PAD} characters")));
            }
            _ => {}
        }
        Ok(match self {
            TextOp::StartsWith(_) | TextOp::EndsWith(_) => DType::Bool,
            TextOp::ToDatetime { .. } => DType::Datetime,
            TextOp::SplitLen { .. } | TextOp::Codes(_) => DType::Int64,
            _ => DType::Str,
        })
    }

    /// The op on every value of a string column.
    pub fn eval(&self, s: &Series) -> PolarsResult<Series> {
        self.dtype().map_err(|e| polars_err!(ComputeError: "{e}"))?;
        let name = s.name().clone();
        let ca = s.str()?;
        let strings = |f: &dyn Fn(&str) -> Option<String>| -> Series {
            let out: StringChunked = ca.iter().map(|v| v.and_then(f)).collect();
            out.into_series()
        };
        let out = match self {
            TextOp::StartsWith(p) => {
                let out: BooleanChunked = ca.iter().map(|v| v.map(|v| v.starts_with(p.as_str()))).collect();
                out.into_series()
            }
            TextOp::EndsWith(p) => {
                let out: BooleanChunked = ca.iter().map(|v| v.map(|v| v.ends_with(p.as_str()))).collect();
                out.into_series()
            }
            TextOp::Replace { pat, repl, regex: false } => strings(&|v| Some(v.replace(pat.as_str(), repl))),
            TextOp::Replace { pat, repl, regex: true } => {
                let re = regex::Regex::new(pat).map_err(|e| polars_err!(ComputeError: "str_replace: {e}"))?;
                let repl = python_replacement(repl);
                strings(&|v| Some(re.replace_all(v, repl.as_str()).into_owned()))
            }
            TextOp::Slice { start, stop, step } => strings(&|v| Some(slice_chars(v, *start, *stop, *step))),
            TextOp::Strip(side) => strings(&|v| {
                Some(
                    match side {
                        Side::Left => v.trim_start(),
                        Side::Right => v.trim_end(),
                        Side::Both => v.trim(),
                    }
                    .to_string(),
                )
            }),
            TextOp::Pad { width, side, fill } => strings(&|v| Some(pad(v, *width, *side, *fill))),
            TextOp::Get(i) => strings(&|v| {
                let n = v.chars().count() as i64;
                let at = if *i < 0 { n + i } else { *i };
                (0..n).contains(&at).then(|| v.chars().nth(at as usize).map(String::from)).flatten()
            }),
            TextOp::SplitGet { pat, n, i } => strings(&|v| {
                let parts = python_split(v, pat.as_deref(), *n);
                let k = parts.len() as i64;
                let at = if *i < 0 { k + i } else { *i };
                (0..k).contains(&at).then(|| parts[at as usize].to_string())
            }),
            TextOp::SplitLen { pat, n } => {
                let out: Int64Chunked =
                    ca.iter().map(|v| v.map(|v| python_split(v, pat.as_deref(), *n).len() as i64)).collect();
                out.into_series()
            }
            TextOp::Codes(cats) => {
                let at: rustc_hash::FxHashMap<&str, i64> =
                    cats.iter().enumerate().map(|(i, c)| (c.as_str(), i as i64)).collect();
                let out: Int64Chunked =
                    ca.iter().map(|v| Some(v.and_then(|v| at.get(v).copied()).unwrap_or(-1))).collect();
                out.into_series()
            }
            TextOp::Extract(pat) => {
                let re = regex::Regex::new(pat).map_err(|e| polars_err!(ComputeError: "str_extract: {e}"))?;
                strings(&|v| re.captures(v).and_then(|c| c.get(1)).map(|m| m.as_str().to_string()))
            }
            TextOp::ToDatetime { format, coerce } => {
                let mut out = Vec::with_capacity(ca.len());
                for v in ca.iter() {
                    let parsed = match v {
                        None => None,
                        Some(t) if t.trim().is_empty() => None,
                        Some(t) => match to_nanos(t.trim(), format.as_deref()) {
                            Some(ns) => Some(ns),
                            None if *coerce => None,
                            None => {
                                let how = format
                                    .as_deref()
                                    .map_or("YYYY-MM-DD[ HH:MM[:SS[.fff]]]".to_string(), |f| {
                                        format!("format \"{f}\"")
                                    });
                                polars_bail!(ComputeError: "to_datetime: \"{}\" does not match {} (errors: \"coerce\" makes it missing)", t, how);
                            }
                        },
                    };
                    out.push(parsed);
                }
                Series::new(name.clone(), out).cast(&DType::Datetime.to_polars())?
            }
        };
        Ok(out.with_name(name))
    }
}

/// Nanoseconds since the epoch of `t`, by `format` (strftime) or ISO 8601.
fn to_nanos(t: &str, format: Option<&str>) -> Option<i64> {
    let Some(f) = format else { return parse_datetime(t) };
    let dt = chrono::NaiveDateTime::parse_from_str(t, f)
        .ok()
        .or_else(|| chrono::NaiveDate::parse_from_str(t, f).ok().and_then(|d| d.and_hms_opt(0, 0, 0)))?;
    dt.and_utc().timestamp_nanos_opt()
}

/// A Python `re.sub` replacement in the `regex` crate's syntax: `\1` and
/// `\g<1>`/`\g<name>` become `${1}`/`${name}`, a literal `$` is doubled.
fn python_replacement(repl: &str) -> String {
    let mut out = String::with_capacity(repl.len());
    let mut it = repl.chars().peekable();
    while let Some(c) = it.next() {
        match c {
            '$' => out.push_str("$$"),
            '\\' => match it.peek().copied() {
                Some(d) if d.is_ascii_digit() => {
                    let mut n = String::new();
                    while let Some(d) = it.peek().copied().filter(char::is_ascii_digit) {
                        n.push(d);
                        it.next();
                    }
                    out.push_str(&format!("${{{n}}}"));
                }
                Some('g') => {
                    it.next();
                    if it.peek() == Some(&'<') {
                        it.next();
                        let name: String = it.by_ref().take_while(|&c| c != '>').collect();
                        out.push_str(&format!("${{{name}}}"));
                    } else {
                        out.push_str("\\g");
                    }
                }
                Some('\\') => {
                    it.next();
                    out.push('\\');
                }
                Some('n') => {
                    it.next();
                    out.push('\n');
                }
                Some('t') => {
                    it.next();
                    out.push('\t');
                }
                _ => out.push('\\'),
            },
            c => out.push(c),
        }
    }
    out
}

/// Python's `s[start:stop:step]` over characters.
fn slice_chars(v: &str, start: Option<i64>, stop: Option<i64>, step: i64) -> String {
    let chars: Vec<char> = v.chars().collect();
    let n = chars.len() as i64;
    let norm = |i: i64, lo: i64, hi: i64| {
        let i = if i < 0 { i + n } else { i };
        i.clamp(lo, hi)
    };
    let mut out = String::new();
    if step > 0 {
        let (a, b) = (start.map_or(0, |s| norm(s, 0, n)), stop.map_or(n, |s| norm(s, 0, n)));
        let mut i = a;
        while i < b {
            out.push(chars[i as usize]);
            // A step past the string ends the slice (and cannot overflow).
            let Some(next) = i.checked_add(step) else { break };
            i = next;
        }
    } else {
        let (a, b) = (start.map_or(n - 1, |s| norm(s, -1, n - 1)), stop.map_or(-1, |s| norm(s, -1, n - 1)));
        let mut i = a;
        while i > b {
            out.push(chars[i as usize]);
            let Some(next) = i.checked_add(step) else { break };
            i = next;
        }
    }
    out
}

/// pandas' `str.pad`: `Both` centres as Python's `str.center`.
fn pad(v: &str, width: usize, side: Side, fill: char) -> String {
    let n = v.chars().count();
    if n >= width {
        return v.to_string();
    }
    let marg = width - n;
    let left = match side {
        Side::Left => marg,
        Side::Right => 0,
        Side::Both => marg / 2 + (marg & width & 1),
    };
    let mut out: String = std::iter::repeat_n(fill, left).collect();
    out.push_str(v);
    out.extend(std::iter::repeat_n(fill, marg - left));
    out
}

/// Parts and roundings of a datetime beyond its date (`dt_hour`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TimeOp {
    Hour,
    Minute,
    Second,
    /// Monday 0 to Sunday 6, as pandas' `dt.dayofweek`.
    DayOfWeek,
    /// Midnight of the day (`dt.normalize()`; pandas' `dt.date` gives
    /// Python dates, which a column here cannot hold).
    Date,
    /// Down to a multiple of this many nanoseconds since the epoch, as
    /// `dt.floor(freq)` with a fixed frequency.
    Floor(i64),
    /// Down to `origin` plus a multiple of `step` (resample bins that do
    /// not divide a day start at the first day's midnight, as pandas').
    FloorFrom {
        step: i64,
        origin: i64,
    },
}

const NS_DAY: i64 = 86_400_000_000_000;

impl TimeOp {
    pub fn name(&self) -> &'static str {
        match self {
            TimeOp::Hour => "dt_hour",
            TimeOp::Minute => "dt_minute",
            TimeOp::Second => "dt_second",
            TimeOp::DayOfWeek => "dt_dayofweek",
            TimeOp::Date => "dt_date",
            TimeOp::Floor(_) | TimeOp::FloorFrom { .. } => "dt_floor",
        }
    }

    pub fn dtype(&self) -> DType {
        match self {
            TimeOp::Date | TimeOp::Floor(_) | TimeOp::FloorFrom { .. } => DType::Datetime,
            _ => DType::Int64,
        }
    }

    pub fn eval(&self, s: &Series) -> PolarsResult<Series> {
        if let TimeOp::Floor(step) | TimeOp::FloorFrom { step, .. } = self
            && *step <= 0
        {
            polars_bail!(ComputeError: "dt_floor: a frequency of {} ns", step);
        }
        let ns = s.cast(&DataType::Int64)?;
        let ca = ns.i64()?;
        // `None` where a rounding falls before the first datetime.
        let part = |v: i64| -> Option<i64> {
            let in_day = v.rem_euclid(NS_DAY);
            match self {
                TimeOp::Hour => Some(in_day / 3_600_000_000_000),
                TimeOp::Minute => Some(in_day / 60_000_000_000 % 60),
                TimeOp::Second => Some(in_day / 1_000_000_000 % 60),
                // 1970-01-01 was a Thursday (3).
                TimeOp::DayOfWeek => Some((v.div_euclid(NS_DAY) + 3).rem_euclid(7)),
                TimeOp::Date => v.checked_sub(in_day),
                TimeOp::Floor(step) => v.checked_sub(v.rem_euclid(*step)),
                TimeOp::FloorFrom { step, origin } => {
                    let from = v.checked_sub(*origin)?;
                    from.checked_sub(from.rem_euclid(*step))?.checked_add(*origin)
                }
            }
        };
        let out: Int64Chunked = ca.iter().map(|v| v.and_then(part)).collect();
        let out = out.into_series().with_name(s.name().clone());
        match self.dtype() {
            DType::Datetime => out.cast(&DType::Datetime.to_polars()),
            _ => Ok(out),
        }
    }
}

/// A fixed frequency as pandas writes it (`"15min"`, `"1h"`, `"D"`,
/// `"30s"`, `"ms"`, `"us"`, `"ns"`, also `"T"`, `"H"`, `"S"`, `"L"`,
/// `"U"`, `"N"`) in nanoseconds.
pub fn frequency(freq: &str) -> Result<i64, FrameError> {
    let f = freq.trim();
    let digits = f.chars().take_while(|c| c.is_ascii_digit()).count();
    let (n, unit) = f.split_at(digits);
    let n: i64 = if n.is_empty() { 1 } else { n.parse().unwrap_or(0) };
    let per = match unit {
        "D" | "d" | "day" | "days" => NS_DAY,
        "h" | "H" | "hour" | "hours" => 3_600_000_000_000,
        "min" | "T" | "minute" | "minutes" => 60_000_000_000,
        "s" | "S" | "sec" | "second" | "seconds" => 1_000_000_000,
        "ms" | "L" => 1_000_000,
        "us" | "U" => 1_000,
        "ns" | "N" => 1,
        _ => 0,
    };
    match n.checked_mul(per) {
        Some(step) if step > 0 => Ok(step),
        _ => Err(FrameError::Invalid(format!(
            "dt_floor: \"{freq}\" is not a fixed frequency (such as \"15min\", \"1h\", \"D\", \"30s\")"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_places_among_the_categories() {
        let s = Series::new("k".into(), [Some("b"), None, Some("a"), Some("z")]);
        let out = TextOp::Codes(std::sync::Arc::new(vec!["a".into(), "b".into()])).eval(&s).expect("codes");
        let got: Vec<Option<i64>> = out.i64().expect("i64").iter().collect();
        assert_eq!(got, [Some(1), Some(-1), Some(0), Some(-1)]);
    }

    #[test]
    fn python_slices_pads_and_replacements() {
        assert_eq!(slice_chars("héllo", Some(1), Some(-1), 1), "éll");
        assert_eq!(slice_chars("hello", None, None, -2), "olh");
        assert_eq!(slice_chars("hello", Some(-2), None, 1), "lo");
        assert_eq!(slice_chars("hi", Some(5), None, 1), "");
        assert_eq!(slice_chars("hello", Some(1), None, i64::MAX), "e");
        assert_eq!(slice_chars("hello", None, None, i64::MIN), "o");
        assert_eq!(pad("ab", 5, Side::Both, '*'), "**ab*");
        assert_eq!(pad("abc", 6, Side::Both, '*'), "*abc**");
        assert_eq!(pad("ab", 4, Side::Left, '0'), "00ab");
        assert_eq!(python_replacement(r"\1-\g<2>$"), "${1}-${2}$$");
        assert_eq!(frequency("15min").ok(), Some(900_000_000_000));
        assert!(frequency("1M").is_err());
        assert!(frequency("0h").is_err());
    }
}
