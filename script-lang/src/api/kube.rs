//! Kubernetes from a session (dask-kubernetes' `KubeCluster`):
//! `kube_cluster(#{...})` writes a BriskCluster resource that `brisk
//! operator` makes real; `k.scale`, `k.adapt`, `k.add_worker_group`,
//! `k.status()`, `k.close()`; `client(k)` runs the session's graphs there.

use std::sync::Arc;
use std::time::Duration;

use brisk_distributed::{RemoteClient, Security};
use brisk_k8s::crd::{Autoscale, BriskClusterSpec, SchedulerSpec, WorkerGroupSpec};
use brisk_k8s::session::{KubeCluster, KubeOptions};
use rhai::{Dynamic, Engine, EvalAltResult, Map};

use super::args::{options, wrong_type};
use super::deploy::text;
use super::fndoc::{FnDoc, doc};
use crate::error::runtime;
use crate::state::{Cluster, SessionState};
use crate::types::{Client, KubeClusterRef};

type Res<T> = Result<T, Box<EvalAltResult>>;

/// How long `kube_cluster` waits for the operator to report the scheduler
/// running, unless told.
const START_TIMEOUT: f64 = 300.0;
const WAIT_TIMEOUT: Duration = Duration::from_secs(300);

const OPTIONS: &[&str] = &[
    "name",
    "image",
    "namespace",
    "n_workers",
    "resources",
    "env",
    "nthreads",
    "image_pull_policy",
    "scheduler_service_type",
    "idle_timeout",
    "shutdown_on_close",
    "address",
    "timeout",
];
const GROUP_OPTIONS: &[&str] = &["n", "resources", "env", "nthreads", "image"];

pub(super) const DOCS: &[FnDoc] = &[
    doc(
        "kube_cluster",
        "kube_cluster(#{name, image, namespace, n_workers, resources, env, nthreads, image_pull_policy, scheduler_service_type, idle_timeout, shutdown_on_close, address, timeout}) -> KubeCluster",
        "Create (or join) a BriskCluster resource on the Kubernetes cluster of the kubeconfig and wait up to timeout seconds (300; 0: do not wait) for `brisk operator` to report its scheduler running. image holds the brisk binary; resources are each worker's (#{limits: #{cpu: \"4\", memory: \"16Gi\"}}). address overrides where the session reaches the scheduler (a port-forward: \"tcp://127.0.0.1:8786\"); by default it is the scheduler's Service. close() (and the end of the session) deletes the cluster unless shutdown_on_close is false. Not yet run against a real Kubernetes: see the guide.",
        "let k = kube_cluster(#{name: \"demo\", image: \"registry.example/brisk:0.1\", n_workers: 2,\n                      resources: #{limits: #{cpu: \"4\", memory: \"16Gi\"}}});\nlet c = client(k);",
    ),
    doc(
        "add_worker_group",
        "k.add_worker_group(name, #{n, resources, env, nthreads, image})",
        "Another pool of workers beside the default one, e.g. GPU workers (resources: #{limits: #{\"nvidia.com/gpu\": 1}}, which also tells the scheduler each worker has a GPU). Scale it with k.scale(n, name).",
        "k.add_worker_group(\"gpu\", #{n: 1, resources: #{limits: #{\"nvidia.com/gpu\": 1}}});",
    ),
];

pub fn register(engine: &mut Engine, state: &Arc<SessionState>) {
    engine.register_type_with_name::<KubeClusterRef>("KubeCluster");
    engine.register_fn("kube_cluster", |m: Map| start(m));
    engine.register_get("scheduler_address", |k: &mut KubeClusterRef| k.address());
    engine.register_get("dashboard_link", |k: &mut KubeClusterRef| k.0.cluster.target().dashboard());
    engine.register_get("name", |k: &mut KubeClusterRef| k.0.cluster.name.clone());
    engine.register_fn("scale", |k: &mut KubeClusterRef, n: i64| {
        k.0.cluster.scale(count("scale", n)?, None).map_err(|e| runtime(format!("scale: {e}")))
    });
    engine.register_fn("scale", |k: &mut KubeClusterRef, n: i64, group: &str| {
        k.0.cluster.scale(count("scale", n)?, Some(group)).map_err(|e| runtime(format!("scale: {e}")))
    });
    engine.register_fn("adapt", |k: &mut KubeClusterRef| adapt(k, Map::new()));
    engine.register_fn("adapt", |k: &mut KubeClusterRef, m: Map| adapt(k, m));
    engine.register_fn("add_worker_group", |k: &mut KubeClusterRef, name: &str, m: Map| {
        let spec = group_spec("add_worker_group", &m, GROUP_OPTIONS, "n")?;
        k.0.cluster.add_worker_group(name, spec).map_err(|e| runtime(format!("add_worker_group: {e}")))
    });
    engine.register_fn("status", |k: &mut KubeClusterRef| status(k));
    engine.register_fn("wait_for_workers", |k: &mut KubeClusterRef, n: i64| wait(k, n, WAIT_TIMEOUT));
    engine.register_fn("wait_for_workers", |k: &mut KubeClusterRef, n: i64, secs: i64| {
        wait(k, n, Duration::from_secs(secs.clamp(1, 10_000_000) as u64))
    });
    let st = state.clone();
    engine.register_fn("close", move |k: &mut KubeClusterRef| {
        if st.with_cluster(|cl| cl.client.address() == k.address()) == Some(true) {
            st.detach_cluster();
        }
        k.0.cluster.close().map_err(|e| runtime(format!("close: {e}")))
    });
    let st = state.clone();
    engine.register_fn("client", move |k: KubeClusterRef| client(&st, &k));
}

fn count(function: &str, n: i64) -> Res<i32> {
    i32::try_from(n)
        .ok()
        .filter(|n| *n >= 0)
        .ok_or_else(|| runtime(format!("{function}: the number of workers must be 0 or more, got {n}")))
}

fn int(function: &str, key: &str, v: &Dynamic) -> Res<i64> {
    v.as_int().map_err(|_| wrong_type(function, &format!("an integer for {key}"), v))
}

/// A map option as JSON (resources, env).
fn json(function: &str, key: &str, v: &Dynamic) -> Res<serde_json::Value> {
    let what = format!("{function}'s {key}");
    let text = crate::convert::to_value(v, &what)?.to_json();
    serde_json::from_str(&text).map_err(|e| runtime(format!("{what}: {e}")))
}

fn group_spec(function: &str, m: &Map, known: &[&str], count_key: &str) -> Res<WorkerGroupSpec> {
    let o = options(Some(m.clone()), function, known)?;
    let mut g = WorkerGroupSpec::default();
    if let Some(v) = o.get(count_key) {
        g.replicas = count(function, int(function, count_key, v)?)?;
    }
    if let Some(v) = o.get("resources") {
        let r = json(function, "resources", v)?;
        if !r.is_object() {
            return Err(wrong_type(function, "a map (#{limits: #{...}}) for resources", v));
        }
        g.resources = Some(r);
    }
    if let Some(v) = o.get("env") {
        // #{NAME: "value"} as Kubernetes' [{name, value}].
        let env = json(function, "env", v)?;
        let Some(map) = env.as_object() else {
            return Err(wrong_type(function, "a map of strings for env", v));
        };
        let mut list = Vec::new();
        for (k, val) in map {
            let Some(s) = val.as_str() else {
                return Err(wrong_type(function, "a map of strings for env", v));
            };
            list.push(serde_json::json!({ "name": k, "value": s }));
        }
        g.env = Some(serde_json::Value::Array(list));
    }
    if let Some(v) = o.get("nthreads") {
        let n = int(function, "nthreads", v)?;
        g.nthreads = Some(
            i32::try_from(n)
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| runtime(format!("{function}: nthreads must be at least 1, got {n}")))?,
        );
    }
    if let Some(v) = o.get("image") {
        g.image = Some(text(function, "image", v)?);
    }
    Ok(g)
}

fn start(m: Map) -> Res<KubeClusterRef> {
    const F: &str = "kube_cluster";
    let o = options(Some(m.clone()), F, OPTIONS)?;
    let need = |key: &str| o.get(key).ok_or_else(|| runtime(format!("{F}: {key} is required")));
    let name = text(F, "name", need("name")?)?;
    let image = text(F, "image", need("image")?)?;
    let workers = group_spec(F, &m, OPTIONS, "n_workers")?;
    let mut scheduler = SchedulerSpec::default();
    if let Some(v) = o.get("scheduler_service_type") {
        let t = text(F, "scheduler_service_type", v)?;
        if !matches!(t.as_str(), "ClusterIP" | "NodePort" | "LoadBalancer") {
            return Err(runtime(format!(
                "{F}: scheduler_service_type must be ClusterIP, NodePort or LoadBalancer, got {t:?}"
            )));
        }
        scheduler.service_type = Some(t);
    }
    let idle_timeout = match o.get("idle_timeout") {
        Some(v) => int(F, "idle_timeout", v)?.max(0),
        None => 0,
    };
    let image_pull_policy =
        o.get("image_pull_policy").map(|v| text(F, "image_pull_policy", v)).transpose()?;
    let shutdown_on_close = match o.get("shutdown_on_close") {
        Some(v) => v.as_bool().map_err(|_| wrong_type(F, "true or false for shutdown_on_close", v))?,
        None => true,
    };
    let timeout = match o.get("timeout") {
        Some(v) => v
            .as_float()
            .or_else(|_| v.as_int().map(|i| i as f64))
            .map_err(|_| wrong_type(F, "seconds for timeout", v))?,
        None => START_TIMEOUT,
    };
    let address = o.get("address").map(|v| text(F, "address", v)).transpose()?;
    let spec = BriskClusterSpec {
        image,
        image_pull_policy,
        scheduler,
        workers,
        worker_groups: vec![],
        autoscale: None,
        idle_timeout,
    };
    let namespace = o.get("namespace").map(|v| text(F, "namespace", v)).transpose()?;
    let cluster = KubeCluster::start(KubeOptions { name, namespace, spec, shutdown_on_close })
        .map_err(|e| runtime(format!("{F}: {e}")))?;
    let k = KubeClusterRef(Arc::new(crate::types::KubeHandle { cluster, address }));
    if timeout > 0.0 {
        k.0.cluster
            .wait_running(Duration::from_secs_f64(timeout.min(1e7)))
            .map_err(|e| runtime(format!("{F}: {e}")))?;
    }
    Ok(k)
}

fn adapt(k: &KubeClusterRef, m: Map) -> Res<()> {
    let o = options(Some(m), "adapt", &["minimum", "maximum", "target_duration"])?;
    let get = |key: &str, default: i64| -> Res<i32> {
        match o.get(key) {
            Some(v) => count("adapt", int("adapt", key, v)?),
            None => Ok(default as i32),
        }
    };
    // Read as the other clusters' adapt reads it: a duration text or seconds.
    let target_duration = match o.get("target_duration") {
        None => None,
        Some(v) => {
            let d = super::deploy::duration("adapt", "target_duration", v)?;
            if d.is_zero() {
                return Err(runtime(format!("adapt: target_duration must be a positive duration, got {v}")));
            }
            Some(format!("{}ms", d.as_millis()))
        }
    };
    let a =
        Autoscale { minimum: get("minimum", 0)?, maximum: get("maximum", i32::MAX as i64)?, target_duration };
    k.0.cluster.adapt(a).map_err(|e| runtime(format!("adapt: {e}")))
}

fn status(k: &KubeClusterRef) -> Res<Map> {
    let s = k.0.cluster.status().map_err(|e| runtime(format!("status: {e}")))?;
    let mut m = Map::new();
    m.insert("phase".into(), s.phase.into());
    m.insert("workers".into(), (s.workers as i64).into());
    let mut groups = Map::new();
    for g in s.groups {
        groups.insert(g.name.into(), (g.workers as i64).into());
    }
    m.insert("groups".into(), groups.into());
    m.insert("scheduler_address".into(), s.scheduler_address.unwrap_or_default().into());
    m.insert("message".into(), s.message.unwrap_or_default().into());
    Ok(m)
}

fn connect(k: &KubeClusterRef, fuse: bool) -> Res<RemoteClient> {
    let token = k.0.cluster.token().map_err(|e| runtime(format!("client: {e}")))?;
    let addr = k.address();
    RemoteClient::connect(&addr, Security { token: Some(token), tls: None }, fuse)
        .map_err(|e| runtime(format!("client: cannot connect to {addr}: {e}")))
}

fn wait(k: &KubeClusterRef, n: i64, timeout: Duration) -> Res<()> {
    let n = count("wait_for_workers", n)? as usize;
    let rc = connect(k, false)?;
    rc.wait_for_workers(n, timeout).map_err(|e| runtime(format!("wait_for_workers: {e}")))
}

/// `client(k)`: the session's graphs run on the cluster's scheduler.
fn client(state: &Arc<SessionState>, k: &KubeClusterRef) -> Res<Client> {
    let rc = connect(k, state.config().fuse)?;
    state.attach_cluster(Cluster { client: Arc::new(rc), local: None, adaptive: None, deployed: None });
    Ok(Client { state: state.clone() })
}
