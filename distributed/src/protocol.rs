//! The wire: what scheduler, workers and clients say to each other, and
//! how it is framed. Pure (no sockets here), so the decoder can be driven
//! with random and truncated bytes in tests.
//!
//! A frame is an 8-byte little-endian length and that many bytes of
//! MessagePack. Every connection opens with a [`Hello`] from the side that
//! connected and a [`Reply`] from the side that accepted; frames before the
//! reply may be at most [`HANDSHAKE_MAX`] bytes, so an unauthenticated peer
//! cannot make a process allocate. After it, a frame may be as large as a
//! task result, and the reader asks the memory budget before allocating.
//! Messages are typed enums: nothing on the wire is code, except shipped
//! closures inside task operations, which run only in the Rhai sandbox.

use std::sync::Arc;

use brisk_engine::array::gpu::place::Shipped;
use brisk_engine::client::StoryRow;
use brisk_engine::coordination::{CoordOp, CoordReply};
use brisk_engine::diagnostics::Snapshot;
use brisk_engine::error::{SchedulerError, TaskError};
use brisk_engine::graph::task::Annotations;
use brisk_engine::key::Key;
use brisk_engine::runner::Code;
use brisk_engine::value::Value;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Bumped on any change of the messages; peers of another version are refused.
pub const VERSION: u32 = 23;

/// The first field of every hello: a peer that is not brisk is told apart at once.
pub const MAGIC: &str = "brisk";

/// Largest frame before the handshake is done.
pub const HANDSHAKE_MAX: u64 = 64 * 1024;

/// Largest frame at all (one task result); the memory budget decides below it.
pub const MAX_FRAME: u64 = 1 << 40;

/// Bytes of the length that starts a frame.
pub const HEADER: usize = 8;

/// Why bytes from a peer were not a message.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    #[error("frame of {size} bytes is larger than the {limit}-byte limit")]
    Oversized { size: u64, limit: u64 },
    #[error("malformed message: {0}")]
    Malformed(String),
    #[error("cannot encode a message: {0}")]
    Encode(String),
}

/// Who is connecting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    /// A worker joining the scheduler.
    Worker,
    /// A client (a session, `brisk top`) of the scheduler.
    Client,
    /// Anyone fetching results from a worker: another worker, a client.
    Peer,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Worker => "worker",
            Role::Client => "client",
            Role::Peer => "peer",
        }
    }
}

/// The first frame on every connection, from the side that connected.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    pub magic: String,
    pub version: u32,
    pub role: Role,
    /// The shared secret, when the cluster has one.
    pub token: Option<String>,
    /// For logs: the worker's or client's name.
    pub name: String,
}

/// The answer to a hello. A refused peer is told why, then dropped.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Reply {
    Welcome { version: u32 },
    Refused { reason: String },
}

/// Bytes that travel as one MessagePack binary (not an array of numbers),
/// shared without copying once received.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Blob(pub Arc<[u8]>);

impl Serialize for Blob {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for Blob {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Blob, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Blob;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E>(self, v: &[u8]) -> Result<Blob, E> {
                Ok(Blob(Arc::from(v)))
            }
            fn visit_byte_buf<E>(self, v: Vec<u8>) -> Result<Blob, E> {
                Ok(Blob(Arc::from(v)))
            }
        }
        d.deserialize_bytes(V)
    }
}

/// One task as the client sends it: the operation is encoded once, on the
/// client, and passed through the scheduler untouched to the worker that
/// runs it (the scheduler never decodes or runs an operation).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TaskDef {
    pub key: Key,
    pub deps: Vec<Key>,
    /// Static order from `graph::order`.
    pub order: u32,
    pub annotations: Option<Arc<Annotations>>,
    /// The operation, its closures' code written as references (`shipped`).
    pub op: Blob,
    /// The ids of the codes `op` refers to.
    pub codes: Vec<u128>,
}

/// A worker as clients see it (`c.workers()`, `brisk top`, `/api/v1/workers`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkerRow {
    pub name: String,
    /// Where its data is served (`tcp://host:port`).
    pub address: String,
    pub threads: u32,
    /// Tasks assigned to it now (running or waiting for inputs there).
    pub processing: u64,
    /// Results it holds.
    pub in_memory: u64,
    /// Bytes of results held (its last heartbeat).
    pub memory: u64,
    pub memory_limit: Option<u64>,
    pub spilled: u64,
    pub resources: Vec<(String, f64)>,
    /// "NAME, N GiB" or "no GPU".
    pub gpu: String,
    /// A CUDA worker's device memory limit for results (`None`: not one),
    /// the device bytes its results hold, and those moved off the device.
    #[serde(default)]
    pub device_memory_limit: Option<u64>,
    #[serde(default)]
    pub device_memory: u64,
    #[serde(default)]
    pub device_spilled: u64,
    /// Bytes of GPU blocks it received device to device.
    #[serde(default)]
    pub device_transferred: u64,
    pub pid: u32,
    /// Bytes it fetched from peers so far.
    pub transferred: u64,
}

/// A result a worker holds, as it tells a scheduler that did not see it
/// made (one restarted from its journal).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HeldResult {
    pub key: Key,
    pub nbytes: u64,
    /// It names files only this worker has (see `WorkerMsg::Finished`).
    pub pinned: bool,
}

/// How the adaptive target is computed (see `deploy::adaptive::Rule`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdaptiveRule {
    pub target_duration: f64,
    pub threads_per_worker: u32,
}

/// The scheduler's side of an adaptive decision.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AdaptiveAnswer {
    /// Workers the work asks for.
    pub target: u64,
    /// Connected workers safe to close to come down to `target`, best first.
    pub to_close: Vec<String>,
    /// Every connected worker's name (leaving ones included).
    pub workers: Vec<String>,
    /// Seconds since the scheduler last had work; `None` while it has some.
    pub idle_for: Option<f64>,
}

/// Client → scheduler.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum ClientMsg {
    /// The first message on every connection: who this client is (`id`,
    /// the same for all its connections) and the references it holds, per
    /// key (none on the first connection). A scheduler restarted from its
    /// journal gives a client that comes back its references and futures;
    /// answered by `Attached`.
    Attach { id: u64, wants: Vec<(Key, u32)> },
    /// Add tasks and one reference per `wants` entry; answered by
    /// `Accepted` or `Refused` with the same id.
    /// `codes`: the closures' code the tasks refer to, each once.
    UpdateGraph { id: u64, tasks: Vec<TaskDef>, wants: Vec<Key>, codes: Vec<Arc<Code>> },
    /// Drop one reference per key (futures dropped or cancelled).
    Release { keys: Vec<Key> },
    /// Ask for the workers and the progress; answered by `Info`.
    Info { id: u64 },
    /// Restart every worker: results go, futures err; answered by `Done`.
    Restart { id: u64 },
    /// Ask `n` workers to leave (scaling down); answered by `Done`.
    Retire { id: u64, n: u32 },
    /// Ask these workers (by name) to leave: their results move to other
    /// workers first; answered by `Done` at once.
    RetireWorkers { id: u64, names: Vec<String> },
    /// How many workers the work asks for now (adaptive scaling); answered
    /// by `Adaptive`.
    Adaptive { id: u64, rule: AdaptiveRule },
    /// Check every invariant of the scheduler's state (tests); answered by `Validated`.
    Validate { id: u64 },
    /// What the scheduler remembers of these keys; answered by `Story`.
    Story { id: u64, keys: Vec<Key> },
    /// Send this client a `TaskRan` for every task any worker runs from
    /// now on (the task stream of `:dash` and `brisk top`).
    Stream,
    /// A `Variable`, `Queue`, `Lock`… request; answered by `Coordinated`,
    /// at once or (`wait`) once it can be.
    Coordinate { id: u64, op: CoordOp, wait: bool },
    /// Stop waiting on request `id` (its timeout passed): answered by
    /// `Coordinated` with `TimedOut`, unless its answer went already.
    Withdraw { id: u64 },
    /// Run `op` (a call, its closure's code inline) once on every worker
    /// now (`c.run`); answered by `Ran`.
    Run { id: u64, op: Blob },
}

/// Scheduler → client.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum ToClient {
    /// `journaled`: the scheduler keeps a journal, so a client that loses
    /// it should come back (it restarts on the same address).
    Attached {
        journaled: bool,
    },
    Accepted {
        id: u64,
    },
    /// The graph was refused (a missing dependency, a cycle).
    Refused {
        id: u64,
        error: SchedulerError,
    },
    /// A wanted key is in memory on these workers (their data addresses).
    InMemory {
        key: Key,
        who_has: Vec<String>,
    },
    Erred {
        key: Key,
        error: TaskError,
    },
    Info {
        id: u64,
        workers: Vec<WorkerRow>,
        snapshot: Snapshot,
        /// The scheduler's HTTP address, if it serves one.
        dashboard: Option<String>,
    },
    Done {
        id: u64,
    },
    /// `None`: every invariant holds; else the first that does not.
    Validated {
        id: u64,
        error: Option<String>,
    },
    Story {
        id: u64,
        rows: Vec<StoryRow>,
    },
    Adaptive {
        id: u64,
        answer: AdaptiveAnswer,
    },
    Coordinated {
        id: u64,
        reply: CoordReply,
    },
    /// What `Run` gave on each worker (its address), in the workers' order.
    Ran {
        id: u64,
        results: Vec<(String, Result<Value, TaskError>)>,
    },
    /// A task ran (for clients that asked for the stream): on which worker
    /// and thread, from `start_us` to `stop_us` on the scheduler's clock.
    TaskRan {
        key: Key,
        worker: String,
        thread: u32,
        start_us: u64,
        stop_us: u64,
        ok: bool,
    },
    /// A line a task's program printed on `worker`.
    Output {
        key: Key,
        worker: String,
        line: String,
    },
}

/// Worker → scheduler.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum WorkerMsg {
    /// The first message after the handshake.
    Register {
        nthreads: u32,
        memory_limit: Option<u64>,
        /// A CUDA worker's device memory limit for results.
        #[serde(default)]
        device_memory_limit: Option<u64>,
        resources: Vec<(String, f64)>,
        /// Where the worker serves its data.
        address: String,
        gpu: String,
        pid: u32,
        /// The same for every connection of this worker process: a
        /// scheduler restarted from its journal knows it again by this.
        id: u64,
        /// Results it already holds (after the scheduler it served died).
        held: Vec<HeldResult>,
    },
    /// Results made for a scheduler that died, finished after this worker
    /// registered with its successor.
    Holds {
        held: Vec<HeldResult>,
    },
    Finished {
        key: Key,
        run: u32,
        nbytes: u64,
        duration_us: f64,
        /// The worker's task thread that ran it.
        thread: u32,
        /// The result names files only this worker has (a shuffle split's
        /// pieces): a copy elsewhere would be no copy.
        pinned: bool,
    },
    Failed {
        key: Key,
        run: u32,
        error: TaskError,
    },
    /// Input `dep` of the task could not be fetched from any of `holders`
    /// (their data addresses): the worker dropped the task; the scheduler
    /// decides where its input comes from now.
    MissingData {
        key: Key,
        run: u32,
        dep: Key,
        holders: Vec<String>,
    },
    Heartbeat {
        /// Bytes of results and fetched inputs in memory.
        memory: u64,
        running: u32,
        /// Bytes this worker fetched from peers so far (inputs and shuffle pieces).
        transferred: u64,
        /// Bytes of results spilled to disk (their size in memory).
        spilled: u64,
        /// Device bytes of results on this worker's GPU.
        #[serde(default)]
        device: u64,
        /// Bytes of GPU results moved to host memory or disk for room.
        #[serde(default)]
        device_spilled: u64,
        /// Bytes of GPU blocks received device to device (CUDA IPC).
        #[serde(default)]
        device_transferred: u64,
    },
    /// This worker now holds a copy of `key` (asked by `Replicate`).
    Replicated {
        key: Key,
    },
    /// Process memory passed the pause threshold (`true`: send no more
    /// tasks) or fell back under it.
    Paused {
        paused: bool,
    },
    /// The worker is leaving on purpose (SIGTERM): its work moves elsewhere
    /// and does not count as a death; answered by `Close`.
    Closing,
    /// This CUDA worker's GPU failed (a CUDA error that leaves its context
    /// unusable): it leaves at once, and its work runs elsewhere, counted
    /// as a death (a task that breaks every GPU it runs on ends as
    /// KilledWorker).
    GpuFailed {
        error: String,
    },
    /// A line a task's program printed (`run_command`), for clients that
    /// asked for the stream (the dashboard's log).
    Output {
        key: Key,
        line: String,
    },
    /// Attempt `run` of task `key` waits on tasks it submitted and lent
    /// its thread (`seceded`), or holds it again.
    Seceded {
        key: Key,
        run: u32,
        seceded: bool,
    },
    /// What a `Run` gave here.
    RunResult {
        id: u64,
        result: Result<Value, TaskError>,
    },
}

/// A dependency of a task and the data addresses of the workers holding it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DepAt {
    pub key: Key,
    pub who_has: Vec<String>,
}

/// Scheduler → worker.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum ToWorker {
    /// The answer to `Register`: whether the scheduler keeps a journal
    /// (then a worker that loses it waits for it to come back rather than
    /// exiting).
    Registered { journaled: bool },
    Compute {
        key: Key,
        run: u32,
        op: Blob,
        deps: Vec<DepAt>,
        /// Lower runs first: (negated user priority, generation, order).
        priority: (i64, u64, u32),
        /// Seconds a run may take (`annotate(#{timeout})`).
        timeout: Option<f64>,
        /// The task's `GPU` resource: a worker that offers several GPUs
        /// gives it one device of its own (`TaskContext::device`).
        gpus: f64,
    },
    /// Closures' code that the next tasks refer to (each sent once per worker).
    Codes { codes: Vec<Arc<Code>> },
    /// Code no task refers to any more.
    ForgetCodes { ids: Vec<u128> },
    /// Stop the task if it runs; its result is not wanted.
    Cancel { key: Key },
    /// Drop held results.
    Free { keys: Vec<Key> },
    /// Fetch a copy of `key` from the worker serving data at `from` and
    /// keep it (a result that would be costly to compute again).
    Replicate { key: Key, from: String },
    /// Leave the cluster (scaled down, or the scheduler is closing);
    /// `restart`: the scheduler removed this worker (it missed heartbeats),
    /// and a nanny should start a fresh one in its place.
    Close { reason: String, restart: bool },
    /// Run `op` now, beside the tasks, and answer `RunResult` (`c.run`).
    Run { id: u64, op: Blob },
}

/// Where a result belongs: a CUDA worker's GPU results live on its device,
/// and go back there when they were moved to the host or to disk for room
/// or travelled between processes (always as host copies).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Home {
    Host,
    Device,
}

/// Device bytes one answer lends at most (past its first block): the
/// sender stages each lent block in memory of its own until the asker has
/// copied it, so a fetch of many large blocks goes in rounds.
pub const LEND_AT_ONCE: u64 = 1 << 30;

/// Device bytes from which a value is lent rather than copied through the
/// host: a first mapping of staging memory costs ~13 ms between two GPUs
/// and a lent value a round trip more, while a few KiB through the host
/// cost well under a millisecond (8-byte partial sums took 9–12 ms lent).
pub const LEND_FROM: u64 = 1 << 20;

/// A request to a worker's data port.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum PeerMsg {
    GetData {
        keys: Vec<Key>,
        /// The asker's host, when it is a CUDA worker that takes GPU
        /// blocks device to device ([`crate::cuda::host_id`]): a CUDA
        /// worker of the same host lends them through CUDA IPC.
        #[serde(default)]
        host: Option<String>,
    },
    /// The asker has copied the blocks the last answer lent (`shipped`):
    /// their staging memory may be reused.
    Release,
    /// Shuffle pieces this worker wrote: of folder `name`, output `out`,
    /// written by the splits `inputs`.
    GetPieces { name: String, out: u32, inputs: Vec<u32> },
}

/// The answer: the value of each key asked for, `None` where the worker
/// does not hold it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum PeerReply {
    Data {
        values: Vec<(Key, Option<Value>)>,
        /// The keys among them whose values belong on a GPU: they travel
        /// as host copies, and a CUDA worker puts them back on its device.
        #[serde(default)]
        on_device: Vec<Key>,
        /// Values whose GPU blocks are lent device to device, until the
        /// asker sends `Release` on this connection.
        #[serde(default)]
        shipped: Vec<(Key, Shipped)>,
        /// GPU values held back, to be asked for again after `Release`: an
        /// answer lends about [`LEND_AT_ONCE`] bytes of staging memory.
        #[serde(default)]
        later: Vec<Key>,
    },
    /// The answer to `Release`.
    Released,
    /// The pieces in the order asked, or why they cannot be read.
    Pieces { pieces: Result<Vec<Blob>, String> },
}

/// `msg` as one frame: the length, then the MessagePack bytes.
pub fn encode<T: Serialize>(msg: &T) -> Result<Vec<u8>, ProtocolError> {
    encode_sized(msg, 0)
}

/// As [`encode`], into a buffer made for about `hint` bytes: a message
/// carrying a large value is then written without growing (and copying)
/// its buffer on the way.
pub fn encode_sized<T: Serialize>(msg: &T, hint: usize) -> Result<Vec<u8>, ProtocolError> {
    let mut buf = Vec::with_capacity(HEADER + hint);
    buf.resize(HEADER, 0);
    rmp_serde::encode::write(&mut buf, msg).map_err(|e| ProtocolError::Encode(e.to_string()))?;
    let len = (buf.len() - HEADER) as u64;
    buf[..HEADER].copy_from_slice(&len.to_le_bytes());
    Ok(buf)
}

/// The body length a frame header announces, checked against `limit`.
pub fn frame_len(header: [u8; HEADER], limit: u64) -> Result<u64, ProtocolError> {
    let size = u64::from_le_bytes(header);
    if size > limit {
        return Err(ProtocolError::Oversized { size, limit });
    }
    Ok(size)
}

/// A frame's body as a message. Any bytes give a message or an error, never
/// a panic: the body may come from anyone who can open a socket.
pub fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, ProtocolError> {
    rmp_serde::from_slice(body).map_err(|e| ProtocolError::Malformed(e.to_string()))
}

/// A whole frame (header and body) from a buffer, as a reader sees it;
/// for tests and tools that hold frames in memory.
pub fn decode_frame<T: DeserializeOwned>(frame: &[u8], limit: u64) -> Result<T, ProtocolError> {
    let Some(header) = frame.get(..HEADER) else {
        return Err(ProtocolError::Malformed(format!("a frame of {} bytes has no header", frame.len())));
    };
    let mut h = [0u8; HEADER];
    h.copy_from_slice(header);
    let len = frame_len(h, limit)?;
    let body = &frame[HEADER..];
    if body.len() as u64 != len {
        return Err(ProtocolError::Malformed(format!(
            "the header announces {len} bytes, the frame has {}",
            body.len()
        )));
    }
    decode(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use brisk_engine::array::chunk::Chunk;
    use brisk_engine::ops::{Arg, Builtin, Func, Op};

    fn sample_frames() -> Vec<Vec<u8>> {
        let op =
            Op::Call { func: Func::Builtin(Builtin::Add), args: vec![Arg::Dep(0), Arg::Lit(Value::Int(1))] };
        let op = Blob(Arc::from(rmp_serde::to_vec(&op).expect("op encodes")));
        let codes = vec![Arc::new(Code::new(vec![]))];
        let chunk = Chunk::from_vec(&[2, 2], vec![1.0f64, 2.0, 3.0, 4.0]).expect("chunk");
        vec![
            encode(&Hello {
                magic: MAGIC.into(),
                version: VERSION,
                role: Role::Worker,
                token: Some("secret".into()),
                name: "w".into(),
            })
            .expect("encodes"),
            encode(&vec![
                ToWorker::Codes { codes },
                ToWorker::Compute {
                    key: Key::new("inc-abc"),
                    run: 3,
                    op,
                    deps: vec![DepAt { key: Key::new("x-1"), who_has: vec!["tcp://127.0.0.1:1".into()] }],
                    priority: (0, 1, 2),
                    timeout: Some(2.5),
                    gpus: 1.0,
                },
            ])
            .expect("encodes"),
            encode(&PeerReply::Data {
                on_device: Vec::new(),
                later: vec![Key::new("e")],
                shipped: vec![(
                    Key::new("d"),
                    Shipped::List(vec![
                        Shipped::Block {
                            handle: vec![7; 64],
                            bytes: 32,
                            kept: true,
                            dtype: brisk_engine::array::dtype::DType::F64,
                            shape: vec![2, 2],
                        },
                        Shipped::Value(Value::Int(3)),
                    ]),
                )],
                values: vec![
                    (Key::new("a"), Some(Value::Array(Arc::new(chunk)))),
                    (
                        Key::new("b"),
                        Some(Value::List(Arc::new(vec![Value::Str("s".into()), Value::Float(1.5)]))),
                    ),
                    (Key::new("c"), None),
                ],
            })
            .expect("encodes"),
        ]
    }

    #[test]
    fn messages_round_trip() {
        let frames = sample_frames();
        let hello: Hello = decode_frame(&frames[0], HANDSHAKE_MAX).expect("hello");
        assert_eq!(hello.role, Role::Worker);
        assert_eq!(hello.token.as_deref(), Some("secret"));
        let batch: Vec<ToWorker> = decode_frame(&frames[1], MAX_FRAME).expect("batch");
        let ToWorker::Compute { key, run, op, deps, .. } = &batch[1] else { panic!("not compute") };
        assert_eq!((key.to_string().as_str(), *run), ("inc-abc", 3));
        assert_eq!(deps[0].who_has, vec!["tcp://127.0.0.1:1".to_string()]);
        let op: Op = decode(&op.0).expect("op");
        assert!(matches!(op, Op::Call { func: Func::Builtin(Builtin::Add), .. }));
        let Ok(PeerReply::Data { values, shipped, .. }) = decode_frame(&frames[2], MAX_FRAME) else {
            panic!("data")
        };
        assert_eq!(values.len(), 3);
        let Shipped::List(parts) = &shipped[0].1 else { panic!("a list") };
        assert!(
            matches!(&parts[0], Shipped::Block { handle, kept: true, shape, .. } if handle.len() == 64 && shape == &[2, 2])
        );
        assert!(matches!(&values[0].1, Some(Value::Array(c)) if c.shape() == [2, 2]));
        assert_eq!(values[2].1, None);
    }

    #[test]
    fn oversized_frames_are_refused_before_reading() {
        let mut frame = sample_frames().remove(0);
        frame[..HEADER].copy_from_slice(&(HANDSHAKE_MAX + 1).to_le_bytes());
        let e = decode_frame::<Hello>(&frame, HANDSHAKE_MAX).expect_err("too large");
        assert!(matches!(e, ProtocolError::Oversized { .. }), "{e}");
        assert!(frame_len(u64::MAX.to_le_bytes(), MAX_FRAME).is_err());
    }

    /// A tiny deterministic generator, so failures reproduce.
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            self.0 >> 33
        }
    }

    fn try_all(body: &[u8]) {
        let _ = decode::<Hello>(body);
        let _ = decode::<Reply>(body);
        let _ = decode::<Vec<ClientMsg>>(body);
        let _ = decode::<Vec<ToClient>>(body);
        let _ = decode::<Vec<WorkerMsg>>(body);
        let _ = decode::<Vec<ToWorker>>(body);
        let _ = decode::<PeerMsg>(body);
        let _ = decode::<PeerReply>(body);
        if let Ok(op) = decode::<brisk_engine::ops::Op>(body) {
            let _ = format!("{op:?}");
        }
    }

    /// Random bytes, truncations and single-byte corruptions of real
    /// frames: every one decodes or errs; none panics.
    #[test]
    fn the_decoder_survives_garbage() {
        let mut rng = Lcg(0x5eed);
        for _ in 0..20_000 {
            let n = (rng.next() % 200) as usize;
            let body: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            try_all(&body);
        }
        for frame in sample_frames() {
            let body = &frame[HEADER..];
            for cut in 0..body.len() {
                try_all(&body[..cut]);
            }
            for _ in 0..5_000 {
                let mut b = body.to_vec();
                let i = (rng.next() as usize) % b.len();
                b[i] = rng.next() as u8;
                let j = (rng.next() as usize) % b.len();
                b[j] ^= 0x80;
                try_all(&b);
            }
        }
    }

    /// Nesting deep enough to overflow a naive recursive decoder is refused.
    #[test]
    fn deep_nesting_is_refused() {
        // 100,000 one-element arrays, as a Value::List chain would be encoded.
        let mut body = vec![0x91; 100_000];
        body.push(0xc0);
        try_all(&body);
    }
}
