//! One in-memory n-d array: a chunk of a lazy array, or a computed result.
//! The payload is an `ndarray` shared array, so cloning, transposing and
//! slicing never copy; views may be strided (a transposed chunk stays a view
//! until an operation writes a new array).

use std::fmt;

use ndarray::{ArcArray, ArrayD, IxDyn};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::dtype::{DType, Scalar};
use super::error::{ArrayError, fmt_shape};

pub type Nd<T> = ArcArray<T, IxDyn>;

/// An n-d array of one of the supported element types.
#[derive(Clone, PartialEq)]
pub enum Chunk {
    Bool(Nd<bool>),
    I64(Nd<i64>),
    F32(Nd<f32>),
    F64(Nd<f64>),
}

/// Apply `$body` to the typed array inside a chunk, whatever its type.
#[macro_export]
#[doc(hidden)]
macro_rules! each_chunk {
    ($c:expr, $a:ident => $body:expr) => {
        match $c {
            $crate::array::chunk::Chunk::Bool($a) => $body,
            $crate::array::chunk::Chunk::I64($a) => $body,
            $crate::array::chunk::Chunk::F32($a) => $body,
            $crate::array::chunk::Chunk::F64($a) => $body,
        }
    };
}

/// An element type: how to wrap it into a `Chunk` and convert to it with
/// NumPy's casting (`astype`: floats truncate towards zero into integers,
/// non-zero is `true`).
pub trait Elem: Copy + Send + Sync + PartialEq + fmt::Debug + 'static {
    const DTYPE: DType;
    fn wrap(a: Nd<Self>) -> Chunk;
    /// The typed array if the chunk holds this type.
    fn get(c: &Chunk) -> Option<&Nd<Self>>;
    fn from_bool(b: bool) -> Self;
    fn from_i64(i: i64) -> Self;
    fn from_f32(f: f32) -> Self;
    fn from_f64(f: f64) -> Self;
    fn to_scalar(self) -> Scalar;
    fn from_scalar(s: Scalar) -> Self {
        match s {
            Scalar::Bool(b) => Self::from_bool(b),
            Scalar::Int(i) => Self::from_i64(i),
            Scalar::Float(f) => Self::from_f64(f),
        }
    }
}

impl Elem for bool {
    const DTYPE: DType = DType::Bool;
    fn wrap(a: Nd<Self>) -> Chunk {
        Chunk::Bool(a)
    }
    fn get(c: &Chunk) -> Option<&Nd<Self>> {
        if let Chunk::Bool(a) = c { Some(a) } else { None }
    }
    fn from_bool(b: bool) -> Self {
        b
    }
    fn from_i64(i: i64) -> Self {
        i != 0
    }
    fn from_f32(f: f32) -> Self {
        f != 0.0
    }
    fn from_f64(f: f64) -> Self {
        f != 0.0
    }
    fn to_scalar(self) -> Scalar {
        Scalar::Bool(self)
    }
}

impl Elem for i64 {
    const DTYPE: DType = DType::I64;
    fn wrap(a: Nd<Self>) -> Chunk {
        Chunk::I64(a)
    }
    fn get(c: &Chunk) -> Option<&Nd<Self>> {
        if let Chunk::I64(a) = c { Some(a) } else { None }
    }
    fn from_bool(b: bool) -> Self {
        i64::from(b)
    }
    fn from_i64(i: i64) -> Self {
        i
    }
    fn from_f32(f: f32) -> Self {
        f as i64
    }
    fn from_f64(f: f64) -> Self {
        f as i64
    }
    fn to_scalar(self) -> Scalar {
        Scalar::Int(self)
    }
}

impl Elem for f32 {
    const DTYPE: DType = DType::F32;
    fn wrap(a: Nd<Self>) -> Chunk {
        Chunk::F32(a)
    }
    fn get(c: &Chunk) -> Option<&Nd<Self>> {
        if let Chunk::F32(a) = c { Some(a) } else { None }
    }
    fn from_bool(b: bool) -> Self {
        f32::from(u8::from(b))
    }
    fn from_i64(i: i64) -> Self {
        i as f32
    }
    fn from_f32(f: f32) -> Self {
        f
    }
    fn from_f64(f: f64) -> Self {
        f as f32
    }
    fn to_scalar(self) -> Scalar {
        Scalar::Float(f64::from(self))
    }
}

impl Elem for f64 {
    const DTYPE: DType = DType::F64;
    fn wrap(a: Nd<Self>) -> Chunk {
        Chunk::F64(a)
    }
    fn get(c: &Chunk) -> Option<&Nd<Self>> {
        if let Chunk::F64(a) = c { Some(a) } else { None }
    }
    fn from_bool(b: bool) -> Self {
        f64::from(u8::from(b))
    }
    fn from_i64(i: i64) -> Self {
        i as f64
    }
    fn from_f32(f: f32) -> Self {
        f64::from(f)
    }
    fn from_f64(f: f64) -> Self {
        f
    }
    fn to_scalar(self) -> Scalar {
        Scalar::Float(self)
    }
}

impl Chunk {
    pub fn dtype(&self) -> DType {
        match self {
            Chunk::Bool(_) => DType::Bool,
            Chunk::I64(_) => DType::I64,
            Chunk::F32(_) => DType::F32,
            Chunk::F64(_) => DType::F64,
        }
    }

    pub fn shape(&self) -> &[usize] {
        each_chunk!(self, a => a.shape())
    }

    pub fn ndim(&self) -> usize {
        self.shape().len()
    }

    pub fn len(&self) -> usize {
        each_chunk!(self, a => a.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of element data (views count their whole logical size).
    pub fn nbytes(&self) -> u64 {
        (self.len() * self.dtype().itemsize()) as u64
    }

    pub fn from_array<T: Elem>(a: ArrayD<T>) -> Chunk {
        T::wrap(a.into_shared())
    }

    /// A chunk of `shape` with every element `v` (cast to `dtype`).
    pub fn full(shape: &[usize], v: Scalar, dtype: DType) -> Chunk {
        fn make<T: Elem>(shape: &[usize], v: Scalar) -> Chunk {
            T::wrap(ArcArray::from_elem(IxDyn(shape), T::from_scalar(v)))
        }
        match dtype {
            DType::Bool => make::<bool>(shape, v),
            DType::I64 => make::<i64>(shape, v),
            DType::F32 => make::<f32>(shape, v),
            DType::F64 => make::<f64>(shape, v),
        }
    }

    /// A 0-d chunk holding one scalar, in the scalar's own type.
    pub fn scalar(v: Scalar) -> Chunk {
        let dtype = match v {
            Scalar::Bool(_) => DType::Bool,
            Scalar::Int(_) => DType::I64,
            Scalar::Float(_) => DType::F64,
        };
        Chunk::full(&[], v, dtype)
    }

    /// Build from elements in C order; the length must match the shape.
    pub fn from_vec<T: Elem>(shape: &[usize], data: Vec<T>) -> Result<Chunk, ArrayError> {
        let n = data.len();
        let a = ArrayD::from_shape_vec(IxDyn(shape), data)
            .map_err(|_| ArrayError::Shape(format!("{n} elements do not fill shape {}", fmt_shape(shape))))?;
        Ok(T::wrap(a.into_shared()))
    }

    /// The chunk converted to `dtype` (shared, not copied, when it already is).
    pub fn astype(&self, dtype: DType) -> Chunk {
        if self.dtype() == dtype {
            return self.clone();
        }
        match dtype {
            DType::Bool => Chunk::Bool(self.cast::<bool>()),
            DType::I64 => Chunk::I64(self.cast::<i64>()),
            DType::F32 => Chunk::F32(self.cast::<f32>()),
            DType::F64 => Chunk::F64(self.cast::<f64>()),
        }
    }

    /// The same elements in their own C-ordered buffer (a view of a bigger
    /// array would otherwise keep all of it alive).
    pub fn to_contiguous(&self) -> Chunk {
        crate::each_chunk!(self, a => Elem::wrap(a.as_standard_layout().into_owned().into_shared()))
    }

    /// The elements as type `T` (shared, not copied, when the chunk already is `T`).
    pub fn cast<T: Elem>(&self) -> Nd<T> {
        if let Some(a) = T::get(self) {
            return a.clone();
        }
        match self {
            Chunk::Bool(a) => a.mapv(T::from_bool).into_shared(),
            Chunk::I64(a) => a.mapv(T::from_i64).into_shared(),
            Chunk::F32(a) => a.mapv(T::from_f32).into_shared(),
            Chunk::F64(a) => a.mapv(T::from_f64).into_shared(),
        }
    }

    /// The element at a C-order position, for display and scalars.
    pub fn get_flat(&self, i: usize) -> Option<Scalar> {
        let shape = self.shape().to_vec();
        let mut idx = vec![0usize; shape.len()];
        let mut rest = i;
        for (d, n) in shape.iter().enumerate().rev() {
            if *n == 0 {
                return None;
            }
            idx[d] = rest % n;
            rest /= n;
        }
        if rest != 0 {
            return None;
        }
        each_chunk!(self, a => a.get(IxDyn(&idx)).map(|x| x.to_scalar()))
    }

    /// The element at an n-d index.
    pub fn get(&self, idx: &[usize]) -> Option<Scalar> {
        each_chunk!(self, a => a.get(IxDyn(idx)).map(|x| x.to_scalar()))
    }

    /// All elements in C order as scalars (for conversion to script values).
    pub fn scalars(&self) -> Vec<Scalar> {
        each_chunk!(self, a => a.iter().map(|x| x.to_scalar()).collect())
    }

    /// JSON text: nested lists, NaN and infinities as `null`.
    pub fn to_json(&self) -> String {
        let mut out = String::new();
        let items = self.scalars();
        write_nested(&mut out, self.shape(), &items, &mut 0);
        out
    }
}

fn write_nested(out: &mut String, shape: &[usize], items: &[Scalar], next: &mut usize) {
    use std::fmt::Write;
    let Some((&n, rest)) = shape.split_first() else {
        match items.get(*next) {
            Some(Scalar::Float(f)) if !f.is_finite() => out.push_str("null"),
            Some(s) => {
                let _ = write!(out, "{s}");
            }
            None => out.push_str("null"),
        }
        *next += 1;
        return;
    };
    out.push('[');
    for i in 0..n {
        if i > 0 {
            out.push(',');
        }
        write_nested(out, rest, items, next);
    }
    out.push(']');
}

impl fmt::Debug for Chunk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Chunk({}, {})", self.dtype(), fmt_shape(self.shape()))
    }
}

/// On the wire a chunk is its type, its shape and its elements in C order as
/// little-endian bytes: compact, and readable without knowing ndarray. The
/// elements are one byte string, written from the array's memory and read
/// back with one copy (large arrays cross the cluster this way).
#[derive(Serialize)]
struct WireOut<'a> {
    dtype: DType,
    shape: Vec<u64>,
    #[serde(with = "bytes_out")]
    data: std::borrow::Cow<'a, [u8]>,
}

#[derive(Deserialize)]
struct Wire<'a> {
    dtype: DType,
    shape: Vec<u64>,
    #[serde(borrow, deserialize_with = "bytes_in")]
    data: std::borrow::Cow<'a, [u8]>,
}

mod bytes_out {
    use serde::Serializer;

    pub fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(b)
    }
}

/// Bytes, borrowed from the message when the format allows (MessagePack
/// from a slice does), else owned; a sequence of numbers is taken too.
fn bytes_in<'de, D: Deserializer<'de>>(d: D) -> Result<std::borrow::Cow<'de, [u8]>, D::Error> {
    use std::borrow::Cow;
    struct V;
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = Cow<'de, [u8]>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("bytes")
        }
        fn visit_borrowed_bytes<E>(self, v: &'de [u8]) -> Result<Self::Value, E> {
            Ok(Cow::Borrowed(v))
        }
        fn visit_bytes<E>(self, v: &[u8]) -> Result<Self::Value, E> {
            Ok(Cow::Owned(v.to_vec()))
        }
        fn visit_byte_buf<E>(self, v: Vec<u8>) -> Result<Self::Value, E> {
            Ok(Cow::Owned(v))
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(b) = seq.next_element::<u8>()? {
                out.push(b);
            }
            Ok(Cow::Owned(out))
        }
    }
    d.deserialize_bytes(V)
}

impl Chunk {
    /// The elements in C order as little-endian bytes.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        let mut data = Vec::with_capacity(self.nbytes() as usize);
        match self {
            Chunk::Bool(a) => data.extend(a.iter().map(|&b| u8::from(b))),
            Chunk::I64(a) => a.iter().for_each(|x| data.extend_from_slice(&x.to_le_bytes())),
            Chunk::F32(a) => a.iter().for_each(|x| data.extend_from_slice(&x.to_le_bytes())),
            Chunk::F64(a) => a.iter().for_each(|x| data.extend_from_slice(&x.to_le_bytes())),
        }
        data
    }

    /// Feed the type, the shape and every element to a hasher (tokens).
    pub fn feed_bytes(&self, f: &mut dyn FnMut(&[u8])) {
        f(&[self.dtype() as u8]);
        for n in self.shape() {
            f(&(*n as u64).to_le_bytes());
        }
        // Through a small buffer: a token of a large chunk must not copy it.
        let mut buf = Vec::with_capacity(8192);
        macro_rules! stream {
            ($a:expr, $bytes:expr) => {
                for x in $a.iter() {
                    buf.extend_from_slice(&$bytes(x));
                    if buf.len() >= 8184 {
                        f(&buf);
                        buf.clear();
                    }
                }
            };
        }
        match self {
            Chunk::Bool(a) => stream!(a, |&b: &bool| [u8::from(b)]),
            Chunk::I64(a) => stream!(a, |x: &i64| x.to_le_bytes()),
            Chunk::F32(a) => stream!(a, |x: &f32| x.to_le_bytes()),
            Chunk::F64(a) => stream!(a, |x: &f64| x.to_le_bytes()),
        }
        f(&buf);
    }
}

impl Chunk {
    /// The elements' bytes as the wire wants them: the array's own memory
    /// when it is in C order on a little-endian machine, else a copy.
    /// The elements as little-endian bytes in C order (bools one byte
    /// each): what the wire, spill files and GPU uploads carry.
    pub fn wire_bytes(&self) -> std::borrow::Cow<'_, [u8]> {
        use std::borrow::Cow;
        if cfg!(target_endian = "little") {
            let raw: Option<&[u8]> = match self {
                Chunk::Bool(_) => None,
                Chunk::I64(a) => a.as_slice().map(bytemuck::cast_slice),
                Chunk::F32(a) => a.as_slice().map(bytemuck::cast_slice),
                Chunk::F64(a) => a.as_slice().map(bytemuck::cast_slice),
            };
            if let Some(raw) = raw {
                return Cow::Borrowed(raw);
            }
        }
        Cow::Owned(self.to_le_bytes())
    }

    /// The elements' memory as bytes, when it is one C-ordered run of
    /// little-endian numbers (not for bools): what a spill file holds.
    pub fn raw_bytes(&self) -> Option<&[u8]> {
        if !cfg!(target_endian = "little") {
            return None;
        }
        match self {
            Chunk::Bool(_) => None,
            Chunk::I64(a) => a.as_slice().map(bytemuck::cast_slice),
            Chunk::F32(a) => a.as_slice().map(bytemuck::cast_slice),
            Chunk::F64(a) => a.as_slice().map(bytemuck::cast_slice),
        }
    }

    /// A chunk of `dtype` and `shape` whose bytes ([`Chunk::raw_bytes`])
    /// `r` reads straight into its own aligned memory: no staging buffer,
    /// no second copy (a spilled block of 200 MB is read back at the
    /// speed of one copy out of the page cache).
    pub fn read_raw(dtype: DType, shape: &[usize], r: &mut impl std::io::Read) -> std::io::Result<Chunk> {
        Chunk::fill_raw(dtype, shape, |bytes| r.read_exact(bytes))
    }

    /// A new block whose memory `fill` writes as raw little-endian bytes
    /// (a file read, a copy from a GPU): straight into the block, no
    /// staging buffer. Bool blocks have no raw form.
    pub fn fill_raw(
        dtype: DType,
        shape: &[usize],
        fill: impl FnOnce(&mut [u8]) -> std::io::Result<()>,
    ) -> std::io::Result<Chunk> {
        let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, "the shape's size overflows");
        let n = shape.iter().try_fold(1usize, |acc, &x| acc.checked_mul(x)).ok_or_else(bad)?;
        fn typed<T: Elem + bytemuck::Pod + Default>(
            n: usize,
            shape: &[usize],
            fill: impl FnOnce(&mut [u8]) -> std::io::Result<()>,
        ) -> std::io::Result<Chunk> {
            let mut v = vec![T::default(); n];
            fill(bytemuck::cast_slice_mut(&mut v))?;
            Chunk::from_vec(shape, v).map_err(std::io::Error::other)
        }
        if !cfg!(target_endian = "little") {
            return Err(std::io::Error::other("raw chunks are read on little-endian machines only"));
        }
        match dtype {
            DType::Bool => Err(std::io::Error::other("bool chunks have no raw form")),
            DType::I64 => typed::<i64>(n, shape, fill),
            DType::F32 => typed::<f32>(n, shape, fill),
            DType::F64 => typed::<f64>(n, shape, fill),
        }
    }
}

impl Serialize for Chunk {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let shape = self.shape().iter().map(|&n| n as u64).collect();
        WireOut { dtype: self.dtype(), shape, data: self.wire_bytes() }.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Chunk {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Chunk, D::Error> {
        let w = Wire::deserialize(d)?;
        Chunk::from_wire(w).map_err(serde::de::Error::custom)
    }
}

impl Chunk {
    /// The chunk that `wire_bytes` describes.
    pub fn from_wire_bytes(dtype: DType, shape: &[usize], data: &[u8]) -> Result<Chunk, ArrayError> {
        Chunk::from_wire(Wire {
            dtype,
            shape: shape.iter().map(|&n| n as u64).collect(),
            data: std::borrow::Cow::Borrowed(data),
        })
    }

    fn from_wire(w: Wire<'_>) -> Result<Chunk, ArrayError> {
        let shape: Vec<usize> = w.shape.iter().map(|&n| n as usize).collect();
        let n = shape.iter().try_fold(1usize, |acc, &x| acc.checked_mul(x));
        let size = w.dtype.itemsize();
        if n.and_then(|n| n.checked_mul(size)) != Some(w.data.len()) {
            return Err(ArrayError::Shape(format!(
                "{} bytes of {} data do not fill shape {}",
                w.data.len(),
                w.dtype,
                fmt_shape(&shape)
            )));
        }
        fn chunks<const N: usize>(data: &[u8]) -> impl Iterator<Item = [u8; N]> + '_ {
            data.chunks_exact(N).map(|c| {
                let mut b = [0u8; N];
                b.copy_from_slice(c);
                b
            })
        }
        let data = &w.data[..];
        // On a little-endian machine the bytes are the values: one copy
        // into an aligned vector.
        let le = cfg!(target_endian = "little");
        match w.dtype {
            DType::Bool => Chunk::from_vec(&shape, data.iter().map(|&b| b != 0).collect()),
            DType::I64 if le => Chunk::from_vec(&shape, bytemuck::pod_collect_to_vec::<u8, i64>(data)),
            DType::F32 if le => Chunk::from_vec(&shape, bytemuck::pod_collect_to_vec::<u8, f32>(data)),
            DType::F64 if le => Chunk::from_vec(&shape, bytemuck::pod_collect_to_vec::<u8, f64>(data)),
            DType::I64 => Chunk::from_vec(&shape, chunks::<8>(data).map(i64::from_le_bytes).collect()),
            DType::F32 => Chunk::from_vec(&shape, chunks::<4>(data).map(f32::from_le_bytes).collect()),
            DType::F64 => Chunk::from_vec(&shape, chunks::<8>(data).map(f64::from_le_bytes).collect()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn astype_casts_as_numpy() {
        let c = Chunk::from_vec(&[4], vec![-1.7f64, 0.0, 2.5, 3.0]).expect("chunk");
        assert_eq!(c.astype(DType::I64).scalars(), [-1, 0, 2, 3].map(Scalar::Int));
        assert_eq!(c.astype(DType::Bool).scalars(), [true, false, true, true].map(Scalar::Bool));
        assert_eq!(c.astype(DType::F64), c);
    }

    #[test]
    fn json_nests_by_shape() {
        let c = Chunk::from_vec(&[2, 3], vec![1i64, 2, 3, 4, 5, 6]).expect("chunk");
        assert_eq!(c.to_json(), "[[1,2,3],[4,5,6]]");
        let f = Chunk::from_vec(&[2], vec![f64::NAN, 1.5]).expect("chunk");
        assert_eq!(f.to_json(), "[null,1.5]");
        assert_eq!(Chunk::scalar(Scalar::Float(2.0)).to_json(), "2.0");
        assert_eq!(c.get_flat(4), Some(Scalar::Int(5)));
        assert_eq!(c.get_flat(6), None);
    }

    #[test]
    fn chunks_round_trip_through_msgpack_also_when_transposed() {
        let c = Chunk::from_vec(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).expect("chunk");
        let t = match &c {
            Chunk::F32(a) => Chunk::F32(a.clone().reversed_axes()),
            _ => unreachable!(),
        };
        for x in [c, t, Chunk::from_vec(&[3], vec![true, false, true]).expect("b")] {
            let bytes = rmp_serde::to_vec(&x).expect("encode");
            let back: Chunk = rmp_serde::from_slice(&bytes).expect("decode");
            assert_eq!(back, x);
        }
    }

    #[test]
    fn a_truncated_chunk_is_refused() {
        let w = Wire { dtype: DType::F64, shape: vec![2, 2], data: vec![0; 24].into() };
        let e = Chunk::from_wire(w).expect_err("short");
        assert!(e.to_string().contains("24 bytes of f64 data do not fill shape (2, 2)"), "{e}");
    }
}
