//! `brisk jobqueue slurm|pbs|lsf ...`: the job script dask-jobqueue's
//! clusters would submit for these options (`--print-script`), or `--jobs
//! N` of them submitted to a running scheduler.

use std::process::ExitCode;

use brisk_distributed::deploy::System;
use brisk_distributed::deploy::batch::{Batch, Commands};
use brisk_distributed::deploy::script::JobOptions;
use brisk_engine::exec::deadline::parse_duration;

#[derive(clap::Args)]
pub struct JobqueueArgs {
    /// The batch system: slurm, pbs or lsf.
    system: String,
    /// Cores per job.
    #[arg(long)]
    cores: u32,
    /// Memory per job ("32GiB", "28GB").
    #[arg(long)]
    memory: String,
    /// Worker processes per job (default 1).
    #[arg(long, default_value_t = 1)]
    processes: u32,
    #[arg(long)]
    walltime: Option<String>,
    #[arg(long)]
    queue: Option<String>,
    #[arg(long)]
    account: Option<String>,
    #[arg(long, default_value = "brisk-worker")]
    job_name: String,
    #[arg(long)]
    job_cpu: Option<u32>,
    #[arg(long)]
    job_mem: Option<String>,
    /// PBS: the -l resource line.
    #[arg(long)]
    resource_spec: Option<String>,
    /// LSF: the unit of -M (kb, mb, gb…).
    #[arg(long)]
    lsf_units: Option<String>,
    /// A header option added as is (repeat for more): "--gres=gpu:1".
    #[arg(long = "job-extra-directive", value_name = "DIRECTIVE", allow_hyphen_values = true)]
    job_extra_directives: Vec<String>,
    /// Leave out the generated header lines containing this (repeat for more).
    #[arg(long = "job-directive-skip", value_name = "TEXT", allow_hyphen_values = true)]
    job_directives_skip: Vec<String>,
    /// A shell line run before the worker (repeat for more).
    #[arg(long = "job-script-prologue", value_name = "LINE", allow_hyphen_values = true)]
    job_script_prologue: Vec<String>,
    /// An argument added to the worker's command line (repeat for more).
    #[arg(long = "worker-extra-arg", value_name = "ARG", allow_hyphen_values = true)]
    worker_extra_args: Vec<String>,
    #[arg(long)]
    interface: Option<String>,
    #[arg(long)]
    local_directory: Option<String>,
    #[arg(long)]
    log_directory: Option<String>,
    #[arg(long, default_value = "60s")]
    death_timeout: String,
    #[arg(long)]
    lifetime: Option<String>,
    #[arg(long)]
    lifetime_stagger: Option<String>,
    #[arg(long)]
    no_nanny: bool,
    /// The scheduler the workers join (the address in the script).
    #[arg(long, default_value = "tcp://SCHEDULER:8786")]
    scheduler: String,
    /// Print the job script and submit nothing.
    #[arg(long)]
    print_script: bool,
    /// Submit this many jobs to the batch system (the token, if any, from
    /// BRISK_TOKEN, goes in their environment).
    #[arg(long)]
    jobs: Option<usize>,
}

pub fn run(a: JobqueueArgs) -> anyhow::Result<ExitCode> {
    let system = System::parse(&a.system).map_err(anyhow::Error::msg)?;
    let memory = brisk_engine::memory::parse_size(&a.memory).map_err(|e| anyhow::anyhow!("--memory: {e}"))?;
    let program = std::env::current_exe()?.display().to_string();
    let mut o = JobOptions::new(a.cores, memory, program);
    let dur = |flag: &str, v: &str| parse_duration(v).map_err(|e| anyhow::anyhow!("--{flag}: {e}"));
    o.processes = a.processes;
    o.walltime = a.walltime;
    o.queue = a.queue;
    o.account = a.account;
    o.job_name = a.job_name;
    o.job_cpu = a.job_cpu;
    o.job_mem = a.job_mem;
    o.resource_spec = a.resource_spec;
    o.lsf_units = a.lsf_units;
    o.job_extra_directives = a.job_extra_directives;
    o.job_directives_skip = a.job_directives_skip;
    o.job_script_prologue = a.job_script_prologue;
    o.worker_extra_args = a.worker_extra_args;
    o.interface = a.interface;
    o.local_directory = a.local_directory;
    o.log_directory = a.log_directory;
    o.death_timeout = dur("death-timeout", &a.death_timeout)?;
    o.lifetime = a.lifetime.as_deref().map(|v| dur("lifetime", v)).transpose()?;
    o.lifetime_stagger = a.lifetime_stagger.as_deref().map(|v| dur("lifetime-stagger", v)).transpose()?;
    o.nanny = !a.no_nanny;
    let script = o.script(system, &a.scheduler).map_err(anyhow::Error::msg)?;
    if a.print_script || a.jobs.is_none() {
        print!("{script}");
        return Ok(ExitCode::SUCCESS);
    }
    anyhow::ensure!(
        a.scheduler != "tcp://SCHEDULER:8786",
        "--jobs needs --scheduler tcp://HOST:PORT (the scheduler the workers join)"
    );
    let batch = Commands::new(system);
    let env: Vec<(String, String)> =
        std::env::var("BRISK_TOKEN").ok().map(|t| vec![("BRISK_TOKEN".to_string(), t)]).unwrap_or_default();
    for _ in 0..a.jobs.unwrap_or(0) {
        let id = batch.submit(&script, &env)?;
        println!("{id}");
    }
    Ok(ExitCode::SUCCESS)
}
