//! The `BriskCluster` custom resource (`brisk.dev/v1alpha1`), the same
//! shape as dask-kubernetes' `DaskCluster` plus its worker groups and
//! autoscaler folded in: one object says what the cluster is, the operator
//! makes it so. The CRD is derived from these types (`brisk k8s crd`).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A brisk cluster: one scheduler, a default worker group, more groups
/// (GPU or large-memory pools), optional autoscaling and an idle timeout.
// Two print columns are strings: clippy takes the repeated `type_` for a
// duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "brisk.dev",
    version = "v1alpha1",
    kind = "BriskCluster",
    namespaced,
    status = "BriskClusterStatus",
    shortname = "bc",
    scale(spec_replicas_path = ".spec.workers.replicas", status_replicas_path = ".status.workers"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Workers", type_ = "integer", json_path = ".status.workers"),
    printcolumn(name = "Scheduler", type_ = "string", json_path = ".status.schedulerAddress")
)]
#[serde(rename_all = "camelCase")]
pub struct BriskClusterSpec {
    /// The container image holding the brisk binary (the repository's
    /// Dockerfile builds one), for the scheduler and every worker.
    pub image: String,
    /// Always, IfNotPresent or Never (Kubernetes' default when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^(Always|IfNotPresent|Never)$"))]
    pub image_pull_policy: Option<String>,
    #[serde(default)]
    pub scheduler: SchedulerSpec,
    /// The default worker group; `replicas` is what `kubectl scale` and the
    /// autoscaler change.
    #[serde(default)]
    pub workers: WorkerGroupSpec,
    /// More pools of workers, each with its own resources (GPUs, memory).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub worker_groups: Vec<NamedWorkerGroup>,
    /// Grow and shrink the default group between these bounds, following
    /// the scheduler's `/api/v1/adaptive_target`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscale: Option<Autoscale>,
    /// Delete the cluster after its scheduler has been idle this many
    /// seconds (0: never).
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub idle_timeout: i64,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SchedulerSpec {
    /// The scheduler container's resources (`limits`, `requests`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "resources_schema")]
    pub resources: Option<serde_json::Value>,
    /// How the scheduler's Service is exposed: ClusterIP (the default),
    /// NodePort or LoadBalancer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^(ClusterIP|NodePort|LoadBalancer)$"))]
    pub service_type: Option<String>,
    /// PodSpec fields laid over the generated one (a JSON merge patch:
    /// nodeSelector, tolerations, serviceAccountName, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_object")]
    pub template: Option<serde_json::Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkerGroupSpec {
    /// How many worker pods this group runs.
    #[schemars(range(min = 0))]
    pub replicas: i32,
    /// Threads per worker (default: the CPU limit, rounded up, or 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub nthreads: Option<i32>,
    /// The image of this group's workers, when not the cluster's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Each worker container's resources (`limits`, `requests`);
    /// `limits."nvidia.com/gpu"` also tells the scheduler the worker has GPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "resources_schema")]
    pub resources: Option<serde_json::Value>,
    /// Environment variables for the worker container (`[{name, value}]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "env_schema")]
    pub env: Option<serde_json::Value>,
    /// PodSpec fields laid over the generated one (a JSON merge patch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_object")]
    pub template: Option<serde_json::Value>,
}

/// An extra worker group.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamedWorkerGroup {
    /// Lower-case letters, digits and '-' (it is part of pod names).
    #[schemars(regex(pattern = r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$"))]
    pub name: String,
    #[serde(flatten)]
    pub spec: WorkerGroupSpec,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Autoscale {
    #[schemars(range(min = 0))]
    pub minimum: i32,
    #[schemars(range(min = 0))]
    pub maximum: i32,
    /// How soon the queued work should be done ("5s", the default; "2m"):
    /// the scheduler asks for the workers that finish it in that time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[0-9]+(\.[0-9]+)?(ms|s|m|h|d)?$"))]
    pub target_duration: Option<String>,
}

/// What the operator last saw and did.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BriskClusterStatus {
    /// Pending (the scheduler is not answering yet), Running, or Failed
    /// (the spec cannot be made into objects; `message` says why).
    #[serde(default)]
    pub phase: String,
    /// Worker pods of the default group (the scale subresource's count).
    #[serde(default)]
    pub workers: i32,
    /// Worker pods per group, the default group included (a list, so
    /// that a merge patch replaces it whole).
    #[serde(default)]
    pub groups: Vec<GroupCount>,
    /// `tcp://NAME-scheduler.NAMESPACE.svc.cluster.local:8786`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_address: Option<String>,
    /// The scheduler's HTTP address (dashboard, Dask's scaling API).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dashboard: Option<String>,
    /// When the autoscaler last shrank the cluster (Unix seconds): the
    /// next shrink waits 15 s after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_scale_down: Option<i64>,
    /// Why the phase is what it is, or the last thing that went wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct GroupCount {
    pub name: String,
    pub workers: i32,
}

fn any_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

fn resources_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let quantities = serde_json::json!({
        "type": "object",
        "additionalProperties": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
    });
    schemars::json_schema!({
        "type": "object",
        "properties": {"limits": quantities, "requests": quantities},
        "additionalProperties": false,
    })
}

fn env_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "required": ["name"],
                  "properties": {"name": {"type": "string"}}},
    })
}

impl BriskClusterSpec {
    /// Every group, the default one first, as (name, spec).
    pub fn groups(&self) -> Vec<(&str, &WorkerGroupSpec)> {
        std::iter::once((crate::names::DEFAULT_GROUP, &self.workers))
            .chain(self.worker_groups.iter().map(|g| (g.name.as_str(), &g.spec)))
            .collect()
    }
}
