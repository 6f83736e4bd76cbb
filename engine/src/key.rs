//! Keys name task outputs, as Dask's `("sum-<token>", 0, 1)`: a name (a
//! group prefix plus a deterministic token) and a block index.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::Xxh3;

/// The name of one task output. Cheap to clone (the name is shared) and
/// cheap to hash: the hash is computed once, when the key is made, because
/// every pass and the scheduler look keys up in hash maps.
#[derive(Clone, Serialize, Deserialize)]
#[serde(from = "KeyRepr", into = "KeyRepr")]
pub struct Key {
    name: Arc<str>,
    index: Box<[u32]>,
    hash: u64,
}

#[derive(Serialize, Deserialize)]
struct KeyRepr(Arc<str>, Box<[u32]>);

impl From<KeyRepr> for Key {
    fn from(r: KeyRepr) -> Key {
        Key::make(r.0, r.1)
    }
}

impl From<Key> for KeyRepr {
    fn from(k: Key) -> KeyRepr {
        KeyRepr(k.name, k.index)
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        self.hash == other.hash && self.index == other.index && self.name == other.name
    }
}

impl Eq for Key {}

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Key) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Key) -> Ordering {
        (&self.name, &self.index).cmp(&(&other.name, &other.index))
    }
}

impl Key {
    fn make(name: Arc<str>, index: Box<[u32]>) -> Key {
        let mut h = Xxh3::new();
        h.update(name.as_bytes());
        for i in index.iter() {
            h.update(&i.to_le_bytes());
        }
        Key { hash: h.digest(), name, index }
    }

    /// A key with no block index (delayed values, futures).
    pub fn new(name: impl Into<Arc<str>>) -> Key {
        Key::make(name.into(), Box::new([]))
    }

    /// A block key of a chunked collection.
    pub fn block(name: Arc<str>, index: &[u32]) -> Key {
        Key::make(name, index.into())
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
    fn keys_survive_serialization_with_their_hash() {
        let k = Key::block(Arc::from("sum-ab"), &[3, 4]);
        let bytes = rmp_serde::to_vec(&k).expect("encode");
        let back: Key = rmp_serde::from_slice(&bytes).expect("decode");
        assert_eq!(k, back);
        let mut set = std::collections::HashSet::new();
        set.insert(k);
        assert!(set.contains(&back));
    }

    #[test]
    fn display_matches_dask() {
        assert_eq!(Key::new("a-1").to_string(), "a-1");
        assert_eq!(Key::block(Arc::from("sum-ab"), &[0, 1]).to_string(), "('sum-ab', 0, 1)");
    }
}
