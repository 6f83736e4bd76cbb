//! The lazy `Bag` (Dask's `dask.bag`): partitions of records, each coming
//! from a task or from a block of a text file, plus the record-wise stages
//! still to apply. Stages are not tasks: they run inside whatever task next
//! needs the partition (Dask fuses its bag chains the same way), so
//! `read_text(...).str_split().flatten().frequencies()` is one task per
//! block and a small tree.

use std::sync::Arc;

use super::array::Ctx;
use crate::bag::agg::{Agg, Sink};
use crate::bag::op::{BagOp, Source};
use crate::bag::stage::Stage;
use crate::graph::layer::{Layer, LayerRef, files_read};
use crate::graph::task::Task;
use crate::graph::token::Tokenizer;
use crate::key::Key;
use crate::ops::{Arg, Func, Op};
use crate::pieces::Pieces;
use crate::runner::Udf;
use crate::staging::Staged;
use crate::value::Value;

/// The most partitions one bag may have (as the arrays' block limit).
pub const MAX_PARTITIONS: usize = super::array::MAX_BLOCKS;

/// Partials merged per combine task (Dask's bag `split_every` default).
pub const SPLIT_EVERY: usize = 8;

/// Where one partition's records come from.
#[derive(Clone, Debug, PartialEq)]
pub enum Part {
    /// A task's result (a list of records).
    Key(Key),
    /// Lines of a block of a text file.
    Text { path: Arc<str>, start: u64, end: u64 },
}

#[derive(Clone, Debug)]
pub struct Bag {
    pub parts: Arc<Vec<Part>>,
    /// The layers holding the tasks of `Part::Key` partitions.
    pub deps: Vec<LayerRef>,
    pub stages: Arc<Vec<Stage>>,
    /// Identity of the records: sources and stages.
    pub token: String,
    /// What made the bag, for its summary (`"map"`, `"read_text"`).
    pub label: &'static str,
}

#[derive(Debug, thiserror::Error)]
pub enum BagError {
    #[error("{0}")]
    Value(String),
    #[error("cannot read {path}: {error}")]
    Io { path: String, error: std::io::Error },
    /// A writer refused its target or could not put its output in place.
    #[error(transparent)]
    Write(#[from] crate::staging::WriteError),
}

fn task(ctx: &Ctx, key: Key, op: BagOp, args: Vec<Arg>, deps: Vec<Key>) -> Task {
    let mut t = Task::new(key, Op::Call { func: Func::Bag(Arc::new(op)), args }, deps);
    t.annotations = ctx.annotations.clone();
    t
}

fn block(name: &Arc<str>, i: usize) -> Key {
    Key::block(name.clone(), &[i as u32])
}

impl Bag {
    pub fn npartitions(&self) -> usize {
        self.parts.len()
    }

    /// The same partitions with one more stage; `token` identifies the
    /// stage's arguments (a closure's source and captures).
    pub fn with_stage(&self, stage: Stage, token: &str) -> Bag {
        let mut stages = self.stages.as_ref().clone();
        let label = stage.name();
        stages.push(stage);
        Bag {
            parts: self.parts.clone(),
            deps: self.deps.clone(),
            stages: Arc::new(stages),
            token: Tokenizer::new().str(&self.token).str(label).str(token).finish(),
            label,
        }
    }

    /// A bag of the given partition keys, held by `layer`.
    fn of_keys(layer: LayerRef, keys: Vec<Key>, label: &'static str) -> Bag {
        let token = {
            let mut t = Tokenizer::new();
            keys.iter().for_each(|k| {
                t.key(k);
            });
            t.finish()
        };
        Bag {
            parts: Arc::new(keys.into_iter().map(Part::Key).collect()),
            deps: vec![layer],
            stages: Arc::new(Vec::new()),
            token,
            label,
        }
    }

    /// One `Run` task per partition feeding `sink`, in a layer named
    /// `prefix-<token>`.
    fn run_layer(&self, ctx: &Ctx, prefix: &str, sink: Sink, extra: &str) -> (LayerRef, Vec<Key>) {
        let name: Arc<str> = Arc::from(Tokenizer::new().str(&self.token).str(prefix).str(extra).name(prefix));
        let mut tasks = Vec::with_capacity(self.parts.len());
        let mut keys = Vec::with_capacity(self.parts.len());
        for (i, p) in self.parts.iter().enumerate() {
            let key = block(&name, i);
            let (source, args, deps) = match p {
                Part::Key(k) => (Source::Dep, vec![Arg::Dep(0)], vec![k.clone()]),
                Part::Text { path, start, end } => {
                    (Source::Text { path: path.clone(), start: *start, end: *end }, vec![], vec![])
                }
            };
            let op = BagOp::Run { source, stages: self.stages.as_ref().clone(), sink: sink.clone() };
            tasks.push(task(ctx, key.clone(), op, args, deps));
            keys.push(key);
        }
        (Layer::new(name, tasks, self.deps.clone()), keys)
    }

    /// The partitions as tasks whose results are lists of records.
    pub fn partitions(&self, ctx: &Ctx) -> (LayerRef, Vec<Key>) {
        if self.stages.is_empty()
            && self.deps.len() == 1
            && self.parts.iter().all(|p| matches!(p, Part::Key(_)))
        {
            let keys =
                self.parts.iter().filter_map(|p| if let Part::Key(k) = p { Some(k.clone()) } else { None });
            return (self.deps[0].clone(), keys.collect());
        }
        self.run_layer(ctx, self.label, Sink::Records, "")
    }
}

impl super::Collection for Bag {
    fn partitions(&self) -> (LayerRef, Vec<Key>) {
        Bag::partitions(self, &Ctx::default())
    }

    fn finalize(&self) -> (LayerRef, Key) {
        finalize(self)
    }

    fn persisted(&self, keys: Vec<Key>, futures: Vec<crate::client::Future>) -> Bag {
        let layer = super::held_layer(format!("persisted-{}", self.token), futures);
        Bag::of_keys(layer, keys, self.label)
    }
}

/// Dask's partitioning of a sequence: `npartitions` parts, or about 100
/// (one record each for 100 records or fewer).
pub fn from_sequence(ctx: &Ctx, records: Vec<Value>, npartitions: Option<usize>) -> Result<Bag, BagError> {
    let n = records.len();
    let size = match npartitions {
        Some(0) => return Err(BagError::Value("from_sequence: npartitions must be at least 1".into())),
        Some(p) if n <= 100 => n.div_ceil(p).max(1),
        Some(p) => (n / p).max(1),
        None if n <= 100 => 1,
        None => ((n as f64).sqrt() / 10.0).ceil().max(1.0) as usize,
    };
    let mut t = Tokenizer::new();
    t.str("from_sequence").u64(size as u64);
    records.iter().for_each(|r| {
        t.value(r);
    });
    let name: Arc<str> = Arc::from(t.name("from_sequence"));
    let chunks: Vec<&[Value]> = if n == 0 { vec![&[]] } else { records.chunks(size).collect() };
    let mut tasks = Vec::new();
    let mut keys = Vec::new();
    for (i, c) in chunks.into_iter().enumerate() {
        let key = block(&name, i);
        let mut task = Task::new(key.clone(), Op::Literal(Value::list(c.to_vec())), vec![]);
        task.annotations = ctx.annotations.clone();
        tasks.push(task);
        keys.push(key);
    }
    let layer = Layer::new(name, tasks, vec![]);
    Ok(Bag::of_keys(layer, keys, "from_sequence"))
}

/// Lines of text files: one partition per file, or per `blocksize` bytes
/// cut at line ends.
pub fn read_text(paths: &[std::path::PathBuf], blocksize: Option<u64>) -> Result<Bag, BagError> {
    if paths.is_empty() {
        return Err(BagError::Value("read_text: no files matched".into()));
    }
    if blocksize == Some(0) {
        return Err(BagError::Value("read_text: blocksize must be at least 1 byte".into()));
    }
    let mut t = Tokenizer::new();
    t.str("read_text").u64(blocksize.unwrap_or(0));
    let mut parts = Vec::new();
    for p in paths {
        let meta =
            std::fs::metadata(p).map_err(|error| BagError::Io { path: p.display().to_string(), error })?;
        if meta.is_dir() {
            return Err(BagError::Value(format!("read_text: {} is a directory", p.display())));
        }
        t.file(p, &meta);
        let path: Arc<str> = Arc::from(p.display().to_string());
        // Count before making them: a tiny blocksize on a large file would
        // otherwise build billions of partitions.
        let n = match blocksize {
            Some(bs) => meta.len().div_ceil(bs.max(1)),
            None => 1,
        };
        if parts.len() as u64 + n > MAX_PARTITIONS as u64 {
            return Err(BagError::Value(format!(
                "read_text: blocksize {} makes more than {MAX_PARTITIONS} partitions; use a larger blocksize",
                blocksize.unwrap_or(0)
            )));
        }
        for (start, end) in crate::io::file_blocks(&p.display().to_string(), meta.len(), blocksize) {
            parts.push(Part::Text { path: path.clone(), start, end });
        }
    }
    Ok(Bag {
        parts: Arc::new(parts),
        deps: vec![],
        stages: Arc::new(vec![]),
        token: t.finish(),
        label: "read_text",
    })
}

/// `concat([a, b, ...])`: the partitions of every bag, in order.
pub fn concat(ctx: &Ctx, bags: &[Bag]) -> Result<Bag, BagError> {
    if bags.is_empty() {
        return Err(BagError::Value("concat needs at least one bag".into()));
    }
    let mut t = Tokenizer::new();
    t.str("bag-concat");
    let (mut parts, mut deps) = (Vec::new(), Vec::new());
    for b in bags {
        t.str(&b.token);
        let (layer, keys) = b.partitions(ctx);
        parts.extend(keys.into_iter().map(Part::Key));
        deps.push(layer);
    }
    if parts.len() > MAX_PARTITIONS {
        return Err(BagError::Value(format!("concat: more than {MAX_PARTITIONS} partitions")));
    }
    Ok(Bag { parts: Arc::new(parts), deps, stages: Arc::new(Vec::new()), token: t.finish(), label: "concat" })
}

/// `repartition(n)`: fewer partitions as runs of neighbours concatenated,
/// more as each partition cut into even slices (as Dask's), records in
/// their order.
pub fn repartition(ctx: &Ctx, bag: &Bag, n: usize) -> Result<Bag, BagError> {
    if n == 0 || n > MAX_PARTITIONS {
        return Err(BagError::Value(format!(
            "repartition: npartitions must be from 1 to {MAX_PARTITIONS}, not {n}"
        )));
    }
    let m = bag.npartitions();
    if n == m {
        return Ok(bag.clone());
    }
    let (layer, parts) = bag.partitions(ctx);
    let name: Arc<str> =
        Arc::from(Tokenizer::new().str(&bag.token).str("repartition").u64(n as u64).name("repartition"));
    let mut tasks = Vec::with_capacity(n);
    let mut keys = Vec::with_capacity(n);
    if n < m {
        for i in 0..n {
            let group: Vec<Key> = parts[m * i / n..m * (i + 1) / n].to_vec();
            let key = block(&name, i);
            let args = (0..group.len() as u32).map(Arg::Dep).collect();
            tasks.push(task(ctx, key.clone(), BagOp::Concat, args, group));
            keys.push(key);
        }
    } else {
        for (i, p) in parts.iter().enumerate() {
            // Partition i becomes its share of the n outputs.
            let of = n * (i + 1) / m - n * i / m;
            for part in 0..of {
                let key = block(&name, keys.len());
                let op = BagOp::Slice { part: part as u32, of: of as u32 };
                tasks.push(task(ctx, key.clone(), op, vec![Arg::Dep(0)], vec![p.clone()]));
                keys.push(key);
            }
        }
    }
    Ok(Bag::of_keys(Layer::new(name, tasks, vec![layer]), keys, "repartition"))
}

/// A bag of partitions other tasks compute (`from_delayed`), each a list
/// of records.
pub fn from_keys(parts: Vec<(LayerRef, Key)>) -> Result<Bag, BagError> {
    if parts.is_empty() || parts.len() > MAX_PARTITIONS {
        return Err(BagError::Value(format!("from_delayed: give from 1 to {MAX_PARTITIONS} values")));
    }
    let mut t = Tokenizer::new();
    t.str("from_delayed");
    parts.iter().for_each(|(_, k)| {
        t.key(k);
    });
    let (deps, keys): (Vec<LayerRef>, Vec<Key>) = parts.into_iter().unzip();
    Ok(Bag {
        parts: Arc::new(keys.into_iter().map(Part::Key).collect()),
        deps,
        stages: Arc::new(Vec::new()),
        token: t.finish(),
        label: "from_delayed",
    })
}

/// `zip(a, b, ...)`: records paired partition by partition, as `Bag.zip`
/// (the bags must have as many partitions; within a pair of partitions
/// the shorter decides, as Python's zip).
pub fn zip(ctx: &Ctx, bags: &[Bag]) -> Result<Bag, BagError> {
    let Some(first) = bags.first() else { return Err(BagError::Value("zip needs at least one bag".into())) };
    let n = first.npartitions();
    if let Some(b) = bags.iter().find(|b| b.npartitions() != n) {
        return Err(BagError::Value(format!(
            "zip: the bags must have as many partitions, got {n} and {}",
            b.npartitions()
        )));
    }
    let mut t = Tokenizer::new();
    t.str("zip");
    bags.iter().for_each(|b| {
        t.str(&b.token);
    });
    let name: Arc<str> = Arc::from(t.name("zip"));
    let sources: Vec<(LayerRef, Vec<Key>)> = bags.iter().map(|b| b.partitions(ctx)).collect();
    let mut keys = Vec::with_capacity(n);
    let tasks = (0..n)
        .map(|i| {
            let key = block(&name, i);
            keys.push(key.clone());
            let deps: Vec<Key> = sources.iter().map(|(_, k)| k[i].clone()).collect();
            let args = (0..deps.len() as u32).map(Arg::Dep).collect();
            task(ctx, key, BagOp::Zip, args, deps)
        })
        .collect();
    let layer = Layer::new(name, tasks, sources.into_iter().map(|(l, _)| l).collect());
    Ok(Bag::of_keys(layer, keys, "zip"))
}

/// An aggregate as a tree: a partial per partition, combines of
/// `SPLIT_EVERY`, and a finish task. Returns the layer and the final key.
pub fn aggregate(ctx: &Ctx, bag: &Bag, agg: Agg, token: &str) -> (LayerRef, Key) {
    let label = agg.name();
    let (part_layer, level) = bag.run_layer(ctx, label, Sink::Partial(agg.clone()), token);
    let tok = Tokenizer::new().str(&part_layer.name).finish();
    // At least one combine, so a `reduction`'s aggregate always runs.
    let (last, level) = super::combine_tree(label, &tok, part_layer, level, SPLIT_EVERY, 1, |key, group| {
        let args = (0..group.len()).map(|i| Arg::Dep(i as u32)).collect();
        task(ctx, key, BagOp::Combine(agg.clone()), args, group.to_vec())
    });
    let name = format!("{label}-{tok}");
    let key = Key::new(name.as_str());
    let finish = task(ctx, key.clone(), BagOp::Finish(agg), vec![Arg::Dep(0)], level);
    (Layer::new(name, vec![finish], vec![last]), key)
}

/// An aggregate whose result is records (`frequencies`, `topk`, …), as a
/// one-partition bag.
pub fn aggregate_bag(ctx: &Ctx, bag: &Bag, agg: Agg, token: &str) -> Bag {
    let label = agg.name();
    let (layer, key) = aggregate(ctx, bag, agg, token);
    Bag::of_keys(layer, vec![key], label)
}

/// `groupby(key)`: a hash shuffle (the engine's disk-backed one) into as
/// many partitions as the bag has; each output record is `[key, [records…]]`.
pub fn groupby(ctx: &Ctx, bag: &Bag, key: Arc<Udf>, token: &str) -> Bag {
    let (layer, parts) = bag.partitions(ctx);
    let n = parts.len();
    let tok = Tokenizer::new().str(&bag.token).str("groupby").str(token).finish();
    let pieces = Pieces::new(&tok);
    let split_name: Arc<str> = Arc::from(format!("shuffle-split-{tok}"));
    let split_tasks: Vec<Task> = parts
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let op =
                BagOp::Split { key: key.clone(), parts: n as u32, input: i as u32, pieces: pieces.clone() };
            task(ctx, block(&split_name, i), op, vec![Arg::Dep(0)], vec![k.clone()])
        })
        .collect();
    let splits: Vec<Key> = split_tasks.iter().map(|t| t.key.clone()).collect();
    let split_layer = Layer::new(split_name, split_tasks, vec![layer]);
    let group_name: Arc<str> = Arc::from(format!("groupby-{tok}"));
    let args: Vec<Arg> = (0..n).map(|i| Arg::Dep(i as u32)).collect();
    let keys: Vec<Key> = (0..n).map(|j| block(&group_name, j)).collect();
    let tasks = keys
        .iter()
        .enumerate()
        .map(|(j, k)| {
            let op = BagOp::Group { key: key.clone(), part: j as u32, pieces: pieces.clone() };
            task(ctx, k.clone(), op, args.clone(), splits.clone())
        })
        .collect();
    Bag::of_keys(Layer::new(group_name, tasks, vec![split_layer]), keys, "groupby")
}

/// All records in one list (what `compute` returns).
pub fn finalize(bag: &Bag) -> (LayerRef, Key) {
    let (layer, parts) = bag.partitions(&Ctx::default());
    let name = format!("finalize-{}", Tokenizer::new().str(&bag.token).str(&layer.name).finish());
    let key = Key::new(name.as_str());
    let args = (0..parts.len()).map(|i| Arg::Dep(i as u32)).collect();
    let t = task(&Ctx::default(), key.clone(), BagOp::Concat, args, parts);
    (Layer::new(name, vec![t], vec![layer]), key)
}

/// `to_textfiles(dir)`: `dir/0.part`, `dir/1.part`, … written into the
/// staging folder of `staged` (a [`Format::Text`] dataset), for the caller
/// to run and then commit. Refused when the bag reads a file inside `dir`.
pub fn to_textfiles(ctx: &Ctx, bag: &Bag, staged: &mut Staged) -> Result<(LayerRef, Vec<Key>), BagError> {
    let (layer, parts) = bag.partitions(ctx);
    let paths = staged.part_paths(parts.len() as u64);
    let tok = Tokenizer::new().str(&layer.name).str(&staged.path().display().to_string()).finish();
    let name: Arc<str> = Arc::from(format!("to-textfiles-{tok}"));
    let mut tasks = Vec::new();
    let mut keys = Vec::new();
    for (i, (k, p)) in parts.iter().zip(paths).enumerate() {
        let key = block(&name, i);
        let path: Arc<str> = Arc::from(p.display().to_string());
        tasks.push(task(ctx, key.clone(), BagOp::WriteText { path }, vec![Arg::Dep(0)], vec![k.clone()]));
        keys.push(key);
    }
    let layer = Layer::new(name, tasks, vec![layer]);
    staged.refuse_inputs(files_read(std::slice::from_ref(&layer)).iter().map(String::as_str))?;
    Ok((layer, keys))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_are_cut_as_dask_cuts_them() {
        let ctx = Ctx::default();
        let seq = |n: i64| (0..n).map(Value::Int).collect::<Vec<_>>();
        assert_eq!(from_sequence(&ctx, seq(10), None).expect("bag").npartitions(), 10);
        assert_eq!(from_sequence(&ctx, seq(10), Some(3)).expect("bag").npartitions(), 3);
        assert_eq!(from_sequence(&ctx, seq(1000), None).expect("bag").npartitions(), 250);
        assert_eq!(from_sequence(&ctx, seq(1000), Some(7)).expect("bag").npartitions(), 8);
        assert_eq!(from_sequence(&ctx, vec![], None).expect("bag").npartitions(), 1);
        assert!(from_sequence(&ctx, seq(3), Some(0)).is_err());
    }

    #[test]
    fn a_tiny_blocksize_on_a_large_file_is_refused_before_building() {
        let p = std::env::temp_dir().join(format!("brisk-sparse-{}.txt", std::process::id()));
        let f = std::fs::File::create(&p).expect("create");
        f.set_len(MAX_PARTITIONS as u64 + 10).expect("sparse file");
        let e = read_text(std::slice::from_ref(&p), Some(1)).expect_err("too many partitions");
        assert!(e.to_string().contains("makes more than 10000000 partitions"), "{e}");
        assert_eq!(read_text(std::slice::from_ref(&p), Some(1 << 20)).expect("fine").npartitions(), 10);
        let _ = std::fs::remove_file(p);
    }

    #[test]
    fn stages_join_the_next_task_and_change_the_token() {
        let ctx = Ctx::default();
        let b = from_sequence(&ctx, vec![Value::str("a b")], None).expect("bag");
        let s = b.with_stage(Stage::StrSplit(None), "");
        assert_ne!(b.token, s.token);
        assert_eq!(s.with_stage(Stage::Flatten, "").token, s.with_stage(Stage::Flatten, "").token);
        let (layer, keys) = s.partitions(&ctx);
        assert_eq!((layer.tasks.len(), keys.len()), (1, 1));
        let (l, k) = aggregate(&ctx, &s, Agg::Count, "");
        assert_eq!(k.name(), l.name.as_ref());
        // The partial layer, one combine, the finish.
        let mut depth = 0;
        let mut cur = Some(l);
        while let Some(x) = cur {
            depth += 1;
            cur = x.deps.first().cloned();
        }
        assert_eq!(depth, 4, "finish → combine → partials → from_sequence");
    }
}
