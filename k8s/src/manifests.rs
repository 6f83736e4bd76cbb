//! The Kubernetes objects of a brisk cluster, built from a
//! `BriskClusterSpec` with no I/O: the token Secret, the scheduler's
//! Deployment and Service, and one Pod per worker (the operator), or a
//! worker Deployment (`brisk k8s manifests`, for plain `kubectl apply`).
//!
//! Objects are written as JSON, the form the API documents, and read back
//! into k8s-openapi's types, so a shape the API would refuse fails here.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Secret, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::crd::{BriskClusterSpec, WorkerGroupSpec};
use crate::error::Error;
use crate::quantity;

/// The port workers and clients connect to.
pub const COMM_PORT: u16 = 8786;
/// The scheduler's HTTP port: `/health`, the dashboard's API, Dask's scaling API.
pub const HTTP_PORT: u16 = 8787;
/// How long a worker keeps trying to reach a scheduler that went away
/// before it exits (its pod then ends and the operator replaces it).
const DEATH_TIMEOUT: &str = "60s";
/// SIGTERM makes a worker hand its results to others and leave; this is
/// how long Kubernetes waits for that before it kills the pod.
const GRACE_SECONDS: i64 = 120;

/// Labels every object of a cluster carries.
pub const CLUSTER_LABEL: &str = "brisk.dev/cluster";
pub const COMPONENT_LABEL: &str = "brisk.dev/component";
pub const GROUP_LABEL: &str = "brisk.dev/worker-group";

/// Where one cluster lives and who owns its objects.
#[derive(Clone, Debug)]
pub struct Target<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
    /// The BriskCluster, so that deleting it deletes everything (none for
    /// plain manifests).
    pub owner: Option<OwnerReference>,
}

impl Target<'_> {
    pub fn scheduler_name(&self) -> String {
        format!("{}-scheduler", self.name)
    }
    pub fn secret_name(&self) -> String {
        format!("{}-token", self.name)
    }
    /// The scheduler Service's name inside the cluster.
    pub fn scheduler_host(&self) -> String {
        format!("{}-scheduler.{}.svc.cluster.local", self.name, self.namespace)
    }
    pub fn scheduler_address(&self) -> String {
        format!("tcp://{}:{COMM_PORT}", self.scheduler_host())
    }
    pub fn dashboard(&self) -> String {
        format!("http://{}:{HTTP_PORT}", self.scheduler_host())
    }
    /// The name a new worker pod of `group` gets, `suffix` making it unique.
    pub fn worker_pod_name(&self, group: &str, suffix: &str) -> String {
        format!("{}-{group}-worker-{suffix}", self.name)
    }

    fn metadata(&self, name: &str, labels: Value) -> Value {
        let mut m = json!({ "name": name, "namespace": self.namespace, "labels": labels });
        if let Some(owner) = &self.owner {
            m["ownerReferences"] = json!([owner]);
        }
        m
    }

    fn labels(&self, component: &str, group: Option<&str>) -> Value {
        let mut l = json!({
            "app.kubernetes.io/name": "brisk",
            "app.kubernetes.io/managed-by": "brisk",
            CLUSTER_LABEL: self.name,
            COMPONENT_LABEL: component,
        });
        if let Some(g) = group {
            l[GROUP_LABEL] = json!(g);
        }
        l
    }

    fn token_env(&self) -> Value {
        json!({"name": "BRISK_TOKEN", "valueFrom": {"secretKeyRef": {"name": self.secret_name(), "key": "token"}}})
    }
}

/// The Secret holding the token every worker and client must present.
pub fn token_secret(t: &Target<'_>, token: &str) -> Result<Secret, Error> {
    typed(json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": t.metadata(&t.secret_name(), t.labels("token", None)),
        "type": "Opaque",
        "stringData": { "token": token },
    }))
}

/// The token in a cluster's Secret (`data`, or `stringData` where an API
/// server has not folded it in).
pub fn secret_token(s: &Secret) -> Option<String> {
    let data =
        s.data.as_ref().and_then(|d| d.get("token")).map(|b| String::from_utf8_lossy(&b.0).into_owned());
    data.or_else(|| s.string_data.as_ref().and_then(|d| d.get("token")).cloned())
}

/// The scheduler: a one-replica Deployment (Kubernetes restarts it where
/// it dies), ready when `/health` answers.
pub fn scheduler_deployment(spec: &BriskClusterSpec, t: &Target<'_>) -> Result<Deployment, Error> {
    let labels = t.labels("scheduler", None);
    let probe = json!({"httpGet": {"path": "/health", "port": "http-dashboard"}, "periodSeconds": 5});
    let mut container = json!({
        "name": "scheduler",
        "image": spec.image,
        "command": ["brisk"],
        "args": ["scheduler", "--host", "0.0.0.0", "--port", COMM_PORT.to_string(),
                 "--http-port", HTTP_PORT.to_string()],
        "env": [t.token_env()],
        "ports": [
            {"name": "tcp-comm", "containerPort": COMM_PORT, "protocol": "TCP"},
            {"name": "http-dashboard", "containerPort": HTTP_PORT, "protocol": "TCP"},
        ],
        "readinessProbe": probe,
        "livenessProbe": {"httpGet": {"path": "/health", "port": "http-dashboard"},
                          "periodSeconds": 10, "initialDelaySeconds": 10},
    });
    set_common(&mut container, spec.image_pull_policy.as_deref(), spec.scheduler.resources.as_ref())?;
    let pod = overlay(json!({ "containers": [container] }), spec.scheduler.template.as_ref());
    typed(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": t.metadata(&t.scheduler_name(), labels.clone()),
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }))
}

/// What `brisk operator` needs to run in a cluster: its service account,
/// the rights to watch BriskClusters and manage their pods, Deployments,
/// Services and Secrets in every namespace, and a Deployment running it.
pub fn operator_objects(image: &str, namespace: &str) -> Result<Vec<Value>, Error> {
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let name = "brisk-operator";
    let labels = json!({"app.kubernetes.io/name": "brisk-operator", "app.kubernetes.io/managed-by": "brisk"});
    let meta = json!({"name": name, "namespace": namespace, "labels": labels});
    let all = ["get", "list", "watch", "create", "update", "patch", "delete"];
    let sa: ServiceAccount = typed(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta}))?;
    let role: ClusterRole = typed(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": labels},
        "rules": [
            {"apiGroups": ["brisk.dev"], "resources": ["briskclusters"], "verbs": all},
            {"apiGroups": ["brisk.dev"], "resources": ["briskclusters/status", "briskclusters/scale"],
             "verbs": ["get", "update", "patch"]},
            {"apiGroups": [""], "resources": ["pods", "services", "secrets"], "verbs": all},
            {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": all},
        ],
    }))?;
    let binding: ClusterRoleBinding = typed(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name, "labels": labels},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
    }))?;
    let deployment: Deployment = typed(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": name,
                    "containers": [{
                        "name": "operator",
                        "image": image,
                        "command": ["brisk"],
                        "args": ["operator"],
                        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
                    }],
                },
            },
        },
    }))?;
    let value = |r: Result<Value, serde_json::Error>| r.map_err(|e| Error::Other(e.to_string()));
    Ok(vec![
        value(serde_json::to_value(sa))?,
        value(serde_json::to_value(role))?,
        value(serde_json::to_value(binding))?,
        value(serde_json::to_value(deployment))?,
    ])
}

/// The scheduler's Service: `tcp-comm` 8786 and `http-dashboard` 8787, as
/// dask-kubernetes names them.
pub fn scheduler_service(spec: &BriskClusterSpec, t: &Target<'_>) -> Result<Service, Error> {
    typed(json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": t.metadata(&t.scheduler_name(), t.labels("scheduler", None)),
        "spec": {
            "type": spec.scheduler.service_type.as_deref().unwrap_or("ClusterIP"),
            "selector": t.labels("scheduler", None),
            "ports": [
                {"name": "tcp-comm", "port": COMM_PORT, "targetPort": "tcp-comm", "protocol": "TCP"},
                {"name": "http-dashboard", "port": HTTP_PORT, "targetPort": "http-dashboard", "protocol": "TCP"},
            ],
        },
    }))
}

/// One worker pod of `group`. It never restarts in place: a worker that
/// ends (retired, or its scheduler gone) ends its pod, and the operator
/// decides whether a new one is wanted.
pub fn worker_pod(
    spec: &BriskClusterSpec,
    t: &Target<'_>,
    group: &str,
    g: &WorkerGroupSpec,
    pod_name: &str,
) -> Result<Pod, Error> {
    let mut pod = worker_pod_spec(spec, t, group, g)?;
    pod["restartPolicy"] = json!("Never");
    typed(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": t.metadata(pod_name, t.labels("worker", Some(group))),
        "spec": pod,
    }))
}

/// The workers of `group` as a Deployment, for clusters run without the
/// operator: Kubernetes replaces lost workers and `kubectl scale` works;
/// the pods it removes hand their results on when SIGTERM reaches them.
pub fn worker_deployment(
    spec: &BriskClusterSpec,
    t: &Target<'_>,
    group: &str,
    g: &WorkerGroupSpec,
) -> Result<Deployment, Error> {
    let labels = t.labels("worker", Some(group));
    let pod = worker_pod_spec(spec, t, group, g)?;
    typed(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": t.metadata(&format!("{}-{group}-worker", t.name), labels.clone()),
        "spec": {
            "replicas": g.replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }))
}

fn worker_pod_spec(
    spec: &BriskClusterSpec,
    t: &Target<'_>,
    group: &str,
    g: &WorkerGroupSpec,
) -> Result<Value, Error> {
    let limits = g.resources.as_ref().and_then(|r| r.get("limits"));
    let limit = |key: &str| limits.and_then(|l| l.get(key));
    let nthreads = match (g.nthreads, limit("cpu")) {
        (Some(n), _) => n.max(1) as u64,
        (None, Some(cpu)) => {
            quantity::cpu_threads(cpu).map_err(|e| Error::Spec(format!("group {group}: {e}")))?
        }
        (None, None) => 1,
    };
    let mut args = vec![
        "worker".to_string(),
        t.scheduler_address(),
        "--name".into(),
        "$(BRISK_WORKER_NAME)".into(),
        "--nthreads".into(),
        nthreads.to_string(),
        "--death-timeout".into(),
        DEATH_TIMEOUT.into(),
    ];
    if let Some(mem) = limit("memory") {
        let bytes = quantity::bytes(mem).map_err(|e| Error::Spec(format!("group {group}: {e}")))?;
        args.extend(["--memory-limit".into(), bytes.to_string()]);
    }
    if let Some(gpus) = limit("nvidia.com/gpu") {
        let n = quantity::cpu_threads(gpus).map_err(|e| Error::Spec(format!("group {group}: {e}")))?;
        args.extend(["--resources".into(), format!("GPU={n}")]);
    }
    let mut env = vec![
        json!({"name": "BRISK_WORKER_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}),
        t.token_env(),
    ];
    if let Some(Value::Array(extra)) = &g.env {
        env.extend(extra.iter().cloned());
    }
    let mut container = json!({
        "name": "worker",
        "image": g.image.as_deref().unwrap_or(&spec.image),
        "command": ["brisk"],
        "args": args,
        "env": env,
    });
    set_common(&mut container, spec.image_pull_policy.as_deref(), g.resources.as_ref())?;
    Ok(overlay(
        json!({ "containers": [container], "terminationGracePeriodSeconds": GRACE_SECONDS }),
        g.template.as_ref(),
    ))
}

/// The pull policy and resources of a container, quantities as strings
/// (the API takes `cpu: 4` and `cpu: "4"` alike; the bindings take strings).
fn set_common(container: &mut Value, pull: Option<&str>, resources: Option<&Value>) -> Result<(), Error> {
    if let Some(p) = pull {
        container["imagePullPolicy"] = json!(p);
    }
    if let Some(r) = resources {
        let mut r = r.clone();
        for part in ["limits", "requests"] {
            if let Some(Value::Object(q)) = r.get_mut(part) {
                for v in q.values_mut() {
                    match v {
                        Value::String(_) => {}
                        Value::Number(n) => *v = json!(n.to_string()),
                        other => {
                            return Err(Error::Spec(format!("resources.{part}: {other} is not a quantity")));
                        }
                    }
                }
            }
        }
        container["resources"] = r;
    }
    Ok(())
}

/// `template` laid over `base` as a JSON merge patch (RFC 7386): objects
/// merge key by key, anything else replaces, `null` removes.
pub fn overlay(mut base: Value, template: Option<&Value>) -> Value {
    fn merge(base: &mut Value, patch: &Value) {
        match (base, patch) {
            (Value::Object(b), Value::Object(p)) => {
                for (k, v) in p {
                    if v.is_null() {
                        b.remove(k);
                    } else {
                        merge(b.entry(k.clone()).or_insert(Value::Null), v);
                    }
                }
            }
            (b, p) => *b = p.clone(),
        }
    }
    if let Some(t) = template {
        merge(&mut base, t);
    }
    base
}

fn typed<T: DeserializeOwned>(v: Value) -> Result<T, Error> {
    serde_json::from_value(v).map_err(|e| Error::Spec(format!("the object is not valid: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::NamedWorkerGroup;

    fn spec() -> BriskClusterSpec {
        BriskClusterSpec {
            image: "brisk:test".into(),
            image_pull_policy: None,
            scheduler: Default::default(),
            workers: WorkerGroupSpec {
                replicas: 2,
                resources: Some(json!({"limits": {"cpu": "2500m", "memory": "4Gi"}})),
                ..Default::default()
            },
            worker_groups: vec![NamedWorkerGroup {
                name: "gpu".into(),
                spec: WorkerGroupSpec {
                    replicas: 1,
                    resources: Some(json!({"limits": {"nvidia.com/gpu": 2}})),
                    template: Some(json!({"nodeSelector": {"gpu": "h100"}})),
                    ..Default::default()
                },
            }],
            autoscale: None,
            idle_timeout: 0,
        }
    }

    fn target() -> Target<'static> {
        Target { name: "demo", namespace: "ns", owner: None }
    }

    fn args(pod: &Pod) -> Vec<String> {
        let spec = pod.spec.as_ref().map(|s| s.containers[0].clone());
        spec.and_then(|c| c.args).unwrap_or_default()
    }

    #[test]
    fn a_worker_takes_threads_and_memory_from_its_limits() -> Result<(), Error> {
        let s = spec();
        let pod = worker_pod(&s, &target(), "default", &s.workers, "demo-default-worker-abc")?;
        let a = args(&pod).join(" ");
        assert!(
            a.starts_with(
                "worker tcp://demo-scheduler.ns.svc.cluster.local:8786 --name $(BRISK_WORKER_NAME)"
            ),
            "{a}"
        );
        assert!(a.contains("--nthreads 3"), "{a}");
        assert!(a.contains(&format!("--memory-limit {}", 4u64 << 30)), "{a}");
        let spec = pod.spec.as_ref().map(|s| (s.restart_policy.clone(), s.termination_grace_period_seconds));
        assert_eq!(spec, Some((Some("Never".into()), Some(GRACE_SECONDS))));
        Ok(())
    }

    #[test]
    fn a_gpu_group_asks_for_its_gpus_and_keeps_its_template() -> Result<(), Error> {
        let s = spec();
        let g = &s.worker_groups[0];
        let pod = worker_pod(&s, &target(), &g.name, &g.spec, "demo-gpu-worker-x")?;
        assert!(args(&pod).join(" ").contains("--resources GPU=2"));
        let sel = pod.spec.as_ref().and_then(|s| s.node_selector.clone()).unwrap_or_default();
        assert_eq!(sel.get("gpu").map(String::as_str), Some("h100"));
        let limits = pod.spec.as_ref().and_then(|s| s.containers[0].resources.clone()).and_then(|r| r.limits);
        assert_eq!(limits.and_then(|l| l.get("nvidia.com/gpu").map(|q| q.0.clone())), Some("2".into()));
        Ok(())
    }

    #[test]
    fn a_bad_quantity_is_an_error_naming_the_group() {
        let mut s = spec();
        s.workers.resources = Some(json!({"limits": {"memory": "lots"}}));
        let err = worker_pod(&s, &target(), "default", &s.workers, "p").map(|_| ()).err();
        assert!(err.is_some_and(|e| e.to_string().contains("group default")));
    }

    #[test]
    fn a_template_that_breaks_the_pod_is_refused() {
        let mut s = spec();
        s.workers.template = Some(json!({"containers": "none"}));
        assert!(worker_pod(&s, &target(), "default", &s.workers, "p").is_err());
    }

    #[test]
    fn overlay_is_a_merge_patch() {
        let base = json!({"a": {"b": 1, "c": 2}, "d": [1, 2]});
        let out = overlay(base, Some(&json!({"a": {"b": null, "e": 3}, "d": [9]})));
        assert_eq!(out, json!({"a": {"c": 2, "e": 3}, "d": [9]}));
    }
}
