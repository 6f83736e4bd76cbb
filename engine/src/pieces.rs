//! The engine's one shuffle mechanism, for frames (`shuffle`, joins,
//! sorting, groupby `split_out`) and bags (`groupby`): a split task cuts
//! its input into one piece per output and writes each non-empty piece to
//! disk (`DIR/OUT/IN.piece`), returning only the pieces' sizes; a collect
//! task reads its output's pieces in input order and removes them. Data
//! never waits in the scheduler's memory, so a shuffle of data many times
//! larger than memory holds about one partition per running task.
//!
//! A graph that fails half-way leaves the pieces of its finished splits.
//! Every task definition a runtime holds that names a shuffle folder holds
//! a [`Lease`] on it (and so does a task while it runs); when the last
//! lease in the process goes (the graph's tasks were released, as after a
//! failed compute), the folder is removed with whatever it still holds.
//! Folders are named by the shuffle's token, so two runtimes computing the
//! same graph share one, and it stays while either needs it. What is left
//! anyway is removed when brisk exits (the [`Cleanup`] guard in `main`),
//! and folders of brisk processes that died without that are removed when
//! the next one starts. A process ending on a signal removes them at once
//! ([`Cleanup::now`]), since destructors do not run then.
//!
//! On a cluster no disk is shared: a worker installs a [`Remote`] so that
//! pieces go under its own local directory, each split's result names the
//! worker that wrote its pieces, and a collect fetches the pieces written
//! elsewhere from those workers. There pieces are not removed when read
//! (a collect run again after its worker died needs them again) but when
//! the scheduler frees the split's result ([`Pieces::remove_input`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use serde::{Deserialize, Serialize};

use crate::error::TaskError;
use crate::value::Value;

/// Where one shuffle's pieces live: a folder name, under the temporary
/// directory (or a worker's local directory, see [`Remote`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pieces {
    pub name: Arc<str>,
}

/// Fetches pieces written by another process: `(host, pieces, output,
/// inputs)` gives the bytes of those inputs' pieces for that output.
pub type FetchPieces = dyn Fn(&str, &Pieces, u32, &[u32]) -> Result<Vec<Vec<u8>>, TaskError> + Send + Sync;

/// How a cluster worker keeps and finds pieces: its local directory, the
/// address it serves them from, and how to fetch those of other workers.
pub struct Remote {
    pub root: PathBuf,
    pub host: String,
    pub fetch: Box<FetchPieces>,
}

static REMOTE: OnceLock<Remote> = OnceLock::new();

/// Make this process a cluster worker for shuffles (once; a second call is
/// refused with the `Remote` given back).
pub fn set_remote(remote: Remote) -> Result<(), Remote> {
    REMOTE.set(remote)
}

/// Folders this process has written pieces into.
static MADE: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Set when the process is ending: no folder is made after it, so none
/// can appear after [`Cleanup::now`] removed them.
static CLOSING: AtomicBool = AtomicBool::new(false);

const PREFIX: &str = "brisk-shuffle-";

fn io(what: &str, path: &Path, e: impl std::fmt::Display) -> TaskError {
    TaskError::user(format!("shuffle: cannot {what} {}: {e}", path.display()))
}

impl Pieces {
    /// A folder under the temporary directory named by the shuffle's token
    /// (and this process, so two processes never share pieces).
    pub fn new(token: &str) -> Pieces {
        Pieces { name: Arc::from(format!("{PREFIX}{}-{token}", std::process::id())) }
    }

    /// The folder named `name`, if that is a shuffle folder's name: a peer
    /// asks for pieces by name, and nothing else may be read that way.
    pub fn named(name: &str) -> Option<Pieces> {
        let ok = name.starts_with(PREFIX)
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        ok.then(|| Pieces { name: Arc::from(name) })
    }

    /// The pieces `inputs` of output `out` written here, read without
    /// removing them (a cluster worker serving them to a peer).
    pub fn read(&self, out: u32, inputs: &[u32]) -> Result<Vec<Vec<u8>>, TaskError> {
        inputs
            .iter()
            .map(|&i| {
                let path = self.path(out, i);
                std::fs::read(&path).map_err(|e| io("read the piece", &path, e))
            })
            .collect()
    }

    /// The folder, in this process.
    pub fn dir(&self) -> PathBuf {
        match REMOTE.get() {
            Some(r) => r.root.join(self.name.as_ref()),
            None => std::env::temp_dir().join(self.name.as_ref()),
        }
    }

    fn dir_key(&self) -> Arc<str> {
        Arc::from(self.dir().display().to_string())
    }

    /// The file of input `input`'s piece for output `out`.
    pub fn path(&self, out: u32, input: u32) -> PathBuf {
        self.dir().join(out.to_string()).join(format!("{input}.piece"))
    }

    /// What a split returns: the size of each piece, then (on a cluster
    /// worker) the address of the worker holding them.
    pub fn sizes(&self, sizes: Vec<Value>) -> Value {
        let mut sizes = sizes;
        if let Some(r) = REMOTE.get() {
            sizes.push(Value::Str(r.host.as_str().into()));
        }
        Value::list(sizes)
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
            // Under the lock, so that `Cleanup::now` sees every folder made.
            let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
            if CLOSING.load(Ordering::SeqCst) {
                return Err(io("write", &path, "brisk is ending"));
            }
            made.insert(self.dir().display().to_string());
            std::fs::create_dir_all(d).map_err(|e| io("create", d, e))?;
        }
        // Written beside, then renamed: a split that fails half-way (or a
        // reader on another worker) never sees a truncated piece.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let tmp = path.with_extension(format!("tmp-{}-{n}", std::process::id()));
        let written = (|| {
            let file = std::fs::File::create(&tmp).map_err(|e| io("write", &tmp, e))?;
            let mut w = std::io::BufWriter::new(file);
            write(&mut w).map_err(|e| io("write", &tmp, e))?;
            std::io::Write::flush(&mut w).map_err(|e| io("write", &tmp, e))?;
            std::fs::rename(&tmp, &path).map_err(|e| io("write", &path, e))
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }

    /// The pieces of output `out`, in input order, from the results of the
    /// split tasks (each a list of per-output sizes, 0 meaning no piece,
    /// and on a cluster the holder's address); locally the files are
    /// removed once read.
    pub fn take(&self, out: u32, splits: &[Value]) -> Result<Vec<Vec<u8>>, TaskError> {
        let remote = REMOTE.get();
        // (input, holder) of each piece, in input order.
        let mut wanted: Vec<(u32, Option<&str>)> = Vec::new();
        for (input, s) in splits.iter().enumerate() {
            let Value::List(sizes) = s else {
                return Err(TaskError::internal("a shuffle split gave no piece sizes"));
            };
            match sizes.get(out as usize) {
                Some(Value::Int(0)) => continue,
                Some(Value::Int(_)) => {}
                _ => return Err(TaskError::internal("a shuffle split without the piece asked for")),
            }
            let holder = match sizes.last() {
                Some(Value::Str(h)) => Some(h.as_ref()),
                _ => None,
            };
            wanted.push((input as u32, holder));
        }
        let Some(remote) = remote else {
            if let Some((_, Some(h))) = wanted.iter().find(|(_, h)| h.is_some()) {
                return Err(TaskError::user(format!(
                    "shuffle: the pieces are on worker {h}, and this process is not a worker of that cluster"
                )));
            }
            return self.take_local(out, &wanted);
        };
        let mut got: Vec<Option<Vec<u8>>> = vec![None; wanted.len()];
        // Pieces of one holder come in one request.
        let mut by_host: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, (input, holder)) in wanted.iter().enumerate() {
            match holder {
                Some(h) if *h != remote.host => by_host.entry(h).or_default().push(i),
                _ => {
                    let path = self.path(out, *input);
                    got[i] = Some(std::fs::read(&path).map_err(|e| io("read the piece", &path, e))?);
                }
            }
        }
        for (host, idx) in by_host {
            let inputs: Vec<u32> = idx.iter().map(|&i| wanted[i].0).collect();
            let bytes = (remote.fetch)(host, self, out, &inputs)?;
            if bytes.len() != idx.len() {
                return Err(TaskError::internal(format!("shuffle: {host} gave the wrong number of pieces")));
            }
            for (i, b) in idx.into_iter().zip(bytes) {
                got[i] = Some(b);
            }
        }
        Ok(got.into_iter().flatten().collect())
    }

    fn take_local(&self, out: u32, wanted: &[(u32, Option<&str>)]) -> Result<Vec<Vec<u8>>, TaskError> {
        let mut got = Vec::new();
        let mut paths = Vec::new();
        for (input, _) in wanted {
            let path = self.path(out, *input);
            got.push(std::fs::read(&path).map_err(|e| io("read the piece", &path, e))?);
            paths.push(path);
        }
        for p in &paths {
            let _ = std::fs::remove_file(p);
        }
        let d = self.dir();
        let _ = std::fs::remove_dir(d.join(out.to_string()));
        // The last output to finish leaves the folder empty; remove it then.
        if std::fs::remove_dir(&d).is_ok() {
            MADE.lock().unwrap_or_else(|e| e.into_inner()).remove(d.display().to_string().as_str());
        }
        Ok(got)
    }

    /// Remove the pieces split `input` wrote (for every output), and the
    /// folders left empty: on a cluster worker, when the scheduler frees
    /// that split's result.
    pub fn remove_input(&self, input: u32) {
        let d = self.dir();
        let Ok(outs) = std::fs::read_dir(&d) else { return };
        for o in outs.flatten() {
            let _ = std::fs::remove_file(o.path().join(format!("{input}.piece")));
            let _ = std::fs::remove_dir(o.path());
        }
        if std::fs::remove_dir(&d).is_ok() {
            MADE.lock().unwrap_or_else(|e| e.into_inner()).remove(d.display().to_string().as_str());
        }
    }
}

/// How many leases each shuffle folder has, over all runtimes.
static LEASES: Mutex<BTreeMap<Arc<str>, usize>> = Mutex::new(BTreeMap::new());

/// A hold on a shuffle folder: while one is held the folder stays; the
/// last one dropped removes it, with any pieces left in it.
#[derive(Debug)]
pub struct Lease(Arc<str>);

impl Lease {
    pub fn new(pieces: &Pieces) -> Lease {
        let dir = pieces.dir_key();
        *LEASES.lock().unwrap_or_else(|e| e.into_inner()).entry(dir.clone()).or_insert(0) += 1;
        Lease(dir)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut leases = LEASES.lock().unwrap_or_else(|e| e.into_inner());
        let Some(n) = leases.get_mut(&self.0) else { return };
        *n -= 1;
        if *n == 0 {
            leases.remove(&self.0);
            // Under the lock, so that a new lease on the same folder (the
            // same graph again) cannot see its pieces removed after it.
            let _ = std::fs::remove_dir_all(self.0.as_ref());
            MADE.lock().unwrap_or_else(|e| e.into_inner()).remove(self.0.as_ref());
        }
    }
}

/// Removes this process's shuffle folders when dropped: hold one for the
/// life of the program (not of a runtime: several may share the process).
#[must_use = "the folders are removed when the guard is dropped"]
pub struct Cleanup(());

impl Cleanup {
    /// Also removes the folders of brisk processes that no longer run.
    pub fn start() -> Cleanup {
        remove_stale(&std::env::temp_dir());
        Cleanup(())
    }

    /// Remove this process's shuffle folders now and make no new one: for a
    /// process about to end on a signal (SIGTERM), where no destructor runs.
    /// Tasks still running fail to write their pieces.
    pub fn now() {
        let made = {
            let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
            CLOSING.store(true, Ordering::SeqCst);
            std::mem::take(&mut *made)
        };
        let root = REMOTE.get().map(|r| r.root.display().to_string());
        for d in made.into_iter().chain(root) {
            // Again if a running task added a piece while the folder went.
            for _ in 0..3 {
                if std::fs::remove_dir_all(&d).is_ok() || !Path::new(&d).exists() {
                    break;
                }
            }
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let made = std::mem::take(&mut *MADE.lock().unwrap_or_else(|e| e.into_inner()));
        let root = REMOTE.get().map(|r| r.root.display().to_string());
        for d in made.into_iter().chain(root) {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// Removes `brisk-shuffle-PID-*` folders under `tmp` whose process is gone
/// (on Linux, where `/proc` says so; elsewhere nothing is removed).
fn remove_stale(tmp: &Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else { return };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)).and_then(|r| r.split('-').next())
        else {
            continue;
        };
        if pid.parse::<u32>().is_ok_and(|p| !alive(p)) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Whether process `pid` runs (on Linux; elsewhere always yes).
pub fn alive(pid: u32) -> bool {
    if cfg!(target_os = "linux") { Path::new("/proc").join(pid.to_string()).exists() } else { true }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_of_dead_processes_are_removed_and_live_ones_kept() {
        let tmp = std::env::temp_dir().join(format!("brisk-stale-test-{}", std::process::id()));
        let dead = tmp.join(format!("{PREFIX}4294967290-abc/0"));
        let live = tmp.join(format!("{PREFIX}{}-abc/0", std::process::id()));
        let other = tmp.join("brisk-shuffle-notapid/0");
        for d in [&dead, &live, &other] {
            std::fs::create_dir_all(d).expect("dir");
        }
        remove_stale(&tmp);
        assert_eq!(dead.parent().expect("p").exists(), !cfg!(target_os = "linux"));
        assert!(live.exists() && other.exists());
        std::fs::remove_dir_all(&tmp).expect("clean");
    }

    /// The folder stays while any lease on it is held, and the last one
    /// dropped removes it with the pieces in it.
    #[test]
    fn the_last_lease_removes_the_folder() {
        let pieces = Pieces::new(&format!("lease-test-{}", std::process::id()));
        let (a, b) = (Lease::new(&pieces), Lease::new(&pieces));
        pieces.write(0, 0, |w| w.write_all(b"piece").map_err(|e| e.to_string())).expect("write");
        let dir = pieces.dir();
        drop(a);
        assert!(dir.join("0").join("0.piece").exists(), "a lease is still held");
        drop(b);
        assert!(!dir.exists(), "the last lease removes the folder");
        assert!(!MADE.lock().expect("made").contains(dir.display().to_string().as_str()));
        // A folder never written is no error.
        drop(Lease::new(&pieces));
    }
}
