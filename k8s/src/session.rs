//! `kube_cluster(#{...})` from a session, as dask-kubernetes' `KubeCluster`:
//! the session only writes the BriskCluster resource (create, scale,
//! adapt, add a worker group, delete); the operator does the rest. The
//! session can then connect to the scheduler through its Service.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, Config};
use serde_json::json;

use crate::crd::{
    Autoscale, BriskCluster, BriskClusterSpec, BriskClusterStatus, NamedWorkerGroup, WorkerGroupSpec,
};
use crate::error::Error;
use crate::manifests::Target;

/// What `kube_cluster` takes (KubeCluster's names).
#[derive(Clone, Debug)]
pub struct KubeOptions {
    pub name: String,
    /// Default: the kubeconfig's namespace, else "default".
    pub namespace: Option<String>,
    pub spec: BriskClusterSpec,
    /// Delete the cluster on `close()` (and when the session ends).
    pub shutdown_on_close: bool,
}

/// A BriskCluster this session made or joined.
pub struct KubeCluster {
    rt: tokio::runtime::Runtime,
    api: Api<BriskCluster>,
    secrets: Api<Secret>,
    pub name: String,
    pub namespace: String,
    shutdown_on_close: bool,
}

impl std::fmt::Debug for KubeCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KubeCluster({}/{})", self.namespace, self.name)
    }
}

impl KubeCluster {
    /// Create the BriskCluster (or join the one of that name, as
    /// KubeCluster's default create-or-connect does), using the
    /// kubeconfig (`KUBECONFIG`, `~/.kube/config`) or the pod's service account.
    pub fn start(opts: KubeOptions) -> Result<KubeCluster, Error> {
        check(&opts.name, &opts.spec)?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("brisk-kube")
            .enable_all()
            .build()
            .map_err(|e| Error::Other(format!("cannot start the Kubernetes client's runtime: {e}")))?;
        let (client, default_ns) = rt.block_on(connect())?;
        let namespace = opts.namespace.clone().unwrap_or(default_ns);
        let api: Api<BriskCluster> = Api::namespaced(client.clone(), &namespace);
        let secrets: Api<Secret> = Api::namespaced(client, &namespace);
        let k = KubeCluster {
            rt,
            api,
            secrets,
            name: opts.name.clone(),
            namespace,
            shutdown_on_close: opts.shutdown_on_close,
        };
        let mut cr = BriskCluster::new(&opts.name, opts.spec);
        cr.metadata.namespace = Some(k.namespace.clone());
        match k.rt.block_on(k.api.create(&PostParams::default(), &cr)) {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {
                return Err(Error::Other(format!(
                    "the BriskCluster resource is not installed in this Kubernetes cluster ({}); `brisk k8s crd | kubectl apply -f -` installs it, and `brisk operator` must run",
                    e.message
                )));
            }
            Err(e) => return Err(e.into()),
        }
        Ok(k)
    }

    pub fn target(&self) -> Target<'_> {
        Target { name: &self.name, namespace: &self.namespace, owner: None }
    }

    pub fn get(&self) -> Result<BriskCluster, Error> {
        Ok(self.rt.block_on(self.api.get(&self.name))?)
    }

    fn merge(&self, patch: serde_json::Value) -> Result<(), Error> {
        self.rt.block_on(self.api.patch(&self.name, &PatchParams::default(), &Patch::Merge(&patch)))?;
        Ok(())
    }

    /// `n` workers in `group` (default: the default group, whose
    /// autoscaling then stops, as KubeCluster.scale does).
    pub fn scale(&self, n: i32, group: Option<&str>) -> Result<(), Error> {
        match group.filter(|g| *g != crate::names::DEFAULT_GROUP) {
            None => self.merge(json!({"spec": {"autoscale": null, "workers": {"replicas": n}}})),
            Some(g) => {
                let mut groups = self.get()?.spec.worker_groups;
                let Some(found) = groups.iter_mut().find(|x| x.name == g) else {
                    let known: Vec<&str> = groups.iter().map(|x| x.name.as_str()).collect();
                    return Err(Error::Spec(format!(
                        "no worker group {g:?} (groups: default {})",
                        known.join(" ")
                    )));
                };
                found.spec.replicas = n;
                self.merge(json!({"spec": {"workerGroups": groups}}))
            }
        }
    }

    /// Autoscale the default group between `minimum` and `maximum`.
    pub fn adapt(&self, a: Autoscale) -> Result<(), Error> {
        if a.maximum < a.minimum {
            return Err(Error::Spec(format!("maximum {} is below minimum {}", a.maximum, a.minimum)));
        }
        self.merge(json!({"spec": {"autoscale": a}}))
    }

    /// Another pool of workers (GPU, large memory), or a new shape for one.
    pub fn add_worker_group(&self, name: &str, spec: WorkerGroupSpec) -> Result<(), Error> {
        crate::names::validate_name(name)?;
        if name == crate::names::DEFAULT_GROUP {
            return Err(Error::Spec("\"default\" is the cluster's own group; scale it instead".into()));
        }
        let cluster = self.get()?;
        let probe = Target { name: &self.name, namespace: &self.namespace, owner: None };
        crate::manifests::worker_pod(
            &cluster.spec,
            &probe,
            name,
            &spec,
            &probe.worker_pod_name(name, "check"),
        )?;
        let mut groups = cluster.spec.worker_groups;
        groups.retain(|g| g.name != name);
        groups.push(NamedWorkerGroup { name: name.to_string(), spec });
        self.merge(json!({"spec": {"workerGroups": groups}}))
    }

    pub fn status(&self) -> Result<BriskClusterStatus, Error> {
        Ok(self.get()?.status.unwrap_or_default())
    }

    /// Wait until the operator reports the scheduler answering (or that
    /// the cluster failed, and why).
    pub fn wait_running(&self, timeout: Duration) -> Result<BriskClusterStatus, Error> {
        let start = Instant::now();
        loop {
            let s = self.status()?;
            if s.phase == "Running" {
                return Ok(s);
            }
            if s.phase == "Failed" {
                return Err(Error::Spec(format!(
                    "the operator cannot make the cluster {}: {}",
                    self.name,
                    s.message.unwrap_or_default()
                )));
            }
            if start.elapsed() >= timeout {
                let why = s.message.map(|m| format!(": {m}")).unwrap_or_default();
                return Err(Error::Other(format!(
                    "the cluster {} is not running after {:.0} s (phase {:?}{why}); is `brisk operator` running?",
                    self.name,
                    timeout.as_secs_f64(),
                    if s.phase.is_empty() { "none yet" } else { &s.phase },
                )));
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// The cluster's token, from the Secret the operator made.
    pub fn token(&self) -> Result<String, Error> {
        let name = self.target().secret_name();
        let s = self.rt.block_on(self.secrets.get(&name))?;
        crate::manifests::secret_token(&s)
            .ok_or_else(|| Error::Other(format!("the secret {name} holds no token")))
    }

    /// Delete the cluster if this session owns it (`shutdown_on_close`).
    pub fn close(&self) -> Result<(), Error> {
        if !self.shutdown_on_close {
            return Ok(());
        }
        match self.rt.block_on(self.api.delete(&self.name, &DeleteParams::background())) {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// A client of the Kubernetes API from the kubeconfig (`KUBECONFIG`,
/// `~/.kube/config`) or the pod's service account, and its default
/// namespace; the operator and sessions both start here.
pub async fn connect() -> Result<(Client, String), Error> {
    let config = Config::infer().await.map_err(|e| {
        Error::Other(format!(
            "no Kubernetes configuration (KUBECONFIG, ~/.kube/config or a pod's service account): {e}"
        ))
    })?;
    let ns = config.default_namespace.clone();
    Ok((Client::try_from(config)?, ns))
}

/// Build a cluster's objects here, so that a spec the operator could not
/// make (a bad name, quantity or template) fails in the session, before
/// anything is created.
fn check(name: &str, spec: &BriskClusterSpec) -> Result<(), Error> {
    crate::names::validate_name(name)?;
    let probe = Target { name, namespace: "default", owner: None };
    crate::manifests::scheduler_deployment(spec, &probe)?;
    crate::manifests::scheduler_service(spec, &probe)?;
    for (group, g) in spec.groups() {
        crate::names::validate_name(group)?;
        crate::manifests::worker_pod(spec, &probe, group, g, &probe.worker_pod_name(group, "check"))?;
    }
    Ok(())
}

/// A cluster the session made goes with the session (KubeCluster's
/// `shutdown_on_close`), even when the script never calls `close()`.
impl Drop for KubeCluster {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            eprintln!("warning: could not delete the Kubernetes cluster {}: {e}", self.name);
        }
    }
}
