//! Writes that appear whole or not at all, and never over what they read.
//!
//! Every writer puts its output under a hidden name beside the target
//! (`.NAME.brisk-tmp-PID-N`: a file for `.npy`, a folder for a Zarr store
//! or a dataset's parts) and moves it into place only once every task has
//! succeeded ([`Staged::commit`]). A failure, an interrupt or an error
//! drops the [`Staged`], which removes what was written; the previous
//! file, store or parts are untouched until the commit. A dataset folder
//! that already holds parts is refused unless the caller asks to
//! overwrite them (removed only at the commit, and only files named as
//! that format's parts) or to append after them, as Dask's `overwrite`
//! and `append`.
//!
//! A process killed outright leaves its hidden staging behind; the next
//! write to the same target removes those of processes that no longer run.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// What to do with a target that already holds a dataset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Refuse a target that holds one (Dask's default).
    #[default]
    Create,
    /// Replace its parts once the new ones are written.
    Overwrite,
    /// Add new parts after its parts.
    Append,
}

/// The part files of a dataset folder, one per partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `N.part`, as `to_csv` writes them.
    Csv,
    /// `part.N.parquet`; every `*.parquet` (and `_metadata`) is a part,
    /// since `read_parquet(dir)` reads them all.
    Parquet,
    /// `N.part`, as `to_textfiles` writes them.
    Text,
    /// `N.part` of JSON lines, as Dask's `to_json` names them.
    Json,
}

impl Format {
    fn function(self) -> &'static str {
        match self {
            Format::Csv => "to_csv",
            Format::Parquet => "to_parquet",
            Format::Text => "to_textfiles",
            Format::Json => "to_json",
        }
    }

    /// The name of part `i`.
    pub fn part_name(self, i: u64) -> String {
        match self {
            Format::Csv | Format::Text | Format::Json => format!("{i}.part"),
            Format::Parquet => format!("part.{i}.parquet"),
        }
    }

    /// Whether a file of this name is a part of a dataset of this format
    /// (so a reader of the folder would read it, and `overwrite` removes it).
    pub fn is_part(self, name: &str) -> bool {
        match self {
            Format::Csv | Format::Text | Format::Json => self.index(name).is_some(),
            Format::Parquet => {
                (name.ends_with(".parquet") && !name.starts_with('.'))
                    || name == "_metadata"
                    || name == "_common_metadata"
            }
        }
    }

    /// The partition number in a part's name, where it has one.
    fn index(self, name: &str) -> Option<u64> {
        let digits = match self {
            Format::Csv | Format::Text | Format::Json => name.strip_suffix(".part")?,
            Format::Parquet => name.strip_prefix("part.")?.strip_suffix(".parquet")?,
        };
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok()
    }
}

/// Why a write was refused or could not be completed.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("{function}: cannot write {path}: {error}")]
    Io { function: &'static str, path: String, error: std::io::Error },
    /// The target holds a dataset and neither `overwrite` nor `append` was asked.
    #[error(
        "{function}: {path} already holds {what} ({found}); pass #{{overwrite: true}} to replace it{append}"
    )]
    Exists { function: &'static str, path: String, what: &'static str, found: String, append: &'static str },
    /// The computation reads the target it would write.
    #[error(
        "{function}: cannot write {path}: this computation reads {input}, which the write would replace; write to another path, or persist() what you read first"
    )]
    ReadsTarget { function: &'static str, path: String, input: String },
    /// Options or a target that make no sense together; the message says why.
    #[error("{function}: {why}")]
    Refused { function: &'static str, why: String },
}

/// Staging paths of this process not yet committed or removed, for
/// [`abandon_all`].
static ACTIVE: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());
static NEXT: AtomicU64 = AtomicU64::new(0);

fn active() -> std::sync::MutexGuard<'static, BTreeSet<PathBuf>> {
    ACTIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Remove every staging file and folder of this process now: for a
/// process ending on a signal, whose destructors will not run.
pub fn abandon_all() {
    let all = std::mem::take(&mut *active());
    for p in all {
        remove(&p);
    }
}

fn remove(p: &Path) {
    // Twice: a task still writing may add a file while the folder goes.
    for _ in 0..2 {
        let _ = if p.is_dir() { std::fs::remove_dir_all(p) } else { std::fs::remove_file(p) };
        if std::fs::symlink_metadata(p).is_err() {
            return;
        }
    }
}

/// A hidden name beside `target`, `.NAME.brisk-KIND-PID-N`.
fn beside(target: &Path, name: &str, kind: &str) -> PathBuf {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    target.with_file_name(format!(".{name}.brisk-{kind}-{}-{n}", std::process::id()))
}

/// Removes staging left beside `target` by brisk processes that died.
fn remove_stale(target: &Path, name: &str) {
    let parent = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    let prefix = format!(".{name}.brisk-tmp-");
    for e in entries.flatten() {
        let file = e.file_name();
        let Some(pid) = file.to_str().and_then(|f| f.strip_prefix(&prefix)).and_then(|r| r.split('-').next())
        else {
            continue;
        };
        if pid.parse::<u32>().is_ok_and(|p| !crate::pieces::alive(p)) {
            remove(&e.path());
        }
    }
}

/// Refuse to write `target` when any of `inputs` (the files the
/// computation reads) is the target itself or lies inside it, as Dask
/// refuses to overwrite what the same graph reads: the write would
/// destroy data not yet read. Paths are compared canonicalized, so
/// links and `..` do not hide one.
pub fn refuse_inputs<'a>(
    function: &'static str,
    target: &Path,
    inputs: impl IntoIterator<Item = &'a str>,
) -> Result<(), WriteError> {
    let Ok(canon) = std::fs::canonicalize(target) else { return Ok(()) };
    for input in inputs {
        if std::fs::canonicalize(input).is_ok_and(|p| p.starts_with(&canon)) {
            return Err(WriteError::ReadsTarget {
                function,
                path: target.display().to_string(),
                input: input.to_string(),
            });
        }
    }
    Ok(())
}

#[derive(Debug)]
enum Kind {
    /// Parts of a dataset folder.
    Parts { format: Format, first: u64, count: u64, replace: Vec<String>, kept: Vec<String> },
    /// A Zarr store (a folder written whole), replacing the one at the
    /// target when `replace`.
    Store { replace: bool },
    /// One file.
    File,
}

/// One write under way: the staging path, and what the commit moves where.
/// Dropped without a commit, it removes the staging.
#[derive(Debug)]
pub struct Staged {
    function: &'static str,
    target: PathBuf,
    staging: PathBuf,
    kind: Kind,
    done: bool,
}

fn io(function: &'static str, path: &Path) -> impl Fn(std::io::Error) -> WriteError {
    let path = path.display().to_string();
    move |error| WriteError::Io { function, path: path.clone(), error }
}

/// The target's own name; `.`, `..` and `/` have none and are refused.
fn file_name(function: &'static str, target: &Path) -> Result<String, WriteError> {
    match target.file_name().and_then(|n| n.to_str()) {
        Some(n) => Ok(n.to_string()),
        None => Err(WriteError::Refused {
            function,
            why: format!("cannot write {}: name a new path", target.display()),
        }),
    }
}

/// Where a target that is a symbolic link points: the write goes there,
/// as writing through the link would, rather than replacing the link.
fn resolve(target: &Path) -> PathBuf {
    match std::fs::symlink_metadata(target) {
        Ok(m) if m.file_type().is_symlink() => {
            std::fs::canonicalize(target).unwrap_or_else(|_| target.to_path_buf())
        }
        _ => target.to_path_buf(),
    }
}

/// Create the folders above `target` (as `mkdir -p`), so that the staging
/// can sit beside it.
fn make_parent(function: &'static str, target: &Path) -> Result<(), WriteError> {
    match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => std::fs::create_dir_all(p).map_err(io(function, target)),
        _ => Ok(()),
    }
}

/// The names of the entries of `dir` that `keep` accepts, sorted; none
/// when it does not exist.
fn entries(
    function: &'static str,
    dir: &Path,
    keep: impl Fn(&str) -> bool,
) -> Result<Vec<String>, WriteError> {
    let list = match std::fs::read_dir(dir) {
        Ok(l) => l,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(function, dir)(e)),
    };
    let mut names = Vec::new();
    for e in list {
        let e = e.map_err(io(function, dir))?;
        let name = e.file_name().to_string_lossy().into_owned();
        if keep(&name) && e.file_type().is_ok_and(|t| t.is_file()) {
            names.push(name);
        }
    }
    names.sort_by_key(|n| (n.len(), n.clone()));
    Ok(names)
}

fn listed(names: &[String]) -> String {
    let mut s = names.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > 3 {
        s.push_str(&format!(" and {} more", names.len() - 3));
    }
    s
}

impl Staged {
    /// A dataset of part files written into the folder `target`. Refuses
    /// a target that is not a folder, or that holds parts of this format
    /// under [`Mode::Create`]; creates the folders above it and an empty
    /// hidden staging folder beside it.
    pub fn parts(format: Format, target: &Path, mode: Mode) -> Result<Staged, WriteError> {
        let function = format.function();
        let target = &resolve(target);
        let name = file_name(function, target)?;
        if std::fs::metadata(target).is_ok_and(|m| !m.is_dir()) {
            return Err(WriteError::Refused {
                function,
                why: format!("cannot write {}: it exists and is not a directory", target.display()),
            });
        }
        let found = entries(function, target, |n| format.is_part(n))?;
        let (first, replace, kept) = match mode {
            Mode::Create if !found.is_empty() => {
                return Err(WriteError::Exists {
                    function,
                    path: target.display().to_string(),
                    what: "a dataset",
                    found: listed(&found),
                    append: " or #{append: true} to add to it",
                });
            }
            Mode::Create => (0, Vec::new(), Vec::new()),
            Mode::Overwrite => (0, found, Vec::new()),
            Mode::Append => {
                (found.iter().filter_map(|n| format.index(n)).max().map_or(0, |m| m + 1), Vec::new(), found)
            }
        };
        make_parent(function, target)?;
        remove_stale(target, &name);
        let staging = beside(target, &name, "tmp");
        std::fs::create_dir(&staging).map_err(io(function, target))?;
        active().insert(staging.clone());
        let kind = Kind::Parts { format, first, count: 0, replace, kept };
        Ok(Staged { function, target: target.to_path_buf(), staging, kind, done: false })
    }

    /// A Zarr store written whole into a hidden folder, then renamed to
    /// `target`. Refuses a store already there unless [`Mode::Overwrite`],
    /// a folder that holds anything else, and [`Mode::Append`] (Dask's
    /// `to_zarr` has none either).
    pub fn store(function: &'static str, target: &Path, mode: Mode) -> Result<Staged, WriteError> {
        let target = &resolve(target);
        let name = file_name(function, target)?;
        let refuse = |why: String| Err(WriteError::Refused { function, why });
        if mode == Mode::Append {
            return refuse(format!(
                "cannot append to a Zarr store ({}); write a new one, or pass #{{overwrite: true}} to replace it",
                target.display()
            ));
        }
        let mut replace = false;
        match std::fs::metadata(target) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(function, target)(e)),
            Ok(m) if !m.is_dir() => {
                return refuse(format!(
                    "cannot write {}: it exists and is not a directory",
                    target.display()
                ));
            }
            Ok(_) if target.join("zarr.json").is_file() => {
                if mode != Mode::Overwrite {
                    return Err(WriteError::Exists {
                        function,
                        path: target.display().to_string(),
                        what: "a Zarr store",
                        found: "zarr.json".into(),
                        append: "",
                    });
                }
                replace = true;
            }
            Ok(_) if std::fs::read_dir(target).map_err(io(function, target))?.next().is_some() => {
                return refuse(format!(
                    "{} exists and is not a Zarr store; not writing into it",
                    target.display()
                ));
            }
            Ok(_) => {}
        }
        make_parent(function, target)?;
        remove_stale(target, &name);
        let staging = beside(target, &name, "tmp");
        std::fs::create_dir(&staging).map_err(io(function, target))?;
        active().insert(staging.clone());
        Ok(Staged {
            function,
            target: target.to_path_buf(),
            staging,
            kind: Kind::Store { replace },
            done: false,
        })
    }

    /// One file, written to a hidden name in the same folder and renamed
    /// over `target` (so an earlier file is replaced whole, as NumPy's
    /// `save` replaces it, or kept).
    pub fn file(function: &'static str, target: &Path) -> Result<Staged, WriteError> {
        let target = &resolve(target);
        let name = file_name(function, target)?;
        if target.is_dir() {
            return Err(WriteError::Refused {
                function,
                why: format!("cannot write {}: it is a directory", target.display()),
            });
        }
        remove_stale(target, &name);
        let staging = beside(target, &name, "tmp");
        active().insert(staging.clone());
        Ok(Staged { function, target: target.to_path_buf(), staging, kind: Kind::File, done: false })
    }

    /// Where the writer writes: the staging file, or the staging folder
    /// (a store is created in it).
    pub fn path(&self) -> &Path {
        &self.staging
    }

    /// Where the data will be once committed.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// The staging paths of `n` parts, numbered after any existing ones
    /// when appending. Call once, with the number of partitions.
    pub fn part_paths(&mut self, n: u64) -> Vec<PathBuf> {
        match &mut self.kind {
            Kind::Parts { format, first, count, .. } => {
                *count = n;
                (*first..*first + n).map(|i| self.staging.join(format.part_name(i))).collect()
            }
            _ => Vec::new(),
        }
    }

    /// When appending to a dataset, its first part (whose columns the new
    /// parts must have).
    pub fn appending_to(&self) -> Option<PathBuf> {
        match &self.kind {
            Kind::Parts { kept, .. } => kept.first().map(|n| self.target.join(n)),
            _ => None,
        }
    }

    /// Refuse to write where any of `inputs` (the files the computation
    /// reads) lies: see [`refuse_inputs`].
    pub fn refuse_inputs<'a>(&self, inputs: impl IntoIterator<Item = &'a str>) -> Result<(), WriteError> {
        refuse_inputs(self.function, &self.target, inputs)
    }

    /// Move what was written into place; gives the paths of the new parts
    /// (the target itself for a store or a file). On an error, what was
    /// there before is put back.
    pub fn commit(mut self) -> Result<Vec<PathBuf>, WriteError> {
        let out = match &self.kind {
            Kind::File => {
                std::fs::rename(&self.staging, &self.target).map_err(io(self.function, &self.target))?;
                vec![self.target.clone()]
            }
            Kind::Store { replace } => {
                self.commit_store(*replace)?;
                vec![self.target.clone()]
            }
            Kind::Parts { format, first, count, replace, .. } => {
                let names: Vec<String> = (*first..*first + *count).map(|i| format.part_name(i)).collect();
                self.commit_parts(&names, replace)?;
                names.iter().map(|n| self.target.join(n)).collect()
            }
        };
        self.done = true;
        remove(&self.staging);
        active().remove(&self.staging);
        Ok(out)
    }

    fn commit_store(&self, replace: bool) -> Result<(), WriteError> {
        let fail = io(self.function, &self.target);
        if !replace {
            // Onto nothing, or onto an empty folder (which rename replaces).
            return std::fs::rename(&self.staging, &self.target).map_err(fail);
        }
        let name = file_name(self.function, &self.target)?;
        let old = beside(&self.target, &name, "old");
        std::fs::rename(&self.target, &old).map_err(&fail)?;
        if let Err(e) = std::fs::rename(&self.staging, &self.target) {
            let _ = std::fs::rename(&old, &self.target);
            return Err(fail(e));
        }
        remove(&old);
        Ok(())
    }

    /// Onto a missing or empty folder the staging folder is renamed whole;
    /// otherwise the old parts (when overwriting) move aside into the
    /// staging folder, then the new parts move in, each a rename; a
    /// failed rename puts everything back.
    fn commit_parts(&self, names: &[String], replace: &[String]) -> Result<(), WriteError> {
        let fail = io(self.function, &self.target);
        for n in names {
            if !self.staging.join(n).is_file() {
                return Err(WriteError::Refused {
                    function: self.function,
                    why: format!("part {n} was not written; {} is unchanged", self.target.display()),
                });
            }
        }
        let empty = std::fs::read_dir(&self.target).map(|mut d| d.next().is_none());
        if !matches!(empty, Ok(false)) && std::fs::rename(&self.staging, &self.target).is_ok() {
            return Ok(());
        }
        let aside = self.staging.join(".replaced");
        if !replace.is_empty() {
            std::fs::create_dir(&aside).map_err(&fail)?;
        }
        let mut moved_old: Vec<&String> = Vec::new();
        let mut moved_new: Vec<&String> = Vec::new();
        let undo = |old: &[&String], new: &[&String]| {
            for n in new {
                let _ = std::fs::rename(self.target.join(n), self.staging.join(n));
            }
            for n in old {
                let _ = std::fs::rename(aside.join(n), self.target.join(n));
            }
        };
        for n in replace {
            if let Err(e) = std::fs::rename(self.target.join(n), aside.join(n)) {
                undo(&moved_old, &moved_new);
                return Err(fail(e));
            }
            moved_old.push(n);
        }
        for n in names {
            let to = self.target.join(n);
            let result = if std::fs::symlink_metadata(&to).is_ok() {
                Err(std::io::Error::new(std::io::ErrorKind::AlreadyExists, format!("{n} appeared meanwhile")))
            } else {
                std::fs::rename(self.staging.join(n), &to)
            };
            if let Err(e) = result {
                undo(&moved_old, &moved_new);
                return Err(fail(e));
            }
            moved_new.push(n);
        }
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.done {
            remove(&self.staging);
            active().remove(&self.staging);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("brisk-staging-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("scratch");
        d
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .expect("list")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    fn write_parts(s: &mut Staged, n: u64, text: &str) {
        for p in s.part_paths(n) {
            std::fs::write(p, text).expect("part");
        }
    }

    #[test]
    fn parts_appear_at_the_commit_and_stale_ones_need_a_choice() {
        let d = scratch("parts");
        let out = d.join("out");
        let mut s = Staged::parts(Format::Csv, &out, Mode::Create).expect("stage");
        write_parts(&mut s, 3, "new");
        assert!(!out.exists(), "nothing under the final name before the commit");
        let paths = s.commit().expect("commit");
        assert_eq!(paths, vec![out.join("0.part"), out.join("1.part"), out.join("2.part")]);
        assert_eq!(names(&d), vec!["out"], "no staging left");
        // A second dataset into the same folder: refused, then replaced.
        std::fs::write(out.join("notes.txt"), "mine").expect("user file");
        let e = Staged::parts(Format::Csv, &out, Mode::Create).expect_err("exists");
        assert!(e.to_string().contains("already holds a dataset (0.part, 1.part, 2.part)"), "{e}");
        let mut s = Staged::parts(Format::Csv, &out, Mode::Overwrite).expect("stage");
        write_parts(&mut s, 1, "second");
        s.commit().expect("commit");
        assert_eq!(names(&out), vec!["0.part", "notes.txt"], "old parts gone, other files kept");
        // Appending numbers the new parts after the old ones.
        let mut s = Staged::parts(Format::Csv, &out, Mode::Append).expect("stage");
        write_parts(&mut s, 2, "third");
        assert_eq!(s.commit().expect("commit"), vec![out.join("1.part"), out.join("2.part")]);
        assert_eq!(std::fs::read_to_string(out.join("0.part")).expect("read"), "second");
        assert_eq!(names(&d), vec!["out"]);
        std::fs::remove_dir_all(&d).expect("clean");
    }

    #[test]
    fn a_dropped_write_leaves_the_old_data_and_no_staging() {
        let d = scratch("drop");
        let out = d.join("pq");
        std::fs::create_dir(&out).expect("dir");
        std::fs::write(out.join("part.0.parquet"), "old").expect("old");
        let mut s = Staged::parts(Format::Parquet, &out, Mode::Overwrite).expect("stage");
        write_parts(&mut s, 2, "new");
        drop(s);
        assert_eq!(names(&d), vec!["pq"]);
        assert_eq!(names(&out), vec!["part.0.parquet"]);
        assert_eq!(std::fs::read_to_string(out.join("part.0.parquet")).expect("read"), "old");
        // A part that was never written fails the commit, and nothing moves.
        let mut s = Staged::parts(Format::Parquet, &out, Mode::Overwrite).expect("stage");
        let paths = s.part_paths(2);
        std::fs::write(&paths[0], "new").expect("one part");
        assert!(s.commit().expect_err("missing part").to_string().contains("part.1.parquet was not written"));
        assert_eq!(names(&d), vec!["pq"]);
        assert_eq!(std::fs::read_to_string(out.join("part.0.parquet")).expect("read"), "old");
        std::fs::remove_dir_all(&d).expect("clean");
    }

    #[test]
    fn files_and_stores_are_replaced_whole() {
        let d = scratch("file");
        let f = d.join("a.npy");
        std::fs::write(&f, "old").expect("old");
        let s = Staged::file("to_npy", &f).expect("stage");
        std::fs::write(s.path(), "new").expect("tmp");
        assert_eq!(std::fs::read_to_string(&f).expect("read"), "old");
        s.commit().expect("commit");
        assert_eq!(std::fs::read_to_string(&f).expect("read"), "new");
        // Through a symbolic link: the file it points to is replaced, the link kept.
        let link = d.join("link.npy");
        std::os::unix::fs::symlink(&f, &link).expect("link");
        let s = Staged::file("to_npy", &link).expect("stage");
        std::fs::write(s.path(), "linked").expect("tmp");
        s.commit().expect("commit");
        assert!(std::fs::symlink_metadata(&link).expect("link").file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&f).expect("read"), "linked");
        std::fs::remove_file(&link).expect("unlink");
        let store = d.join("s.zarr");
        std::fs::create_dir(&store).expect("store");
        std::fs::write(store.join("zarr.json"), "{}").expect("meta");
        let e = Staged::store("to_zarr", &store, Mode::Create).expect_err("exists");
        assert!(e.to_string().contains("already holds a Zarr store"), "{e}");
        assert!(Staged::store("to_zarr", &store, Mode::Append).is_err());
        let s = Staged::store("to_zarr", &store, Mode::Overwrite).expect("stage");
        std::fs::write(s.path().join("zarr.json"), "{\"new\": 1}").expect("meta");
        s.commit().expect("commit");
        assert_eq!(std::fs::read_to_string(store.join("zarr.json")).expect("read"), "{\"new\": 1}");
        assert_eq!(names(&d), vec!["a.npy", "s.zarr"]);
        let e = Staged::file("to_npy", &d).expect_err("a directory");
        assert!(e.to_string().contains("is a directory"), "{e}");
        std::fs::remove_dir_all(&d).expect("clean");
    }

    #[test]
    fn inputs_inside_the_target_are_refused_and_stale_staging_removed() {
        let d = scratch("inputs");
        let out = d.join("out");
        std::fs::create_dir(&out).expect("dir");
        std::fs::write(out.join("a.csv"), "x\n1\n").expect("input");
        let dead = d.join(".out.brisk-tmp-4294967290-0");
        std::fs::create_dir(&dead).expect("stale");
        let s = Staged::parts(Format::Csv, &out, Mode::Create).expect("stage");
        assert_eq!(!dead.exists(), cfg!(target_os = "linux"), "a dead process's staging is removed");
        let input = out.join("a.csv").display().to_string();
        let e = s.refuse_inputs([input.as_str()]).expect_err("reads its target");
        assert!(e.to_string().contains("this computation reads"), "{e}");
        let elsewhere = d.join("other.csv");
        std::fs::write(&elsewhere, "x\n").expect("other");
        s.refuse_inputs([elsewhere.display().to_string().as_str()]).expect("not inside");
        drop(s);
        let _ = std::fs::remove_dir_all(&dead);
        std::fs::remove_dir_all(&d).expect("clean");
    }
}
