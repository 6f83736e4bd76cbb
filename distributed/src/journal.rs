//! The scheduler's journal (`brisk scheduler --journal FILE`): what a
//! scheduler restarted after a crash needs to carry on. It records the
//! graph (each task's definition and the closures' code), each client's
//! references, which worker holds which result, and the errors; a
//! scheduler started on the same file reads it back ([`Restored`]), waits
//! for the workers that hold results, and computes only what was lost
//! (Dask keeps nothing: distributed#1072).
//!
//! The file is a 16-byte magic, then records: an 8-byte length, the
//! body's xxh3 checksum (8 bytes), and the body (MessagePack). Records are
//! appended as the scheduler decides, written out before any peer hears of
//! the decision (`State::flush`), so a peer never knows of something the
//! journal lacks. A scheduler killed in the middle of a write leaves a torn
//! last record: reading stops at the first record that is short or fails
//! its checksum, and the file is kept aside (`FILE.damaged`, or `.damaged.N`) before a new
//! one is written. Nothing is synced to disk on each write: a SIGKILL
//! loses nothing the kernel was given; a power cut may lose the tail.
//!
//! The journal does not grow without end: once it is much larger than the
//! state it describes, the scheduler writes the state anew as a snapshot
//! (to a new file, renamed over the old one).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use brisk_engine::error::TaskError;
use brisk_engine::key::Key;
use brisk_engine::runner::Code;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::protocol::{HeldResult, TaskDef};

/// The first bytes of every journal: a file that does not start so is not
/// one, and is never written over.
pub const MAGIC: &[u8; 16] = b"brisk-journal\x00v1";

/// Bytes before each record's body: its length and its checksum.
const RECORD_HEADER: usize = 16;

/// Tasks per `Graph` record of a snapshot.
const SNAPSHOT_CHUNK: usize = 10_000;

/// Why a journal cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("{path}: {error}")]
    Io { path: PathBuf, error: std::io::Error },
    #[error(
        "{path} is not a brisk journal (it does not start with brisk's journal header); \
         it is left as it is: give --journal a new file or one a brisk scheduler wrote"
    )]
    NotAJournal { path: PathBuf },
    #[error("cannot encode a journal record: {0}")]
    Encode(String),
}

/// One record.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Entry {
    /// Where the scheduler listens: a restarted one listens there again.
    Address(String),
    /// Tasks (a definition already known is kept), the closures' code they
    /// refer to, and one reference of `client` per `wants` entry.
    Graph {
        client: u64,
        tasks: Vec<TaskDef>,
        wants: Vec<Key>,
        codes: Vec<Arc<Code>>,
    },
    /// One reference of `client` fewer per key.
    Release {
        client: u64,
        keys: Vec<Key>,
    },
    /// All references of `client` now (it attached, or they were dropped).
    Wants {
        client: u64,
        name: String,
        wants: Vec<(Key, u32)>,
    },
    ClientGone {
        client: u64,
    },
    Worker {
        id: u64,
        name: String,
    },
    /// The worker left: it holds nothing any more.
    WorkerGone {
        id: u64,
    },
    Held {
        worker: u64,
        held: Vec<HeldResult>,
    },
    Freed {
        worker: u64,
        keys: Vec<Key>,
    },
    Erred {
        key: Key,
        error: TaskError,
    },
    /// The tasks left the scheduler.
    Forget {
        keys: Vec<Key>,
    },
}

/// `Entry::Graph` with borrowed parts: a submission is written without
/// copying it (the same bytes as the owned variant; tested below).
#[derive(Serialize)]
enum GraphRef<'a> {
    Graph { client: u64, tasks: &'a [TaskDef], wants: &'a [Key], codes: &'a [Arc<Code>] },
}

/// A client as the journal knows it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RestoredClient {
    pub name: String,
    pub wants: FxHashMap<Key, u32>,
}

/// What a journal says, read back.
#[derive(Debug, Default)]
pub struct Restored {
    pub address: Option<String>,
    /// The tasks the scheduler held, by key.
    pub tasks: FxHashMap<Key, TaskDef>,
    pub codes: FxHashMap<u128, Arc<Code>>,
    pub clients: BTreeMap<u64, RestoredClient>,
    /// Which workers (by id) hold each result.
    pub held: FxHashMap<Key, Vec<u64>>,
    pub erred: FxHashMap<Key, TaskError>,
    /// Workers by id, with their names.
    pub workers: BTreeMap<u64, String>,
    /// Records read.
    pub records: u64,
    /// Why reading stopped before the end of the file, if it did.
    pub damage: Option<String>,
}

impl Restored {
    /// Whether there is anything to carry on with.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty() && self.clients.is_empty()
    }

    /// The workers (ids) that hold results of tasks still known.
    pub fn holders(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self
            .held
            .iter()
            .filter(|(k, _)| self.tasks.contains_key(*k))
            .flat_map(|(_, w)| w.iter().copied())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    fn apply(&mut self, e: Entry) {
        match e {
            Entry::Address(a) => self.address = Some(a),
            Entry::Graph { client, tasks, wants, codes } => {
                for c in codes {
                    self.codes.entry(c.id).or_insert(c);
                }
                for t in tasks {
                    self.tasks.entry(t.key.clone()).or_insert(t);
                }
                if !wants.is_empty() {
                    let c = self.clients.entry(client).or_default();
                    for k in wants {
                        let n = c.wants.entry(k).or_insert(0);
                        *n = n.saturating_add(1);
                    }
                }
            }
            Entry::Release { client, keys } => {
                let Some(c) = self.clients.get_mut(&client) else { return };
                for k in keys {
                    if let Some(n) = c.wants.get_mut(&k) {
                        *n -= 1;
                        if *n == 0 {
                            c.wants.remove(&k);
                        }
                    }
                }
            }
            Entry::Wants { client, name, wants } => {
                let wants = wants.into_iter().filter(|(_, n)| *n > 0).collect();
                self.clients.insert(client, RestoredClient { name, wants });
            }
            Entry::ClientGone { client } => {
                self.clients.remove(&client);
            }
            Entry::Worker { id, name } => {
                self.workers.insert(id, name);
            }
            Entry::WorkerGone { id } => {
                self.workers.remove(&id);
                self.held.retain(|_, ws| {
                    ws.retain(|w| *w != id);
                    !ws.is_empty()
                });
            }
            Entry::Held { worker, held } => {
                for h in held {
                    let ws = self.held.entry(h.key).or_default();
                    if !ws.contains(&worker) {
                        ws.push(worker);
                    }
                }
            }
            Entry::Freed { worker, keys } => {
                for k in keys {
                    if let Some(ws) = self.held.get_mut(&k) {
                        ws.retain(|w| *w != worker);
                        if ws.is_empty() {
                            self.held.remove(&k);
                        }
                    }
                }
            }
            Entry::Erred { key, error } => {
                self.erred.insert(key, error);
            }
            Entry::Forget { keys } => {
                for k in keys {
                    self.tasks.remove(&k);
                    self.held.remove(&k);
                    self.erred.remove(&k);
                }
            }
        }
    }

    /// Codes no task refers to any more are dropped.
    fn prune_codes(&mut self) {
        let used: rustc_hash::FxHashSet<u128> =
            self.tasks.values().flat_map(|t| t.codes.iter().copied()).collect();
        self.codes.retain(|id, _| used.contains(id));
    }
}

/// Read the records of `r` (after the magic; `len` bytes) into a
/// [`Restored`]; stops at the first damaged one.
fn read_records(mut r: impl Read, len: u64) -> Restored {
    let mut out = Restored::default();
    let mut left = len;
    loop {
        let mut head = [0u8; RECORD_HEADER];
        match read_full(&mut r, &mut head) {
            Ok(0) => break,
            Ok(n) if n < RECORD_HEADER => {
                out.damage = Some(format!("record {} is cut short", out.records + 1));
                break;
            }
            Ok(_) => {}
            Err(e) => {
                out.damage = Some(format!("record {}: {e}", out.records + 1));
                break;
            }
        }
        left = left.saturating_sub(RECORD_HEADER as u64);
        let size = u64::from_le_bytes(head[..8].try_into().unwrap_or_default());
        let sum = u64::from_le_bytes(head[8..].try_into().unwrap_or_default());
        if size > left {
            out.damage = Some(format!("record {} is cut short", out.records + 1));
            break;
        }
        let mut body = vec![0u8; size as usize];
        if read_full(&mut r, &mut body).map_or(true, |n| n < body.len()) {
            out.damage = Some(format!("record {} is cut short", out.records + 1));
            break;
        }
        left -= size;
        if xxhash_rust::xxh3::xxh3_64(&body) != sum {
            out.damage = Some(format!("record {} fails its checksum", out.records + 1));
            break;
        }
        match rmp_serde::from_slice::<Entry>(&body) {
            Ok(e) => out.apply(e),
            Err(e) => {
                out.damage = Some(format!("record {} cannot be read: {e}", out.records + 1));
                break;
            }
        }
        out.records += 1;
    }
    out.prune_codes();
    out
}

/// Read until `buf` is full or the input ends; the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Records of the same kind for the same worker, written as one.
enum Open {
    Held(u64, Vec<HeldResult>),
    Freed(u64, Vec<Key>),
    Forget(Vec<Key>),
}

/// The journal being written.
pub struct Journal {
    path: PathBuf,
    out: Option<BufWriter<File>>,
    /// The last batchable record, still growing.
    open: Option<Open>,
    /// Bytes in the file, and in it right after the last snapshot.
    size: u64,
    base: u64,
    /// Set once a write failed: logged once, then the journal is off.
    failed: Option<String>,
}

impl Journal {
    /// Open the journal at `path`, reading what it holds. A file that is
    /// not a journal is refused, not overwritten; one with a damaged tail
    /// is kept aside as `FILE.damaged` and its good records are used.
    pub fn open(path: &Path) -> Result<(Journal, Restored), JournalError> {
        let io = |error| JournalError::Io { path: path.to_path_buf(), error };
        let restored = match File::open(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Restored::default(),
            Err(e) => return Err(io(e)),
            Ok(f) => {
                let meta = f.metadata().map_err(io)?;
                if !meta.is_file() {
                    return Err(JournalError::NotAJournal { path: path.to_path_buf() });
                }
                let len = meta.len();
                let mut r = std::io::BufReader::with_capacity(1 << 20, f);
                let mut magic = [0u8; 16];
                let n = read_full(&mut r, &mut magic).map_err(io)?;
                if n == 0 {
                    Restored::default()
                } else if n < magic.len() || &magic != MAGIC {
                    return Err(JournalError::NotAJournal { path: path.to_path_buf() });
                } else {
                    let restored = read_records(r, len - MAGIC.len() as u64);
                    if restored.damage.is_some() {
                        std::fs::copy(path, aside_name(path)).map_err(io)?;
                    }
                    restored
                }
            }
        };
        let journal =
            Journal { path: path.to_path_buf(), out: None, open: None, size: 0, base: 0, failed: None };
        Ok((journal, restored))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Why writing stopped, if it did (the journal is then off).
    pub fn failed(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    /// Add a record; kinds that come in runs (results held, freed,
    /// forgotten) are gathered into one.
    pub fn add(&mut self, e: Entry) {
        let e = match (self.open.as_mut(), e) {
            (Some(Open::Held(w, list)), Entry::Held { worker, held }) if *w == worker => {
                list.extend(held);
                return;
            }
            (Some(Open::Freed(w, list)), Entry::Freed { worker, keys }) if *w == worker => {
                list.extend(keys);
                return;
            }
            (Some(Open::Forget(list)), Entry::Forget { keys }) => {
                list.extend(keys);
                return;
            }
            (_, e) => e,
        };
        self.close_open();
        match e {
            Entry::Held { worker, held } => self.open = Some(Open::Held(worker, held)),
            Entry::Freed { worker, keys } => self.open = Some(Open::Freed(worker, keys)),
            Entry::Forget { keys } => self.open = Some(Open::Forget(keys)),
            e => self.write(&e),
        }
    }

    /// Add an accepted submission, written from the message's own parts.
    pub fn add_graph(&mut self, client: u64, tasks: &[TaskDef], wants: &[Key], codes: &[Arc<Code>]) {
        self.close_open();
        self.write(&GraphRef::Graph { client, tasks, wants, codes });
    }

    fn close_open(&mut self) {
        match self.open.take() {
            None => {}
            Some(Open::Held(worker, held)) => self.write(&Entry::Held { worker, held }),
            Some(Open::Freed(worker, keys)) => self.write(&Entry::Freed { worker, keys }),
            Some(Open::Forget(keys)) => self.write(&Entry::Forget { keys }),
        }
    }

    fn write<T: Serialize>(&mut self, e: &T) {
        if self.failed.is_some() {
            return;
        }
        let Some(out) = self.out.as_mut() else { return };
        let r = encode_record(e).and_then(|rec| {
            out.write_all(&rec)
                .map(|()| rec.len() as u64)
                .map_err(|error| JournalError::Io { path: self.path.clone(), error })
        });
        match r {
            Ok(n) => self.size += n,
            Err(e) => self.fail(e.to_string()),
        }
    }

    fn fail(&mut self, why: String) {
        crate::log::warn("scheduler", &format!("the journal is off from now on: {why}"));
        self.failed = Some(why);
        self.out = None;
    }

    /// Hand what was added to the kernel (before any peer hears of it).
    pub fn flush(&mut self) {
        self.close_open();
        if let Some(out) = self.out.as_mut()
            && let Err(error) = out.flush()
        {
            let e = JournalError::Io { path: self.path.clone(), error };
            self.fail(e.to_string());
        }
    }

    /// Whether the file has grown well past the state it describes.
    pub fn wants_snapshot(&self) -> bool {
        self.failed.is_none() && self.size > 2 * self.base + (64 << 20)
    }

    /// Write `entries` (the whole state) as a new file and put it in place
    /// of the old one; appending goes on there.
    pub fn snapshot(&mut self, entries: impl IntoIterator<Item = Entry>) {
        self.open = None;
        self.out = None;
        if self.failed.is_some() {
            return;
        }
        match self.write_snapshot(entries) {
            Ok(size) => {
                self.size = size;
                self.base = size;
            }
            Err(e) => self.fail(e.to_string()),
        }
    }

    fn write_snapshot(&mut self, entries: impl IntoIterator<Item = Entry>) -> Result<u64, JournalError> {
        let io = |error| JournalError::Io { path: self.path.clone(), error };
        let tmp = tmp_name(&self.path);
        let result = (|| {
            let mut out = BufWriter::with_capacity(1 << 20, File::create(&tmp).map_err(io)?);
            out.write_all(MAGIC).map_err(io)?;
            let mut size = MAGIC.len() as u64;
            for e in entries {
                let rec = encode_record(&e)?;
                out.write_all(&rec).map_err(io)?;
                size += rec.len() as u64;
            }
            let file = out.into_inner().map_err(|e| io(e.into_error()))?;
            file.sync_all().map_err(io)?;
            std::fs::rename(&tmp, &self.path).map_err(io)?;
            if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
                let _ = File::open(dir).and_then(|d| d.sync_all());
            }
            Ok(size)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        let size = result?;
        let file = std::fs::OpenOptions::new().append(true).open(&self.path).map_err(io)?;
        self.out = Some(BufWriter::with_capacity(1 << 20, file));
        Ok(size)
    }
}

/// The graph's tasks as snapshot records of at most `SNAPSHOT_CHUNK` tasks,
/// each with the code its tasks refer to.
pub fn graph_entries(tasks: Vec<TaskDef>, code: impl Fn(u128) -> Option<Arc<Code>>) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut it = tasks.into_iter().peekable();
    while it.peek().is_some() {
        let chunk: Vec<TaskDef> = it.by_ref().take(SNAPSHOT_CHUNK).collect();
        let mut ids: Vec<u128> = chunk.iter().flat_map(|t| t.codes.iter().copied()).collect();
        ids.sort_unstable();
        ids.dedup();
        let codes = ids.iter().filter_map(|id| code(*id)).collect();
        out.push(Entry::Graph { client: 0, tasks: chunk, wants: Vec::new(), codes });
    }
    out
}

fn encode_record<T: Serialize>(e: &T) -> Result<Vec<u8>, JournalError> {
    let mut rec = vec![0u8; RECORD_HEADER];
    rmp_serde::encode::write(&mut rec, e).map_err(|e| JournalError::Encode(e.to_string()))?;
    let body = &rec[RECORD_HEADER..];
    let (len, sum) = (body.len() as u64, xxhash_rust::xxh3::xxh3_64(body));
    rec[..8].copy_from_slice(&len.to_le_bytes());
    rec[8..RECORD_HEADER].copy_from_slice(&sum.to_le_bytes());
    Ok(rec)
}

/// `FILE.damaged`, or `FILE.damaged.N` where earlier ones are kept.
fn aside_name(path: &Path) -> PathBuf {
    let name = |n: u32| {
        let mut s = path.as_os_str().to_owned();
        s.push(if n == 0 { ".damaged".to_string() } else { format!(".damaged.{n}") });
        PathBuf::from(s)
    };
    (0..).map(name).find(|p| !p.exists()).unwrap_or_else(|| name(0))
}

fn tmp_name(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(format!(".tmp-{}", std::process::id()));
    PathBuf::from(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Blob;

    fn task(key: &str, deps: &[&str]) -> TaskDef {
        TaskDef {
            key: Key::new(key),
            deps: deps.iter().map(|d| Key::new(*d)).collect(),
            order: 0,
            annotations: None,
            op: Blob(Arc::from(&b"op"[..])),
            codes: vec![7],
        }
    }

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("brisk-journal-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("temp dir");
        d
    }

    fn held(key: &str) -> HeldResult {
        HeldResult { key: Key::new(key), nbytes: 8, pinned: false }
    }

    /// Write a few records the way the scheduler does.
    fn write_some(path: &Path) {
        let (mut j, r) = Journal::open(path).expect("opens");
        assert!(r.is_empty());
        j.snapshot([Entry::Address("tcp://127.0.0.1:9".into())]);
        let code = Arc::new(Code::new(vec![]));
        let mut code = (*code).clone();
        code.id = 7;
        j.add_graph(1, &[task("a", &[]), task("b", &["a"])], &[Key::new("b")], &[Arc::new(code)]);
        j.add(Entry::Worker { id: 5, name: "w5".into() });
        j.add(Entry::Held { worker: 5, held: vec![held("a")] });
        j.add(Entry::Held { worker: 5, held: vec![held("b")] });
        j.add(Entry::Freed { worker: 5, keys: vec![Key::new("a")] });
        j.add(Entry::Erred { key: Key::new("b"), error: TaskError::user("no") });
        j.flush();
    }

    #[test]
    fn records_read_back_as_the_state_they_describe() {
        let d = dir("read");
        let path = d.join("j");
        write_some(&path);
        let (_, r) = Journal::open(&path).expect("opens");
        assert_eq!(r.damage, None);
        assert_eq!(r.address.as_deref(), Some("tcp://127.0.0.1:9"));
        assert_eq!(r.tasks.len(), 2);
        assert_eq!(r.codes.len(), 1);
        assert_eq!(r.clients[&1].wants[&Key::new("b")], 1);
        assert_eq!(r.held.get(&Key::new("b")), Some(&vec![5]));
        assert_eq!(r.held.get(&Key::new("a")), None);
        assert_eq!(r.holders(), vec![5]);
        assert_eq!(r.erred[&Key::new("b")].message, "no");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_torn_tail_keeps_the_records_before_it_and_the_file_aside() {
        let d = dir("torn");
        let path = d.join("j");
        write_some(&path);
        let full = std::fs::read(&path).expect("reads");
        // Every cut of the file reads without a panic; the last cut loses
        // only the last record.
        for cut in MAGIC.len() + 1..full.len() {
            std::fs::write(&path, &full[..cut]).expect("writes");
            let (_, r) = Journal::open(&path).expect("opens");
            assert!(r.damage.is_some() || r.records > 0, "cut at {cut}");
        }
        // Each damaged file was kept aside under its own name.
        let kept = std::fs::read_dir(&d).expect("dir").count();
        assert!(kept > 1, "{kept} files");
        let next = aside_name(&path);
        std::fs::write(&path, &full[..full.len() - 3]).expect("writes");
        let (_, r) = Journal::open(&path).expect("opens");
        assert!(r.damage.as_deref().is_some_and(|d| d.contains("cut short")), "{:?}", r.damage);
        assert_eq!(r.erred.len(), 0, "the last record (an error) is lost");
        assert_eq!(r.tasks.len(), 2);
        assert_eq!(std::fs::read(&next).expect("kept aside"), &full[..full.len() - 3]);
        // A flipped byte fails the checksum.
        let mut bad = full.clone();
        let at = full.len() - 10;
        bad[at] ^= 0x55;
        std::fs::write(&path, &bad).expect("writes");
        let (_, r) = Journal::open(&path).expect("opens");
        assert!(r.damage.is_some());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_file_that_is_not_a_journal_is_refused_and_left_alone() {
        let d = dir("foreign");
        let path = d.join("notes.txt");
        std::fs::write(&path, b"my precious notes, not a journal").expect("writes");
        let e = Journal::open(&path).err().expect("refused");
        assert!(matches!(e, JournalError::NotAJournal { .. }), "{e}");
        assert!(e.to_string().contains("not a brisk journal"), "{e}");
        assert_eq!(std::fs::read(&path).expect("reads"), b"my precious notes, not a journal");
        assert!(matches!(Journal::open(&d), Err(JournalError::NotAJournal { .. })));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_borrowed_graph_record_reads_as_the_owned_one() {
        let tasks = vec![task("a", &[])];
        let wants = vec![Key::new("a")];
        let codes: Vec<Arc<Code>> = Vec::new();
        let borrowed =
            encode_record(&GraphRef::Graph { client: 3, tasks: &tasks, wants: &wants, codes: &codes })
                .expect("encodes");
        let owned = encode_record(&Entry::Graph { client: 3, tasks, wants, codes }).expect("encodes");
        assert_eq!(borrowed, owned);
    }

    #[test]
    fn runs_of_records_are_written_as_one_and_keep_their_order() {
        let d = dir("runs");
        let path = d.join("j");
        let (mut j, _) = Journal::open(&path).expect("opens");
        j.snapshot([]);
        j.add(Entry::Held { worker: 1, held: vec![held("x")] });
        j.add(Entry::Held { worker: 1, held: vec![held("y")] });
        j.add(Entry::Freed { worker: 1, keys: vec![Key::new("x")] });
        j.add(Entry::Held { worker: 1, held: vec![held("x")] });
        j.flush();
        let (_, r) = Journal::open(&path).expect("opens");
        assert_eq!(r.records, 3);
        assert_eq!(r.held.len(), 2, "x was freed, then held again");
        let _ = std::fs::remove_dir_all(&d);
    }
}
