//! The live dashboard: an inline panel under the prompt during a compute
//! (`inline`) and a full screen (`full`, `:dash`). `model` turns the
//! engine's diagnostics into what is shown; `widgets` draws it.

pub mod full;
pub mod inline;
pub mod model;
pub mod widgets;

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use brisk_engine::{gpu, host};
use brisk_script::SessionState;

use model::Sample;

/// Samples the session's runtime and the host; the one place the
/// dashboard reads clocks, `/proc` and the GPU driver.
pub struct Sampler {
    state: Arc<SessionState>,
    t0: Instant,
}

impl Sampler {
    pub fn new(state: Arc<SessionState>) -> Sampler {
        Sampler { state, t0: Instant::now() }
    }

    pub fn snapshot(&self) -> brisk_engine::diagnostics::Snapshot {
        self.state.client().snapshot()
    }

    pub fn sample(&self) -> Sample {
        static MEMORY: OnceLock<Option<u64>> = OnceLock::new();
        // On a cluster the workers and the progress come in one request.
        let (snapshot, cluster) = match self.state.with_cluster(|c| c.client.workers_and_progress()) {
            Some(Ok((workers, snapshot))) => (snapshot, Some(workers)),
            Some(Err(_)) => (Default::default(), Some(Vec::new())),
            None => (self.snapshot(), None),
        };
        Sample {
            at: self.t0.elapsed(),
            snapshot,
            cpu_seconds: host::process_cpu_seconds(),
            memory_limit: *MEMORY.get_or_init(host::total_memory),
            gpus: gpu::probe(),
            cluster,
        }
    }
}
