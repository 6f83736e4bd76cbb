//! Text files as bags: the lines of a block (read through `crate::io`, which
//! cuts blocks at line ends as Dask's `read_bytes(delimiter=b"\n")`), kept
//! with their `"\n"` as Python's text mode gives them; the word-count fast
//! path that never builds a value per word; and `to_textfiles`. The string
//! stages themselves are `records::apply_str`.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::sync::Arc;

use super::agg::{Agg, Sink};
use super::records::split_whitespace;
use super::stage::Stage;
use super::vkey::VKey;
use crate::error::TaskError;
use crate::io::read_block;
use crate::value::Value;

pub fn as_text<'a>(path: &str, start: u64, bytes: &'a [u8]) -> Result<&'a str, TaskError> {
    std::str::from_utf8(bytes).map_err(|e| {
        TaskError::user(format!(
            "{path} is not UTF-8 text (invalid byte near offset {})",
            start + e.valid_up_to() as u64
        ))
    })
}

/// Lines with their line end, `\r\n` read as `\n` (Python's universal
/// newlines); the last line may have none.
pub fn lines(text: &str) -> impl Iterator<Item = std::borrow::Cow<'_, str>> {
    text.split_inclusive('\n').map(|l| match l.strip_suffix("\r\n") {
        Some(body) => std::borrow::Cow::Owned(format!("{body}\n")),
        None => std::borrow::Cow::Borrowed(l),
    })
}

pub fn read_lines(path: &str, start: u64, end: u64) -> Result<Vec<Value>, TaskError> {
    let bytes = read_block(path, start, end)?;
    let text = as_text(path, start, &bytes)?;
    Ok(lines(text).map(|l| Value::str(&l)).collect())
}

/// The text pipelines that need no value per word: lines, then any
/// `str_lower`/`str_strip`, then `str_split` and `flatten`, into
/// `frequencies`, `count` or the words themselves. `None`: not such a
/// pipeline (the general path runs it).
pub fn fast(
    path: &str,
    start: u64,
    end: u64,
    stages: &[Stage],
    sink: &Sink,
) -> Result<Option<Value>, TaskError> {
    let n = stages.len();
    if n < 2 || !matches!(stages[n - 1], Stage::Flatten) {
        return Ok(None);
    }
    let Stage::StrSplit(sep) = &stages[n - 2] else { return Ok(None) };
    let per_line = &stages[..n - 2];
    if !per_line.iter().all(|s| matches!(s, Stage::StrLower | Stage::StrStrip)) {
        return Ok(None);
    }
    if !matches!(sink, Sink::Records | Sink::Partial(Agg::Count) | Sink::Partial(Agg::Frequencies)) {
        return Ok(None);
    }
    let bytes = read_block(path, start, end)?;
    let text = as_text(path, start, &bytes)?;
    let mut counts: HashMap<Box<str>, i64> = HashMap::new();
    let mut order: Vec<Box<str>> = Vec::new();
    let mut words: Vec<Value> = Vec::new();
    let mut total = 0i64;
    let mut each_word = |w: &str| match sink {
        Sink::Partial(Agg::Frequencies) => match counts.get_mut(w) {
            Some(c) => *c += 1,
            None => {
                counts.insert(w.into(), 1);
                order.push(w.into());
            }
        },
        Sink::Partial(Agg::Count) => total += 1,
        _ => words.push(Value::str(w)),
    };
    for line in lines(text) {
        let mut line = line;
        for s in per_line {
            line = match s {
                Stage::StrLower => std::borrow::Cow::Owned(line.to_lowercase()),
                _ => match line {
                    std::borrow::Cow::Borrowed(b) => std::borrow::Cow::Borrowed(b.trim()),
                    std::borrow::Cow::Owned(o) => std::borrow::Cow::Owned(o.trim().to_string()),
                },
            };
        }
        match sep {
            None => split_whitespace(&line).for_each(&mut each_word),
            Some(sep) => line.split(&**sep).for_each(&mut each_word),
        }
    }
    Ok(Some(match sink {
        Sink::Partial(Agg::Frequencies) => Value::list(
            order
                .into_iter()
                .map(|w| {
                    let c = counts[&w];
                    Value::list(vec![Value::Str(Arc::from(w)), Value::Int(c)])
                })
                .collect(),
        ),
        Sink::Partial(Agg::Count) => Value::Int(total),
        _ => Value::list(words),
    }))
}

/// `to_textfiles`: the records, which must be strings, joined by `\n`
/// (Dask's default `last_endline=False`).
pub fn write_lines(path: &str, records: &[Value]) -> Result<(), TaskError> {
    let mut out = String::new();
    for (i, r) in records.iter().enumerate() {
        let Value::Str(s) = r else {
            return Err(TaskError::user(format!(
                "to_textfiles: record {i} is {}, not a string (map it to text first)",
                r.type_name()
            )));
        };
        if i > 0 {
            out.push('\n');
        }
        out.push_str(s);
    }
    let write = || -> std::io::Result<()> {
        let mut f = File::create(path)?;
        f.write_all(out.as_bytes())?;
        f.sync_data()
    };
    write().map_err(|e| TaskError::user(format!("cannot write {path}: {e}")))
}

/// For tests and `VKey` users: the partial counts as a map.
pub fn counts_of(pairs: &Value) -> HashMap<VKey, i64> {
    let mut m = HashMap::new();
    if let Value::List(items) = pairs {
        for p in items.iter() {
            if let Value::List(kv) = p
                && let [k, Value::Int(c)] = kv.as_slice()
            {
                *m.entry(VKey(k.clone())).or_insert(0) += c;
            }
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{RUN, blocks, for_each_lines};

    fn file(name: &str, text: &str) -> String {
        let dir = std::env::temp_dir().join(format!("brisk-text-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let p = dir.join(name);
        std::fs::write(&p, text).expect("write");
        p.display().to_string()
    }

    /// Runs are whole lines, and together they are the block's bytes,
    /// also where a line is longer than a run and at the file's end.
    #[test]
    fn runs_of_lines_make_up_the_block() {
        let mut text = String::new();
        for i in 0..40_000 {
            let len = if i == 777 { RUN + 1000 } else { i % 37 };
            text += &"x".repeat(len);
            text += "\n";
        }
        text += "no line end";
        let path = file("runs.txt", &text);
        let size = text.len() as u64;
        let mut buf = Vec::new();
        for (start, end) in
            [(0, size), (0, 1), (5, 300_000), (300_000, size), (size - 3, size), (size, size + 9)]
        {
            let want = read_block(&path, start, end).expect("block");
            let mut got = Vec::new();
            let mut runs = 0;
            let fed = for_each_lines(&path, start, end, &mut buf, |run| {
                assert!(run.ends_with(b"\n") || run.ends_with(b"no line end"), "a run of whole lines");
                got.extend_from_slice(run);
                runs += 1;
                Some(())
            });
            assert_eq!(fed.expect("read"), Some(()));
            assert!(got == want, "block {start}..{end}: {} bytes vs {}", got.len(), want.len());
            if want.len() > 2 * RUN {
                assert!(runs > 2, "read in runs");
            }
        }
        // The callback stops the reading.
        let mut calls = 0;
        let fed = for_each_lines(&path, 0, size, &mut buf, |_| {
            calls += 1;
            None
        });
        assert_eq!((fed.expect("read"), calls), (None, 1));
        assert!(for_each_lines("/no/such/file", 0, 1, &mut buf, |_| Some(())).is_err());
    }

    fn strs(v: &[Value]) -> Vec<String> {
        v.iter()
            .map(|x| match x {
                Value::Str(s) => s.to_string(),
                o => format!("{o:?}"),
            })
            .collect()
    }

    #[test]
    fn every_line_lands_in_exactly_one_block() {
        let text = "alpha beta\ngamma\n\ndelta epsilon zeta\r\neta\nlast line without end";
        let p = file("blocks.txt", text);
        let whole = strs(&read_lines(&p, 0, text.len() as u64).expect("read"));
        assert_eq!(whole.len(), 6);
        assert_eq!(whole[3], "delta epsilon zeta\n", "\\r\\n is read as \\n");
        assert_eq!(whole[5], "last line without end");
        for bs in 1..=text.len() as u64 + 2 {
            let mut got = Vec::new();
            for (s, e) in blocks(text.len() as u64, Some(bs)) {
                got.extend(strs(&read_lines(&p, s, e).expect("read")));
            }
            assert_eq!(got, whole, "blocksize {bs}");
        }
    }

    #[test]
    fn the_fast_word_paths_agree_with_the_general_one() {
        let text = "The cat  the HAT\n\tthe end \nHat\n";
        let p = file("words.txt", text);
        let stages = [Stage::StrLower, Stage::StrSplit(None), Stage::Flatten];
        let n = text.len() as u64;
        let words = fast(&p, 0, n, &stages, &Sink::Records).expect("ok").expect("fast");
        let Value::List(w) = &words else { panic!("{words:?}") };
        assert_eq!(strs(w), ["the", "cat", "the", "hat", "the", "end", "hat"]);
        let freq = fast(&p, 0, n, &stages, &Sink::Partial(Agg::Frequencies)).expect("ok").expect("fast");
        let counts = counts_of(&freq);
        assert_eq!(counts[&VKey(Value::str("the"))], 3);
        assert_eq!(counts[&VKey(Value::str("hat"))], 2);
        assert_eq!(fast(&p, 0, n, &stages, &Sink::Partial(Agg::Count)).expect("ok"), Some(Value::Int(7)));
        let by_space = [Stage::StrSplit(Some(Arc::from(" "))), Stage::Flatten];
        let Some(Value::List(w)) = fast(&p, 0, n, &by_space, &Sink::Records).expect("ok") else { panic!() };
        assert_eq!(strs(&w)[..5], ["The", "cat", "", "the", "HAT\n"], "as Python's str.split(' ')");
        assert_eq!(fast(&p, 0, n, &[Stage::Flatten], &Sink::Records).expect("ok"), None);
    }

    #[test]
    fn bad_files_are_clear_errors() {
        let e = read_lines("/nonexistent/brisk.txt", 0, 10).expect_err("missing");
        assert!(e.message.contains("cannot read /nonexistent/brisk.txt"), "{e}");
        let dir = std::env::temp_dir().join(format!("brisk-text-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let p = dir.join("binary.txt");
        std::fs::write(&p, b"ok\n\xff\xfe\n").expect("write");
        let e = read_lines(&p.display().to_string(), 0, 6).expect_err("binary");
        assert!(e.message.contains("is not UTF-8 text (invalid byte near offset 3)"), "{e}");
    }
}
