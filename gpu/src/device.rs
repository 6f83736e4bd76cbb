//! The devices of this machine, found on first use. cudarc opens the CUDA
//! libraries with `dlopen` and *panics* when one is missing, so every library
//! is checked for before it is touched, and initialisation runs under
//! `catch_unwind`: a machine without a GPU gets `no GPU: <reason>`, never a
//! crash.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{CudaContext, CudaStream, sys};

use crate::error::{GpuError, Result};
use crate::kernel::Kernel;

/// One GPU: its context, the one stream every brisk task on it uses (so
/// work is ordered without events), its memory pool and its kernels.
pub struct Device {
    pub(crate) ordinal: usize,
    name: String,
    uuid: String,
    total: u64,
    pub(crate) arch: String,
    sms: u32,
    /// Shared memory one thread block may have when its kernel opts in.
    shared_optin: u32,
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
    pool: Pool,
    pub(crate) kernels: Mutex<HashMap<u64, Arc<Kernel>>>,
    pub(crate) blas: OnceLock<std::result::Result<crate::blas::Blas, String>>,
    pub(crate) solver: OnceLock<std::result::Result<crate::solver::Solver, String>>,
    /// Staging memory lent to other processes, and theirs mapped here.
    pub(crate) ipc: crate::ipc::Ipc,
}

/// The device's default memory pool (a driver handle).
struct Pool(sys::CUmemoryPool);
// SAFETY: a pool handle is a process-wide driver object; the driver API is
// thread safe.
unsafe impl Send for Pool {}
unsafe impl Sync for Pool {}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Device({} {})", self.ordinal, self.name)
    }
}

/// Every device, or why there are none.
pub struct Runtime {
    devices: Vec<Arc<Device>>,
    /// `peer[i][j]`: device `i` reads and writes device `j`'s memory
    /// directly (NVLink or PCIe peer-to-peer), enabled at start.
    peer: Vec<Vec<bool>>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(&self.devices).finish()
    }
}

/// The GPUs of this process, opened once (`CUDA_VISIBLE_DEVICES` is the
/// driver's: it decides which devices exist here).
static RT: OnceLock<std::result::Result<Runtime, String>> = OnceLock::new();

pub fn runtime() -> Result<&'static Runtime> {
    RT.get_or_init(|| match std::panic::catch_unwind(open) {
        Ok(r) => r,
        Err(p) => Err(format!(
            "the CUDA libraries failed to load ({})",
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        )),
    })
    .as_ref()
    .map_err(|why| GpuError::NoGpu(why.clone()))
}

/// The devices, if this process has opened them already (a dashboard
/// asking must not create contexts, which cost device memory).
pub fn opened() -> Option<&'static Runtime> {
    RT.get().and_then(|r| r.as_ref().ok())
}

/// Whether GPUs can be used here (for tests and help texts).
pub fn available() -> bool {
    runtime().is_ok()
}

fn open() -> std::result::Result<Runtime, String> {
    // SAFETY: only asks the loader whether the library can be opened.
    if !unsafe { sys::is_culib_present() } {
        return Err("no NVIDIA driver (libcuda.so could not be loaded)".into());
    }
    let count =
        CudaContext::device_count().map_err(|e| format!("the CUDA driver found no usable device ({e:?})"))?;
    if count < 1 {
        return Err("no GPU device".into());
    }
    let devices = (0..count as usize)
        .map(|i| Device::open(i).map(Arc::new))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let peer = devices.iter().map(|a| devices.iter().map(|b| enable_peer(a, b)).collect()).collect();
    Ok(Runtime { devices, peer })
}

/// Turn on `a`'s direct access to `b`'s memory where the hardware allows;
/// whether it is on. Copies between devices work either way (the driver
/// stages through the host without it). Blocks live in `b`'s stream-ordered
/// pool, whose memory the context switch alone does not open to `a`: the
/// pool is told too (without it a copy ran at host-staging speed).
fn enable_peer(a: &Device, b: &Device) -> bool {
    if a.ordinal == b.ordinal {
        return true;
    }
    let mut can = 0;
    // SAFETY: plain queries and a context setting on live contexts.
    unsafe {
        if sys::cuDeviceCanAccessPeer(&mut can, a.ctx.cu_device(), b.ctx.cu_device())
            != sys::CUresult::CUDA_SUCCESS
            || can == 0
            || a.ctx.bind_to_thread().is_err()
        {
            return false;
        }
        if !matches!(
            sys::cuCtxEnablePeerAccess(b.ctx.cu_ctx(), 0),
            sys::CUresult::CUDA_SUCCESS | sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
        ) {
            return false;
        }
        let desc = sys::CUmemAccessDesc {
            location: sys::CUmemLocation {
                type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                id: a.ctx.cu_device(),
            },
            flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        sys::cuMemPoolSetAccess(b.pool.0, &desc, 1) == sys::CUresult::CUDA_SUCCESS
    }
}

impl Runtime {
    pub fn devices(&self) -> &[Arc<Device>] {
        &self.devices
    }

    /// Whether device `from` has direct access to `to`'s memory.
    pub fn peer_access(&self, from: usize, to: usize) -> bool {
        self.peer.get(from).and_then(|r| r.get(to)).copied().unwrap_or(false)
    }

    pub fn device(&self, ordinal: usize) -> Result<&Arc<Device>> {
        self.devices.get(ordinal).ok_or_else(|| {
            GpuError::NoGpu(format!("there is no GPU {ordinal} (this machine has {})", self.devices.len()))
        })
    }
}

fn call<T>(device: usize, what: &str, r: std::result::Result<T, cudarc::driver::DriverError>) -> Result<T> {
    r.map_err(|e| GpuError::Call { device, what: what.into(), detail: format!("{e:?}") })
}

impl Device {
    fn open(ordinal: usize) -> std::result::Result<Device, String> {
        let err = |what: &'static str| {
            move |e: cudarc::driver::DriverError| format!("GPU {ordinal}: {what} failed ({e:?})")
        };
        let ctx = CudaContext::new(ordinal).map_err(err("creating a context"))?;
        // One stream per device orders all work; cudarc's per-buffer events
        // would only cost time.
        // SAFETY: no buffer exists yet on this context.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().map_err(err("creating a stream"))?;
        let name = ctx.name().map_err(err("reading the name"))?;
        // As NVML writes it, so the dashboard can match its devices to ours.
        let uuid = ctx.uuid().map(|u| fmt_uuid(&u.bytes)).unwrap_or_default();
        let total = ctx.total_mem().map_err(err("reading the memory size"))? as u64;
        let (maj, min) = ctx.compute_capability().map_err(err("reading the compute capability"))?;
        let sms = ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(err("reading the SM count"))? as u32;
        let shared_optin = ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            .map_or(48 * 1024, |v| v.max(48 * 1024) as u32);
        if !ctx.has_async_alloc() {
            return Err(format!(
                "GPU {ordinal} ({name}) has no stream-ordered allocator (CUDA 11.2+ drivers do)"
            ));
        }
        // The pool keeps what brisk frees for its next allocation instead of
        // handing it back to the driver (as RMM's pool does).
        let pool = unsafe {
            ctx.bind_to_thread().map_err(err("binding the context"))?;
            let pool = cudarc::driver::result::device::get_default_mem_pool(ctx.cu_device())
                .map_err(err("opening the memory pool"))?;
            let mut keep = u64::MAX;
            cudarc::driver::result::mem_pool::set_attribute(
                pool,
                sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                (&mut keep as *mut u64).cast(),
            )
            .map_err(err("configuring the memory pool"))?;
            pool
        };
        Ok(Device {
            ordinal,
            name,
            uuid,
            total,
            arch: format!("sm_{maj}{min}"),
            sms,
            shared_optin,
            ctx,
            stream,
            pool: Pool(pool),
            kernels: Mutex::new(HashMap::new()),
            blas: OnceLock::new(),
            solver: OnceLock::new(),
            ipc: Default::default(),
        })
    }

    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The device's UUID as NVML and nvidia-smi write it (`GPU-…`).
    pub fn uuid(&self) -> &str {
        &self.uuid
    }

    /// Total device memory in bytes.
    pub fn total_memory(&self) -> u64 {
        self.total
    }

    /// Streaming multiprocessors (kernels size their grids by them).
    pub fn sm_count(&self) -> u32 {
        self.sms
    }

    /// Bytes of shared memory a thread block may use (kernels launched
    /// with more than the default 48 KiB opt in, see `Device::launch`).
    pub fn shared_per_block(&self) -> u32 {
        self.shared_optin
    }

    /// Free device memory now (all processes), in bytes.
    pub fn free_memory(&self) -> Result<u64> {
        call(self.ordinal, "cuMemGetInfo", self.ctx.mem_get_info()).map(|(free, _)| free as u64)
    }

    /// Bytes of brisk's live buffers on this device.
    pub fn used_by_brisk(&self) -> u64 {
        self.pool_attr(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_CURRENT)
    }

    /// Bytes the pool holds from the driver (live buffers plus freed memory
    /// kept for reuse).
    pub fn reserved_by_brisk(&self) -> u64 {
        self.pool_attr(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)
    }

    fn pool_attr(&self, attr: sys::CUmemPool_attribute) -> u64 {
        let mut v = 0u64;
        // SAFETY: the pool lives as long as the device; these attributes are u64.
        let r = unsafe {
            cudarc::driver::result::mem_pool::get_attribute(self.pool.0, attr, (&mut v as *mut u64).cast())
        };
        if r.is_ok() { v } else { 0 }
    }

    /// Wait until every queued operation on this device has finished; a
    /// kernel's failure surfaces here.
    pub fn synchronize(&self) -> Result<()> {
        call(self.ordinal, "synchronizing", self.stream.synchronize())
    }

    pub(crate) fn bind(&self) -> Result<()> {
        call(self.ordinal, "binding the context", self.ctx.bind_to_thread())
    }

    pub(crate) fn cu_stream(&self) -> sys::CUstream {
        self.stream.cu_stream()
    }

    pub(crate) fn fail(&self, what: &str, detail: impl std::fmt::Debug) -> GpuError {
        GpuError::Call { device: self.ordinal, what: what.into(), detail: format!("{detail:?}") }
    }
}

/// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, NVML's form of a device UUID.
fn fmt_uuid(b: &[std::ffi::c_char; 16]) -> String {
    let hex: Vec<String> = b.iter().map(|&c| format!("{:02x}", c as u8)).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        hex[0..4].concat(),
        hex[4..6].concat(),
        hex[6..8].concat(),
        hex[8..10].concat(),
        hex[10..16].concat()
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn uuids_are_written_as_nvml_writes_them() {
        let b: [std::ffi::c_char; 16] = std::array::from_fn(|i| (i as u8 * 17) as std::ffi::c_char);
        assert_eq!(super::fmt_uuid(&b), "GPU-00112233-4455-6677-8899-aabbccddeeff");
    }
}
