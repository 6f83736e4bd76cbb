//! The cluster (distributed's `LocalCluster` and `Client(address)`):
//! `local_cluster(#{...})` starts a scheduler and worker processes and makes
//! them the session's; `connect(address)` joins a running scheduler;
//! `c.scale(n)`, `c.restart()` and `c.close()` manage it.

use std::sync::Arc;
use std::time::Duration;

use brisk_distributed::cluster::CudaWorkers;
use brisk_distributed::deploy::manager::Manager;
use brisk_distributed::worker::DeviceLimit;
use brisk_distributed::{LocalCluster, LocalClusterOptions, RemoteClient, Security, TlsFiles};
use rhai::{Dynamic, Engine, EvalAltResult, Map};

use super::args::{options, wrong_type};
use super::fndoc::{FnDoc, doc};
use crate::error::{engine_error, runtime};
use crate::state::{Cluster, SessionState};
use crate::types::Client;

type Res<T> = Result<T, Box<EvalAltResult>>;

/// How long workers of a new local cluster have to join.
const JOIN_TIMEOUT: Duration = Duration::from_secs(60);

pub(super) const DOCS: &[FnDoc] = &[
    doc(
        "local_cluster",
        "local_cluster(#{workers, threads, memory_limit, processes, resources, token}) -> Client",
        "Start a scheduler and worker processes on this machine and run the session's graphs on them (LocalCluster + Client). Defaults: one worker per 4 cores, threads to fill the cores; processes must be true. The processes stop with the session, or at c.close().",
        "let c = local_cluster(#{workers: 2, threads: 1});\nc.workers().len()",
    ),
    doc(
        "local_cuda_cluster",
        "local_cuda_cluster(#{devices, threads_per_worker, device_memory_limit, memory_limit, token}) -> Client",
        "Start a scheduler and one worker process per GPU (dask-cuda's LocalCUDACluster + Client): each sees only its device, offers the resource GPU: 1, and keeps its GPU results on the device up to device_memory_limit (a fraction of the device, default 0.8, or a size such as \"16GiB\"), moving the least recently used to host memory beyond it (and on to disk under memory_limit, default the machine's memory shared by the workers). devices: the GPUs to use (indices or UUIDs; default: those CUDA_VISIBLE_DEVICES lists, else all). threads_per_worker defaults to 1. An error on a machine without a GPU.",
        "let c = local_cuda_cluster(#{device_memory_limit: 0.5});\nc.workers().len()",
    ),
    doc(
        "connect",
        "connect(\"tcp://HOST:PORT\", #{token, tls_cert, tls_key, tls_ca}) -> Client",
        "Connect to a running scheduler (`brisk scheduler`) and run the session's graphs on its workers; `token` (or BRISK_TOKEN) when the scheduler requires one; for a tls:// scheduler, this client's certificate, its key and the cluster's CA (PEM files; or BRISK_TLS_CERT, BRISK_TLS_KEY, BRISK_TLS_CA).",
        "let c = connect(\"tcp://127.0.0.1:8786\");",
    ),
    doc(
        "scale",
        "c.scale(n)",
        "Grow or shrink the session's local cluster to n workers; workers that leave hand their results back to the scheduler, which recomputes what is still needed.",
        "local_cluster(#{workers: 1}).scale(2)",
    ),
    doc(
        "restart",
        "c.restart()",
        "Drop every result and task of the cluster: futures held err with \"the cluster was restarted\"; the workers stay.",
        "client().restart()",
    ),
    doc(
        "dashboard_link",
        "c.dashboard_link",
        "The HTTP address of the cluster's scheduler (/health, /metrics for Prometheus, /api/v1/workers); \"\" when it serves none (brisk scheduler --no-http).",
        "local_cluster(#{workers: 1}).dashboard_link",
    ),
    doc(
        "close",
        "c.close()",
        "Close the session's cluster (stopping its processes if local_cluster started them); graphs run on the local threads again.",
        "local_cluster(#{workers: 1}).close()",
    ),
];

pub fn register(engine: &mut Engine, state: &Arc<SessionState>) {
    let st = state.clone();
    engine.register_fn("local_cluster", move || local_cluster(&st, None));
    let st = state.clone();
    engine.register_fn("local_cluster", move |m: Map| local_cluster(&st, Some(m)));
    let st = state.clone();
    engine.register_fn("local_cuda_cluster", move || local_cuda_cluster(&st, Map::new()));
    let st = state.clone();
    engine.register_fn("local_cuda_cluster", move |m: Map| local_cuda_cluster(&st, m));
    let st = state.clone();
    engine.register_fn("connect", move |addr: &str| connect(&st, addr, None));
    let st = state.clone();
    engine.register_fn("connect", move |addr: &str, m: Map| connect(&st, addr, Some(m)));
    engine.register_fn("connect", |x: Dynamic| -> Res<Client> {
        Err(wrong_type("connect", "an address such as \"tcp://127.0.0.1:8786\"", &x))
    });
    engine.register_fn("scale", |c: &mut Client, n: i64| scale(&c.state, n));
    engine.register_fn("restart", |c: &mut Client| restart(&c.state));
    engine.register_fn("adapt", |c: &mut Client| adapt(&c.state, Map::new()));
    engine.register_fn("adapt", |c: &mut Client, m: Map| adapt(&c.state, m));
    engine.register_fn("close", |c: &mut Client| c.state.detach_cluster());
    engine.register_get("dashboard_link", |c: &mut Client| -> String {
        c.state
            .with_cluster(|cl| match &cl.local {
                Some(l) => l.http_address.clone(),
                None => cl.client.dashboard_link().ok().flatten(),
            })
            .flatten()
            .unwrap_or_default()
    });
}

fn int_option(f: &str, m: &Map, key: &str, min: i64, max: i64) -> Res<Option<usize>> {
    let Some(v) = m.get(key) else { return Ok(None) };
    let n = v.as_int().map_err(|_| wrong_type(f, &format!("an int for {key}"), v))?;
    if !(min..=max).contains(&n) {
        return Err(runtime(format!("{f}: {key} must be between {min} and {max}, got {n}")));
    }
    Ok(Some(n as usize))
}

/// The `token` option, else BRISK_TOKEN.
fn token_option(f: &str, m: &Map) -> Res<Option<String>> {
    match m.get("token") {
        None => Ok(Security::with_token(None).token),
        Some(v) => Ok(Some(v.clone().into_string().map_err(|_| wrong_type(f, "a string for token", v))?)),
    }
}

/// Start `opts`' processes, connect, wait for the workers and make the
/// cluster the session's.
fn start_local(state: &Arc<SessionState>, f: &str, opts: LocalClusterOptions) -> Res<Client> {
    state.detach_cluster();
    let (workers, token) = (opts.workers, opts.token.clone());
    let local = LocalCluster::start(opts).map_err(|e| runtime(format!("{f}: {e}")))?;
    let security = Security { token, tls: None };
    let client = RemoteClient::connect(&local.address, security, state.config().fuse)
        .map_err(|e| runtime(format!("{f}: cannot connect to its scheduler: {e}")))?;
    // Workers that cannot start (a CUDA worker whose device is gone) end
    // at once, having said why on stderr: no need to wait for them.
    let deadline = std::time::Instant::now() + JOIN_TIMEOUT;
    while let Err(e) = client.wait_for_workers(workers, Duration::from_millis(200)) {
        if std::time::Instant::now() > deadline {
            return Err(engine_error(e));
        }
        let running = local.nworkers();
        if running < workers {
            return Err(runtime(format!(
                "{f}: {} of its {workers} worker processes ended before joining (their errors are above)",
                workers - running
            )));
        }
    }
    state.attach_cluster(Cluster {
        client: Arc::new(client),
        local: Some(Arc::new(local)),
        adaptive: None,
        deployed: None,
    });
    Ok(Client { state: state.clone() })
}

/// `local_cuda_cluster(#{...})`: one worker process per GPU.
fn local_cuda_cluster(state: &Arc<SessionState>, m: Map) -> Res<Client> {
    const F: &str = "local_cuda_cluster";
    let m = options(
        Some(m),
        F,
        &["devices", "threads_per_worker", "device_memory_limit", "memory_limit", "token"],
    )?;
    let requested = match m.get("devices") {
        None => None,
        Some(v) => Some(device_list(v)?),
    };
    let devices =
        brisk_distributed::cuda::visible_devices(requested).map_err(|e| runtime(format!("{F}: {e}")))?;
    let threads = int_option(F, &m, "threads_per_worker", 1, 1024)?.unwrap_or(1);
    let device_memory_limit = match m.get("device_memory_limit") {
        None => DeviceLimit::Fraction(0.8),
        Some(v) => {
            let text = if let Ok(x) = v.as_float() {
                x.to_string()
            } else if let Ok(i) = v.as_int() {
                i.to_string()
            } else {
                v.clone().into_string().map_err(|_| {
                    wrong_type(
                        F,
                        "a fraction of the device or a size such as \"16GiB\" for device_memory_limit",
                        v,
                    )
                })?
            };
            DeviceLimit::parse(&text).map_err(|e| runtime(format!("{F}: {e}")))?
        }
    };
    let memory_limit = match m.get("memory_limit") {
        None => None,
        Some(v) => crate::state::memory_limit(F, v).map_err(runtime)?,
    };
    let opts = LocalClusterOptions {
        workers: devices.len(),
        threads,
        memory_limit,
        thresholds: state.config().thresholds,
        resources: Vec::new(),
        token: token_option(F, &m)?,
        scheduler_host: None,
        cuda: Some(CudaWorkers { devices, device_memory_limit }),
    };
    start_local(state, F, opts)
}

/// `devices`: `[0, 2]`, `["GPU-…"]` or `"0,2"`.
fn device_list(v: &Dynamic) -> Res<Vec<String>> {
    let bad = || {
        wrong_type("local_cuda_cluster", "an array of device indices or UUIDs, or \"0,1\", for devices", v)
    };
    if let Some(s) = v.read_lock::<rhai::ImmutableString>() {
        return Ok(s.split(',').map(|d| d.trim().to_string()).collect());
    }
    let list = v.read_lock::<rhai::Array>().ok_or_else(bad)?;
    list.iter()
        .map(|d| {
            if let Ok(i) = d.as_int() {
                if i < 0 {
                    return Err(runtime(format!("local_cuda_cluster: devices: {i} is not a device index")));
                }
                Ok(i.to_string())
            } else {
                d.clone().into_string().map_err(|_| bad())
            }
        })
        .collect()
}

fn local_cluster(state: &Arc<SessionState>, m: Option<Map>) -> Res<Client> {
    let m = options(
        m,
        "local_cluster",
        &["workers", "threads", "memory_limit", "processes", "resources", "token"],
    )?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers =
        int_option("local_cluster", &m, "workers", 0, 256)?.unwrap_or_else(|| cores.div_ceil(4).max(1));
    let threads = int_option("local_cluster", &m, "threads", 1, 1024)?
        .unwrap_or_else(|| (cores / workers.max(1)).max(1));
    if let Some(p) = m.get("processes")
        && !p.as_bool().map_err(|_| wrong_type("local_cluster", "a bool for processes", p))?
    {
        return Err(runtime(
            "local_cluster: processes: false is not supported; the embedded scheduler (config(#{scheduler: \"threads\"})) already runs on threads",
        ));
    }
    let memory_limit = match m.get("memory_limit") {
        None => None,
        Some(v) => crate::state::memory_limit("local_cluster", v).map_err(runtime)?,
    };
    let resources = match m.get("resources") {
        None => Vec::new(),
        Some(v) => {
            let r =
                v.read_lock::<Map>().ok_or_else(|| wrong_type("local_cluster", "a map for resources", v))?;
            let mut out = Vec::new();
            for (k, x) in r.iter() {
                let amount = x
                    .as_float()
                    .or_else(|_| x.as_int().map(|i| i as f64))
                    .map_err(|_| runtime(format!("local_cluster: resource {k} must be a number")))?;
                if !(amount.is_finite() && amount >= 0.0) {
                    return Err(runtime(format!(
                        "local_cluster: resource {k} must be a non-negative number"
                    )));
                }
                out.push((k.to_string(), amount));
            }
            out
        }
    };
    let opts = LocalClusterOptions {
        workers,
        threads,
        memory_limit,
        thresholds: state.config().thresholds,
        resources,
        token: token_option("local_cluster", &m)?,
        scheduler_host: None,
        cuda: None,
    };
    start_local(state, "local_cluster", opts)
}

fn connect(state: &Arc<SessionState>, address: &str, m: Option<Map>) -> Res<Client> {
    let m = options(m, "connect", &["token", "tls_cert", "tls_key", "tls_ca"])?;
    let text = |name: &str| -> Res<Option<String>> {
        match m.get(name) {
            None => Ok(None),
            Some(v) => {
                let what = format!("a string for {name}");
                Ok(Some(v.clone().into_string().map_err(|_| wrong_type("connect", &what, v))?))
            }
        }
    };
    let files = TlsFiles {
        cert: text("tls_cert")?.map(Into::into),
        key: text("tls_key")?.map(Into::into),
        ca: text("tls_ca")?.map(Into::into),
    };
    let security =
        Security::from_flags(text("token")?, files).map_err(|e| runtime(format!("connect: {e}")))?;
    let client = RemoteClient::connect(address, security, state.config().fuse)
        .map_err(|e| runtime(format!("connect: cannot connect to {address}: {e}")))?;
    state.attach_cluster(Cluster { client: Arc::new(client), local: None, adaptive: None, deployed: None });
    Ok(Client { state: state.clone() })
}

fn scale(state: &SessionState, n: i64) -> Res<()> {
    if !(0..=256).contains(&n) {
        return Err(runtime(format!("scale: the number of workers must be between 0 and 256, got {n}")));
    }
    let n = n as usize;
    let outcome = state.with_cluster(|c| -> Res<()> {
        if let Some(d) = &c.deployed {
            return d.scale_jobs(d.jobs_for_workers(n)).map_err(|e| runtime(format!("scale: {e}")));
        }
        if let Some(m) = &c.adaptive {
            // As Dask: scaling by hand ends adaptive scaling.
            m.scale(n).map_err(|e| runtime(format!("scale: {e}")))?;
            return m.wait_for_workers(n, JOIN_TIMEOUT).map_err(|e| runtime(format!("scale: {e}")));
        }
        let Some(local) = c.local.as_ref() else {
            return Err(runtime("scale: this cluster was not started by the session (connect); start workers with `brisk worker`"));
        };
        let have = local.nworkers();
        if n > have {
            local.add_workers(n - have).map_err(|e| runtime(format!("scale: {e}")))?;
            c.client.wait_for_workers(n, JOIN_TIMEOUT).map_err(engine_error)?;
        } else if n < have {
            c.client.retire((have - n) as u32).map_err(engine_error)?;
        }
        Ok(())
    });
    outcome.unwrap_or_else(|| {
        Err(runtime("scale: the session has no cluster; start one with local_cluster(#{workers: N})"))
    })
}

/// `c.adapt(#{...})` on a local cluster: workers come and go with the work.
fn adapt(state: &SessionState, m: Map) -> Res<()> {
    let a = super::deploy::adapt_options(m, 1)?;
    let outcome = state.with_cluster(|c| -> Res<()> {
        if let Some(d) = &c.deployed {
            d.adapt(&a);
            return Ok(());
        }
        let Some(local) = c.local.clone() else {
            return Err(runtime("adapt: this cluster was not started by the session (connect); it can adapt only a local_cluster, slurm_cluster or jobqueue_cluster"));
        };
        if c.adaptive.is_none() {
            let token = local.options().token.clone();
            let rc = RemoteClient::connect(&local.address, Security { token, tls: None }, true)
                .map_err(|e| runtime(format!("adapt: cannot connect to the scheduler: {e}")))?;
            let provider = brisk_distributed::deploy::local::LocalProvider { cluster: local };
            c.adaptive = Some(Manager::start(Box::new(provider), Arc::new(rc), a.interval));
        }
        if let Some(m) = &c.adaptive {
            brisk_distributed::deploy::jobcluster::adapt(m, &a, 1);
        }
        Ok(())
    });
    outcome.unwrap_or_else(|| {
        Err(runtime("adapt: the session has no cluster; start one with local_cluster(#{workers: 0})"))
    })
}

fn restart(state: &SessionState) -> Res<()> {
    match state.with_cluster(|c| c.client.clone()) {
        Some(client) => client.restart().map_err(engine_error),
        None => {
            // The embedded runtime: a fresh one, as a restart of its one worker.
            state.restart_local();
            Ok(())
        }
    }
}
