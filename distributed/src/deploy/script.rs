//! The job script a batch system runs to start workers, as dask-jobqueue
//! writes it for the same parameters (its header lines, in its order), with
//! what its users learnt the hard way added: SLURM jobs never requeue
//! (`--no-requeue`: a requeued job came back later as a second worker of
//! the same name), always book one node, and workers leave before the
//! walltime (`--lifetime`, staggered) instead of being killed mid-task.

use std::time::Duration;

use super::System;
use super::timefmt;
use brisk_engine::exec::deadline;

/// What each job asks for and runs: dask-jobqueue's parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct JobOptions {
    /// Cores per job (`--cpus-per-task`); the worker threads share them.
    pub cores: u32,
    /// Memory per job, bytes (`--mem`); the workers' limits share it.
    pub memory: u64,
    /// Worker processes per job (default 1: a brisk worker has no GIL to
    /// work around, so one process uses every core).
    pub processes: u32,
    /// `None`: the system's default (00:30:00; LSF 00:30).
    pub walltime: Option<String>,
    pub queue: Option<String>,
    pub account: Option<String>,
    /// The job's name, and the prefix of its workers' names.
    pub job_name: String,
    /// Book these CPUs / this memory instead of `cores` / `memory`.
    pub job_cpu: Option<u32>,
    pub job_mem: Option<String>,
    /// PBS `-l` resource line (default `select=1:ncpus=C:mem=M`).
    pub resource_spec: Option<String>,
    /// LSF's unit for `-M` (kb, mb, gb…; default kb as dask-jobqueue).
    pub lsf_units: Option<String>,
    pub job_extra_directives: Vec<String>,
    /// Generated header lines containing any of these are left out.
    pub job_directives_skip: Vec<String>,
    /// Shell lines run before the worker (`module load`, `source venv`).
    pub job_script_prologue: Vec<String>,
    pub worker_extra_args: Vec<String>,
    /// The network interface workers serve data on and reach the
    /// scheduler by (`ib0`).
    pub interface: Option<String>,
    pub local_directory: Option<String>,
    pub log_directory: Option<String>,
    /// A worker that cannot reach its scheduler this long exits (so no job
    /// outlives a crashed session for long).
    pub death_timeout: Duration,
    /// When the worker leaves (`None`: from the walltime, see
    /// [`JobOptions::lifetime`]).
    pub lifetime: Option<Duration>,
    pub lifetime_stagger: Option<Duration>,
    pub nanny: bool,
    pub shebang: String,
    /// The `brisk` binary the job runs (must exist on the nodes).
    pub program: String,
}

impl JobOptions {
    pub fn new(cores: u32, memory: u64, program: impl Into<String>) -> JobOptions {
        JobOptions {
            cores,
            memory,
            processes: 1,
            walltime: None,
            queue: None,
            account: None,
            job_name: "brisk-worker".into(),
            job_cpu: None,
            job_mem: None,
            resource_spec: None,
            lsf_units: None,
            job_extra_directives: Vec::new(),
            job_directives_skip: Vec::new(),
            job_script_prologue: Vec::new(),
            worker_extra_args: Vec::new(),
            interface: None,
            local_directory: None,
            log_directory: None,
            death_timeout: Duration::from_secs(60),
            lifetime: None,
            lifetime_stagger: None,
            nanny: true,
            shebang: "#!/usr/bin/env bash".into(),
            program: program.into(),
        }
    }

    /// Threads of each worker process: the cores shared by the processes.
    pub fn threads_per_worker(&self) -> u32 {
        (self.cores / self.processes.max(1)).max(1)
    }

    /// The walltime as written in the script.
    pub fn walltime_text(&self, system: System) -> String {
        self.walltime.clone().unwrap_or_else(|| system.default_walltime().to_string())
    }

    /// How long a worker stays and by how much that is staggered: given,
    /// or 85% of the walltime ± 5%, so a worker leaves between 80% and 90%
    /// of it and has the rest to hand its results over (a 1-hour job's
    /// workers leave between minutes 48 and 54).
    pub fn lifetime(&self, system: System) -> Result<(Duration, Duration), String> {
        let wall = timefmt::parse_walltime(system, &self.walltime_text(system))?;
        let life = self.lifetime.unwrap_or_else(|| wall.mul_f64(0.85));
        let stagger = self
            .lifetime_stagger
            .unwrap_or_else(|| if self.lifetime.is_some() { Duration::ZERO } else { wall.mul_f64(0.05) });
        if life + stagger >= wall {
            return Err(format!(
                "lifetime {}s (± {}s) does not end before the walltime of {}s: the batch system would kill the worker before it leaves",
                life.as_secs(),
                stagger.as_secs(),
                wall.as_secs()
            ));
        }
        Ok((life, stagger))
    }

    /// Refuse what would break the script: a value with a line break would
    /// add lines of its own, and names go into file names and shell words.
    pub fn validate(&self, system: System) -> Result<(), String> {
        if self.cores == 0 {
            return Err("cores must be at least 1".into());
        }
        if self.processes == 0 || self.processes > self.cores {
            return Err(format!(
                "processes must be between 1 and cores ({}), got {}",
                self.cores, self.processes
            ));
        }
        if self.memory < u64::from(self.processes) << 20 {
            return Err("memory must be at least 1 MiB per process".into());
        }
        if self.job_name.is_empty()
            || !self
                .job_name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        {
            return Err(format!(
                "job_name {:?} may hold only letters, digits, '-', '_' and '.'",
                self.job_name
            ));
        }
        let singles = [
            ("walltime", self.walltime.as_deref()),
            ("queue", self.queue.as_deref()),
            ("account", self.account.as_deref()),
            ("job_mem", self.job_mem.as_deref()),
            ("resource_spec", self.resource_spec.as_deref()),
            ("lsf_units", self.lsf_units.as_deref()),
            ("interface", self.interface.as_deref()),
            ("local_directory", self.local_directory.as_deref()),
            ("log_directory", self.log_directory.as_deref()),
            ("shebang", Some(self.shebang.as_str())),
            ("program", Some(self.program.as_str())),
        ];
        let lists = [
            ("job_extra_directives", &self.job_extra_directives),
            ("job_directives_skip", &self.job_directives_skip),
            ("job_script_prologue", &self.job_script_prologue),
            ("worker_extra_args", &self.worker_extra_args),
        ];
        let all = singles
            .iter()
            .filter_map(|(n, v)| v.map(|v| (*n, v)))
            .chain(lists.iter().flat_map(|(n, l)| l.iter().map(move |v| (*n, v.as_str()))));
        for (name, v) in all {
            if v.contains(['\n', '\r', '\0']) {
                return Err(format!("{name} {v:?} holds a line break; give one line per entry"));
            }
        }
        if !self.shebang.starts_with("#!") {
            return Err(format!("shebang {:?} must start with #!", self.shebang));
        }
        if let Some(u) = &self.lsf_units
            && lsf_exponent(u).is_none()
        {
            return Err(format!("lsf_units {u:?} is not one of kb, mb, gb, tb, pb, eb, zb"));
        }
        self.lifetime(system).map(drop)
    }

    /// The header lines of `system`, before skips and extras.
    fn header(&self, system: System) -> Vec<String> {
        let name = &self.job_name;
        let mut h = Vec::new();
        match system {
            System::Slurm => {
                h.push(format!("#SBATCH -J {name}"));
                if let Some(d) = &self.log_directory {
                    h.push(format!("#SBATCH -e {d}/{name}-%J.err"));
                    h.push(format!("#SBATCH -o {d}/{name}-%J.out"));
                }
                if let Some(q) = &self.queue {
                    h.push(format!("#SBATCH -p {q}"));
                }
                if let Some(a) = &self.account {
                    h.push(format!("#SBATCH -A {a}"));
                }
                h.push("#SBATCH -n 1".into());
                h.push(format!("#SBATCH --cpus-per-task={}", self.job_cpu.unwrap_or(self.cores)));
                let mem = self.job_mem.clone().unwrap_or_else(|| slurm_bytes(self.memory));
                h.push(format!("#SBATCH --mem={mem}"));
                h.push(format!("#SBATCH -t {}", self.walltime_text(system)));
                // Beyond dask-jobqueue: one node, and no requeue.
                h.push("#SBATCH -N 1".into());
                h.push("#SBATCH --no-requeue".into());
            }
            System::Pbs => {
                h.push(format!("#PBS -N {name}"));
                if let Some(q) = &self.queue {
                    h.push(format!("#PBS -q {q}"));
                }
                if let Some(a) = &self.account {
                    h.push(format!("#PBS -A {a}"));
                }
                let spec = self.resource_spec.clone().unwrap_or_else(|| {
                    format!("select=1:ncpus={}:mem={}", self.cores, pbs_bytes(self.memory))
                });
                h.push(format!("#PBS -l {spec}"));
                h.push(format!("#PBS -l walltime={}", self.walltime_text(system)));
                if let Some(d) = &self.log_directory {
                    h.push(format!("#PBS -e {d}/"));
                    h.push(format!("#PBS -o {d}/"));
                }
            }
            System::Lsf => {
                h.push(format!("#BSUB -J {name}"));
                if let Some(d) = &self.log_directory {
                    h.push(format!("#BSUB -e {d}/{name}-%J.err"));
                    h.push(format!("#BSUB -o {d}/{name}-%J.out"));
                }
                if let Some(q) = &self.queue {
                    h.push(format!("#BSUB -q {q}"));
                }
                if let Some(a) = &self.account {
                    h.push(format!("#BSUB -P \"{a}\""));
                }
                let ncpus = self.job_cpu.unwrap_or(self.cores);
                h.push(format!("#BSUB -n {ncpus}"));
                if ncpus > 1 {
                    h.push("#BSUB -R \"span[hosts=1]\"".into());
                }
                let units = self.lsf_units.as_deref().unwrap_or("kb");
                let mem = self.job_mem.clone().unwrap_or_else(|| {
                    let e = lsf_exponent(units).unwrap_or(1);
                    (self.memory as f64 / 1000f64.powi(e)).ceil().to_string()
                });
                h.push(format!("#BSUB -M {mem}"));
                h.push(format!("#BSUB -W {}", self.walltime_text(system)));
            }
        }
        h
    }

    /// The worker command line; `scheduler` is the address workers join.
    fn command(&self, system: System, scheduler: &str) -> Result<String, String> {
        let (life, stagger) = self.lifetime(system)?;
        let mut args: Vec<String> = vec![
            quote(&self.program),
            "worker".into(),
            quote(scheduler),
            "--name".into(),
            // Expanded by the job's shell: the job's own id names its workers.
            format!("{}-{}", self.job_name, system.job_id_variable()),
            "--nthreads".into(),
            self.threads_per_worker().to_string(),
            "--memory-limit".into(),
            (self.memory / u64::from(self.processes)).to_string(),
        ];
        if self.processes > 1 {
            args.extend(["--nworkers".into(), self.processes.to_string()]);
        }
        if !self.nanny {
            args.push("--no-nanny".into());
        }
        args.extend(["--death-timeout".into(), deadline::fmt(self.death_timeout)]);
        if let Some(d) = &self.local_directory {
            args.extend(["--local-directory".into(), quote(d)]);
        }
        if let Some(i) = &self.interface {
            args.extend(["--interface".into(), quote(i)]);
        }
        if !self.worker_extra_args.iter().any(|a| a == "--lifetime" || a.starts_with("--lifetime=")) {
            args.extend(["--lifetime".into(), deadline::fmt(life)]);
            if !stagger.is_zero() {
                args.extend(["--lifetime-stagger".into(), deadline::fmt(stagger)]);
            }
        }
        args.extend(self.worker_extra_args.iter().map(|a| quote(a)));
        Ok(args.join(" "))
    }

    /// The whole script, laid out as dask-jobqueue's template: shebang, a
    /// blank line, the header, the prologue, the worker command.
    pub fn script(&self, system: System, scheduler: &str) -> Result<String, String> {
        self.validate(system)?;
        let mut header: Vec<String> = self
            .header(system)
            .into_iter()
            .filter(|l| !self.job_directives_skip.iter().any(|s| !s.is_empty() && l.contains(s.as_str())))
            .collect();
        header.extend(self.job_extra_directives.iter().map(|d| format!("{} {d}", system.directive())));
        let command = self.command(system, scheduler)?;
        Ok(format!(
            "{}\n\n{}\n{}\n{}\n",
            self.shebang,
            header.join("\n"),
            self.job_script_prologue.join("\n"),
            command
        ))
    }
}

/// SLURM's `--mem`: rounded up to K, M or G (which SLURM means as KiB…).
pub fn slurm_bytes(n: u64) -> String {
    let up = |unit: u64| n.div_ceil(unit);
    if n >= 1 << 30 {
        format!("{}G", up(1 << 30))
    } else if n >= 1 << 20 {
        format!("{}M", up(1 << 20))
    } else {
        format!("{}K", up(1 << 10).max(1))
    }
}

/// PBS's `mem=`, as dask-jobqueue's `pbs_format_bytes_ceil`.
pub fn pbs_bytes(n: u64) -> String {
    let up = |unit: u64| n.div_ceil(unit);
    if n >= 10 << 30 {
        format!("{}GB", up(1 << 30))
    } else if n >= 10 << 20 {
        format!("{}MB", up(1 << 20))
    } else if n >= 10 << 10 {
        format!("{}kB", up(1 << 10))
    } else {
        format!("{n}B")
    }
}

fn lsf_exponent(units: &str) -> Option<i32> {
    let e = match units.trim().to_ascii_lowercase().chars().next()? {
        'k' => 1,
        'm' => 2,
        'g' => 3,
        't' => 4,
        'p' => 5,
        'e' => 6,
        'z' => 7,
        _ => return None,
    };
    Some(e)
}

/// One shell word: left alone when plain, else single-quoted.
pub fn quote(s: &str) -> String {
    let plain = !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"_@%+=:,./-".contains(&b));
    if plain { s.to_string() } else { format!("'{}'", s.replace('\'', "'\\''")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> JobOptions {
        let mut o = JobOptions::new(8, 28_000_000_000, "/opt/brisk");
        o.walltime = Some("01:00:00".into());
        o
    }

    #[test]
    fn a_slurm_script_books_what_the_worker_uses() {
        let mut o = opts();
        o.queue = Some("regular".into());
        o.account = Some("proj42".into());
        o.log_directory = Some("logs".into());
        o.job_script_prologue = vec!["module load cuda/12".into()];
        o.job_extra_directives = vec!["--gres=gpu:1".into()];
        let s = o.script(System::Slurm, "tcp://10.0.0.1:8786").unwrap_or_default();
        let expected = "#!/usr/bin/env bash

#SBATCH -J brisk-worker
#SBATCH -e logs/brisk-worker-%J.err
#SBATCH -o logs/brisk-worker-%J.out
#SBATCH -p regular
#SBATCH -A proj42
#SBATCH -n 1
#SBATCH --cpus-per-task=8
#SBATCH --mem=27G
#SBATCH -t 01:00:00
#SBATCH -N 1
#SBATCH --no-requeue
#SBATCH --gres=gpu:1
module load cuda/12
/opt/brisk worker tcp://10.0.0.1:8786 --name brisk-worker-$SLURM_JOB_ID --nthreads 8 --memory-limit 28000000000 --death-timeout 60s --lifetime 3060s --lifetime-stagger 180s
";
        assert_eq!(s, expected);
    }

    #[test]
    fn skipped_directives_and_processes_change_the_script() {
        let mut o = opts();
        o.processes = 4;
        o.job_directives_skip = vec!["--mem".into(), "--no-requeue".into()];
        o.worker_extra_args = vec!["--lifetime".into(), "10m".into(), "--resources".into(), "GPU=1".into()];
        o.interface = Some("ib0".into());
        let s = o.script(System::Slurm, "tcp://h:1").unwrap_or_default();
        assert!(!s.contains("--mem="), "{s}");
        assert!(!s.contains("--no-requeue"), "{s}");
        assert!(s.contains("--nthreads 2 --memory-limit 7000000000 --nworkers 4"), "{s}");
        assert!(s.contains("--interface ib0 --lifetime 10m --resources GPU=1\n"), "{s}");
    }

    #[test]
    fn bad_options_are_refused_with_their_name() {
        let mut o = opts();
        o.queue = Some("a\n#SBATCH --exclusive".into());
        assert!(o.script(System::Slurm, "tcp://h:1").is_err_and(|e| e.contains("queue")));
        let mut o = opts();
        o.job_name = "my job".into();
        assert!(o.validate(System::Slurm).is_err_and(|e| e.contains("job_name")));
        let mut o = opts();
        o.processes = 9;
        assert!(o.validate(System::Slurm).is_err_and(|e| e.contains("processes")));
        let mut o = opts();
        o.lifetime = Some(Duration::from_secs(3600));
        assert!(o.validate(System::Slurm).is_err_and(|e| e.contains("before the walltime")));
        let mut o = opts();
        o.walltime = Some("soon".into());
        assert!(o.validate(System::Slurm).is_err_and(|e| e.contains("walltime")));
    }

    #[test]
    fn sizes_round_up_as_dask_jobqueue_does() {
        assert_eq!(slurm_bytes(28_000_000_000), "27G");
        assert_eq!(slurm_bytes(1234), "2K");
        assert_eq!(slurm_bytes(12_345_678), "12M");
        assert_eq!(pbs_bytes(15_000_000_000), "14GB");
        assert_eq!(pbs_bytes(1_234_567_890), "1178MB");
        assert_eq!(pbs_bytes(1234), "1234B");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), "'it'\\''s'");
        assert_eq!(quote("tcp://h:1"), "tcp://h:1");
    }
}
