//! Deterministic tokens: the same expression built twice hashes to the same
//! token, so equal sub-expressions get equal keys and are computed once
//! (Dask's `tokenize`). xxh3-128 with a fixed seed: stable across processes
//! and runs of the same binary.

use xxhash_rust::xxh3::Xxh3;

use crate::value::Value;

use super::canon;
use crate::key::Key;

/// Incremental token builder. Every `feed_*` writes a type tag first so that
/// different shapes of input never collide by concatenation.
pub struct Tokenizer {
    h: Xxh3,
}

impl Default for Tokenizer {
    fn default() -> Self {
        Self::new()
    }
}

impl Tokenizer {
    pub fn new() -> Tokenizer {
        Tokenizer { h: Xxh3::new() }
    }

    pub fn str(&mut self, s: &str) -> &mut Self {
        self.h.update(&[1]);
        self.h.update(&(s.len() as u64).to_le_bytes());
        self.h.update(s.as_bytes());
        self
    }

    /// A file's identity: its path, size and modification time, so a key
    /// changes when the file does.
    pub fn file(&mut self, path: &std::path::Path, meta: &std::fs::Metadata) -> &mut Self {
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as u64);
        self.str(&path.display().to_string()).u64(meta.len()).u64(mtime)
    }

    pub fn u64(&mut self, x: u64) -> &mut Self {
        self.h.update(&[2]);
        self.h.update(&x.to_le_bytes());
        self
    }

    pub fn key(&mut self, k: &Key) -> &mut Self {
        self.h.update(&[3]);
        self.str(k.name());
        self.u64(k.index().len() as u64);
        for i in k.index() {
            self.u64(u64::from(*i));
        }
        self
    }

    pub fn value(&mut self, v: &Value) -> &mut Self {
        match v {
            Value::Unit => {
                self.h.update(&[10]);
            }
            Value::Bool(b) => {
                self.h.update(&[11, u8::from(*b)]);
            }
            Value::Int(i) => {
                self.h.update(&[12]);
                self.h.update(&i.to_le_bytes());
            }
            Value::Float(f) => {
                // Every NaN is one NaN, as in `serde` below; -0.0 stays itself.
                let f = if f.is_nan() { f64::NAN } else { *f };
                self.h.update(&[13]);
                self.h.update(&f.to_bits().to_le_bytes());
            }
            Value::Str(s) => {
                self.h.update(&[14]);
                self.str(s);
            }
            Value::Bytes(b) => {
                self.h.update(&[15]);
                self.h.update(&(b.len() as u64).to_le_bytes());
                self.h.update(b);
            }
            Value::List(items) => {
                self.h.update(&[16]);
                self.u64(items.len() as u64);
                for x in items.iter() {
                    self.value(x);
                }
            }
            Value::Frame(f) => {
                self.h.update(&[19]);
                // A frame's identity is its content; IPC bytes are canonical
                // for equal frames of one schema.
                match f.to_ipc() {
                    Ok(bytes) => {
                        self.h.update(&(bytes.len() as u64).to_le_bytes());
                        self.h.update(&bytes);
                    }
                    Err(_) => self.unique_error(),
                }
            }
            Value::Array(c) => {
                self.h.update(&[18]);
                c.feed_bytes(&mut |b| self.h.update(b));
            }
            // Its contents would mean a copy to the host: a GPU literal is unique.
            Value::Gpu(_) => self.unique_error(),
            Value::Map(m) => {
                self.h.update(&[17]);
                self.u64(m.len() as u64);
                for (k, x) in m.iter() {
                    self.str(k);
                    self.value(x);
                }
            }
        }
        self
    }

    /// Any `Serialize` value, canonically: its serde data model, not its
    /// `Debug` text, so the token is stable across builds, compilers and
    /// processes, and a map's token does not depend on its entries' order.
    ///
    /// - Every primitive is a one-byte type tag then its little-endian
    ///   bytes; strings and bytes are length-prefixed; sequences, tuples and
    ///   structs end with their length; enum variants write their index and
    ///   name; struct fields write their names (adding or renaming a field
    ///   changes the token, deliberately); `None` and `Some` are tagged.
    ///   Type names are not written.
    /// - Floats: `-0.0` and `0.0` stay different (different values: `1/x`
    ///   tells them apart), but every NaN is written as the bit pattern of
    ///   `f64::NAN` (`f32::NAN` for `f32`), so equal-looking NaNs give equal
    ///   tokens.
    /// - Maps are order-insensitive: each entry is hashed on its own (xxh3-128),
    ///   and the sorted digests are fed, so a `HashMap` in any insertion order
    ///   and a `BTreeMap` of the same entries give one token. Serde shows a
    ///   `HashSet` as a sequence, which is *not* order-insensitive.
    /// - On error (a custom `Serialize` impl that fails, e.g. a frame whose
    ///   IPC encoding fails), the error marker and a number unique in this
    ///   process follow: two values that fail alike must not share a key (and
    ///   so a result); such a value is simply never deduplicated. This never
    ///   panics.
    ///
    /// The layout is documented in full in `graph/canon.rs`. Changing it
    /// changes every key built from it.
    pub fn serde<T: serde::Serialize + ?Sized>(&mut self, x: &T) -> &mut Self {
        self.h.update(&[4]);
        if canon::feed(&mut self.h, x).is_err() {
            self.unique_error();
        }
        self
    }

    /// What cannot be encoded gets a token of its own, never shared.
    fn unique_error(&mut self) {
        static FAILED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = FAILED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.h.update(&[canon::tag::ERROR]);
        self.h.update(&u64::from(std::process::id()).to_le_bytes());
        self.h.update(&n.to_le_bytes());
    }

    /// The token: 32 hex digits, as Dask's md5 tokens.
    pub fn finish(&self) -> String {
        format!("{:032x}", self.h.digest128())
    }

    /// `"<prefix>-<token>"`, the name of a new key or layer.
    pub fn name(&self, prefix: &str) -> String {
        format!("{prefix}-{}", self.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_deterministic_and_distinct() {
        let t = |v: &Value| Tokenizer::new().value(v).finish();
        assert_eq!(t(&Value::Int(1)), t(&Value::Int(1)));
        assert_ne!(t(&Value::Int(1)), t(&Value::Float(1.0)));
        assert_ne!(
            Tokenizer::new().str("ab").str("c").finish(),
            Tokenizer::new().str("a").str("bc").finish()
        );
        assert_eq!(t(&Value::Unit).len(), 32);
    }
}
