//! Users' own GPU code, CuPy's way. `elementwise_kernel` and
//! `reduction_kernel` are C++ snippets over named, typed parameters
//! (`"float64 x, T y"`); they become `__device__` functions (`UserFn`)
//! that the generated kernels call, so a user's kernel fuses into the
//! elementwise chain around it and a reduction folds with the same tuned
//! kernels as `sum`. `raw_kernel` is a whole CUDA source launched per
//! block (`raw.rs`). Parsing and type binding need no GPU: a bad parameter
//! list is refused where the kernel is defined, NVRTC's errors come at the
//! first run, with line numbers counted in the user's own snippet
//! (`#line`).

use std::fmt::Write;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::ctype::ctype;
use crate::array::dtype::{DType, Scalar};
use crate::array::error::ArrayError;

/// A parameter's type: fixed, or a placeholder (`T`) that the arguments
/// bind, as CuPy's type placeholders.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum PType {
    Fixed(DType),
    Var(String),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Param {
    pub name: String,
    pub ty: PType,
}

/// Types CuPy knows that brisk arrays do not hold: named in the refusal,
/// rather than taken for placeholders.
const UNSUPPORTED: &[&str] = &[
    "int8",
    "int16",
    "int32",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "complex64",
    "complex128",
    "int",
    "float",
    "double",
    "long",
    "char",
    "short",
    "unsigned",
    "half",
];

/// Names the generated code uses itself.
const RESERVED: &[&str] = &[
    "i",
    "_ind",
    "_in_ind",
    "_out_ind",
    "auto",
    "bool",
    "break",
    "case",
    "char",
    "const",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "extern",
    "float",
    "for",
    "goto",
    "if",
    "int",
    "long",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "typedef",
    "union",
    "unsigned",
    "void",
    "volatile",
    "while",
    "true",
    "false",
    "this",
    "new",
    "delete",
    "class",
    "template",
    "typename",
    "namespace",
    "using",
    "operator",
];

fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|f| f == '_' || f.is_ascii_alphabetic())
        && c.all(|x| x == '_' || x.is_ascii_alphanumeric())
}

/// The name of a kernel: a C identifier (it names the generated code and
/// the cached file).
pub fn check_name(what: &str, name: &str) -> Result<(), ArrayError> {
    if !is_ident(name) || name.starts_with("__") {
        return Err(ArrayError::Value(format!(
            "{what}: the kernel name {name:?} must be a C identifier (letters, digits, _; not starting with a digit or __)"
        )));
    }
    Ok(())
}

fn dtype_of(ty: &str) -> Option<DType> {
    Some(match ty {
        "bool" => DType::Bool,
        "int64" | "i64" => DType::I64,
        "float32" | "f32" => DType::F32,
        "float64" | "f64" => DType::F64,
        _ => return None,
    })
}

/// `"float64 x, T y"` into parameters.
pub fn parse_params(what: &str, list: &str) -> Result<Vec<Param>, ArrayError> {
    let bad = |m: String| ArrayError::Value(format!("{what}: {m}"));
    let mut out: Vec<Param> = Vec::new();
    if list.trim().is_empty() {
        return Ok(out);
    }
    for item in list.split(',') {
        let words: Vec<&str> = item.split_whitespace().collect();
        let (ty, name) = match words.as_slice() {
            [ty, name] => (*ty, *name),
            ["raw", ..] => {
                return Err(bad(format!(
                    "raw parameters ({:?}) are not supported here: a raw_kernel sees whole blocks",
                    item.trim()
                )));
            }
            _ => return Err(bad(format!("{:?} is not \"type name\"", item.trim()))),
        };
        if !is_ident(name) || RESERVED.contains(&name) || name.starts_with("__") {
            return Err(bad(format!("{name:?} cannot name a parameter")));
        }
        if out.iter().any(|p| p.name == name) {
            return Err(bad(format!("the parameter {name} is named twice")));
        }
        let ty = match dtype_of(ty) {
            Some(t) => PType::Fixed(t),
            None if UNSUPPORTED.contains(&ty) => {
                return Err(bad(format!(
                    "brisk arrays hold bool, int64, float32 and float64; {ty} is not one of them"
                )));
            }
            None if is_ident(ty) && !RESERVED.contains(&ty) => PType::Var(ty.to_string()),
            None => return Err(bad(format!("{ty:?} is not a type"))),
        };
        out.push(Param { name: name.to_string(), ty });
    }
    Ok(out)
}

/// A snippet compiled into the generated kernels: a `__device__` function
/// of its parameters (each argument cast to its type) giving `out`, with
/// every type placeholder bound. `label` names it in NVRTC's messages.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UserFn {
    pub label: String,
    pub params: Vec<(String, DType)>,
    pub out: (String, DType),
    pub typedefs: Vec<(String, DType)>,
    /// Statements, or one expression when `expr` (then its value is `out`).
    pub body: String,
    pub expr: bool,
    /// `_in_ind.size()` and `_out_ind.size()` are the two last parameters
    /// (a reduction's `post_map_expr`).
    pub sizes: bool,
}

/// The user's text, its lines counted from 1 under `label` in NVRTC's log.
fn user_text(label: &str, text: &str) -> String {
    let label = label.replace(['"', '\\'], "_");
    format!("\n#line 1 \"{label}\"\n{text}\n#line 1 \"brisk-generated\"\n")
}

/// `typedef` lines binding placeholders in a generated function.
pub fn typedefs(defs: &[(String, DType)]) -> String {
    defs.iter().map(|(n, t)| format!("  typedef {} {n};\n", ctype(*t))).collect()
}

impl UserFn {
    /// Its definition under the C name `fname`.
    pub fn definition(&self, fname: &str) -> String {
        let ret = ctype(self.out.1);
        let params: Vec<String> = self.params.iter().map(|(n, t)| format!("{} {n}", ctype(*t))).collect();
        let mut s = format!("__device__ __forceinline__ {ret} {fname}({}) {{\n", params.join(", "));
        s.push_str(&typedefs(&self.typedefs));
        if self.sizes
            && let [.., (a, _), (b, _)] = self.params.as_slice()
        {
            let _ = writeln!(
                s,
                "  struct brisk_ind {{ long long n; __device__ long long size() const {{ return n; }} }};\n  brisk_ind _in_ind{{{a}}}, _out_ind{{{b}}};"
            );
        }
        let (out, t) = (&self.out.0, ctype(self.out.1));
        if self.expr {
            let _ = writeln!(s, "  {t} {out} = ({t})({});", user_text(&self.label, &self.body));
        } else {
            let _ = write!(s, "  {t} {out} = ({t})0;\n{};\n", user_text(&self.label, &self.body));
        }
        let _ = writeln!(s, "  return {out};\n}}");
        s
    }
}

/// What a kernel's argument is, for binding its types.
#[derive(Clone, Copy, Debug)]
pub enum ArgType {
    Array(DType),
    Scalar(Scalar),
}

fn kind(t: DType) -> u8 {
    match t {
        DType::Bool => 0,
        DType::I64 => 1,
        DType::F32 | DType::F64 => 2,
    }
}

/// Bind the placeholders of `params` from `args` (CuPy's rule: every array
/// given for one placeholder has the same type; numbers adapt), and check
/// each argument casts to its parameter's type without changing kind for
/// the worse (a float array is not passed as int64).
fn bind(what: &str, params: &[Param], args: &[ArgType]) -> Result<Vec<(String, DType)>, ArrayError> {
    let bad = |m: String| ArrayError::Value(format!("{what}: {m}"));
    if params.len() != args.len() {
        return Err(bad(format!("takes {} argument(s), got {}", params.len(), args.len())));
    }
    let mut vars: Vec<(String, DType)> = Vec::new();
    for (p, a) in params.iter().zip(args) {
        if let (PType::Var(v), ArgType::Array(t)) = (&p.ty, a) {
            match vars.iter().find(|(n, _)| n == v) {
                Some((_, bound)) if bound != t => {
                    return Err(bad(format!(
                        "{v} is {bound} from an earlier argument, but {} is {t}",
                        p.name
                    )));
                }
                Some(_) => {}
                None => vars.push((v.clone(), *t)),
            }
        }
    }
    // Placeholders given only numbers take the numbers' types.
    for (p, a) in params.iter().zip(args) {
        if let (PType::Var(v), ArgType::Scalar(s)) = (&p.ty, a)
            && !vars.iter().any(|(n, _)| n == v)
        {
            let t = match s {
                Scalar::Bool(_) => DType::Bool,
                Scalar::Int(_) => DType::I64,
                Scalar::Float(_) => DType::F64,
            };
            vars.push((v.clone(), t));
        }
    }
    for (p, a) in params.iter().zip(args) {
        let to = resolve(&p.ty, &vars).ok_or_else(|| bad(format!("{} has no type", p.name)))?;
        let from_kind = match a {
            ArgType::Array(t) => kind(*t),
            ArgType::Scalar(Scalar::Bool(_)) => 0,
            ArgType::Scalar(Scalar::Int(_)) => 1,
            ArgType::Scalar(Scalar::Float(_)) => 2,
        };
        if from_kind > kind(to) {
            let from = match a {
                ArgType::Array(t) => format!("a {t} array"),
                ArgType::Scalar(s) => format!("the number {s}"),
            };
            return Err(bad(format!("{} is {to}: {from} cannot be passed as {to}", p.name)));
        }
    }
    Ok(vars)
}

fn resolve(ty: &PType, vars: &[(String, DType)]) -> Option<DType> {
    match ty {
        PType::Fixed(t) => Some(*t),
        PType::Var(v) => vars.iter().find(|(n, _)| n == v).map(|(_, t)| *t),
    }
}

fn one_output(what: &str, outs: Vec<Param>) -> Result<Param, ArrayError> {
    let mut outs = outs;
    match outs.len() {
        1 => Ok(outs.remove(0)),
        0 => Err(ArrayError::Value(format!("{what}: one output parameter is needed"))),
        n => Err(ArrayError::Value(format!(
            "{what}: one output parameter is supported, got {n}; write one kernel per output"
        ))),
    }
}

/// `elementwise_kernel(in_params, out_params, body, name)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ElementwiseSpec {
    pub name: String,
    pub inputs: Vec<Param>,
    pub output: Param,
    pub body: String,
}

impl ElementwiseSpec {
    pub fn new(in_params: &str, out_params: &str, body: &str, name: &str) -> Result<Self, ArrayError> {
        let what = "elementwise_kernel";
        check_name(what, name)?;
        let what = format!("elementwise_kernel {name}");
        let inputs = parse_params(&what, in_params)?;
        if inputs.is_empty() {
            return Err(ArrayError::Value(format!("{what}: at least one input parameter is needed")));
        }
        let output = one_output(&what, parse_params(&what, out_params)?)?;
        if inputs.iter().any(|p| p.name == output.name) {
            return Err(ArrayError::Value(format!(
                "{what}: {} is both an input and the output",
                output.name
            )));
        }
        check_out_type(&what, &output, &inputs)?;
        if body.trim().is_empty() {
            return Err(ArrayError::Value(format!("{what}: the body is empty")));
        }
        Ok(ElementwiseSpec { name: name.into(), inputs, output, body: body.into() })
    }

    /// The function for these arguments, and its result type.
    pub fn bind(&self, args: &[ArgType]) -> Result<Arc<UserFn>, ArrayError> {
        let what = format!("elementwise_kernel {}", self.name);
        let vars = bind(&what, &self.inputs, args)?;
        let params = concrete(&self.inputs, &vars)?;
        let out = resolve(&self.output.ty, &vars)
            .ok_or_else(|| ArrayError::Value(format!("{what}: the output's type is not bound")))?;
        Ok(Arc::new(UserFn {
            label: self.name.clone(),
            params,
            out: (self.output.name.clone(), out),
            typedefs: vars,
            body: self.body.clone(),
            expr: false,
            sizes: false,
        }))
    }
}

fn concrete(params: &[Param], vars: &[(String, DType)]) -> Result<Vec<(String, DType)>, ArrayError> {
    params
        .iter()
        .map(|p| {
            resolve(&p.ty, vars)
                .map(|t| (p.name.clone(), t))
                .ok_or_else(|| ArrayError::Value(format!("{} has no type", p.name)))
        })
        .collect()
}

/// An output placeholder must come from an input.
fn check_out_type(what: &str, out: &Param, inputs: &[Param]) -> Result<(), ArrayError> {
    if let PType::Var(v) = &out.ty
        && !inputs.iter().any(|p| p.ty == out.ty)
    {
        return Err(ArrayError::Value(format!(
            "{what}: the output's type {v} is not the type of any input, so nothing binds it"
        )));
    }
    Ok(())
}

/// `reduce_expr` over `a` and `b` with its identity, in the accumulator's
/// type: the fold of a user's reduction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UserFold {
    pub label: String,
    pub acc: DType,
    pub typedefs: Vec<(String, DType)>,
    pub reduce_expr: String,
    pub identity: String,
}

impl UserFold {
    /// `comb(a, b)`, as the reduction kernels call it.
    pub fn comb(&self) -> String {
        let t = ctype(self.acc);
        format!(
            "__device__ __forceinline__ {t} comb({t} a, {t} b) {{\n{}  return ({t})({});\n}}\n",
            typedefs(&self.typedefs),
            user_text(&format!("{}: reduce_expr", self.label), &self.reduce_expr)
        )
    }

    /// The identity as an expression of the accumulator's type.
    pub fn identity_expr(&self) -> String {
        format!(
            "(({})({}))",
            ctype(self.acc),
            user_text(&format!("{}: identity", self.label), &self.identity)
        )
    }

    /// `reduce_expr` as a function of two arguments, for merging partials.
    pub fn merge_fn(&self) -> Arc<UserFn> {
        Arc::new(UserFn {
            label: format!("{}: reduce_expr", self.label),
            params: vec![("a".into(), self.acc), ("b".into(), self.acc)],
            out: ("brisk_r".into(), self.acc),
            typedefs: self.typedefs.clone(),
            body: self.reduce_expr.clone(),
            expr: true,
            sizes: false,
        })
    }
}

/// `reduction_kernel(in_params, out_params, map_expr, reduce_expr,
/// post_map_expr, identity, name)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReductionSpec {
    pub name: String,
    pub inputs: Vec<Param>,
    pub output: Param,
    pub map_expr: String,
    pub reduce_expr: String,
    pub post_map_expr: String,
    pub identity: String,
    /// The accumulator's type; the output's when not given (CuPy's default).
    pub reduce_type: Option<PType>,
}

/// A user's reduction with its types bound: the map (an elementwise
/// function of the inputs), the fold, and the post map.
#[derive(Clone, Debug)]
pub struct BoundReduction {
    pub map: Arc<UserFn>,
    pub fold: Arc<UserFold>,
    pub post: Arc<UserFn>,
}

impl ReductionSpec {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        in_params: &str,
        out_params: &str,
        map_expr: &str,
        reduce_expr: &str,
        post_map_expr: &str,
        identity: &str,
        name: &str,
        reduce_type: Option<&str>,
    ) -> Result<Self, ArrayError> {
        check_name("reduction_kernel", name)?;
        let what = format!("reduction_kernel {name}");
        let inputs = parse_params(&what, in_params)?;
        if inputs.is_empty() {
            return Err(ArrayError::Value(format!("{what}: at least one input parameter is needed")));
        }
        let output = one_output(&what, parse_params(&what, out_params)?)?;
        if output.name == "a" || output.name == "b" || inputs.iter().any(|p| p.name == output.name) {
            return Err(ArrayError::Value(format!(
                "{what}: the output cannot be named {} (a and b are reduce_expr's operands)",
                output.name
            )));
        }
        check_out_type(&what, &output, &inputs)?;
        let reduce_type = match reduce_type {
            None => None,
            Some(t) => {
                let p = parse_params(&what, &format!("{t} brisk_acc"))?;
                let ty = p.into_iter().next().map(|p| p.ty);
                if let Some(PType::Var(v)) = &ty
                    && !inputs.iter().any(|p| p.ty == PType::Var(v.clone()))
                {
                    return Err(ArrayError::Value(format!(
                        "{what}: reduce_type {v} is not bound by an input"
                    )));
                }
                ty
            }
        };
        for (field, text) in [("map_expr", map_expr), ("reduce_expr", reduce_expr), ("identity", identity)] {
            if text.trim().is_empty() {
                return Err(ArrayError::Value(format!("{what}: {field} is empty")));
            }
        }
        Ok(ReductionSpec {
            name: name.into(),
            inputs,
            output,
            map_expr: map_expr.into(),
            reduce_expr: reduce_expr.into(),
            post_map_expr: post_map_expr.into(),
            identity: identity.into(),
            reduce_type,
        })
    }

    pub fn bind(&self, args: &[ArgType]) -> Result<BoundReduction, ArrayError> {
        let what = format!("reduction_kernel {}", self.name);
        let vars = bind(&what, &self.inputs, args)?;
        let out = resolve(&self.output.ty, &vars)
            .ok_or_else(|| ArrayError::Value(format!("{what}: the output's type is not bound")))?;
        let acc = match &self.reduce_type {
            None => out,
            Some(t) => resolve(t, &vars)
                .ok_or_else(|| ArrayError::Value(format!("{what}: reduce_type is not bound")))?,
        };
        let map = Arc::new(UserFn {
            label: format!("{}: map_expr", self.name),
            params: concrete(&self.inputs, &vars)?,
            out: ("brisk_m".into(), acc),
            typedefs: vars.clone(),
            body: self.map_expr.clone(),
            expr: true,
            sizes: false,
        });
        let fold = Arc::new(UserFold {
            label: self.name.clone(),
            acc,
            typedefs: vars.clone(),
            reduce_expr: self.reduce_expr.clone(),
            identity: self.identity.clone(),
        });
        // An empty post map passes the accumulator on, cast.
        let (body, expr) = if self.post_map_expr.trim().is_empty() {
            ("a".to_string(), true)
        } else {
            (self.post_map_expr.clone(), false)
        };
        let post = Arc::new(UserFn {
            label: format!("{}: post_map_expr", self.name),
            params: vec![
                ("a".into(), acc),
                ("brisk_in_n".into(), DType::I64),
                ("brisk_out_n".into(), DType::I64),
            ],
            out: (self.output.name.clone(), out),
            typedefs: vars,
            body,
            expr,
            sizes: true,
        });
        Ok(BoundReduction { map, fold, post })
    }
}

/// `raw_kernel(source, name)`: a whole CUDA source with an `extern "C"
/// __global__` function of that name.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RawSpec {
    pub name: String,
    pub source: String,
}

impl RawSpec {
    pub fn new(source: &str, name: &str) -> Result<Self, ArrayError> {
        check_name("raw_kernel", name)?;
        let words = source.split(|c: char| !(c == '_' || c.is_ascii_alphanumeric()));
        if !words.into_iter().any(|w| w == name) {
            return Err(ArrayError::Value(format!(
                "raw_kernel: the source has no kernel named {name} (declare it extern \"C\" __global__ void {name}(...))"
            )));
        }
        Ok(RawSpec { name: name.into(), source: source.into() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_parse_and_bad_ones_are_named() {
        let p = parse_params("k", "float64 x, T y,int64 n").expect("accepted");
        assert_eq!(p.len(), 3);
        assert_eq!(p[1], Param { name: "y".into(), ty: PType::Var("T".into()) });
        let e = |s: &str| parse_params("k", s).expect_err("refused").to_string();
        assert!(e("int32 x").contains("int32 is not one of them"), "{}", e("int32 x"));
        assert!(e("raw T x").contains("raw parameters"));
        assert!(e("float64 x, float64 x").contains("named twice"));
        assert!(e("float64").contains("is not \"type name\""));
        assert!(e("float64 i").contains("cannot name a parameter"));
        assert!(e("float64 3x").contains("cannot name a parameter"));
    }

    #[test]
    fn placeholders_bind_from_arrays_and_casts_keep_their_kind() {
        let k = ElementwiseSpec::new("T x, T y, float64 s", "T z", "z = x * y + s", "fma").expect("accepted");
        let f = k.bind(&[
            ArgType::Array(DType::F32),
            ArgType::Array(DType::F32),
            ArgType::Scalar(Scalar::Int(2)),
        ]);
        let f = f.expect("accepted");
        assert_eq!(f.out, ("z".into(), DType::F32));
        assert_eq!(f.params[2], ("s".into(), DType::F64));
        let mixed = k.bind(&[
            ArgType::Array(DType::F32),
            ArgType::Array(DType::F64),
            ArgType::Scalar(Scalar::Int(2)),
        ]);
        assert!(
            mixed
                .expect_err("refused")
                .to_string()
                .contains("T is f32 from an earlier argument, but y is f64")
        );
        let i = ElementwiseSpec::new("int64 n", "int64 m", "m = n + 1", "inc").expect("accepted");
        let e = i.bind(&[ArgType::Array(DType::F64)]).expect_err("refused").to_string();
        assert!(e.contains("a f64 array cannot be passed as i64"), "{e}");
        assert!(i.bind(&[ArgType::Array(DType::Bool)]).is_ok());
        assert!(i.bind(&[]).expect_err("refused").to_string().contains("takes 1 argument(s), got 0"));
        let unbound =
            ElementwiseSpec::new("float64 x", "U y", "y = x", "u").expect_err("refused").to_string();
        assert!(unbound.contains("nothing binds it"), "{unbound}");
        assert!(ElementwiseSpec::new("float64 x", "float64 y", "y = x", "9a").is_err());
        assert!(ElementwiseSpec::new("float64 x", "float64 y, float64 z", "y = x", "two").is_err());
    }

    #[test]
    fn generated_functions_count_lines_in_the_users_text() {
        let k = ElementwiseSpec::new("float64 x", "float64 z", "z = x * 2.0", "twice").expect("accepted");
        let src = k.bind(&[ArgType::Array(DType::F64)]).expect("accepted").definition("uk0");
        assert!(src.contains("#line 1 \"twice\"\nz = x * 2.0\n"), "{src}");
        assert!(src.contains("__device__ __forceinline__ double uk0(double x)"), "{src}");
        let r = ReductionSpec::new("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "l2", None)
            .expect("accepted");
        let b = r.bind(&[ArgType::Array(DType::F32)]).expect("accepted");
        assert_eq!(b.fold.acc, DType::F32);
        assert!(b.fold.comb().contains("typedef float T;"));
        assert!(b.post.definition("p").contains("_in_ind{brisk_in_n}"));
        let e = ReductionSpec::new("T x", "T a", "x", "a + b", "", "0", "r", None).expect_err("refused");
        assert!(e.to_string().contains("cannot be named a"));
    }

    #[test]
    fn a_malformed_function_read_from_a_peer_gives_source_not_a_panic() {
        let f = UserFn {
            label: "x".into(),
            params: vec![],
            out: ("y".into(), DType::F64),
            typedefs: vec![],
            body: "y = 1".into(),
            expr: false,
            sizes: true,
        };
        assert!(f.definition("uk0").contains("double uk0()"));
    }
}
