//! brisk on Kubernetes, as far as it can be tested with no API server
//! (none can run on these machines):
//!
//! - `brisk k8s crd` and `brisk k8s manifests` pass `kubernetes-validate
//!   --strict` (the API's own schemas, unknown fields refused), and sample
//!   BriskClusters are accepted or refused by the CRD's schema as an API
//!   server would;
//! - `brisk operator` and `kube_cluster` run against kmock's in-memory API
//!   (`tests/reference/kube_cluster.py`), with the test playing kubelet:
//!   each pod the operator makes runs as a real `brisk worker`, so scaling,
//!   retiring, worker groups and autoscaling are checked end to end;
//! - bad options and a missing configuration give clear errors.
//!
//! The operator's decisions are unit-tested without I/O in `k8s/src/reconcile.rs`.

#[path = "support/cluster.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use support::{ScriptFile, brisk, run_with_deadline};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The Python with kmock and kubernetes-validate (tests/requirements.txt), if any.
fn python() -> Option<PathBuf> {
    support::python_with("kmock, kubernetes_validate, jsonschema, yaml", "kmock and kubernetes-validate are")
}

fn reference(script: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/reference").join(script)
}

/// A directory of its own under the temporary directory, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("brisk-kube-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("make a temporary directory");
        TempDir(p)
    }
    fn file(&self, name: &str, content: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, content).expect("write a file");
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn ok(out: &Output) -> String {
    assert!(out.status.success(), "failed: {}\n{}", text(&out.stderr), text(&out.stdout));
    text(&out.stdout)
}

fn brisk_out(args: &[&str]) -> Output {
    run_with_deadline(brisk().args(args), Duration::from_secs(60), String::new)
}

fn validate(py: &Path, file: &Path) -> Output {
    Command::new(py)
        .args(["-m", "kubernetes_validate", "--strict"])
        .arg(file)
        .output()
        .expect("run kubernetes-validate")
}

#[test]
fn the_crd_and_the_manifests_pass_the_apis_schemas_strictly() {
    let Some(py) = python() else { return };
    let dir = TempDir::new("validate");
    let crd = dir.file("crd.yaml", &ok(&brisk_out(&["k8s", "crd"])));
    let out = validate(&py, &crd);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    assert!(
        text(&out.stdout).contains("customresourcedefinition/briskclusters.brisk.dev"),
        "{}",
        text(&out.stdout)
    );

    let manifests = ok(&brisk_out(&[
        "k8s",
        "manifests",
        "--name",
        "demo",
        "--image",
        "registry.example/brisk:0.1",
        "--workers",
        "3",
        "--gpus-per-worker",
        "1",
        "--cpu",
        "4",
        "--memory",
        "16Gi",
        "--namespace",
        "science",
    ]));
    let file = dir.file("manifests.yaml", &manifests);
    let out = validate(&py, &file);
    let log = text(&out.stdout);
    assert!(out.status.success(), "{log}{}", text(&out.stderr));
    for kind in [
        "secret/demo-token",
        "deployment/demo-scheduler",
        "service/demo-scheduler",
        "deployment/demo-default-worker",
    ] {
        assert!(log.contains(&format!("passed for resource {kind}")), "{kind} not validated: {log}");
    }
    // What the workers run is what `brisk worker` takes.
    for line in [
        "- tcp://demo-scheduler.science.svc.cluster.local:8786",
        "- GPU=1",
        "nvidia.com/gpu: \"1\"",
        "replicas: 3",
        "- \"17179869184\"",
    ] {
        assert!(manifests.contains(line), "no {line:?} in\n{manifests}");
    }
    // The two tokens differ: each run makes its own.
    let again = ok(&brisk_out(&["k8s", "manifests", "--name", "demo", "--image", "i"]));
    let token = |m: &str| m.lines().find(|l| l.trim_start().starts_with("token:")).map(str::to_string);
    assert!(token(&manifests).is_some() && token(&manifests) != token(&again));

    let op = dir.file(
        "operator.yaml",
        &ok(&brisk_out(&["k8s", "operator", "--image", "registry.example/brisk:0.1"])),
    );
    let out = validate(&py, &op);
    let log = text(&out.stdout);
    assert!(out.status.success(), "{log}{}", text(&out.stderr));
    for kind in [
        "customresourcedefinition/briskclusters.brisk.dev",
        "serviceaccount/brisk-operator",
        "clusterrole/brisk-operator",
        "clusterrolebinding/brisk-operator",
        "deployment/brisk-operator",
    ] {
        assert!(log.contains(&format!("passed for resource {kind}")), "{kind} not validated: {log}");
    }

    // The validator is not a rubber stamp: an unknown field fails it.
    let broken = dir.file(
        "broken.yaml",
        &manifests.replacen("imagePullPolicy", "imagePullPolice", 1).replacen("image:", "imagee:", 1),
    );
    assert!(!validate(&py, &broken).status.success(), "a misspelt field passed --strict");
}

#[test]
fn briskclusters_are_checked_against_the_crds_schema() {
    let Some(py) = python() else { return };
    let dir = TempDir::new("schema");
    let crd = dir.file("crd.yaml", &ok(&brisk_out(&["k8s", "crd"])));
    let good = dir.file(
        "good.yaml",
        r#"apiVersion: brisk.dev/v1alpha1
kind: BriskCluster
metadata: {name: demo}
spec:
  image: registry.example/brisk:0.1
  scheduler: {serviceType: LoadBalancer, template: {nodeSelector: {pool: cpu}}}
  workers:
    replicas: 2
    resources: {limits: {cpu: 4, memory: 16Gi}}
    env: [{name: OMP_NUM_THREADS, value: "1"}]
  workerGroups:
  - name: gpu
    replicas: 1
    resources: {limits: {nvidia.com/gpu: 1}}
  autoscale: {minimum: 1, maximum: 20, targetDuration: 30s}
  idleTimeout: 600
"#,
    );
    let check = |cr: &Path| Command::new(&py).arg(reference("kube_schema.py")).arg(&crd).arg(cr).output();
    let out = check(&good).expect("run the schema check");
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "OK demo");

    for (bad, field) in [
        ("workers: {replicas: -1}", "spec/workers/replicas"),
        ("workers: {replicas: two}", "spec/workers/replicas"),
        ("workerGroups: [{name: GPU_pool, replicas: 1}]", "spec/workerGroups/0/name"),
        ("scheduler: {serviceType: Ingress}", "spec/scheduler/serviceType"),
        ("autoscale: {minimum: 1}", "spec/autoscale"),
        ("autoscale: {minimum: 1, maximum: 2, targetDuration: soon}", "spec/autoscale/targetDuration"),
        ("idleTimeout: -5", "spec/idleTimeout"),
    ] {
        let cr = dir.file("bad.yaml", &format!("apiVersion: brisk.dev/v1alpha1\nkind: BriskCluster\nmetadata: {{name: bad}}\nspec:\n  image: i\n  {bad}\n"));
        let out = check(&cr).expect("run the schema check");
        let said = text(&out.stdout);
        assert!(
            !out.status.success() && said.contains(&format!("ERROR bad {field}")),
            "{bad} passed or erred elsewhere: {said}"
        );
    }
    let no_image = dir.file("bad.yaml", "apiVersion: brisk.dev/v1alpha1\nkind: BriskCluster\nmetadata: {name: bad}\nspec: {workers: {replicas: 1}}\n");
    assert!(!check(&no_image).expect("run the schema check").status.success());
}

#[test]
fn bad_options_are_refused_with_a_clear_error() {
    let cases: [(&[&str], &str); 4] = [
        (&["k8s", "manifests", "--name", "Bad_Name", "--image", "i"], "is not a valid name"),
        (&["k8s", "manifests", "--name", "d", "--image", "i", "--memory", "lots"], "--memory"),
        (&["k8s", "manifests", "--name", "d", "--image", "i", "--cpu=-2"], "--cpu"),
        (&["k8s", "manifests", "--name", "d"], "--image"),
    ];
    for (args, says) in cases {
        let out = brisk_out(args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn without_a_kubernetes_configuration_both_ends_say_so() {
    let dir = TempDir::new("noconfig");
    let nowhere = dir.0.join("no-such-kubeconfig");
    let clear = |cmd: &mut Command| {
        cmd.env("KUBECONFIG", &nowhere)
            .env("HOME", &dir.0)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("KUBERNETES_SERVICE_PORT");
    };
    let mut op = brisk();
    op.args(["operator"]);
    clear(&mut op);
    let out = run_with_deadline(&mut op, Duration::from_secs(30), String::new);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("no Kubernetes configuration"), "{}", text(&out.stderr));

    let script =
        ScriptFile::new("let k = kube_cluster(#{name: \"demo\", image: \"brisk:0.1\", n_workers: 1});\n");
    let mut run = brisk();
    run.args(["run", "--no-progress"]).arg(&script.0);
    clear(&mut run);
    let out = run_with_deadline(&mut run, Duration::from_secs(30), String::new);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("kube_cluster: no Kubernetes configuration"), "{err}");

    for (opts, says) in [
        ("#{image: \"i\"}", "name is required"),
        ("#{name: \"demo\", image: \"i\", n_workers: -1}", "must be 0 or more"),
        ("#{name: \"Demo!\", image: \"i\"}", "not a valid name"),
        ("#{name: \"demo\", image: \"i\", replicas: 2}", "replicas"),
        ("#{name: \"demo\", image: \"i\", resources: 4}", "resources"),
        (
            "#{name: \"demo\", image: \"i\", resources: #{limits: #{memory: \"lots\"}}}",
            "\"lots\" is not a quantity",
        ),
    ] {
        let script = ScriptFile::new(&format!("kube_cluster({opts});\n"));
        let mut run = brisk();
        run.args(["run", "--no-progress"]).arg(&script.0);
        clear(&mut run);
        let out = run_with_deadline(&mut run, Duration::from_secs(30), String::new);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{opts}: {err}");
        assert!(err.contains(says), "{opts}: {err}");
    }
}

/// The session the emulated cluster runs: start with two workers, compute,
/// scale up and down (the workers going are retired, their results kept),
/// add a GPU group, autoscale the default group to nothing, grow it again
/// with a burst of work, close.
const SESSION: &str = r#"
let k = kube_cluster(#{name: "demo", image: "brisk:test", n_workers: 2, address: "{address}", timeout: 60,
                       resources: #{limits: #{cpu: 1, memory: "1Gi"}}});
print(`phase ${k.status().phase}`);
let c = client(k);
k.wait_for_workers(2, 60);
let x = arange(0, 1000000, 1, #{chunks: 100000}).persist();
print(`sum ${x.sum().compute()}`);
k.scale(4);
k.wait_for_workers(4, 60);
print(`up ${c.workers().len()}`);
k.scale(1);
let t = timestamp();
while c.workers().len() > 1 { if t.elapsed > 60.0 { throw "scale(1) did not retire workers"; } }
print(`down ${c.workers().len()}`);
print(`sum ${x.sum().compute()}`);
k.add_worker_group("gpu", #{n: 1, resources: #{limits: #{"nvidia.com/gpu": 1}}});
k.wait_for_workers(2, 60);
let gpu = c.workers().filter(|w| w.name.contains("-gpu-worker-"));
print(`gpu ${gpu.len()}`);
k.adapt(#{minimum: 0, maximum: 3, target_duration: "2s"});
let t = timestamp();
while k.status().workers > 0 { if t.elapsed > 60.0 { throw "adapt did not shrink the default group"; } }
while c.workers().len() > 1 { if t.elapsed > 60.0 { throw "adapt did not retire the default worker"; } }
print(`adapted ${c.workers()[0].name == gpu[0].name}`);
print(`sum ${x.sum().compute()}`);
// A burst of work: the autoscaler grows the default group again.
let fs = [];
for i in 0..16 { fs.push(submit(|x| { let t = timestamp(); while t.elapsed < 1.0 {} x * 2 }, i)); }
print(`burst ${gather(fs).reduce(|s, x| s + x, 0)}`);
k.close();
print("closed");
"#;

#[test]
fn the_operator_and_kube_cluster_run_a_cluster_on_an_emulated_api() {
    let Some(py) = python() else { return };
    let dir = TempDir::new("emulated");
    let template = dir.file("session.tpl", SESSION);
    let mut cmd = Command::new(&py);
    cmd.arg(reference("kube_cluster.py")).arg(env!("CARGO_BIN_EXE_brisk")).arg(&template).arg(&dir.0);
    let out = run_with_deadline(&mut cmd, Duration::from_secs(300), String::new);
    assert!(out.status.success(), "the harness failed: {}", text(&out.stderr));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the harness's JSON");
    let log = r["operator_log"].as_str().unwrap_or_default();
    let said = r["session_out"].as_str().unwrap_or_default();
    assert_eq!(r["session_rc"], 0, "{}\noperator:\n{log}", r["session_err"]);
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(
        lines,
        [
            "phase Running",
            "sum 499999500000",
            "up 4",
            "down 1",
            "sum 499999500000",
            "gpu 1",
            "adapted true",
            "sum 499999500000",
            "burst 240",
            "closed"
        ],
        "operator:\n{log}"
    );
    // Every worker left cleanly (retired, or drained by SIGTERM): none was killed.
    let workers = r["workers"].as_object().expect("the workers");
    assert!(workers.len() >= 6, "{workers:?}");
    for (name, w) in workers {
        assert_eq!(w["rc"], 0, "{name} did not leave cleanly: {w}\noperator:\n{log}");
    }
    // Scale-down went through the scheduler: every pod deleted on a scale
    // was retired first, and scale(1) took the two newest of four.
    let names = |prefix: &str| -> Vec<String> {
        log.lines()
            .filter(|l| !l.ends_with("(their workers ended)"))
            .filter_map(|l| l.split_once(prefix))
            .flat_map(|(_, rest)| rest.split(" (").next().unwrap_or_default().split(", ").map(str::to_string))
            .collect()
    };
    let (created, retired, deleted) =
        (names("in group default: "), names(": retiring "), names(": deleted "));
    assert!(created.len() > 4, "the burst did not grow the cluster:\n{log}");
    let mut r_sorted = retired.clone();
    r_sorted.sort();
    let mut d_sorted = deleted.clone();
    d_sorted.sort();
    assert_eq!(r_sorted, d_sorted, "deleted pods that were not retired:\n{log}");
    assert!(created[2..4].iter().all(|n| retired[..3].contains(n)), "scale(1) kept a new worker:\n{log}");
    assert!(log.contains("autoscale: 1 → 0 workers"), "{log}");
    assert!(log.contains("autoscale: 0 → "), "{log}");
    assert!(log.contains("created 1 worker pod(s) in group gpu"), "{log}");
    // The operator stops on SIGTERM; nothing is left.
    assert_eq!(r["operator_rc"], 0, "{log}");
    assert_eq!(r["left_running"], serde_json::json!([]));
    assert_eq!(r["scheduler_left"], false);
    assert_eq!(r["cluster_left"], false);
    // A cluster the operator cannot build says why, and did not stop the others.
    assert_eq!(r["bad_status"]["phase"], "Failed", "{}", r["bad_status"]);
    let why = r["bad_status"]["message"].as_str().unwrap_or_default();
    assert!(why.contains("group default") && why.contains("\"lots\" is not a quantity"), "{why}");
}
