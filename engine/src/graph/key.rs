//! Keys name task outputs, as Dask's `("sum-<token>", 0, 1)`: a name (a
//! group prefix plus a deterministic token) and a block index.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// The name of one task output. Cheap to clone (the name is shared).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Key {
    name: Arc<str>,
    index: Box<[u32]>,
}

impl Key {
    /// A key with no block index (delayed values, futures).
    pub fn new(name: impl Into<Arc<str>>) -> Key {
        Key { name: name.into(), index: Box::new([]) }
    }

    /// A block key of a chunked collection.
    pub fn block(name: Arc<str>, index: &[u32]) -> Key {
        Key { name, index: index.into() }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn name_arc(&self) -> &Arc<str> {
        &self.name
    }

    pub fn index(&self) -> &[u32] {
        &self.index
    }

    /// The task group: the name without its token, as Dask's `key_split`
    /// (`"inc-3f2a…"` → `"inc"`). Progress is reported per group.
    pub fn group(&self) -> &str {
        group_of(&self.name)
    }
}

/// Strip a trailing `-<hex token>` (and a leading `(`/quote, never present here).
pub fn group_of(name: &str) -> &str {
    match name.rfind('-') {
        Some(i)
            if i + 1 < name.len()
                && name.len() - i > 8
                && name[i + 1..].bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            &name[..i]
        }
        _ => name,
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.index.is_empty() {
            f.write_str(&self.name)
        } else {
            write!(f, "('{}'", self.name)?;
            for i in self.index.iter() {
                write!(f, ", {i}")?;
            }
            f.write_str(")")
        }
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_strips_the_token() {
        assert_eq!(group_of("inc-0123456789abcdef"), "inc");
        assert_eq!(group_of("random-sample-deadbeefdeadbeef"), "random-sample");
        assert_eq!(group_of("plain"), "plain");
        assert_eq!(group_of("x-1"), "x-1");
    }

    #[test]
    fn display_matches_dask() {
        assert_eq!(Key::new("a-1").to_string(), "a-1");
        assert_eq!(Key::block(Arc::from("sum-ab"), &[0, 1]).to_string(), "('sum-ab', 0, 1)");
    }
}
