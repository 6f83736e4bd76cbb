//! `blockwise(f, out_ind, arg, ind, ...)`, as `da.blockwise`: the general
//! block pattern that `map_blocks`, elementwise operations and `matmul`
//! are cases of. Each argument is an array with one index letter per axis,
//! or a literal; the output has the letters of `out`. A letter shared by
//! two arrays pairs their blocks (their chunks are unified first, as
//! Dask's `unify_chunks`); a letter in no output axis is contracted: the
//! function gets all of that axis' blocks, joined into one block
//! (`concatenate`) or as an array of blocks. An axis of length 1 against a
//! longer one is broadcast, as Dask's: its one block goes to every call
//! (the function broadcasts the values).

use std::collections::BTreeMap;
use std::sync::Arc;

use rustc_hash::FxHashSet;

use super::base::{Array, Ctx, array_task, block, finish, grid};
use super::elementwise::BlockFn;
use super::rechunk::rechunk_to;
use crate::array::dtype::DType;
use crate::array::error::ArrayError;
use crate::array::op::ArrayOp;
use crate::graph::task::Task;
use crate::graph::token::Tokenizer;
use crate::key::Key;
use crate::ops::{Arg, BlockCall, Func, Op};
use crate::value::Value;

/// One argument of `blockwise`.
#[derive(Clone, Debug)]
pub enum BlockwiseArg {
    /// An array and its index letters, one per axis.
    Array(Array, Vec<char>),
    /// A value passed as it is to every call.
    Literal(Value),
}

#[derive(Clone, Debug)]
pub struct BlockwiseSpec {
    pub out: Vec<char>,
    pub dtype: DType,
    /// Join a contracted letter's blocks into one (else pass an array).
    pub concatenate: bool,
    /// Output letters in no argument, with their length (one block).
    pub new_axes: Vec<(char, usize)>,
    /// Output letters whose blocks the function resizes, to this length.
    pub adjust_chunks: Vec<(char, usize)>,
}

fn bad(msg: String) -> ArrayError {
    ArrayError::Value(format!("blockwise: {msg}"))
}

pub fn blockwise(
    ctx: &Ctx,
    f: &BlockFn,
    spec: &BlockwiseSpec,
    args: Vec<BlockwiseArg>,
) -> Result<Array, ArrayError> {
    distinct(&spec.out, "the output index")?;
    // Each letter's chunks: the first array's that has it; the others are
    // rechunked to them.
    let mut chunks: BTreeMap<char, Vec<usize>> = BTreeMap::new();
    for a in &args {
        if let BlockwiseArg::Array(x, ind) = a {
            x.known("blockwise")?;
            if ind.len() != x.ndim() {
                return Err(bad(format!(
                    "an array of {} dimensions has index \"{}\"",
                    x.ndim(),
                    ind.iter().collect::<String>()
                )));
            }
            distinct(ind, "an argument's index")?;
            for (d, &c) in ind.iter().enumerate() {
                let have = x.chunks[d].clone();
                let len = have.iter().sum::<usize>();
                match chunks.get(&c) {
                    None => {
                        chunks.insert(c, have);
                    }
                    // Length 1 broadcasts against the other length.
                    Some(first) if first.iter().sum::<usize>() == 1 && len != 1 => {
                        chunks.insert(c, have);
                    }
                    Some(first) if first.iter().sum::<usize>() != len && len != 1 => {
                        return Err(bad(format!(
                            "index '{c}' has length {} in one argument and {} in another",
                            first.iter().sum::<usize>(),
                            have.iter().sum::<usize>()
                        )));
                    }
                    Some(_) => {}
                }
            }
        }
    }
    let args: Vec<BlockwiseArg> = args
        .into_iter()
        .map(|a| match a {
            BlockwiseArg::Array(x, ind) => {
                let want: Vec<Vec<usize>> = ind
                    .iter()
                    .enumerate()
                    .map(
                        |(d, c)| {
                            if x.chunks[d].iter().sum::<usize>() == 1 { vec![1] } else { chunks[c].clone() }
                        },
                    )
                    .collect();
                Ok(BlockwiseArg::Array(rechunk_to(ctx, &x, want)?, ind))
            }
            lit => Ok(lit),
        })
        .collect::<Result<_, ArrayError>>()?;
    let mut out_chunks = Vec::with_capacity(spec.out.len());
    for c in &spec.out {
        let new = spec.new_axes.iter().find(|(n, _)| n == c);
        let base = match (chunks.get(c), new) {
            (Some(_), Some(_)) => {
                return Err(bad(format!("new axis '{c}' is already an index of an argument")));
            }
            (Some(ch), None) => ch.clone(),
            (None, Some((_, n))) => vec![*n],
            (None, None) => {
                return Err(bad(format!("output index '{c}' is in no argument (give it in new_axes)")));
            }
        };
        out_chunks.push(match spec.adjust_chunks.iter().find(|(n, _)| n == c) {
            Some((_, n)) => vec![*n; base.len()],
            None => base,
        });
    }
    for (c, _) in spec.new_axes.iter().chain(&spec.adjust_chunks) {
        if !spec.out.contains(c) {
            return Err(bad(format!("'{c}' is not an output index")));
        }
    }
    let mut t = Tokenizer::new();
    t.str("blockwise").str(&f.label).str(&f.token).serde(&spec.out).serde(&spec.dtype);
    t.u64(u64::from(spec.concatenate)).serde(&spec.new_axes).serde(&spec.adjust_chunks);
    for a in &args {
        match a {
            BlockwiseArg::Array(x, ind) => t.str(&x.name).serde(ind),
            BlockwiseArg::Literal(v) => t.value(v),
        };
    }
    let name = t.name(&f.label);
    let key_name: Arc<str> = Arc::from(name.as_str());
    let joins: Arc<str> = Arc::from(format!("concatenate-{name}"));
    let out_numblocks: Vec<usize> = out_chunks.iter().map(Vec::len).collect();
    let (mut tasks, mut made) = (Vec::new(), FxHashSet::default());
    for idx in grid(&out_numblocks) {
        let at: BTreeMap<char, usize> = spec.out.iter().copied().zip(idx.iter().copied()).collect();
        let mut deps: Vec<Key> = Vec::new();
        let mut call_args = Vec::with_capacity(args.len());
        for (i, a) in args.iter().enumerate() {
            match a {
                BlockwiseArg::Literal(v) => call_args.push(Arg::Lit(v.clone())),
                BlockwiseArg::Array(x, ind) => {
                    // A broadcast axis (length 1) has one block, block 0.
                    let own = |d: usize| x.chunks[d].len() == 1;
                    let span: Vec<usize> = ind
                        .iter()
                        .enumerate()
                        // A contracted broadcast axis gives its one block once
                        // when joined, else once per block of the others, as Dask's.
                        .map(|(d, c)| {
                            if at.contains_key(c) || (own(d) && spec.concatenate) {
                                1
                            } else {
                                chunks[c].len()
                            }
                        })
                        .collect();
                    let keys_of = |sub: &[usize]| -> Key {
                        let full: Vec<usize> = ind
                            .iter()
                            .zip(sub)
                            .enumerate()
                            .map(|(d, (c, &s))| if own(d) { 0 } else { at.get(c).copied().unwrap_or(s) })
                            .collect();
                        x.block_key(&full)
                    };
                    let contracted: Vec<usize> =
                        (0..ind.len()).filter(|&d| !at.contains_key(&ind[d])).collect();
                    if contracted.is_empty() || (spec.concatenate && span.iter().all(|&n| n == 1)) {
                        deps.push(keys_of(&vec![0; ind.len()]));
                        call_args.push(Arg::Dep(deps.len() as u32 - 1));
                    } else if spec.concatenate {
                        let fixed: Vec<usize> = ind
                            .iter()
                            .enumerate()
                            .map(|(d, c)| if own(d) { 0 } else { at.get(c).copied().unwrap_or(0) })
                            .collect();
                        let mut coords = vec![i];
                        coords.extend(&fixed);
                        let key = block(&joins, &coords);
                        if made.insert(key.clone()) {
                            let parts: Vec<Key> = grid(&span).iter().map(|s| keys_of(s)).collect();
                            let args = (0..parts.len() as u32).map(Arg::Dep).collect();
                            let op = ArrayOp::Concat { numblocks: span.clone() };
                            tasks.push(array_task(ctx, key.clone(), op, args, parts));
                        }
                        deps.push(key);
                        call_args.push(Arg::Dep(deps.len() as u32 - 1));
                    } else {
                        let mut sub = vec![0; ind.len()];
                        call_args.push(nested(&span, &contracted, 0, &mut sub, &keys_of, &mut deps));
                    }
                }
            }
        }
        let shape = out_chunks.iter().zip(&idx).map(|(c, &i)| Some(c[i])).collect();
        let func = Func::Block(Arc::new(BlockCall { func: f.func.clone(), shape }));
        let mut task = Task::new(block(&key_name, &idx), Op::Call { func, args: call_args }, deps);
        task.annotations = ctx.annotations.clone();
        tasks.push(task);
    }
    let layers = args
        .iter()
        .filter_map(|a| if let BlockwiseArg::Array(x, _) = a { Some(x.layer.clone()) } else { None })
        .collect();
    Ok(finish(name, tasks, layers, out_chunks, spec.dtype))
}

/// The blocks along the contracted axes as nested arrays (outermost the
/// argument's first contracted axis, as Dask's), each a dependency.
fn nested(
    span: &[usize],
    contracted: &[usize],
    level: usize,
    sub: &mut [usize],
    key: &dyn Fn(&[usize]) -> Key,
    deps: &mut Vec<Key>,
) -> Arg {
    let Some(&d) = contracted.get(level) else {
        deps.push(key(sub));
        return Arg::Dep(deps.len() as u32 - 1);
    };
    let items = (0..span[d])
        .map(|i| {
            sub[d] = i;
            nested(span, contracted, level + 1, sub, key, deps)
        })
        .collect();
    Arg::List(items)
}

fn distinct(ind: &[char], what: &str) -> Result<(), ArrayError> {
    let mut seen = FxHashSet::default();
    match ind.iter().find(|c| !seen.insert(**c)) {
        Some(c) => Err(bad(format!("{what} repeats '{c}' (diagonals are not supported)"))),
        None => Ok(()),
    }
}
