//! Predicate pushdown into Parquet: whether a row group may hold a row
//! that a filter keeps, judged from the row group's minimum and maximum
//! per column. The answer errs towards "may": a row group is skipped only
//! when no value in its range can pass.

use std::cmp::Ordering;

use super::expr::{BinOp, Expr};
use super::parquet::GroupStats;
use crate::value::Value;

/// How two scalars of a column compare (ints and floats with each other).
fn cmp(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(y)),
        (Value::Int(x), Value::Float(y)) => (*x as f64).partial_cmp(y),
        (Value::Float(x), Value::Int(y)) => x.partial_cmp(&(*y as f64)),
        (Value::Float(x), Value::Float(y)) => x.partial_cmp(y),
        (Value::Str(x), Value::Str(y)) => Some(x.as_ref().cmp(y.as_ref())),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

fn flip(op: BinOp) -> BinOp {
    match op {
        BinOp::Lt => BinOp::Gt,
        BinOp::Le => BinOp::Ge,
        BinOp::Gt => BinOp::Lt,
        BinOp::Ge => BinOp::Le,
        other => other,
    }
}

/// Whether `col op v` may hold for some value in `[lo, hi]`.
fn range_may(op: BinOp, lo: &Value, hi: &Value, v: &Value) -> bool {
    let (Some(l), Some(h)) = (cmp(lo, v), cmp(hi, v)) else { return true };
    match op {
        BinOp::Lt => l == Ordering::Less,
        BinOp::Le => l != Ordering::Greater,
        BinOp::Gt => h == Ordering::Greater,
        BinOp::Ge => h != Ordering::Less,
        BinOp::Eq => l != Ordering::Greater && h != Ordering::Less,
        // A missing value is != everything, and the statistics say
        // nothing of missing values.
        _ => true,
    }
}

/// Whether a row group with these statistics may hold a row for which the
/// boolean expression `e` is true.
pub fn may_match(e: &Expr, stats: &GroupStats) -> bool {
    let range = |c: &str| stats.iter().find(|(n, _, _)| n == c).map(|(_, lo, hi)| (lo, hi));
    match e {
        Expr::Bin(BinOp::And, a, b) => may_match(a, stats) && may_match(b, stats),
        Expr::Bin(BinOp::Or, a, b) => may_match(a, stats) || may_match(b, stats),
        Expr::Bin(op, a, b) => match (a.as_ref(), b.as_ref()) {
            (Expr::Col(c), Expr::Lit(v)) => range(c).is_none_or(|(lo, hi)| range_may(*op, lo, hi, v)),
            (Expr::Lit(v), Expr::Col(c)) => range(c).is_none_or(|(lo, hi)| range_may(flip(*op), lo, hi, v)),
            _ => true,
        },
        Expr::Between(c, a, b) => match c.as_ref() {
            Expr::Col(c) => range(c)
                .is_none_or(|(lo, hi)| range_may(BinOp::Ge, lo, hi, a) && range_may(BinOp::Le, lo, hi, b)),
            _ => true,
        },
        Expr::IsIn(c, vals) => match c.as_ref() {
            Expr::Col(c) => {
                range(c).is_none_or(|(lo, hi)| vals.iter().any(|v| range_may(BinOp::Eq, lo, hi, v)))
            }
            _ => true,
        },
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats() -> GroupStats {
        vec![
            ("x".into(), Value::Float(0.0), Value::Float(0.4)),
            ("k".into(), Value::str("b"), Value::str("d")),
        ]
    }

    fn cmp_col(op: BinOp, c: &str, v: Value) -> Expr {
        Expr::bin(op, Expr::col(c), Expr::Lit(v))
    }

    #[test]
    fn ranges_rule_out_row_groups() {
        let s = stats();
        assert!(!may_match(&cmp_col(BinOp::Gt, "x", Value::Float(0.5)), &s));
        assert!(may_match(&cmp_col(BinOp::Ge, "x", Value::Float(0.4)), &s));
        assert!(!may_match(&cmp_col(BinOp::Lt, "x", Value::Int(0)), &s));
        assert!(may_match(&cmp_col(BinOp::Le, "x", Value::Int(0)), &s));
        assert!(!may_match(&cmp_col(BinOp::Eq, "k", Value::str("a")), &s));
        assert!(may_match(&cmp_col(BinOp::Eq, "k", Value::str("c")), &s));
        assert!(may_match(&cmp_col(BinOp::Ne, "k", Value::str("c")), &s));
        // 0.5 < x, written with the literal first.
        assert!(!may_match(&Expr::bin(BinOp::Lt, Expr::Lit(Value::Float(0.5)), Expr::col("x")), &s));
        let and = Expr::bin(
            BinOp::And,
            cmp_col(BinOp::Gt, "x", Value::Float(0.1)),
            cmp_col(BinOp::Eq, "k", Value::str("z")),
        );
        assert!(!may_match(&and, &s));
        let or = Expr::bin(
            BinOp::Or,
            cmp_col(BinOp::Gt, "x", Value::Float(0.9)),
            cmp_col(BinOp::Eq, "k", Value::str("c")),
        );
        assert!(may_match(&or, &s));
        assert!(!may_match(
            &Expr::IsIn(Box::new(Expr::col("k")), vec![Value::str("a"), Value::str("e")]),
            &s
        ));
        assert!(!may_match(
            &Expr::Between(Box::new(Expr::col("x")), Value::Float(0.5), Value::Float(1.0)),
            &s
        ));
        // No statistics for a column: keep the row group.
        assert!(may_match(&cmp_col(BinOp::Gt, "y", Value::Float(9.0)), &s));
    }
}
