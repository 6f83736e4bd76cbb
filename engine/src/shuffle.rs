//! The engine's one shuffle mechanism, for frames (`shuffle`, joins,
//! sorting, groupby `split_out`) and bags (`groupby`): a split task cuts
//! its input into one piece per output and writes each non-empty piece to
//! disk (`DIR/OUT/IN.piece`), returning only the pieces' sizes; a collect
//! task reads its output's pieces in input order and removes them. Data
//! never waits in the scheduler's memory, so a shuffle of data many times
//! larger than memory holds about one partition per running task.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::TaskError;
use crate::value::Value;

/// Where one shuffle's pieces live.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pieces {
    pub dir: Arc<str>,
}

fn io(what: &str, path: &Path, e: impl std::fmt::Display) -> TaskError {
    TaskError::user(format!("shuffle: cannot {what} {}: {e}", path.display()))
}

impl Pieces {
    /// A folder under the temporary directory named by the shuffle's token
    /// (and this process, so two processes never share pieces).
    pub fn new(token: &str) -> Pieces {
        let dir = std::env::temp_dir().join(format!("brisk-shuffle-{}-{token}", std::process::id()));
        Pieces { dir: Arc::from(dir.display().to_string()) }
    }

    fn path(&self, out: u32, input: u32) -> PathBuf {
        Path::new(self.dir.as_ref()).join(out.to_string()).join(format!("{input}.piece"))
    }

    /// Write the piece of input `input` for output `out`.
    pub fn write(
        &self,
        out: u32,
        input: u32,
        write: impl FnOnce(&mut dyn std::io::Write) -> Result<(), String>,
    ) -> Result<(), TaskError> {
        let path = self.path(out, input);
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d).map_err(|e| io("create", d, e))?;
        }
        let file = std::fs::File::create(&path).map_err(|e| io("write", &path, e))?;
        let mut w = std::io::BufWriter::new(file);
        write(&mut w).map_err(|e| io("write", &path, e))?;
        std::io::Write::flush(&mut w).map_err(|e| io("write", &path, e))
    }

    /// The pieces of output `out`, in input order, from the results of the
    /// split tasks (each a list of per-output sizes; 0 means no piece);
    /// the files are removed once read.
    pub fn take(&self, out: u32, splits: &[Value]) -> Result<Vec<Vec<u8>>, TaskError> {
        let mut got = Vec::new();
        let mut paths = Vec::new();
        for (input, s) in splits.iter().enumerate() {
            let Value::List(sizes) = s else {
                return Err(TaskError::internal("a shuffle split gave no piece sizes"));
            };
            match sizes.get(out as usize) {
                Some(Value::Int(0)) => continue,
                Some(Value::Int(_)) => {}
                _ => return Err(TaskError::internal("a shuffle split without the piece asked for")),
            }
            let path = self.path(out, input as u32);
            got.push(std::fs::read(&path).map_err(|e| io("read the piece", &path, e))?);
            paths.push(path);
        }
        for p in &paths {
            let _ = std::fs::remove_file(p);
        }
        let d = Path::new(self.dir.as_ref());
        let _ = std::fs::remove_dir(d.join(out.to_string()));
        // The last output to finish leaves the folder empty; remove it then.
        let _ = std::fs::remove_dir(d);
        Ok(got)
    }
}
