//! pandas' most used `.str` methods and the datetime parts beyond the
//! date, on lazy and computed Series alike (`frame::text` evaluates them).

use brisk_engine::frame::expr::Expr;
use brisk_engine::frame::text::{Side, TextOp, TimeOp, frequency};
use rhai::{Dynamic, Engine, EvalAltResult, Map};

use super::args::options;
use super::fndoc::{FnDoc, doc};
use super::series_expr::ElementWise;
use crate::error::runtime;

type Res<T> = Result<T, Box<EvalAltResult>>;

/// This area's entries of the API reference.
pub(super) const DOCS: &[FnDoc] = &[
    doc(
        "str_split",
        "s.str_split([sep], #{n, expand}) -> StringSplit | DataFrame",
        "Python's str.split on each string (runs of whitespace without `sep`, at most `n` splits). Then `.str_get(i)` (negative from the end) or `.str_len()`, as pandas' `str.split().str.get(i)`; with `expand: true` (which needs `n`, as Dask) a frame of columns 0..n, missing past a string's parts.",
        "from_columns(#{s: [\"a b c\", \"d\"]})[\"s\"].str_split().str_get(-1).compute()",
    ),
    doc(
        "str_startswith",
        "s.str_startswith(prefix) -> Series",
        "Whether each string starts with `prefix` (missing stays missing), as pandas' str.startswith.",
        "from_columns(#{s: [\"apple\", \"banana\"]})[\"s\"].str_startswith(\"ap\").compute()",
    ),
    doc(
        "str_endswith",
        "s.str_endswith(suffix) -> Series",
        "Whether each string ends with `suffix`, as pandas' str.endswith.",
        "from_columns(#{s: [\"apple\", \"banana\"]})[\"s\"].str_endswith(\"na\").compute()",
    ),
    doc(
        "str_replace",
        "s.str_replace(pat, repl, #{regex}) -> Series",
        "Every occurrence of `pat` replaced by `repl`, as pandas' str.replace: literal text unless `regex: true` (then `\\\\1` or `\\\\g<name>` in `repl` name groups, as Python's re.sub).",
        "from_columns(#{s: [\"a-b-c\"]})[\"s\"].str_replace(\"-\", \"+\").compute()",
    ),
    doc(
        "str_slice",
        "s.str_slice(start, stop [, step]) -> Series",
        "Python's `s[start:stop:step]` on each string's characters (negative from the end; `()` for an open end), as pandas' str.slice.",
        "from_columns(#{s: [\"abcdef\"]})[\"s\"].str_slice(1, -1).compute()",
    ),
    doc(
        "str_strip",
        "s.str_strip() -> Series",
        "Whitespace removed from both ends of each string, as pandas' str.strip.",
        "from_columns(#{s: [\"  x \"]})[\"s\"].str_strip().compute()",
    ),
    doc(
        "str_lstrip",
        "s.str_lstrip() -> Series",
        "Whitespace removed from the start of each string.",
        "from_columns(#{s: [\"  x \"]})[\"s\"].str_lstrip().compute()",
    ),
    doc(
        "str_rstrip",
        "s.str_rstrip() -> Series",
        "Whitespace removed from the end of each string.",
        "from_columns(#{s: [\"  x \"]})[\"s\"].str_rstrip().compute()",
    ),
    doc(
        "str_pad",
        "s.str_pad(width, #{side, fillchar}) -> Series",
        "Each string filled up to `width` characters with `fillchar` (a space by default) on the `side` \"left\" (default), \"right\" or \"both\" (centred as Python's str.center), as pandas' str.pad.",
        "from_columns(#{s: [\"7\", \"42\"]})[\"s\"].str_pad(3, #{fillchar: \"0\"}).compute()",
    ),
    doc(
        "str_get",
        "s.str_get(i) -> Series",
        "The character at position `i` (negative from the end; missing where the string is shorter), as pandas' str.get.",
        "from_columns(#{s: [\"abc\", \"d\"]})[\"s\"].str_get(-2).compute()",
    ),
    doc(
        "str_extract",
        "s.str_extract(pattern) -> Series",
        "The first capture group of the first match of a regular expression (missing where it does not match), as pandas' str.extract(pat, expand=False).",
        "from_columns(#{s: [\"id=42\", \"none\"]})[\"s\"].str_extract(\"id=(\\\\d+)\").compute()",
    ),
    doc(
        "to_datetime",
        "to_datetime(s, #{format, errors}) -> Series",
        "Strings as datetimes, as pandas' to_datetime: ISO 8601 (YYYY-MM-DD[ HH:MM[:SS[.fff]]]) without a format, else a strftime format (\"%d/%m/%Y %H:%M\"); `errors: \"coerce\"` makes what does not parse missing, where the default \"raise\" is an error naming the value.",
        "to_datetime(from_columns(#{s: [\"03/01/2024\"]})[\"s\"], #{format: \"%d/%m/%Y\"}).dt_month().compute()",
    ),
    doc(
        "dt_hour",
        "s.dt_hour() -> Series",
        "The hour (0-23) of each datetime.",
        "to_datetime(from_columns(#{t: [\"2024-05-06 13:45:10\"]})[\"t\"]).dt_hour().compute()",
    ),
    doc(
        "dt_minute",
        "s.dt_minute() -> Series",
        "The minute (0-59) of each datetime.",
        "to_datetime(from_columns(#{t: [\"2024-05-06 13:45:10\"]})[\"t\"]).dt_minute().compute()",
    ),
    doc(
        "dt_second",
        "s.dt_second() -> Series",
        "The second (0-59) of each datetime.",
        "to_datetime(from_columns(#{t: [\"2024-05-06 13:45:10\"]})[\"t\"]).dt_second().compute()",
    ),
    doc(
        "dt_dayofweek",
        "s.dt_dayofweek() -> Series",
        "The day of the week, Monday 0 to Sunday 6, as pandas' dt.dayofweek.",
        "to_datetime(from_columns(#{t: [\"2024-05-06\"]})[\"t\"]).dt_dayofweek().compute()",
    ),
    doc(
        "dt_date",
        "s.dt_date() -> Series",
        "Each datetime at midnight of its day (pandas' dt.normalize(); a column here holds datetimes, not Python dates).",
        "to_datetime(from_columns(#{t: [\"2024-05-06 13:45\"]})[\"t\"]).dt_date().compute()",
    ),
    doc(
        "dt_floor",
        "s.dt_floor(freq) -> Series",
        "Each datetime down to a multiple of a fixed frequency (\"15min\", \"1h\", \"D\", \"30s\", \"ms\"), as pandas' dt.floor.",
        "to_datetime(from_columns(#{t: [\"2024-05-06 13:47:10\"]})[\"t\"]).dt_floor(\"15min\").compute()",
    ),
];

fn text<S: ElementWise>(s: &S, op: TextOp) -> Res<S> {
    s.map_expr(|e| Expr::Text(op, e))
}

fn time<S: ElementWise>(s: &S, op: TimeOp) -> Res<S> {
    s.map_expr(|e| Expr::Time(op, e))
}

/// An optional end of `str_slice`: a number, or `()` for open.
fn end(d: &Dynamic, what: &str) -> Res<Option<i64>> {
    if d.is_unit() {
        return Ok(None);
    }
    d.as_int().map(Some).map_err(|_| runtime(format!("str_slice: {what} must be an integer or ()")))
}

fn replace<S: ElementWise>(s: &S, pat: &str, repl: &str, m: Option<Map>) -> Res<S> {
    let m = options(m, "str_replace", &["regex"])?;
    let regex = match m.get("regex") {
        None => false,
        Some(b) => b.as_bool().map_err(|_| runtime("str_replace: regex must be true or false"))?,
    };
    text(s, TextOp::Replace { pat: pat.to_string(), repl: repl.to_string(), regex })
}

fn pad<S: ElementWise>(s: &S, width: i64, m: Option<Map>) -> Res<S> {
    let m = options(m, "str_pad", &["side", "fillchar"])?;
    let width = usize::try_from(width).map_err(|_| runtime(format!("str_pad: width {width} is negative")))?;
    let side = match m.get("side").map(|d| d.clone().into_string()) {
        None => Side::Left,
        Some(Ok(v)) if v == "left" => Side::Left,
        Some(Ok(v)) if v == "right" => Side::Right,
        Some(Ok(v)) if v == "both" => Side::Both,
        Some(_) => return Err(runtime("str_pad: side must be \"left\", \"right\" or \"both\"")),
    };
    let fill = match m.get("fillchar").map(|d| d.clone().into_string()) {
        None => ' ',
        Some(Ok(v)) if v.chars().count() == 1 => v.chars().next().unwrap_or(' '),
        Some(_) => return Err(runtime("str_pad: fillchar must be one character")),
    };
    text(s, TextOp::Pad { width, side, fill })
}

fn to_datetime<S: ElementWise>(s: &S, m: Option<Map>) -> Res<S> {
    let m = options(m, "to_datetime", &["format", "errors"])?;
    let format = match m.get("format") {
        None => None,
        Some(f) => {
            Some(f.clone().into_string().map_err(|_| runtime("to_datetime: format must be a string"))?)
        }
    };
    let coerce = match m.get("errors").map(|d| d.clone().into_string()) {
        None => false,
        Some(Ok(v)) if v == "raise" => false,
        Some(Ok(v)) if v == "coerce" => true,
        Some(_) => return Err(runtime("to_datetime: errors must be \"raise\" or \"coerce\"")),
    };
    text(s, TextOp::ToDatetime { format, coerce })
}

/// `s.str_split(pat)`, waiting for `str_get(i)` or `str_len()` (brisk
/// frames hold no list columns; pandas' `str.split().str.get(i)`).
#[derive(Clone)]
pub struct StringSplit<S> {
    s: S,
    pat: Option<String>,
    n: Option<usize>,
}

/// The `n` option of a split: at most that many splits; all for none, ()
/// or -1, as Python's `maxsplit`.
pub(super) fn split_count(d: Option<&Dynamic>, what: &str) -> Res<Option<usize>> {
    match d {
        None => Ok(None),
        Some(d) if d.is_unit() => Ok(None),
        Some(d) => match d.as_int() {
            Ok(-1) => Ok(None),
            Ok(i) if (0..=10_000).contains(&i) => Ok(Some(i as usize)),
            _ => Err(runtime(format!("{what}: n is a number of splits from 0 to 10000, or -1 for all"))),
        },
    }
}

/// `s.str_split(pat, #{n, expand})`: with `expand` (which needs `n`, as
/// Dask's), a frame of columns `0..=n`, else a `StringSplit`.
fn split<S: ElementWise>(s: &S, pat: Option<String>, m: Option<Map>) -> Res<Dynamic> {
    let m = options(m, "str_split", &["n", "expand"])?;
    let n = split_count(m.get("n"), "str_split")?;
    let expand = match m.get("expand") {
        None => false,
        Some(d) => d.as_bool().map_err(|_| runtime("str_split: expand is true or false"))?,
    };
    // Checks the separator and the column's type now.
    text(s, TextOp::SplitLen { pat: pat.clone(), n })?;
    if !expand {
        return Ok(Dynamic::from(StringSplit { s: s.clone(), pat, n }));
    }
    let Some(n) = n else {
        return Err(runtime(
            "str_split: expand needs n, the number of splits (the columns must be known, as in Dask)",
        ));
    };
    let cols = (0..=n)
        .map(|i| {
            Ok((i.to_string(), text(s, TextOp::SplitGet { pat: pat.clone(), n: Some(n), i: i as i64 })?))
        })
        .collect::<Res<Vec<_>>>()?;
    s.side_by_side(cols)
}

pub(super) fn register<S: ElementWise>(engine: &mut Engine) {
    engine.register_type_with_name::<StringSplit<S>>("StringSplit");
    engine.register_fn("str_split", |s: &mut S| split(s, None, None));
    engine.register_fn("str_split", |s: &mut S, pat: &str| split(s, Some(pat.to_string()), None));
    engine.register_fn("str_split", |s: &mut S, pat: Dynamic, m: Map| -> Res<Dynamic> {
        let pat = if pat.is_unit() {
            None
        } else {
            Some(pat.into_string().map_err(|_| runtime("str_split: the separator is a string or ()"))?)
        };
        split(s, pat, Some(m))
    });
    engine.register_fn("str_get", |sp: &mut StringSplit<S>, i: i64| {
        text(&sp.s, TextOp::SplitGet { pat: sp.pat.clone(), n: sp.n, i })
    });
    engine.register_fn("explode", |sp: &mut StringSplit<S>| sp.s.explode(sp.pat.clone(), sp.n));
    engine.register_fn("str_len", |sp: &mut StringSplit<S>| {
        text(&sp.s, TextOp::SplitLen { pat: sp.pat.clone(), n: sp.n })
    });
    engine.register_fn("to_string", |sp: &mut StringSplit<S>| {
        format!("StringSplit [sep={:?}, n={:?}]", sp.pat.as_deref().unwrap_or("whitespace"), sp.n)
    });
    engine.register_fn("str_startswith", |s: &mut S, p: &str| text(s, TextOp::StartsWith(p.to_string())));
    engine.register_fn("str_endswith", |s: &mut S, p: &str| text(s, TextOp::EndsWith(p.to_string())));
    engine.register_fn("str_replace", |s: &mut S, pat: &str, repl: &str| replace(s, pat, repl, None));
    engine.register_fn("str_replace", |s: &mut S, pat: &str, repl: &str, m: Map| {
        replace(s, pat, repl, Some(m))
    });
    engine.register_fn("str_slice", |s: &mut S, a: Dynamic, b: Dynamic| -> Res<S> {
        text(s, TextOp::Slice { start: end(&a, "start")?, stop: end(&b, "stop")?, step: 1 })
    });
    engine.register_fn("str_slice", |s: &mut S, a: Dynamic, b: Dynamic, step: i64| -> Res<S> {
        text(s, TextOp::Slice { start: end(&a, "start")?, stop: end(&b, "stop")?, step })
    });
    engine.register_fn("str_strip", |s: &mut S| text(s, TextOp::Strip(Side::Both)));
    engine.register_fn("str_lstrip", |s: &mut S| text(s, TextOp::Strip(Side::Left)));
    engine.register_fn("str_rstrip", |s: &mut S| text(s, TextOp::Strip(Side::Right)));
    engine.register_fn("str_pad", |s: &mut S, w: i64| pad(s, w, None));
    engine.register_fn("str_pad", |s: &mut S, w: i64, m: Map| pad(s, w, Some(m)));
    engine.register_fn("str_get", |s: &mut S, i: i64| text(s, TextOp::Get(i)));
    engine.register_fn("str_extract", |s: &mut S, p: &str| text(s, TextOp::Extract(p.to_string())));
    engine.register_fn("to_datetime", |s: &mut S| to_datetime(s, None));
    engine.register_fn("to_datetime", |s: &mut S, m: Map| to_datetime(s, Some(m)));
    for (name, op) in [
        ("dt_hour", TimeOp::Hour),
        ("dt_minute", TimeOp::Minute),
        ("dt_second", TimeOp::Second),
        ("dt_dayofweek", TimeOp::DayOfWeek),
        ("dt_date", TimeOp::Date),
    ] {
        engine.register_fn(name, move |s: &mut S| time(s, op));
    }
    engine.register_fn("dt_floor", |s: &mut S, freq: &str| -> Res<S> {
        let step = frequency(freq).map_err(|e| runtime(e.to_string()))?;
        time(s, TimeOp::Floor(step))
    });
}
