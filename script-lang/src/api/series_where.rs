//! Values chosen by a condition, as pandas': `where`, `mask`, `clip` and
//! `replace` on Series (lazy and computed alike), through
//! `Expr::IfElse`.

use brisk_engine::Value;
use brisk_engine::frame::expr::Expr;
use rhai::{Array as RArray, Dynamic, Engine, EvalAltResult, Map};

use super::fndoc::{FnDoc, doc};
use super::series_expr::{ElementWise, scalar};
use crate::error::runtime;

type Res<T> = Result<T, Box<EvalAltResult>>;

/// This area's entries of the API reference.
pub(super) const DOCS: &[FnDoc] = &[
    doc(
        "where",
        "s.where(cond [, other]) -> Series",
        "The values where `cond` (a bool Series of the same rows) is true, `other` (missing by default) elsewhere, as pandas' Series.where; a missing condition counts as false. (For arrays, `where(cond, a, b)`.)",
        "let s = from_columns(#{x: [1, 5, 9]})[\"x\"];\ns.where(s > 3, 0).compute()",
    ),
    doc(
        "mask",
        "s.mask(cond [, other]) -> Series",
        "`other` (missing by default) where `cond` is true, the values elsewhere: `where` turned around, as pandas' Series.mask. (For arrays, `x.mask(cond)` selects elements.)",
        "let s = from_columns(#{x: [1, 5, 9]})[\"x\"];\ns.mask(s > 3, -1).compute()",
    ),
    doc(
        "clip",
        "s.clip(lower, upper) -> Series",
        "Values below `lower` raised to it and above `upper` lowered to it (`()` for no bound); missing stays missing, as pandas' clip. (For arrays too.)",
        "from_columns(#{x: [-3, 2, 8]})[\"x\"].clip(0, 5).compute()",
    ),
    doc(
        "replace",
        "s.replace(old, new) / s.replace([[old, new], ...]) / s.replace(#{old: new}) -> Series",
        "Each value equal to an `old` replaced by its `new`, all at once (a map's keys are strings), as pandas' Series.replace.",
        "from_columns(#{s: [\"a\", \"b\", \"a\"]})[\"s\"].replace(#{a: \"x\"}).compute()",
    ),
];

fn lit(v: Value) -> Box<Expr> {
    Box::new(Expr::Lit(v))
}

/// `where` (`keep` true) and `mask` (`keep` false). As pandas', a
/// missing condition keeps nothing: `where` gives `other` there, and so
/// does `mask`.
fn choose<S: ElementWise>(s: &S, cond: &S, other: Value, keep: bool) -> Res<S> {
    s.map_expr2(cond, |x, c| {
        if keep {
            Expr::IfElse(c, x, lit(other))
        } else {
            Expr::IfElse(Box::new(Expr::FillNa(c, Value::Bool(true))), lit(other), x)
        }
    })
}

fn clip<S: ElementWise>(s: &S, lo: &Dynamic, hi: &Dynamic) -> Res<S> {
    let (mut lo, mut hi) = (scalar(lo, "clip")?, scalar(hi, "clip")?);
    let number = |v: &Value| match v {
        Value::Int(i) => Some(*i as f64),
        Value::Float(f) => Some(*f),
        _ => None,
    };
    // pandas swaps bounds given the wrong way round.
    if let (Some(l), Some(h)) = (number(&lo), number(&hi))
        && l > h
    {
        std::mem::swap(&mut lo, &mut hi);
    }
    s.map_expr(|x| Expr::Clip(x, lo, hi))
}

/// Every `old` by its `new`, compared with the original values (so one
/// replacement never feeds another).
fn replace<S: ElementWise>(s: &S, pairs: Vec<(Value, Value)>) -> Res<S> {
    s.map_expr(|x| Expr::Replace(x, pairs))
}

fn pairs_of(list: &RArray) -> Res<Vec<(Value, Value)>> {
    list.iter()
        .map(|p| match p.read_lock::<RArray>() {
            Some(kv) if kv.len() == 2 => Ok((scalar(&kv[0], "replace")?, scalar(&kv[1], "replace")?)),
            _ => Err(runtime("replace: give [old, new] pairs")),
        })
        .collect()
}

pub(super) fn register<S: ElementWise>(engine: &mut Engine) {
    engine.register_fn("where", |s: &mut S, c: S| choose(s, &c, Value::Unit, true));
    engine.register_fn("where", |s: &mut S, c: S, o: Dynamic| -> Res<S> {
        choose(s, &c, scalar(&o, "where")?, true)
    });
    engine.register_fn("mask", |s: &mut S, c: S| choose(s, &c, Value::Unit, false));
    engine.register_fn("mask", |s: &mut S, c: S, o: Dynamic| -> Res<S> {
        choose(s, &c, scalar(&o, "mask")?, false)
    });
    engine.register_fn("clip", |s: &mut S, lo: Dynamic, hi: Dynamic| clip(s, &lo, &hi));
    engine.register_fn("replace", |s: &mut S, old: Dynamic, new: Dynamic| -> Res<S> {
        replace(s, vec![(scalar(&old, "replace")?, scalar(&new, "replace")?)])
    });
    engine.register_fn("replace", |s: &mut S, list: RArray| -> Res<S> { replace(s, pairs_of(&list)?) });
    engine.register_fn("replace", |s: &mut S, m: Map| -> Res<S> {
        let pairs = m
            .iter()
            .map(|(k, v)| Ok((Value::str(k.as_str()), scalar(v, "replace")?)))
            .collect::<Res<Vec<_>>>()?;
        replace(s, pairs)
    });
}
