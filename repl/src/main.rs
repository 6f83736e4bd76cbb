//! `brisk`: the one binary. With no arguments it opens the REPL (or runs
//! piped stdin as one script); `brisk run FILE` runs a script headless on
//! the embedded local scheduler.

mod dash;
mod highlight;
mod interactive;
mod jobqueue;
mod k8s;
mod nanny;
mod serve;
mod source;
mod terminal;
mod typeahead;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use brisk_script::{ErrorKind, ScriptError, Session};
use clap::{Parser, Subcommand};
use terminal::{colour_on, interrupt_on_ctrl_c};

#[derive(Parser)]
#[command(
    name = "brisk",
    version,
    about = "Dask rebuilt in Rust, driven by Rhai: lazy task graphs on every core"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// The Jupyter kernel: `install`, `uninstall`, or run it on a connection file.
    Kernel {
        #[command(subcommand)]
        action: Option<KernelAction>,
        /// Run the kernel on this connection file (what Jupyter starts).
        #[arg(long)]
        connection_file: Option<PathBuf>,
    },
    /// Start a scheduler that workers and clients connect to.
    Scheduler(serve::SchedulerArgs),
    /// Start a worker that joins the scheduler at tcp://HOST:PORT.
    Worker(serve::WorkerArgs),
    /// Start one worker per GPU that join the scheduler at tcp://HOST:PORT
    /// (dask-cuda's `dask cuda worker`): each sees only its GPU, offers
    /// GPU=1 and keeps its GPU results under a device memory limit.
    ///
    /// Every `brisk worker` flag applies to each worker; here --nthreads
    /// defaults to 1, --memory-limit "auto" to the machine's memory over
    /// the GPUs, and --device-memory-limit to 0.8.
    CudaWorker(serve::CudaWorkerArgs),
    /// The job script for a batch system (slurm, pbs, lsf), as
    /// dask-jobqueue writes it (--print-script), or --jobs N of them submitted.
    Jobqueue(jobqueue::JobqueueArgs),
    /// Kubernetes: the BriskCluster definition (`crd`) or a cluster's
    /// objects for kubectl (`manifests`).
    K8s {
        #[command(subcommand)]
        action: k8s::K8sAction,
    },
    /// Run the Kubernetes operator that makes BriskClusters real.
    Operator(k8s::OperatorArgs),
    /// The full-screen dashboard of a running scheduler: its workers and the
    /// work of every client (q leaves).
    Top(serve::TopArgs),
    /// Run a Rhai script on the embedded local scheduler.
    Run {
        /// The script to run (`.rhai`).
        file: PathBuf,
        /// Never draw the live panel, even on a terminal.
        #[arg(long)]
        no_progress: bool,
    },
}

#[derive(Subcommand)]
enum KernelAction {
    /// Register brisk with Jupyter (`jupyter kernelspec list` then shows it).
    Install(Where),
    /// Remove the registration.
    Uninstall(Where),
}

/// Where the kernelspec goes, as `jupyter kernelspec install`'s options.
#[derive(clap::Args)]
struct Where {
    /// The user's Jupyter data directory (the default).
    #[arg(long, conflicts_with_all = ["sys_prefix", "prefix"])]
    user: bool,
    /// The active Python environment's (VIRTUAL_ENV or CONDA_PREFIX).
    #[arg(long, conflicts_with = "prefix")]
    sys_prefix: bool,
    /// DIR/share/jupyter.
    #[arg(long, value_name = "DIR")]
    prefix: Option<PathBuf>,
}

impl Where {
    fn target(&self) -> brisk_kernel::install::Target {
        use brisk_kernel::install::Target;
        match (&self.prefix, self.sys_prefix) {
            (Some(p), _) => Target::Prefix(p.clone()),
            (None, true) => Target::SysPrefix,
            _ => Target::User,
        }
    }
}

fn kernel(action: Option<KernelAction>, connection_file: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    use brisk_kernel::install;
    match (action, connection_file) {
        (Some(KernelAction::Install(w)), _) => {
            let dir = install::install(&w.target())?;
            println!("installed the brisk kernel in {}", dir.display());
        }
        (Some(KernelAction::Uninstall(w)), _) => {
            let dir = install::uninstall(&w.target())?;
            println!("removed {}", dir.display());
        }
        (None, Some(f)) => brisk_kernel::run(&f)?,
        (None, None) => anyhow::bail!("brisk kernel needs install, uninstall or --connection-file FILE"),
    }
    Ok(ExitCode::SUCCESS)
}

/// mimalloc keeps freed blocks for reuse: array tasks allocate and free
/// chunks of tens of MiB, and the system allocator returns those to the
/// kernel each time, so every new chunk paid for fresh page faults.
/// `Counting` keeps the live heap's size, which the memory budget reads.
#[global_allocator]
static ALLOC: brisk_engine::memory::Counting<mimalloc::MiMalloc> =
    brisk_engine::memory::Counting(mimalloc::MiMalloc);

/// Hand the blocks mimalloc keeps after a free back to the system: a
/// worker measuring itself against its memory limit would otherwise count
/// up to a second of freed results as used.
#[allow(unsafe_code)]
fn release_free_memory() {
    // SAFETY: `mi_collect` takes no pointers; it walks mimalloc's own
    // structures and may be called from any thread at any time.
    unsafe { libmimalloc_sys::mi_collect(true) }
}

fn main() -> ExitCode {
    brisk_engine::memory::start_counting();
    brisk_engine::memory::set_release(release_free_memory);
    report_panics_once();
    match std::panic::catch_unwind(brisk) {
        Ok(code) => code,
        Err(panic) => {
            eprintln!("error: {}", ScriptError::internal(&*panic, "brisk"));
            ExitCode::from(INTERNAL)
        }
    }
}

/// The exit code of a bug in brisk (EX_SOFTWARE, as sysexits.h).
const INTERNAL: u8 = 70;

fn brisk() -> ExitCode {
    brisk_script::ship::init();
    // Shuffle pieces left by graphs that failed half-way go when brisk ends.
    let _pieces = brisk_engine::pieces::Cleanup::start();
    let cli = Cli::parse();
    if let Ok(me) = std::env::current_exe() {
        brisk_distributed::cluster::set_program(me);
    }
    // The servers and the operator handle SIGTERM themselves.
    if !matches!(
        cli.command,
        Some(Command::Scheduler(_) | Command::Worker(_) | Command::CudaWorker(_) | Command::Operator(_))
    ) {
        terminal::clean_up_on_termination();
    }
    let result = match cli.command {
        Some(Command::Scheduler(args)) => serve::scheduler(args),
        Some(Command::Worker(args)) => serve::worker(args),
        Some(Command::CudaWorker(args)) => serve::cuda_worker(args),
        Some(Command::Jobqueue(args)) => jobqueue::run(args),
        Some(Command::Top(args)) => top(args),
        Some(Command::K8s { action }) => k8s::k8s(action),
        Some(Command::Operator(args)) => k8s::operator(args),
        Some(Command::Run { file, no_progress }) => run_file(&file, !no_progress),
        Some(Command::Kernel { action, connection_file }) => kernel(action, connection_file),
        None => repl(),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// A panic is a bug in brisk. Where it is caught (an input, a cell, a task)
/// it becomes one error message, so the default hook's lines on stderr
/// would report it twice; elsewhere one line says what happened.
/// `RUST_BACKTRACE` brings back the default report, for debugging.
fn report_panics_once() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        brisk_script::error::remember_panic(info);
        if std::env::var_os("RUST_BACKTRACE").is_some() {
            return default(info);
        }
        let thread = std::thread::current();
        let name = thread.name().unwrap_or("unnamed");
        let caught = name == "main"
            || name.starts_with("brisk-worker")
            || name.starts_with("brisk-task")
            || name == "brisk-kernel-session";
        if !caught {
            eprintln!("brisk: internal error in thread {name}: {info} (this is a bug in brisk)");
        }
    }));
}

/// `brisk top ADDR`: `:dash` on a session joined to that scheduler, with
/// no work of its own.
fn top(args: serve::TopArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(std::io::stdout().is_terminal(), "brisk top draws on a terminal; stdout is not one");
    let session = Session::new();
    let security = args.tls.security(args.token)?;
    session.connect(&args.address, security).map_err(anyhow::Error::msg)?;
    let colour = colour_on(&std::io::stdout());
    dash::full::show(session.state().clone(), brisk_engine::CancelToken::new(), colour, || ())?;
    Ok(ExitCode::SUCCESS)
}

fn run_file(path: &std::path::Path, progress: bool) -> anyhow::Result<ExitCode> {
    let text = source::read_file(path)?;
    let mut session = Session::new();
    session.connect_from_env().map_err(anyhow::Error::msg)?;
    session.set_output(std::sync::Arc::new(dash::inline::print_line));
    interrupt_on_ctrl_c(&session, true);
    let bar = (progress && std::io::stderr().is_terminal())
        .then(|| dash::inline::Panel::start(session.state().clone(), colour_on(&std::io::stderr())));
    let result = session.eval(&text, &path.display().to_string());
    drop(bar);
    Ok(report(result))
}

/// The REPL on a terminal; the whole of stdin as one script when it is
/// piped (`echo '...' | brisk`), without prompts or colours.
fn repl() -> anyhow::Result<ExitCode> {
    let mut session = Session::new();
    session.connect_from_env().map_err(anyhow::Error::msg)?;
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        let text = source::read_stdin()?;
        interrupt_on_ctrl_c(&session, true);
        let result = session.eval(&text, "<stdin>");
        return Ok(report(result));
    }
    interactive::run(session)
}

/// Print an error once, clearly; the exit code tells what kind it was.
fn report(result: Result<brisk_script::Outcome, brisk_script::ScriptError>) -> ExitCode {
    match result {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            match e.kind {
                ErrorKind::Cancelled => ExitCode::from(130),
                ErrorKind::Internal => ExitCode::from(INTERNAL),
                _ => ExitCode::FAILURE,
            }
        }
    }
}
