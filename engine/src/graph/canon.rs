//! The canonical encoding behind [`Tokenizer::serde`](super::Tokenizer::serde):
//! a hand-written `serde::Serializer` that writes any `Serialize` value
//! straight into an xxh3 state, without building the bytes anywhere.
//!
//! The encoding is prefix-free, so that the concatenation of two encoded
//! values never reads as some other pair of values:
//!
//! - every value starts with a one-byte tag naming its serde shape;
//! - primitives follow with their little-endian bytes (`bool` as one byte,
//!   `char` as its `u32`);
//! - strings and byte slices follow with their length (`u64`) and bytes;
//! - `None` is its tag alone, `Some(x)` its tag then `x`;
//! - sequences, tuples and structs follow with their elements, then an `END`
//!   tag and the number of elements (counted here, not taken from serde's
//!   size hint, which may be absent or wrong);
//! - struct fields are the `FIELD` tag, the field's name, then its value:
//!   adding or renaming a field changes the token, on purpose;
//! - enum variants write the variant's index (`u32`) and name, then their
//!   payload like the matching struct, tuple or newtype;
//! - the names of types (structs, enums) are not written: renaming a type
//!   keeps its tokens;
//! - maps do not depend on the order of their entries: each entry (key, then
//!   value) is encoded into its own xxh3-128 hasher, the digests are sorted,
//!   and the map is its tag, the entry count and the sorted digests. A
//!   `HashMap` in any insertion order and a `BTreeMap` of the same entries
//!   give one token. Sets are not maps to serde (a `HashSet` serializes as a
//!   sequence in iteration order), so a `HashSet` is *not* order-insensitive:
//!   do not feed one.
//!
//! Floats: `-0.0` and `0.0` stay different (they are different values:
//! `1.0 / x` tells them apart), but every NaN, whatever its sign and payload,
//! is written as the one bit pattern of `f64::NAN` (`f32::NAN` for `f32`), so
//! equal-looking NaNs give equal tokens.
//!
//! Errors: a `Serialize` impl may fail (`S::Error::custom`). The bytes already
//! written stay written, and [`Tokenizer::serde`](super::Tokenizer::serde)
//! then writes the [`tag::ERROR`] marker and a number unique in the process,
//! so two values that fail alike never share a key. The serializer itself
//! never fails and never panics.

use std::fmt;

use serde::ser::{self, Serialize};
use xxhash_rust::xxh3::Xxh3;

/// The one-byte tags of the canonical encoding. Changing any of them (or the
/// layout after them) changes every token built with `serde`.
pub(super) mod tag {
    pub const UNIT: u8 = 0x40;
    pub const BOOL: u8 = 0x41;
    pub const I8: u8 = 0x42;
    pub const I16: u8 = 0x43;
    pub const I32: u8 = 0x44;
    pub const I64: u8 = 0x45;
    pub const I128: u8 = 0x46;
    pub const U8: u8 = 0x47;
    pub const U16: u8 = 0x48;
    pub const U32: u8 = 0x49;
    pub const U64: u8 = 0x4a;
    pub const U128: u8 = 0x4b;
    pub const F32: u8 = 0x4c;
    pub const F64: u8 = 0x4d;
    pub const CHAR: u8 = 0x4e;
    pub const STR: u8 = 0x4f;
    pub const BYTES: u8 = 0x50;
    pub const NONE: u8 = 0x51;
    pub const SOME: u8 = 0x52;
    pub const UNIT_STRUCT: u8 = 0x53;
    pub const UNIT_VARIANT: u8 = 0x54;
    pub const NEWTYPE_STRUCT: u8 = 0x55;
    pub const NEWTYPE_VARIANT: u8 = 0x56;
    pub const SEQ: u8 = 0x57;
    pub const TUPLE: u8 = 0x58;
    pub const TUPLE_STRUCT: u8 = 0x59;
    pub const TUPLE_VARIANT: u8 = 0x5a;
    pub const MAP: u8 = 0x5b;
    pub const STRUCT: u8 = 0x5c;
    pub const STRUCT_VARIANT: u8 = 0x5d;
    pub const FIELD: u8 = 0x5e;
    pub const END: u8 = 0x5f;
    /// Written after the partial encoding of a value whose `Serialize` impl
    /// failed.
    pub const ERROR: u8 = 0x60;
}

/// Feeds the canonical encoding of `x` into `h`.
pub(super) fn feed<T: Serialize + ?Sized>(h: &mut Xxh3, x: &T) -> Result<(), Error> {
    x.serialize(Canon { h })
}

/// The error of a `Serialize` impl that failed; the serializer never makes
/// one itself.
#[derive(Debug)]
pub struct Error(String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl ser::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Error {
        use fmt::Write;
        let mut s = String::new();
        // A failing `Display` leaves what it wrote; never panic here.
        let _ = write!(s, "{msg}");
        Error(s)
    }
}

/// The serializer: a borrow of the hasher being fed.
struct Canon<'a> {
    h: &'a mut Xxh3,
}

fn put_len(h: &mut Xxh3, n: usize) {
    h.update(&(n as u64).to_le_bytes());
}

fn put_str(h: &mut Xxh3, s: &str) {
    put_len(h, s.len());
    h.update(s.as_bytes());
}

impl<'a> Canon<'a> {
    fn tagged(self, t: u8, bytes: &[u8]) -> Result<(), Error> {
        self.h.update(&[t]);
        self.h.update(bytes);
        Ok(())
    }

    fn variant(&mut self, t: u8, index: u32, name: &str) {
        self.h.update(&[t]);
        self.h.update(&index.to_le_bytes());
        put_str(self.h, name);
    }

    fn compound(self, t: u8) -> Compound<'a> {
        self.h.update(&[t]);
        Compound { h: self.h, n: 0 }
    }
}

impl<'a> ser::Serializer for Canon<'a> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Compound<'a>;
    type SerializeTuple = Compound<'a>;
    type SerializeTupleStruct = Compound<'a>;
    type SerializeTupleVariant = Compound<'a>;
    type SerializeMap = Map<'a>;
    type SerializeStruct = Compound<'a>;
    type SerializeStructVariant = Compound<'a>;

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.tagged(tag::BOOL, &[u8::from(v)])
    }

    fn serialize_i8(self, v: i8) -> Result<(), Error> {
        self.tagged(tag::I8, &v.to_le_bytes())
    }

    fn serialize_i16(self, v: i16) -> Result<(), Error> {
        self.tagged(tag::I16, &v.to_le_bytes())
    }

    fn serialize_i32(self, v: i32) -> Result<(), Error> {
        self.tagged(tag::I32, &v.to_le_bytes())
    }

    fn serialize_i64(self, v: i64) -> Result<(), Error> {
        self.tagged(tag::I64, &v.to_le_bytes())
    }

    fn serialize_i128(self, v: i128) -> Result<(), Error> {
        self.tagged(tag::I128, &v.to_le_bytes())
    }

    fn serialize_u8(self, v: u8) -> Result<(), Error> {
        self.tagged(tag::U8, &[v])
    }

    fn serialize_u16(self, v: u16) -> Result<(), Error> {
        self.tagged(tag::U16, &v.to_le_bytes())
    }

    fn serialize_u32(self, v: u32) -> Result<(), Error> {
        self.tagged(tag::U32, &v.to_le_bytes())
    }

    fn serialize_u64(self, v: u64) -> Result<(), Error> {
        self.tagged(tag::U64, &v.to_le_bytes())
    }

    fn serialize_u128(self, v: u128) -> Result<(), Error> {
        self.tagged(tag::U128, &v.to_le_bytes())
    }

    /// Every NaN as `f32::NAN`; `-0.0` stays apart from `0.0`.
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        let bits = if v.is_nan() { f32::NAN.to_bits() } else { v.to_bits() };
        self.tagged(tag::F32, &bits.to_le_bytes())
    }

    /// Every NaN as `f64::NAN`; `-0.0` stays apart from `0.0`.
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        let bits = if v.is_nan() { f64::NAN.to_bits() } else { v.to_bits() };
        self.tagged(tag::F64, &bits.to_le_bytes())
    }

    fn serialize_char(self, v: char) -> Result<(), Error> {
        self.tagged(tag::CHAR, &u32::from(v).to_le_bytes())
    }

    fn serialize_str(self, v: &str) -> Result<(), Error> {
        self.h.update(&[tag::STR]);
        put_str(self.h, v);
        Ok(())
    }

    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        self.h.update(&[tag::BYTES]);
        put_len(self.h, v.len());
        self.h.update(v);
        Ok(())
    }

    fn serialize_none(self) -> Result<(), Error> {
        self.tagged(tag::NONE, &[])
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        self.h.update(&[tag::SOME]);
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<(), Error> {
        self.tagged(tag::UNIT, &[])
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        self.tagged(tag::UNIT_STRUCT, &[])
    }

    fn serialize_unit_variant(
        mut self,
        _name: &'static str,
        index: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.variant(tag::UNIT_VARIANT, index, variant);
        Ok(())
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.h.update(&[tag::NEWTYPE_STRUCT]);
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        mut self,
        _name: &'static str,
        index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.variant(tag::NEWTYPE_VARIANT, index, variant);
        value.serialize(self)
    }

    fn serialize_seq(self, _len: Option<usize>) -> Result<Compound<'a>, Error> {
        Ok(self.compound(tag::SEQ))
    }

    fn serialize_tuple(self, _len: usize) -> Result<Compound<'a>, Error> {
        Ok(self.compound(tag::TUPLE))
    }

    fn serialize_tuple_struct(self, _name: &'static str, _len: usize) -> Result<Compound<'a>, Error> {
        Ok(self.compound(tag::TUPLE_STRUCT))
    }

    fn serialize_tuple_variant(
        mut self,
        _name: &'static str,
        index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a>, Error> {
        self.variant(tag::TUPLE_VARIANT, index, variant);
        Ok(Compound { h: self.h, n: 0 })
    }

    fn serialize_map(self, len: Option<usize>) -> Result<Map<'a>, Error> {
        // The hint only sizes the buffer; a custom impl may claim anything.
        let cap = len.unwrap_or(0).min(1024);
        Ok(Map { h: self.h, entry: Xxh3::new(), open: false, digests: Vec::with_capacity(cap) })
    }

    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Compound<'a>, Error> {
        Ok(self.compound(tag::STRUCT))
    }

    fn serialize_struct_variant(
        mut self,
        _name: &'static str,
        index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a>, Error> {
        self.variant(tag::STRUCT_VARIANT, index, variant);
        Ok(Compound { h: self.h, n: 0 })
    }

    /// As `serialize_str` of the text; a `Display` that fails is an error,
    /// not a panic (serde's default `collect_str` panics then).
    fn collect_str<T: fmt::Display + ?Sized>(self, value: &T) -> Result<(), Error> {
        use fmt::Write;
        let mut s = String::new();
        write!(s, "{value}").map_err(|_| Error("a Display implementation failed".into()))?;
        self.serialize_str(&s)
    }
}

/// A sequence, tuple or struct (plain or as an enum variant) in progress:
/// its elements so far.
pub(super) struct Compound<'a> {
    h: &'a mut Xxh3,
    n: u64,
}

impl Compound<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.n += 1;
        value.serialize(Canon { h: &mut *self.h })
    }

    fn field<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), Error> {
        self.h.update(&[tag::FIELD]);
        put_str(self.h, key);
        self.element(value)
    }

    fn close(self) -> Result<(), Error> {
        self.h.update(&[tag::END]);
        self.h.update(&self.n.to_le_bytes());
        Ok(())
    }
}

/// The six compound traits serde has all forward to `Compound`: elements
/// (sequences, tuples, tuple structs and variants) or named fields
/// (structs and struct variants).
macro_rules! compound {
    ($($trait:ident :: $method:ident (element)),* ; $($named:ident :: $fmethod:ident (field)),*) => {
        $(impl ser::$trait for Compound<'_> {
            type Ok = ();
            type Error = Error;

            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
                self.element(value)
            }

            fn end(self) -> Result<(), Error> {
                self.close()
            }
        })*
        $(impl ser::$named for Compound<'_> {
            type Ok = ();
            type Error = Error;

            fn $fmethod<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<(), Error> {
                self.field(key, value)
            }

            fn end(self) -> Result<(), Error> {
                self.close()
            }
        })*
    };
}

compound!(
    SerializeSeq::serialize_element(element),
    SerializeTuple::serialize_element(element),
    SerializeTupleStruct::serialize_field(element),
    SerializeTupleVariant::serialize_field(element);
    SerializeStruct::serialize_field(field),
    SerializeStructVariant::serialize_field(field)
);

/// A map in progress: the digests of its finished entries, and the hasher
/// of the entry being written.
pub(super) struct Map<'a> {
    h: &'a mut Xxh3,
    entry: Xxh3,
    /// A key was written and its value not yet.
    open: bool,
    digests: Vec<u128>,
}

impl Map<'_> {
    fn close_entry(&mut self) {
        self.digests.push(self.entry.digest128());
        self.entry.reset();
        self.open = false;
    }
}

impl ser::SerializeMap for Map<'_> {
    type Ok = ();
    type Error = Error;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        if self.open {
            // A key without a value (a misbehaving impl): an entry of its own.
            self.close_entry();
        }
        key.serialize(Canon { h: &mut self.entry })?;
        self.open = true;
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        value.serialize(Canon { h: &mut self.entry })?;
        self.close_entry();
        Ok(())
    }

    fn end(mut self) -> Result<(), Error> {
        if self.open {
            self.close_entry();
        }
        self.digests.sort_unstable();
        self.h.update(&[tag::MAP]);
        put_len(self.h, self.digests.len());
        for d in &self.digests {
            self.h.update(&d.to_le_bytes());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use serde::Serialize;
    use serde::ser::Error as _;

    use crate::graph::token::Tokenizer;

    fn tok<T: Serialize + ?Sized>(x: &T) -> String {
        Tokenizer::new().serde(x).finish()
    }

    #[derive(Serialize, Clone)]
    enum Kind {
        Plain,
        Pair(i64, i64),
        Named { a: i64 },
        Wrapped(String),
    }

    #[derive(Serialize, Clone)]
    struct Sample {
        name: String,
        n: i64,
        x: f64,
        flag: bool,
        items: Vec<u32>,
        opt: Option<i32>,
        kind: Kind,
        map: BTreeMap<String, i64>,
    }

    fn sample() -> Sample {
        Sample {
            name: "s".into(),
            n: 7,
            x: 1.5,
            flag: true,
            items: vec![1, 2, 3],
            opt: Some(4),
            kind: Kind::Pair(1, 2),
            map: [("a".to_string(), 1), ("b".to_string(), 2)].into_iter().collect(),
        }
    }

    #[test]
    fn same_value_same_token() {
        assert_eq!(tok(&sample()), tok(&sample()));
        assert_eq!(tok(&sample()).len(), 32);
    }

    #[test]
    fn any_field_change_changes_the_token() {
        let base = tok(&sample());
        let changes: Vec<fn(&mut Sample)> = vec![
            |s| s.name = "t".into(),
            |s| s.n = 8,
            |s| s.x = 1.25,
            |s| s.flag = false,
            |s| s.items.push(4),
            |s| s.items = vec![1, 3, 2],
            |s| s.opt = None,
            |s| s.opt = Some(5),
            |s| s.kind = Kind::Pair(2, 1),
            |s| s.kind = Kind::Plain,
            |s| {
                s.map.insert("c".into(), 3);
            },
            |s| {
                s.map.insert("a".into(), 9);
            },
        ];
        let mut seen = std::collections::HashSet::new();
        seen.insert(base.clone());
        for change in &changes {
            let mut s = sample();
            change(&mut s);
            let t = tok(&s);
            assert_ne!(t, base);
            assert!(seen.insert(t), "two different changes collided");
        }
    }

    #[test]
    fn maps_ignore_insertion_order() {
        let n = 200;
        let mut a: HashMap<String, i64> = HashMap::new();
        for i in 0..n {
            a.insert(format!("k{i}"), i);
        }
        let mut b: HashMap<String, i64> = HashMap::new();
        for i in (0..n).rev() {
            b.insert(format!("k{i}"), i);
        }
        // Each std HashMap has its own random hasher keys: the two iterate
        // in different orders, so this test means something.
        assert_ne!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
        let c: BTreeMap<String, i64> = b.iter().map(|(k, v)| (k.clone(), *v)).collect();
        assert_eq!(tok(&a), tok(&b));
        assert_eq!(tok(&a), tok(&c));
        // But the entries still count.
        let mut d = c.clone();
        d.insert("k0".into(), -1);
        assert_ne!(tok(&c), tok(&d));
        d.insert("k0".into(), 0);
        assert_eq!(tok(&c), tok(&d));
        // Keys and values are not interchangeable.
        let e: BTreeMap<i64, i64> = [(1, 2), (3, 4)].into_iter().collect();
        let f: BTreeMap<i64, i64> = [(2, 1), (4, 3)].into_iter().collect();
        assert_ne!(tok(&e), tok(&f));
        let g: BTreeMap<i64, i64> = [(1, 4), (3, 2)].into_iter().collect();
        assert_ne!(tok(&e), tok(&g));
        // Nested maps too.
        let na: HashMap<i64, HashMap<String, i64>> = [(1, a.clone()), (2, b.clone())].into_iter().collect();
        let nb: BTreeMap<i64, BTreeMap<String, i64>> = [(2, c.clone()), (1, c.clone())].into_iter().collect();
        assert_eq!(tok(&na), tok(&nb));
    }

    #[test]
    fn nan_is_canonical_but_signed_zeros_differ() {
        let other_nan = f64::from_bits(f64::NAN.to_bits() ^ 1);
        assert!(other_nan.is_nan());
        assert_ne!(other_nan.to_bits(), f64::NAN.to_bits());
        assert_eq!(tok(&f64::NAN), tok(&other_nan));
        assert_eq!(tok(&f64::NAN), tok(&-f64::NAN));
        // Whatever NaN the hardware makes (x86 sets the sign bit).
        assert_eq!(tok(&(std::hint::black_box(f64::INFINITY) * 0.0)), tok(&f64::NAN));
        assert_eq!(tok(&f32::NAN), tok(&-f32::NAN));
        assert_eq!(tok(&f32::NAN), tok(&f32::from_bits(f32::NAN.to_bits() | 1)));
        assert_ne!(tok(&0.0f64), tok(&-0.0f64));
        assert_ne!(tok(&0.0f32), tok(&-0.0f32));
        assert_ne!(tok(&f64::NAN), tok(&f64::INFINITY));
        assert_ne!(tok(&1.0f32), tok(&1.0f64));
    }

    #[test]
    fn enum_variants_differ() {
        let all = [
            tok(&Kind::Plain),
            tok(&Kind::Pair(1, 2)),
            tok(&Kind::Named { a: 1 }),
            tok(&Kind::Wrapped("x".into())),
            tok(&Kind::Pair(2, 1)),
            tok(&Kind::Named { a: 2 }),
            tok(&Kind::Wrapped("y".into())),
        ];
        let distinct: std::collections::HashSet<_> = all.iter().collect();
        assert_eq!(distinct.len(), all.len());
        // A variant is not its payload.
        assert_ne!(tok(&Kind::Wrapped("x".into())), tok("x"));
    }

    #[test]
    fn no_collisions_by_concatenation() {
        assert_ne!(tok(&vec!["ab", "c"]), tok(&vec!["a", "bc"]));
        assert_ne!(tok(&(Some(1), None::<i32>)), tok(&(None::<i32>, Some(1))));
        assert_ne!(tok(&vec![vec![1, 2], vec![3]]), tok(&vec![vec![1], vec![2, 3]]));
        assert_ne!(tok(&vec![vec![1, 2, 3]]), tok(&vec![1, 2, 3]));
        assert_ne!(tok(&Some(Some(1))), tok(&Some(1)));
        assert_ne!(tok(&Some(None::<i32>)), tok(&None::<Option<i32>>));
        assert_ne!(tok(&vec![Some(1), None]), tok(&vec![Some(1)]));
        assert_ne!(tok(&Vec::<i32>::new()), tok(&()));
        assert_ne!(tok(&1i64), tok(&1i32));
        assert_ne!(tok("1"), tok(&'1'));
        // Two feeds are not one.
        assert_ne!(
            Tokenizer::new().serde(&vec![1, 2]).serde(&vec![3]).finish(),
            Tokenizer::new().serde(&vec![1]).serde(&vec![2, 3]).finish()
        );
        // A serde value is not the same text fed with `str`.
        assert_ne!(Tokenizer::new().serde("a").finish(), Tokenizer::new().str("a").finish());
        // Arc is transparent: it is the same value.
        assert_eq!(tok(&std::sync::Arc::new(sample())), tok(&sample()));
    }

    struct Failing(bool);

    impl Serialize for Failing {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            if self.0 { Err(S::Error::custom("boom")) } else { s.serialize_unit() }
        }
    }

    struct BadDisplay;

    impl std::fmt::Display for BadDisplay {
        fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            Err(std::fmt::Error)
        }
    }

    impl Serialize for BadDisplay {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_str(self)
        }
    }

    struct Shown(i64);

    impl Serialize for Shown {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_str(&self.0)
        }
    }

    #[test]
    fn errors_give_tokens_that_are_never_shared_and_never_panic() {
        // A value whose encoding fails gets a token of its own each time:
        // two such values must not share a key, and so a result.
        let e1 = tok(&vec![Failing(false), Failing(true)]);
        assert_ne!(e1, tok(&vec![Failing(false), Failing(true)]));
        assert_ne!(e1, tok(&vec![Failing(false), Failing(false)]));
        assert_ne!(e1, tok(&vec![Failing(true)]));
        // Inside a map entry as well.
        let m: BTreeMap<i32, Failing> = [(1, Failing(true))].into_iter().collect();
        assert_ne!(tok(&m), tok(&m));
        // A failing Display in collect_str is an error, not a panic.
        assert_ne!(tok(&BadDisplay), tok(&BadDisplay));
        assert_ne!(tok(&BadDisplay), tok(""));
        // collect_str is the string it shows.
        assert_eq!(tok(&Shown(42)), tok("42"));
        // A map that lies about its length.
        struct Liar;
        impl Serialize for Liar {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeMap;
                let mut m = s.serialize_map(Some(usize::MAX))?;
                m.serialize_entry(&1, &2)?;
                m.serialize_key(&3)?;
                m.end()
            }
        }
        assert_eq!(tok(&Liar), tok(&Liar));
    }

    /// The bytes are the layout documented at the top of this file.
    #[test]
    fn encoding_is_the_documented_layout() {
        use super::tag::*;
        use xxhash_rust::xxh3::xxh3_128;
        let hex = |b: &[u8]| format!("{:032x}", xxh3_128(b));
        // `Tokenizer::serde` writes 4 first.
        let mut b = vec![4, TUPLE, SOME, U8, 1, STR];
        b.extend(2u64.to_le_bytes());
        b.extend(b"ab");
        b.push(F64);
        b.extend((-0.0f64).to_bits().to_le_bytes());
        b.push(F64);
        b.extend(f64::NAN.to_bits().to_le_bytes());
        b.push(END);
        b.extend(4u64.to_le_bytes());
        assert_eq!(tok(&(Some(1u8), "ab", -0.0f64, -f64::NAN)), hex(&b));

        let mut entry = vec![I32];
        entry.extend(1i32.to_le_bytes());
        entry.extend([BOOL, 1]);
        let mut b = vec![4, MAP];
        b.extend(1u64.to_le_bytes());
        b.extend(xxh3_128(&entry).to_le_bytes());
        let m: HashMap<i32, bool> = [(1, true)].into_iter().collect();
        assert_eq!(tok(&m), hex(&b));

        let mut b = vec![4, STRUCT_VARIANT];
        b.extend(2u32.to_le_bytes());
        b.extend(5u64.to_le_bytes());
        b.extend(b"Named");
        b.push(FIELD);
        b.extend(1u64.to_le_bytes());
        b.extend(b"a");
        b.push(I64);
        b.extend(7i64.to_le_bytes());
        b.push(END);
        b.extend(1u64.to_le_bytes());
        assert_eq!(tok(&Kind::Named { a: 7 }), hex(&b));
    }

    /// Tokens name keys across processes, machines and builds, so they are
    /// pinned here. Changing the canonical encoding (any tag, any layout in
    /// `canon.rs`, or `Tokenizer::serde`'s prefix) changes EVERY key built
    /// from it; if that is intended, update this golden deliberately.
    #[test]
    fn golden_token_is_stable_across_processes_and_builds() {
        // Its own types, so that editing the other tests' fixtures leaves it.
        #[derive(Serialize)]
        enum Shape {
            Disc { r: f64 },
        }
        #[derive(Serialize)]
        struct Golden {
            name: &'static str,
            n: i64,
            x: f64,
            items: Vec<u8>,
            opt: Option<bool>,
            shape: Shape,
            map: BTreeMap<&'static str, u32>,
        }
        let g = Golden {
            name: "golden",
            n: -3,
            x: 0.5,
            items: vec![1, 2],
            opt: Some(true),
            shape: Shape::Disc { r: 2.0 },
            map: [("a", 1), ("b", 2)].into_iter().collect(),
        };
        assert_eq!(tok(&g), "792ff74962a192a75d0734fbed414c82");
    }
}
