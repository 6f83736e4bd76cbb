//! A value made by user code as an array block (`from_delayed`): an
//! ndarray as it is, or nested lists of numbers as `array(...)` reads them,
//! checked against the shape the caller promised and cast to its type.

use super::chunk::Chunk;
use super::dtype::DType;
use super::error::{ArrayError, fmt_shape};
use crate::value::Value;

/// Deepest nesting read (as `convert::MAX_DEPTH` in the script layer).
const MAX_DIMS: usize = 32;

pub fn block_of_value(v: &Value, shape: &[usize], dtype: DType) -> Result<Chunk, ArrayError> {
    let c = match v {
        Value::Array(c) => (**c).clone(),
        Value::List(_) | Value::Int(_) | Value::Float(_) | Value::Bool(_) => nested(v)?,
        other => {
            return Err(ArrayError::Value(format!(
                "from_delayed: the value is a {}, not an array of shape {}",
                other.type_name(),
                fmt_shape(shape)
            )));
        }
    };
    if c.shape() != shape {
        return Err(ArrayError::Shape(format!(
            "from_delayed: the value has shape {} where shape {} was given",
            fmt_shape(c.shape()),
            fmt_shape(shape)
        )));
    }
    Ok(if c.dtype() == dtype { c } else { c.astype(dtype) })
}

/// Nested lists of numbers (every row as long as the first) as a block:
/// int64 when every number is an integer, else float64.
fn nested(v: &Value) -> Result<Chunk, ArrayError> {
    let mut shape = Vec::new();
    let mut cur = v;
    while let Value::List(items) = cur {
        shape.push(items.len());
        if shape.len() > MAX_DIMS {
            return Err(ArrayError::Value(format!("from_delayed: lists nested more than {MAX_DIMS} deep")));
        }
        match items.first() {
            Some(x) => cur = x,
            None => break,
        }
    }
    let (mut ints, mut floats, mut all_int) = (Vec::new(), Vec::new(), true);
    flatten(v, &shape, 0, &mut |x| match x {
        Value::Int(i) => {
            ints.push(*i);
            floats.push(*i as f64);
            Ok(())
        }
        Value::Float(f) => {
            all_int = false;
            floats.push(*f);
            Ok(())
        }
        Value::Bool(b) => {
            ints.push(i64::from(*b));
            floats.push(f64::from(u8::from(*b)));
            Ok(())
        }
        other => Err(ArrayError::Value(format!(
            "from_delayed: the lists hold a {}; only numbers make an array",
            other.type_name()
        ))),
    })?;
    if all_int { Chunk::from_vec(&shape, ints) } else { Chunk::from_vec(&shape, floats) }
}

fn flatten(
    v: &Value,
    shape: &[usize],
    depth: usize,
    leaf: &mut dyn FnMut(&Value) -> Result<(), ArrayError>,
) -> Result<(), ArrayError> {
    match (v, shape.get(depth)) {
        (Value::List(items), Some(&n)) if items.len() == n => {
            items.iter().try_for_each(|x| flatten(x, shape, depth + 1, leaf))
        }
        (Value::List(items), _) => Err(ArrayError::Shape(format!(
            "from_delayed: ragged lists (a row of {} where {} was expected)",
            items.len(),
            shape.get(depth).map_or_else(|| "a number".to_string(), |n| n.to_string())
        ))),
        (x, None) => leaf(x),
        (_, Some(_)) => {
            Err(ArrayError::Shape("from_delayed: ragged lists (a number where a row was expected)".into()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(v: Vec<Value>) -> Value {
        Value::list(v)
    }

    #[test]
    fn nested_lists_become_blocks_of_the_given_shape_and_type() {
        let v =
            list(vec![list(vec![Value::Int(1), Value::Int(2)]), list(vec![Value::Int(3), Value::Int(4)])]);
        let c = block_of_value(&v, &[2, 2], DType::F64).expect("block");
        assert_eq!((c.shape(), c.dtype()), (&[2, 2][..], DType::F64));
        assert_eq!(c.get(&[1, 0]).map(|s| s.as_f64()), Some(3.0));
        let e = block_of_value(&v, &[4], DType::F64).expect_err("shape");
        assert!(e.to_string().contains("shape (2, 2) where shape (4,) was given"), "{e}");
        let ragged = list(vec![list(vec![Value::Int(1)]), list(vec![Value::Int(2), Value::Int(3)])]);
        assert!(
            block_of_value(&ragged, &[2, 1], DType::I64).expect_err("ragged").to_string().contains("ragged")
        );
        let text = list(vec![Value::Str("a".into())]);
        assert!(
            block_of_value(&text, &[1], DType::I64).expect_err("text").to_string().contains("only numbers")
        );
        let e = block_of_value(&Value::Str("x".into()), &[1], DType::I64).expect_err("str");
        assert!(e.to_string().contains("not an array"), "{e}");
    }
}
