//! What `brisk k8s` prints: the CRD, the operator's objects and a
//! cluster's objects for plain `kubectl apply`, as YAML streams.

use kube::CustomResourceExt;

use crate::crd::{self, BriskClusterSpec, WorkerGroupSpec};
use crate::error::Error;
use crate::manifests::{self, Target};
use crate::names::{DEFAULT_GROUP, validate_name};

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
