//! The operator's decisions, with no I/O and no clock: what it saw of one
//! BriskCluster (its objects, its worker pods, what the scheduler said)
//! goes in, the actions to take come out. `operator.rs` does the seeing
//! and the doing.
//!
//! The rules answer dask-kubernetes' complaints: pods that never joined go
//! first on scale-down (the autoscaler killed running workers while new
//! pods were still pulling, dask-kubernetes#659), joined workers are
//! retired through the scheduler before their pods go (their results
//! move), and autoscaling shrinks by at most a quarter each 15 s, as Dask's
//! operator does.

use std::collections::{BTreeMap, BTreeSet};

use crate::crd::{BriskClusterSpec, BriskClusterStatus, GroupCount};

/// The autoscaler shrinks at most this fraction of the workers per step…
const SHRINK_FRACTION: f64 = 0.25;
/// …and waits this long after one shrink before the next.
pub const SHRINK_COOLDOWN_S: i64 = 15;
/// Pods made per pass at most (dask-kubernetes batches likewise): a
/// `replicas` of millions asks the API server for them a batch at a time,
/// each pass seeing what the last one made, not all at once.
pub const CREATE_PER_PASS: usize = 100;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodPhase {
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

impl PodPhase {
    pub fn parse(s: Option<&str>) -> PodPhase {
        match s {
            Some("Pending") | None => PodPhase::Pending,
            Some("Running") => PodPhase::Running,
            Some("Succeeded") => PodPhase::Succeeded,
            Some("Failed") => PodPhase::Failed,
            Some(_) => PodPhase::Unknown,
        }
    }
    fn ended(self) -> bool {
        matches!(self, PodPhase::Succeeded | PodPhase::Failed)
    }
}

/// One worker pod as seen.
#[derive(Clone, Debug, PartialEq)]
pub struct PodView {
    pub name: String,
    pub group: String,
    pub phase: PodPhase,
    /// Already being deleted (it counts for nothing).
    pub deleting: bool,
    /// Creation time (Unix milliseconds): newer pods go first on scale-down.
    pub created: i64,
}

/// What the scheduler answered over HTTP.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SchedulerView {
    /// Names of the workers connected (a worker is named after its pod).
    pub workers: BTreeSet<String>,
    /// `/api/v1/adaptive_target`, when autoscaling asked for it.
    pub target: Option<i32>,
    /// `/api/v1/check_idle`: idle since (Unix seconds), when asked.
    pub idle_since: Option<f64>,
}

/// Everything seen of one cluster.
#[derive(Clone, Debug)]
pub struct World<'a> {
    pub spec: &'a BriskClusterSpec,
    pub status: Option<&'a BriskClusterStatus>,
    pub has_secret: bool,
    pub has_scheduler: bool,
    pub has_service: bool,
    pub pods: Vec<PodView>,
    /// The scheduler's answers, or why there are none.
    pub scheduler: Result<SchedulerView, String>,
    pub scheduler_address: String,
    pub dashboard: String,
    /// Unix seconds.
    pub now: i64,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    CreateSecret,
    CreateScheduler,
    CreateService,
    CreateWorkers {
        group: String,
        n: usize,
    },
    /// Ask the scheduler to retire these workers (their results move).
    Retire {
        names: Vec<String>,
    },
    DeletePods {
        names: Vec<String>,
        why: String,
    },
    /// The autoscaler's new replica count for the default group.
    SetReplicas {
        n: i32,
    },
    UpdateStatus(BriskClusterStatus),
    DeleteCluster {
        why: String,
    },
}

/// The actions that bring the cluster to its spec, in the order to take them.
pub fn reconcile(w: &World<'_>) -> Vec<Action> {
    let mut out = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    if !w.has_secret {
        out.push(Action::CreateSecret);
    }
    if !w.has_scheduler {
        out.push(Action::CreateScheduler);
    }
    if !w.has_service {
        out.push(Action::CreateService);
    }
    let sched = w.scheduler.as_ref().ok();

    let timeout = (w.spec.idle_timeout > 0).then_some(w.spec.idle_timeout);
    if let (Some(since), Some(t)) = (sched.and_then(|s| s.idle_since), timeout) {
        let idle = w.now as f64 - since;
        if idle > t as f64 {
            out.push(Action::DeleteCluster { why: format!("idle for {idle:.0} s (idleTimeout {t} s)") });
            return out;
        }
    }

    let mut replicas: BTreeMap<&str, i32> =
        w.spec.groups().into_iter().map(|(n, g)| (n, g.replicas.max(0))).collect();
    let last_shrink = w.status.and_then(|s| s.last_scale_down);
    let mut shrunk_at = last_shrink;
    if let Some(a) = &w.spec.autoscale {
        if a.maximum < a.minimum {
            notes.push(format!("autoscale: maximum {} is below minimum {}", a.maximum, a.minimum));
        } else {
            let current = w.spec.workers.replicas.max(0);
            // The scheduler's target counts every worker; the other
            // groups' are not the autoscaler's to change.
            let others = w
                .pods
                .iter()
                .filter(|p| p.group != crate::names::DEFAULT_GROUP && !p.deleting && !p.phase.ended())
                .count() as i32;
            let desired = sched
                .and_then(|s| s.target)
                .map_or(current, |t| (t - others).max(0))
                .clamp(a.minimum, a.maximum);
            let next = autoscale_step(current, desired, last_shrink, w.now);
            if next != current {
                if next < current {
                    shrunk_at = Some(w.now);
                }
                out.push(Action::SetReplicas { n: next });
                replicas.insert(crate::names::DEFAULT_GROUP, next);
            }
        }
    }

    let mut counts: BTreeMap<String, i32> = BTreeMap::new();
    let ended: Vec<String> =
        w.pods.iter().filter(|p| !p.deleting && p.phase.ended()).map(|p| p.name.clone()).collect();
    if !ended.is_empty() {
        out.push(Action::DeletePods { names: ended, why: "their workers ended".into() });
    }
    let mut groups: BTreeSet<&str> = replicas.keys().copied().collect();
    groups.extend(w.pods.iter().map(|p| p.group.as_str()));
    for group in groups {
        let want = replicas.get(group).copied().unwrap_or(0) as usize;
        let mut live: Vec<&PodView> =
            w.pods.iter().filter(|p| p.group == group && !p.deleting && !p.phase.ended()).collect();
        if replicas.contains_key(group) {
            counts.insert(group.to_string(), live.len() as i32);
        }
        if live.len() < want {
            let n = (want - live.len()).min(CREATE_PER_PASS);
            out.push(Action::CreateWorkers { group: group.to_string(), n });
        } else if live.len() > want {
            let joined = |p: &PodView| sched.is_some_and(|s| s.workers.contains(&p.name));
            // Pods whose worker never joined first (they hold nothing),
            // then the newest.
            live.sort_by_key(|p| (joined(p), std::cmp::Reverse(p.created), p.name.clone()));
            let going = &live[..live.len() - want];
            let retire: Vec<String> = going.iter().filter(|p| joined(p)).map(|p| p.name.clone()).collect();
            if !retire.is_empty() {
                out.push(Action::Retire { names: retire });
            }
            let why = match (&w.scheduler, replicas.contains_key(group)) {
                (_, false) => format!("group {group} is no longer in the spec"),
                (Ok(_), true) => format!("group {group} scaled to {want}"),
                (Err(e), true) => {
                    notes.push(format!(
                        "the scheduler did not answer ({e}): the newest pods went without retiring"
                    ));
                    format!("group {group} scaled to {want}")
                }
            };
            out.push(Action::DeletePods { names: going.iter().map(|p| p.name.clone()).collect(), why });
        }
    }

    let (phase, message) = match (&w.scheduler, w.has_scheduler) {
        (Ok(_), _) => ("Running", None),
        (Err(_), false) => ("Pending", Some("creating the scheduler".to_string())),
        (Err(e), true) => ("Pending", Some(format!("waiting for the scheduler: {e}"))),
    };
    let message = if notes.is_empty() { message } else { Some(notes.join("; ")) };
    let status = BriskClusterStatus {
        phase: phase.into(),
        workers: counts.get(crate::names::DEFAULT_GROUP).copied().unwrap_or(0),
        groups: counts.into_iter().map(|(name, workers)| GroupCount { name, workers }).collect(),
        scheduler_address: Some(w.scheduler_address.clone()),
        dashboard: Some(w.dashboard.clone()),
        last_scale_down: shrunk_at,
        message,
    };
    if w.status != Some(&status) {
        out.push(Action::UpdateStatus(status));
    }
    out
}

/// Dask operator's damping: grow at once; shrink by at most a quarter of
/// the workers (at least one), at most once per cooldown.
pub fn autoscale_step(current: i32, desired: i32, last_shrink: Option<i64>, now: i64) -> i32 {
    if desired >= current {
        return desired;
    }
    if last_shrink.is_some_and(|t| now - t < SHRINK_COOLDOWN_S) {
        return current;
    }
    let step = ((current as f64 * SHRINK_FRACTION) as i32).max(1);
    desired.max(current - step)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{Autoscale, NamedWorkerGroup, WorkerGroupSpec};

    fn spec(replicas: i32) -> BriskClusterSpec {
        BriskClusterSpec {
            image: "brisk:test".into(),
            image_pull_policy: None,
            scheduler: Default::default(),
            workers: WorkerGroupSpec { replicas, ..Default::default() },
            worker_groups: vec![],
            autoscale: None,
            idle_timeout: 0,
        }
    }

    fn pod(name: &str, group: &str, phase: PodPhase, created: i64) -> PodView {
        PodView { name: name.into(), group: group.into(), phase, deleting: false, created }
    }

    fn world<'a>(
        spec: &'a BriskClusterSpec,
        pods: Vec<PodView>,
        sched: Result<SchedulerView, String>,
    ) -> World<'a> {
        World {
            spec,
            status: None,
            has_secret: true,
            has_scheduler: true,
            has_service: true,
            pods,
            scheduler: sched,
            scheduler_address: "tcp://s:8786".into(),
            dashboard: "http://s:8787".into(),
            now: 1000,
        }
    }

    fn joined(names: &[&str]) -> Result<SchedulerView, String> {
        Ok(SchedulerView { workers: names.iter().map(|s| s.to_string()).collect(), ..Default::default() })
    }

    fn without_status(actions: Vec<Action>) -> Vec<Action> {
        actions.into_iter().filter(|a| !matches!(a, Action::UpdateStatus(_))).collect()
    }

    #[test]
    fn a_new_cluster_gets_its_objects_and_workers() {
        let s = spec(2);
        let mut w = world(&s, vec![], Err("connection refused".into()));
        (w.has_secret, w.has_scheduler, w.has_service) = (false, false, false);
        let a = reconcile(&w);
        assert_eq!(
            a[..4],
            [
                Action::CreateSecret,
                Action::CreateScheduler,
                Action::CreateService,
                Action::CreateWorkers { group: "default".into(), n: 2 },
            ]
        );
        let Some(Action::UpdateStatus(st)) = a.last() else { panic!("no status: {a:?}") };
        assert_eq!((st.phase.as_str(), st.workers), ("Pending", 0));
    }

    #[test]
    fn scale_down_takes_unjoined_pods_first_then_retires_the_newest() {
        let s = spec(1);
        let pods = vec![
            pod("a", "default", PodPhase::Running, 1),
            pod("b", "default", PodPhase::Running, 2),
            pod("c", "default", PodPhase::Pending, 3),
            pod("d", "default", PodPhase::Running, 4),
        ];
        let a = without_status(reconcile(&world(&s, pods, joined(&["a", "b", "d"]))));
        assert_eq!(
            a,
            vec![
                Action::Retire { names: vec!["d".into(), "b".into()] },
                Action::DeletePods {
                    names: vec!["c".into(), "d".into(), "b".into()],
                    why: "group default scaled to 1".into()
                },
            ]
        );
    }

    #[test]
    fn without_a_scheduler_scale_down_is_lifo_and_says_so() {
        let s = spec(1);
        let pods = vec![pod("a", "default", PodPhase::Running, 1), pod("b", "default", PodPhase::Running, 2)];
        let a = reconcile(&world(&s, pods, Err("timed out".into())));
        assert!(a.contains(&Action::DeletePods {
            names: vec!["b".into()],
            why: "group default scaled to 1".into()
        }));
        let Some(Action::UpdateStatus(st)) = a.last() else { panic!("{a:?}") };
        assert!(st.message.as_deref().is_some_and(|m| m.contains("without retiring")), "{st:?}");
    }

    #[test]
    fn a_huge_group_is_made_a_batch_at_a_time() {
        let s = spec(i32::MAX);
        let a = reconcile(&world(&s, vec![], joined(&[])));
        assert!(a.contains(&Action::CreateWorkers { group: "default".into(), n: CREATE_PER_PASS }), "{a:?}");
    }

    #[test]
    fn ended_pods_are_removed_and_replaced() {
        let s = spec(2);
        let pods = vec![
            pod("a", "default", PodPhase::Running, 1),
            pod("b", "default", PodPhase::Failed, 2),
            PodView { deleting: true, ..pod("c", "default", PodPhase::Running, 3) },
        ];
        let a = without_status(reconcile(&world(&s, pods, joined(&["a"]))));
        assert_eq!(
            a,
            vec![
                Action::DeletePods { names: vec!["b".into()], why: "their workers ended".into() },
                Action::CreateWorkers { group: "default".into(), n: 1 },
            ]
        );
    }

    #[test]
    fn groups_are_reconciled_apart_and_a_removed_group_goes() {
        let mut s = spec(1);
        s.worker_groups.push(NamedWorkerGroup {
            name: "gpu".into(),
            spec: WorkerGroupSpec { replicas: 2, ..Default::default() },
        });
        let pods = vec![pod("d1", "default", PodPhase::Running, 1), pod("old1", "old", PodPhase::Running, 1)];
        let a = reconcile(&world(&s, pods, joined(&["d1", "old1"])));
        assert!(a.contains(&Action::CreateWorkers { group: "gpu".into(), n: 2 }));
        assert!(a.contains(&Action::Retire { names: vec!["old1".into()] }));
        assert!(a.contains(&Action::DeletePods {
            names: vec!["old1".into()],
            why: "group old is no longer in the spec".into()
        }));
        let Some(Action::UpdateStatus(st)) = a.last() else { panic!("{a:?}") };
        let groups: Vec<(&str, i32)> = st.groups.iter().map(|g| (g.name.as_str(), g.workers)).collect();
        assert_eq!(groups, vec![("default", 1), ("gpu", 0)]);
    }

    #[test]
    fn autoscale_grows_at_once_and_shrinks_a_quarter_per_cooldown() {
        assert_eq!(autoscale_step(2, 10, None, 0), 10);
        assert_eq!(autoscale_step(8, 0, None, 100), 6);
        assert_eq!(autoscale_step(6, 0, Some(90), 100), 6);
        assert_eq!(autoscale_step(6, 0, Some(85), 100), 5);
        assert_eq!(autoscale_step(2, 0, None, 100), 1);
        assert_eq!(autoscale_step(8, 7, None, 100), 7);

        let mut s = spec(8);
        s.autoscale = Some(Autoscale { minimum: 1, maximum: 20, target_duration: None });
        let sched = Ok(SchedulerView { target: Some(0), ..Default::default() });
        let pods = (0..8).map(|i| pod(&format!("p{i}"), "default", PodPhase::Running, i)).collect();
        let a = reconcile(&world(&s, pods, sched));
        assert_eq!(a[0], Action::SetReplicas { n: 6 });
        assert!(a.contains(&Action::DeletePods {
            names: vec!["p7".into(), "p6".into()],
            why: "group default scaled to 6".into()
        }));
        let Some(Action::UpdateStatus(st)) = a.last() else { panic!("{a:?}") };
        assert_eq!(st.last_scale_down, Some(1000));
    }

    #[test]
    fn autoscale_leaves_the_other_groups_workers_out_of_the_target() {
        let mut s = spec(2);
        s.autoscale = Some(Autoscale { minimum: 0, maximum: 10, target_duration: None });
        let pods = vec![
            pod("d1", "default", PodPhase::Running, 1),
            pod("d2", "default", PodPhase::Running, 2),
            pod("g1", "gpu", PodPhase::Running, 1),
        ];
        let sched = Ok(SchedulerView { target: Some(2), ..Default::default() });
        let a = reconcile(&world(&s, pods, sched));
        assert_eq!(a[0], Action::SetReplicas { n: 1 });
    }

    #[test]
    fn autoscale_keeps_to_its_bounds_even_without_a_target() {
        let mut s = spec(0);
        s.autoscale = Some(Autoscale { minimum: 2, maximum: 4, target_duration: None });
        let a = reconcile(&world(&s, vec![], Err("refused".into())));
        assert_eq!(a[0], Action::SetReplicas { n: 2 });
        s.autoscale = Some(Autoscale { minimum: 5, maximum: 4, target_duration: None });
        let a = reconcile(&world(&s, vec![], Err("refused".into())));
        assert!(!a.iter().any(|x| matches!(x, Action::SetReplicas { .. })));
        let Some(Action::UpdateStatus(st)) = a.last() else { panic!("{a:?}") };
        assert!(st.message.as_deref().is_some_and(|m| m.contains("below minimum")));
    }

    #[test]
    fn an_idle_cluster_past_its_timeout_is_deleted() {
        let mut s = spec(1);
        s.idle_timeout = 60;
        let idle = |since| Ok(SchedulerView { idle_since: Some(since), ..Default::default() });
        assert!(matches!(reconcile(&world(&s, vec![], idle(900.0)))[..], [Action::DeleteCluster { .. }]));
        assert!(
            !reconcile(&world(&s, vec![], idle(990.0)))
                .iter()
                .any(|a| matches!(a, Action::DeleteCluster { .. }))
        );
    }

    #[test]
    fn nothing_to_do_means_no_action() {
        let s = spec(1);
        let w = world(&s, vec![pod("a", "default", PodPhase::Running, 1)], joined(&["a"]));
        let a = reconcile(&w);
        let Some(Action::UpdateStatus(st)) = a.last().cloned() else { panic!("{a:?}") };
        let w = World { status: Some(&st), ..w };
        assert_eq!(reconcile(&w), vec![]);
    }
}
