//! One worker per GPU (dask-cuda's `LocalCUDACluster` and `dask cuda
//! worker`): which devices get a worker. Each worker process is started
//! with `CUDA_VISIBLE_DEVICES` set to its one device, so it sees that GPU
//! alone, as device 0.

/// Why no CUDA worker can start.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CudaError {
    #[error("no GPU: {0}")]
    NoGpu(String),
    #[error("{0}")]
    Devices(String),
}

/// The devices to start one worker each on, as `CUDA_VISIBLE_DEVICES`
/// names them (an index or a `GPU-…`/`MIG-…` UUID): those `requested`,
/// else those `CUDA_VISIBLE_DEVICES` lists, else every GPU of the machine.
pub fn visible_devices(requested: Option<Vec<String>>) -> Result<Vec<String>, CudaError> {
    let env = std::env::var("CUDA_VISIBLE_DEVICES").ok();
    let machine = match brisk_engine::gpu::probe() {
        brisk_engine::gpu::Gpus::Devices(d) => Ok(d.len()),
        brisk_engine::gpu::Gpus::None(why) => Err(why),
    };
    pick(requested, env.as_deref(), machine)
}

/// [`visible_devices`] given what it reads: the environment's list and
/// the machine's device count (or why it has none).
fn pick(
    requested: Option<Vec<String>>,
    env: Option<&str>,
    machine: Result<usize, String>,
) -> Result<Vec<String>, CudaError> {
    let count = machine.map_err(CudaError::NoGpu)?;
    let (list, from) = match (requested, env) {
        (Some(r), _) => (r, "devices"),
        (None, Some(e)) => (e.split(',').map(str::to_string).collect(), "CUDA_VISIBLE_DEVICES"),
        (None, None) => return Ok((0..count).map(|i| i.to_string()).collect()),
    };
    let list: Vec<String> = list.iter().map(|d| d.trim().to_string()).filter(|d| !d.is_empty()).collect();
    if list.is_empty() || list.first().is_some_and(|d| d.starts_with('-')) {
        return Err(CudaError::NoGpu(format!("{from} names no device")));
    }
    let mut seen = std::collections::BTreeSet::new();
    for d in &list {
        if let Ok(i) = d.parse::<usize>() {
            if i >= count {
                return Err(CudaError::Devices(format!(
                    "{from}: there is no GPU {i}; this machine has {count} (0 to {})",
                    count - 1
                )));
            }
        } else if !(d.starts_with("GPU-") || d.starts_with("MIG-")) {
            return Err(CudaError::Devices(format!(
                "{from}: {d:?} is neither a device index nor a GPU-/MIG- UUID"
            )));
        }
        if !seen.insert(d.clone()) {
            return Err(CudaError::Devices(format!("{from}: device {d} is named twice")));
        }
    }
    Ok(list)
}

/// This machine's identity for CUDA IPC: the kernel's boot id (the same
/// for every process of this boot, new after a restart), else the host
/// name. Two CUDA workers with the same id try device-to-device transfers
/// and fall back to host copies where the driver refuses.
pub fn host_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown-host".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(xs: &[&str]) -> Vec<String> {
        xs.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn devices_come_from_the_request_the_environment_or_the_machine() {
        assert_eq!(pick(None, None, Ok(2)), Ok(v(&["0", "1"])));
        assert_eq!(pick(None, Some("1, 0"), Ok(2)), Ok(v(&["1", "0"])));
        assert_eq!(pick(Some(v(&["1"])), Some("0"), Ok(2)), Ok(v(&["1"])));
        let uuid = "GPU-5f2c9d1e-0000-1111-2222-333344445555";
        assert_eq!(pick(None, Some(uuid), Ok(1)), Ok(v(&[uuid])));
    }

    #[test]
    fn no_gpu_and_bad_lists_are_clear_errors() {
        let e = pick(None, None, Err("no NVIDIA driver (libnvidia-ml.so not found)".into()))
            .expect_err("an error");
        assert_eq!(e.to_string(), "no GPU: no NVIDIA driver (libnvidia-ml.so not found)");
        assert_eq!(
            pick(None, Some(""), Ok(2)).expect_err("an error").to_string(),
            "no GPU: CUDA_VISIBLE_DEVICES names no device"
        );
        assert_eq!(
            pick(None, Some("-1"), Ok(2)).expect_err("an error").to_string(),
            "no GPU: CUDA_VISIBLE_DEVICES names no device"
        );
        assert_eq!(
            pick(Some(v(&["2"])), None, Ok(2)).expect_err("an error").to_string(),
            "devices: there is no GPU 2; this machine has 2 (0 to 1)"
        );
        assert!(
            pick(Some(v(&["0", "0"])), None, Ok(2))
                .expect_err("an error")
                .to_string()
                .contains("named twice")
        );
        assert!(
            pick(Some(v(&["first"])), None, Ok(2)).expect_err("an error").to_string().contains("neither")
        );
        assert!(pick(Some(vec![]), None, Ok(2)).is_err());
    }

    #[test]
    fn the_host_id_is_stable_and_named() {
        let id = host_id();
        assert!(!id.is_empty());
        assert_eq!(id, host_id());
    }
}
