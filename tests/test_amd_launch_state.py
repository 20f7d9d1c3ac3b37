"""What a wave sees at launch on each emulated board (gfx1100, gfx1201), through the whole driver (PM4, mock CP, emulator), checked exactly
against values the test computes from the launch parameters: code object v5 hidden arguments (AMDGPUUsage,
"Code Object V5 Metadata": block counts, group sizes, remainders, global offsets, grid dims at offsets 0-64), the
wave size DISPATCH_INITIATOR.CS_W32_EN selects, and every user / system SGPR the kernel descriptor can enable."""
from __future__ import annotations

import numpy as np
import pytest

import hcq
from hcq.errors import HCQError
from tests.amd_boards import arch, asm_for, lanes, only  # noqa: F401 (arch: the board fixture)
from tests.tools import compile_opencl

HIDDEN = r"""
__kernel void hidden(__global uint *out) {
  const __constant uint *h = (const __constant uint *)__builtin_amdgcn_implicitarg_ptr();
  uint lid = __builtin_amdgcn_workitem_id_x() | __builtin_amdgcn_workitem_id_y() | __builtin_amdgcn_workitem_id_z();
  uint gid = __builtin_amdgcn_workgroup_id_x() | __builtin_amdgcn_workgroup_id_y() | __builtin_amdgcn_workgroup_id_z();
  if (lid == 0 && gid == 0) for (int i = 0; i < 32; i++) out[i] = h[i];
}
"""
# code object v5 hidden arguments: (offset, size) in the implicit argument area (AMDGPUUsage; SIDefines.h ImplicitArg)
V5 = {"block_count_x": (0, 4), "block_count_y": (4, 4), "block_count_z": (8, 4), "group_size_x": (12, 2), "group_size_y": (14, 2),
      "group_size_z": (16, 2), "remainder_x": (18, 2), "remainder_y": (20, 2), "remainder_z": (22, 2), "global_offset_x": (40, 8),
      "global_offset_y": (48, 8), "global_offset_z": (56, 8), "grid_dims": (64, 2), "dynamic_lds_size": (120, 4)}
SHAPES = [((7, 1, 1), (64, 1, 1)), ((3, 5, 1), (8, 4, 1)), ((2, 3, 4), (4, 2, 3)), ((1, 1, 2), (1, 1, 1)), ((1, 2, 1), (5, 1, 1)),
          ((1, 1, 1), (1, 6, 1)), ((4, 1, 1), (1, 1, 1))]


@pytest.fixture(scope="module")
def dev(arch):
  return hcq.Device(f"MOCKKFD+AMD::{arch}")


def expected_hidden(grid, block) -> dict[str, int]:
  """From the launch alone: hcq's global_size counts workgroups, so every workgroup is full (remainder 0), the grid
  starts at 0, and the grid's dimensions are those up to the last with more than one work-item (the HSA packet's)."""
  size = [g * l for g, l in zip(grid, block)]
  dims = 3 if size[2] > 1 else 2 if size[1] > 1 else 1
  out = {"grid_dims": dims, "dynamic_lds_size": 0}
  for i, a in enumerate("xyz"):
    out.update({f"block_count_{a}": grid[i], f"group_size_{a}": block[i], f"remainder_{a}": 0, f"global_offset_{a}": 0})
  return out


@pytest.mark.parametrize("grid,block", SHAPES)
def test_hidden_arguments(dev, tmp_path, grid, block):
  prg = dev.program(compile_opencl(HIDDEN, tmp_path, mcpu=dev.arch), "hidden")
  out = dev.alloc(128)
  out.copyin(np.full(32, 0xdeadbeef, np.uint32))
  prg(out, global_size=grid, local_size=block, wait=True)
  raw = out.copyout(np.empty(32, np.uint32)).tobytes()
  got = {k: int.from_bytes(raw[o:o + n], "little") for k, (o, n) in V5.items()}
  assert got == expected_hidden(grid, block)


def test_the_kernarg_segment_is_sized_by_the_metadata(dev, tmp_path):
  """The loader sizes the kernarg segment by the metadata's .kernarg_segment_size (ROCr's loader reads that key; the CP
  never reads the descriptor's kernarg_size): a descriptor that says 8 bytes, under metadata that places the hidden
  arguments past them, still gets every hidden argument exact."""
  from hcq.asm.codeobject import read_code_object
  from hcq.autogen import amdgpu_kd as kd
  co = compile_opencl(HIDDEN, tmp_path, mcpu=dev.arch)
  k = read_code_object(co).kernels["hidden"]
  assert k.metadata[".kernarg_segment_size"] > 8 and k.descriptor.kernarg_size == k.metadata[".kernarg_segment_size"]
  at = co.find(bytes(k.descriptor))
  assert at > 0 and co.count(bytes(k.descriptor)) == 1
  field = at + kd.struct_kernel_descriptor_t.kernarg_size.offset
  co = co[:field] + (8).to_bytes(4, "little") + co[field + 4:]
  prg = dev.program(co, "hidden")
  out = dev.alloc(128)
  grid, block = SHAPES[1]
  out.copyin(np.full(32, 0xdeadbeef, np.uint32))
  prg(out, global_size=grid, local_size=block, wait=True)
  raw = out.copyout(np.empty(32, np.uint32)).tobytes()
  assert {k: int.from_bytes(raw[o:o + n], "little") for k, (o, n) in V5.items()} == expected_hidden(grid, block)


def endpgm_program(dev, descriptor, name: str):
  """A kernel that only ends, with the given descriptor, loaded on `dev`."""
  from hcq.asm.elf_writer import KernelImage, write_code_object
  from hcq.asm.text import assemble
  return dev.program(write_code_object(dev.arch, [KernelImage(name, assemble("s_endpgm", dev.arch), descriptor, {".args": []})]), name)


def test_dispatch_packet_matches_the_launch(dev, tmp_path):
  """The AQL dispatch packet __builtin_amdgcn_dispatch_ptr() points at: dimensions, workgroup and grid sizes, segment
  sizes (hsa_kernel_dispatch_packet_t, read here at its ABI offsets)."""
  src = r"""
  __kernel void packet(__global uint *out) {
    __local uint lds[10];
    const __constant uint *p = (const __constant uint *)__builtin_amdgcn_dispatch_ptr();
    uint l = __builtin_amdgcn_workitem_id_x() | __builtin_amdgcn_workitem_id_y() | __builtin_amdgcn_workitem_id_z();
    uint g = __builtin_amdgcn_workgroup_id_x() | __builtin_amdgcn_workgroup_id_y() | __builtin_amdgcn_workgroup_id_z();
    lds[g % 10] = g;
    if ((l | g) == 0) for (int i = 0; i < 8; i++) out[i] = p[i];
    if ((l | g) == 0) out[8] = lds[0];
  }"""
  prg = dev.program(compile_opencl(src, tmp_path, mcpu=dev.arch), "packet")
  out = dev.alloc(64)
  for grid, block in SHAPES:
    prg(out, global_size=grid, local_size=block, wait=True)
    w = out.copyout(np.empty(16, np.uint32))
    size = [g * l for g, l in zip(grid, block)]
    dims = 3 if size[2] > 1 else 2 if size[1] > 1 else 1
    assert (w[0] >> 16) & 3 == dims, (grid, block)   # setup: dimensions in bits 1:0
    assert [w[1] & 0xffff, w[1] >> 16, w[2] & 0xffff] == list(block)
    assert list(w[3:6]) == size
    assert w[7] == 40   # group segment: the kernel's 10 uints of LDS


WAVE64 = r"""
__kernel void lanes(__global uint *out) {
  uint l = __builtin_amdgcn_workitem_id_x(), g = __builtin_amdgcn_workgroup_id_x();
  uint lane = __builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u));
  out[(g * 100 + l) * 2] = lane;
  out[(g * 100 + l) * 2 + 1] = __builtin_popcountl(__builtin_amdgcn_read_exec());
}
"""


def test_wave64_kernel_runs_in_wave64(dev, tmp_path):
  """A wave64 code object: the driver sets DISPATCH_INITIATOR.CS_W32_EN off and the emulated GPU runs 64-lane waves
  (the hardware takes the wave size from the initiator, not from the code object): a workgroup of 100 is a wave of
  64 lanes and one of 36."""
  co = compile_opencl(WAVE64, tmp_path, mcpu=dev.arch, extra=("-mwavefrontsize64",))
  prg = dev.program(co, "lanes")
  assert not prg.wave32
  out = dev.alloc(3 * 100 * 8)
  prg(out, global_size=(3,), local_size=(100,), wait=True)
  got = out.copyout(np.empty((3, 100, 2), np.uint32))
  l = np.arange(100)
  np.testing.assert_array_equal(got[..., 0], np.broadcast_to(l % 64, (3, 100)))
  np.testing.assert_array_equal(got[..., 1], np.broadcast_to(np.where(l < 64, 64, 36), (3, 100)))


def user_sgpr_kernel(arch: str) -> bytes:
  """A kernel with every user SGPR the descriptor can enable on gfx11 and gfx942 (but the private segment buffer), the
  workgroup ids X/Y/Z, workgroup info and the workitem ids in v0; it stores them all, and the first 8 dwords of the
  dispatch packet, at out + 256 * its workgroup's linear id (grid 2 x 3 x 4). gfx942 runs it in wave64 (GCN spellings)."""
  from hcq.asm.elf_writer import KernelImage, kernel_descriptor, write_code_object
  from hcq.asm.kernel import Kernel
  from hcq.asm.text import assemble
  from hcq.autogen import amdgpu_kd as kd
  store = asm_for(arch, "global_store_b32", "global_store_dword")
  stores = "\n".join(f"v_mov_b32 v2, s{r}\n{store} v1, v2, s[20:21] offset:{4 * i}"
                     for i, r in enumerate([*range(15), 22, *range(24, 32)]))
  loads = asm_for(arch, "s_load_b64 s[20:21], s[4:5], 0x0\n    s_load_b32 s22, s[4:5], 0x8\n    s_load_b256 s[24:31], s[0:1], 0x0",
                  "s_load_dwordx2 s[20:21], s[4:5], 0x0\n    s_load_dword s22, s[4:5], 0x8\n    s_load_dwordx8 s[24:31], s[0:1], 0x0")
  code = assemble(f"""
    {loads}
    s_waitcnt lgkmcnt(0)
    s_mul_i32 s23, s13, 3
    s_add_u32 s23, s23, s12
    s_mul_i32 s23, s23, 2
    s_add_u32 s23, s23, s11
    s_lshl_b32 s23, s23, 8
    s_add_u32 s20, s20, s23
    s_addc_u32 s21, s21, 0
    v_mov_b32 v1, 0
    {stores}
    v_mbcnt_lo_u32_b32 v3, -1, 0
    v_lshlrev_b32 v3, 2, v3
    {store} v3, v0, s[20:21] offset:128
    s_endpgm""", arch)
  k = Kernel("usgpr", args=[("out", "buffer"), ("magic", "u32")])
  args, size = k.layout()
  d = kernel_descriptor(vgprs=4, sgprs=32, kernarg_size=size, dispatch_ptr=True, queue_ptr=True, workgroup_ids=(True, True, True),
                        workitem_id_dims=3, arch=arch, wave32=lanes(arch) == 32)
  d.kernel_code_properties |= (kd.KERNEL_CODE_PROPERTY_ENABLE_SGPR_DISPATCH_ID | kd.KERNEL_CODE_PROPERTY_ENABLE_SGPR_FLAT_SCRATCH_INIT
                               | kd.KERNEL_CODE_PROPERTY_ENABLE_SGPR_PRIVATE_SEGMENT_SIZE)
  d.private_segment_fixed_size = 48
  d.compute_pgm_rsrc2 = (d.compute_pgm_rsrc2 & ~kd.COMPUTE_PGM_RSRC2_USER_SGPR_COUNT | 11 << kd.COMPUTE_PGM_RSRC2_USER_SGPR_COUNT_SHIFT
                         | kd.COMPUTE_PGM_RSRC2_ENABLE_SGPR_WORKGROUP_INFO)
  meta = {".args": args, ".vgpr_count": 4, ".sgpr_count": 32, ".wavefront_size": lanes(arch)}
  return write_code_object(arch, [KernelImage("usgpr", code, d, meta)])


@only("gfx1100", "gfx942")   # hand-written code; gfx12 kernels read their workgroup ids from TTMP7/TTMP9 (test_emu_gfx12)
def test_every_user_sgpr(dev):
  """AMDGPUUsage's initial wave state, in its order: dispatch ptr (s[0:1]), queue ptr, kernarg segment ptr, dispatch
  id, flat scratch init, private segment size (s10), then workgroup id X/Y/Z (s11-s13) and workgroup info (s14)."""
  prg = dev.program(user_sgpr_kernel(dev.arch), "usgpr")
  grid, block = (2, 3, 4), (4, 2, 2)
  out = dev.alloc(24 * 256)
  out.copyin(np.full(24 * 64, 0xdeadbeef, np.uint32))
  prg(out, global_size=grid, local_size=block, vals=(0x5eed1234,), wait=True)
  got = out.copyout(np.empty((4, 3, 2, 64), np.uint32))
  for z, y, x in np.ndindex(4, 3, 2):
    w = got[z, y, x]
    # dispatch ptr: the packet it points at describes this launch (setup dims, workgroup size, grid size, private size)
    assert (w[16] >> 16) & 3 == 3 and [w[17] & 0xffff, w[17] >> 16, w[18] & 0xffff] == list(block)
    assert list(w[19:22]) == [8, 6, 8] and w[22] == 48
    assert w[15] == 0x5eed1234                  # kernarg ptr: the value argument read through it
    assert list(w[2:4]) == [0, 0]               # queue ptr: hcq runs no AQL queue, so there is no amd_queue_t (0)
    assert list(w[6:10]) == [0, 0, 0, 0]        # dispatch id 0; flat scratch init 0 (gfx11 scratch: hcq.asm.emu.scratch)
    assert w[10] == 48                          # private segment size: the descriptor's private_segment_fixed_size
    assert list(w[11:14]) == [x, y, z]
    assert w[14] & 0x3f == 1                    # workgroup info: waves in the workgroup (bits 5:0)
    tid = np.arange(16)
    np.testing.assert_array_equal(w[32:48], tid % 4 | (tid // 4 % 2) << 10 | (tid // 8) << 20)


def test_workitem_id_y_with_two_dims(dev, tmp_path):
  """A kernel that reads workitem ids X and Y only: the compiler sets RSRC2.TIDIG_COMP_CNT to 1, and v0 still carries Y
  in bits 19:10 (AMDGPUUsage, "VGPR register set up order": the Y id is packed when the count is 1 or 2)."""
  src = r"""
  __kernel void xy(__global uint *out) {
    uint x = __builtin_amdgcn_workitem_id_x(), y = __builtin_amdgcn_workitem_id_y(), g = __builtin_amdgcn_workgroup_id_x();
    out[g * 32 + y * 8 + x] = y << 16 | x;
  }"""
  prg = dev.program(compile_opencl(src, tmp_path, mcpu=dev.arch), "xy")
  assert prg.rsrc2 >> 11 & 3 == 1, "the compiler no longer asks for exactly two workitem id dims"
  out = dev.alloc(3 * 32 * 4)
  prg(out, global_size=(3,), local_size=(8, 4, 1), wait=True)
  y, x = np.divmod(np.arange(32), 8)
  np.testing.assert_array_equal(out.copyout(np.empty((3, 32), np.uint32)), np.broadcast_to(y << 16 | x, (3, 32)))


@only("gfx1100", "gfx942")   # hand-written code; gfx12 kernels read their workgroup ids from TTMP7/TTMP9 (test_emu_gfx12)
@pytest.mark.parametrize("block", [200, 32, 64])
def test_workgroup_info_counts_the_waves_of_the_workgroup(dev, block):
  """RSRC2.TG_SIZE_EN: the system SGPR after the workgroup id holds the waves in the workgroup in bits 5:0 (AMDGPUUsage
  "SGPR register set up order", workgroup info), the same in every wave of it: 200 work-items are 7 waves of 32 or
  4 of 64 (gfx1100 in both wave sizes, gfx942 in wave64, the only one it runs)."""
  from hcq.asm.elf_writer import KernelImage, kernel_descriptor, write_code_object
  from hcq.asm.text import assemble
  from hcq.autogen import amdgpu_kd as kd
  arch = dev.arch
  code = assemble(f"""
    {asm_for(arch, "s_load_b64", "s_load_dwordx2")} s[4:5], s[0:1], 0x0
    s_mul_i32 s6, s2, {4 * block}
    s_waitcnt lgkmcnt(0)
    s_add_u32 s4, s4, s6
    s_addc_u32 s5, s5, 0
    v_lshlrev_b32 v1, 2, v0
    v_mov_b32 v2, s3
    {asm_for(arch, "global_store_b32", "global_store_dword")} v1, v2, s[4:5]
    s_endpgm""", arch)
  args = [{".name": "out", ".offset": 0, ".size": 8, ".value_kind": "global_buffer", ".address_space": "global"}]
  for wave in sorted({lanes(arch), 64}):
    d = kernel_descriptor(vgprs=3, sgprs=8, kernarg_size=8, arch=arch, wave32=wave == 32)
    d.compute_pgm_rsrc2 |= kd.COMPUTE_PGM_RSRC2_ENABLE_SGPR_WORKGROUP_INFO
    prg = dev.program(write_code_object(arch, [KernelImage("tg", code, d, {".args": args, ".kernarg_segment_size": 8,
                                                                           ".wavefront_size": wave})]), "tg")
    out = dev.alloc(2 * block * 4)
    out.copyin(np.full(2 * block, 0xdeadbeef, np.uint32))
    prg(out, global_size=(2,), local_size=(block,), wait=True)
    got = out.copyout(np.empty(2 * block, np.uint32))
    np.testing.assert_array_equal(got & 0x3f, -(-block // wave), err_msg=f"wave{wave}")


def test_private_segment_buffer_is_refused(dev):
  """The private segment buffer (4 user SGPRs: scratch before architected flat scratch) is not provided on gfx11+ nor on
  gfx942 (which has architected flat scratch too): a clear error, not garbage in s[0:3], and the device goes on working."""
  from hcq.asm.elf_writer import kernel_descriptor
  from hcq.autogen import amdgpu_kd as kd
  d = kernel_descriptor(vgprs=1, arch=dev.arch, wave32=lanes(dev.arch) == 32)
  d.kernel_code_properties |= kd.KERNEL_CODE_PROPERTY_ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER
  with pytest.raises(HCQError, match="private segment buffer"):
    endpgm_program(dev, d, "psb")(global_size=(1,), local_size=(1,), wait=True)
  endpgm_program(dev, kernel_descriptor(vgprs=1, arch=dev.arch, wave32=lanes(dev.arch) == 32), "ok")(global_size=(1,), local_size=(1,), wait=True)


@only("gfx942")
def test_accumulation_registers_start_at_rsrc3_accum_offset(dev):
  """gfx942's AGPRs follow the VGPRs at COMPUTE_PGM_RSRC3.ACCUM_OFFSET (AMDGPUUsage, gfx90a+), which gfx9 keeps at
  0x2e2d where gfx11 has RSRC3 at 0x2e28 (gc_9_4_3_offset.h): a kernel of 8 VGPRs whose a0 would alias v4 if the
  offset were lost (read as 0) gets its lane id back, not the 77 written to v4."""
  from hcq.asm.kernel import Kernel
  prg = dev.program(Kernel("agpr", dev.arch, args=[("out", "buffer")]).add("""s_load_dwordx2 s[2:3], s[0:1], 0x0
v_accvgpr_write_b32 a0, v0
v_mov_b32 v4, 77
v_mov_b32 v7, 0
v_accvgpr_read_b32 v2, a0
v_lshlrev_b32 v1, 2, v0
s_waitcnt lgkmcnt(0)
global_store_dword v1, v2, s[2:3]
s_endpgm""").to_elf())
  assert prg.rsrc3 & 0x3f == 8 // 4 - 1   # ACCUM_OFFSET: (offset / 4) - 1
  out = dev.alloc(64 * 4)
  prg(out, global_size=1, local_size=64, wait=True)
  np.testing.assert_array_equal(out.copyout(np.empty(64, np.uint32)), np.arange(64))


@only("gfx942")
def test_a_wave32_kernel_is_refused_on_gfx9(dev):
  """gfx9 has no wave32 (gc_9_4_3_sh_mask.h: no DISPATCH_INITIATOR.CS_W32_EN): a wave32 descriptor is refused at load,
  naming the kernel, before any packet is written."""
  from hcq.asm.elf_writer import kernel_descriptor
  with pytest.raises(HCQError, match="w32: gfx9 runs wave64 only"):
    endpgm_program(dev, kernel_descriptor(vgprs=1), "w32")   # the refused launch left the device usable (no timeline value unsignalled)


@only("gfx1100")   # gc_12_0_0's RSRC3 has no TRAP_ON_START/END: INST_PREF_SIZE covers bits 4-11
@pytest.mark.parametrize("field", ["trap_on_start", "trap_on_end"])
def test_rsrc3_trap_fields_reach_the_gpu(dev, field):
  """COMPUTE_PGM_RSRC3 as the descriptor gives it reaches the GPU: a wave that must trap at its start or end, with no
  trap handler on the emulated GPU, is a fault naming the field (so a driver that writes RSRC3 as 0 is seen); the
  device works afterwards."""
  from hcq.asm.elf_writer import kernel_descriptor
  from hcq.autogen.am import gc_11_0_0 as gc
  from hcq.errors import GPUFault
  d = kernel_descriptor(vgprs=1)
  d.compute_pgm_rsrc3 = gc.regCOMPUTE_PGM_RSRC3.encode(**{field: 1})
  prg = endpgm_program(dev, d, "t")
  assert prg.rsrc3 == d.compute_pgm_rsrc3
  with pytest.raises(GPUFault, match=field.upper()):
    prg(global_size=(1,), local_size=(32,), wait=True)


def test_rsrc3_shared_vgprs_in_wave32_are_refused():
  """SHARED_VGPR_CNT counts VGPR blocks a wave64 shares between its halves; a wave32 dispatch with any is refused."""
  from hcq.asm.emu import Dispatch, VirtualMemory, launch
  from hcq.asm.text import assemble
  code = assemble("s_endpgm", "gfx1100") + bytes(16)
  mem = VirtualMemory()
  mem.map(0x10000, len(code), np.frombuffer(code, np.uint8).copy())
  with pytest.raises(ValueError, match="SHARED_VGPR_CNT=2 in a wave32"):
    launch(mem, Dispatch(0x10000, 0x60af0001, 0x9c, 2, [0] * 4, (1, 1, 1), (32, 1, 1), True))
  launch(mem, Dispatch(0x10000, 0x60af0001, 0x9c, 2, [0] * 4, (1, 1, 1), (64, 1, 1), False))   # wave64: allowed
