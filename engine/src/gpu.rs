//! GPU discovery at run time. brisk is one binary for machines with and
//! without GPUs: the NVIDIA management library is opened when first asked
//! for (`dlopen`, through `nvml-wrapper`), and a machine without a GPU or a
//! driver is a plain "no GPU" state, never an error the user sees as a
//! failure and never a panic.

use std::sync::OnceLock;

use nvml_wrapper::Nvml;

/// One device, as the dashboard shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuInfo {
    pub index: u32,
    pub name: String,
    pub memory_used: u64,
    pub memory_total: u64,
    /// What this process's own buffers hold on the device (its memory
    /// pool's live bytes), when it has opened the device.
    pub brisk_used: Option<u64>,
}

/// What the machine has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Gpus {
    /// The devices, with their memory now.
    Devices(Vec<GpuInfo>),
    /// No usable GPU, and why (no driver library, no device).
    None(String),
}

/// The management library, opened once per process.
fn nvml() -> Result<&'static Nvml, String> {
    static NVML: OnceLock<Result<Nvml, String>> = OnceLock::new();
    NVML.get_or_init(|| {
        // A broken driver install must not take the process down.
        match std::panic::catch_unwind(Nvml::init) {
            Ok(Ok(n)) => Ok(n),
            Ok(Err(e)) => Err(format!("no NVIDIA driver ({e})")),
            Err(_) => Err("the NVIDIA management library failed to load".into()),
        }
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// The GPUs of this machine and their memory in use, now.
pub fn probe() -> Gpus {
    let nvml = match nvml() {
        Ok(n) => n,
        Err(why) => return Gpus::None(why),
    };
    let count = match nvml.device_count() {
        Ok(0) => return Gpus::None("no GPU device".into()),
        Ok(n) => n,
        Err(e) => return Gpus::None(format!("cannot list GPUs ({e})")),
    };
    let devices = (0..count)
        .filter_map(|index| {
            let d = nvml.device_by_index(index).ok()?;
            let name = d.name().unwrap_or_else(|_| format!("GPU {index}"));
            let mem = d.memory_info().ok()?;
            let brisk_used = d.uuid().ok().and_then(|uuid| {
                brisk_gpu::opened()?.devices().iter().find(|x| x.uuid() == uuid).map(|x| x.used_by_brisk())
            });
            Some(GpuInfo { index, name, memory_used: mem.used, memory_total: mem.total, brisk_used })
        })
        .collect::<Vec<_>>();
    if devices.is_empty() { Gpus::None("no readable GPU device".into()) } else { Gpus::Devices(devices) }
}

/// The devices this process computes on, with its own use of each
/// (empty until something ran on a GPU): what a progress display shows.
pub fn in_use() -> Vec<GpuInfo> {
    if brisk_gpu::opened().is_none() {
        return Vec::new();
    }
    match probe() {
        Gpus::Devices(d) => d.into_iter().filter(|g| g.brisk_used.is_some()).collect(),
        Gpus::None(_) => Vec::new(),
    }
}

/// Every device in one line (`c.workers()`'s `gpu`): each as `describe`
/// writes it, or `no GPU`.
pub fn summary() -> String {
    match probe() {
        Gpus::Devices(d) => d.iter().map(describe).collect::<Vec<_>>().join("; "),
        Gpus::None(_) => "no GPU".into(),
    }
}

/// One line for a device: `GPU 0 NAME: brisk X, Y / Z in use`.
pub fn describe(g: &GpuInfo) -> String {
    let own = g.brisk_used.map(|b| format!("brisk {}, ", crate::memory::fmt_bytes(b))).unwrap_or_default();
    format!(
        "GPU {} {}: {own}{} / {} in use",
        g.index,
        g.name,
        crate::memory::fmt_bytes(g.memory_used),
        crate::memory::fmt_bytes(g.memory_total)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On any machine: a list of sane devices or a reason, never a panic.
    /// With `BRISK_REQUIRE_GPU` set (scripts/gpu-tests.sh), devices must be found.
    #[test]
    fn probing_never_fails() {
        let found = probe();
        eprintln!("gpu probe: {found:?}");
        if std::env::var_os("BRISK_REQUIRE_GPU").is_some() {
            assert!(matches!(found, Gpus::Devices(_)), "a GPU was required: {found:?}");
        }
        match found {
            Gpus::Devices(d) => {
                assert!(d.iter().all(|g| g.memory_total > 0 && g.memory_used <= g.memory_total), "{d:?}")
            }
            Gpus::None(why) => assert!(!why.is_empty()),
        }
        // Twice: the library handle is cached, the answer stays the same kind.
        assert_eq!(matches!(probe(), Gpus::None(_)), matches!(probe(), Gpus::None(_)));
    }
}
