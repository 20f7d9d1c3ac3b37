"""The emulator as a shader core: dispatch() from the mock CP's DispatchState, the mock device end to end, and the
debugging hooks (trace one wave, state dump on a fault, instruction limit)."""
import numpy as np
import pytest

from tests.test_emu_corpus import compile_cl

SRC = r"""
__kernel void scale(__global float* a, float s) { int i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x(); a[i] = a[i] * s; }
__kernel void oob(__global int* a) { int i = __builtin_amdgcn_workitem_id_x(); a[i * 4096] = i; }
__kernel void spin(__global int* a) { while (a[0] == 0) {} }
"""


@pytest.fixture(scope="module")
def co(tmp_path_factory):
  from hcq.asm.codeobject import read_code_object
  d = tmp_path_factory.mktemp("emud")
  (d / "k.cl").write_text(SRC)
  return read_code_object(compile_cl(str(d / "k.cl"), str(d)))


def test_dispatch_from_mock_state(co):
  from hcq.asm.emu import VirtualMemory, dispatch
  from hcq.autogen.am import gc_11_0_0 as gc
  from hcq.drivers.mock.amdgpu.cp import DispatchState
  k = co.kernels["scale"]
  mem = VirtualMemory()
  code_va, buf_va, karg_va = 0x100000, 0x200000, 0x300000
  image = np.frombuffer(co.image_at(code_va), np.uint8).copy()
  mem.map(code_va, image.size, image, writable=False)
  data = np.arange(128, dtype=np.float32)
  mem.map(buf_va, data.nbytes, data.view(np.uint8))
  karg = np.zeros(64, np.uint8)
  karg[:8] = np.frombuffer(np.uint64(buf_va).tobytes(), np.uint8); karg[8:12] = np.frombuffer(np.float32(3).tobytes(), np.uint8)
  mem.map(karg_va, karg.size, karg)
  reg = lambda r: 0x1260 + r.offset
  entry = code_va + k.code_offset
  d = k.descriptor
  sh = {reg(gc.regCOMPUTE_PGM_LO): (entry >> 8) & 0xffffffff, reg(gc.regCOMPUTE_PGM_HI): entry >> 40,
        reg(gc.regCOMPUTE_PGM_RSRC1): d.compute_pgm_rsrc1, reg(gc.regCOMPUTE_PGM_RSRC2): d.compute_pgm_rsrc2,
        reg(gc.regCOMPUTE_PGM_RSRC3): d.compute_pgm_rsrc3,
        reg(gc.regCOMPUTE_NUM_THREAD_X): 64, reg(gc.regCOMPUTE_NUM_THREAD_Y): 1, reg(gc.regCOMPUTE_NUM_THREAD_Z): 1}
  nuser = gc.regCOMPUTE_PGM_RSRC2.decode(d.compute_pgm_rsrc2)["user_sgpr"]
  user = [0] * nuser
  user[0], user[1] = karg_va & 0xffffffff, karg_va >> 32   # this kernel asks for the kernarg pointer only
  for i, u in enumerate(user): sh[reg(gc.regCOMPUTE_USER_DATA_0) + i] = u
  dispatch(mem, DispatchState((2, 1, 1), 1 | (1 << 15), sh))
  assert (data == np.arange(128) * 3).all()


def test_mock_device_end_to_end(co, tmp_path):
  import hcq
  path = tmp_path / "k.cl"
  path.write_text(SRC)
  dev = hcq.Device("MOCKKFD+AMD")
  code = compile_cl(str(path), str(tmp_path))
  prg = dev.program(code, "scale")
  buf = dev.alloc(256 * 4)
  x = np.arange(256, dtype=np.float32)
  dev.copy_from_host(buf, x)
  prg(buf, global_size=(4,), local_size=(64,), vals=(0.5,), wait=True)
  out = np.empty(256, np.float32)
  dev.copy_to_host(out, buf)
  assert (out == x * 0.5).all()


def test_fault_reports_address_pc_and_wave_state(co):
  from hcq.asm.emu import PageFault, run
  a = np.zeros(64, np.int32)
  with pytest.raises(PageFault) as e:
    run(co, [a], (1,), (64,), kernel="oob")
  assert e.value.write and e.value.pc is not None and "exec=" in e.value.state


def test_instruction_limit_and_trace(co):
  from hcq.asm.emu import InstructionLimit, run
  seen = []
  with pytest.raises(InstructionLimit) as e:
    run(co, [np.zeros(4, np.int32)], (1,), (32,), kernel="spin", max_instructions=500, trace=lambda *a: seen.append(a), trace_wave=0)
  assert "s_cbranch" in e.value.state or e.value.pc is not None
  assert seen and all(len(t) == 4 for t in seen)
  assert any(w for _, _, text, w in seen if text.startswith("s_load"))   # the trace names the registers an instruction wrote


def test_trace_of_a_finished_kernel(co):
  from hcq.asm.emu import run
  lines = []
  run(co, [np.ones(64, np.float32), np.float32(2)], (1,), (64,), kernel="scale", trace=lambda w, pc, text, writes: lines.append((pc, text, writes)), trace_wave=0)
  texts = [t for _, t, _ in lines]
  assert texts[-1] == "s_endpgm" and any(t.startswith("global_store") for t in texts)
  assert any(any(x.startswith("v") for x in writes) for _, t, writes in lines if t.startswith("v_mul_f32"))


def test_run_without_metadata_uses_natural_alignment(co):
  import copy
  from hcq.asm.emu import run
  bare = copy.deepcopy(co)
  k = bare.kernels["scale"]
  k.args, k.metadata = [], {}
  a = np.arange(64, dtype=np.float32)
  run(bare, [a, np.float32(3)], (1,), (64,), kernel="scale")   # pointer at 0, float at 8: as the metadata says
  assert (a == np.arange(64) * 3).all()


def test_run_argument_errors(co):
  from hcq.asm.emu import run
  with pytest.raises(TypeError, match="takes 2 arguments"):
    run(co, [np.zeros(4, np.float32)], (1,), (4,), kernel="scale")
  with pytest.raises(ValueError, match="pass kernel="):
    run(co, [], (1,), (1,))
  with pytest.raises(ValueError, match="code object is for gfx1100, not gfx1201"):
    run(co, [np.zeros(64, np.float32), np.float32(2)], (1,), (64,), kernel="scale", arch="gfx1201")


def test_arch_comes_from_the_code_object(tmp_path):
  """run() takes the architecture from EF_AMDGPU_MACH: the same source built for gfx1201 runs as gfx1201 code (TTMP9
  workgroup ids, s_wait_* counters), and an architecture the emulator does not run is refused by name."""
  from hcq.asm.codeobject import read_code_object
  from hcq.asm.emu import run
  (tmp_path / "k.cl").write_text(SRC)
  co12 = read_code_object(compile_cl(str(tmp_path / "k.cl"), str(tmp_path), ["-mcpu=gfx1201"]))
  assert co12.arch == "gfx1201"
  a = np.arange(256, dtype=np.float32)
  run(co12, [a, np.float32(3)], (4,), (64,), kernel="scale")
  assert (a == np.arange(256) * 3).all()
  co9 = read_code_object(compile_cl(str(tmp_path / "k.cl"), str(tmp_path), ["-mcpu=gfx90a"]))
  with pytest.raises(ValueError, match="runs gfx1100, gfx1201, gfx942, not gfx90a"):
    run(co9, [a, np.float32(3)], (4,), (64,), kernel="scale")


def test_small_batches_give_the_same_results(tmp_path):
  """Workgroups split over many lockstep batches (one per batch here): LDS, barriers and the trace's wave numbering hold."""
  from hcq.asm.codeobject import read_code_object
  from hcq.asm.emu import run
  from tests.test_emu_corpus import compile_cl
  (tmp_path / "r.cl").write_text(r"""
__kernel void reduce(__global float* out, __global const float* in) {
  __local float s[64]; int l = __builtin_amdgcn_workitem_id_x();
  s[l] = in[__builtin_amdgcn_workgroup_id_x() * 64 + l];
  for (int k = 32; k > 0; k >>= 1) { __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); __builtin_amdgcn_s_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup"); if (l < k) s[l] += s[l + k]; }
  if (l == 0) out[__builtin_amdgcn_workgroup_id_x()] = s[0]; }""")
  co = read_code_object(compile_cl(str(tmp_path / "r.cl"), str(tmp_path)))
  x = np.arange(64 * 8, dtype=np.float32)
  outs, seen = [], []
  for batch in (256 << 20, 1):
    out = np.zeros(8, np.float32)
    r = run(co, [out, x], (8,), (64,), batch_bytes=batch, trace=lambda w, *a: seen.append(w), trace_wave=13)
    outs.append(out)
  assert (outs[0] == outs[1]).all() and (outs[0] == x.reshape(8, 64).sum(1)).all()
  assert set(seen) == {13} and r.stats.instructions > 0


@pytest.mark.parametrize("arch,clamp_ieee", [("gfx1100", 1), ("gfx942", 1), ("gfx1201", 0)])
def test_rsrc1_is_decoded_with_the_family_table(arch, clamp_ieee):
  """RSRC1 bits 21 and 23 are DX10_CLAMP and IEEE_MODE on gfx9 and gfx11 but WG_RR_EN and DISABLE_PERF on gfx12
  (Linux amdgpu gc_12_0_0_sh_mask.h): only there do they not reach MODE."""
  from hcq.asm.emu.dispatch import _plan
  plan = _plan(1 << 21 | 1 << 23 | 0xc0 << 12, 0, (64, 1, 1), arch != "gfx942", None, 8 if arch == "gfx942" else None, arch)
  assert (plan.mode & 0xff, plan.mode >> 8 & 1, plan.mode >> 9 & 1) == (0xc0, clamp_ieee, clamp_ieee)
