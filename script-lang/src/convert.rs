//! Conversions between Rhai values and engine values. Everything a task can
//! return or capture must become an engine `Value` (it may travel to another
//! process); a value that cannot (a function pointer, a lazy collection) is
//! refused with a clear error naming its type.

use std::collections::BTreeMap;
use std::sync::Arc;

use brisk_engine::Value;
use brisk_engine::array::{Chunk, Scalar};
use rhai::{Array, Blob, Dynamic, ImmutableString, Map};

/// How deeply arrays and maps may nest in a value that travels: deeper
/// values would overflow the stack of whoever walks them.
pub const MAX_DEPTH: usize = 128;

/// Why a script value cannot become an engine value (and so cannot travel
/// to a worker). `what` names the value ("captured variable k").
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ConvertError {
    /// Nested deeper than `MAX_DEPTH`.
    #[error("{what} nests arrays or maps more than {MAX_DEPTH} levels deep")]
    TooDeep { what: String },
    /// A function, a lazy value, a future or another value with no engine form.
    #[error(
        "{what} is a value of type {type_name} that cannot be sent to a worker (compute it first, or pass plain numbers, strings, arrays and maps)"
    )]
    CannotTravel { what: String, type_name: String },
    /// A `Lock`, `Queue`… object: tasks make their own by name.
    #[error(
        "{what} is a {type_name}, which cannot be sent to a worker: make it by name inside the closure ({type_name}(\"name\")), where it is the same {type_name}"
    )]
    ByName { what: String, type_name: String },
    /// A shared value that another holder has locked.
    #[error("{what}: {kind} is locked")]
    Locked { what: String, kind: &'static str },
}

impl From<ConvertError> for Box<rhai::EvalAltResult> {
    fn from(e: ConvertError) -> Self {
        crate::error::runtime(e.to_string())
    }
}

impl From<ConvertError> for brisk_engine::TaskError {
    fn from(e: ConvertError) -> Self {
        brisk_engine::TaskError::user(e.to_string())
    }
}

/// Rhai → engine. `what` names the value in the error ("captured variable k").
pub fn to_value(d: &Dynamic, what: &str) -> Result<Value, ConvertError> {
    to_value_at(d, what, 0)
}

fn to_value_at(d: &Dynamic, what: &str, depth: usize) -> Result<Value, ConvertError> {
    if depth > MAX_DEPTH {
        return Err(ConvertError::TooDeep { what: what.to_string() });
    }
    if d.is_shared() {
        let inner = d.flatten_clone();
        return to_value_at(&inner, what, depth);
    }
    if d.is_unit() {
        return Ok(Value::Unit);
    }
    // Type tests that never clone (cloning a Dynamic array copies it), by
    // the value's tag: a failed `as_int` would format its type's name,
    // which costs more than the conversion of a short string.
    if d.is_string()
        && let Some(s) = d.read_lock::<ImmutableString>()
    {
        return Ok(Value::Str(Arc::from(s.as_str())));
    }
    if d.is_int()
        && let Ok(i) = d.as_int()
    {
        return Ok(Value::Int(i));
    }
    if d.is_float()
        && let Ok(f) = d.as_float()
    {
        return Ok(Value::Float(f));
    }
    if d.is_bool()
        && let Ok(b) = d.as_bool()
    {
        return Ok(Value::Bool(b));
    }
    if d.is_char()
        && let Ok(c) = d.as_char()
    {
        return Ok(Value::Str(Arc::from(c.to_string())));
    }
    if d.is_array() {
        let a = d
            .read_lock::<Array>()
            .ok_or_else(|| ConvertError::Locked { what: what.into(), kind: "array" })?;
        let items = a.iter().map(|x| to_value_at(x, what, depth + 1)).collect::<Result<Vec<_>, _>>()?;
        return Ok(Value::list(items));
    }
    if d.is_map() {
        let m =
            d.read_lock::<Map>().ok_or_else(|| ConvertError::Locked { what: what.into(), kind: "map" })?;
        let mut out = BTreeMap::new();
        for (k, v) in m.iter() {
            out.insert(k.to_string(), to_value_at(v, what, depth + 1)?);
        }
        return Ok(Value::Map(Arc::new(out)));
    }
    if let Some(c) = d.read_lock::<Chunk>() {
        return Ok(Value::array(c.clone()));
    }
    if let Some(f) = d.read_lock::<crate::types::LocalFrame>() {
        return Ok(Value::Frame(f.0.clone()));
    }
    if let Some(f) = d.read_lock::<crate::types::LocalSeries>() {
        // A local Series travels (and prints as JSON) as its values.
        let name = f.0.column_names().into_iter().next().unwrap_or_default();
        return Ok(Value::list(brisk_engine::value::column_values(&f.0.0, &name)));
    }
    if let Some(k) = d.read_lock::<crate::types::RawKernel>() {
        let mut m = BTreeMap::new();
        m.insert(crate::types::RAW_KERNEL_MARK.to_string(), Value::Str(Arc::from(k.0.name.as_str())));
        m.insert("source".to_string(), Value::Str(Arc::from(k.0.source.as_str())));
        return Ok(Value::Map(Arc::new(m)));
    }
    if d.is_blob() {
        let b =
            d.read_lock::<Blob>().ok_or_else(|| ConvertError::Locked { what: what.into(), kind: "blob" })?;
        return Ok(Value::Bytes(Arc::from(b.as_slice())));
    }
    let type_name = crate::types::type_name(d);
    if ["Variable", "Queue", "Lock", "Event", "Semaphore"].contains(&type_name.as_str()) {
        return Err(ConvertError::ByName { what: what.to_string(), type_name });
    }
    Err(ConvertError::CannotTravel { what: what.to_string(), type_name })
}

/// Engine → Rhai.
pub fn to_dynamic(v: &Value) -> Dynamic {
    match v {
        Value::Unit => Dynamic::UNIT,
        Value::Bool(b) => Dynamic::from_bool(*b),
        Value::Int(i) => Dynamic::from_int(*i),
        Value::Float(f) => Dynamic::from_float(*f),
        Value::Str(s) => Dynamic::from(ImmutableString::from(&**s)),
        Value::Bytes(b) => Dynamic::from_blob(b.to_vec()),
        Value::List(items) => Dynamic::from_array(items.iter().map(to_dynamic).collect()),
        Value::Map(m)
            if m.len() == 2
                && let (Some(Value::Str(name)), Some(Value::Str(source))) =
                    (m.get(crate::types::RAW_KERNEL_MARK), m.get("source"))
                && let Ok(spec) = brisk_engine::array::gpu::user::RawSpec::new(source, name) =>
        {
            Dynamic::from(crate::types::RawKernel(Arc::new(spec)))
        }
        Value::Map(m) => {
            let mut out = Map::new();
            for (k, x) in m.iter() {
                out.insert(k.as_str().into(), to_dynamic(x));
            }
            Dynamic::from_map(out)
        }
        // A 0-d result is a number, as NumPy scalars act as Python numbers.
        Value::Array(c) if c.ndim() == 0 => match c.get(&[]) {
            Some(Scalar::Bool(b)) => Dynamic::from_bool(b),
            Some(Scalar::Int(i)) => Dynamic::from_int(i),
            Some(Scalar::Float(f)) => Dynamic::from_float(f),
            None => Dynamic::UNIT,
        },
        Value::Array(c) => Dynamic::from(Chunk::clone(c)),
        // Results come to the host; a copy that fails says why in its place.
        Value::Gpu(g) => match g.to_host() {
            Ok(c) => to_dynamic(&Value::array(c)),
            Err(e) => Dynamic::from(e.to_string()),
        },
        Value::Frame(f) => Dynamic::from(crate::types::LocalFrame(f.clone())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_of_plain_values() {
        let mut m = Map::new();
        m.insert("a".into(), Dynamic::from_array(vec![Dynamic::from_int(1), Dynamic::from_float(2.5)]));
        m.insert("s".into(), Dynamic::from("x"));
        m.insert("u".into(), Dynamic::UNIT);
        let d = Dynamic::from_map(m);
        let v = to_value(&d, "test").expect("convert");
        assert_eq!(v.to_json(), r#"{"a":[1,2.5],"s":"x","u":null}"#);
        let back = to_dynamic(&v);
        assert_eq!(to_value(&back, "again").ok(), Some(v));
    }

    #[test]
    fn deep_nesting_is_refused() {
        let mut d = Dynamic::from_int(1);
        for _ in 0..200 {
            d = Dynamic::from_array(vec![d]);
        }
        let e = to_value(&d, "x").expect_err("too deep");
        assert!(matches!(&e, ConvertError::TooDeep { .. }), "{e:?}");
        assert!(e.to_string().contains("more than 128 levels deep"), "{e}");
    }

    #[test]
    fn function_pointers_are_refused_by_name() {
        let f = Dynamic::from(rhai::FnPtr::new("abs").expect("fn ptr"));
        let e = to_value(&f, "captured variable f").expect_err("refused");
        assert!(matches!(&e, ConvertError::CannotTravel { .. }), "{e:?}");
        assert!(e.to_string().starts_with("captured variable f is a value of type Fn"), "{e}");
    }
}
