//! NumPy's `.npy` format (format versions 1–3): the header is read without
//! the data, so a lazy array knows its shape and type at once, and each
//! block task reads only its own rows. Written by hand: the format is a
//! magic string, a Python-literal dict with three keys, and raw elements;
//! the crate that parses it pulls a parser generator into the build.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use ndarray::{ArrayD, IxDyn};
use serde::{Deserialize, Serialize};

use super::chunk::Chunk;
use crate::staging::Staged;

use super::dtype::DType;
use super::error::ArrayError;
use super::error::fmt_shape;

const MAGIC: &[u8] = b"\x93NUMPY";

/// The element type stored in a file, as NumPy's `descr` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stored {
    /// `b'f'`, `b'i'`, `b'u'` or `b'b'`.
    pub kind: u8,
    pub size: usize,
    pub big_endian: bool,
}

impl Stored {
    /// The brisk type it loads as (smaller integers widen to i64).
    pub fn dtype(self) -> DType {
        match (self.kind, self.size) {
            (b'f', 2 | 4) => DType::F32,
            (b'f', _) => DType::F64,
            (b'b', _) => DType::Bool,
            _ => DType::I64,
        }
    }
}

/// What a file's header says.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub stored: Stored,
    pub fortran_order: bool,
    pub shape: Vec<usize>,
    /// Where the elements start.
    pub data_offset: u64,
}

fn bad(path: &Path, why: impl std::fmt::Display) -> ArrayError {
    ArrayError::Value(format!("{} is not a .npy file NumPy wrote: {why}", path.display()))
}

fn io(path: &Path, e: std::io::Error) -> ArrayError {
    ArrayError::Value(format!("cannot read {}: {e}", path.display()))
}

/// Read and check the header of `path`.
pub fn read_header(path: &Path) -> Result<Header, ArrayError> {
    let mut f = File::open(path).map_err(|e| io(path, e))?;
    let mut pre = [0u8; 8];
    f.read_exact(&mut pre).map_err(|_| bad(path, "it is shorter than the magic string"))?;
    if &pre[..6] != MAGIC {
        return Err(bad(path, "it does not start with \\x93NUMPY"));
    }
    let (len, start) = match pre[6] {
        1 => {
            let mut b = [0u8; 2];
            f.read_exact(&mut b).map_err(|_| bad(path, "truncated header"))?;
            (u16::from_le_bytes(b) as usize, 10)
        }
        2 | 3 => {
            let mut b = [0u8; 4];
            f.read_exact(&mut b).map_err(|_| bad(path, "truncated header"))?;
            (u32::from_le_bytes(b) as usize, 12)
        }
        v => return Err(bad(path, format!("unknown format version {v}"))),
    };
    if len > 1 << 20 {
        return Err(bad(path, format!("a header of {len} bytes")));
    }
    let mut text = vec![0u8; len];
    f.read_exact(&mut text).map_err(|_| bad(path, "truncated header"))?;
    let text = String::from_utf8(text).map_err(|_| bad(path, "the header is not text"))?;
    let (stored, fortran_order, shape) = parse_dict(&text).map_err(|w| bad(path, w))?;
    let header = Header { stored, fortran_order, shape, data_offset: (start + len) as u64 };
    let need = header.shape.iter().try_fold(stored.size as u64, |acc, &n| acc.checked_mul(n as u64));
    let have = f.metadata().map_err(|e| io(path, e))?.len();
    match need {
        Some(n) if header.data_offset.checked_add(n).is_some_and(|end| have >= end) => Ok(header),
        _ => Err(bad(
            path,
            format!(
                "it holds {} bytes of data but shape {} of {}-byte elements needs more",
                have.saturating_sub(header.data_offset),
                fmt_shape(&header.shape),
                stored.size
            ),
        )),
    }
}

/// The three keys of the header dict: `descr`, `fortran_order`, `shape`.
fn parse_dict(text: &str) -> Result<(Stored, bool, Vec<usize>), String> {
    let value = |key: &str| -> Result<&str, String> {
        let k = format!("'{key}'");
        let at = text.find(&k).ok_or_else(|| format!("the header has no {k}"))?;
        let rest = text[at + k.len()..].trim_start();
        rest.strip_prefix(':').map(str::trim_start).ok_or_else(|| format!("no value for {k}"))
    };
    let descr = value("descr")?;
    let descr = descr.strip_prefix('\'').and_then(|d| d.split('\'').next()).ok_or("descr is not a string")?;
    let b = descr.as_bytes();
    if b.len() < 3 {
        return Err(format!("unsupported element type '{descr}'"));
    }
    let big_endian = b[0] == b'>';
    let size: usize = descr[2..].parse().map_err(|_| format!("unsupported element type '{descr}'"))?;
    let supported =
        matches!((b[1], size), (b'f', 2 | 4 | 8) | (b'i', 1 | 2 | 4 | 8) | (b'u', 1 | 2 | 4) | (b'b', 1));
    if !matches!(b[0], b'<' | b'>' | b'|' | b'=') || !supported {
        return Err(format!("unsupported element type '{descr}' (f2, f4, f8, integers up to 64 bits, bool)"));
    }
    let stored = Stored { kind: b[1], size, big_endian };
    let fortran = value("fortran_order")?;
    let fortran_order = if fortran.starts_with("True") {
        true
    } else if fortran.starts_with("False") {
        false
    } else {
        return Err("fortran_order is not True or False".into());
    };
    let shape = value("shape")?;
    let inner = shape.strip_prefix('(').and_then(|s| s.split(')').next()).ok_or("shape is not a tuple")?;
    let dims = inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.trim_end_matches('L').parse::<usize>().map_err(|_| format!("bad dimension '{s}' in shape"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((stored, fortran_order, dims))
}

/// Decode raw elements into a chunk of `shape` (C order).
fn decode(stored: Stored, bytes: &[u8], shape: &[usize]) -> Result<Chunk, ArrayError> {
    let n = stored.size;
    let words = bytes.chunks_exact(n);
    let shape = IxDyn(shape);
    let err = |e: ndarray::ShapeError| ArrayError::Shape(e.to_string());
    macro_rules! num {
        ($t:ty, $w:literal) => {{
            words
                .map(|c| {
                    let mut a = [0u8; $w];
                    a.copy_from_slice(c);
                    if stored.big_endian { <$t>::from_be_bytes(a) } else { <$t>::from_le_bytes(a) }
                })
                .collect::<Vec<_>>()
        }};
    }
    Ok(match (stored.kind, n) {
        (b'f', 8) => Chunk::from_array(ArrayD::from_shape_vec(shape, num!(f64, 8)).map_err(err)?),
        (b'f', 4) => Chunk::from_array(ArrayD::from_shape_vec(shape, num!(f32, 4)).map_err(err)?),
        // Half floats widen to f32 exactly (NumPy's float16 has no brisk type of its own).
        (b'f', 2) => Chunk::from_array(
            ArrayD::from_shape_vec(
                shape,
                num!(u16, 2).into_iter().map(|b| half::f16::from_bits(b).to_f32()).collect(),
            )
            .map_err(err)?,
        ),
        (b'b', _) => Chunk::from_array(
            ArrayD::from_shape_vec(shape, bytes.iter().map(|&x| x != 0).collect()).map_err(err)?,
        ),
        (b'i', 8) => Chunk::from_array(ArrayD::from_shape_vec(shape, num!(i64, 8)).map_err(err)?),
        (b'i', 4) => Chunk::from_array(
            ArrayD::from_shape_vec(shape, num!(i32, 4).into_iter().map(i64::from).collect()).map_err(err)?,
        ),
        (b'i', 2) => Chunk::from_array(
            ArrayD::from_shape_vec(shape, num!(i16, 2).into_iter().map(i64::from).collect()).map_err(err)?,
        ),
        (b'i', 1) => Chunk::from_array(
            ArrayD::from_shape_vec(shape, num!(i8, 1).into_iter().map(i64::from).collect()).map_err(err)?,
        ),
        (b'u', 4) => Chunk::from_array(
            ArrayD::from_shape_vec(shape, num!(u32, 4).into_iter().map(i64::from).collect()).map_err(err)?,
        ),
        (b'u', 2) => Chunk::from_array(
            ArrayD::from_shape_vec(shape, num!(u16, 2).into_iter().map(i64::from).collect()).map_err(err)?,
        ),
        (b'u', 1) => Chunk::from_array(
            ArrayD::from_shape_vec(shape, num!(u8, 1).into_iter().map(i64::from).collect()).map_err(err)?,
        ),
        _ => return Err(ArrayError::Value(format!("unsupported element type {}{n}", stored.kind as char))),
    })
}

/// Read the rows `r0..r1` of axis 0 (all of the other axes) of a file
/// whose header is `h`. A Fortran-ordered file is read whole.
pub fn read_rows(path: &Path, h: &Header, r0: usize, r1: usize) -> Result<Chunk, ArrayError> {
    let mut f = File::open(path).map_err(|e| io(path, e))?;
    let total: usize = h.shape.iter().product();
    if h.fortran_order || h.shape.is_empty() {
        let mut bytes = vec![0u8; total * h.stored.size];
        f.seek(SeekFrom::Start(h.data_offset)).map_err(|e| io(path, e))?;
        f.read_exact(&mut bytes).map_err(|e| io(path, e))?;
        let rev: Vec<usize> = h.shape.iter().rev().copied().collect();
        let whole = decode(h.stored, &bytes, &rev)?;
        let axes: Vec<usize> = (0..h.shape.len()).rev().collect();
        let c = super::shape::transpose(&whole, &axes)?;
        if h.shape.is_empty() {
            return Ok(c);
        }
        let ranges: Vec<_> = h
            .shape
            .iter()
            .enumerate()
            .map(|(d, &n)| {
                let (s, e) = if d == 0 { (r0, r1) } else { (0, n) };
                (super::shape::AxisSlice { start: s, stop: e, step: 1 }, false)
            })
            .collect();
        return Ok(super::shape::slice(&c, &ranges)?.to_contiguous());
    }
    let row: usize = h.shape[1..].iter().product();
    let mut shape = h.shape.clone();
    shape[0] = r1 - r0;
    let mut bytes = vec![0u8; (r1 - r0) * row * h.stored.size];
    f.seek(SeekFrom::Start(h.data_offset + (r0 * row * h.stored.size) as u64)).map_err(|e| io(path, e))?;
    f.read_exact(&mut bytes).map_err(|e| io(path, e))?;
    decode(h.stored, &bytes, &shape)
}

/// Write a chunk as a version 1.0 `.npy` file (C order, little-endian):
/// to a hidden name beside `path`, synced, then renamed over it, so a
/// failed write leaves no short file and keeps an earlier one whole.
pub fn write(path: &Path, c: &Chunk) -> Result<(), ArrayError> {
    let staged = Staged::file("to_npy", path).map_err(|e| ArrayError::Value(e.to_string()))?;
    write_to(staged.path(), c)
        .map_err(|e| ArrayError::Value(format!("to_npy: cannot write {}: {e}", path.display())))?;
    staged.commit().map(|_| ()).map_err(|e| ArrayError::Value(e.to_string()))
}

fn write_to(path: &Path, c: &Chunk) -> Result<(), String> {
    let descr = match c.dtype() {
        DType::Bool => "|b1",
        DType::I64 => "<i8",
        DType::F32 => "<f4",
        DType::F64 => "<f8",
    };
    let shape = match c.shape() {
        [n] => format!("({n},)"),
        s => format!("({})", s.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // Magic (6) + version (2) + length (2) + header, padded to 64 with a newline last.
    let used = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - used % 64) % 64));
    header.push('\n');
    let len = u16::try_from(header.len()).map_err(|_| "the .npy header is too long".to_string())?;
    let werr = |e: std::io::Error| e.to_string();
    let mut f = File::create(path).map_err(werr)?;
    let mut w = std::io::BufWriter::new(&mut f);
    w.write_all(MAGIC).map_err(werr)?;
    w.write_all(&[1, 0]).map_err(werr)?;
    w.write_all(&len.to_le_bytes()).map_err(werr)?;
    w.write_all(header.as_bytes()).map_err(werr)?;
    w.write_all(&c.to_le_bytes()).map_err(werr)?;
    w.flush().map_err(werr)?;
    drop(w);
    f.sync_all().map_err(werr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_round_trip_and_bad_ones_are_refused() {
        let dir = std::env::temp_dir().join(format!("brisk-npy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let p = dir.join("a.npy");
        let c = Chunk::from_vec(&[3, 2], vec![1.5f64, 2.0, -3.0, 4.0, 5.0, 6.25]).expect("c");
        write(&p, &c).expect("write");
        let h = read_header(&p).expect("header");
        assert_eq!((h.shape.clone(), h.stored.dtype(), h.data_offset % 64), (vec![3, 2], DType::F64, 0));
        assert_eq!(read_rows(&p, &h, 0, 3).expect("all"), c);
        assert_eq!(read_rows(&p, &h, 1, 2).expect("row").to_json(), "[[-3.0,4.0]]");
        let t = dir.join("t.txt");
        std::fs::write(&t, "hello").expect("txt");
        assert!(read_header(&t).expect_err("text").to_string().contains("is not a .npy file"));
        let short = dir.join("short.npy");
        let bytes = std::fs::read(&p).expect("bytes");
        std::fs::write(&short, &bytes[..bytes.len() - 8]).expect("short");
        assert!(read_header(&short).expect_err("short").to_string().contains("needs more"));
        assert!(
            read_header(&dir.join("missing.npy")).expect_err("missing").to_string().contains("cannot read")
        );
        let (s, f, shape) =
            parse_dict("{'descr': '>i4', 'fortran_order': True, 'shape': (2, 3), }").expect("dict");
        assert_eq!((s.kind, s.size, s.big_endian, f, shape), (b'i', 4, true, true, vec![2, 3]));
        assert!(parse_dict("{'descr': '<c16', 'fortran_order': False, 'shape': (2,), }").is_err());
        // A second write replaces the file whole and leaves no hidden file.
        write(&p, &Chunk::from_vec(&[1], vec![7i64]).expect("c")).expect("again");
        assert_eq!(read_rows(&p, &read_header(&p).expect("header"), 0, 1).expect("read").to_json(), "[7]");
        assert!(
            std::fs::read_dir(&dir)
                .expect("list")
                .flatten()
                .all(|e| !e.file_name().to_string_lossy().starts_with('.'))
        );
        std::fs::remove_dir_all(&dir).expect("clean");
    }
}
