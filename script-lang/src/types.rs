//! Every script type, in one place: the lazy collections (Array, Bag,
//! DataFrame, Series, Delayed), computed frames and Series, groupbys,
//! futures and the client handle. Registration lives in `api/`, printing in
//! `print`; these are only the types and their names.

use std::sync::{Arc, Mutex};

use brisk_engine::Future;
use brisk_engine::client::AsCompleted;
use brisk_engine::collections::array::Array;
use brisk_engine::collections::bag::Bag;
pub use brisk_engine::collections::delayed::Delayed;
use brisk_engine::collections::frame::{DataFrame, Series};
use brisk_engine::frame::partition::Frame;
use brisk_engine::ops::Func;
use rhai::{Dynamic, EvalAltResult};

use crate::error::engine_error;
use crate::state::SessionState;

type Res<T> = Result<T, Box<EvalAltResult>>;

/// A lazy array in a script (type name "Array").
#[derive(Clone)]
pub struct LazyArray {
    pub a: Array,
}

impl LazyArray {
    pub fn new(a: Array) -> LazyArray {
        LazyArray { a }
    }
}

/// A user's CUDA source and kernel name (`raw_kernel`; type name
/// "RawKernel"). Closures may capture it: it travels as a map marked with
/// `RAW_KERNEL_MARK` (`convert.rs`).
#[derive(Clone)]
pub struct RawKernel(pub Arc<brisk_engine::array::gpu::user::RawSpec>);

/// The key that marks a travelling `RawKernel`.
pub const RAW_KERNEL_MARK: &str = "__brisk_raw_kernel__";

/// A lazy bag in Rhai (type name "Bag").
#[derive(Clone)]
pub struct LazyBag {
    pub b: Bag,
}

/// A lazy frame in Rhai (type name "DataFrame").
#[derive(Clone)]
pub struct LazyFrame {
    pub f: DataFrame,
}

/// A lazy column (type name "Series").
#[derive(Clone)]
pub struct LazySeries {
    pub s: Series,
}

/// A computed frame (type name "LocalDataFrame").
#[derive(Clone)]
pub struct LocalFrame(pub Arc<Frame>);

/// A computed column (type name "LocalSeries").
#[derive(Clone)]
pub struct LocalSeries(pub Arc<Frame>);

/// `df.groupby(by)`, waiting for its aggregation.
#[derive(Clone)]
pub struct GroupBy {
    pub(crate) f: DataFrame,
    pub(crate) by: Vec<String>,
    /// Output partitions (Dask's `split_out`); 1 is a tree reduction.
    pub(crate) split_out: usize,
}

/// A future in scripts.
#[derive(Clone)]
pub struct RFuture(pub Future);

/// The session's client (`client()`); its methods mirror the free functions.
#[derive(Clone)]
pub struct Client {
    pub(crate) state: Arc<SessionState>,
}

/// A cluster of batch jobs (`slurm_cluster`, `jobqueue_cluster`; type name "Cluster").
#[derive(Clone)]
pub struct JobCluster(pub Arc<brisk_distributed::deploy::jobcluster::JobQueueCluster>);

/// A Kubernetes cluster of this session (`kube_cluster`; type name "KubeCluster").
#[derive(Clone)]
pub struct KubeClusterRef(pub Arc<KubeHandle>);

pub struct KubeHandle {
    pub cluster: brisk_k8s::session::KubeCluster,
    /// Where the session reaches the scheduler when not at its Service (a port-forward).
    pub address: Option<String>,
}

impl KubeClusterRef {
    pub fn address(&self) -> String {
        self.0.address.clone().unwrap_or_else(|| self.0.cluster.target().scheduler_address())
    }
}

/// `for f in as_completed(futs)`: futures in the order they finish.
#[derive(Clone)]
pub struct AsCompletedIter(pub(crate) Arc<Mutex<Option<AsCompleted>>>);

impl IntoIterator for AsCompletedIter {
    type Item = Res<RFuture>;
    type IntoIter = Streaming;

    /// Each step blocks until the next future finishes; an interrupt or a
    /// runtime that went away ends the loop with an error.
    fn into_iter(self) -> Streaming {
        Streaming(self.0.lock().ok().and_then(|mut g| g.take()))
    }
}

/// The iterator behind `as_completed`.
pub struct Streaming(Option<AsCompleted>);

impl Iterator for Streaming {
    type Item = Res<RFuture>;

    fn next(&mut self) -> Option<Res<RFuture>> {
        Some(self.0.as_mut()?.next()?.map(RFuture).map_err(engine_error))
    }
}

/// A function made lazy by `delayed(f)`.
#[derive(Clone)]
pub struct DelayedFn {
    pub func: Func,
    pub label: String,
}

/// The user-facing name of a value's type.
pub fn type_name(d: &Dynamic) -> String {
    if d.is::<Delayed>() {
        "Delayed".into()
    } else if d.is::<LazyArray>() {
        "Array".into()
    } else if d.is::<LazyBag>() {
        "Bag".into()
    } else if d.is::<LazyFrame>() {
        "DataFrame".into()
    } else if d.is::<LazySeries>() {
        "Series".into()
    } else if d.is::<LocalFrame>() {
        "LocalDataFrame".into()
    } else if d.is::<LocalSeries>() {
        "LocalSeries".into()
    } else if d.is::<brisk_engine::array::Chunk>() {
        "ndarray".into()
    } else if d.is::<RFuture>() {
        "Future".into()
    } else if d.is::<RawKernel>() {
        "RawKernel".into()
    } else if d.is::<DelayedFn>() {
        "DelayedFunction".into()
    } else if d.is::<Client>() {
        "Client".into()
    } else if d.is::<JobCluster>() {
        "Cluster".into()
    } else if d.is::<KubeClusterRef>() {
        "KubeCluster".into()
    } else {
        let n = d.type_name();
        n.rsplit("::").next().unwrap_or(n).to_string()
    }
}
