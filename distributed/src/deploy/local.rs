//! Adaptive scaling of a `local_cluster`: its worker processes as the
//! manager's jobs (one worker each, named `local-N`).

use std::sync::Arc;

use super::batch::{JobState, Phase};
use super::manager::Provider;
use crate::cluster::LocalCluster;

pub struct LocalProvider {
    pub cluster: Arc<LocalCluster>,
}

impl Provider for LocalProvider {
    fn start(&self) -> Result<(String, Vec<String>), String> {
        let names = self.cluster.add_workers(1).map_err(|e| e.to_string())?;
        let name = names.into_iter().next().ok_or("no worker started")?;
        Ok((name.clone(), vec![name]))
    }

    fn poll(&self, ids: &[String]) -> Result<Vec<JobState>, String> {
        let running = self.cluster.running();
        Ok(ids
            .iter()
            .filter(|id| running.contains(id))
            .map(|id| JobState {
                id: id.clone(),
                state: "RUNNING".into(),
                reason: None,
                phase: Phase::Running,
            })
            .collect())
    }

    fn cancel(&self, ids: &[String], graceful: bool) -> Result<(), String> {
        for id in ids {
            self.cluster.stop_worker(id, graceful);
        }
        Ok(())
    }

    fn fatal(&self, _reason: &str) -> bool {
        false
    }

    fn threads_per_worker(&self) -> u32 {
        self.cluster.options().threads.max(1) as u32
    }

    fn adopt(&self) -> Vec<(String, Vec<String>)> {
        self.cluster.running().into_iter().map(|n| (n.clone(), vec![n])).collect()
    }

    fn kind(&self) -> &'static str {
        "local"
    }
}
