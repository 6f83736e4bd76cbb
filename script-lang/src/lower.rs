//! Closures lowered to native code. A closure given to a bag's `map` or
//! `filter` (or a Series' `map`) runs once per record, and the interpreter's
//! call alone costs more than the work of a short body such as
//! `|l| l.split(" ")` or `|r| r.amount > 100`. A closure whose body is one
//! expression over its parameters, constants, a few pure methods
//! (`split`, `len`, `to_upper`…), fields, indexing, arithmetic and
//! comparisons is translated into a small tree evaluated straight on the
//! engine's values, as Polars turns simple Python lambdas into expressions.
//!
//! Exactness comes first: the tree answers only where its result is the one
//! Rhai would give, and for anything else (an unexpected type, an overflow,
//! a missing index) it answers "don't know" and that record goes through
//! the interpreter, which then gives Rhai's own value or error. Names the
//! session's script defines itself are never lowered.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use crate::convert::MAX_DEPTH;
use brisk_engine::Value;
use rhai::{AST, ASTFlags, ASTNode, Expr, FnCallExpr, Stmt};

/// A lowered closure: its body as a tree over `params` parameters (the
/// captured values first, then the record).
#[derive(Debug)]
pub(crate) struct Lowered {
    body: Node,
    params: usize,
}

#[derive(Debug)]
enum Node {
    Param(usize),
    Const(Value),
    List(Vec<Node>),
    Record(Vec<(String, Node)>),
    /// `x.name`: a map's field (`()` when absent), or a string's or
    /// array's `len` / `is_empty`.
    Property(Box<Node>, Arc<str>),
    /// `x[i]`.
    Index(Box<Node>, Box<Node>),
    /// `x.m(args…)` or `m(x, args…)`.
    Call(Method, Box<Node>, Vec<Node>),
    Unary(Unary, Box<Node>),
    Binary(Binary, Box<Node>, Box<Node>),
    And(Vec<Node>),
    Or(Vec<Node>),
    Coalesce(Vec<Node>),
}

#[derive(Debug, Clone, Copy)]
enum Method {
    Len,
    IsEmpty,
    Split,
    ToUpper,
    ToLower,
    Contains,
    StartsWith,
    EndsWith,
    ParseInt,
    ParseFloat,
    ToInt,
    ToFloat,
    Abs,
    Floor,
    Ceiling,
    Round,
}

impl Method {
    fn of(name: &str) -> Option<Method> {
        Some(match name {
            "len" => Method::Len,
            "is_empty" => Method::IsEmpty,
            "split" => Method::Split,
            "to_upper" => Method::ToUpper,
            "to_lower" => Method::ToLower,
            "contains" => Method::Contains,
            "starts_with" => Method::StartsWith,
            "ends_with" => Method::EndsWith,
            "parse_int" => Method::ParseInt,
            "parse_float" => Method::ParseFloat,
            "to_int" => Method::ToInt,
            "to_float" => Method::ToFloat,
            "abs" => Method::Abs,
            "floor" => Method::Floor,
            "ceiling" => Method::Ceiling,
            "round" => Method::Round,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Copy)]
enum Unary {
    Neg,
    Not,
}

#[derive(Debug, Clone, Copy)]
enum Binary {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Binary {
    fn of(name: &str) -> Option<Binary> {
        Some(match name {
            "+" => Binary::Add,
            "-" => Binary::Sub,
            "*" => Binary::Mul,
            "/" => Binary::Div,
            "%" => Binary::Rem,
            "==" => Binary::Eq,
            "!=" => Binary::Ne,
            "<" => Binary::Lt,
            "<=" => Binary::Le,
            ">" => Binary::Gt,
            ">=" => Binary::Ge,
            _ => return None,
        })
    }
}

/// Lower the script function `entry` taking `arity` parameters, if its body
/// is one expression the native evaluator covers.
pub(crate) fn lower(ast: &AST, entry: &str, arity: usize) -> Option<Lowered> {
    let mut own_names = HashSet::new();
    let mut params = None;
    for f in ast.iter_fn_def() {
        own_names.insert(f.name.to_string());
        if f.name == entry && f.params.len() == arity {
            params = Some(f.params.iter().map(|p| p.to_string()).collect::<Vec<_>>());
        }
    }
    let params = params?;
    // (`clone_functions_only_filtered` would keep them all: it does not
    // filter into an empty module.)
    let mut only = ast.clone_functions_only();
    only.retain_functions(|_, _, name, n| name == entry && n == arity);
    let lowering = Lowering { params: &params, own_names: &own_names };
    let mut statements = 0;
    let mut body = None;
    only.walk(&mut |path: &[ASTNode<'_>]| {
        if let [ASTNode::Stmt(s)] = path {
            statements += 1;
            body = match s {
                // `return` ends the function: only as its one statement.
                Stmt::Return(Some(e), flags, _) if !flags.intersects(ASTFlags::BREAK) => lowering.expr(e),
                s => lowering.stmt(s),
            };
        }
        true
    });
    match (statements, body) {
        (1, Some(body)) => Some(Lowered { body, params: arity }),
        _ => None,
    }
}

struct Lowering<'a> {
    params: &'a [String],
    own_names: &'a HashSet<String>,
}

#[derive(Clone, Copy)]
enum Link {
    Dot,
    Index,
}

impl Lowering<'_> {
    /// A statement that is a value. (A `return` inside an expression,
    /// as in `(x.a ?? return 0) + 1`, ends the whole function: not lowered.)
    fn stmt(&self, s: &Stmt) -> Option<Node> {
        match s {
            Stmt::Expr(e) => self.expr(e),
            Stmt::FnCall(f, _) => self.call(f),
            _ => None,
        }
    }

    fn expr(&self, e: &Expr) -> Option<Node> {
        Some(match e {
            Expr::BoolConstant(b, _) => Node::Const(Value::Bool(*b)),
            Expr::IntegerConstant(i, _) => Node::Const(Value::Int(*i)),
            Expr::FloatConstant(f, _) => Node::Const(Value::Float(**f)),
            Expr::StringConstant(s, _) => Node::Const(Value::Str(Arc::from(s.as_str()))),
            Expr::Unit(_) => Node::Const(Value::Unit),
            Expr::Variable(v, _, _) if v.2.is_empty() => {
                Node::Param(self.params.iter().position(|p| p.as_str() == v.1.as_str())?)
            }
            Expr::Array(items, _) => Node::List(items.iter().map(|x| self.expr(x)).collect::<Option<_>>()?),
            Expr::Map(m, _) => Node::Record(
                m.0.iter().map(|(k, x)| Some((k.name.to_string(), self.expr(x)?))).collect::<Option<_>>()?,
            ),
            Expr::Stmt(block) => match block.statements() {
                [s] => self.stmt(s)?,
                _ => return None,
            },
            Expr::FnCall(f, _) => self.call(f)?,
            Expr::Dot(b, flags, _) if !flags.intersects(ASTFlags::NEGATED) => {
                self.link(self.expr(&b.lhs)?, Link::Dot, &b.rhs, flags.intersects(ASTFlags::BREAK))?
            }
            Expr::Index(b, flags, _) if !flags.intersects(ASTFlags::NEGATED) => {
                self.link(self.expr(&b.lhs)?, Link::Index, &b.rhs, flags.intersects(ASTFlags::BREAK))?
            }
            Expr::And(xs, _) => Node::And(xs.iter().map(|x| self.expr(x)).collect::<Option<_>>()?),
            Expr::Or(xs, _) => Node::Or(xs.iter().map(|x| self.expr(x)).collect::<Option<_>>()?),
            Expr::Coalesce(xs, _) => Node::Coalesce(xs.iter().map(|x| self.expr(x)).collect::<Option<_>>()?),
            _ => return None,
        })
    }

    /// A method's argument: a character constant as the one-character
    /// string (the methods lowered treat both alike).
    fn arg(&self, e: &Expr) -> Option<Node> {
        match e {
            Expr::CharConstant(c, _) => Some(Node::Const(Value::Str(Arc::from(c.to_string())))),
            other => self.expr(other),
        }
    }

    /// A chain `base op rhs…` as Rhai nests it: the rhs of a `.` or `[`
    /// node is the next step followed by the rest of the chain, unless the
    /// node ends the chain (`BREAK`).
    fn link(&self, base: Node, op: Link, rhs: &Expr, ends: bool) -> Option<Node> {
        if !ends {
            match rhs {
                Expr::Dot(b, flags, _) if !flags.intersects(ASTFlags::NEGATED) => {
                    let step = self.step(base, op, &b.lhs)?;
                    return self.link(step, Link::Dot, &b.rhs, flags.intersects(ASTFlags::BREAK));
                }
                Expr::Index(b, flags, _) if !flags.intersects(ASTFlags::NEGATED) => {
                    let step = self.step(base, op, &b.lhs)?;
                    return self.link(step, Link::Index, &b.rhs, flags.intersects(ASTFlags::BREAK));
                }
                Expr::Dot(..) | Expr::Index(..) => return None,
                _ => {}
            }
        }
        self.step(base, op, rhs)
    }

    fn step(&self, base: Node, op: Link, e: &Expr) -> Option<Node> {
        match (op, e) {
            (Link::Dot, Expr::Property(p, _)) => {
                Some(Node::Property(Box::new(base), Arc::from(p.2.as_str())))
            }
            (Link::Dot, Expr::MethodCall(f, _)) => {
                let method = self.method(f)?;
                let args = f.args.iter().map(|a| self.arg(a)).collect::<Option<_>>()?;
                Some(Node::Call(method, Box::new(base), args))
            }
            (Link::Dot, _) => None,
            (Link::Index, e) => Some(Node::Index(Box::new(base), Box::new(self.expr(e)?))),
        }
    }

    fn method(&self, f: &FnCallExpr) -> Option<Method> {
        if !f.namespace.is_empty() || f.capture_parent_scope || self.own_names.contains(f.name.as_str()) {
            return None;
        }
        Method::of(&f.name)
    }

    /// An operator, or a function called as `m(x, args…)`.
    fn call(&self, f: &FnCallExpr) -> Option<Node> {
        if f.op_token.is_some() {
            return match &f.args[..] {
                [x] => {
                    let op = match f.name.as_str() {
                        "-" => Unary::Neg,
                        "!" => Unary::Not,
                        _ => return None,
                    };
                    Some(Node::Unary(op, Box::new(self.expr(x)?)))
                }
                [a, b] => {
                    Some(Node::Binary(Binary::of(&f.name)?, Box::new(self.expr(a)?), Box::new(self.expr(b)?)))
                }
                _ => None,
            };
        }
        let method = self.method(f)?;
        let (first, rest) = f.args.split_first()?;
        let args = rest.iter().map(|a| self.arg(a)).collect::<Option<_>>()?;
        Some(Node::Call(method, Box::new(self.expr(first)?), args))
    }
}

impl Lowered {
    /// The closure's result for `record` after the `captured` values, or
    /// `None` where only the interpreter can say.
    pub(crate) fn eval(&self, captured: &[Value], record: &Value) -> Option<Value> {
        self.eval_args(captured, std::slice::from_ref(record))
    }

    /// The same for a call with any number of arguments (`delayed`, a
    /// reduction's `|a, b| a + b`).
    pub(crate) fn eval_args(&self, captured: &[Value], args: &[Value]) -> Option<Value> {
        if captured.len() + args.len() != self.params {
            return None;
        }
        eval(&self.body, &Args { captured, args }, 0)
    }
}

struct Args<'a> {
    captured: &'a [Value],
    args: &'a [Value],
}

impl Args<'_> {
    fn get(&self, i: usize) -> Option<&Value> {
        match i.checked_sub(self.captured.len()) {
            None => self.captured.get(i),
            Some(j) => self.args.get(j),
        }
    }
}

/// `n`'s value as part of the closure's result, `depth` array or map
/// literals down: a value handed on from the arguments only if the trip
/// through Rhai would leave it so, and nothing nested deeper than the
/// conversion back allows.
fn eval(n: &Node, a: &Args<'_>, depth: usize) -> Option<Value> {
    match n {
        Node::List(xs) if depth < MAX_DEPTH => {
            Some(Value::list(xs.iter().map(|x| eval(x, a, depth + 1)).collect::<Option<_>>()?))
        }
        Node::Record(fields) if depth < MAX_DEPTH => {
            let mut m = BTreeMap::new();
            for (k, x) in fields {
                m.insert(k.clone(), eval(x, a, depth + 1)?);
            }
            Some(Value::Map(Arc::new(m)))
        }
        Node::List(_) | Node::Record(_) => None,
        Node::Coalesce(xs) => {
            let mut last = Value::Unit;
            for x in xs {
                last = eval(x, a, depth)?;
                if !matches!(last, Value::Unit) {
                    break;
                }
            }
            Some(last)
        }
        // Made here of numbers and strings: at most one level deep.
        Node::Const(_) | Node::Call(..) | Node::Unary(..) | Node::Binary(..) | Node::And(_) | Node::Or(_)
            if depth + 1 < MAX_DEPTH =>
        {
            operand(n, a)
        }
        _ => operand(n, a).filter(|v| plain(v, depth)),
    }
}

/// `n`'s value as an operand: what a method, an operator or a field
/// access reads, not checked as a result (a record's field is read
/// without walking the record).
fn operand(n: &Node, a: &Args<'_>) -> Option<Value> {
    match n {
        Node::Param(i) => a.get(*i).cloned(),
        Node::Const(v) => Some(v.clone()),
        Node::List(_) | Node::Record(_) | Node::Coalesce(_) => eval(n, a, 0),
        Node::Property(x, name) => property(&operand(x, a)?, name),
        Node::Index(x, i) => index(&operand(x, a)?, &operand(i, a)?),
        Node::Call(m, x, args) => {
            let x = operand(x, a)?;
            let args = args.iter().map(|y| operand(y, a)).collect::<Option<Vec<_>>>()?;
            call(*m, &x, &args)
        }
        Node::Unary(op, x) => match (op, operand(x, a)?) {
            (Unary::Neg, Value::Int(i)) => i.checked_neg().map(Value::Int),
            (Unary::Neg, Value::Float(f)) => Some(Value::Float(-f)),
            (Unary::Not, Value::Bool(b)) => Some(Value::Bool(!b)),
            _ => None,
        },
        Node::Binary(op, x, y) => binary(*op, &operand(x, a)?, &operand(y, a)?),
        Node::And(xs) => {
            for x in xs {
                if !as_bool(operand(x, a)?)? {
                    return Some(Value::Bool(false));
                }
            }
            Some(Value::Bool(true))
        }
        Node::Or(xs) => {
            for x in xs {
                if as_bool(operand(x, a)?)? {
                    return Some(Value::Bool(true));
                }
            }
            Some(Value::Bool(false))
        }
    }
}

fn as_bool(v: Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(b),
        _ => None,
    }
}

/// Whether `v`, `depth` levels down in a result, comes back from Rhai as
/// it went in (a 0-d array would come back a number, a kernel map a
/// kernel, and nesting past `MAX_DEPTH` is refused).
fn plain(v: &Value, depth: usize) -> bool {
    match v {
        Value::Unit | Value::Bool(_) | Value::Int(_) | Value::Float(_) | Value::Str(_) | Value::Bytes(_) => {
            depth <= MAX_DEPTH
        }
        Value::List(xs) => depth < MAX_DEPTH && xs.iter().all(|x| plain(x, depth + 1)),
        Value::Map(m) => depth < MAX_DEPTH && !is_kernel(m) && m.values().all(|x| plain(x, depth + 1)),
        Value::Array(_) | Value::Frame(_) | Value::Gpu(_) => false,
    }
}

/// A raw kernel travels as a marked map; in Rhai it is a kernel, not a map.
fn is_kernel(m: &BTreeMap<String, Value>) -> bool {
    m.contains_key(crate::types::RAW_KERNEL_MARK)
}

fn property(x: &Value, name: &str) -> Option<Value> {
    match (x, name) {
        (Value::Map(m), _) if !is_kernel(m) => Some(m.get(name).cloned().unwrap_or_default()),
        (Value::Str(_) | Value::List(_), "len" | "is_empty") => {
            call(if name == "len" { Method::Len } else { Method::IsEmpty }, x, &[])
        }
        _ => None,
    }
}

fn index(x: &Value, i: &Value) -> Option<Value> {
    match (x, i) {
        (Value::Map(m), Value::Str(k)) if !is_kernel(m) => Some(m.get(&**k).cloned().unwrap_or_default()),
        (Value::List(xs), Value::Int(i)) => {
            let n = i64::try_from(xs.len()).ok()?;
            let at = if *i < 0 { i.checked_add(n)? } else { *i };
            xs.get(usize::try_from(at).ok()?).cloned()
        }
        _ => None,
    }
}

fn text(s: &str) -> Value {
    Value::Str(Arc::from(s))
}

fn call(m: Method, x: &Value, args: &[Value]) -> Option<Value> {
    use Value::{Bool, Float, Int, Str};
    Some(match (m, x, args) {
        (Method::Len, Str(s), []) => Int(i64::try_from(s.chars().count()).unwrap_or(i64::MAX)),
        (Method::Len, Value::List(xs), []) => Int(i64::try_from(xs.len()).ok()?),
        (Method::Len, Value::Map(xs), []) if !is_kernel(xs) => Int(i64::try_from(xs.len()).ok()?),
        (Method::IsEmpty, Str(s), []) => Bool(s.is_empty()),
        (Method::IsEmpty, Value::List(xs), []) => Bool(xs.is_empty()),
        (Method::IsEmpty, Value::Map(xs), []) if !is_kernel(xs) => Bool(xs.is_empty()),
        (Method::Split, Str(s), []) => {
            Value::list(if s.is_empty() { vec![x.clone()] } else { s.split_whitespace().map(text).collect() })
        }
        (Method::Split, Str(s), [Str(d)]) => {
            let mut chars = d.chars();
            Value::list(match (chars.next(), chars.next()) {
                // One character: the same pieces, found by a byte search.
                (Some(c), None) if s.contains(c) => s.split(c).map(text).collect(),
                _ if s.is_empty() || (!d.is_empty() && !s.contains(&**d)) => vec![x.clone()],
                _ => s.split(&**d).map(text).collect(),
            })
        }
        (Method::Split, Str(s), [Str(d), Int(n)]) => {
            Value::list(if *n <= 1 || s.is_empty() || (!d.is_empty() && !s.contains(&**d)) {
                vec![x.clone()]
            } else {
                s.splitn(usize::try_from(*n).unwrap_or(usize::MAX), &**d).map(text).collect()
            })
        }
        (Method::ToUpper, Str(s), []) => {
            if s.chars().all(char::is_uppercase) {
                x.clone()
            } else {
                text(&s.to_uppercase())
            }
        }
        (Method::ToLower, Str(s), []) => {
            if s.is_empty() || s.chars().all(char::is_lowercase) {
                x.clone()
            } else {
                text(&s.to_lowercase())
            }
        }
        (Method::Contains, Str(s), [Str(p)]) => Bool(s.contains(&**p)),
        (Method::StartsWith, Str(s), [Str(p)]) => Bool(s.starts_with(&**p)),
        (Method::EndsWith, Str(s), [Str(p)]) => Bool(s.ends_with(&**p)),
        (Method::ParseInt, Str(s), []) => Int(s.trim().parse::<i64>().ok()?),
        (Method::ParseFloat, Str(s), []) => Float(s.trim().parse::<f64>().ok()?),
        (Method::ToInt, Int(i), []) => Int(*i),
        (Method::ToInt, Float(f), []) => {
            if *f > i64::MAX as f64 || *f < i64::MIN as f64 {
                return None;
            }
            Int(f.trunc() as i64)
        }
        (Method::ToFloat, Int(i), []) => Float(*i as f64),
        (Method::ToFloat, Float(f), []) => Float(*f),
        (Method::Abs, Int(i), []) => Int(i.checked_abs()?),
        (Method::Abs, Float(f), []) => Float(f.abs()),
        (Method::Floor, Float(f), []) => Float(f.floor()),
        (Method::Ceiling, Float(f), []) => Float(f.ceil()),
        (Method::Round, Float(f), []) => Float(f.round()),
        _ => return None,
    })
}

fn binary(op: Binary, x: &Value, y: &Value) -> Option<Value> {
    use Value::{Bool, Float, Int, Str, Unit};
    Some(match (x, y) {
        (Int(a), Int(b)) => match op {
            Binary::Add => Int(a.checked_add(*b)?),
            Binary::Sub => Int(a.checked_sub(*b)?),
            Binary::Mul => Int(a.checked_mul(*b)?),
            Binary::Div => Int(a.checked_div(*b)?),
            Binary::Rem => Int(a.checked_rem(*b)?),
            cmp => Bool(compare(cmp, a.cmp(b))),
        },
        (Float(_), Float(_)) | (Int(_), Float(_)) | (Float(_), Int(_)) => {
            let (a, b) = (number(x)?, number(y)?);
            match op {
                Binary::Add => Float(a + b),
                Binary::Sub => Float(a - b),
                Binary::Mul => Float(a * b),
                Binary::Div => Float(a / b),
                Binary::Rem => Float(a % b),
                cmp => Bool(float_compare(cmp, a, b)),
            }
        }
        (Str(a), Str(b)) => match op {
            Binary::Add => Str(Arc::from(format!("{a}{b}"))),
            Binary::Sub | Binary::Mul | Binary::Div | Binary::Rem => return None,
            cmp => Bool(compare(cmp, a.cmp(b))),
        },
        (Bool(a), Bool(b)) => match op {
            Binary::Eq => Bool(a == b),
            Binary::Ne => Bool(a != b),
            _ => return None,
        },
        (Unit, Unit) => match op {
            Binary::Eq => Bool(true),
            Binary::Ne => Bool(false),
            _ => return None,
        },
        _ => return None,
    })
}

/// Rhai's float comparison: equal within a relative epsilon (so `NaN`
/// is neither equal nor unequal to anything).
fn float_compare(op: Binary, x: f64, y: f64) -> bool {
    let max = if x * y == 0.0 { 1.0 } else { x.abs().max(y.abs()) };
    if max == 0.0 {
        return matches!(op, Binary::Eq | Binary::Le | Binary::Ge);
    }
    match op {
        Binary::Eq => (x - y).abs() / max <= f64::EPSILON,
        Binary::Ne => (x - y).abs() / max > f64::EPSILON,
        Binary::Gt => (x - y) / max > f64::EPSILON,
        Binary::Ge => (x - y) / max > -f64::EPSILON,
        Binary::Lt => (y - x) / max > f64::EPSILON,
        Binary::Le => (y - x) / max > -f64::EPSILON,
        _ => false,
    }
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::Float(f) => Some(*f),
        _ => None,
    }
}

fn compare(op: Binary, o: std::cmp::Ordering) -> bool {
    use std::cmp::Ordering::{Equal, Greater, Less};
    match op {
        Binary::Eq => o == Equal,
        Binary::Ne => o != Equal,
        Binary::Lt => o == Less,
        Binary::Le => o != Greater,
        Binary::Gt => o == Greater,
        Binary::Ge => o != Less,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use brisk_engine::Value;
    use rhai::{CallFnOptions, Dynamic, Scope};

    use super::lower;
    use crate::convert::{to_dynamic, to_value};

    fn s(x: &str) -> Value {
        Value::Str(Arc::from(x))
    }

    fn map(fields: &[(&str, Value)]) -> Value {
        Value::Map(Arc::new(
            fields.iter().map(|(k, v)| (k.to_string(), v.clone())).collect::<BTreeMap<_, _>>(),
        ))
    }

    /// Records of every kind the lowered methods meet, and their edges.
    fn records() -> Vec<Value> {
        let mut out = vec![Value::Unit, Value::Bool(true), Value::Bool(false)];
        for i in [0, 1, -1, 2, 7, -7, 100, i64::MAX, i64::MIN, i64::MIN + 1] {
            out.push(Value::Int(i));
        }
        for f in [0.0, -0.0, 1.5, -2.5, 0.5, 1e19, -1e19, f64::NAN, f64::INFINITY, 9.2e18, 3.0] {
            out.push(Value::Float(f));
        }
        for t in [
            "",
            " ",
            "a",
            "a b",
            "a  b ",
            "alpha beta\n",
            " 12 ",
            "-7",
            "1.5",
            "x1",
            "ÄÖü",
            "ǅx",
            "ABC",
            "abc",
            "A b",
            "  ",
            "ab,cd,,e",
            "9223372036854775808",
            "nan",
        ] {
            out.push(s(t));
        }
        out.push(Value::list(vec![]));
        out.push(Value::list(vec![Value::Int(1), s("two"), Value::Float(3.0)]));
        out.push(Value::list(vec![Value::list(vec![Value::Int(5)])]));
        out.push(map(&[]));
        out.push(map(&[("a", Value::Int(3)), ("b", s("x y")), ("len", Value::Int(9))]));
        out.push(map(&[("a", Value::Float(2.5)), ("b", Value::Unit)]));
        out.push(map(&[
            ("a", s("12")),
            ("c", map(&[("d", Value::list(vec![Value::Int(4), Value::Int(5)]))])),
        ]));
        out.push(Value::Bytes(Arc::from(&b"ab"[..])));
        out.push(Value::array(brisk_engine::array::Chunk::scalar(brisk_engine::array::Scalar::Float(2.0))));
        // A raw kernel travels as this marked map; in Rhai it is a kernel.
        let source = "extern \"C\" __global__ void k(float* x) {}";
        out.push(map(&[(crate::types::RAW_KERNEL_MARK, s("k")), ("source", s(source))]));
        out.push(Value::list(vec![out[out.len() - 2].clone()]));
        out
    }

    /// Bodies of one-parameter closures the lowering covers.
    const LOWERED: &[&str] = &[
        "x",
        "x.split(\" \")",
        "x.split()",
        "x.split(\",\")",
        "x.split(',')",
        "x.split(\"\")",
        "x.split(\" \", 2)",
        "x.split(\" \", 0)",
        "x.len()",
        "x.len",
        "len(x)",
        "x.is_empty()",
        "x.is_empty",
        "x.to_upper()",
        "x.to_lower()",
        "x.contains(\"b\")",
        "x.contains('b')",
        "x.starts_with(\"a\")",
        "x.ends_with(\"\\n\")",
        "x.parse_int()",
        "parse_int(x)",
        "parse_float(x)",
        "x.to_int()",
        "x.to_float()",
        "x.abs()",
        "x.floor()",
        "x.ceiling()",
        "x.round()",
        "x + 1",
        "x - 1",
        "x * 2",
        "x / 2",
        "x % 3",
        "x / 0",
        "x % 0",
        "x + 0.5",
        "1 - x",
        "x * x",
        "-x",
        "!x",
        "x == 1",
        "x != 1",
        "x == 1.0",
        "x < 2",
        "x <= 2.5",
        "x > -1",
        "x >= 0",
        "x == \"a\"",
        "x < \"b\"",
        "x + \"!\"",
        "x == true",
        "x == ()",
        "x > 0 && x < 10",
        "x < 0 || x > 10",
        "x ?? 5",
        "x.a",
        "x.b",
        "x.len",
        "x.zz",
        "x[\"a\"]",
        "x[\"a\"] + 1",
        "x.a * 2 > 5",
        "x.b.split(\" \")",
        "x.c.d[1]",
        "x.c.d[-1]",
        "x.c.d[5]",
        "x[0]",
        "x[-1]",
        "x[0][0]",
        "x[0].len()",
        "x.b.len()",
        "#{n: x, m: x.a}",
        "[x, 1, \"s\"]",
        "(x + 1) * 2",
        "{ x.a }",
        "x.split(\" \").len()",
        "return x.a;",
        "[x[0]]",
        "#{k: x.c}",
        "x.to_upper().split()",
    ];

    fn rhai_call(engine: &rhai::Engine, ast: &rhai::AST, args: Vec<Dynamic>) -> Result<Value, String> {
        let options = CallFnOptions::new().eval_ast(false).rewind_scope(true);
        engine
            .call_fn_with_options::<Dynamic>(options, &mut Scope::new(), ast, "f", args)
            .map_err(|e| e.to_string())
            .and_then(|d| to_value(&d, "result").map_err(|e| e.to_string()))
    }

    fn same(a: &Value, b: &Value) -> bool {
        match (a, b) {
            (Value::Float(x), Value::Float(y)) => x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
            (Value::List(x), Value::List(y)) => {
                x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| same(p, q))
            }
            (Value::Map(x), Value::Map(y)) => {
                x.len() == y.len() && x.iter().zip(y.iter()).all(|((k, p), (l, q))| k == l && same(p, q))
            }
            _ => a == b,
        }
    }

    /// Every lowered body answers as Rhai does on every record, or leaves
    /// the record to Rhai; and it answers for most of them.
    #[test]
    fn lowered_bodies_agree_with_rhai() {
        crate::ship::init();
        let engine = crate::api::worker_engine();
        let records = records();
        let mut answered = 0;
        for body in LOWERED {
            let ast = engine.compile(format!("fn f(x) {{ {body} }}")).expect("compiles");
            let lowered = lower(&ast, "f", 1).unwrap_or_else(|| panic!("`{body}` is not lowered"));
            for r in &records {
                let Some(native) = lowered.eval(&[], r) else { continue };
                answered += 1;
                match rhai_call(&engine, &ast, vec![to_dynamic(r)]) {
                    Ok(v) => assert!(same(&native, &v), "`{body}` on {r:?}: native {native:?}, Rhai {v:?}"),
                    Err(e) => panic!("`{body}` on {r:?}: native {native:?}, Rhai fails: {e}"),
                }
            }
        }
        // Not a test that always passes by answering nothing.
        assert!(answered > LOWERED.len() * 8, "only {answered} answers");
    }

    #[test]
    fn captured_values_come_first() {
        crate::ship::init();
        let engine = crate::api::worker_engine();
        let ast = engine.compile("fn f(sep, n, x) { x.split(sep).len() + n }").expect("compiles");
        let lowered = lower(&ast, "f", 3).expect("lowered");
        let got = lowered.eval(&[s(","), Value::Int(10)], &s("a,b,c"));
        assert_eq!(got, Some(Value::Int(13)));
        assert_eq!(lowered.eval(&[s(",")], &s("a")), None, "a wrong count of arguments is left to Rhai");
    }

    /// A call of several arguments (`delayed(add)`), and one whose count
    /// does not match, left to Rhai.
    #[test]
    fn calls_of_several_arguments() {
        crate::ship::init();
        let engine = crate::api::worker_engine();
        let ast = engine.compile("fn add(a, b) { a + b }").expect("compiles");
        let lowered = lower(&ast, "add", 2).expect("lowered");
        assert_eq!(lowered.eval_args(&[], &[Value::Int(2), Value::Int(3)]), Some(Value::Int(5)));
        assert_eq!(lowered.eval_args(&[Value::Int(2)], &[Value::Int(3)]), Some(Value::Int(5)));
        assert_eq!(lowered.eval_args(&[], &[Value::Int(2)]), None);
        assert_eq!(
            lowered.eval_args(&[], &[Value::Int(i64::MAX), Value::Int(1)]),
            None,
            "overflow: Rhai's error"
        );
    }

    /// A result nested deeper than the conversion back allows is Rhai's
    /// to refuse.
    #[test]
    fn results_nested_too_deep_are_left_to_rhai() {
        crate::ship::init();
        let engine = crate::api::worker_engine();
        let ast = engine.compile("fn f(x) { [x] }").expect("compiles");
        let lowered = lower(&ast, "f", 1).expect("lowered");
        let mut deep = Value::Int(1);
        for _ in 0..crate::convert::MAX_DEPTH {
            deep = Value::list(vec![deep]);
        }
        assert!(rhai_call(&engine, &ast, vec![to_dynamic(&deep)]).is_err());
        assert_eq!(lowered.eval(&[], &deep), None);
        let shallow = Value::list(vec![Value::Int(1)]);
        assert_eq!(lowered.eval(&[], &shallow), Some(Value::list(vec![shallow.clone()])));
    }

    /// The closure is found among the session's others, here inside the
    /// closure that makes it.
    #[test]
    fn a_closure_among_others() {
        crate::ship::init();
        let engine = crate::api::worker_engine();
        let src = "let b = 1; let time = |f| f.call(); time.call(|| b.map(|l| l.split(\" \")))";
        let ast = engine.compile(src).expect("compiles");
        let lowered: Vec<_> =
            ast.iter_fn_def().filter_map(|f| lower(&ast, &f.name, f.params.len())).collect();
        assert_eq!(lowered.len(), 1, "only `|l| l.split(\" \")` is lowered");
        let words = lowered[0].eval(&[], &s("a b"));
        assert_eq!(words, Some(Value::list(vec![s("a"), s("b")])));
    }

    #[test]
    fn what_is_not_lowered() {
        crate::ship::init();
        let engine = crate::api::worker_engine();
        for src in [
            "fn f(x) { let y = x; y }",
            "fn f(x) { x.trim() }",
            "fn f(x) { print(x) }",
            "fn f(x) { `${x}` }",
            "fn f(x) { x?.a }",
            "fn f(x) { x ** 2 }",
            "fn f(x) { if x > 1 { 1 } else { 2 } }",
            "fn f(x) { throw x; }",
            "fn f(x) { 'c' }",
            "fn f(x) { x.to_string() }",
            // `return` inside an expression ends the function.
            "fn f(x) { (x.a ?? return 0) + 1 }",
            "fn f(x) { x * { return 2 } }",
            // The session's own `len` is called, not the built-in one.
            "fn len(x) { 0 } fn f(x) { x.len() }",
        ] {
            let ast = engine.compile(src).expect("compiles");
            assert!(lower(&ast, "f", 1).is_none(), "`{src}` should stay with Rhai");
        }
        let ast = engine.compile("fn f(x) { x }").expect("compiles");
        assert!(lower(&ast, "f", 2).is_none() && lower(&ast, "g", 1).is_none());
    }
}
