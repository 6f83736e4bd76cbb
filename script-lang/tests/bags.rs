//! Bags against plain Python: the same pipelines over the same text files
//! and sequences, in brisk (on both local schedulers) and in Python with
//! Dask's bag semantics (`tests/reference/python_bags.py`), compared by the
//! Python side. Also: errors that name the record, and bad input.

mod common;

use brisk_script::Session;
use common::{Need, Reference, SCHEDULERS, error_of, python};

/// Any Python: the reference results are plain Python.
const PYTHON: Need = Need {
    module: None,
    on_ci: "Python is needed for the bag tests on CI",
    skipped: "skipped: no python3 (set BRISK_PYTHON)",
};

const CASES: &str = r#"
let files = `${D}/*.txt`;
let text = read_text(files);
fn as_map(pairs) {
    let m = #{};
    for p in pairs {
        let k = `${p[0]}`;
        m[k] = p[1];
    }
    m
}
let xs = [];
for x in range(-50, 250, 7) { xs.push(x); }
let nums = from_sequence(xs, #{npartitions: 6});
let rs = [];
for i in 0..60 { rs.push(#{name: `n${i}`, score: (i * 37) % 101}); }
let recs = from_sequence(rs, #{npartitions: 4});
let ints = from_sequence(0..10, #{npartitions: 3});
let freq = as_map(text.str_split().flatten().frequencies().compute());
let top = text.str_split().flatten().frequencies().topk(10, #{key: 1}).compute();
let groups = #{};
for g in nums.groupby(|x| (x + 100) % 4).compute() {
    let items = g[1];
    items.sort();
    let k = `${g[0]}`;
    groups[k] = items;
}
let distinct = nums.map(|x| (x + 100) % 10).distinct().compute();
distinct.sort();
let kept = text.filter(|l| l != "\n").take(5);
let written = from_sequence(kept.map(|l| trim_end_newline(l)), #{npartitions: 1}).to_textfiles(`${D}/out`);
#{
    lines: text.compute(),
    lines_blocks: read_text([`${D}/part0.txt`, `${D}/part1.txt`, `${D}/part2.txt`], #{blocksize: 700}).compute(),
    count_lines: text.count().compute(),
    freq_words: freq,
    freq_lower_space: as_map(text.str_lower().str_strip().str_split(" ").flatten().frequencies().compute()),
    freq_closure_space: as_map(text.map(|l| l.split(" ")).flatten().frequencies().compute()),
    top10_counts: top.map(|p| p[1]),
    top10_words_ok: top.all(|p| freq[p[0]] == p[1]),
    count: nums.count().compute(),
    sum: nums.sum().compute(),
    mean: nums.mean().compute(),
    min: nums.min().compute(),
    max: nums.max().compute(),
    filter_map: nums.filter(|x| x % 3 == 0).map(|x| x * x).compute(),
    distinct_mod: distinct,
    foldby: as_map(nums.foldby(|x| (x + 100) % 5, |acc, x| acc + x, 0).compute()),
    groupby: groups,
    reduction: nums.reduction(|p| p.len(), |xs| xs.reduce(|a, b| a + b, 0)).compute(),
    topk: nums.topk(5).compute(),
    topk_key: recs.topk(4, #{key: |r| r.score}).pluck("name").compute(),
    pluck_sum: recs.pluck("score").sum().compute(),
    take: nums.take(3),
    range_sum: ints.sum().compute(),
    map_partitions_total: nums.map_partitions(|p| [p.len()]).sum().compute(),
    round_trip: read_text(written).compute(),
    any_true: nums.map(|x| x > 240).any().compute(),
    any_false: nums.map(|x| x > 1000).any().compute(),
    all_true: nums.map(|x| x != 1).all().compute(),
    all_false: ints.all().compute(),
    std: nums.std().compute(),
    variance1: nums.variance(#{ddof: 1}).compute(),
    fold: nums.fold(|a, b| a + b).compute(),
    fold_initial: ints.fold(|a, b| a + b, #{initial: 10}).compute(),
    fold_combine: recs.fold(|acc, r| acc + r.score, #{initial: 0, combine: |a, b| a + b}).compute(),
    starmap: from_sequence([[1, 2], [3, 4], [5, 6]], #{npartitions: 2}).starmap(|a, b| a * b).compute(),
    zip: zip(ints, ints.map(|x| x * 2)).compute(),
    concat: concat([ints, ints.map(|x| -x), nums.filter(|x| x > 200)]).compute(),
    sample_ok: {
        let s = nums.random_sample(0.5, #{seed: 3}).compute();
        let again = nums.random_sample(0.5, #{seed: 3}).compute();
        let through = nums.random_sample(0.5, #{seed: 3}).map_partitions(|p| p).compute();
        s.all(|x| xs.contains(x)) && s.len() > 5 && s.len() < xs.len() && s == again && s == through
    },
    sample_edges: [nums.random_sample(0.0).count().compute(), nums.random_sample(1.0).count().compute()],
    parse_json: from_sequence(["{\"a\": 1, \"b\": [1.5, null, true]}", "[1, 2]", "\"s\""]).map(parse_json).compute(),
    join: nums.join([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10], |x| (x + 100) % 7, |o| (o + 100) % 7).compute(),
    join_records: recs.join([#{tag: 3, label: "three"}, #{tag: 0, label: "zero"}], |r| r.score % 5, |o| o.tag).map(|p| [p[0].label, p[1].name]).compute(),
    repartition: [nums.repartition(7).compute(), nums.repartition(1).compute(), nums.repartition(#{npartitions: 12}).npartitions, nums.repartition(12).map_partitions(|p| [p.len()]).sum().compute()],
    delayed_round_trip: from_delayed(nums.to_delayed()).map(|x| x + 1).compute(),
    delayed_count: nums.to_delayed().len() == nums.npartitions,
}
"#;

/// Keys use `(x + 100) % n`: Rhai's `%` truncates and Python's floors,
/// which differ on negative numbers only.
/// Rhai has no `rstrip("\n")`: a small helper, defined in the script.
const HELPERS: &str = r#"
fn trim_end_newline(s) { if s.ends_with("\n") { s.sub_string(0, s.len() - 1) } else { s } }
"#;

#[test]
fn bags_agree_with_python() {
    let Some(py) = python(&PYTHON) else { return };
    let reference = Reference::generate(py, "python_bags.py", "bags");
    for scheduler in SCHEDULERS {
        reference.check(scheduler, HELPERS, CASES, "<bags>", "Python");
        let _ = std::fs::remove_dir_all(reference.dir.join("out"));
    }
}

/// A closure that fails on one record names the record, the partition and
/// the closure's position; the session goes on. (`12 / x` runs natively,
/// `lower.rs`; the record it cannot answer, `x == 0`, goes to Rhai, whose
/// error this is.)
#[test]
fn a_failing_closure_names_its_record() {
    let mut s = Session::new();
    let e = s
        .eval_value(
            "let b = from_sequence([1, 2, 0, 4], #{npartitions: 2});\nb.map(|x| 12 / x).compute()",
            "<t>",
        )
        .expect_err("division by zero");
    let text = e.to_string();
    assert!(text.contains("(record 0 of partition 1)"), "{text}");
    assert!(text.starts_with("<t>:2:"), "the closure's position: {text}");
    let ok = s.eval_value("b.map(|x| x + 1).sum().compute()", "<t2>").expect("the session survives");
    assert_eq!(ok.as_int().ok(), Some(11));
}

#[test]
fn bad_input_is_refused_clearly() {
    let cases = [
        ("read_text(\"/nonexistent/brisk/*.txt\")", "read_text: no files match \"/nonexistent/brisk/*.txt\""),
        ("read_text(\"/nonexistent/brisk.txt\")", "cannot read /nonexistent/brisk.txt"),
        ("read_text(\"/tmp\")", "read_text: /tmp is a directory"),
        ("from_sequence([1]).std(#{dof: 1})", "std has no option \"dof\""),
        ("from_sequence([1]).variance(#{ddof: -1})", "variance: ddof must be a small non-negative integer"),
        (
            "from_sequence([1]).variance(#{ddof: 1}).compute()",
            "var() of 1 records with ddof=1: needs more than 1",
        ),
        ("from_sequence([\"a\"]).std().compute()", "variance: a record is string, not a number"),
        ("from_sequence([]).fold(|a, b| a + b).compute()", "fold() of an empty bag with no initial value"),
        ("from_sequence([1]).fold(|a, b| a + b, #{combine: 3})", "fold: combine must be a function"),
        ("from_sequence([1, 2]).starmap(|a, b| a + b).compute()", "starmap: a record is int, not an array"),
        ("from_sequence([1]).random_sample(1.5)", "random_sample: prob must be between 0 and 1, got 1.5"),
        (
            "zip(from_sequence([1, 2], #{npartitions: 2}), from_sequence([1]))",
            "zip: the bags must have as many partitions, got 2 and 1",
        ),
        ("concat([from_sequence([1]), 3])", "concat: item 1 is"),
        ("parse_json(\"{oops\")", "parse_json: invalid JSON: key must be a string at line 1 column 2"),
        ("from_sequence([\"[1,\"]).map(parse_json).compute()", "parse_json: invalid JSON"),
        ("read_text(\"/etc/hostname\", #{blocksize: 0})", "read_text: blocksize must be a positive integer"),
        ("read_text(\"/etc/hostname\", #{blocksize: \"12 parsecs\"})", "unknown unit"),
        ("read_text(\"/etc/hostname\", #{chunks: 3})", "read_text has no option \"chunks\""),
        ("read_text(42)", "read_text: the path must be a string or an array of strings"),
        ("from_sequence([1], #{npartitions: 0})", "npartitions must be a positive integer"),
        ("from_sequence([1, 2]).str_split().compute()", "str_split: a record is int, not a string"),
        ("from_sequence([1, 2]).flatten().compute()", "flatten: a record is int, not an array"),
        ("from_sequence([1]).str_split(\"\")", "str_split: empty separator"),
        ("from_sequence([]).max().compute()", "max() of an empty bag"),
        ("from_sequence([1, \"a\"]).max().compute()", "cannot compare"),
        ("from_sequence([\"a\"]).sum().compute()", "sum: a record is string, not a number"),
        ("from_sequence([1]).topk(-1)", "topk: k must be 0 or more"),
        ("from_sequence([1]).topk(1, #{key: 1.5})", "topk: key must be an index"),
        ("from_sequence([[1]]).pluck(3).compute()", "pluck: index 3 out of range"),
        (
            "from_sequence([1]).map_partitions(|p| 5).compute()",
            "map_partitions: the closure must return an array",
        ),
        ("from_sequence([\"a\"]).to_textfiles(\"/etc/hostname/x\")", "cannot write /etc/hostname/x"),
        (
            "from_sequence([1]).to_textfiles(\"/tmp/brisk-bad-text\")",
            "to_textfiles: record 0 is int, not a string",
        ),
        ("from_sequence([1]).take(-2)", "take: n must be 0 or more"),
    ];
    for (code, want) in cases {
        let e = error_of(code);
        assert!(e.contains(want), "{code}: expected {want:?} in {e:?}");
    }
    // Binary input is refused, not mangled.
    let bin = std::env::temp_dir().join(format!("brisk-bag-bin-{}", std::process::id()));
    std::fs::write(&bin, b"line\n\xff\xfe\x00\n").expect("write");
    let e = error_of(&format!("read_text(\"{}\").count().compute()", bin.display()));
    assert!(e.contains("is not UTF-8 text"), "{e}");
}
