//! Where bytes come from: blocks of files cut at line ends, as Dask's
//! `read_bytes(delimiter=b"\n")` (a block owns the lines that start inside
//! it), read whole or in cache-sized runs. CSV, JSON lines and text all
//! read through here.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};

use crate::error::TaskError;

pub(crate) fn io_error(path: &str, e: std::io::Error) -> TaskError {
    TaskError::user(format!("cannot read {path}: {e}"))
}

/// The bytes of the lines a block `[start, end)` owns: those that start
/// after the first line end at or past `start` (from 0 for the first
/// block), through the first line end at or past `end`.
pub fn read_block(path: &str, start: u64, end: u64) -> Result<Vec<u8>, TaskError> {
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
