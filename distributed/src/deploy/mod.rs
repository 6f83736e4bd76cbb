//! Deploying workers through the cluster managers sites already run:
//! batch systems (`script` writes the job script dask-jobqueue would,
//! `batch` submits, watches and cancels jobs), adaptive scaling
//! (`adaptive`: pure decisions over a snapshot of the scheduler) and the
//! manager that ties them to a scheduler (`manager`), for batch jobs
//! (`jobcluster`) and a local cluster's processes (`local`).

pub mod adaptive;
pub mod batch;
pub mod jobcluster;
pub mod local;
pub mod manager;
pub mod script;
pub mod timefmt;

/// A batch system brisk writes job scripts for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum System {
    Slurm,
    Pbs,
    Lsf,
}

impl System {
    pub fn parse(name: &str) -> Result<System, String> {
        match name.trim().to_ascii_lowercase().as_str() {
            "slurm" => Ok(System::Slurm),
            "pbs" => Ok(System::Pbs),
            "lsf" => Ok(System::Lsf),
            _ => Err(format!("{name:?} is not a batch system brisk knows (slurm, pbs, lsf)")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            System::Slurm => "slurm",
            System::Pbs => "pbs",
            System::Lsf => "lsf",
        }
    }

    /// The prefix of a header line.
    pub fn directive(self) -> &'static str {
        match self {
            System::Slurm => "#SBATCH",
            System::Pbs => "#PBS",
            System::Lsf => "#BSUB",
        }
    }

    /// dask-jobqueue's default walltime.
    pub fn default_walltime(self) -> &'static str {
        match self {
            System::Slurm | System::Pbs => "00:30:00",
            System::Lsf => "00:30",
        }
    }

    pub(crate) fn walltime_help(self) -> &'static str {
        match self {
            System::Slurm => "MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS",
            System::Pbs => "HH:MM:SS",
            System::Lsf => "[HH:]MM",
        }
    }

    /// The shell variable holding the job's id inside the job.
    pub fn job_id_variable(self) -> &'static str {
        match self {
            System::Slurm => "$SLURM_JOB_ID",
            System::Pbs => "$PBS_JOBID",
            System::Lsf => "$LSB_JOBID",
        }
    }
}

/// The IPv4 address of the network interface `name` (`ib0`, `eth0`).
pub fn interface_address(name: &str) -> Result<String, String> {
    let addrs: Vec<nix::ifaddrs::InterfaceAddress> =
        nix::ifaddrs::getifaddrs().map_err(|e| format!("cannot list the network interfaces: {e}"))?.collect();
    let ipv4 = addrs
        .iter()
        .filter(|a| a.interface_name == name)
        .find_map(|a| a.address.as_ref()?.as_sockaddr_in().map(|s| s.ip().to_string()));
    if let Some(ip) = ipv4 {
        return Ok(ip);
    }
    let mut names: Vec<&str> = addrs.iter().map(|a| a.interface_name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    if names.contains(&name) {
        return Err(format!("interface {name} has no IPv4 address"));
    }
    Err(format!("there is no network interface {name} here (there are: {})", names.join(", ")))
}

/// This machine's address on the interface its traffic leaves by (no
/// packet is sent: a UDP socket is only pointed at a public address), or
/// 127.0.0.1 when it has no route out.
pub fn outward_address() -> String {
    let probe = || -> std::io::Result<String> {
        let s = std::net::UdpSocket::bind("0.0.0.0:0")?;
        s.connect("192.0.2.1:9")?;
        Ok(s.local_addr()?.ip().to_string())
    };
    probe().ok().filter(|ip| ip != "0.0.0.0").unwrap_or_else(|| "127.0.0.1".into())
}

/// A fresh secret for a cluster: 128 bits from the system's random source.
pub fn new_token() -> Option<String> {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes)).ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
