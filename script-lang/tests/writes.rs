//! Writers lose no data: a computation never writes over what it reads; a
//! dataset folder that holds parts needs `overwrite` or `append`; a failed
//! write (a task error, a read-only folder) keeps what was there and leaves
//! no temporary files; and its message says `cannot write`, the path and
//! the reason.

mod common;

use std::path::{Path, PathBuf};

use brisk_script::Session;
use common::json;

/// A folder of its own under the temporary directory, removed when the
/// test ends (also when it fails), with its permissions given back first.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("brisk-writes-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("scratch dir");
        Scratch(d)
    }

    fn path(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::process::Command::new("chmod").args(["-R", "u+rwx"]).arg(&self.0).status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn ok(s: &mut Session, code: &str) -> String {
    match s.eval_value(code, "<t>") {
        Ok(v) => json(&v, "result"),
        Err(e) => panic!("{code}\nfailed: {e}"),
    }
}

#[track_caller]
fn fails(s: &mut Session, code: &str, want: &[&str]) -> String {
    let e = match s.eval_value(code, "<t>") {
        Ok(v) => panic!("{code}\nshould fail, gave {v}"),
        Err(e) => e.message,
    };
    for w in want {
        assert!(e.contains(w), "{code}\nexpected \"{w}\" in: {e}");
    }
    e
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// No staging file or folder (`.NAME.brisk-tmp-…`) anywhere under `dir`.
#[track_caller]
fn no_staging_left(dir: &Path) {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            assert!(!name.contains(".brisk-"), "left behind: {}", e.path().display());
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(e.path());
            }
        }
    }
}

/// `(from_zarr(p) + 1).to_zarr(p)` and its kin for every format: refused
/// before anything runs, and the data reads back unchanged; links do not
/// hide the target; persisting what was read first is the way to do it.
#[test]
fn writing_over_what_the_computation_reads_is_refused() {
    let d = Scratch::new("self");
    let mut s = Session::new();
    let (z, n, pq, csv, txt) =
        (d.path("a.zarr"), d.path("a.npy"), d.path("pq"), d.path("csv"), d.path("txt"));
    ok(&mut s, &format!("arange(10, #{{chunks: 5}}).to_zarr({z:?}); arange(10).to_npy({n:?})"));
    ok(&mut s, &format!("from_columns(#{{a: [1, 2, 3]}}, #{{npartitions: 3}}).to_parquet({pq:?})"));
    ok(&mut s, &format!("from_columns(#{{a: [1, 2, 3]}}).to_csv({csv:?})"));
    let csvin = d.path("csvin");
    std::fs::create_dir(&csvin).expect("csv input dir");
    std::fs::write(d.0.join("csvin").join("in.csv"), "a\n10\n20\n").expect("csv input");
    ok(&mut s, &format!("from_sequence([\"x\", \"y\"], #{{npartitions: 2}}).to_textfiles({txt:?})"));
    let reads = ["this computation reads", "cannot write"];
    fails(&mut s, &format!("(from_zarr({z:?}) + 1).to_zarr({z:?}, #{{overwrite: true}})"), &reads);
    let link = d.path("link.zarr");
    std::os::unix::fs::symlink(&z, &link).expect("symlink");
    fails(&mut s, &format!("(from_zarr({z:?}) + 1).to_zarr({link:?}, #{{overwrite: true}})"), &reads);
    fails(&mut s, &format!("(from_npy({n:?}) * 2).to_npy({n:?})"), &reads);
    fails(&mut s, &format!("read_parquet({pq:?}).to_parquet({pq:?}, #{{overwrite: true}})"), &reads);
    fails(&mut s, &format!("read_parquet({pq:?}).to_parquet({pq:?}, #{{append: true}})"), &reads);
    fails(
        &mut s,
        &format!("read_csv(`{csvin}/*.csv`).to_csv({csvin:?})"),
        &["to_csv: cannot write", "in.csv"],
    );
    fails(&mut s, &format!("read_csv(`{csv}/*.part`).to_csv({csv:?}, #{{overwrite: true}})"), &reads);
    fails(&mut s, &format!("read_text(`{txt}/*.part`).to_textfiles({txt:?}, #{{overwrite: true}})"), &reads);
    assert_eq!(ok(&mut s, &format!("from_zarr({z:?}).sum().compute()")), "45");
    assert_eq!(ok(&mut s, &format!("from_npy({n:?}).sum().compute()")), "45");
    assert_eq!(ok(&mut s, &format!("read_parquet({pq:?})[\"a\"].sum().compute()")), "6");
    assert_eq!(ok(&mut s, &format!("read_csv(`{csv}/*.part`)[\"a\"].sum().compute()")), "6");
    assert_eq!(ok(&mut s, &format!("read_text(`{txt}/*.part`).compute()")), r#"["x","y"]"#);
    assert_eq!(names(Path::new(&csvin)), ["in.csv"]);
    no_staging_left(&d.0);
    // What is persisted is no longer read from the store.
    ok(&mut s, &format!("let x = from_zarr({z:?}).persist(); (x + 1).to_zarr({z:?}, #{{overwrite: true}})"));
    assert_eq!(ok(&mut s, &format!("from_zarr({z:?}).sum().compute()")), "55");
}

/// A second dataset into a folder that holds one: refused (the old parts
/// would read back as extra rows), replaced with `overwrite` (only the
/// part files go), or added to with `append` (numbered after, same
/// columns). Zarr has `overwrite` only, `.npy` replaces as NumPy does.
#[test]
fn a_folder_that_holds_a_dataset_needs_overwrite_or_append() {
    let d = Scratch::new("exists");
    let mut s = Session::new();
    let (pq, csv, txt) = (d.path("pq"), d.path("csv"), d.path("txt"));
    let three = "from_columns(#{a: [1, 2, 3], b: [\"x\", \"y\", \"z\"]}, #{npartitions: 3})";
    let two = "from_columns(#{a: [10, 20], b: [\"u\", \"v\"]}, #{npartitions: 1})";
    let exists = ["already holds a dataset", "#{overwrite: true}", "#{append: true}"];
    for (w, dir, read) in [
        ("to_parquet", &pq, format!("read_parquet({pq:?})")),
        ("to_csv", &csv, format!("read_csv(`{csv}/*.part`)")),
    ] {
        ok(&mut s, &format!("{three}.{w}({dir:?})"));
        std::fs::write(Path::new(dir).join("README.txt"), "mine").expect("user file");
        fails(&mut s, &format!("{two}.{w}({dir:?})"), &exists);
        assert_eq!(ok(&mut s, &format!("{read}[\"a\"].sum().compute()")), "6", "{w}: refused, kept");
        fails(&mut s, &format!("{two}.{w}({dir:?}, #{{overwrite: true, append: true}})"), &["cannot both"]);
        fails(&mut s, &format!("{two}.{w}({dir:?}, #{{overwrite: 1}})"), &["overwrite", "true or false"]);
        ok(&mut s, &format!("{two}.{w}({dir:?}, #{{overwrite: true}})"));
        assert_eq!(ok(&mut s, &format!("{read}[\"a\"].sum().compute()")), "30", "{w}: overwritten");
        assert!(names(Path::new(dir)).contains(&"README.txt".to_string()), "{w}: other files are kept");
        let added = ok(&mut s, &format!("{three}.{w}({dir:?}, #{{append: true}})"));
        assert!(added.contains(if w == "to_csv" { "/1.part\"" } else { "/part.1.parquet\"" }), "{added}");
        assert_eq!(ok(&mut s, &format!("{read}[\"a\"].sum().compute()")), "36", "{w}: appended");
        fails(
            &mut s,
            &format!("from_columns(#{{z: [1.5]}}).{w}({dir:?}, #{{append: true}})"),
            &["cannot append"],
        );
        assert_eq!(ok(&mut s, &format!("{read}.compute().num_rows()")), "5");
    }
    let words = "from_sequence([\"p\", \"q\"], #{npartitions: 2})";
    ok(&mut s, &format!("{words}.to_textfiles({txt:?})"));
    fails(&mut s, &format!("{words}.to_textfiles({txt:?})"), &exists);
    ok(&mut s, &format!("{words}.to_textfiles({txt:?}, #{{append: true}})"));
    assert_eq!(ok(&mut s, &format!("read_text(`{txt}/*.part`).count().compute()")), "4");
    ok(&mut s, &format!("from_sequence([\"r\"]).to_textfiles({txt:?}, #{{overwrite: true}})"));
    assert_eq!(ok(&mut s, &format!("read_text(`{txt}/*.part`).compute()")), r#"["r"]"#);
    // Zarr: a store is replaced only when asked, never appended to; a
    // folder that is not a store is never written into.
    let z = d.path("s.zarr");
    ok(&mut s, &format!("arange(6).to_zarr({z:?})"));
    fails(
        &mut s,
        &format!("ones([2]).to_zarr({z:?})"),
        &["already holds a Zarr store", "#{overwrite: true}"],
    );
    fails(
        &mut s,
        &format!("ones([2]).to_zarr({z:?}, #{{append: true}})"),
        &["cannot append to a Zarr store"],
    );
    assert_eq!(ok(&mut s, &format!("from_zarr({z:?}).sum().compute()")), "15");
    ok(&mut s, &format!("ones([2]).to_zarr({z:?}, #{{overwrite: true}})"));
    assert_eq!(ok(&mut s, &format!("from_zarr({z:?}).sum().compute()")), "2.0");
    fails(&mut s, &format!("ones([2]).to_zarr({pq:?}, #{{overwrite: true}})"), &["is not a Zarr store"]);
    assert!(names(Path::new(&pq)).contains(&"README.txt".to_string()));
    // .npy: replaced, as NumPy's save replaces a file.
    let n = d.path("a.npy");
    ok(&mut s, &format!("arange(3).to_npy({n:?}); ones([2]).to_npy({n:?})"));
    assert_eq!(ok(&mut s, &format!("from_npy({n:?}).sum().compute()")), "2.0");
    // A file where a dataset folder would go.
    fails(&mut s, &format!("{two}.to_csv({n:?})"), &["to_csv: cannot write", "is not a directory"]);
    no_staging_left(&d.0);
}

/// A task that fails on the last partition: the write fails, what was
/// there before reads back whole, and no temporary file is left.
#[test]
fn a_write_that_fails_half_way_keeps_the_old_data() {
    let d = Scratch::new("fail");
    let mut s = Session::new();
    let (pq, csv, txt, z, n) =
        (d.path("pq"), d.path("csv"), d.path("txt"), d.path("s.zarr"), d.path("a.npy"));
    ok(
        &mut s,
        &format!(
            "let old = from_columns(#{{a: [1, 2, 3]}}, #{{npartitions: 3}});
             old.to_parquet({pq:?}); old.to_csv({csv:?});
             from_sequence([\"old\"]).to_textfiles({txt:?});
             arange(10, #{{chunks: 5}}).to_zarr({z:?}); arange(10).to_npy({n:?});"
        ),
    );
    let frame = "from_columns(#{a: [5, 6, 7, 8]}, #{npartitions: 4}).map_partitions(|p| { if p[\"a\"].max() == 8 { throw \"boom on the last partition\"; } p }, #{meta: #{a: \"int64\"}})";
    let blocks = "arange(8, #{chunks: 2}).map_blocks(|b| { if b.max() == 7 { throw \"boom on the last block\"; } b * 10 })";
    let bag = "from_sequence([\"a\", \"b\", \"c\", \"boom\"], #{npartitions: 4}).map(|x| { if x == \"boom\" { throw \"boom on the last record\"; } x })";
    fails(
        &mut s,
        &format!("{frame}.to_parquet({pq:?}, #{{overwrite: true}})"),
        &["boom on the last partition"],
    );
    fails(&mut s, &format!("{frame}.to_csv({csv:?}, #{{overwrite: true}})"), &["boom on the last partition"]);
    fails(&mut s, &format!("{frame}.to_parquet({pq:?}, #{{append: true}})"), &["boom on the last partition"]);
    fails(
        &mut s,
        &format!("{bag}.to_textfiles({txt:?}, #{{overwrite: true}})"),
        &["boom on the last record"],
    );
    fails(&mut s, &format!("{blocks}.to_zarr({z:?}, #{{overwrite: true}})"), &["boom on the last block"]);
    fails(&mut s, &format!("{blocks}.to_npy({n:?})"), &["boom on the last block"]);
    fails(&mut s, &format!("{frame}.to_parquet({:?})", d.path("new")), &["boom on the last partition"]);
    assert_eq!(ok(&mut s, &format!("read_parquet({pq:?})[\"a\"].sum().compute()")), "6");
    assert_eq!(names(Path::new(&pq)), ["part.0.parquet", "part.1.parquet", "part.2.parquet"]);
    assert_eq!(ok(&mut s, &format!("read_csv(`{csv}/*.part`)[\"a\"].sum().compute()")), "6");
    assert_eq!(ok(&mut s, &format!("read_text(`{txt}/*.part`).compute()")), r#"["old"]"#);
    assert_eq!(ok(&mut s, &format!("from_zarr({z:?}).sum().compute()")), "45");
    assert_eq!(ok(&mut s, &format!("from_npy({n:?}).sum().compute()")), "45");
    assert!(!d.0.join("new").exists(), "a new dataset that failed does not appear");
    no_staging_left(&d.0);
}

/// Whether this process can write into a folder it may only read and
/// list (root can): then permission errors cannot be tested.
fn permissions_ignored(d: &Path) -> bool {
    let probe = d.join("probe");
    std::fs::create_dir(&probe).expect("probe");
    chmod(&probe, "500");
    let ignored = std::fs::write(probe.join("x"), "x").is_ok();
    chmod(&probe, "700");
    let _ = std::fs::remove_dir_all(&probe);
    ignored
}

fn chmod(p: &Path, mode: &str) {
    let done = std::process::Command::new("chmod").arg(mode).arg(p).status().expect("chmod");
    assert!(done.success(), "chmod {mode} {}", p.display());
}

/// A read-only folder: the write fails with `cannot write`, the path and
/// the system's reason, and the old data is untouched, whether the folder
/// that cannot be written is the dataset's or the one it sits in.
#[test]
fn a_read_only_folder_is_a_clear_error_and_keeps_the_data() {
    let d = Scratch::new("readonly");
    if permissions_ignored(&d.0) {
        eprintln!("skipped: running as root, permissions are not enforced");
        return;
    }
    let mut s = Session::new();
    let ro = d.0.join("ro");
    std::fs::create_dir(&ro).expect("ro");
    let at = |n: &str| ro.join(n).display().to_string();
    let (pq, txt, z, n) = (at("pq"), at("txt"), at("s.zarr"), at("a.npy"));
    ok(
        &mut s,
        &format!(
            "from_columns(#{{a: [1, 2, 3]}}, #{{npartitions: 3}}).to_parquet({pq:?});
             from_sequence([\"old\"]).to_textfiles({txt:?});
             arange(10, #{{chunks: 5}}).to_zarr({z:?}); arange(10).to_npy({n:?});"
        ),
    );
    let denied = "Permission denied";
    // The dataset's own folder is read-only: the commit cannot move parts in.
    chmod(Path::new(&pq), "500");
    fails(
        &mut s,
        &format!("from_columns(#{{a: [7]}}).to_parquet({pq:?}, #{{overwrite: true}})"),
        &["to_parquet: cannot write", &pq, denied],
    );
    fails(
        &mut s,
        &format!("from_columns(#{{a: [7]}}).to_parquet({pq:?}, #{{append: true}})"),
        &["to_parquet: cannot write", &pq, denied],
    );
    chmod(Path::new(&pq), "700");
    no_staging_left(&d.0);
    // The folder they all sit in is read-only: nothing can be staged.
    chmod(&ro, "500");
    fails(
        &mut s,
        &format!("from_sequence([\"new\"]).to_textfiles({txt:?}, #{{overwrite: true}})"),
        &["to_textfiles: cannot write", &txt, denied],
    );
    fails(
        &mut s,
        &format!("ones([3]).to_zarr({z:?}, #{{overwrite: true}})"),
        &["to_zarr: cannot write", &z, denied],
    );
    fails(&mut s, &format!("ones([3]).to_npy({n:?})"), &["to_npy: cannot write", &n, denied]);
    let fresh = at("fresh");
    fails(
        &mut s,
        &format!("from_columns(#{{a: [1]}}).to_csv({fresh:?})"),
        &["to_csv: cannot write", &fresh, denied],
    );
    chmod(&ro, "700");
    assert_eq!(ok(&mut s, &format!("read_parquet({pq:?})[\"a\"].sum().compute()")), "6");
    assert_eq!(ok(&mut s, &format!("read_text(`{txt}/*.part`).compute()")), r#"["old"]"#);
    assert_eq!(ok(&mut s, &format!("from_zarr({z:?}).sum().compute()")), "45");
    assert_eq!(ok(&mut s, &format!("from_npy({n:?}).sum().compute()")), "45");
    assert_eq!(names(&ro), ["a.npy", "pq", "s.zarr", "txt"]);
    no_staging_left(&d.0);
}
