//! What every kernel runs with: the context of its task, and the runner of
//! user closures. User closures appear only as `Udf` (source text, an entry
//! point and the captured values); the engine runs them through the
//! `UdfRunner` trait that the script layer implements, so the engine never
//! depends on Rhai. This sits below the kernels; `crate::exec` above them.

use std::any::Any;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

use crate::coordination::Coordinator;
use crate::error::TaskError;
use crate::key::Key;
use crate::value::Value;

/// A user closure in shipped form: the source chunks that define it, the name
/// of the function to call and the values it captured. Every executor, local
/// or remote, compiles the chunks (cached per thread) and calls `entry`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Udf {
    /// For keys and messages: `"inc"`, or `"lambda"` for anonymous closures.
    pub label: String,
    pub entry: String,
    #[serde(with = "shipped")]
    pub code: Arc<Code>,
    /// Captured values, passed before the call's own arguments.
    pub curry: Vec<Value>,
}

/// The source text a closure needs, as separately compiled chunks (one per
/// REPL input or script file, so positions and closure names reproduce).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Code {
    /// Hash of every chunk: executors cache compiled code by it.
    pub id: u128,
    pub chunks: Vec<SourceChunk>,
}

impl Code {
    /// Code of `chunks`, with its id: a hash of every chunk's origin and text.
    pub fn new(chunks: Vec<SourceChunk>) -> Code {
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        for c in &chunks {
            h.update(&(c.origin.len() as u64).to_le_bytes());
            h.update(c.origin.as_bytes());
            h.update(&(c.text.len() as u64).to_le_bytes());
            h.update(c.text.as_bytes());
        }
        Code { id: h.digest128(), chunks }
    }
}

/// How closures' code travels to a cluster. A script's code is the same
/// for all of its tasks, so a task refers to it by id and each code goes
/// once per graph to the scheduler and once per worker (20,000 `map` tasks
/// of a 1 KiB script were 20 MiB on the wire, now 20,000 ids). Outside
/// [`shipped::by_reference`] and [`shipped::resolving`] a closure is
/// written and read whole, as before.
pub mod shipped {
    use std::cell::RefCell;
    use std::sync::{Arc, Mutex};

    use rustc_hash::FxHashMap;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::{Code, SourceChunk};

    /// Codes a process has received, by id.
    pub type CodeTable = Mutex<FxHashMap<u128, Arc<Code>>>;

    thread_local! {
        static SENT: RefCell<Option<FxHashMap<u128, Arc<Code>>>> = const { RefCell::new(None) };
        static TABLE: RefCell<Option<Arc<CodeTable>>> = const { RefCell::new(None) };
    }

    /// Puts a thread-local back as it was, also when the closure panics
    /// (tasks run under `catch_unwind`; the thread lives on).
    struct Restore<T: 'static>(&'static std::thread::LocalKey<RefCell<Option<T>>>, Option<T>);

    impl<T: 'static> Drop for Restore<T> {
        fn drop(&mut self) {
            let outer = self.1.take();
            self.0.with(|v| *v.borrow_mut() = outer);
        }
    }

    /// Runs `encode` with closures written as references to their code;
    /// returns its result and the codes it referred to.
    pub fn by_reference<R>(encode: impl FnOnce() -> R) -> (R, Vec<Arc<Code>>) {
        let outer = SENT.with(|s| s.borrow_mut().replace(FxHashMap::default()));
        let restore = Restore(&SENT, outer);
        let r = encode();
        let codes = SENT.with(|s| s.borrow_mut().take());
        drop(restore);
        (r, codes.map(|c| c.into_values().collect()).unwrap_or_default())
    }

    /// Runs `decode` with references resolved from `table`; a reference to
    /// a code not in it is a decoding error.
    pub fn resolving<R>(table: &Arc<CodeTable>, decode: impl FnOnce() -> R) -> R {
        let outer = TABLE.with(|t| t.borrow_mut().replace(table.clone()));
        let _restore = Restore(&TABLE, outer);
        decode()
    }

    pub fn serialize<S: Serializer>(code: &Arc<Code>, s: S) -> Result<S::Ok, S::Error> {
        let by_ref = SENT.with(|sent| match sent.borrow_mut().as_mut() {
            Some(sent) => {
                sent.entry(code.id).or_insert_with(|| code.clone());
                true
            }
            None => false,
        });
        let chunks = if by_ref { None } else { Some(&code.chunks) };
        (code.id, chunks).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Arc<Code>, D::Error> {
        let (id, chunks) = <(u128, Option<Vec<SourceChunk>>)>::deserialize(d)?;
        if let Some(chunks) = chunks {
            return Ok(Arc::new(Code { id, chunks }));
        }
        let found = TABLE.with(|t| {
            t.borrow().as_ref().and_then(|t| t.lock().unwrap_or_else(|e| e.into_inner()).get(&id).cloned())
        });
        found.ok_or_else(|| {
            serde::de::Error::custom(format!("the code {id:032x} of a closure was not received"))
        })
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SourceChunk {
    /// Where the text came from (a file name or `"<input 3>"`), for messages.
    pub origin: Arc<str>,
    pub text: Arc<str>,
}

/// What a running task can see of its surroundings.
#[derive(Clone, Copy)]
pub struct TaskContext<'a> {
    pub key: &'a Key,
    /// Set when the scheduler cancels this attempt.
    pub cancelled: &'a Arc<AtomicBool>,
    /// Set when the client that runs this task inline (sync mode) is
    /// interrupted (Ctrl-C): the task stops, and is not failed.
    pub interrupt: Option<&'a Arc<AtomicBool>>,
    /// The GPU this attempt was given (as `CUDA_VISIBLE_DEVICES` names
    /// it) by a worker that offers several: programs it runs see that one.
    pub device: Option<&'a str>,
    /// The worker's own folder (under `--local-directory`): programs run
    /// there unless told otherwise, so their files stay with the worker.
    /// `None` in a local session, where they run in its working directory.
    pub workdir: Option<&'a std::path::Path>,
    /// Where lines a task's program prints go as they come (the
    /// dashboard's log), besides its result; `None` where nobody shows them.
    pub output: Option<&'a (dyn Fn(&str) + Sync)>,
    /// Where the task's `Variable`, `Queue`, `Lock`… requests go: the
    /// scheduler that runs it. `None` where there is none (tests).
    pub coordinator: Option<&'a Arc<dyn Coordinator>>,
    /// The client tasks submit tasks through (`worker_client`): an
    /// `Arc<dyn Client>`, read by `client::task_client`. Untyped here
    /// because the client module sits above this one.
    pub client: Option<&'a (dyn Any + Send + Sync)>,
    /// Where the task gives its thread back while it waits on tasks it
    /// submitted (`secede`), and takes it again (`rejoin`).
    pub seat: Option<&'a Arc<dyn Seat>>,
}

/// Where running tasks lend their thread while they wait on others
/// (Dask's `secede`/`rejoin`): the worker starts another thread meanwhile
/// and its scheduler stops counting the task against the worker's slots.
/// One per runtime or worker; a task names itself by its key.
pub trait Seat: Send + Sync {
    fn secede(&self, key: &Key);
    fn rejoin(&self, key: &Key);
}

impl<'a> TaskContext<'a> {
    /// A task with nothing around it: no interrupt, device nor folder.
    pub fn new(key: &'a Key, cancelled: &'a Arc<AtomicBool>) -> Self {
        TaskContext {
            key,
            cancelled,
            interrupt: None,
            device: None,
            workdir: None,
            output: None,
            coordinator: None,
            client: None,
            seat: None,
        }
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed) || self.interrupt.is_some_and(|i| i.load(Ordering::Relaxed))
    }
}

/// Runs shipped closures. Implemented by the script layer.
pub trait UdfRunner: Send + Sync {
    fn call(&self, udf: &Udf, args: Vec<Value>, ctx: &TaskContext<'_>) -> Result<Value, TaskError>;

    /// `udf(x)` for each item (bag `map`, `filter`, keys): a runner can look
    /// the closure up once for all of them. An error comes with the index
    /// of the item that caused it.
    fn call_each(
        &self,
        udf: &Udf,
        items: &[Value],
        ctx: &TaskContext<'_>,
    ) -> Result<Vec<Value>, (usize, TaskError)> {
        items
            .iter()
            .enumerate()
            .map(|(i, x)| self.call(udf, vec![x.clone()], ctx).map_err(|e| (i, e)))
            .collect()
    }
}

/// A runner for graphs without closures (tests, the scheduler benchmark).
pub struct NoUdfs;

impl UdfRunner for NoUdfs {
    fn call(&self, udf: &Udf, _: Vec<Value>, _: &TaskContext<'_>) -> Result<Value, TaskError> {
        Err(TaskError::user(format!("no script engine here to run closure '{}'", udf.label)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn udf() -> Udf {
        let chunk = SourceChunk { origin: "a.rhai".into(), text: "fn inc(x) { x + 1 }".into() };
        Udf {
            label: "inc".into(),
            entry: "inc".into(),
            code: Arc::new(Code::new(vec![chunk])),
            curry: vec![],
        }
    }

    #[test]
    fn closures_travel_whole_or_by_reference_to_their_code() {
        let u = udf();
        // Whole: readable anywhere.
        let whole = rmp_serde::to_vec(&u).expect("encode");
        assert_eq!(rmp_serde::from_slice::<Udf>(&whole).expect("decode"), u);
        // By reference: the code comes apart, and only a table that has it reads it back.
        let (bytes, codes) = shipped::by_reference(|| rmp_serde::to_vec(&u).expect("encode"));
        assert!(bytes.len() < whole.len());
        assert_eq!(codes.len(), 1);
        let err = rmp_serde::from_slice::<Udf>(&bytes).expect_err("no table");
        assert!(err.to_string().contains("was not received"), "{err}");
        let table: Arc<shipped::CodeTable> = Arc::default();
        assert!(shipped::resolving(&table, || rmp_serde::from_slice::<Udf>(&bytes)).is_err());
        table.lock().expect("table").insert(codes[0].id, codes[0].clone());
        let back = shipped::resolving(&table, || rmp_serde::from_slice::<Udf>(&bytes)).expect("decode");
        assert_eq!(back, u);
        assert!(Arc::ptr_eq(&back.code, &codes[0]), "the table's copy is shared, not copied");
        // Encoding outside by_reference is whole again.
        assert_eq!(rmp_serde::to_vec(&u).expect("encode"), whole);
    }
}
