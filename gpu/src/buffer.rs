//! Device memory: one allocation from the device's pool, freed in stream
//! order when dropped (so a kernel queued before the drop still reads it).

use std::sync::Arc;

use cudarc::driver::{result, sys};

use crate::device::Device;
use crate::error::{GpuError, Result};

/// Bytes on one device.
pub struct Buffer {
    ptr: sys::CUdeviceptr,
    bytes: usize,
    device: Arc<Device>,
    /// Copies on other devices, made once and kept while this buffer lives:
    /// a block read by several tasks on another GPU crosses once. A buffer
    /// is written only before it is shared, so a copy never goes stale.
    replicas: std::sync::Mutex<Vec<Arc<Buffer>>>,
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Buffer({} B on GPU {})", self.bytes, self.device.ordinal)
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if self.ptr != 0 && self.device.bind().is_ok() {
            // SAFETY: the pointer came from this device's stream-ordered
            // allocator and is freed once, on the stream that uses it.
            let _ = unsafe { result::free_async(self.ptr, self.device.cu_stream()) };
        }
    }
}

impl Buffer {
    /// `bytes` of uninitialised device memory. Under pressure the pool
    /// waits for pending frees once before it gives up.
    pub fn alloc(device: &Arc<Device>, bytes: usize, what: &dyn Fn() -> String) -> Result<Buffer> {
        if bytes == 0 {
            return Ok(Buffer { ptr: 0, bytes, device: device.clone(), replicas: Default::default() });
        }
        device.bind()?;
        let attempt = || unsafe { result::malloc_async(device.cu_stream(), bytes) };
        let ptr = match attempt() {
            Ok(p) => p,
            Err(e) if e.0 == sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY => {
                device.synchronize()?;
                attempt().map_err(|e| {
                    if e.0 == sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY {
                        GpuError::OutOfMemory {
                            device: device.ordinal,
                            name: device.name().into(),
                            what: what(),
                            requested: bytes as u64,
                            free: device.free_memory().unwrap_or(0),
                            total: device.total_memory(),
                        }
                    } else {
                        device.fail("allocating", e)
                    }
                })?
            }
            Err(e) => return Err(device.fail("allocating", e)),
        };
        Ok(Buffer { ptr, bytes, device: device.clone(), replicas: Default::default() })
    }

    /// A copy of host bytes on the device.
    pub fn upload(device: &Arc<Device>, data: &[u8], what: &dyn Fn() -> String) -> Result<Buffer> {
        let b = Buffer::alloc(device, data.len(), what)?;
        if !data.is_empty() {
            // SAFETY: `b` holds `data.len()` bytes; the copy is synchronous
            // with respect to `data` for pageable host memory.
            unsafe { result::memcpy_htod_async(b.ptr, data, device.cu_stream()) }
                .map_err(|e| device.fail("copying to the device", e))?;
        }
        Ok(b)
    }

    /// The bytes, on the host (waits for the work queued before).
    pub fn download(&self) -> Result<Vec<u8>> {
        let mut out = vec![0u8; self.bytes];
        self.download_into(&mut out)?;
        Ok(out)
    }

    /// Copy the first `out.len()` bytes to the host.
    pub fn download_into(&self, out: &mut [u8]) -> Result<()> {
        self.download_at(0, out)
    }

    /// Copy `out.len()` bytes from `offset` to the host.
    pub fn download_at(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        if offset.checked_add(out.len()).is_none_or(|end| end > self.bytes) {
            return Err(self.device.fail(
                "copying to the host",
                format!("{} bytes at {offset} from a buffer of {}", out.len(), self.bytes),
            ));
        }
        if out.is_empty() {
            return Ok(());
        }
        self.device.bind()?;
        // SAFETY: bounds checked above; the stream is synchronized before
        // `out` is read.
        unsafe { result::memcpy_dtoh_async(out, self.ptr + offset as u64, self.device.cu_stream()) }
            .map_err(|e| self.device.fail("copying to the host", e))?;
        self.device.synchronize()
    }

    /// Copy `bytes` from `src` at `src_off` to `self` at `dst_off` (both on
    /// one device, queued on its stream).
    pub fn copy_from(&self, dst_off: usize, src: &Buffer, src_off: usize, bytes: usize) -> Result<()> {
        if dst_off + bytes > self.bytes || src_off + bytes > src.bytes {
            return Err(self.device.fail("copying on the device", "range out of bounds"));
        }
        if bytes == 0 {
            return Ok(());
        }
        if src.device.ordinal != self.device.ordinal {
            return self.copy_peer(dst_off, src, src_off, bytes);
        }
        self.device.bind()?;
        // SAFETY: bounds checked above; one stream orders the copy.
        unsafe {
            result::memcpy_dtod_async(
                self.ptr + dst_off as u64,
                src.ptr + src_off as u64,
                bytes,
                self.device.cu_stream(),
            )
        }
        .map_err(|e| self.device.fail("copying on the device", e))
    }

    /// A copy between two devices, queued without waiting: this stream
    /// waits for what the source's stream queued before (its writes), and
    /// the source's stream waits for the copy (so a free queued there after
    /// cannot hand the bytes to a new owner while they are being read).
    /// Direct over NVLink or PCIe where peer access is on, else the driver
    /// stages through the host.
    fn copy_peer(&self, dst_off: usize, src: &Buffer, src_off: usize, bytes: usize) -> Result<()> {
        let written =
            src.device.stream.record_event(None).map_err(|e| src.device.fail("recording an event", e))?;
        self.device.stream.wait(&written).map_err(|e| self.device.fail("waiting for another GPU", e))?;
        self.device.bind()?;
        // SAFETY: bounds checked by the caller; both buffers live until the
        // events below order their frees after the copy.
        unsafe {
            result::memcpy_peer_async(
                self.device.ctx.cu_ctx(),
                self.ptr + dst_off as u64,
                src.device.ctx.cu_ctx(),
                src.ptr + src_off as u64,
                bytes,
                self.device.cu_stream(),
            )
        }
        .map_err(|e| self.device.fail("copying between devices", e))?;
        let copied =
            self.device.stream.record_event(None).map_err(|e| self.device.fail("recording an event", e))?;
        src.device.stream.wait(&copied).map_err(|e| src.device.fail("waiting for another GPU", e))
    }

    /// This buffer's bytes on `device`: itself when it is there already, the
    /// copy made there before, or a new copy (kept for the next reader).
    pub fn to_device(
        self: &Arc<Self>,
        device: &Arc<Device>,
        what: &dyn Fn() -> String,
    ) -> Result<Arc<Buffer>> {
        if device.ordinal == self.device.ordinal {
            return Ok(self.clone());
        }
        let replicas = || self.replicas.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(r) = replicas().iter().find(|r| r.device.ordinal == device.ordinal) {
            return Ok(r.clone());
        }
        let b = Buffer::alloc(device, self.bytes, what)?;
        b.copy_from(0, self, 0, self.bytes)?;
        let b = Arc::new(b);
        replicas().push(b.clone());
        Ok(b)
    }

    /// Set every byte to `v`.
    pub fn fill_bytes(&self, v: u8) -> Result<()> {
        if self.bytes == 0 {
            return Ok(());
        }
        self.device.bind()?;
        // SAFETY: the whole allocation.
        unsafe { result::memset_d8_async(self.ptr, v, self.bytes, self.device.cu_stream()) }
            .map_err(|e| self.device.fail("filling", e))
    }

    /// The device address, for kernel arguments. Valid while `self` lives.
    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }
}
