//! Bag kernels on their own, without a script engine (closures are tested
//! from Rhai in script-lang/tests/bags.rs).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use super::exec::execute;
use super::records::BATCH;
use super::*;
use crate::error::TaskError;
use crate::key::Key;
use crate::runner::NoUdfs;
use crate::runner::TaskContext;
use crate::value::Value;

fn run(op: &BagOp, args: &[Value]) -> Result<Value, TaskError> {
    let cancelled = Arc::new(AtomicBool::new(false));
    let key = Key::block(Arc::from("bag-test"), &[2]);
    execute(op, args, &NoUdfs, &TaskContext::new(&key, &cancelled))
}

fn ints(v: &[i64]) -> Value {
    Value::list(v.iter().map(|&i| Value::Int(i)).collect())
}

fn partial(agg: Agg, records: Value) -> Value {
    run(&BagOp::Run { source: Source::Dep, stages: vec![], sink: Sink::Partial(agg) }, &[records])
        .expect("partial")
}

fn reduce(agg: Agg, parts: &[Value]) -> Result<Value, TaskError> {
    let partials: Vec<Value> = parts.iter().map(|p| partial(agg.clone(), p.clone())).collect();
    let merged = run(&BagOp::Combine(agg.clone()), &partials)?;
    run(&BagOp::Finish(agg), &[merged])
}

#[test]
fn numeric_aggregates_follow_python() {
    let parts = [ints(&[1, 2, 3]), ints(&[]), ints(&[10])];
    assert_eq!(reduce(Agg::Count, &parts).ok(), Some(Value::Int(4)));
    assert_eq!(reduce(Agg::Sum, &parts).ok(), Some(Value::Int(16)));
    assert_eq!(reduce(Agg::Mean, &parts).ok(), Some(Value::Float(4.0)));
    assert_eq!(reduce(Agg::Min, &parts).ok(), Some(Value::Int(1)));
    assert_eq!(reduce(Agg::Max, &parts).ok(), Some(Value::Int(10)));
    let mixed = [Value::list(vec![Value::Int(1), Value::Float(0.5)])];
    assert_eq!(reduce(Agg::Sum, &mixed).ok(), Some(Value::Float(1.5)));
    let e = reduce(Agg::Max, &[ints(&[])]).expect_err("empty");
    assert_eq!(e.message, "max() of an empty bag");
    let e = reduce(Agg::Mean, &[ints(&[])]).expect_err("empty");
    assert_eq!(e.message, "mean of an empty bag");
    let words = [Value::list(vec![Value::str("b"), Value::Int(1)])];
    let op = BagOp::Run { source: Source::Dep, stages: vec![], sink: Sink::Partial(Agg::Min) };
    let e = run(&op, &words).expect_err("mixed");
    assert!(e.message.contains("cannot compare int with string"), "{e}");
}

#[test]
fn frequencies_topk_and_distinct_merge_across_partitions() {
    let s = |v: &[&str]| Value::list(v.iter().map(|x| Value::str(x)).collect());
    let parts = [s(&["a", "b", "a"]), s(&["c", "a"]), s(&["b"])];
    let f = reduce(Agg::Frequencies, &parts).expect("freq");
    let counts = text::counts_of(&f);
    assert_eq!(counts.len(), 3);
    assert_eq!(counts[&VKey(Value::str("a"))], 3);
    assert_eq!(counts[&VKey(Value::str("b"))], 2);
    let d = reduce(Agg::Distinct, &parts).expect("distinct");
    assert_eq!(d, s(&["a", "b", "c"]));
    let t =
        reduce(Agg::TopK { k: 2, key: agg::KeyBy::Record }, &[ints(&[5, 1, 9]), ints(&[7, 3])]).expect("top");
    assert_eq!(t, ints(&[9, 7]));
    let pairs = Value::list(vec![
        Value::list(vec![Value::str("x"), Value::Int(3)]),
        Value::list(vec![Value::str("y"), Value::Int(8)]),
    ]);
    let t = reduce(Agg::TopK { k: 1, key: agg::KeyBy::Item(Value::Int(1)) }, &[pairs]).expect("top by item");
    assert_eq!(t, Value::list(vec![Value::list(vec![Value::str("y"), Value::Int(8)])]));
}

#[test]
fn native_stages_and_their_errors() {
    let lines = Value::list(vec![Value::str("  Hello World \n"), Value::str("b c")]);
    let op = BagOp::Run {
        source: Source::Dep,
        stages: vec![Stage::StrStrip, Stage::StrLower, Stage::StrSplit(None), Stage::Flatten],
        sink: Sink::Records,
    };
    let words = run(&op, &[lines]).expect("words");
    assert_eq!(words, Value::list(["hello", "world", "b", "c"].iter().map(|w| Value::str(w)).collect()));
    let op =
        BagOp::Run { source: Source::Dep, stages: vec![Stage::Pluck(Value::Int(1))], sink: Sink::Records };
    let recs = Value::list(vec![ints(&[1, 2]), ints(&[3])]);
    let e = run(&op, &[recs]).expect_err("short record");
    assert_eq!(e.message, "pluck: index 1 out of range for a record of length 1 (record 1 of partition 2)");
    let op = BagOp::Run { source: Source::Dep, stages: vec![Stage::Flatten], sink: Sink::Records };
    let e = run(&op, &[ints(&[1])]).expect_err("not lists");
    assert!(e.message.starts_with("flatten: a record is int, not an array"), "{e}");
    let e = run(&op, &[Value::Int(3)]).expect_err("not a partition");
    assert!(e.message.contains("must be an array of records"), "{e}");
}

#[test]
fn text_files_round_trip_through_write_and_read() {
    let dir = std::env::temp_dir().join(format!("brisk-bag-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path: Arc<str> = Arc::from(dir.join("0.part").display().to_string());
    let recs = Value::list(vec![Value::str("one"), Value::str("two")]);
    run(&BagOp::WriteText { path: path.clone() }, &[recs]).expect("write");
    assert_eq!(std::fs::read_to_string(&*path).expect("read"), "one\ntwo");
    let op =
        BagOp::Run { source: Source::Text { path, start: 0, end: 7 }, stages: vec![], sink: Sink::Records };
    assert_eq!(run(&op, &[]).expect("lines"), Value::list(vec![Value::str("one\n"), Value::str("two")]));
    let e =
        run(&BagOp::WriteText { path: Arc::from("/nonexistent/x.part") }, &[ints(&[1])]).expect_err("int");
    assert!(e.message.contains("record 0 is int, not a string"), "{e}");
}

/// A partition larger than a batch: the sinks carry their state across
/// batches and give what one pass over everything gives.
#[test]
fn sinks_carry_across_batches() {
    let n = 3 * BATCH as i64 + 17;
    let recs = Value::list((0..n).map(|i| Value::list(vec![Value::Int(i), Value::Int(i % 7)])).collect());
    let over = |stages: Vec<Stage>, agg: Agg| {
        let op = BagOp::Run { source: Source::Dep, stages, sink: Sink::Partial(agg.clone()) };
        let p = run(&op, std::slice::from_ref(&recs)).expect("partial");
        let merged = run(&BagOp::Combine(agg.clone()), &[p]).expect("combine");
        run(&BagOp::Finish(agg), &[merged]).expect("finish")
    };
    let first = || vec![Stage::Pluck(Value::Int(0))];
    let second = || vec![Stage::Pluck(Value::Int(1))];
    assert_eq!(over(first(), Agg::Count), Value::Int(n));
    assert_eq!(over(first(), Agg::Sum), Value::Int(n * (n - 1) / 2));
    assert_eq!(over(first(), Agg::Max), Value::Int(n - 1));
    assert_eq!(over(first(), Agg::TopK { k: 3, key: agg::KeyBy::Record }), ints(&[n - 1, n - 2, n - 3]));
    assert_eq!(over(second(), Agg::Distinct), ints(&[0, 1, 2, 3, 4, 5, 6]));
    let f = text::counts_of(&over(second(), Agg::Frequencies));
    assert_eq!(f.values().sum::<i64>(), n);
    let e = run(
        &BagOp::Run { source: Source::Dep, stages: vec![Stage::Pluck(Value::Int(5))], sink: Sink::Records },
        &[recs],
    )
    .expect_err("short records");
    assert!(e.message.ends_with("(record 0 of partition 2)"), "{e}");
}

#[test]
fn an_error_past_the_first_batch_names_the_right_record() {
    let bad = BATCH + 5;
    let recs: Vec<Value> = (0..2 * BATCH)
        .map(|i| if i == bad { Value::Int(1) } else { Value::list(vec![Value::Int(1)]) })
        .collect();
    let op =
        BagOp::Run { source: Source::Dep, stages: vec![Stage::Flatten], sink: Sink::Partial(Agg::Count) };
    let e = run(&op, &[Value::list(recs)]).expect_err("an int among lists");
    assert!(e.message.ends_with(&format!("(record {bad} of partition 2)")), "{e}");
}
