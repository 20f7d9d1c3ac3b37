"""Standalone use: `run(code_object, args, global_size, local_size)` runs one kernel on the emulated gfx1100.

Numpy arrays are copied into emulated memory (each mapped in whole 4 KiB pages, as the driver maps buffers, with an
unmapped page after it), passed by pointer and copied back when the kernel ends; scalars are
packed by the driver's packer (hcq.program.pack_value, one rule for every launch path: by the metadata's types, exactly
or refused) at the metadata's offsets (natural alignment when there is none), and the launch dimensions are checked as
the driver checks them. hcq.program is imported only when `run` is called: it needs nothing but hcq.errors. Hidden
arguments (block counts, group sizes, offsets) are filled in, and a dispatch packet is provided for kernels that
ask for the dispatch pointer.
"""
from __future__ import annotations
import struct
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from hcq.asm.emu.dispatch import Dispatch, interleave_from_env, launch
from hcq.asm.emu.engine import Stats
from hcq.asm.emu.memory import VirtualMemory
from hcq.asm.emu.operands import PRIVATE_APERTURE_HI, SHARED_APERTURE_HI

CODE_BASE = 0x7f0000000000   # where the code object image is mapped
HEAP_BASE = 0x100000000      # buffers, kernargs and the dispatch packet, 4 GiB up
PAGE = 4096                  # the GPU maps whole pages: KFD allocations are PAGE_ALIGN(size) (amdgpu_amdkfd_gpuvm.c
                             # amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu, Linux 6.1) and hcq's driver rounds to PAGE too
EMULATED = ("gfx1100", "gfx1201", "gfx942")   # the architectures whose instructions the emulator runs


@dataclass
class RunResult:
  """What `run` executed (see engine.Stats) and where it put things."""
  stats: Stats
  kernel: str
  kernarg: bytes


class _Heap:
  def __init__(self, mem: VirtualMemory):
    self.mem, self.next = mem, HEAP_BASE

  def alloc(self, data: bytes | np.ndarray, size: int | None = None, writable: bool = True) -> tuple[int, np.ndarray]:
    raw = np.frombuffer(bytes(data), np.uint8) if not isinstance(data, np.ndarray) else np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    n = -(-max(size or raw.size, 1) // PAGE) * PAGE   # legal code may read past the array within its last page
    backing = np.zeros(n, np.uint8)                  # (a 12-byte uniform read as one s_load_dwordx4)
    backing[:raw.size] = raw
    va = self.next
    self.mem.map(va, n, backing, writable)
    self.next = va + n + PAGE   # an unmapped page between buffers: an access past the last page faults instead of aliasing
    return va, backing


# numpy scalar dtypes -> kernel argument kinds, for kernels without metadata (laid out by the values given)
_NUMPY_KINDS = {"int8": "i8", "uint8": "u8", "int16": "i16", "uint16": "u16", "int32": "i32", "uint32": "u32", "int64": "i64",
                "uint64": "u64", "float16": "f16", "float32": "f32", "float64": "f64", "bool": "bool"}


def _natural_kind(value: Any) -> str:
  """What a value is passed as when the code object does not say: arrays by pointer, numpy scalars as their own type,
  other scalars as 4 bytes of the value's kind (hcq.program's rule for arguments known only by size)."""
  if isinstance(value, np.ndarray): return "buffer"
  if isinstance(value, np.generic) and value.dtype.name in _NUMPY_KINDS: return _NUMPY_KINDS[value.dtype.name]
  return "b32"


def run(code_object: bytes | Any, args: Sequence[Any], global_size: Sequence[int] = (1, 1, 1), local_size: Sequence[int] = (1, 1, 1),
        arch: str | None = None, kernel: str | None = None, max_instructions: int | None = None, trace: Callable | None = None,
        trace_wave: int | None = None, dynamic_lds: int = 0, batch_bytes: int = 256 << 20,
        interleave: int | None | str = "env") -> RunResult:
  """Run `kernel` (default: the only one) of `code_object` over `global_size` workgroups of `local_size` work-items,
  on the architecture the code object is for (`arch` checks it).

  `trace(wave, pc, text, writes)` is called for each instruction wave `trace_wave` executes; `max_instructions` stops a
  runaway dispatch with InstructionLimit (a WaveError with the wave's state). Workgroups run in lockstep batches of
  about `batch_bytes` of register state. `interleave`: a seed to run each workgroup's waves interleaved, so races show
  (hcq.asm.emu.launch), None for lockstep, "env" for HCQ_EMU_INTERLEAVE's."""
  from hcq.asm.codeobject import CodeObject, read_code_object
  from hcq.autogen import amdgpu_kd as kd
  from hcq.autogen import hsa
  co = code_object if isinstance(code_object, CodeObject) else read_code_object(bytes(code_object))
  arch = arch or co.arch   # the code object's EF_AMDGPU_MACH
  if co.arch != arch: raise ValueError(f"code object is for {co.arch}, not {arch}")
  if arch not in EMULATED: raise ValueError(f"the emulator runs {', '.join(EMULATED)}, not {arch}")
  if kernel is None:
    if len(co.kernels) != 1: raise ValueError(f"code object has kernels {sorted(co.kernels)}: pass kernel=")
    kernel = next(iter(co.kernels))
  k = co.kernels[kernel]
  from hcq.program import check_workgroup, launch_dims, workgroup_limits
  gs, ls = launch_dims(global_size, "global_size"), launch_dims(local_size, "local_size")
  check_workgroup(kernel, gs, ls, *workgroup_limits(k))
  mem = VirtualMemory()
  image = co.image_at(CODE_BASE)
  mem.map(CODE_BASE, len(image), np.frombuffer(image, np.uint8).copy(), writable=False)
  heap = _Heap(mem)
  # kernel arguments, packed as the driver packs them (hcq.program): by the metadata's types, exactly or not at all
  from hcq.errors import ProgramArgumentError
  from hcq.program import metadata_layout, natural_layout, pack_value
  layout, hidden_args = metadata_layout(k) if k.args else (natural_layout([_natural_kind(v) for v in args]), [])
  if len(layout) != len(args):
    raise ProgramArgumentError(f"{kernel} takes {len(layout)} arguments ({', '.join(f'{a.name}: {a.kind}' for a in layout)}), got {len(args)}")
  size = max(k.kernarg_size, 16)
  kernarg = bytearray(size + 256)
  buffers: list[tuple[np.ndarray, np.ndarray]] = []
  for arg, value in zip(layout, args):
    if (arg.kind == "buffer") != isinstance(value, np.ndarray):
      raise ProgramArgumentError(f"{kernel}: argument {arg.name} ({arg.kind}) takes {'a numpy array' if arg.kind == 'buffer' else 'a scalar'}, "
                                 f"got {type(value).__name__}")
    if arg.kind == "buffer":
      va, backing = heap.alloc(value)
      buffers.append((value, backing))
      kernarg[arg.offset:arg.offset + 8] = struct.pack("<Q", va)
    else:
      pack_value(kernel, arg, value, kernarg)
  hidden = {"hidden_block_count_x": gs[0], "hidden_block_count_y": gs[1], "hidden_block_count_z": gs[2],
            "hidden_group_size_x": ls[0], "hidden_group_size_y": ls[1], "hidden_group_size_z": ls[2],
            "hidden_grid_dims": sum(1 for x in (gs[1] * ls[1], gs[2] * ls[2]) if x > 1) + 1,
            "hidden_dynamic_lds_size": dynamic_lds, "hidden_shared_base": SHARED_APERTURE_HI, "hidden_private_base": PRIVATE_APERTURE_HI}
  for kind, offset, n in hidden_args: kernarg[offset:offset + n] = (int(hidden.get(kind, 0)) & ((1 << (8 * n)) - 1)).to_bytes(n, "little")
  kernarg_va, _ = heap.alloc(bytes(kernarg), writable=False)
  # the AQL dispatch packet, for __builtin_amdgcn_dispatch_ptr()
  desc = k.descriptor
  pkt = hsa.hsa_kernel_dispatch_packet_t()
  pkt.setup = 3 if gs[2] * ls[2] > 1 else 2 if gs[1] * ls[1] > 1 else 1
  pkt.workgroup_size_x, pkt.workgroup_size_y, pkt.workgroup_size_z = ls
  pkt.grid_size_x, pkt.grid_size_y, pkt.grid_size_z = (g * l for g, l in zip(gs, ls))
  pkt.private_segment_size, pkt.group_segment_size = desc.private_segment_fixed_size, desc.group_segment_fixed_size + dynamic_lds
  pkt.kernel_object, pkt.kernarg_address = CODE_BASE + k.descriptor_offset, kernarg_va
  packet_va, _ = heap.alloc(bytes(pkt), writable=False)
  queue_va, _ = heap.alloc(bytes(256), writable=False)
  # user SGPRs in AMDGPUUsage order
  props = desc.kernel_code_properties
  user: list[int] = []
  lo_hi = lambda x: [x & 0xffffffff, x >> 32]
  if props & kd.KERNEL_CODE_PROPERTY_ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER: user += [0, 0, 0, 0]
  if props & kd.KERNEL_CODE_PROPERTY_ENABLE_SGPR_DISPATCH_PTR: user += lo_hi(packet_va)
  if props & kd.KERNEL_CODE_PROPERTY_ENABLE_SGPR_QUEUE_PTR: user += lo_hi(queue_va)
  if props & kd.KERNEL_CODE_PROPERTY_ENABLE_SGPR_KERNARG_SEGMENT_PTR: user += lo_hi(kernarg_va)
  if props & kd.KERNEL_CODE_PROPERTY_ENABLE_SGPR_DISPATCH_ID: user += [0, 0]
  if props & kd.KERNEL_CODE_PROPERTY_ENABLE_SGPR_FLAT_SCRATCH_INIT: user += [0, 0]
  if props & kd.KERNEL_CODE_PROPERTY_ENABLE_SGPR_PRIVATE_SEGMENT_SIZE: user += [desc.private_segment_fixed_size]
  nuser = (desc.compute_pgm_rsrc2 & kd.COMPUTE_PGM_RSRC2_USER_SGPR_COUNT) >> kd.COMPUTE_PGM_RSRC2_USER_SGPR_COUNT_SHIFT
  user += [0] * max(0, nuser - len(user))
  lds = desc.group_segment_fixed_size + dynamic_lds
  d = Dispatch(CODE_BASE + k.code_offset, desc.compute_pgm_rsrc1, desc.compute_pgm_rsrc2, desc.compute_pgm_rsrc3, user, gs, ls,
               k.wavefront_size == 32, (lds + 3) // 4 * 4, (desc.private_segment_fixed_size + 3) // 4 * 4, arch)
  stats = launch(mem, d, max_instructions, trace, trace_wave, batch_bytes,
                 interleave=interleave_from_env() if interleave == "env" else interleave)
  for arr, backing in buffers:
    out = backing[:arr.nbytes].view(arr.dtype).reshape(arr.shape)
    if arr.flags.writeable: np.copyto(arr, out)
  return RunResult(stats, kernel, bytes(kernarg[:size]))
