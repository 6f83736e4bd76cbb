//! `brisk operator`: a kube-rs controller for BriskClusters. It watches
//! the clusters and their worker pods, sees each cluster's objects and
//! asks its scheduler over HTTP, lets `reconcile::reconcile` decide, and
//! carries the actions out. It looks again every few seconds, which is
//! also the autoscaler's tick.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Secret, Service};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action as Requeue, Controller};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

use crate::crd::{BriskCluster, BriskClusterStatus};
use crate::error::Error;
use crate::manifests::{self, CLUSTER_LABEL, COMPONENT_LABEL, GROUP_LABEL, Target};
use crate::names::random_hex;
use crate::reconcile::{self, Action, PodPhase, PodView, SchedulerView, World};

/// How often each cluster is looked at again (Dask's operator: 5 s).
const TICK: Duration = Duration::from_secs(5);
/// Where the operator reaches a cluster's scheduler over HTTP, when not
/// at its Service (an operator run outside the cluster, through a proxy).
pub const DASHBOARD_ANNOTATION: &str = "brisk.dev/dashboard-url";
/// When the operator made a pod (Unix milliseconds): the order of
/// scale-down, kept by the operator since API servers round
/// creationTimestamp to seconds.
const CREATED_ANNOTATION: &str = "brisk.dev/created-at";

#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Watch one namespace (default: all that the service account may see).
    pub namespace: Option<String>,
}

struct Ctx {
    client: Client,
}

/// Run until SIGTERM or Ctrl-C.
pub async fn run(client: Client, opts: Options) -> Result<(), Error> {
    let (clusters, pods): (Api<BriskCluster>, Api<Pod>) = match &opts.namespace {
        Some(ns) => (Api::namespaced(client.clone(), ns), Api::namespaced(client.clone(), ns)),
        None => (Api::all(client.clone()), Api::all(client.clone())),
    };
    if let Err(e) = clusters.list(&ListParams::default().limit(1)).await {
        return Err(Error::Other(format!(
            "cannot list BriskClusters ({e}); is the resource installed? `brisk k8s crd | kubectl apply -f -`"
        )));
    }
    eprintln!(
        "brisk operator: watching BriskClusters in {}",
        opts.namespace.as_deref().map_or("every namespace".to_string(), |n| format!("namespace {n}"))
    );
    Controller::new(clusters, watcher::Config::default())
        .owns(pods, watcher::Config::default().labels(&format!("{COMPONENT_LABEL}=worker")))
        .shutdown_on_signal()
        .run(reconcile_one, on_error, Arc::new(Ctx { client }))
        .for_each(|r| async move {
            match r {
                // A pod's event after its cluster was deleted.
                Ok(_) | Err(kube::runtime::controller::Error::ObjectNotFound(_)) => {}
                Err(e) => eprintln!("brisk operator: {e}"),
            }
        })
        .await;
    Ok(())
}

fn on_error(bc: Arc<BriskCluster>, e: &Error, _: Arc<Ctx>) -> Requeue {
    eprintln!("brisk operator: {}/{}: {e}", bc.namespace().unwrap_or_default(), bc.name_any());
    Requeue::requeue(TICK)
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

async fn reconcile_one(bc: Arc<BriskCluster>, ctx: Arc<Ctx>) -> Result<Requeue, Error> {
    if bc.meta().deletion_timestamp.is_some() {
        return Ok(Requeue::await_change());
    }
    let ns = bc.namespace().unwrap_or_else(|| "default".into());
    let name = bc.name_any();
    let t = Target { name: &name, namespace: &ns, owner: bc.controller_owner_ref(&()) };
    let client = &ctx.client;
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let selector = format!("{CLUSTER_LABEL}={name},{COMPONENT_LABEL}=worker");
    let listed = pods_api.list(&ListParams::default().labels(&selector)).await?;
    let pods: Vec<PodView> = listed.items.iter().filter_map(|p| pod_view(p, &name)).collect();
    let secret = found(Api::<Secret>::namespaced(client.clone(), &ns).get(&t.secret_name()).await)?;
    let has_secret = secret.is_some();
    let token = secret.as_ref().and_then(manifests::secret_token).unwrap_or_default();
    let has_scheduler =
        found(Api::<Deployment>::namespaced(client.clone(), &ns).get(&t.scheduler_name()).await)?.is_some();
    let has_service =
        found(Api::<Service>::namespaced(client.clone(), &ns).get(&t.scheduler_name()).await)?.is_some();
    let dashboard = bc.annotations().get(DASHBOARD_ANNOTATION).cloned().unwrap_or_else(|| t.dashboard());
    let scheduler = if has_scheduler {
        let target = bc.spec.autoscale.as_ref().map(|a| match &a.target_duration {
            Some(d) => format!("/api/v1/adaptive_target?target_duration={d}"),
            None => "/api/v1/adaptive_target".to_string(),
        });
        ask_scheduler(&dashboard, &token, target, bc.spec.idle_timeout > 0).await
    } else {
        Err("not created yet".into())
    };
    let world = World {
        spec: &bc.spec,
        status: bc.status.as_ref(),
        has_secret,
        has_scheduler,
        has_service,
        pods,
        scheduler,
        scheduler_address: t.scheduler_address(),
        dashboard: dashboard.clone(),
        now: now_ms() / 1000,
    };
    for action in reconcile::reconcile(&world) {
        match carry_out(action, &bc, &t, (&dashboard, &token), client).await {
            Ok(()) => {}
            // A spec that cannot become objects: say so where `kubectl get`
            // and `kube_cluster` look, and wait for it to change.
            Err(Error::Spec(why)) => {
                let last = bc.status.clone().unwrap_or_default();
                let status =
                    BriskClusterStatus { phase: "Failed".into(), message: Some(why.clone()), ..last };
                if bc.status.as_ref() != Some(&status) {
                    eprintln!("brisk operator: {ns}/{name}: {why}");
                    let api: Api<BriskCluster> = Api::namespaced(client.clone(), &ns);
                    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status_patch(&status)?))
                        .await?;
                }
                return Ok(Requeue::await_change());
            }
            Err(e) => return Err(e),
        }
    }
    Ok(Requeue::requeue(TICK))
}

fn pod_view(p: &Pod, cluster: &str) -> Option<PodView> {
    let labels = p.labels();
    // Label selectors are the server's job; an emulator may not do them.
    if labels.get(CLUSTER_LABEL).map(String::as_str) != Some(cluster) {
        return None;
    }
    let created = p
        .annotations()
        .get(CREATED_ANNOTATION)
        .and_then(|s| s.parse::<i64>().ok())
        .or_else(|| p.meta().creation_timestamp.as_ref().map(|t| t.0.as_millisecond()))
        .unwrap_or(0);
    Some(PodView {
        name: p.name_any(),
        group: labels.get(GROUP_LABEL).cloned().unwrap_or_else(|| crate::names::DEFAULT_GROUP.into()),
        phase: PodPhase::parse(p.status.as_ref().and_then(|s| s.phase.as_deref())),
        deleting: p.meta().deletion_timestamp.is_some(),
        created,
    })
}

/// The scheduler's workers, and its adaptive target and idle time when
/// they are wanted.
/// `target`: the adaptive target's path (with its target duration), when autoscaling.
async fn ask_scheduler(
    base: &str,
    token: &str,
    target: Option<String>,
    idle: bool,
) -> Result<SchedulerView, String> {
    let (base, token) = (base.to_string(), token.to_string());
    tokio::task::spawn_blocking(move || {
        let w = crate::http::call(&base, &token, "GET", "/api/v1/get_workers", None)?;
        let workers: BTreeSet<String> = w["workers"]
            .as_array()
            .map(|ws| ws.iter().filter_map(|x| x["name"].as_str().map(str::to_string)).collect())
            .unwrap_or_default();
        let target = match target {
            Some(path) => {
                let v = crate::http::call(&base, &token, "GET", &path, None)?;
                Some(v["workers"].as_i64().ok_or("adaptive_target gave no \"workers\"")? as i32)
            }
            None => None,
        };
        let idle_since = match idle {
            true => {
                crate::http::call(&base, &token, "GET", "/api/v1/check_idle", None)?["idle_since"].as_f64()
            }
            false => None,
        };
        Ok(SchedulerView { workers, target, idle_since })
    })
    .await
    .map_err(|e| e.to_string())?
}

/// Do one action; `scheduler` is the scheduler's HTTP address and token.
async fn carry_out(
    a: Action,
    bc: &BriskCluster,
    t: &Target<'_>,
    scheduler: (&str, &str),
    client: &Client,
) -> Result<(), Error> {
    let ns = t.namespace;
    let say = |what: String| eprintln!("brisk operator: {ns}/{}: {what}", t.name);
    let pp = PostParams::default();
    match a {
        Action::CreateSecret => {
            let token = random_hex(16)?;
            created(
                Api::<Secret>::namespaced(client.clone(), ns)
                    .create(&pp, &manifests::token_secret(t, &token)?)
                    .await,
            )?;
            say("created the token secret".into());
        }
        Action::CreateScheduler => {
            let d = manifests::scheduler_deployment(&bc.spec, t)?;
            created(Api::<Deployment>::namespaced(client.clone(), ns).create(&pp, &d).await)?;
            say("created the scheduler".into());
        }
        Action::CreateService => {
            let s = manifests::scheduler_service(&bc.spec, t)?;
            created(Api::<Service>::namespaced(client.clone(), ns).create(&pp, &s).await)?;
            say(format!("created the service {}", t.scheduler_address()));
        }
        Action::CreateWorkers { group, n } => {
            let Some((_, g)) = bc.spec.groups().into_iter().find(|(name, _)| *name == group) else {
                return Ok(());
            };
            let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
            let mut names = Vec::new();
            for _ in 0..n {
                let name = t.worker_pod_name(&group, &random_hex(3)?[..5]);
                let mut pod = manifests::worker_pod(&bc.spec, t, &group, g, &name)?;
                pod.annotations_mut().insert(CREATED_ANNOTATION.into(), now_ms().to_string());
                created(pods.create(&pp, &pod).await)?;
                names.push(name);
            }
            say(format!("created {n} worker pod(s) in group {group}: {}", names.join(", ")));
        }
        Action::Retire { names } => {
            let (base, token) = (scheduler.0.to_string(), scheduler.1.to_string());
            let body = json!({ "workers": names });
            let answer = tokio::task::spawn_blocking(move || {
                crate::http::call(&base, &token, "POST", "/api/v1/retire_workers", Some(&body))
            })
            .await
            .map_err(|e| Error::Other(e.to_string()))?;
            match answer {
                Ok(_) => say(format!("retiring {}", names.join(", "))),
                // Deleting the pod still sends SIGTERM, on which a worker
                // hands its results on by itself.
                Err(e) => say(format!(
                    "could not retire {} ({e}); deleting their pods drains them",
                    names.join(", ")
                )),
            }
        }
        Action::DeletePods { names, why } => {
            let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
            for n in &names {
                gone(pods.delete(n, &DeleteParams::default()).await.map(|_| ()))?;
            }
            say(format!("deleted {} ({why})", names.join(", ")));
        }
        Action::SetReplicas { n } => {
            let api: Api<BriskCluster> = Api::namespaced(client.clone(), ns);
            let patch = json!({ "spec": { "workers": { "replicas": n } } });
            api.patch(t.name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
            say(format!("autoscale: {} → {n} workers", bc.spec.workers.replicas));
        }
        Action::UpdateStatus(s) => {
            let api: Api<BriskCluster> = Api::namespaced(client.clone(), ns);
            api.patch_status(t.name, &PatchParams::default(), &Patch::Merge(&status_patch(&s)?)).await?;
        }
        Action::DeleteCluster { why } => {
            let api: Api<BriskCluster> = Api::namespaced(client.clone(), ns);
            gone(api.delete(t.name, &DeleteParams::background()).await.map(|_| ()))?;
            say(format!("deleted the cluster: {why}"));
        }
    }
    Ok(())
}

/// The status as a merge patch that also clears what is no longer set.
fn status_patch(s: &BriskClusterStatus) -> Result<serde_json::Value, Error> {
    let mut v = serde_json::to_value(s).map_err(|e| Error::Other(e.to_string()))?;
    for key in ["schedulerAddress", "dashboard", "lastScaleDown", "message"] {
        if v.get(key).is_none() {
            v[key] = serde_json::Value::Null;
        }
    }
    Ok(json!({ "status": v }))
}

/// The object a get found (any 404 is "none", whatever its reason says:
/// kube's `get_opt` knows only the API server's wording).
fn found<T>(r: Result<T, kube::Error>) -> Result<Option<T>, Error> {
    match r {
        Ok(x) => Ok(Some(x)),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// A create that found the object already there did its job.
fn created<T>(r: Result<T, kube::Error>) -> Result<(), Error> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// A delete that found nothing did its job.
fn gone(r: Result<(), kube::Error>) -> Result<(), Error> {
    match r {
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        other => other.map_err(Into::into),
    }
}
