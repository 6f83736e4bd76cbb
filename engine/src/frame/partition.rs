//! A dataframe partition (Dask's "pandas per partition"): a polars
//! `DataFrame`, its size, and its wire form, an Arrow IPC stream. Nothing
//! here knows tasks or values, so `crate::value` can hold frames.

use polars::prelude::*;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A partition or a computed frame. Serialized as an Arrow IPC stream,
/// the format every Arrow reader understands.
#[derive(Clone, Debug, PartialEq)]
pub struct Frame(pub DataFrame);

impl Frame {
    pub fn height(&self) -> usize {
        self.0.height()
    }

    pub fn column_names(&self) -> Vec<String> {
        self.0.get_column_names().iter().map(|c| c.to_string()).collect()
    }

    /// One column as a frame of its own.
    pub fn select_one(&self, name: &str) -> Option<Frame> {
        self.0.select([name]).ok().map(Frame)
    }

    pub fn nbytes(&self) -> u64 {
        self.0.estimated_size() as u64
    }

    pub fn to_ipc(&self) -> PolarsResult<Vec<u8>> {
        let mut buf = Vec::new();
        let mut df = self.0.clone();
        IpcStreamWriter::new(&mut buf).finish(&mut df)?;
        Ok(buf)
    }

    pub fn from_ipc(bytes: &[u8]) -> PolarsResult<Frame> {
        Ok(Frame(IpcStreamReader::new(std::io::Cursor::new(bytes)).finish()?))
    }
}

impl Serialize for Frame {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let bytes = self.to_ipc().map_err(serde::ser::Error::custom)?;
        s.serialize_bytes(&bytes)
    }
}

impl<'de> Deserialize<'de> for Frame {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Frame, D::Error> {
        let bytes: serde_bytes_compat::Bytes = Deserialize::deserialize(d)?;
        Frame::from_ipc(&bytes.0).map_err(serde::de::Error::custom)
    }
}

/// Bytes that deserialize from either a byte string or a sequence of
/// numbers (formats differ in how they carry `serialize_bytes`).
mod serde_bytes_compat {
    use serde::de::{Deserialize, Deserializer, SeqAccess, Visitor};

    pub struct Bytes(pub Vec<u8>);

    impl<'de> Deserialize<'de> for Bytes {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Bytes;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("bytes")
                }
                fn visit_bytes<E>(self, v: &[u8]) -> Result<Bytes, E> {
                    Ok(Bytes(v.to_vec()))
                }
                fn visit_byte_buf<E>(self, v: Vec<u8>) -> Result<Bytes, E> {
                    Ok(Bytes(v))
                }
                fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Bytes, A::Error> {
                    let mut out = Vec::new();
                    while let Some(b) = seq.next_element::<u8>()? {
                        out.push(b);
                    }
                    Ok(Bytes(out))
                }
            }
            d.deserialize_byte_buf(V)
        }
    }
}

/// Stack frames of one schema.
pub fn concat(parts: &[&DataFrame]) -> PolarsResult<DataFrame> {
    let mut it = parts.iter();
    let Some(first) = it.next() else { return Ok(DataFrame::empty()) };
    let mut out = (*first).clone();
    for p in it {
        out.vstack_mut(p)?;
    }
    Ok(out)
}
