//! Records as hash-map keys (`frequencies`, `distinct`, `foldby`,
//! `groupby`): equal values hash equally, floats by their bits with `-0.0`
//! and every NaN made one, so a key never goes missing from its own map.

use std::hash::{Hash, Hasher};

use crate::value::Value;

#[derive(Clone, Debug)]
pub struct VKey(pub Value);

impl VKey {
    /// A stable hash (the same on every worker and run), for shuffles.
    pub fn hash_of(v: &Value) -> u64 {
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        feed(v, &mut h);
        h.finish()
    }
}

fn canonical(f: f64) -> u64 {
    if f.is_nan() {
        f64::NAN.to_bits()
    } else if f == 0.0 {
        0
    } else {
        f.to_bits()
    }
}

fn feed<H: Hasher>(v: &Value, h: &mut H) {
    match v {
        Value::Unit => h.write_u8(0),
        Value::Bool(b) => {
            h.write_u8(1);
            h.write_u8(u8::from(*b));
        }
        Value::Int(i) => {
            h.write_u8(2);
            h.write_i64(*i);
        }
        Value::Float(f) => {
            h.write_u8(3);
            h.write_u64(canonical(*f));
        }
        Value::Str(s) => {
            h.write_u8(4);
            h.write(s.as_bytes());
            h.write_u8(0xff);
        }
        Value::Bytes(b) => {
            h.write_u8(5);
            h.write_usize(b.len());
            h.write(b);
        }
        Value::List(items) => {
            h.write_u8(6);
            h.write_usize(items.len());
            items.iter().for_each(|x| feed(x, h));
        }
        Value::Map(m) => {
            h.write_u8(7);
            h.write_usize(m.len());
            for (k, x) in m.iter() {
                h.write(k.as_bytes());
                h.write_u8(0xff);
                feed(x, h);
            }
        }
        Value::Array(c) => {
            h.write_u8(8);
            c.feed_bytes(&mut |b| h.write(b));
        }
        Value::Frame(f) => {
            h.write_u8(9);
            crate::value::rows(&f.0).iter().for_each(|r| feed(r, h));
        }
        // A GPU block keys by its contents, as its host copy does.
        Value::Gpu(g) => match g.to_host() {
            Ok(c) => {
                h.write_u8(8);
                c.feed_bytes(&mut |b| h.write(b));
            }
            Err(_) => h.write_u8(10),
        },
    }
}

fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => canonical(*x) == canonical(*y),
        (Value::List(x), Value::List(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| same(p, q))
        }
        (Value::Map(x), Value::Map(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|((k1, v1), (k2, v2))| k1 == k2 && same(v1, v2))
        }
        _ => a == b,
    }
}

impl Hash for VKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        feed(&self.0, state);
    }
}

impl PartialEq for VKey {
    fn eq(&self, other: &Self) -> bool {
        same(&self.0, &other.0)
    }
}

impl Eq for VKey {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn equal_values_are_one_key() {
        let set: HashSet<VKey> = [
            Value::Float(f64::NAN),
            Value::Float(-f64::NAN),
            Value::Float(0.0),
            Value::Float(-0.0),
            Value::str("a"),
            Value::str("a"),
            Value::list(vec![Value::Int(1), Value::Float(f64::NAN)]),
            Value::list(vec![Value::Int(1), Value::Float(f64::NAN)]),
            Value::Int(1),
        ]
        .into_iter()
        .map(VKey)
        .collect();
        assert_eq!(set.len(), 5);
        assert_eq!(VKey::hash_of(&Value::str("ab")), VKey::hash_of(&Value::str("ab")));
        assert_ne!(VKey::hash_of(&Value::str("ab")), VKey::hash_of(&Value::list(vec![Value::str("ab")])));
    }
}
