//! `df.query("x > 5 and name == 'a'")`: pandas' query language, parsed
//! into a column expression. Python's precedence, with pandas' rule that
//! `&` and `|` bind as loosely as `and` and `or`; chained comparisons
//! (`1 < x <= 5`), `in` / `not in` a list (and `==` / `!=` with a list, as
//! pandas), `@name` for a value the caller passes, backticks around a
//! column name that is not an identifier.

use std::collections::BTreeMap;

use super::dtype::{DType, Schema};
use super::error::FrameError;
use super::expr::{BinOp, Expr, UnOp};
use super::partition::Frame;
use crate::value::Value;

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Num(Value),
    Str(String),
    Name(String),
    Quoted(String),
    At(String),
    Op(&'static str),
}

const OPS: &[&str] = &[
    "**", "//", "==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "%", "(", ")", "[", "]", ",", "&", "|",
    "~",
];

fn bad(msg: impl Into<String>) -> FrameError {
    FrameError::Invalid(format!("query: {}", msg.into()))
}

fn lex(src: &str) -> Result<Vec<(Tok, usize)>, FrameError> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.' || b[i] == b'_') {
                // An exponent's sign belongs to the number.
                if (b[i] == b'e' || b[i] == b'E') && matches!(b.get(i + 1), Some(b'+' | b'-')) {
                    i += 1;
                }
                i += 1;
            }
            let text = src[start..i].replace('_', "");
            let v = match text.parse::<i64>() {
                Ok(n) => Value::Int(n),
                Err(_) => Value::Float(
                    text.parse::<f64>().map_err(|_| bad(format!("\"{text}\" at {start} is not a number")))?,
                ),
            };
            out.push((Tok::Num(v), start));
        } else if c == b'\'' || c == b'"' || c == b'`' {
            let mut s = String::new();
            i += 1;
            loop {
                let Some(&ch) = b.get(i) else {
                    return Err(bad(format!("the quote at {start} is not closed")));
                };
                if ch == c {
                    i += 1;
                    break;
                }
                if ch == b'\\' && c != b'`' {
                    let Some(next) = src.get(i + 1..).and_then(|r| r.chars().next()) else {
                        return Err(bad(format!("the quote at {start} is not closed")));
                    };
                    s.push(match next {
                        'n' => '\n',
                        't' => '\t',
                        other => other,
                    });
                    i += 1 + next.len_utf8();
                    continue;
                }
                // A whole UTF-8 character.
                let len = src[i..].chars().next().map_or(1, char::len_utf8);
                s.push_str(&src[i..i + len]);
                i += len;
            }
            out.push((if c == b'`' { Tok::Quoted(s) } else { Tok::Str(s) }, start));
        } else if c == b'@' || c.is_ascii_alphabetic() || c == b'_' {
            if c == b'@' {
                i += 1;
            }
            let from = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let name = src[from..i].to_string();
            if name.is_empty() {
                return Err(bad(format!("@ at {start} names no variable")));
            }
            out.push((if c == b'@' { Tok::At(name) } else { Tok::Name(name) }, start));
        } else if let Some(op) = OPS.iter().find(|op| src[i..].starts_with(**op)) {
            out.push((Tok::Op(op), start));
            i += op.len();
        } else {
            let ch = src[i..].chars().next().unwrap_or('?');
            return Err(bad(format!("unexpected '{ch}' at {start}")));
        }
    }
    Ok(out)
}

struct Parser<'a> {
    toks: Vec<(Tok, usize)>,
    at: usize,
    schema: &'a Schema,
    vars: &'a BTreeMap<String, Value>,
}

/// A parsed operand: a column expression, or a list (only right of `in`
/// or `==`).
enum Operand {
    Expr(Expr),
    List(Vec<Value>),
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at).map(|(t, _)| t)
    }

    fn pos(&self) -> String {
        self.toks.get(self.at).map_or("the end".to_string(), |(_, p)| format!("position {p}"))
    }

    fn eat_op(&mut self, op: &str) -> bool {
        if self.peek()
            == Some(&Tok::Op(match OPS.iter().find(|o| **o == op) {
                Some(o) => o,
                None => return false,
            }))
        {
            self.at += 1;
            return true;
        }
        false
    }

    fn eat_word(&mut self, w: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Name(n)) if n == w) {
            self.at += 1;
            return true;
        }
        false
    }

    fn expr(&mut self, o: Operand) -> Result<Expr, FrameError> {
        match o {
            Operand::Expr(e) => Ok(e),
            Operand::List(_) => {
                Err(bad(format!("a list stands only right of in, not in, == or != (near {})", self.pos())))
            }
        }
    }

    fn or(&mut self) -> Result<Operand, FrameError> {
        let mut a = self.and()?;
        while self.eat_word("or") || self.eat_op("|") {
            let b = self.and()?;
            a = Operand::Expr(Expr::bin(BinOp::Or, self.expr(a)?, self.expr(b)?));
        }
        Ok(a)
    }

    fn and(&mut self) -> Result<Operand, FrameError> {
        let mut a = self.not()?;
        while self.eat_word("and") || self.eat_op("&") {
            let b = self.not()?;
            a = Operand::Expr(Expr::bin(BinOp::And, self.expr(a)?, self.expr(b)?));
        }
        Ok(a)
    }

    fn not(&mut self) -> Result<Operand, FrameError> {
        if self.eat_word("not") || self.eat_op("~") {
            let a = self.not()?;
            return Ok(Operand::Expr(Expr::un(UnOp::Not, self.expr(a)?)));
        }
        self.comparison()
    }

    fn comparison(&mut self) -> Result<Operand, FrameError> {
        let mut left = self.arith()?;
        let mut out: Option<Expr> = None;
        loop {
            let op = match self.peek() {
                Some(Tok::Op("==")) => Some(BinOp::Eq),
                Some(Tok::Op("!=")) => Some(BinOp::Ne),
                Some(Tok::Op("<")) => Some(BinOp::Lt),
                Some(Tok::Op("<=")) => Some(BinOp::Le),
                Some(Tok::Op(">")) => Some(BinOp::Gt),
                Some(Tok::Op(">=")) => Some(BinOp::Ge),
                _ => None,
            };
            let negated_in = matches!(self.peek(), Some(Tok::Name(n)) if n == "not")
                && matches!(self.toks.get(self.at + 1), Some((Tok::Name(n), _)) if n == "in");
            let is_in = matches!(self.peek(), Some(Tok::Name(n)) if n == "in");
            if op.is_none() && !negated_in && !is_in {
                return Ok(out.map_or(left, Operand::Expr));
            }
            self.at += if negated_in { 2 } else { 1 };
            let right = self.arith()?;
            let l = self.expr(left)?;
            let (cmp, next) = match (op, right) {
                (Some(BinOp::Eq), Operand::List(vs)) | (None, Operand::List(vs)) if !negated_in => {
                    (Expr::IsIn(Box::new(l.clone()), vs), None)
                }
                (Some(BinOp::Ne), Operand::List(vs)) | (None, Operand::List(vs)) => {
                    (Expr::un(UnOp::Not, Expr::IsIn(Box::new(l.clone()), vs)), None)
                }
                (Some(op), Operand::Expr(r)) => (Expr::bin(op, l, r.clone()), Some(r)),
                (None, Operand::Expr(_)) => {
                    return Err(bad("in and not in take a list, as [1, 2] or @values"));
                }
                (Some(op), Operand::List(_)) => {
                    return Err(bad(format!("{} cannot compare with a list", op.symbol())));
                }
            };
            let acc = match out {
                None => cmp,
                Some(acc) => Expr::bin(BinOp::And, acc, cmp),
            };
            match next {
                // Chained: `a < b < c` is `a < b and b < c`.
                Some(r) => left = Operand::Expr(r),
                None => return Ok(Operand::Expr(acc)),
            }
            out = Some(acc);
        }
    }

    fn arith(&mut self) -> Result<Operand, FrameError> {
        let mut a = self.term()?;
        loop {
            let op = if self.eat_op("+") {
                BinOp::Add
            } else if self.eat_op("-") {
                BinOp::Sub
            } else {
                return Ok(a);
            };
            let b = self.term()?;
            a = Operand::Expr(Expr::bin(op, self.expr(a)?, self.expr(b)?));
        }
    }

    fn term(&mut self) -> Result<Operand, FrameError> {
        let mut a = self.unary()?;
        loop {
            let op = if self.eat_op("*") {
                BinOp::Mul
            } else if self.eat_op("//") {
                BinOp::FloorDiv
            } else if self.eat_op("/") {
                BinOp::Div
            } else if self.eat_op("%") {
                BinOp::Mod
            } else {
                return Ok(a);
            };
            let b = self.unary()?;
            a = Operand::Expr(Expr::bin(op, self.expr(a)?, self.expr(b)?));
        }
    }

    fn unary(&mut self) -> Result<Operand, FrameError> {
        if self.eat_op("-") {
            let a = self.unary()?;
            return Ok(Operand::Expr(match self.expr(a)? {
                Expr::Lit(Value::Int(i)) if i != i64::MIN => Expr::Lit(Value::Int(-i)),
                Expr::Lit(Value::Float(f)) => Expr::Lit(Value::Float(-f)),
                e => Expr::un(UnOp::Neg, e),
            }));
        }
        if self.eat_op("+") {
            return self.unary();
        }
        let a = self.atom()?;
        if self.eat_op("**") {
            // Right-associative, and tighter than a unary minus on its left.
            let b = self.unary()?;
            return Ok(Operand::Expr(Expr::bin(BinOp::Pow, self.expr(a)?, self.expr(b)?)));
        }
        Ok(a)
    }

    fn column(&self, name: &str, at: usize) -> Result<Expr, FrameError> {
        if self.schema.contains(name) {
            return Ok(Expr::col(name));
        }
        Err(bad(format!("no column \"{name}\" (at {at}); the columns are {}", self.schema.listing())))
    }

    fn atom(&mut self) -> Result<Operand, FrameError> {
        let Some((tok, at)) = self.toks.get(self.at).cloned() else {
            return Err(bad("the expression ends too soon"));
        };
        self.at += 1;
        Ok(match tok {
            Tok::Num(v) => Operand::Expr(Expr::Lit(v)),
            Tok::Str(s) => Operand::Expr(Expr::Lit(Value::str(&s))),
            Tok::Quoted(name) => Operand::Expr(self.column(&name, at)?),
            Tok::Name(n) => match n.as_str() {
                "True" | "true" => Operand::Expr(Expr::Lit(Value::Bool(true))),
                "False" | "false" => Operand::Expr(Expr::Lit(Value::Bool(false))),
                "None" => Operand::Expr(Expr::Lit(Value::Unit)),
                "nan" | "NaN" if !self.schema.contains(&n) => {
                    Operand::Expr(Expr::Lit(Value::Float(f64::NAN)))
                }
                _ => Operand::Expr(self.column(&n, at)?),
            },
            Tok::At(name) => match self.vars.get(&name) {
                Some(Value::List(items)) => Operand::List(items.as_ref().clone()),
                Some(
                    v @ (Value::Unit | Value::Bool(_) | Value::Int(_) | Value::Float(_) | Value::Str(_)),
                ) => Operand::Expr(Expr::Lit(v.clone())),
                Some(v) => {
                    return Err(bad(format!(
                        "@{name} is {}, not a number, string, bool or list",
                        v.type_name()
                    )));
                }
                None => {
                    return Err(bad(format!(
                        "@{name} is not given (pass it in #{{local_dict: #{{{name}: ...}}}})"
                    )));
                }
            },
            Tok::Op("(") => {
                let inner = self.or()?;
                if !self.eat_op(")") {
                    return Err(bad(format!("a ')' is missing at {}", self.pos())));
                }
                inner
            }
            Tok::Op("[") => {
                let mut items = Vec::new();
                if !self.eat_op("]") {
                    loop {
                        let e = self.unary()?;
                        match self.expr(e)? {
                            Expr::Lit(v) => items.push(v),
                            _ => return Err(bad(format!("a list holds values only (near {})", self.pos()))),
                        }
                        if self.eat_op("]") {
                            break;
                        }
                        if !self.eat_op(",") {
                            return Err(bad(format!("a ',' or ']' is missing at {}", self.pos())));
                        }
                    }
                }
                Operand::List(items)
            }
            Tok::Op(op) => return Err(bad(format!("unexpected '{op}' at {at}"))),
        })
    }
}

/// The boolean expression `src` over the columns of `schema`, with
/// `@name` standing for `vars[name]`.
pub fn parse(src: &str, schema: &Schema, vars: &BTreeMap<String, Value>) -> Result<Expr, FrameError> {
    let toks = lex(src)?;
    if toks.is_empty() {
        return Err(bad("the expression is empty"));
    }
    let mut p = Parser { toks, at: 0, schema, vars };
    let top = p.or()?;
    let e = p.expr(top)?;
    if p.at < p.toks.len() {
        return Err(bad(format!("unexpected text at {}", p.pos())));
    }
    match e.dtype(schema)? {
        Some(DType::Bool) => Ok(e),
        t => Err(bad(format!(
            "\"{src}\" gives {} values, not true or false",
            t.map_or("missing", |t| t.name())
        ))),
    }
}

impl Frame {
    /// `query` on a computed frame.
    pub fn query(&self, src: &str, vars: &BTreeMap<String, Value>) -> Result<Frame, FrameError> {
        let df = &self.0;
        let mut cols = Vec::new();
        for c in df.columns() {
            let t = DType::of_polars(c.dtype()).ok_or_else(|| {
                FrameError::DType(format!(
                    "column \"{}\" has type {}, which query cannot read",
                    c.name(),
                    c.dtype()
                ))
            })?;
            cols.push((c.name().to_string(), t));
        }
        let e = parse(src, &Schema::new(cols), vars)?;
        let kept = super::stage::Stage::Filter(e)
            .apply(df.clone())
            .map_err(|e| FrameError::Invalid(format!("query: {e}")))?;
        Ok(Frame(kept))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use polars::prelude::df;

    fn run(src: &str) -> Result<Vec<bool>, FrameError> {
        let schema = Schema::new(vec![
            ("x".into(), DType::Int64),
            ("y".into(), DType::Float64),
            ("name".into(), DType::Str),
            ("a b".into(), DType::Int64),
        ]);
        let mut vars = BTreeMap::new();
        vars.insert("lim".to_string(), Value::Int(2));
        vars.insert("names".to_string(), Value::list(vec![Value::str("a"), Value::str("c")]));
        let e = parse(src, &schema, &vars)?;
        let df = df!(
            "x" => [1i64, 2, 3, 4],
            "y" => [0.5, -1.0, 2.0, 8.0],
            "name" => ["a", "b", "c", "d"],
            "a b" => [4i64, 3, 2, 1],
        )
        .expect("df");
        let s = e.eval(&df).expect("eval");
        Ok(s.bool().expect("bool").iter().map(|b| b.unwrap_or(false)).collect())
    }

    #[test]
    fn pandas_query_syntax() {
        assert_eq!(run("x > 2").expect("q"), [false, false, true, true]);
        assert_eq!(run("x > 1 and y < 3").expect("q"), [false, true, true, false]);
        assert_eq!(run("x == 1 | x == 4 & y > 0").expect("q"), [true, false, false, true]);
        assert_eq!(run("not (x > 1)").expect("q"), [true, false, false, false]);
        assert_eq!(run("1 < x <= 3").expect("q"), [false, true, true, false]);
        assert_eq!(run("name in ['a', \"d\"]").expect("q"), [true, false, false, true]);
        assert_eq!(run("name not in @names").expect("q"), [false, true, false, true]);
        assert_eq!(run("name == ['b']").expect("q"), [false, true, false, false]);
        assert_eq!(run("x >= @lim and `a b` > 1").expect("q"), [false, true, true, false]);
        assert_eq!(run("x ** 2 - 1 > 3 * -1 + 10").expect("q"), [false, false, true, true]);
        assert_eq!(run("x // 2 == 1 or x % 4 == 0").expect("q"), [false, true, true, true]);
        assert_eq!(run("y > 1e0 and y < 2.5e+0").expect("q"), [false, false, true, false]);
        assert_eq!(run("~(name == 'a')").expect("q"), [false, true, true, true]);
        // An escaped character beyond ASCII is that character.
        assert_eq!(run("name == '\\\u{e9}' or name == 'd'").expect("q"), [false, false, false, true]);
    }

    #[test]
    fn bad_queries_say_what_is_wrong() {
        for (src, says) in [
            ("z > 1", "no column \"z\""),
            ("x >", "ends too soon"),
            ("x > 1 )", "unexpected text"),
            ("(x > 1", "')' is missing"),
            ("x + 1", "gives int64 values"),
            ("name > 1", "cannot apply"),
            ("x in 3", "take a list"),
            ("x > @nope", "@nope is not given"),
            ("'abc", "not closed"),
            ("name == 'x\\\u{e9}' or name == 'a\\", "not closed"),
            ("x $ 1", "unexpected '$'"),
            ("", "empty"),
            ("[1, 2]", "a list stands only"),
        ] {
            let e = run(src).expect_err(src).to_string();
            assert!(e.contains(says), "{src}: {e}");
        }
    }
}
