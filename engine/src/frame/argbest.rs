//! `idxmax` / `idxmin`: where a column is largest (smallest), as the
//! label of that row: its value of the index column `set_index` made, or
//! its position in the whole frame. Each partition gives, per column, its
//! best value, that row's label (a position within the rows it covers)
//! and its row count; merges go in partition order, so positions add up
//! and ties keep the first row, as pandas. Missing values and NaN are
//! skipped; a column with none present has a missing label.

use polars::prelude::*;

use crate::value::{Value, cell};

fn numbers(s: &Series) -> PolarsResult<Vec<Option<f64>>> {
    Ok(s.cast(&DataType::Float64)?.f64()?.iter().map(|v| v.filter(|x| !x.is_nan())).collect())
}

/// A partition's `[best, label, rows]` per column.
pub fn partial(df: &DataFrame, columns: &[String], index: Option<&str>, max: bool) -> PolarsResult<Value> {
    let labels = index.map(|i| df.column(i)).transpose()?;
    let mut out = Vec::with_capacity(columns.len());
    for c in columns {
        let mut best: Option<(f64, usize)> = None;
        for (i, v) in numbers(df.column(c)?.as_materialized_series())?.into_iter().enumerate() {
            let Some(v) = v else { continue };
            if best.is_none_or(|(b, _)| if max { v > b } else { v < b }) {
                best = Some((v, i));
            }
        }
        let (value, label) = match best {
            None => (Value::Unit, Value::Unit),
            Some((v, i)) => (
                Value::Float(v),
                match &labels {
                    Some(l) => l.get(i).map(cell).unwrap_or(Value::Unit),
                    None => Value::Int(i as i64),
                },
            ),
        };
        out.push(Value::list(vec![value, label, Value::Int(df.height() as i64)]));
    }
    Ok(Value::list(out))
}

/// Partials (in row order) merged into one; `None` for a malformed one.
pub fn merge(partials: &[Value], positions: bool, max: bool) -> Option<Value> {
    let mut acc: Option<Vec<(Value, Value, i64)>> = None;
    for p in partials {
        let Value::List(cols) = p else { return None };
        let got = cols
            .iter()
            .map(|c| match c {
                Value::List(t) => match t.as_slice() {
                    [v, l, Value::Int(n)] => Some((v.clone(), l.clone(), *n)),
                    _ => None,
                },
                _ => None,
            })
            .collect::<Option<Vec<_>>>()?;
        acc = Some(match acc {
            None => got,
            Some(a) if a.len() == got.len() => a
                .into_iter()
                .zip(got)
                .map(|((v, l, n), (v2, l2, n2))| {
                    // Later rows' positions come after the earlier ones'.
                    let l2 = match (positions, l2) {
                        (true, Value::Int(i)) => Value::Int(i + n),
                        (_, l2) => l2,
                    };
                    let better = match (&v, &v2) {
                        (Value::Float(a), Value::Float(b)) => {
                            if max {
                                b > a
                            } else {
                                b < a
                            }
                        }
                        (Value::Unit, Value::Float(_)) => true,
                        _ => false,
                    };
                    if better { (v2, l2, n + n2) } else { (v, l, n + n2) }
                })
                .collect(),
            Some(_) => return None,
        });
    }
    let cols = acc?.into_iter().map(|(v, l, n)| Value::list(vec![v, l, Value::Int(n)])).collect();
    Some(Value::list(cols))
}

/// The labels of a merged partial, one per column.
pub fn labels(merged: &Value) -> Option<Vec<Value>> {
    let Value::List(cols) = merged else { return None };
    cols.iter()
        .map(|c| match c {
            Value::List(t) => t.get(1).cloned(),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_add_up_and_ties_keep_the_first() {
        let a = df!("x" => [Some(1.0), Some(9.0), None], "k" => ["a", "b", "c"]).expect("a");
        let b = df!("x" => [Some(9.0), Some(-4.0)], "k" => ["d", "e"]).expect("b");
        let cols = ["x".to_string()];
        let parts = |index: Option<&str>, max| {
            [partial(&a, &cols, index, max).expect("a"), partial(&b, &cols, index, max).expect("b")]
        };
        let got = |p: &[Value], pos, max| labels(&merge(p, pos, max).expect("merge")).expect("labels");
        assert_eq!(got(&parts(None, true), true, true), [Value::Int(1)]);
        assert_eq!(got(&parts(None, false), true, false), [Value::Int(4)]);
        assert_eq!(got(&parts(Some("k"), true), false, true), [Value::str("b")]);
        let empty = df!("x" => [None::<f64>]).expect("e");
        let p = [partial(&empty, &cols, None, true).expect("p")];
        assert_eq!(got(&p, true, true), [Value::Unit]);
        assert!(merge(&[Value::Int(3)], true, true).is_none());
    }
}
