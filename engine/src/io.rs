//! Where bytes come from: blocks of files cut at line ends, as Dask's
//! `read_bytes(delimiter=b"\n")` (a block owns the lines that start inside
//! it), read whole or in cache-sized runs. CSV, JSON lines and text all
//! read through here. A compressed file (`.gz`, `.zst`, by its name, as
//! Dask's `compression="infer"`) cannot be cut: it is one block, read
//! through its decoder.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};

use crate::error::TaskError;

pub(crate) fn io_error(path: &str, e: std::io::Error) -> TaskError {
    TaskError::user(format!("cannot read {path}: {e}"))
}

/// A compression a file's name says it has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    Gzip,
    Zstd,
}

/// The compression of `path`, by its extension.
pub fn codec(path: &str) -> Option<Codec> {
    let lower = path.to_ascii_lowercase();
    if lower.ends_with(".gz") || lower.ends_with(".gzip") {
        Some(Codec::Gzip)
    } else if lower.ends_with(".zst") || lower.ends_with(".zstd") {
        Some(Codec::Zstd)
    } else {
        None
    }
}

impl Codec {
    pub fn name(self) -> &'static str {
        match self {
            Codec::Gzip => "gzip",
            Codec::Zstd => "zstd",
        }
    }
}

/// A failed read of a compressed file, naming what it was read as.
fn decode_error(path: &str, e: std::io::Error) -> TaskError {
    match codec(path) {
        Some(c) => TaskError::user(format!("cannot read {path} as {}: {e}", c.name())),
        None => io_error(path, e),
    }
}

/// The file's bytes, decompressed when its name says so.
pub fn decoded(path: &str) -> std::io::Result<Box<dyn Read>> {
    let f = std::io::BufReader::new(File::open(path)?);
    Ok(match codec(path) {
        // Multi-member gzip (as `cat a.gz b.gz`) reads as one stream.
        Some(Codec::Gzip) => Box::new(flate2::bufread::MultiGzDecoder::new(f)),
        Some(Codec::Zstd) => Box::new(zstd::stream::read::Decoder::with_buffer(f)?),
        None => Box::new(f),
    })
}

/// Block ranges of the file at `path`: one block for a compressed file,
/// which cannot be cut, else `blocks`.
pub fn file_blocks(path: &str, len: u64, blocksize: Option<u64>) -> Vec<(u64, u64)> {
    if codec(path).is_some() { vec![(0, len)] } else { blocks(len, blocksize) }
}

/// A compressed file's decompressed bytes: all of them for the block at
/// 0 (the only one), none for any other.
fn read_decoded(path: &str, start: u64) -> Result<Vec<u8>, TaskError> {
    if start > 0 {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    let mut r = decoded(path).map_err(|e| decode_error(path, e))?;
    loop {
        // A small file may expand past memory: refuse it, run by run.
        let want = out.len() as u64 + RUN as u64;
        crate::memory::check(want, || format!("decompressing {path}"))
            .map_err(|e| TaskError::user(e.to_string()))?;
        let got = (&mut r).take(RUN as u64).read_to_end(&mut out).map_err(|e| decode_error(path, e))?;
        if got == 0 {
            return Ok(out);
        }
    }
}

/// The bytes of the lines a block `[start, end)` owns: those that start
/// after the first line end at or past `start` (from 0 for the first
/// block), through the first line end at or past `end`.
pub fn read_block(path: &str, start: u64, end: u64) -> Result<Vec<u8>, TaskError> {
    if codec(path).is_some() {
        return read_decoded(path, start);
    }
    let Some((f, need)) = open_block(path, start, end)? else { return Ok(Vec::new()) };
    // Read into the spare capacity (not zeroed first, as `resize` would); a
    // block larger than what memory has left is refused, not aborted on.
    let mut buf = crate::memory::try_vec::<u8>(usize::try_from(need).unwrap_or(usize::MAX), || {
        format!("reading {path} (a block of {need} bytes)")
    })
    .map_err(|e| TaskError::user(e.to_string()))?;
    let got = f.take(need).read_to_end(&mut buf).map_err(|e| io_error(path, e))?;
    if got as u64 != need {
        return Err(shrank(path));
    }
    Ok(buf)
}

/// The file, positioned at the first byte block `[start, end)` owns, and
/// how many bytes it owns; `None` when it owns none.
fn open_block(path: &str, start: u64, end: u64) -> Result<Option<(File, u64)>, TaskError> {
    let mut f = File::open(path).map_err(|e| io_error(path, e))?;
    let len = f.metadata().map_err(|e| io_error(path, e))?.len();
    let end = end.min(len);
    let begin =
        if start == 0 { 0 } else { after_newline(&mut f, start, len).map_err(|e| io_error(path, e))? };
    if begin > end || begin >= len {
        return Ok(None);
    }
    let stop = after_newline(&mut f, end, len).map_err(|e| io_error(path, e))?;
    f.seek(SeekFrom::Start(begin)).map_err(|e| io_error(path, e))?;
    Ok(Some((f, stop - begin)))
}

fn shrank(path: &str) -> TaskError {
    io_error(path, std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the file shrank while read"))
}

/// How much of a file `for_each_lines` reads at a time: small enough that
/// the run just read is still in the core's cache when it is parsed.
pub(crate) const RUN: usize = 512 << 10;

/// Call `f` on the lines of block `[start, end)` (as `read_block` owns
/// them) in runs of whole lines, read `RUN` bytes at a time into `buf`,
/// so that a block is never in memory whole. Stops at the first `None`
/// from `f` and returns it.
pub fn for_each_lines(
    path: &str,
    start: u64,
    end: u64,
    buf: &mut Vec<u8>,
    mut f: impl FnMut(&[u8]) -> Option<()>,
) -> Result<Option<()>, TaskError> {
    buf.clear();
    if codec(path).is_some() {
        return for_each_decoded_lines(path, start, buf, f);
    }
    let Some((mut file, mut left)) = open_block(path, start, end)? else { return Ok(Some(())) };
    while left > 0 {
        // `buf` holds the unfinished last line of the previous run, if any.
        let want = left.min(RUN as u64);
        buf.reserve(want as usize);
        let got = (&mut file).take(want).read_to_end(buf).map_err(|e| io_error(path, e))?;
        if got as u64 != want {
            return Err(shrank(path));
        }
        left -= want;
        let whole = if left == 0 { buf.len() } else { memchr::memrchr(b'\n', buf).map_or(0, |i| i + 1) };
        if whole > 0 {
            if f(&buf[..whole]).is_none() {
                return Ok(None);
            }
            buf.drain(..whole);
        }
    }
    Ok(Some(()))
}

/// `for_each_lines` of a compressed file: its one block, decoded `RUN`
/// bytes at a time.
fn for_each_decoded_lines(
    path: &str,
    start: u64,
    buf: &mut Vec<u8>,
    mut f: impl FnMut(&[u8]) -> Option<()>,
) -> Result<Option<()>, TaskError> {
    if start > 0 {
        return Ok(Some(()));
    }
    let mut r = decoded(path).map_err(|e| decode_error(path, e))?;
    loop {
        let got = (&mut r).take(RUN as u64).read_to_end(buf).map_err(|e| decode_error(path, e))?;
        let whole = if got == 0 { buf.len() } else { memchr::memrchr(b'\n', buf).map_or(0, |i| i + 1) };
        if whole > 0 {
            if f(&buf[..whole]).is_none() {
                return Ok(None);
            }
            buf.drain(..whole);
        }
        if got == 0 {
            return Ok(Some(()));
        }
    }
}

/// The position just after the first `\n` at or past `pos` (or the end).
fn after_newline(f: &mut File, pos: u64, len: u64) -> std::io::Result<u64> {
    if pos >= len {
        return Ok(len);
    }
    f.seek(SeekFrom::Start(pos))?;
    let mut buf = [0u8; 64 * 1024];
    let mut at = pos;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(len);
        }
        if let Some(i) = buf[..n].iter().position(|&b| b == b'\n') {
            return Ok(at + i as u64 + 1);
        }
        at += n as u64;
    }
}

/// Block ranges of a file for `blocksize` (one block when `None`).
pub fn blocks(len: u64, blocksize: Option<u64>) -> Vec<(u64, u64)> {
    match blocksize {
        Some(bs) if bs > 0 && len > 0 => {
            (0..len.div_ceil(bs)).map(|i| (i * bs, ((i + 1) * bs).min(len))).collect()
        }
        _ => vec![(0, len)],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn compressed_files_are_one_block_read_whole_or_in_runs_of_whole_lines() {
        let dir = std::env::temp_dir().join(format!("brisk-io-codec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        // More than two runs of lines, the last without a line end.
        let text: String = (0..120_000).map(|i| format!("line {i}\n")).collect::<String>() + "last";
        let gz = dir.join("t.txt.gz");
        let mut enc =
            flate2::write::GzEncoder::new(File::create(&gz).expect("gz"), flate2::Compression::fast());
        enc.write_all(text.as_bytes()).expect("write gz");
        enc.finish().expect("finish gz");
        let zst = dir.join("t.txt.ZST");
        std::fs::write(&zst, zstd::encode_all(text.as_bytes(), 1).expect("zstd")).expect("write zst");
        for p in [gz.display().to_string(), zst.display().to_string()] {
            assert!(codec(&p).is_some(), "{p}");
            let len = std::fs::metadata(&p).expect("meta").len();
            assert_eq!(file_blocks(&p, len, Some(100)), vec![(0, len)]);
            assert_eq!(read_block(&p, 0, len).expect("whole"), text.as_bytes());
            assert!(read_block(&p, 5, len).expect("past 0").is_empty());
            let (mut lines, mut buf) = (Vec::new(), Vec::new());
            for_each_lines(&p, 0, len, &mut buf, |run| {
                assert!(run.ends_with(b"\n") || run.ends_with(b"last"), "a run of whole lines");
                lines.extend_from_slice(run);
                Some(())
            })
            .expect("runs");
            assert_eq!(lines, text.as_bytes());
        }
        let fake = dir.join("plain.gz");
        std::fs::write(&fake, "plain text, not gzip at all").expect("write");
        let e = read_block(&fake.display().to_string(), 0, 8).expect_err("not gzip");
        assert!(e.message.contains("plain.gz as gzip: invalid gzip header"), "{}", e.message);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
