//! Text cells as pandas' `read_csv` reads them: its default missing-value
//! tokens, numbers with surrounding spaces, `inf`/`Infinity`, and the
//! column type a run of cells implies. The CSV reader's slow path, its
//! type inference and the fast groupby path all decide through here, so
//! they cannot disagree.

use polars::prelude::*;

use super::dtype::DType;

/// pandas' default `na_values` (`keep_default_na=True`): in any column,
/// a cell that is exactly one of these is a missing value.
pub const NA_TOKENS: [&str; 19] = [
    "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>", "N/A",
    "NA", "NULL", "NaN", "None", "n/a", "nan", "null",
];

/// Whether a cell is one of pandas' missing-value tokens. The first byte
/// rejects most cells at once (the fast groupby path asks for every key).
#[inline]
pub fn is_na(b: &[u8]) -> bool {
    match b.first() {
        None => return true,
        Some(c) if b.len() > 8 || !matches!(c, b'#' | b'-' | b'1' | b'<' | b'N' | b'n') => return false,
        _ => {}
    }
    matches!(
        b,
        b"" | b"#N/A"
            | b"#N/A N/A"
            | b"#NA"
            | b"-1.#IND"
            | b"-1.#QNAN"
            | b"-NaN"
            | b"-nan"
            | b"1.#IND"
            | b"1.#QNAN"
            | b"<NA>"
            | b"N/A"
            | b"NA"
            | b"NULL"
            | b"NaN"
            | b"None"
            | b"n/a"
            | b"nan"
            | b"null"
    )
}

/// An integer cell, spaces around it allowed (pandas' `xstrtoll`).
pub fn int(b: &[u8]) -> Option<i64> {
    std::str::from_utf8(b.trim_ascii()).ok()?.parse().ok()
}

/// A float cell, spaces around it allowed, `inf`/`Infinity` in any case
/// with a sign (pandas' `xstrtod`). NaN spellings other than the NA
/// tokens (`NAN`, `nAn`) are text to pandas, and so here.
pub fn float(b: &[u8]) -> Option<f64> {
    fast_float2::parse::<f64, _>(b.trim_ascii()).ok().filter(|f| !f.is_nan())
}

/// pandas' `true_values`/`false_values` defaults.
pub fn boolean(b: &[u8]) -> Option<bool> {
    match b {
        b"True" | b"TRUE" | b"true" => Some(true),
        b"False" | b"FALSE" | b"false" => Some(false),
        _ => None,
    }
}

/// The type pandas gives a column of these cells (missing ones already
/// `None`): int64 if every cell is an integer, float64 if every cell is
/// a number (an integer beyond int64 too: brisk has no uint64, and a
/// float keeps such a value as exactly as it can), bool, else string. A
/// column of nothing but missing cells is float64, as pandas reads it.
pub fn infer<'a>(cells: impl Iterator<Item = Option<&'a str>>) -> DType {
    let (mut i, mut f, mut b, mut any) = (true, true, true, false);
    for c in cells.flatten() {
        let c = c.as_bytes();
        any = true;
        i = i && int(c).is_some();
        f = f && (i || float(c).is_some());
        b = b && boolean(c).is_some();
        if !f && !b {
            return DType::Str;
        }
    }
    match () {
        _ if !any || (f && !i) => DType::Float64,
        _ if i => DType::Int64,
        _ if b => DType::Bool,
        _ => DType::Str,
    }
}

/// A cell that is not of its column's type: its row in the column and its text.
#[derive(Debug, Clone, PartialEq)]
pub struct BadCell {
    pub row: usize,
    pub text: String,
}

/// A column of text cells (missing ones `None`) as type `t`, by the rules
/// above; the first cell that does not convert is the error.
pub fn convert(ca: &StringChunked, t: DType) -> Result<Series, BadCell> {
    fn each<T>(ca: &StringChunked, f: impl Fn(&[u8]) -> Option<T>) -> Result<Vec<Option<T>>, BadCell> {
        ca.iter()
            .enumerate()
            .map(|(row, c)| match c {
                None => Ok(None),
                Some(c) => f(c.as_bytes()).map(Some).ok_or_else(|| BadCell { row, text: c.to_string() }),
            })
            .collect()
    }
    let name = ca.name().clone();
    Ok(match t {
        DType::Str | DType::Category => ca.clone().into_series(),
        DType::Int64 => Series::new(name, each(ca, int)?),
        DType::Float64 => Series::new(name, each(ca, float)?),
        DType::Bool => Series::new(name, each(ca, boolean)?),
        DType::Datetime => {
            let ns = each(ca, |c| super::calendar::parse_datetime(std::str::from_utf8(c).ok()?.trim()))?;
            Series::new(name, ns).cast(&t.to_polars()).map_err(|e| BadCell { row: 0, text: e.to_string() })?
        }
    })
}

/// The NA tokens of a string column as missing values, and NaN in a float
/// column as missing (pandas reads `NaN` as its missing value). For the
/// typed fast parse, which knows only empty cells as missing; a column
/// with neither is left as it is.
pub fn na_to_null(df: DataFrame) -> PolarsResult<DataFrame> {
    let mut df = df;
    let names: Vec<PlSmallStr> = df.get_column_names().into_iter().cloned().collect();
    for name in names {
        let c = df.column(&name)?;
        let fixed = match c.dtype() {
            DataType::String => {
                let ca = c.str()?;
                if !ca.iter().any(|v| v.is_some_and(|s| is_na(s.as_bytes()))) {
                    continue;
                }
                let out: StringChunked = ca.iter().map(|v| v.filter(|s| !is_na(s.as_bytes()))).collect();
                out.with_name(name.clone()).into_series()
            }
            DataType::Float64 => {
                let ca = c.f64()?;
                if !ca.iter().any(|v| v.is_some_and(f64::is_nan)) {
                    continue;
                }
                let out: Float64Chunked = ca.iter().map(|v| v.filter(|x| !x.is_nan())).collect();
                out.with_name(name.clone()).into_series()
            }
            _ => continue,
        };
        df.replace(&name, fixed.into_column())?;
    }
    Ok(df)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_and_numbers_follow_pandas() {
        for t in NA_TOKENS {
            assert!(is_na(t.as_bytes()), "{t}");
        }
        for t in ["NAN", "na", "Null", " NA", "0"] {
            assert!(!is_na(t.as_bytes()), "{t}");
        }
        assert_eq!(int(b" 12 "), Some(12));
        assert_eq!(int(b"+5"), Some(5));
        assert_eq!(int(b"1.5"), None);
        assert_eq!(int(b"9223372036854775808"), None);
        assert_eq!(float(b"\t1.5 "), Some(1.5));
        for (t, v) in [("Infinity", f64::INFINITY), ("-Infinity", f64::NEG_INFINITY), ("inf", f64::INFINITY)]
        {
            assert_eq!(float(t.as_bytes()), Some(v), "{t}");
        }
        assert_eq!(float(b"iNf"), Some(f64::INFINITY));
        assert_eq!(float(b"1."), Some(1.0));
        assert_eq!(float(b".5"), Some(0.5));
        assert_eq!(float(b"NAN"), None);
        assert_eq!(float(b"1d3"), None);
        assert_eq!(float(b"0x10"), None);
        let col = |v: &[Option<&str>]| infer(v.iter().copied());
        assert_eq!(col(&[Some(" 1"), None, Some("2 ")]), DType::Int64);
        assert_eq!(col(&[Some("1"), Some("Infinity")]), DType::Float64);
        assert_eq!(col(&[Some("1"), Some("9223372036854775808")]), DType::Float64);
        assert_eq!(col(&[Some("True"), Some("false")]), DType::Bool);
        assert_eq!(col(&[Some("True"), Some("1")]), DType::Str);
        assert_eq!(col(&[None, None]), DType::Float64);
        assert_eq!(col(&[Some("1"), Some("x")]), DType::Str);
    }
}
