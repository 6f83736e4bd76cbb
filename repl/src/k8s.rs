//! `brisk k8s crd`, `brisk k8s manifests ...` and `brisk operator`: brisk
//! on Kubernetes (the `brisk_k8s` crate does the work).

use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum K8sAction {
    /// Print the BriskCluster CustomResourceDefinition (`| kubectl apply -f -`).
    Crd,
    /// Print a cluster's objects for `kubectl apply -f -` without the
    /// operator: the token Secret, the scheduler Deployment and Service,
    /// and a Deployment of workers.
    Manifests(ManifestArgs),
    /// Print the CRD and what `brisk operator` needs to run in the cluster
    /// (service account, cluster role and binding, a Deployment).
    Operator {
        /// The image with the brisk binary.
        #[arg(long)]
        image: String,
        /// Where the operator runs (the namespace must exist).
        #[arg(long, default_value = "brisk-system")]
        namespace: String,
    },
}

#[derive(clap::Args)]
pub struct ManifestArgs {
    /// The cluster's name (objects are NAME-scheduler, NAME-default-worker, NAME-token).
    #[arg(long)]
    name: String,
    /// The image with the brisk binary (the repository's Dockerfile builds one).
    #[arg(long)]
    image: String,
    /// How many workers.
    #[arg(long, default_value_t = 1)]
    workers: u32,
    /// GPUs per worker (nvidia.com/gpu limits; the worker offers GPU=N).
    #[arg(long, default_value_t = 0)]
    gpus_per_worker: u32,
    /// CPUs per worker ("4", "500m"): the CPU limit and the worker's threads.
    #[arg(long)]
    cpu: Option<String>,
    /// Memory per worker ("16Gi"): the memory limit and the worker's.
    #[arg(long)]
    memory: Option<String>,
    #[arg(long, default_value = "default")]
    namespace: String,
}

#[derive(clap::Args)]
pub struct OperatorArgs {
    /// Watch this namespace only (default: every namespace).
    #[arg(long)]
    namespace: Option<String>,
}

pub fn k8s(action: K8sAction) -> anyhow::Result<ExitCode> {
    let out = match action {
        K8sAction::Crd => brisk_k8s::print::crd_yaml()?,
        K8sAction::Operator { image, namespace } => brisk_k8s::print::operator_yaml(&image, &namespace)?,
        K8sAction::Manifests(a) => {
            if a.workers > i32::MAX as u32 {
                anyhow::bail!("--workers {} is too many", a.workers);
            }
            for (flag, q) in [("--cpu", &a.cpu), ("--memory", &a.memory)] {
                if let Some(q) = q {
                    brisk_k8s::quantity::value(&q.as_str().into())
                        .map_err(|e| anyhow::anyhow!("{flag}: {e}"))?;
                }
            }
            brisk_k8s::print::manifests_yaml(&brisk_k8s::print::ManifestOptions {
                name: a.name,
                namespace: a.namespace,
                image: a.image,
                workers: a.workers as i32,
                gpus_per_worker: a.gpus_per_worker,
                cpu: a.cpu,
                memory: a.memory,
                token: brisk_k8s::names::random_hex(16)?,
            })?
        }
    };
    print!("{out}");
    Ok(ExitCode::SUCCESS)
}

pub fn operator(args: OperatorArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(async {
        let (client, _) = brisk_k8s::session::connect().await?;
        brisk_k8s::operator::run(client, brisk_k8s::operator::Options { namespace: args.namespace }).await?;
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(ExitCode::SUCCESS)
}
