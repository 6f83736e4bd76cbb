//! brisk on Kubernetes, shaped like the dask-kubernetes operator:
//!
//! - `crd`: the `BriskCluster` resource; `brisk k8s crd` prints its definition.
//! - `manifests`: the objects of a cluster, built with no I/O; `brisk k8s
//!   manifests` prints them for `kubectl apply`.
//! - `reconcile`: the operator's decisions, pure; `operator`: `brisk
//!   operator`, which sees, decides with `reconcile` and acts.
//! - `session`: `kube_cluster(#{...})`, which writes the resource from a session.
//!
//! None of this has run against a real API server: the machines it is
//! built on have none. It is tested against the API's schemas and an
//! in-memory emulator (`tests/kube.rs`).

pub mod crd;
mod http;
pub mod manifests;
pub mod operator;
pub mod quantity;
pub mod reconcile;
pub mod session;

use crd::{BriskClusterSpec, WorkerGroupSpec};
use kube::CustomResourceExt;
use manifests::Target;

/// The name of the group `spec.workers` describes.
pub const DEFAULT_GROUP: &str = "default";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The cluster's description cannot be made into objects.
    #[error("{0}")]
    Spec(String),
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("{0}")]
    Other(String),
}

/// `2n` random hex digits (pod name suffixes, tokens).
pub fn random_hex(n: usize) -> Result<String, Error> {
    use std::io::Read;
    let mut bytes = vec![0u8; n];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| Error::Other(format!("cannot read /dev/urandom: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Cluster and group names become parts of object names (DNS labels).
pub fn validate_name(name: &str) -> Result<(), Error> {
    let ok = !name.is_empty()
        && name.len() <= 40
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(Error::Spec(format!(
            "{name:?} is not a valid name: use 1 to 40 lower-case letters, digits and '-', not at either end"
        )))
    }
}

/// `brisk k8s crd`: the CustomResourceDefinition, as YAML.
pub fn crd_yaml() -> Result<String, Error> {
    yaml(&[serde_json::to_value(crd::BriskCluster::crd()).map_err(|e| Error::Other(e.to_string()))?])
}

/// `brisk k8s operator`: the CRD and what the operator needs to run in
/// the cluster (service account, rights, Deployment), as YAML.
pub fn operator_yaml(image: &str, namespace: &str) -> Result<String, Error> {
    let mut docs =
        vec![serde_json::to_value(crd::BriskCluster::crd()).map_err(|e| Error::Other(e.to_string()))?];
    docs.extend(manifests::operator_objects(image, namespace)?);
    yaml(&docs)
}

/// What `brisk k8s manifests` takes.
#[derive(Clone, Debug)]
pub struct ManifestOptions {
    pub name: String,
    pub namespace: String,
    pub image: String,
    pub workers: i32,
    pub gpus_per_worker: u32,
    /// Per worker: CPU and memory limits ("4", "16Gi").
    pub cpu: Option<String>,
    pub memory: Option<String>,
    pub token: String,
}

/// The token Secret, the scheduler Deployment and Service and the workers'
/// Deployment, as one YAML stream for `kubectl apply -f -`.
pub fn manifests_yaml(o: &ManifestOptions) -> Result<String, Error> {
    validate_name(&o.name)?;
    let mut limits = serde_json::Map::new();
    if let Some(c) = &o.cpu {
        limits.insert("cpu".into(), c.as_str().into());
    }
    if let Some(m) = &o.memory {
        limits.insert("memory".into(), m.as_str().into());
    }
    if o.gpus_per_worker > 0 {
        limits.insert("nvidia.com/gpu".into(), o.gpus_per_worker.to_string().into());
    }
    let resources = (!limits.is_empty()).then(|| serde_json::json!({ "limits": limits }));
    let spec = BriskClusterSpec {
        image: o.image.clone(),
        image_pull_policy: None,
        scheduler: Default::default(),
        workers: WorkerGroupSpec { replicas: o.workers, resources, ..Default::default() },
        worker_groups: vec![],
        autoscale: None,
        idle_timeout: 0,
    };
    let t = Target { name: &o.name, namespace: &o.namespace, owner: None };
    let value = |r: Result<serde_json::Value, serde_json::Error>| r.map_err(|e| Error::Other(e.to_string()));
    yaml(&[
        value(serde_json::to_value(manifests::token_secret(&t, &o.token)?))?,
        value(serde_json::to_value(manifests::scheduler_deployment(&spec, &t)?))?,
        value(serde_json::to_value(manifests::scheduler_service(&spec, &t)?))?,
        value(serde_json::to_value(manifests::worker_deployment(&spec, &t, DEFAULT_GROUP, &spec.workers)?))?,
    ])
}

fn yaml(docs: &[serde_json::Value]) -> Result<String, Error> {
    let mut out = String::new();
    for d in docs {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(d).map_err(|e| Error::Other(format!("YAML: {e}")))?);
    }
    Ok(out)
}
