"""AMD programs: a code object loaded into GPU memory, its descriptor read into the dispatch registers and user SGPRs.

The kernarg segment of a launch is the explicit arguments (laid out by the code object's metadata), then the
hidden arguments code object v5 kernels read (grid and group sizes), then an HSA dispatch packet for kernels
that ask for a dispatch pointer.
"""
from __future__ import annotations
import ctypes
import struct
from typing import TYPE_CHECKING, Any, Sequence

from hcq.asm.codeobject import CodeObjectError, read_code_object
from hcq.autogen import amdgpu_kd as kd
from hcq.autogen import hsa
from hcq.drivers.amd.pm4 import preemption_bits
from hcq.errors import HCQError
from hcq.program import Program, check_workgroup, launch_dims, metadata_layout, pack_kernargs, workgroup_limits
from hcq.sym import hi32, lo32

if TYPE_CHECKING:
  from hcq.drivers.amd.device import AMDDevice

DISPATCH_PACKET_BYTES = ctypes.sizeof(hsa.hsa_kernel_dispatch_packet_t)
# hidden argument -> (struct format, what it holds) (AMDGPUUsage: code object v5 kernel arguments)
_HIDDEN = {"hidden_block_count_x": "I", "hidden_block_count_y": "I", "hidden_block_count_z": "I",
           "hidden_group_size_x": "H", "hidden_group_size_y": "H", "hidden_group_size_z": "H",
           "hidden_remainder_x": "H", "hidden_remainder_y": "H", "hidden_remainder_z": "H",
           "hidden_global_offset_x": "Q", "hidden_global_offset_y": "Q", "hidden_global_offset_z": "Q", "hidden_grid_dims": "H"}


class AMDProgram(Program):
  """A kernel of a code object, loaded on an AMD device."""

  def __init__(self, device: "AMDDevice", code_object: bytes, name: str | None = None):
    try:
      co = read_code_object(code_object)
    except CodeObjectError as e:
      raise CodeObjectError(f"invalid code object: {e}") from None
    if co.arch != device.arch: raise HCQError(f"code object is for {co.arch}, the device is {device.arch}")
    if name is None:
      if len(co.kernels) != 1: raise HCQError(f"the code object has kernels {', '.join(co.kernels)}: name one")
      name = next(iter(co.kernels))
    if name not in co.kernels: raise HCQError(f"no kernel {name!r} in the code object; it has {', '.join(co.kernels)}")
    k = co.kernels[name]
    self.kernel, self.image_size = k, len(co.image)
    self.lib = device.alloc(max(len(co.image), 4096), "device")
    device.upload(self.lib, co.image_at(self.lib.addr))
    self.code_addr = self.lib.addr + k.code_offset
    d = k.descriptor
    # A PM4 dispatch carries the workgroup's LDS in RSRC2.LDS_SIZE (AQL packet processors fill it from the packet), in 512-byte units
    lds = (d.group_segment_fixed_size + 511) // 512
    if lds > 0x1ff: raise HCQError(f"{name}: {d.group_segment_fixed_size} bytes of LDS exceed the 64 KiB a workgroup may have")
    props = device.node.properties
    preempt1, preempt2 = preemption_bits(device.dialect.regs, props["gfx_target_version"], props["array_count"])
    self.rsrc1, self.rsrc3 = d.compute_pgm_rsrc1 | preempt1, d.compute_pgm_rsrc3
    self.rsrc2 = d.compute_pgm_rsrc2 | preempt2 | device.dialect.regs.regCOMPUTE_PGM_RSRC2.encode(lds_size=lds)
    self.wave32 = k.wavefront_size == 32
    try:
      device.dialect.initiator(self.wave32)  # gfx9 has no wave32 (no DISPATCH_INITIATOR.CS_W32_EN): refused at load, not at launch
    except ValueError as e:
      raise HCQError(f"{name}: {e}") from None
    self.group_segment_size, self.private_segment_size = d.group_segment_fixed_size, d.private_segment_fixed_size
    self.properties = d.kernel_code_properties
    layout, hidden = metadata_layout(k)
    # hidden arguments not in _HIDDEN stay zero: printf buffers, hostcall, default queues, ... are not provided
    self.hidden = [(kind, offset) for kind, offset, _ in hidden if kind in _HIDDEN]
    self.max_workgroup_size, self.required_workgroup_size = workgroup_limits(k)
    super().__init__(device, name, layout, k.kernarg_size)
    if self.dispatch_packet_offset + DISPATCH_PACKET_BYTES > device.kernargs.buf.nbytes:  # checked at load, not at each launch
      raise CodeObjectError(f"{name}: {k.kernarg_size} bytes of kernel arguments (and the dispatch packet) exceed the "
                            f"{device.kernargs.buf.nbytes}-byte kernarg ring")
    if self.private_segment_size: device.ensure_scratch(self.private_segment_size, k.wavefront_size)

  def user_sgprs(self, kernargs_addr) -> list:
    """The user SGPR values the descriptor asks for, in the order the hardware loads them (AMDGPUUsage, initial state)."""
    out, p = [], self.properties
    if p & kd.KERNEL_CODE_PROPERTY_ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER:
      raise HCQError(f"{self.name} asks for a private segment buffer (gfx9 scratch setup), which this driver does not provide")
    if p & kd.KERNEL_CODE_PROPERTY_ENABLE_SGPR_DISPATCH_PTR:
      dp = kernargs_addr + self.dispatch_packet_offset
      out += [lo32(dp), hi32(dp)]
    if p & kd.KERNEL_CODE_PROPERTY_ENABLE_SGPR_QUEUE_PTR: out += [0, 0]
    if p & kd.KERNEL_CODE_PROPERTY_ENABLE_SGPR_KERNARG_SEGMENT_PTR:
      out += [lo32(kernargs_addr), hi32(kernargs_addr)]
    if p & kd.KERNEL_CODE_PROPERTY_ENABLE_SGPR_DISPATCH_ID: out += [0, 0]
    if p & kd.KERNEL_CODE_PROPERTY_ENABLE_SGPR_FLAT_SCRATCH_INIT: out += [0, 0]
    if p & kd.KERNEL_CODE_PROPERTY_ENABLE_SGPR_PRIVATE_SEGMENT_SIZE: out += [self.private_segment_size]
    return out

  @property
  def dispatch_packet_offset(self) -> int:
    return (self.kernarg_size + 63) // 64 * 64

  def kernargs(self, bufs: Sequence, vals: Sequence[Any], gs: tuple[int, int, int], ls: tuple[int, int, int]) -> bytearray:
    """Explicit and hidden arguments, then the dispatch packet."""
    out = pack_kernargs(self.name, self.layout, bufs, vals, self.dispatch_packet_offset + DISPATCH_PACKET_BYTES, self.device)
    # the grid's dimensions: up to the last axis of more than one work-item (the packet's setup and hidden_grid_dims agree)
    dims = 1 + (gs[1] * ls[1] > 1 or gs[2] * ls[2] > 1) + (gs[2] * ls[2] > 1)
    fill = {"hidden_block_count_x": gs[0], "hidden_block_count_y": gs[1], "hidden_block_count_z": gs[2],
            "hidden_group_size_x": ls[0], "hidden_group_size_y": ls[1], "hidden_group_size_z": ls[2], "hidden_grid_dims": dims}
    for kind, offset in self.hidden: struct.pack_into("<" + _HIDDEN[kind], out, offset, fill.get(kind, 0))
    pkt = hsa.hsa_kernel_dispatch_packet_t.from_buffer(out, self.dispatch_packet_offset)
    pkt.setup = dims << hsa.HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS
    pkt.workgroup_size_x, pkt.workgroup_size_y, pkt.workgroup_size_z = ls
    pkt.grid_size_x, pkt.grid_size_y, pkt.grid_size_z = gs[0] * ls[0], gs[1] * ls[1], gs[2] * ls[2]
    pkt.private_segment_size, pkt.group_segment_size = self.private_segment_size, self.group_segment_size
    return out

  def __call__(self, *bufs, global_size=1, local_size=1, vals=(), wait: bool = False) -> float | None:
    gs, ls = launch_dims(global_size, "global_size"), launch_dims(local_size, "local_size")
    check_workgroup(self.name, gs, ls, self.max_workgroup_size, self.required_workgroup_size)
    return self.device.launch(self, self.kernargs(bufs, tuple(vals), gs, ls), gs, ls, wait)
