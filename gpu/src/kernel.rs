//! Kernels compiled at run time with NVRTC for the device's own
//! architecture (a CUBIN, so loading needs no PTX JIT), kept in memory per
//! device and on disk across runs: a second process loads the CUBIN and
//! compiles nothing.

use std::ffi::CString;
use std::path::PathBuf;
use std::sync::Arc;

use cudarc::driver::{CudaFunction, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::{Ptx, result as nvrtc, sys as nvrtc_sys};

use crate::device::Device;
use crate::error::{GpuError, Result};

/// A loaded kernel.
pub struct Kernel {
    name: String,
    func: CudaFunction,
    device: usize,
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Kernel({} on GPU {})", self.name, self.device)
    }
}

/// One kernel argument (device addresses travel as `U64`).
#[derive(Clone, Copy, Debug)]
pub enum KArg {
    U64(u64),
    I64(i64),
    U32(u32),
    I32(i32),
    F64(f64),
    F32(f32),
}

/// Grid and block sizes.
#[derive(Clone, Copy, Debug)]
pub struct Launch {
    pub grid: (u32, u32, u32),
    pub block: (u32, u32, u32),
    pub shared: u32,
}

impl Launch {
    /// A 1-d grid-stride launch over `n` items: enough blocks to fill the
    /// device a few times over, no more.
    pub fn linear(device: &Device, n: usize, threads: u32) -> Launch {
        let need = n.div_ceil(threads as usize).max(1);
        let cap = device.sm_count() as usize * 32;
        Launch { grid: (need.min(cap) as u32, 1, 1), block: (threads, 1, 1), shared: 0 }
    }
}

/// Where compiled kernels are kept: `BRISK_KERNEL_CACHE`, else the user's
/// cache folder.
pub fn cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("BRISK_KERNEL_CACHE") {
        return Some(PathBuf::from(d));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("brisk").join("kernels"))
}

/// NVRTC's version, found once: the check opens the library under each of
/// its candidate names, a file search per name, which no launch should pay.
fn nvrtc_version() -> Result<(i32, i32)> {
    static VERSION: std::sync::OnceLock<Option<(i32, i32)>> = std::sync::OnceLock::new();
    let v = VERSION.get_or_init(|| {
        // SAFETY: only checks whether the library can be opened.
        if !unsafe { nvrtc_sys::is_culib_present() } {
            return None;
        }
        let (mut a, mut b) = (0, 0);
        // SAFETY: two out-parameters.
        unsafe { nvrtc_sys::nvrtcVersion(&mut a, &mut b) };
        Some((a, b))
    });
    v.ok_or_else(|| {
        GpuError::NoGpu("the NVRTC library (libnvrtc.so) of the CUDA toolkit could not be loaded".into())
    })
}

/// Compile `source` to a CUBIN for `arch`.
fn compile(source: &str, name: &str, arch: &str) -> Result<Vec<u8>> {
    let fail = |log: String| GpuError::Compile { name: name.into(), log };
    let src = CString::new(source).map_err(|_| fail("the source contains a NUL byte".into()))?;
    let prog = nvrtc::create_program(&src, None).map_err(|e| fail(format!("{e:?}")))?;
    struct Prog(nvrtc_sys::nvrtcProgram);
    impl Drop for Prog {
        fn drop(&mut self) {
            // SAFETY: created above, destroyed once.
            let _ = unsafe { nvrtc::destroy_program(self.0) };
        }
    }
    let prog = Prog(prog);
    let opts = [format!("--gpu-architecture={arch}"), "-std=c++17".into(), "-default-device".into()];
    // SAFETY: a live program and valid option strings.
    if let Err(e) = unsafe { nvrtc::compile_program(prog.0, &opts) } {
        // SAFETY: the program exists; the log is a NUL-terminated string.
        let log = unsafe { nvrtc::get_program_log(prog.0) }
            .map(|l| l.iter().take_while(|&&c| c != 0).map(|&c| c as u8 as char).collect::<String>())
            .unwrap_or_default();
        return Err(fail(format!("{e:?}\n{log}")));
    }
    let mut size = 0usize;
    // SAFETY: out-parameter, then a buffer of that size.
    unsafe { nvrtc_sys::nvrtcGetCUBINSize(prog.0, &mut size) }
        .result()
        .map_err(|e| fail(format!("{e:?}")))?;
    let mut cubin = vec![0u8; size];
    unsafe { nvrtc_sys::nvrtcGetCUBIN(prog.0, cubin.as_mut_ptr().cast()) }
        .result()
        .map_err(|e| fail(format!("{e:?}")))?;
    Ok(cubin)
}

impl Device {
    /// The kernel `name` of `source`, compiled once per process and once per
    /// machine (the disk cache is keyed by the source, the architecture and
    /// NVRTC's version).
    pub fn kernel(self: &Arc<Self>, source: &str, name: &str) -> Result<Arc<Kernel>> {
        let (va, vb) = nvrtc_version()?;
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        h.update(source.as_bytes());
        h.update(name.as_bytes());
        h.update(self.arch.as_bytes());
        h.update(&[va as u8, vb as u8, 1]);
        let key = h.digest();
        if let Some(k) = self.kernels.lock().map_err(|_| self.fail("kernel cache", "poisoned"))?.get(&key) {
            return Ok(k.clone());
        }
        // The name as a file name: an operation read from a peer names no
        // path outside the cache.
        let stem: String =
            name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
        let file = cache_dir().map(|d| d.join(format!("{stem}-{key:016x}-{}.cubin", self.arch)));
        let cubin = match file.as_ref().and_then(|f| std::fs::read(f).ok()) {
            Some(c) if !c.is_empty() => c,
            _ => {
                keep_source(source, &stem, key);
                let c = compile(source, name, &self.arch)?;
                if let Some(f) = &file {
                    store(f, &c);
                }
                c
            }
        };
        self.bind()?;
        let module =
            self.ctx.load_module(Ptx::from_binary(cubin)).map_err(|e| self.fail("loading a kernel", e))?;
        let func = module
            .load_function(name)
            .map_err(|e| GpuError::NoKernel { name: name.into(), detail: format!("{e:?}") })?;
        let k = Arc::new(Kernel { name: name.into(), func, device: self.ordinal });
        self.kernels.lock().map_err(|_| self.fail("kernel cache", "poisoned"))?.insert(key, k.clone());
        Ok(k)
    }

    /// How many blocks of `threads` threads (and `shared` bytes of dynamic
    /// shared memory) of `kernel` one SM holds at once: its registers and
    /// shared memory decide, so a grid sized to fill the device in one wave
    /// asks here rather than assuming full occupancy. 1 if the driver
    /// cannot say.
    pub fn resident_blocks(&self, kernel: &Kernel, threads: u32, shared: usize) -> u32 {
        if self.bind().is_err() {
            return 1;
        }
        kernel
            .func
            .occupancy_max_active_blocks_per_multiprocessor(threads, shared, None)
            .map_or(1, |n| n.max(1))
    }

    /// Queue `kernel` on this device's stream.
    pub fn launch(self: &Arc<Self>, kernel: &Kernel, cfg: Launch, args: &[KArg]) -> Result<()> {
        if cfg.grid.0 == 0 || cfg.grid.1 == 0 || cfg.grid.2 == 0 {
            return Ok(());
        }
        if fault_armed() {
            self.fault()?;
        }
        self.bind()?;
        if cfg.shared > 48 * 1024 {
            // Dynamic shared memory past the default needs the kernel's
            // opt-in (up to `shared_per_block`).
            kernel
                .func
                .set_attribute(
                    cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    cfg.shared as i32,
                )
                .map_err(|e| self.fail(&format!("giving {} {} bytes of shared memory", kernel.name, cfg.shared), e))?;
        }
        let mut b = self.stream.launch_builder(&kernel.func);
        for a in args {
            match a {
                KArg::U64(v) => b.arg(v),
                KArg::I64(v) => b.arg(v),
                KArg::U32(v) => b.arg(v),
                KArg::I32(v) => b.arg(v),
                KArg::F64(v) => b.arg(v),
                KArg::F32(v) => b.arg(v),
            };
        }
        let lc = LaunchConfig { grid_dim: cfg.grid, block_dim: cfg.block, shared_mem_bytes: cfg.shared };
        // SAFETY: brisk's kernels are written for exactly these arguments;
        // the buffers they address outlive the queued launch (frees are
        // stream-ordered after it).
        unsafe { b.launch(lc) }.map(|_| ()).map_err(|e| self.fail(&format!("launching {}", kernel.name), e))
    }
}

/// For the reliability tests: `BRISK_GPU_FAULT=FILE` makes the first launch
/// of any process that finds FILE (and removes it: once per file, however
/// many processes share it) queue a kernel that writes to an invalid
/// address first, a real fault that leaves the CUDA context unusable, as a
/// failing GPU or a bad kernel does. Read once per process.
fn fault_armed() -> bool {
    static FILE: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    let file = FILE.get_or_init(|| std::env::var_os("BRISK_GPU_FAULT").map(PathBuf::from));
    file.as_ref().is_some_and(|f| std::fs::remove_file(f).is_ok())
}

impl Device {
    /// Queue the faulting kernel of [`fault_armed`].
    fn fault(self: &Arc<Self>) -> Result<()> {
        const SOURCE: &str =
            "extern \"C\" __global__ void brisk_fault(unsigned long long p) { *(volatile int*)p = 1; }";
        let k = self.kernel(SOURCE, "brisk_fault")?;
        let one = Launch { grid: (1, 1, 1), block: (1, 1, 1), shared: 0 };
        self.launch(&k, one, &[KArg::U64(8)])
    }
}

/// `BRISK_KERNEL_SOURCES=DIR` keeps the source of every kernel this
/// process compiles as `DIR/NAME-KEY.cu`: what NVRTC was given, users'
/// snippets inside brisk's generated code, to read or to profile.
fn keep_source(source: &str, name: &str, key: u64) {
    if let Some(dir) = std::env::var_os("BRISK_KERNEL_SOURCES") {
        store(&PathBuf::from(dir).join(format!("{name}-{key:016x}.cu")), source.as_bytes());
    }
}

/// Write a compiled kernel where the next process finds it; a read-only or
/// missing cache folder only costs the compile next time.
fn store(file: &std::path::Path, cubin: &[u8]) {
    let Some(dir) = file.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let tmp = file.with_extension(format!("tmp{}", std::process::id()));
    if std::fs::write(&tmp, cubin).is_ok() && std::fs::rename(&tmp, file).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}
