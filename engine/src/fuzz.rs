//! Property tests of the readers on bad bytes, run in the normal suite for
//! a bounded number of cases (and at most a few seconds each): random
//! bytes, and valid files truncated or with bytes flipped, fed to the CSV,
//! JSON lines, `.npy` header and Parquet footer readers. Each must return
//! a value or an error, never panic; where the answer is known (a
//! truncated file keeps its whole lines; a truncated `.npy` or Parquet
//! file cannot be read) it must be that answer. `catch_unwind` is only the
//! test's detector: the readers themselves return errors.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use polars::prelude::*;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;

use crate::frame::{csv, json, parquet};

/// Cases per reader, and the time after which a reader stops early.
const CASES: usize = 300;
const BUDGET: Duration = Duration::from_secs(3);

struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("brisk-fuzz-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("dir");
        Dir(d)
    }
    fn write(&self, name: &str, bytes: &[u8]) -> String {
        let p = self.0.join(name);
        std::fs::write(&p, bytes).expect("write");
        p.display().to_string()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// How a case was made from the valid file.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Made {
    Random,
    /// Cut after this many bytes.
    Truncated(usize),
    Flipped,
}

/// A case: random bytes, the valid bytes cut short, or with 1 to 8 bytes
/// replaced by random ones (often one of `special`, the bytes the format
/// gives meaning to).
fn mutate(rng: &mut Pcg64Mcg, valid: &[u8], special: &[u8]) -> (Vec<u8>, Made) {
    match rng.random_range(0..3u8) {
        0 => {
            let n = rng.random_range(0..512usize);
            let pick = |rng: &mut Pcg64Mcg| {
                if rng.random_range(0..2u8) == 0 {
                    special[rng.random_range(0..special.len())]
                } else {
                    rng.random::<u8>()
                }
            };
            ((0..n).map(|_| pick(rng)).collect(), Made::Random)
        }
        1 => {
            let cut = rng.random_range(0..valid.len());
            (valid[..cut].to_vec(), Made::Truncated(cut))
        }
        _ => {
            let mut b = valid.to_vec();
            for _ in 0..rng.random_range(1..=8usize) {
                let at = rng.random_range(0..b.len());
                b[at] = if rng.random_range(0..2u8) == 0 {
                    special[rng.random_range(0..special.len())]
                } else {
                    rng.random::<u8>()
                };
            }
            (b, Made::Flipped)
        }
    }
}

/// Run `cases` of one reader; fail on the first panic, naming the case.
fn run(tag: &str, valid: &[u8], special: &[u8], mut check: impl FnMut(&Dir, &[u8], Made)) {
    let dir = Dir::new(tag);
    let mut rng = Pcg64Mcg::seed_from_u64(0x5eed_0025);
    let t0 = Instant::now();
    for case in 0..CASES {
        if t0.elapsed() > BUDGET {
            break;
        }
        let (bytes, made) = mutate(&mut rng, valid, special);
        let r = catch_unwind(AssertUnwindSafe(|| check(&dir, &bytes, made)));
        if let Err(p) = r {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            let keep = std::env::temp_dir().join(format!("brisk-fuzz-{tag}-case-{case}"));
            let _ = std::fs::write(&keep, &bytes);
            panic!("{tag}: case {case} ({made:?}) panicked: {msg}; its bytes are in {}", keep.display());
        }
    }
}

/// Rows of a frame as text, to compare answers.
fn rows(df: &DataFrame) -> Vec<String> {
    (0..df.height())
        .map(|i| {
            df.columns()
                .iter()
                .map(|c| c.get(i).map(|v| v.to_string()).unwrap_or_default())
                .collect::<Vec<_>>()
                .join("|")
        })
        .collect()
}

/// The whole lines of `bytes` that are data (not the header, not blank).
fn whole_data_lines(bytes: &[u8], header: bool) -> usize {
    let whole = bytes.iter().filter(|&&b| b == b'\n').count();
    whole.saturating_sub(usize::from(header))
}

fn valid_csv() -> Vec<u8> {
    let mut t = String::from("id,key,x,flag\n");
    for i in 0..60 {
        let key = ["a", "bb", "NA", "", "ccc"][i % 5];
        let x = match i % 7 {
            0 => "NaN".to_string(),
            1 => String::new(),
            2 => format!(" {}.5 ", i),
            3 => "Infinity".into(),
            _ => format!("{}.25", i as i64 - 30),
        };
        t += &format!("{i},{key},{x},{}\n", i % 2 == 0);
    }
    t.into_bytes()
}

#[test]
fn csv_reader_never_panics_and_keeps_whole_lines() {
    let valid = valid_csv();
    let dir = Dir::new("csv-ref");
    let p = dir.write("ref.csv", &valid);
    let spec = csv::infer(std::slice::from_ref(&p), b',', true, &[]).expect("the valid file infers");
    let reference = rows(&csv::read(&spec, &p, 0, valid.len() as u64, None).expect("the valid file reads"));
    assert_eq!(reference.len(), 60);
    run("csv", &valid, b",\n\r\" NA-.e0123456789", |dir, bytes, made| {
        let p = dir.write("case.csv", bytes);
        let inferred = csv::infer(std::slice::from_ref(&p), b',', true, &[]).ok();
        // The reference schema too: a truncated file parsed as the whole one was.
        for (is_ref, spec) in inferred.iter().map(|s| (false, s)).chain([(true, &spec)]) {
            let whole = csv::read(spec, &p, 0, bytes.len() as u64, None);
            if let (Made::Truncated(_), Ok(df), true) = (made, &whole, is_ref) {
                let got = rows(df);
                let n = whole_data_lines(bytes, true);
                assert!(got.len() >= n, "a truncated file lost whole lines");
                assert_eq!(got[..n], reference[..n], "a truncated file's whole lines read differently");
            }
            // Blocks read as the whole file does, unless quotes make lines
            // span blocks (as in Dask).
            if !bytes.contains(&b'"') {
                let parts: Vec<_> = crate::io::blocks(bytes.len() as u64, Some(97))
                    .into_iter()
                    .map(|(a, b)| csv::read(spec, &p, a, b, None))
                    .collect();
                if let (Ok(w), true) = (&whole, parts.iter().all(Result::is_ok)) {
                    let got: Vec<String> =
                        parts.iter().flat_map(|r| r.as_ref().map(rows).unwrap_or_default()).collect();
                    assert_eq!(got, rows(w), "blocks and the whole file differ");
                }
            }
        }
    });
}

#[test]
fn json_reader_never_panics_and_keeps_whole_lines() {
    let mut valid = String::new();
    for i in 0..40 {
        valid += &format!(
            "{{\"id\": {i}, \"s\": {}, \"x\": {}, \"b\": {}}}\n",
            if i % 4 == 0 { "null".to_string() } else { format!("\"v\\u00e9{i}\"") },
            if i % 3 == 0 { format!("{i}") } else { format!("{}.5e1", i) },
            i % 2 == 0
        );
    }
    let valid = valid.into_bytes();
    let dir = Dir::new("json-ref");
    let p = dir.write("ref.jsonl", &valid);
    let schema = json::infer(&p).expect("the valid file infers");
    let reference =
        rows(&json::read(&schema, &p, 0, valid.len() as u64, None).expect("the valid file reads"));
    assert_eq!(reference.len(), 40);
    run("json", &valid, b"{}[]\":,\n\\ 0123456789.e-tfn", |dir, bytes, made| {
        let p = dir.write("case.jsonl", bytes);
        if let Ok(s) = json::infer(&p) {
            let _ = json::read(&s, &p, 0, bytes.len() as u64, None);
        }
        let whole = json::read(&schema, &p, 0, bytes.len() as u64, None);
        if let (Made::Truncated(_), Ok(df)) = (made, &whole) {
            let got = rows(df);
            let n = whole_data_lines(bytes, false);
            assert_eq!(got[..n], reference[..n], "a truncated file's whole lines read differently");
        }
    });
}

/// A `.npy` file of `f64` values `0, 1, …` of shape (rows, 3), written
/// here byte by byte (version 1, as NumPy writes small headers).
fn valid_npy(rows: usize) -> Vec<u8> {
    let dict = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': ({rows}, 3), }}");
    let mut head = dict.into_bytes();
    while (10 + head.len() + 1) % 64 != 0 {
        head.push(b' ');
    }
    head.push(b'\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend_from_slice(&(head.len() as u16).to_le_bytes());
    b.extend_from_slice(&head);
    for i in 0..rows * 3 {
        b.extend_from_slice(&(i as f64).to_le_bytes());
    }
    b
}

#[test]
fn npy_header_reader_never_panics_and_refuses_truncated_files() {
    use crate::array::npy;
    let valid = valid_npy(20);
    run("npy", &valid, b"{}()',: <>|fiub0123456789FalseTrue\x93NUMPY\x01\x02\x03", |dir, bytes, made| {
        let p = dir.write("case.npy", bytes);
        let p = Path::new(&p);
        let read = npy::read_header(p).and_then(|h| {
            let rows = h.shape.first().copied().unwrap_or(1);
            npy::read_rows(p, &h, 0, rows.min(1 << 16)).map(|c| (h, c))
        });
        match (made, read) {
            (Made::Truncated(_), Ok((h, _))) => {
                panic!("a truncated .npy file read as shape {:?}", h.shape)
            }
            (_, Ok((h, c))) => {
                let rows = h.shape.first().copied().unwrap_or(1).min(1 << 16);
                assert_eq!(c.shape().first().copied().unwrap_or(1), rows, "rows read");
            }
            (_, Err(_)) => {}
        }
    });
}

#[test]
fn parquet_footer_reader_never_panics_and_refuses_truncated_files() {
    let dir = Dir::new("pq-ref");
    let p = dir.0.join("ref.parquet");
    let mut df = df!(
        "a" => (0..50i64).collect::<Vec<_>>(),
        "s" => (0..50).map(|i| if i % 3 == 0 { None } else { Some(format!("s{i}")) }).collect::<Vec<_>>(),
        "x" => (0..50).map(|i| f64::from(i) / 4.0).collect::<Vec<_>>()
    )
    .expect("df");
    let f = std::fs::File::create(&p).expect("create");
    ParquetWriter::new(f).with_row_group_size(Some(20)).finish(&mut df).expect("write");
    let valid = std::fs::read(&p).expect("read");
    let reference = rows(&df);
    // Most flips land in the footer, which is what this exercises.
    let footer = valid.len().saturating_sub(400);
    let mut rng = Pcg64Mcg::seed_from_u64(7);
    let dir2 = Dir::new("pq");
    let t0 = Instant::now();
    let (mut read, mut refused) = (0, 0);
    for case in 0..CASES {
        if t0.elapsed() > BUDGET {
            break;
        }
        let (mut bytes, mut made) = mutate(&mut rng, &valid, b"\x00\x01\x15\x16\x19\x1c\x26\x2cPAR1\xff");
        if made == Made::Flipped && case % 4 != 0 {
            bytes = valid.clone();
            for _ in 0..rng.random_range(1..=4usize) {
                let at = rng.random_range(footer..valid.len());
                bytes[at] = rng.random::<u8>();
            }
            made = Made::Flipped;
        }
        let path = dir2.write("case.parquet", &bytes);
        let r = catch_unwind(AssertUnwindSafe(|| {
            let (schema, groups) = parquet::inspect(&path)?;
            let mut all = Vec::new();
            let mut offset = 0;
            for g in groups {
                let part = parquet::read(&path, offset, g.rows, None, &schema)
                    .map_err(|e| parquet::ParquetError::Bad(e.message))?;
                all.extend(rows(&part));
                offset += g.rows;
            }
            Ok::<_, parquet::ParquetError>(all)
        }));
        match r {
            Err(_) => {
                let keep = std::env::temp_dir().join(format!("brisk-fuzz-pq-case-{case}"));
                let _ = std::fs::write(&keep, &bytes);
                panic!("parquet: case {case} ({made:?}) panicked; its bytes are in {}", keep.display());
            }
            Ok(Ok(got)) if matches!(made, Made::Truncated(_)) => {
                panic!("parquet: a truncated file (case {case}) read as {} rows", got.len())
            }
            Ok(Ok(got)) if bytes == valid => assert_eq!(got, reference),
            Ok(Ok(_)) => read += 1,
            Ok(Err(_)) => refused += 1,
        }
    }
    // Both outcomes occur: the cases reach past the first check.
    assert!(read > 0 && refused > 0, "{read} read, {refused} refused");
}
