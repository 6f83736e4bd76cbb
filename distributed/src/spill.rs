//! A worker's results: in memory while they fit under a target, the least
//! recently used beyond it in files (Dask's `SpillBuffer`, a zict LRU of
//! a fast and a slow mapping).
//!
//! The buffer is plain bookkeeping under the worker's lock; the disk I/O
//! happens outside it. A spill takes a victim ([`SpillBuffer::victim`]: the
//! value stays readable in memory meanwhile), writes it with [`write`] and
//! hands the outcome back ([`SpillBuffer::spilled_to_disk`]), which moves the
//! entry to disk unless it was freed or replaced while being written. An
//! array block is written raw (a header, then its memory) and read straight
//! into a new block's memory; any other value as its wire encoding (a
//! frame's Arrow IPC stream goes out whole): no per-element encoding.
//!
//! Reading back differs from Dask on purpose: a spilled input comes back
//! into memory only if it fits under the target; otherwise the task gets
//! the value for its own use and the file stays. Dask moves it back and
//! evicts another result for it, so a sum over spilled chunks writes one
//! chunk for every chunk it reads.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use brisk_engine::array::chunk::Chunk;
use brisk_engine::array::dtype::DType;
use brisk_engine::array::gpu::place;
use brisk_engine::key::Key;
use brisk_engine::value::Value;
use rustc_hash::FxHashMap;

pub use crate::protocol::Home;

struct Fast {
    value: Value,
    /// Host bytes.
    nbytes: u64,
    /// Device bytes (0: no GPU block in it).
    device: u64,
    home: Home,
    /// Its place in the access order.
    tick: u64,
    /// Being moved by this spill (0: not): to disk for a host value, to
    /// the host for a value on the device.
    spilling: u64,
}

struct Slow {
    path: PathBuf,
    nbytes: u64,
    /// The file's size.
    disk: u64,
    home: Home,
}

/// Where a result is.
#[derive(Clone)]
pub enum Lookup {
    /// In memory; with `Home::Device` a value not on the device now is its
    /// host copy, to be put back ([`place::to_device`]) before use and
    /// offered back with [`SpillBuffer::back_on_device`].
    Memory(Value, Home),
    /// On disk: read it with [`read`], then offer it back with
    /// [`SpillBuffer::read_back`] (or, for `Home::Device`,
    /// [`SpillBuffer::back_on_device`]).
    Disk(PathBuf, Home),
    Missing,
}

/// A result chosen to go to disk, or from the device to the host.
pub struct Victim {
    pub key: Key,
    pub value: Value,
    pub path: PathBuf,
    /// Names this spill, so a result replaced meanwhile is told apart.
    pub id: u64,
}

pub struct SpillBuffer {
    fast: FxHashMap<Key, Fast>,
    /// Access order of `fast`, oldest first.
    order: BTreeMap<u64, Key>,
    slow: FxHashMap<Key, Slow>,
    fast_bytes: u64,
    slow_bytes: u64,
    disk_bytes: u64,
    /// Being written now.
    spilling_bytes: u64,
    /// Device bytes of results on the device, and of those being copied
    /// to the host now.
    device_bytes: u64,
    moving_bytes: u64,
    /// Bytes of device results now on the host or on disk.
    off_device: u64,
    tick: u64,
    dir: PathBuf,
}

impl SpillBuffer {
    /// A buffer spilling into `dir` (created on the first spill).
    pub fn new(dir: PathBuf) -> SpillBuffer {
        SpillBuffer {
            fast: FxHashMap::default(),
            order: BTreeMap::new(),
            slow: FxHashMap::default(),
            fast_bytes: 0,
            slow_bytes: 0,
            disk_bytes: 0,
            spilling_bytes: 0,
            device_bytes: 0,
            moving_bytes: 0,
            off_device: 0,
            tick: 0,
            dir,
        }
    }

    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    /// Store a result in memory (replacing any older one under its key).
    pub fn insert(&mut self, key: Key, value: Value) {
        self.insert_placed(key, value, Home::Host);
    }

    /// Store a result that belongs at `home` (a device result's host copy
    /// fetched from a peer, say); one holding GPU blocks belongs there.
    pub fn insert_placed(&mut self, key: Key, value: Value, home: Home) {
        let device = place::device_bytes(&value);
        let home = if device > 0 { Home::Device } else { home };
        self.insert_at(key, value, device, home);
    }

    fn insert_at(&mut self, key: Key, value: Value, device: u64, home: Home) {
        self.remove(&key);
        let nbytes = value.nbytes();
        let tick = self.next_tick();
        self.order.insert(tick, key.clone());
        self.fast_bytes += nbytes;
        self.device_bytes += device;
        if home == Home::Device && device == 0 {
            self.off_device += nbytes;
        }
        self.fast.insert(key, Fast { value, nbytes, device, home, tick, spilling: 0 });
    }

    /// Where `key` is; a hit in memory counts as a use.
    pub fn get(&mut self, key: &Key) -> Lookup {
        let tick = self.next_tick();
        if let Some(f) = self.fast.get_mut(key) {
            self.order.remove(&f.tick);
            f.tick = tick;
            self.order.insert(tick, key.clone());
            return Lookup::Memory(f.value.clone(), f.home);
        }
        match self.slow.get(key) {
            Some(s) => Lookup::Disk(s.path.clone(), s.home),
            None => Lookup::Missing,
        }
    }

    /// `key`'s value if it is in memory, without counting a use (a peer's
    /// read is not a reason to keep it there).
    pub fn peek(&self, key: &Key) -> Lookup {
        if let Some(f) = self.fast.get(key) {
            return Lookup::Memory(f.value.clone(), f.home);
        }
        match self.slow.get(key) {
            Some(s) => Lookup::Disk(s.path.clone(), s.home),
            None => Lookup::Missing,
        }
    }

    pub fn contains(&self, key: &Key) -> bool {
        self.fast.contains_key(key) || self.slow.contains_key(key)
    }

    /// Drop a result, and its file if it has one; `true` if it was held.
    pub fn remove(&mut self, key: &Key) -> bool {
        if let Some(f) = self.fast.remove(key) {
            self.order.remove(&f.tick);
            self.fast_bytes -= f.nbytes;
            self.device_bytes -= f.device;
            if f.spilling != 0 {
                if f.device > 0 {
                    self.moving_bytes -= f.device;
                } else {
                    self.spilling_bytes -= f.nbytes;
                }
            }
            if f.home == Home::Device && f.device == 0 {
                self.off_device -= f.nbytes;
            }
            return true;
        }
        if let Some(s) = self.slow.remove(key) {
            self.slow_bytes -= s.nbytes;
            self.disk_bytes -= s.disk;
            if s.home == Home::Device {
                self.off_device -= s.nbytes;
            }
            let _ = std::fs::remove_file(&s.path);
            return true;
        }
        false
    }

    /// Every result held, in memory or on disk, with its size in memory.
    pub fn held(&self) -> impl Iterator<Item = (&Key, u64)> {
        self.fast.iter().map(|(k, f)| (k, f.nbytes)).chain(self.slow.iter().map(|(k, s)| (k, s.nbytes)))
    }

    /// Bytes of results in memory, those being written included.
    pub fn memory(&self) -> u64 {
        self.fast_bytes
    }

    /// Bytes of results in memory that no spill is writing yet.
    pub fn unspilled(&self) -> u64 {
        self.fast_bytes - self.spilling_bytes
    }

    /// Bytes of results on disk (their size in memory) and of their files.
    pub fn spilled(&self) -> (u64, u64) {
        (self.slow_bytes, self.disk_bytes)
    }

    /// Device bytes of results on the device, those being copied out
    /// included.
    pub fn on_device(&self) -> u64 {
        self.device_bytes
    }

    /// Device bytes of results on the device that no spill is moving yet.
    pub fn unmoved(&self) -> u64 {
        self.device_bytes - self.moving_bytes
    }

    /// Bytes of device results that are on the host or on disk now.
    pub fn off_device(&self) -> u64 {
        self.off_device
    }

    /// The least recently used host result in memory that no spill is
    /// writing, marked as being written.
    pub fn victim(&mut self) -> Option<Victim> {
        self.oldest(|f| f.device == 0)
    }

    /// The least recently used result on the device that no spill is
    /// moving, marked as being moved to the host.
    pub fn device_victim(&mut self) -> Option<Victim> {
        self.oldest(|f| f.device > 0)
    }

    fn oldest(&mut self, kind: impl Fn(&Fast) -> bool) -> Option<Victim> {
        let key = self
            .order
            .values()
            .find(|k| self.fast.get(*k).is_some_and(|f| f.spilling == 0 && kind(f)))?
            .clone();
        let id = self.next_tick();
        let path = self.dir.join(format!("{id}"));
        let f = self.fast.get_mut(&key)?;
        f.spilling = id;
        if f.device > 0 {
            self.moving_bytes += f.device;
        } else {
            self.spilling_bytes += f.nbytes;
        }
        Some(Victim { key, value: f.value.clone(), path, id })
    }

    /// Whether `victim` is still the value it names (not freed or replaced
    /// while it was moved).
    fn current(&self, victim: &Victim) -> bool {
        self.fast.get(&victim.key).is_some_and(|f| f.spilling == victim.id)
    }

    /// The outcome of writing `victim`: on success the result leaves
    /// memory (unless it was freed or replaced meanwhile: then the file
    /// goes); on failure it stays in memory and may be chosen again.
    pub fn spilled_to_disk(&mut self, victim: Victim, written: Result<u64, ()>) {
        if !self.current(&victim) {
            if written.is_ok() {
                let _ = std::fs::remove_file(&victim.path);
            }
            return;
        }
        let Some(f) = self.fast.get_mut(&victim.key) else { return };
        self.spilling_bytes -= f.nbytes;
        match written {
            Ok(disk) => {
                let Some(f) = self.fast.remove(&victim.key) else { return };
                self.order.remove(&f.tick);
                self.fast_bytes -= f.nbytes;
                self.slow_bytes += f.nbytes;
                self.disk_bytes += disk;
                let slow = Slow { path: victim.path, nbytes: f.nbytes, disk, home: f.home };
                self.slow.insert(victim.key, slow);
            }
            Err(()) => f.spilling = 0,
        }
    }

    /// The outcome of copying device `victim` to the host: on success its
    /// host copy takes its place (in the same place of the access order),
    /// and may be spilled to disk like any host result; on failure it stays
    /// on the device.
    pub fn moved_to_host(&mut self, victim: Victim, copied: Result<Value, ()>) {
        if !self.current(&victim) {
            return;
        }
        let Some(f) = self.fast.get_mut(&victim.key) else { return };
        self.moving_bytes -= f.device;
        f.spilling = 0;
        let Ok(host) = copied else { return };
        let nbytes = host.nbytes();
        self.device_bytes -= f.device;
        self.fast_bytes = self.fast_bytes - f.nbytes + nbytes;
        self.off_device += nbytes;
        *f = Fast { value: host, nbytes, device: 0, home: Home::Device, tick: f.tick, spilling: 0 };
    }

    /// A spilled result was read back: it returns to memory (and its file
    /// goes) if it fits under `target` bytes of results in memory;
    /// otherwise only the reader uses it and it stays on disk.
    pub fn read_back(&mut self, key: &Key, path: &Path, value: &Value, target: u64) {
        let fits = self.fast_bytes + value.nbytes() <= target;
        if !fits || self.slow.get(key).is_none_or(|s| s.path != path || s.home != Home::Host) {
            return;
        }
        self.remove(key);
        self.insert(key.clone(), value.clone());
    }

    /// A device result read from the host (`path`: `None`) or from disk
    /// was put back on the device for a task: it stays there (its host
    /// copy or file goes) if it fits under `target` device bytes;
    /// otherwise only the task uses it.
    pub fn back_on_device(&mut self, key: &Key, path: Option<&Path>, value: &Value, target: u64) {
        let device = place::device_bytes(value);
        if device == 0 || self.device_bytes + device > target {
            return;
        }
        let same = match path {
            None => {
                self.fast.get(key).is_some_and(|f| f.home == Home::Device && f.device == 0 && f.spilling == 0)
            }
            Some(p) => self.slow.get(key).is_some_and(|s| s.path == p),
        };
        if same {
            self.insert_at(key.clone(), value.clone(), device, Home::Device);
        }
    }
}

/// The first bytes of a spill file holding one array block raw: 0xc1 is
/// never the first byte of MessagePack, so the two forms cannot be confused.
const RAW: &[u8; 8] = b"\xc1brisk-r";

/// Write `value` to `path`; the file's size. An array block in C order is
/// written raw (a short header: dtype, shape; then its memory as it is),
/// anything else as its wire encoding.
pub fn write(path: &Path, value: &Value) -> std::io::Result<u64> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let file = std::fs::File::create(path)?;
    let written = match value {
        Value::Array(c) if c.raw_bytes().is_some() => write_raw(file, c),
        _ => {
            let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
            let written = rmp_serde::encode::write(&mut out, value).map_err(std::io::Error::other);
            written.and_then(|()| out.flush())
        }
    };
    match written {
        Ok(()) => Ok(std::fs::metadata(path)?.len()),
        Err(e) => {
            // A half-written file (a full disk) is not left behind.
            let _ = std::fs::remove_file(path);
            Err(e)
        }
    }
}

fn write_raw(mut file: std::fs::File, c: &Chunk) -> std::io::Result<()> {
    let Some(bytes) = c.raw_bytes() else { return Err(std::io::Error::other("not a raw chunk")) };
    let code: u8 = match c.dtype() {
        DType::I64 => 1,
        DType::F32 => 2,
        DType::F64 => 3,
        DType::Bool => return Err(std::io::Error::other("bool chunks have no raw form")),
    };
    let mut head = Vec::with_capacity(RAW.len() + 2 + 8 * c.ndim());
    head.extend_from_slice(RAW);
    head.push(code);
    head.push(c.ndim() as u8);
    for &n in c.shape() {
        head.extend_from_slice(&(n as u64).to_le_bytes());
    }
    file.write_all(&head)?;
    file.write_all(bytes)
}

/// Read a value [`write`] wrote.
pub fn read(path: &Path) -> std::io::Result<Value> {
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    let mut magic = [0u8; 8];
    if len >= magic.len() as u64 {
        file.read_exact(&mut magic)?;
        if &magic == RAW {
            return read_raw(&mut file, len).map(|c| Value::Array(std::sync::Arc::new(c)));
        }
    }
    let mut bytes = Vec::with_capacity(len as usize);
    bytes.extend_from_slice(&magic[..magic.len().min(len as usize)]);
    file.read_to_end(&mut bytes)?;
    rmp_serde::from_slice(&bytes).map_err(std::io::Error::other)
}

fn read_raw(file: &mut std::fs::File, len: u64) -> std::io::Result<Chunk> {
    let bad =
        |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("spill file: {what}"));
    let mut two = [0u8; 2];
    file.read_exact(&mut two)?;
    let dtype = match two[0] {
        1 => DType::I64,
        2 => DType::F32,
        3 => DType::F64,
        _ => return Err(bad("an unknown dtype")),
    };
    let mut shape = Vec::with_capacity(two[1] as usize);
    for _ in 0..two[1] {
        let mut n = [0u8; 8];
        file.read_exact(&mut n)?;
        shape.push(usize::try_from(u64::from_le_bytes(n)).map_err(|_| bad("a dimension too large"))?);
    }
    let head = (RAW.len() + 2 + 8 * shape.len()) as u64;
    let n = shape.iter().try_fold(1u64, |acc, &x| acc.checked_mul(x as u64));
    if n.and_then(|n| n.checked_mul(dtype.itemsize() as u64)) != len.checked_sub(head) {
        return Err(bad("its size does not match its shape"));
    }
    Chunk::read_raw(dtype, &shape, file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use brisk_engine::array::chunk::Chunk;

    fn key(i: u64) -> Key {
        Key::block("x-1".into(), &[i as u32])
    }

    fn block(fill: f64) -> Value {
        let chunk = Chunk::from_vec(&[1000], vec![fill; 1000]).expect("a block");
        Value::Array(std::sync::Arc::new(chunk))
    }

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("brisk-spill-test-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    /// Spill the LRU entries until at most `target` bytes stay in memory.
    fn spill_to(b: &mut SpillBuffer, target: u64) {
        while b.unspilled() > target {
            let Some(v) = b.victim() else { break };
            let w = write(&v.path, &v.value).map_err(|_| ());
            b.spilled_to_disk(v, w);
        }
    }

    #[test]
    fn blocks_are_written_raw_and_read_back_exact_and_bad_files_are_errors() {
        let d = dir("raw");
        let path = d.join("v");
        let f64s = Chunk::from_vec(&[3, 2], vec![1.5f64, -2.0, 3.25, 4.0, f64::NAN, 6.0]).expect("a block");
        let i64s = Chunk::from_vec(&[4], vec![1i64, -2, i64::MAX, 0]).expect("a block");
        let f32s = Chunk::from_vec(&[2, 1], vec![0.5f32, 7.0]).expect("a block");
        let bools = Chunk::from_vec(&[2], vec![true, false]).expect("a block");
        let empty = Chunk::from_vec(&[0, 3], Vec::<f64>::new()).expect("a block");
        let transposed = brisk_engine::array::shape::transpose(&f64s, &[1, 0]).expect("a view");
        for c in [f64s, i64s, f32s, bools, empty, transposed] {
            let v = Value::Array(std::sync::Arc::new(c.clone()));
            let size = write(&path, &v).expect("writes");
            let bytes = std::fs::read(&path).expect("reads");
            assert_eq!(bytes.len() as u64, size);
            assert_eq!(bytes.starts_with(RAW), c.raw_bytes().is_some(), "{c:?}");
            let Value::Array(back) = read(&path).expect("reads back") else { panic!("not an array") };
            assert_eq!(back.shape(), c.shape());
            assert_eq!(back.dtype(), c.dtype());
            assert_eq!(format!("{back:?}"), format!("{c:?}"));
            // Any cut or flipped byte is an error or a value, never a panic.
            for cut in 0..bytes.len() {
                std::fs::write(&path, &bytes[..cut]).expect("writes");
                let _ = read(&path);
            }
            for i in 0..bytes.len().min(40) {
                let mut b = bytes.clone();
                b[i] ^= 0xff;
                std::fs::write(&path, &b).expect("writes");
                let _ = read(&path);
            }
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_least_recently_used_go_to_disk_and_come_back_exact() {
        let d = dir("lru");
        let mut b = SpillBuffer::new(d.clone());
        for i in 0..5 {
            b.insert(key(i), block(i as f64));
        }
        // Touch 0: 1 and 2 are now the oldest.
        assert!(matches!(b.get(&key(0)), Lookup::Memory(..)));
        let n = block(0.0).nbytes();
        spill_to(&mut b, 3 * n);
        assert_eq!(b.memory(), 3 * n);
        assert_eq!(b.spilled().0, 2 * n);
        assert!(b.spilled().1 >= 2 * 8000);
        for i in [1, 2] {
            let Lookup::Disk(p, _) = b.get(&key(i)) else { panic!("key {i} should be on disk") };
            assert_eq!(read(&p).expect("read back"), block(i as f64));
        }
        assert!(matches!(b.get(&key(0)), Lookup::Memory(..)));
        assert_eq!(std::fs::read_dir(&d).expect("dir").count(), 2);
        // Freeing a spilled result removes its file.
        assert!(b.remove(&key(1)));
        assert_eq!(std::fs::read_dir(&d).expect("dir").count(), 1);
        assert_eq!(b.spilled().0, n);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_result_freed_or_replaced_while_written_is_not_resurrected() {
        let d = dir("race");
        let mut b = SpillBuffer::new(d.clone());
        b.insert(key(0), block(0.0));
        b.insert(key(1), block(1.0));
        let v = b.victim().expect("a victim");
        assert_eq!(v.key, key(0));
        // While it is written, it is still readable from memory, and not
        // chosen twice.
        assert!(matches!(b.peek(&key(0)), Lookup::Memory(..)));
        assert_eq!(b.victim().map(|v| v.key), Some(key(1)));
        b.remove(&key(0));
        let w = write(&v.path, &v.value).map_err(|_| ());
        b.spilled_to_disk(v, w);
        assert!(!b.contains(&key(0)));
        assert_eq!(std::fs::read_dir(&d).expect("dir").count(), 0, "the orphan file is removed");
        // Replaced while written: the new value stays, in memory.
        b.insert(key(2), block(2.0));
        let v = b.victim().expect("a victim");
        let k = v.key.clone();
        b.insert(k.clone(), block(9.0));
        let w = write(&v.path, &v.value).map_err(|_| ());
        b.spilled_to_disk(v, w);
        let Lookup::Memory(now, _) = b.get(&k) else { panic!("the new value stays in memory") };
        assert_eq!(now, block(9.0));
        assert_eq!(b.spilled(), (0, 0));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_failed_write_keeps_the_result_in_memory() {
        let mut b = SpillBuffer::new(PathBuf::from("/proc/brisk-cannot-write-here"));
        b.insert(key(0), block(0.0));
        let v = b.victim().expect("a victim");
        let w = write(&v.path, &v.value).map_err(|_| ());
        assert!(w.is_err());
        b.spilled_to_disk(v, w);
        assert!(matches!(b.get(&key(0)), Lookup::Memory(..)));
        assert_eq!(b.unspilled(), block(0.0).nbytes());
        assert!(b.victim().is_some(), "it may be tried again");
    }

    #[test]
    fn a_read_back_returns_to_memory_only_when_it_fits() {
        let d = dir("back");
        let mut b = SpillBuffer::new(d.clone());
        b.insert(key(0), block(0.0));
        b.insert(key(1), block(1.0));
        spill_to(&mut b, 0);
        let Lookup::Disk(p, _) = b.get(&key(0)) else { panic!("on disk") };
        let v = read(&p).expect("read");
        let n = v.nbytes();
        b.read_back(&key(0), &p, &v, n - 1);
        assert!(matches!(b.get(&key(0)), Lookup::Disk(..)), "no room: stays on disk");
        b.read_back(&key(0), &p, &v, n);
        assert!(matches!(b.get(&key(0)), Lookup::Memory(..)));
        assert!(!p.exists());
        assert_eq!((b.memory(), b.spilled().0), (n, n));
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A GPU result's host copy (how a peer's GPU result arrives, and what a
    /// CUDA worker keeps past its device limit) stays marked for the device
    /// through memory and disk, and the bytes moved off the device are
    /// counted until it goes. (Values on a real device: scripts/gpu-tests.sh.)
    #[test]
    fn host_copies_of_device_results_keep_their_home_and_their_count() {
        let d = dir("home");
        let mut b = SpillBuffer::new(d.clone());
        let n = block(0.0).nbytes();
        b.insert_placed(key(0), block(0.0), Home::Device);
        b.insert(key(1), block(1.0));
        assert_eq!((b.on_device(), b.off_device(), b.memory()), (0, n, 2 * n));
        assert!(b.device_victim().is_none(), "nothing is on the device");
        assert!(matches!(b.get(&key(0)), Lookup::Memory(_, Home::Device)));
        assert!(matches!(b.get(&key(1)), Lookup::Memory(_, Home::Host)));
        // Key 0 is the least recently used: it goes to disk, still the device's.
        spill_to(&mut b, n);
        let Lookup::Disk(p, Home::Device) = b.get(&key(0)) else { panic!("on disk, for the device") };
        assert_eq!(b.off_device(), n);
        // A host read-back does not take it (it goes back to the device).
        let v = read(&p).expect("read");
        b.read_back(&key(0), &p, &v, u64::MAX);
        assert!(matches!(b.get(&key(0)), Lookup::Disk(_, Home::Device)));
        // A value with nothing on a device is never put back as one.
        b.back_on_device(&key(0), Some(&p), &v, u64::MAX);
        assert!(matches!(b.get(&key(0)), Lookup::Disk(_, Home::Device)));
        assert!(b.remove(&key(0)));
        assert_eq!((b.off_device(), b.spilled()), (0, (0, 0)));
        assert!(!p.exists());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn frames_and_nested_values_survive_the_disk() {
        let d = dir("kinds");
        let values = vec![
            Value::List(std::sync::Arc::new(vec![Value::Int(1), Value::Str("a".into()), Value::Float(2.5)])),
            Value::Bytes(vec![0u8, 255, 7].into()),
        ];
        for (i, v) in values.into_iter().enumerate() {
            let p = d.join(format!("{i}"));
            write(&p, &v).expect("write");
            assert_eq!(read(&p).expect("read"), v);
        }
        let _ = std::fs::remove_dir_all(&d);
    }
}
