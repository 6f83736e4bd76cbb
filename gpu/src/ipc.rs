//! Blocks handed device to device between processes of one host (CUDA
//! IPC), so two CUDA workers pass results over NVLink or PCIe instead of
//! through host memory and TCP.
//!
//! Memory from the stream-ordered pool cannot be exported, so the sender
//! copies a block into a staging allocation of its own (`cuMemAlloc`) and
//! sends that allocation's handle; the receiver maps it, copies the bytes
//! into its pool and tells the sender it is done. Mapping a handle cost
//! 4–14 ms between two H200s (0.1 ms on one), far more than copying a
//! block of a few MiB over NVLink, so staging allocations are kept for
//! reuse up to a bound (`KEEP`) and receivers keep them mapped: after the
//! first transfers a block costs two device copies and no mapping. Staging
//! beyond the bound is freed after its one transfer, and its receiver
//! unmaps it at once.

use std::sync::{Arc, Mutex, PoisonError};

use cudarc::driver::{result, sys};

use crate::buffer::Buffer;
use crate::device::Device;
use crate::error::Result;

/// The most staging memory a device keeps for reuse: 4 GiB, or a
/// sixteenth of a smaller device. Past it each lent block costs an
/// allocation and a mapping: with 1 GiB kept, 1 GiB blocks moved between
/// two H200s at 68 GB/s, with 4 GiB at 280 GB/s (NVLink: 390).
const KEEP: u64 = 4 << 30;
/// Staging sizes are powers of two from 1 MiB, so a kept allocation fits
/// many later blocks.
const SMALLEST: usize = 1 << 20;
/// Peers' staging allocations a device keeps mapped; the oldest is
/// unmapped past this.
const MAPPED: usize = 256;

/// What a peer process needs to copy an exported block: the staging
/// allocation's handle, the block's bytes, and whether the sender keeps the
/// allocation for reuse (so the receiver may keep it mapped).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exported {
    pub handle: Vec<u8>,
    pub bytes: usize,
    pub kept: bool,
}

/// A staging allocation lent to a peer: its bytes must stay put until the
/// peer has copied them. Dropping the lease ends it (the allocation goes
/// back to the device's staging set, or is freed).
pub struct Lease {
    slot: Option<Slot>,
    device: Arc<Device>,
}

struct Slot {
    ptr: sys::CUdeviceptr,
    bytes: usize,
    handle: sys::CUipcMemHandle,
    kept: bool,
}

// SAFETY: a device pointer and an opaque handle, both process-wide.
unsafe impl Send for Slot {}

/// A device's IPC state: its staging allocations not lent now (with the
/// bytes of all it keeps), and the peers' allocations it has mapped (with
/// their sizes).
#[derive(Default)]
pub(crate) struct Ipc {
    free: Mutex<(Vec<Slot>, u64)>,
    mapped: Mutex<Vec<(Vec<u8>, sys::CUdeviceptr, usize)>>,
}

// SAFETY: see `Slot`; the mapped pointers are process-wide as well.
unsafe impl Send for Ipc {}
unsafe impl Sync for Ipc {}

impl Drop for Lease {
    fn drop(&mut self) {
        let Some(slot) = self.slot.take() else { return };
        if slot.kept {
            self.device.ipc.free.lock().unwrap_or_else(PoisonError::into_inner).0.push(slot);
        } else if self.device.bind().is_ok() {
            // SAFETY: allocated by `stage`, lent once, and the peer is done.
            let _ = unsafe { sys::cuMemFree_v2(slot.ptr) };
        }
    }
}

impl Buffer {
    /// This buffer's bytes in staging memory other processes can map, and
    /// the lease that keeps them there (waits for the work queued before).
    pub fn export(&self) -> Result<(Exported, Lease)> {
        let device = self.device();
        device.bind()?;
        let slot = device.ipc.stage(device, self.len())?;
        let (ptr, kept) = (slot.ptr, slot.kept);
        let handle = slot.handle.reserved.iter().map(|&c| c as u8).collect();
        // Leased before the copy, so a failed copy still returns the slot.
        let lease = Lease { slot: Some(slot), device: device.clone() };
        if !self.is_empty() {
            // SAFETY: the slot holds at least `len` bytes; the stream is
            // synchronized before the handle is given out.
            unsafe { result::memcpy_dtod_async(ptr, self.ptr(), self.len(), device.cu_stream()) }
                .map_err(|e| device.fail("copying to staging memory", e))?;
        }
        device.synchronize()?;
        Ok((Exported { handle, bytes: self.len(), kept }, lease))
    }

    /// A copy, in `device`'s pool, of a block another process of this host
    /// exported ([`Buffer::export`]); its lease may end once this returns.
    pub fn import(device: &Arc<Device>, from: &Exported, what: &dyn Fn() -> String) -> Result<Buffer> {
        let handle = handle_of(&from.handle).ok_or_else(|| {
            device.fail("opening a peer's memory", format!("a handle of {} bytes", from.handle.len()))
        })?;
        // A test hook (scripts/gpu-cluster-tests.sh): refuse every peer's
        // handle, as a driver does where the devices cannot reach each other.
        if std::env::var_os("BRISK_GPU_IPC_REFUSE").is_some() {
            return Err(device.fail("opening a peer's memory", "refused (BRISK_GPU_IPC_REFUSE is set)"));
        }
        let b = Buffer::alloc(device, from.bytes, what)?;
        if from.bytes == 0 {
            return Ok(b);
        }
        device.bind()?;
        device.ipc.copy_in(device, &from.handle, handle, from.kept, &b)?;
        Ok(b)
    }
}

fn handle_of(bytes: &[u8]) -> Option<sys::CUipcMemHandle> {
    let raw: [u8; 64] = bytes.try_into().ok()?;
    Some(sys::CUipcMemHandle { reserved: raw.map(|b| b as std::ffi::c_char) })
}

impl Ipc {
    /// A staging allocation of at least `bytes`: a kept one not lent now,
    /// else a new one (kept while the device keeps less than its bound).
    fn stage(&self, device: &Device, bytes: usize) -> Result<Slot> {
        let size = bytes.max(SMALLEST).checked_next_power_of_two().unwrap_or(bytes);
        let keep = {
            let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(i) = free.0.iter().position(|s| s.bytes == size) {
                return Ok(free.0.swap_remove(i));
            }
            let keep = free.1 + size as u64 <= KEEP.min(device.total_memory() / 16);
            if keep {
                free.1 += size as u64;
            }
            keep
        };
        let unkeep = || {
            if keep {
                self.free.lock().unwrap_or_else(PoisonError::into_inner).1 -= size as u64;
            }
        };
        let mut ptr = 0;
        // SAFETY: plain allocation on the bound context.
        let r = unsafe { sys::cuMemAlloc_v2(&mut ptr, size) };
        if r != sys::CUresult::CUDA_SUCCESS {
            unkeep();
            return Err(device.fail("allocating staging memory", r));
        }
        let mut handle = sys::CUipcMemHandle { reserved: [0; 64] };
        // SAFETY: `ptr` is the base of a `cuMemAlloc` allocation.
        let r = unsafe { sys::cuIpcGetMemHandle(&mut handle, ptr) };
        if r != sys::CUresult::CUDA_SUCCESS {
            unkeep();
            // SAFETY: allocated just above, never shared.
            unsafe { sys::cuMemFree_v2(ptr) };
            return Err(device.fail("exporting staging memory", r));
        }
        Ok(Slot { ptr, bytes: size, handle, kept: keep })
    }

    /// Copy `to.len()` bytes from a peer's staging allocation into `to`,
    /// through a mapping made before (of a kept allocation) or made now.
    /// The lock is held until the copy is done, so no mapping is closed
    /// under a copy; copies on one device share its stream anyway.
    fn copy_in(
        &self,
        device: &Device,
        key: &[u8],
        handle: sys::CUipcMemHandle,
        keep: bool,
        to: &Buffer,
    ) -> Result<()> {
        let mut mapped = self.mapped.lock().unwrap_or_else(PoisonError::into_inner);
        let cached = mapped.iter().find(|(h, ..)| h == key).map(|&(_, p, n)| (p, n));
        let (src, size) = match cached {
            Some(at) => at,
            None => {
                let mut ptr = 0;
                let flags = sys::CUipcMem_flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as u32;
                // SAFETY: a handle the peer made with `cuIpcGetMemHandle`; a
                // bad one is an error from the driver.
                let r = unsafe { sys::cuIpcOpenMemHandle_v2(&mut ptr, handle, flags) };
                if r != sys::CUresult::CUDA_SUCCESS {
                    return Err(device.fail("opening a peer's memory", r));
                }
                let (mut base, mut size) = (0, 0);
                // SAFETY: a query on the pointer just mapped.
                if unsafe { sys::cuMemGetAddressRange_v2(&mut base, &mut size, ptr) }
                    != sys::CUresult::CUDA_SUCCESS
                {
                    size = 0;
                }
                (ptr, size)
            }
        };
        // The peer's word for the size is checked against the mapping: a
        // copy past its end would fault, and take this device down with it.
        let copied = if to.len() > size {
            Err(device.fail("copying from a peer's memory", format!("{} bytes asked of {size}", to.len())))
        } else {
            // SAFETY: the mapping holds `to.len()` bytes (checked above),
            // which the peer keeps until we answer; waited for below.
            unsafe { result::memcpy_dtod_async(to.ptr(), src, to.len(), device.cu_stream()) }
                .map_err(|e| device.fail("copying from a peer's memory", e))
                .and_then(|()| device.synchronize())
        };
        if cached.is_none() {
            if keep && copied.is_ok() {
                if mapped.len() >= MAPPED {
                    let (_, old, _) = mapped.remove(0);
                    // SAFETY: no copy runs from it (copies hold this lock).
                    unsafe { sys::cuIpcCloseMemHandle(old) };
                }
                mapped.push((key.to_vec(), src, size));
            } else {
                // SAFETY: mapped above for this copy alone, which has finished.
                unsafe { sys::cuIpcCloseMemHandle(src) };
            }
        }
        copied
    }
}
