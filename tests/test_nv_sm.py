"""The emulated SM's parser and executor on hand-written PTX: errors with name:line:col, faults with the address,
kernel and PTX line, divergence with exit and bar.sync, warp operations, and a fuzz of the parser."""
from __future__ import annotations
import random

import numpy as np
import pytest

from hcq.asm.emu.memory import VirtualMemory
from hcq.drivers.mock.nv.sm import PTXError, PTXModule, SMFault
from tests.nv_sm_tools import launch

HEAD = ".version 8.0\n.target sm_90\n.address_size 64\n"


def kernel(body: str, params: str = ".param .u64 out", regs: str = ".reg .b32 %r<20>;\n.reg .b64 %rd<20>;\n.reg .pred %p<8>;\n.reg .f32 %f<8>;") -> PTXModule:
  return PTXModule.parse(HEAD + f".visible .entry k({params})\n{{\n{regs}\n{body}\n}}\n", "t.ptx")


def run1(body: str, n: int = 32, block: int | None = None, dtype=np.uint32, **kw) -> np.ndarray:
  """Run k(out) over n threads; each thread's `%r1` (or what the body stores) lands in out[tid]."""
  out = np.zeros(n, dtype)
  mod = kernel("ld.param.u64 %rd1, [out];\nmov.u32 %r0, %tid.x;\nmov.u32 %r9, %ctaid.x;\nmov.u32 %r8, %ntid.x;\n"
               "mad.lo.u32 %r0, %r9, %r8, %r0;\nmul.wide.u32 %rd2, %r0, 4;\nadd.s64 %rd3, %rd1, %rd2;\n" + body +
               "\nst.global.u32 [%rd3], %r1;\nret;")
  b = block or n
  launch(mod, "k", [out], (n // b,), (b,), **kw)
  return out


# --- parsing ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,where,what", [
  (HEAD + ".visible .entry k()\n{\n  mov.u32 %r1, 1;\n}", "t.ptx:6:3", "register %r1 is not declared"),
  (HEAD + ".visible .entry k()\n{\n.reg .b32 %r<2>;\n  bra NOWHERE;\n}", "t.ptx:7:3", "undefined label 'NOWHERE'"),
  (HEAD + ".visible .entry k()\n{\n.reg .b32 %r<2>;\n  mov.u32 %r1, 0q12;\n}", "t.ptx:7:16", "'0q12' is not a valid number"),
  (HEAD + ".visible .entry k()\n{\n.reg .b32 %r<2>;\n  mov.u32 %r1 1;\n}", "t.ptx:7:15", "expected ',' or ';'"),
  (".target sm_90\n.visible .entry k() { ret; }", "t.ptx:1:1", "missing .version"),
  (".version 8.0\n.target gfx1100\n", "t.ptx:2:1", "is not a PTX target"),
  (HEAD + ".visible .entry k()\n{\n.reg .b32 %r<2>;\n  mov.u32 %r1, 09;\n}", "t.ptx:7:16", "not a valid number"),
  (HEAD + ".visible .entry k()\n{\n.reg .b32 %r<2>;\n  mov.u32 %r1, 1;\n", "t.ptx:7:", "no closing"),
  (HEAD + ".const .u64 p = q;\n", "t.ptx:4:17", "a variable's address initialises only a .global"),
  (HEAD + ".visible .entry k()\n{\n.reg .b32 %r<2>;\n L: L: ret;\n}", "t.ptx:7:5", "label 'L' defined twice"),
])
def test_parse_errors_name_line_column(text, where, what):
  with pytest.raises(PTXError) as e: PTXModule.parse(text, "t.ptx")
  assert str(e.value).startswith(where) and what in str(e.value), str(e.value)


def test_parameters_laid_out_as_ptxas_does():
  mod = kernel("ret;", ".param .u8 a, .param .u64 b, .param .f32 c, .param .align 16 .b8 s[20], .param .u16 d")
  assert mod.kernels["k"].params == [("a", 0, 1), ("b", 8, 8), ("c", 16, 4), ("s", 32, 20), ("d", 52, 2)]
  # .align after .ptr is the pointee's (LLVM's `ptr addrspace(1) align 16`): ptxas 13 still puts these at 0, 8, 16
  mod = kernel("ret;", ".param .u8 c, .param .u64 .ptr .global .align 16 p, .param .u64 .ptr .align 16 q")
  assert mod.kernels["k"].params == [("c", 0, 1), ("p", 8, 8), ("q", 16, 8)]


def test_immediates_in_every_form():
  body = "\n".join(f"mov.b32 %r{i + 2}, {v};" for i, v in enumerate(["0x10", "010", "0b101", "17U", "-3", "0f3F800000"]))
  body += "\nadd.u32 %r1, %r2, %r3;\nadd.u32 %r1, %r1, %r4;\nadd.u32 %r1, %r1, %r5;\nadd.u32 %r1, %r1, %r6;\nxor.b32 %r1, %r1, %r7;"
  want = ((16 + 8 + 5 + 17 - 3) & 0xffffffff) ^ 0x3f800000
  assert (run1(body) == want).all()


def test_hex_double_immediate_and_vector_operands():
  r = run1("mov.b64 %rd5, 0d4000000000000000;\nmov.b64 {%r1, %r2}, %rd5;\nmov.b64 %rd6, {%r2, %r1};\ncvt.u32.u64 %r1, %rd6;")
  assert (r == 0x40000000).all()


def test_module_globals_are_read_where_the_launch_says_they_are():
  """A module .global has no storage in the SM: the launch names its address (where a loader placed it); without one
  the kernel faults where it names the variable."""
  mod = PTXModule.parse(HEAD + ".global .align 4 .u32 g[2] = {7, 9};\n.global .u64 pg = generic(g);\n"
                        ".visible .entry k(.param .u64 out)\n{\n.reg .b32 %r<4>;\n.reg .b64 %rd<4>;\n"
                        "ld.global.u32 %r1, [g+4]; ld.param.u64 %rd1, [out]; st.global.u32 [%rd1], %r1; ret;\n}\n", "t.ptx")
  assert set(mod.globals) == {"g", "pg"} and mod.globals["pg"].init == [("g", 0)]
  vm, data, out = VirtualMemory(), np.array([5, 6], np.uint32), np.zeros(4, np.uint8)
  vm.map(0x10000, 8, data.view(np.uint8)); vm.map(0x20000, 4, out); vm.map(0x30000, 8, np.frombuffer(np.uint64(0x20000).tobytes(), np.uint8).copy())
  with pytest.raises(SMFault, match=r"kernel k, PTX line 10: module variable 'g' has no address"):
    mod.launch("k", vm, (1, 1, 1), (1, 1, 1), params_va=0x30000)
  mod.launch("k", vm, (1, 1, 1), (1, 1, 1), params_va=0x30000, variables={"g": 0x10000})
  assert out.view(np.uint32)[0] == 6   # the data at the address given, not the PTX's initialiser


def test_a_global_initialised_with_an_address_and_offset_points_there():
  """`__device__ int *p = &x[1];` (PTX `.global .u64 p = generic(x)+4;`): the launch fills the pointer with x's address
  plus the offset, as the loader's R_CUDA_G64 relocation does, and the kernel reads x[1] through it."""
  mod = PTXModule.parse(HEAD + ".global .align 4 .u32 x[2] = {5, 7};\n.global .align 8 .u64 p = generic(x)+4;\n"
                        ".visible .entry k(.param .u64 out)\n{\n.reg .b32 %r<4>;\n.reg .b64 %rd<4>;\n"
                        "ld.global.u64 %rd2, [p]; ld.global.u32 %r1, [%rd2]; ld.param.u64 %rd1, [out]; st.global.u32 [%rd1], %r1; ret;\n}\n", "t.ptx")
  assert mod.globals["p"].init == [("x", 4)]
  out = np.zeros(1, np.uint32)
  launch(mod, "k", [out], (1,), (1,))
  assert out[0] == 7


# --- faults -------------------------------------------------------------------------------------------------------
def test_unmapped_access_is_an_mmu_fault_with_address_kernel_and_line():
  with pytest.raises(SMFault) as e: run1("mov.u64 %rd4, 0xdead0000;\nld.global.u32 %r1, [%rd4+16];")
  f = e.value
  assert (f.kind, f.address, f.kernel, f.ptx_line) == ("mmu", 0xdead0010, "k", 18), str(f)


def test_misaligned_access_faults():
  with pytest.raises(SMFault) as e: run1("ld.global.u32 %r1, [%rd3+2];")
  assert e.value.kind == "misaligned" and "not 4-byte aligned" in str(e.value)


def test_shared_access_outside_the_window_faults():
  mod = kernel(".shared .align 4 .b8 sm[64];\nmov.u32 %r0, %tid.x;\nshl.b32 %r0, %r0, 2;\nst.shared.u32 [%r0], %r0;\nret;",
               regs=".reg .b32 %r<4>;")
  launch(mod, "k", [np.zeros(1, np.uint64)], (1,), (16,))
  with pytest.raises(SMFault) as e: launch(mod, "k", [np.zeros(1, np.uint64)], (1,), (17,))
  assert e.value.kind == "shared" and e.value.address == 64


SHARED_ROWS = """.shared .align 4 .b8 sm[32];
ld.param.u64 %rd1, [out];\nmov.u32 %r1, %tid.x;\nmov.u32 %r2, %tid.y;\nmov.u32 %r3, %ctaid.x;
mul.lo.u32 %r4, %r3, 100;\nmad.lo.u32 %r4, %r2, 10, %r4;\nadd.u32 %r4, %r4, %r1;
shl.b32 %r5, %r2, 4;\nshl.b32 %r6, %r1, 2;\nadd.u32 %r6, %r5, %r6;\nst.shared.u32 [%r6], %r4;\nbar.sync 0;
ld.shared.u32 %r7, [%r5+OFF];
mad.lo.u32 %r8, %r3, 8, %r1;\nmad.lo.u32 %r8, %r2, 4, %r8;\nmul.wide.u32 %rd2, %r8, 4;\nadd.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r7;\nret;"""


def test_shared_load_of_a_row_reads_each_blocks_window():
  """ld.shared's fast form loads once per row per block (the address varies with %tid.y only): every thread still
  gets its own block's word; past the window it faults with the address, as the general path does."""
  from hcq.drivers.mock.nv.sm.fast import compile_kernel
  mod = kernel(SHARED_ROWS.replace("OFF", "12"))
  k = mod.kernels["k"]
  pc = next(i for i, ins in enumerate(k.instrs) if ins.op == "ld" and "shared" in ins.mods)
  assert compile_kernel(k)[pc] is not None
  out = np.zeros(3 * 8, np.uint32)
  launch(mod, "k", [out], (3,), (4, 2))
  c, y = np.meshgrid(np.arange(3), np.arange(2), indexing="ij")
  assert out.tolist() == np.repeat((c * 100 + y * 10 + 3).reshape(-1), 4).tolist()
  with pytest.raises(SMFault) as e: launch(kernel(SHARED_ROWS.replace("OFF", "20")), "k", [out], (3,), (4, 2))
  assert e.value.kind == "shared" and e.value.address == 36 and e.value.ptx_line == k.instrs[pc].line
  v2 = kernel(SHARED_ROWS.replace("ld.shared.u32 %r7, [%r5+OFF];", "ld.shared.v2.u32 {%r7, %r9}, [%r5+8];\nsub.u32 %r7, %r9, %r7;"))
  assert all(f is not None for f, ins in zip(compile_kernel(v2.kernels["k"]), v2.kernels["k"].instrs) if ins.op == "ld" and "shared" in ins.mods)
  launch(v2, "k", [out], (3,), (4, 2))
  assert out.tolist() == [1] * 24   # word 3 minus word 2 of the thread's own row


def test_too_little_shared_memory_is_refused_local_memory_is_the_callers_check():
  """Shared memory below the static declarations is refused (ptxas keeps even unused .shared: 512 bytes smem for an
  unused 512-byte array). A PTX .local depot may live in registers after ptxas (0-byte stack frame), so a launch with
  no local memory still runs, each thread getting the depot, and only an access past it faults."""
  mod = kernel(".shared .align 4 .b8 sm[64];\n.local .align 4 .b8 depot[32];\nmov.u32 %r1, 7;\nst.local.u32 [depot+28], %r1;\n"
               "ld.local.u32 %r2, [depot+28];\nld.param.u64 %rd1, [out];\nst.global.u32 [%rd1], %r2;\nret;")
  with pytest.raises(SMFault, match="gives 32 bytes of shared memory"): launch(mod, "k", [np.zeros(1, np.uint64)], (1,), (1,), shared_bytes=32)
  out = np.zeros(1, np.uint64)
  launch(mod, "k", [out], (1,), (1,), local_bytes=0)
  assert out[0] == 7
  bad = kernel(".local .align 4 .b8 depot[32];\nmov.u32 %r1, 7;\nst.local.u32 [depot+32], %r1;\nret;")
  with pytest.raises(SMFault) as e: launch(bad, "k", [np.zeros(1, np.uint64)], (1,), (1,), local_bytes=0)
  assert e.value.kind == "local" and e.value.address == 32


def test_misplaced_parameters_read_what_the_va_space_holds():
  """The SM reads parameters through the VA space at params_va: pointing it elsewhere faults or reads other bytes."""
  mod = kernel("ld.param.u64 %rd1, [out];\nst.global.u32 [%rd1], 7;\nret;")
  vm = VirtualMemory()
  with pytest.raises(SMFault) as e: mod.launch("k", vm, (1, 1, 1), (1, 1, 1), params_va=0x5000)
  assert e.value.kind == "mmu" and e.value.address == 0x5000


def test_trap_and_exit():
  with pytest.raises(SMFault) as e: run1("setp.eq.u32 %p1, %r0, 5;\n@%p1 trap;\nmov.u32 %r1, 1;")
  assert e.value.kind == "trap" and e.value.ptx_line == 18
  assert (run1("setp.lt.u32 %p1, %r0, 5;\n@%p1 exit;\nmov.u32 %r1, 9;") == np.where(np.arange(32) < 5, 0, 9)).all()


def test_unsupported_instruction_names_itself():
  with pytest.raises(SMFault, match="call .* not supported"): run1("call.uni foo, (%r1);")


# --- divergence, barriers, warps ----------------------------------------------------------------------------------
GRID_IDS = """ld.param.u64 %rd1, [out];
mov.u32 %r1, %ctaid.x;\nmov.u32 %r2, %ctaid.y;\nmov.u32 %r3, %ctaid.z;\nmov.u32 %r4, %tid.x;\nmov.u32 %r5, %tid.y;\nmov.u32 %r6, %tid.z;
mov.u32 %r7, %nctaid.x;\nmov.u32 %r8, %nctaid.y;\nmov.u32 %r9, %ntid.x;\nmov.u32 %r10, %ntid.y;\nmov.u32 %r11, %ntid.z;
mad.lo.u32 %r12, %r3, %r8, %r2;\nmad.lo.u32 %r12, %r12, %r7, %r1;
mad.lo.u32 %r13, %r6, %r10, %r5;\nmad.lo.u32 %r13, %r13, %r9, %r4;
mul.lo.u32 %r14, %r9, %r10;\nmul.lo.u32 %r14, %r14, %r11;\nmad.lo.u32 %r12, %r12, %r14, %r13;
shl.b32 %r15, %r2, 4;\nor.b32 %r15, %r15, %r1;\nshl.b32 %r16, %r3, 8;\nor.b32 %r15, %r15, %r16;
shl.b32 %r16, %r4, 12;\nor.b32 %r15, %r15, %r16;\nshl.b32 %r16, %r5, 16;\nor.b32 %r15, %r15, %r16;
shl.b32 %r16, %r6, 20;\nor.b32 %r15, %r15, %r16;
min.u32 %r17, %r15, 0x7fffffff;
and.b32 %r18, %r4, 1;\nsetp.eq.u32 %p1, %r18, 1;\n@%p1 add.u32 %r17, %r17, 0x1000000;
mul.wide.u32 %rd2, %r12, 4;\nadd.s64 %rd3, %rd1, %rd2;\nst.global.u32 [%rd3], %r17;\nret;"""


@pytest.mark.parametrize("batch", [1 << 16, 12 * 6, 5 * 6])   # the whole grid; whole rows of x; blocks across rows
def test_grid_and_block_ids_in_every_batch_shape(monkeypatch, batch):
  """Every thread's %ctaid and %tid, combined by element-wise forms on the registers' compact shapes, read by the
  general path (min) and written under a divergent mask, land at its linear index, however blocks are batched."""
  from hcq.drivers.mock.nv.sm import executor
  monkeypatch.setattr(executor, "BATCH_THREADS", batch)
  (gx, gy, gz), (bx, by, bz) = (4, 3, 2), (3, 2, 1)
  out = np.zeros(gx * gy * gz * bx * by * bz, np.uint32)
  launch(kernel(GRID_IDS), "k", [out], (gx, gy, gz), (bx, by, bz))
  cz, cy, cx, tz, ty, tx = np.meshgrid(*(np.arange(n, dtype=np.uint32) for n in (gz, gy, gx, bz, by, bx)), indexing="ij")
  want = cx | cy << 4 | cz << 8 | tx << 12 | ty << 16 | tz << 20
  assert out.tolist() == (want + (tx & 1) * np.uint32(0x1000000)).reshape(-1).tolist()


def test_flat_register_view_of_compact_registers():
  """Code that handles whole registers (the carry flag, call frames) sees T lanes in thread order through b.regs;
  what it writes is stored compact again (a uniform value as one element)."""
  from hcq.drivers.mock.nv.sm.executor import Batch, Executor, Launch
  mod = kernel("ret;")
  b = Batch(Executor(mod, mod.kernels["k"], VirtualMemory(), Launch((2, 1, 1), (4, 2, 1), 0, 0, 0), None), 0, 2)
  b.compact["%r1"] = b.special("%tid.y")
  assert b.compact["%r1"].size == 2 and b.regs["%r1"].tolist() == [0, 0, 0, 0, 1, 1, 1, 1] * 2
  b.regs["%r2"] = np.arange(16, dtype=np.uint32)
  assert b.compact["%r2"].shape == b.shape and b.regs.get("%r2").tolist() == list(range(16))
  b.regs["%r3"] = np.broadcast_to(np.uint32(7), (16,))
  assert b.compact["%r3"].size == 1 and "%r3" in b.regs and b.regs.get("%r9") is None


def test_divergent_paths_reconverge():
  body = """setp.lt.u32 %p1, %r0, 10;
@%p1 bra LOW;
mul.lo.u32 %r1, %r0, 3;
bra.uni DONE;
LOW:
add.u32 %r1, %r0, 100;
DONE:
add.u32 %r1, %r1, 1;"""
  assert (run1(body) == np.where(np.arange(32) < 10, np.arange(32) + 101, np.arange(32) * 3 + 1)).all()


def test_barrier_with_exited_threads_and_divergent_arrival():
  """Half the block exits; the rest meet at bar.sync from two different paths (then and else), and see each other's
  shared-memory writes after it."""
  mod = kernel("""ld.param.u64 %rd1, [out];
mov.u32 %r0, %tid.x;
setp.ge.u32 %p1, %r0, 64;
@%p1 exit;
shl.b32 %r2, %r0, 2;
setp.lt.u32 %p2, %r0, 16;
@%p2 bra A;
st.shared.u32 [%r2], %r0;
bra.uni B;
A:
add.u32 %r3, %r0, 1000;
st.shared.u32 [%r2], %r3;
B:
bar.sync 0;
xor.b32 %r4, %r2, 4;
ld.shared.u32 %r5, [%r4];
mul.wide.u32 %rd2, %r0, 4;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r5;
ret;
.shared .align 4 .b8 sm[256];""")
  out = np.zeros(128, np.uint32)
  launch(mod, "k", [out], (1,), (128,))
  src = np.arange(64) ^ 1
  assert (out[:64] == np.where(src < 16, src + 1000, src)).all() and (out[64:] == 0).all()


def test_shfl_clamp_and_predicate():
  body = "shfl.sync.down.b32 %r1|%p1, %r0, 5, 0x1f, 0xffffffff;\nselp.u32 %r2, 0x10000, 0, %p1;\nadd.u32 %r1, %r1, %r2;"
  lane = np.arange(64) % 32
  want = np.where(lane + 5 <= 31, np.arange(64) + 5 + 0x10000, np.arange(64))
  assert (run1(body, 64) == want).all()


def test_vote_and_redux_per_warp():
  r = run1("setp.lt.u32 %p1, %r0, 40;\nvote.sync.ballot.b32 %r1, %p1, 0xffffffff;", 64)
  assert (r[:32] == 0xffffffff).all() and (r[32:] == 0xff).all()
  r = run1("redux.sync.add.u32 %r1, %r0, 0xffffffff;", 64)
  assert (r[:32] == sum(range(32))).all() and (r[32:] == sum(range(32, 64))).all()


def test_atomics_serialise_in_lane_order():
  body = "mov.u64 %rd4, %rd1;\natom.global.add.u32 %r1, [%rd4+256], 1;"
  out = np.zeros(128, np.uint32)
  mod = kernel("ld.param.u64 %rd1, [out];\nmov.u32 %r0, %tid.x;\nmul.wide.u32 %rd2, %r0, 4;\nadd.s64 %rd3, %rd1, %rd2;\n" + body +
               "\nst.global.u32 [%rd3], %r1;\nret;")
  launch(mod, "k", [out], (1,), (64,))
  assert (out[:64] == np.arange(64)).all() and out[64] == 64


def test_float_modifiers_ftz_sat_and_rounding():
  tiny = np.float32(1e-40).view(np.uint32)
  r = run1(f"mov.b32 %f1, {tiny:#x};\nadd.ftz.f32 %f2, %f1, %f1;\nmov.b32 %r1, %f2;")
  assert (r == 0).all()
  r = run1("mov.b32 %f1, 0f40000000;\nmul.sat.f32 %f2, %f1, %f1;\nmov.b32 %r1, %f2;")
  assert (r == 0x3f800000).all()
  r = run1("mov.b32 %f1, 0f3F800000;\nmov.b32 %f2, 0f33800000;\nadd.rp.f32 %f3, %f1, %f2;\nmov.b32 %r1, %f3;")
  assert (r == 0x3f800001).all()   # 1 + 2^-24 rounds up only with .rp


# --- fuzz ---------------------------------------------------------------------------------------------------------
def test_parser_fuzz_gives_ptx_errors_only():
  """Random edits of a valid kernel (deleted, duplicated, swapped tokens and characters) parse or raise PTXError with
  a name:line:col prefix, never another exception."""
  base = HEAD + """.visible .entry k(.param .u64 out, .param .align 8 .b8 blob[16])
{
.reg .b32 %r<9>;
.reg .pred %p<3>;
.shared .align 4 .f32 sm[32];
ld.param.u64 %rd1, [out];
mov.u32 %r1, %tid.x;
setp.lt.u32 %p1, %r1, 0x10;
@!%p1 bra L1;
st.shared.f32 [sm+4], 0f3F800000;
L1:
ld.global.v2.u32 {%r2, %r3}, [%rd1+-8];
ret;
}
"""
  rng = random.Random(18)
  pieces = list(";,{}[]()@!.+-|<>%$_:0x1f") + ["\n", " ", ".reg", "%r1", "0f3F800000", "0d3FF0000000000000", "L1", "bra"]
  for _ in range(600):
    t = list(base)
    for _ in range(rng.randint(1, 4)):
      i = rng.randrange(len(t))
      k = rng.random()
      if k < 0.4: del t[i]
      elif k < 0.8: t.insert(i, rng.choice(pieces))
      else: t[i], t[-i] = t[-i], t[i]
    text = "".join(t)
    try: PTXModule.parse(text, "fuzz.ptx")
    except PTXError as e: assert str(e).startswith("fuzz.ptx:") and str(e).split(":")[1].isdigit(), str(e)


def test_carry_chains_make_wide_arithmetic():
  """add.cc/addc and sub.cc/subc: a 64-bit add and subtract from 32-bit halves."""
  body = """mov.u32 %r2, 0xffffffff;
add.cc.u32 %r3, %r2, %r0;
addc.u32 %r4, %r0, 0;
sub.cc.u32 %r5, %r0, 1;
subc.u32 %r6, 7, 0;
shl.b32 %r4, %r4, 8;
shl.b32 %r6, %r6, 16;
or.b32 %r1, %r4, %r6;"""
  tid = np.arange(32, dtype=np.uint64)
  carry = ((0xffffffff + tid) >> 32)
  borrow = (tid < 1).astype(np.uint64)
  assert (run1(body) == (((tid + carry) << 8) | ((7 - borrow) << 16)).astype(np.uint32)).all()


def test_unsupported_barrier_forms_are_refused():
  with pytest.raises(SMFault, match="only bar.sync"): run1("bar.red.popc.u32 %r1, 0, %p1;")


ATOMS = [("add", t) for t in ("u32", "s32", "u64", "f32", "f64")] + [(o, t) for o in ("min", "max") for t in ("u32", "s32", "u64", "s64")] + \
        [(o, t) for o in ("and", "or", "xor", "exch", "cas") for t in ("b32", "b64")] + [("inc", "u32"), ("dec", "u32"), ("add", "f16")]
NPT = {"f16": np.float16, "u32": np.uint32, "s32": np.int32, "u64": np.uint64, "s64": np.int64, "f32": np.float32, "f64": np.float64, "b32": np.uint32, "b64": np.uint64}


def serial_model(op: str, t: str, mem: np.ndarray, slots: np.ndarray, x: np.ndarray) -> np.ndarray:
  """What the atomics do one lane after another: the old values, and mem updated in place."""
  old = np.zeros_like(x)
  for lane in range(x.size):
    o, v = mem[slots[lane]], x[lane]
    old[lane] = o
    with np.errstate(all="ignore"):
      new = {"add": lambda: o + v, "min": lambda: min(o, v), "max": lambda: max(o, v), "and": lambda: o & v, "or": lambda: o | v,
             "xor": lambda: o ^ v, "exch": lambda: v, "cas": lambda: (v + 1) if o == v else o,
             "inc": lambda: 0 if o >= v else o + 1, "dec": lambda: v if o == 0 or o > v else o - 1}[op]()
    mem[slots[lane]] = np.asarray(new).astype(mem.dtype)
  return old


ATOM_CASES = [(i, o, t) for i in ("atom", "red") for o, t in ATOMS if not (i == "red" and o in ("exch", "cas"))]   # red has no exch/cas


@pytest.mark.parametrize("instr,op,t", ATOM_CASES, ids=[f"{i}.{o}.{t}" for i, o, t in ATOM_CASES])
def test_atomics_against_a_serial_model(instr, op, t):
  size = np.dtype(NPT[t]).itemsize
  r = "%rd" if size == 8 else "%r"
  cas = f", {r}12" if op == "cas" else ""
  opm = op + (".noftz" if t == "f16" else "")   # atom.add.noftz.f16 (PTX 9.7.12.5)
  atom = f"atom.global.{opm}.{t} {r}11, [%rd4], {r}10{cas};" if instr == "atom" else f"red.global.{opm}.{t} [%rd4], {r}10;"
  mod = kernel(f"""ld.param.u64 %rd1, [out];
ld.param.u64 %rd2, [memory];
ld.param.u64 %rd7, [vals];
mov.u32 %r0, %tid.x;
rem.u32 %r1, %r0, 3;
mul.wide.u32 %rd3, %r1, {size};
add.s64 %rd4, %rd2, %rd3;
mul.wide.u32 %rd5, %r0, {size};
add.s64 %rd6, %rd7, %rd5;
ld.global.b{size * 8} {r}10, [%rd6];
add.s{size * 8} {r}12, {r}10, 1;
{atom}
add.s64 %rd8, %rd1, %rd5;
st.global.b{size * 8} [%rd8], {r}11;
ret;""", ".param .u64 out, .param .u64 memory, .param .u64 vals")
  rng = np.random.default_rng(len(op) * 7 + size)
  n = 96
  if t[0] == "f": x = rng.standard_normal(n).astype(NPT[t])
  elif op in ("inc", "dec"): x = rng.integers(0, 40, n).astype(NPT[t])
  else: x = rng.integers(-50, 50, n).astype(np.int64).astype(NPT[t])
  if op == "cas": x[::4] = np.resize(x[:3], x[::4].size)   # some compares succeed
  mem = (rng.integers(0, 20, 4) if t[0] != "f" else rng.standard_normal(4)).astype(NPT[t])
  want_mem = mem.copy()
  want_old = serial_model(op, t, want_mem, np.arange(n) % 3, x)
  out = np.zeros(n, NPT[t])
  launch(mod, "k", [out, mem, x], (1,), (n,))
  assert np.array_equal(mem, want_mem), f"memory {mem} != {want_mem}"
  if instr == "atom": assert np.array_equal(out, want_old)


def test_const_space_and_trace():
  mod = PTXModule.parse(HEAD + """.const .align 4 .u32 table[4] = {10, 20, 30, 40};
.visible .entry k(.param .u64 out)
{
.reg .b32 %r<4>; .reg .b64 %rd<4>;
ld.param.u64 %rd1, [out];
mov.u32 %r0, %tid.x;
shl.b32 %r1, %r0, 2;
ld.const.u32 %r2, [table+4];
cvt.u64.u32 %rd2, %r1;
mov.u64 %rd3, table;
add.s64 %rd3, %rd3, %rd2;
ld.const.u32 %r3, [%rd3];
add.u32 %r3, %r3, %r2;
add.s64 %rd2, %rd1, %rd2;
st.global.u32 [%rd2], %r3;
ret;
}""", "c.ptx")
  out, lines = np.zeros(4, np.uint32), []
  launch(mod, "k", [out], (1,), (4,), trace=lines.append)
  assert list(out) == [30, 40, 50, 60]
  assert len(lines) == 12 and lines[0].startswith("k line 8: ld.param.u64") and lines[0].endswith("[4 threads]"), lines[:2]


@pytest.mark.parametrize("op,ref,bound", [("tanh.approx.f32", np.tanh, 2 ** -11), ("ex2.approx.ftz.f32", np.exp2, None),
                                          ("sin.approx.f32", np.sin, None), ("rsqrt.approx.f32", lambda v: 1 / np.sqrt(v), 2 ** -22.9)])
def test_approximations_in_ptx_bounds(op, ref, bound):
  """tanh.approx.f32: relative error 2^-11; ex2.approx.ftz.f32: 2 ulp; sin.approx.f32: 2^-20.9 absolute on [-pi, pi]
  (PTX ISA 9.7.3)."""
  x = np.linspace(0.01, 3.0, 64).astype(np.float32)
  out = np.zeros(64, np.float32)
  mod = kernel(f"""ld.param.u64 %rd1, [out];
ld.param.u64 %rd2, [inp];
mov.u32 %r0, %tid.x;
mul.wide.u32 %rd3, %r0, 4;
add.s64 %rd4, %rd2, %rd3;
ld.global.f32 %f1, [%rd4];
{op} %f2, %f1;
add.s64 %rd5, %rd1, %rd3;
st.global.f32 [%rd5], %f2;
ret;""", ".param .u64 out, .param .u64 inp")
  launch(mod, "k", [out, x], (1,), (64,))
  want = ref(x.astype(np.float64))
  if op.startswith("ex2"): assert (np.abs(out - want) <= 2 * np.spacing(want.astype(np.float32))).all()
  elif op.startswith("sin"): assert (np.abs(out - want) <= 2 ** -20.9).all()
  else: assert (np.abs(out - want) / np.abs(want) <= bound).all()


def test_packed_half2_ops_are_per_half_and_correctly_rounded():
  """add/mul/fma.rn.f16x2 act on both halves (lower half from the lower 16 bits), each rounded once."""
  rng = np.random.default_rng(3)
  a, b, c = (rng.standard_normal(128).astype(np.float16) for _ in range(3))
  out = np.zeros(3 * 128, np.float16)
  mod = kernel("""ld.param.u64 %rd1, [out];
ld.param.u64 %rd2, [inp];
mov.u32 %r0, %tid.x;
mul.wide.u32 %rd3, %r0, 4;
add.s64 %rd4, %rd2, %rd3;
ld.global.b32 %r1, [%rd4];
ld.global.b32 %r2, [%rd4+256];
ld.global.b32 %r3, [%rd4+512];
add.rn.f16x2 %r4, %r1, %r2;
mul.rn.f16x2 %r5, %r1, %r2;
fma.rn.f16x2 %r6, %r1, %r2, %r3;
add.s64 %rd5, %rd1, %rd3;
st.global.b32 [%rd5], %r4;
st.global.b32 [%rd5+256], %r5;
st.global.b32 [%rd5+512], %r6;
ret;""", ".param .u64 out, .param .u64 inp")
  launch(mod, "k", [out, np.concatenate([a, b, c])], (1,), (64,))
  a64, b64, c64 = (v.astype(np.float64) for v in (a, b, c))
  assert np.array_equal(out[:128], (a64 + b64).astype(np.float16))
  assert np.array_equal(out[128:256], (a64 * b64).astype(np.float16))
  assert np.array_equal(out[256:], (a64 * b64 + c64).astype(np.float16))   # exact in f64 for these magnitudes, one rounding


def test_threads_at_different_bar_sync_instructions_meet():
  """sm_70+: bar.sync counts threads per barrier, not per instruction, so the two sides of an if/else can each hold a
  bar.sync 0 and still meet."""
  mod = kernel("""ld.param.u64 %rd1, [out];
mov.u32 %r0, %tid.x;
shl.b32 %r2, %r0, 2;
setp.lt.u32 %p1, %r0, 16;
@%p1 bra LOW;
st.shared.u32 [%r2], %r0;
bar.sync 0;
xor.b32 %r4, %r2, 64;
ld.shared.u32 %r5, [%r4];
bra.uni OUT;
LOW:
add.u32 %r3, %r0, 500;
st.shared.u32 [%r2], %r3;
bar.sync 0;
xor.b32 %r4, %r2, 64;
ld.shared.u32 %r5, [%r4];
OUT:
mul.wide.u32 %rd2, %r0, 4;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r5;
ret;
.shared .align 4 .b8 sm[128];""")
  out = np.zeros(32, np.uint32)
  launch(mod, "k", [out], (1,), (32,))
  src = np.arange(32) ^ 16
  assert (out == np.where(src < 16, src + 500, src)).all()


@pytest.mark.parametrize("mode,want", [("rz", np.finfo(np.float64).max), ("rm", np.finfo(np.float64).max), ("rp", np.inf), ("rn", np.inf)])
def test_f64_overflow_by_rounding_mode(mode, want):
  """DBL_MAX + DBL_MAX overflows to +inf only when rounding up or to nearest (IEEE 754 7.4)."""
  r = run1(f"mov.b64 %rd5, 0d7FEFFFFFFFFFFFFF;\nadd.{mode}.f64 %rd6, %rd5, %rd5;\nmov.b64 {{%r1, %r2}}, %rd6;\n"
           "setp.eq.u32 %p1, %r0, 1;\n@%p1 mov.b32 %r1, %r2;", 2)
  assert r.view(np.uint64)[0] == np.float64(want).view(np.uint64)


def test_cache_qualifiers_parse_and_do_not_change_values():
  r = run1("st.global.L1::no_allocate.u32 [%rd3], %r0;\nld.global.nc.L1::evict_last.L2::256B.u32 %r1, [%rd3];\nadd.u32 %r1, %r1, 1;")
  assert (r == np.arange(32) + 1).all()


# --- calls, counted barriers, refused forms -----------------------------------------------------------------------
FUNCS = """.func (.param .b32 ret) twice(.param .b32 x)
{
.reg .b32 %r<3>;
ld.param.b32 %r1, [x];
add.u32 %r2, %r1, %r1;
st.param.b32 [ret], %r2;
ret;
}
.func (.param .b32 ret) down(.param .b32 x)
{
.reg .b32 %r<4>;
.reg .pred %p<2>;
ld.param.b32 %r1, [x];
setp.eq.u32 %p1, %r1, 0;
@%p1 bra DONE;
sub.u32 %r2, %r1, 1;
{
.param .b32 a;
.param .b32 b;
st.param.b32 [a], %r2;
call.uni (b), down, (a);
ld.param.b32 %r1, [b];
}
DONE:
st.param.b32 [ret], %r1;
ret;
}
.func (.param .b32 ret) tri(.param .b32 x)
{
.reg .b32 %r<4>;
.reg .pred %p<2>;
ld.param.b32 %r1, [x];
setp.eq.u32 %p1, %r1, 0;
@%p1 bra DONE;
sub.u32 %r2, %r1, 1;
{
.param .b32 a;
.param .b32 b;
st.param.b32 [a], %r2;
call.uni (b), odd, (a);
ld.param.b32 %r3, [b];
}
mad.lo.u32 %r1, %r3, 3, %r1;
DONE:
st.param.b32 [ret], %r1;
ret;
}
.func (.param .b32 ret) odd(.param .b32 x)
{
.reg .b32 %r<4>;
ld.param.b32 %r1, [x];
{
.param .b32 a;
.param .b32 b;
st.param.b32 [a], %r1;
call.uni (b), tri, (a);
ld.param.b32 %r2, [b];
}
add.u32 %r2, %r2, 1;
st.param.b32 [ret], %r2;
ret;
}
.extern .func (.param .b32 ret) vprintf(.param .b64 fmt, .param .b64 args);
"""


def called(body: str) -> PTXModule:
  return PTXModule.parse(HEAD + FUNCS + ".visible .entry k(.param .u64 out)\n{\n.reg .b32 %r<20>;\n.reg .b64 %rd<20>;\n.reg .pred %p<8>;\n"
                         "ld.param.u64 %rd1, [out];\nmov.u32 %r0, %tid.x;\nmul.wide.u32 %rd2, %r0, 4;\nadd.s64 %rd3, %rd1, %rd2;\n"
                         + body + "\nst.global.u32 [%rd3], %r1;\nret;\n}\n", "calls.ptx")


def test_call_passes_parameters_and_returns_through_param_variables():
  mod = called("{\n.param .b32 p0;\n.param .b32 r0;\nst.param.b32 [p0], %r0;\ncall.uni (r0), twice, (p0);\nld.param.b32 %r1, [r0];\n}")
  out = np.zeros(32, np.uint32)
  launch(mod, "k", [out], (1,), (32,))
  assert (out == 2 * np.arange(32)).all()


def test_a_predicated_call_runs_for_the_threads_whose_predicate_holds():
  mod = called("{\n.param .b32 p0;\n.param .b32 r0;\nst.param.b32 [p0], %r0;\nst.param.b32 [r0], 99;\nsetp.lt.u32 %p1, %r0, 10;\n"
               "@%p1 call.uni (r0), twice, (p0);\nld.param.b32 %r1, [r0];\n}")
  out = np.zeros(32, np.uint32)
  launch(mod, "k", [out], (1,), (32,))
  assert (out == np.where(np.arange(32) < 10, 2 * np.arange(32), 99)).all()


RECURSE = ("{\n.param .b32 p0;\n.param .b32 r0;\nst.param.b32 [p0], %r0;\nsetp.lt.u32 %p1, %r0, 20;\n"
           "@%p1 call.uni (r0), tri, (p0);\n@!%p1 call.uni (r0), down, (p0);\nld.param.b32 %r1, [r0];\n}")


def _tri(x: int) -> int:   # tri(x) = x + 3 * odd(x - 1), odd(y) = tri(y) + 1: mutual recursion to depth 2x
  return 0 if x == 0 else (x + 3 * (_tri(x - 1) + 1)) & 0xFFFFFFFF


def test_recursive_calls_run_on_a_per_thread_stack():
  """Mutual recursion (tri -> odd -> tri) and self recursion (down) with real call/ret: each thread at its own depth
  (0 to 38 frames), predicated calls, values live across the calls restored from the frames."""
  mod = called(RECURSE)
  k = mod.kernels["k"]
  assert set(k.functions) == {"tri", "odd", "down"} and all(f.size <= 64 for f in k.functions.values())
  out = np.zeros(64, np.uint32)
  launch(mod, "k", [out], (1,), (64,), local_bytes=k.local_bytes + 40 * 64)
  assert out.tolist() == [_tri(t) if t < 20 else 0 for t in range(64)]


def test_a_stack_overflow_is_a_local_fault_at_the_call():
  """A thread whose frames do not fit the local memory the launch gives faults at the call (naming the kernel, the PTX
  line and the address just below the stack), as the GPU faults on a local access past the thread's window."""
  mod = called(RECURSE)
  k = mod.kernels["k"]
  with pytest.raises(SMFault) as e: launch(mod, "k", [np.zeros(64, np.uint32)], (1,), (64,), local_bytes=k.local_bytes + 10 * 48)
  assert e.value.kind == "local" and e.value.address == k.local_bytes - 1 and "stack overflow: the call of" in str(e.value)
  calls = {i + 1 for i, text in enumerate((HEAD + FUNCS).split("\n")) if "call.uni" in text}   # the calls in down, tri, odd
  assert e.value.ptx_line in calls, str(e.value)


@pytest.mark.parametrize("body,what,line", [
  ("{\n.param .b64 f;\n.param .b64 a;\n.param .b32 r;\ncall.uni (r), vprintf, (f, a);\n}", "no body in this module", 80),
  ("proto: .callprototype (.param .b32 _) _ (.param .b32 _);\ncall.uni (%r1), %rd1, (%r0), proto;", "indirect call through %rd1", 77),
])
def test_calls_the_sm_cannot_inline_fault_where_reached(body, what, line):
  """An external function and an indirect call fault at the call's line."""
  with pytest.raises(SMFault) as e: launch(called(body), "k", [np.zeros(32, np.uint32)], (1,), (32,))
  assert e.value.kind == "unsupported" and what in str(e.value) and e.value.ptx_line == line, str(e.value)


def test_counted_barrier_waits_for_its_count_and_bar_arrive_does_not_wait():
  """Warp 0 arrives (bar.arrive 1, 64), warp 1 waits (bar.sync 1, 64) and then reads what warp 0 wrote; warp 2 never
  takes part: the barrier completes with 64 threads."""
  body = """.shared .b32 s[32];
mov.u32 %r1, 0;
setp.ge.u32 %p1, %r0, 64;
@%p1 bra END;
mov.u64 %rd6, s;
setp.ge.u32 %p2, %r0, 32;
@%p2 bra WAIT;
mul.wide.u32 %rd4, %r0, 4;
add.s64 %rd5, %rd6, %rd4;
mul.lo.u32 %r5, %r0, 5;
st.shared.u32 [%rd5], %r5;
bar.arrive 1, 64;
bra.uni END;
WAIT:
bar.sync 1, 64;
sub.u32 %r4, %r0, 32;
mul.wide.u32 %rd4, %r4, 4;
add.s64 %rd5, %rd6, %rd4;
ld.shared.u32 %r1, [%rd5];
END:"""
  out = run1(body, n=96)
  assert (out[:32] == 0).all() and (out[32:64] == np.arange(32) * 5).all() and (out[64:] == 0).all()


@pytest.mark.parametrize("body,kind,what", [
  ("bar.sync 1, 48;", "unsupported", "multiple of the warp size"),
  ("bar.sync 1, 64;", "barrier", "can never complete"),
  ("bar.red.popc.u32 %r1, 0, %p1;", "unsupported", "bar.red is not"),
])
def test_barriers_that_cannot_complete_or_are_not_modelled_fault(body, kind, what):
  with pytest.raises(SMFault) as e: run1(body)
  assert e.value.kind == kind and what in str(e.value), str(e.value)


MMA_REGS = ".reg .b32 %r<20>;\n.reg .b64 %rd<20>;\n.reg .pred %p<8>;\n.reg .f32 %f<8>;"


@pytest.mark.parametrize("text,n,what", [
  ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f0,%f1,%f2,%f3}, {%r2,%r3,%r4,%r5}, {%r6,%r7}, {%f4,%f5,%f6,%f7};", 16, "partial warp"),
  ("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%r10,%r11}, {%r2,%r3,%r4,%r5}, {%r6,%r7}, {%r12,%r13};", 32, "this mma form"),
  ("mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32 {%f0,%f1,%f2,%f3}, {%r2,%r3}, {%r6,%r7}, {%f4,%f5,%f6,%f7};", 32, "this mma form"),
  ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f0,%f1,%f2,%f3}, {%r2,%r3}, {%r6,%r7}, {%f4,%f5,%f6,%f7};", 32, "(4, 2, 2, 4) registers"),
  ("wgmma.fence.sync.aligned;", 32, "asynchronous warpgroup MMA"),
  ("tex.2d.v4.f32.f32 {%f0,%f1,%f2,%f3}, [%rd1, {%f4,%f5}];", 32, "no texture unit"),
  ("suld.b.1d.b32.trap {%r2}, [%rd1, {%r3}];", 32, "no texture unit"),
])
def test_refused_matrix_and_texture_forms_say_why(text, n, what):
  with pytest.raises(SMFault) as e: run1(text, n=n)
  assert e.value.kind == "unsupported" and what in str(e.value), str(e.value)


def test_fma_f32_rn_fast_path_matches_exact():
  """fma.rn.f32's f64 shortcut against the exact path on special values, exact products with ties (small mantissas,
  c = -a*b), and double-rounding cases built to land on a midpoint: 8384513 * 8392705 = 2^46 + 1, so a*b is 2^-150 +
  2^-196 (or 2^-1 + 2^-47) and RN64(c + a*b) is an f32 midpoint in the subnormal (normal) range that RN32 must break
  by the dropped low bit."""
  from hcq.drivers.mock.nv.sm import floats as F
  rng = np.random.default_rng(7)
  special = np.array([0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 1, 0x80000001, 0x007fffff, 0x00800000,
                      0x80800000, 0x7f7fffff, 0xff7fffff, 0x3f800000, 0xbf800000, 0x33800000, 0x3f800001], np.uint32)
  n = 20000
  def pick():
    k = rng.integers(0, 3, n)
    x = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    small = (rng.integers(0, 1 << 9, n).astype(np.uint32) << 23) | (rng.integers(0, 8, n).astype(np.uint32) << 20)
    return np.select([k == 0, k == 1], [special[rng.integers(0, special.size, n)], small], x).view(np.float32)
  a, b, c = pick(), pick(), pick()
  with np.errstate(all="ignore"): c = np.where(rng.integers(0, 3, n) == 0, (-(a.astype(np.float64) * b)).astype(np.float32), c)
  sign = lambda: np.where(rng.integers(0, 2, 64) == 0, 1, -1).astype(np.float32)
  for scale_a, scale_b, c_lo, c_hi in ((-100, -96, 2.0 ** -128, 2.0 ** -126), (-23, -24, 1.0, 2.0 ** 20)):
    ta = (sign() * np.float32(8384513) * np.float32(2.0 ** scale_a)).astype(np.float32)
    tb = (sign() * np.float32(8392705) * np.float32(2.0 ** scale_b)).astype(np.float32)
    tc = (sign() * rng.uniform(c_lo, c_hi, 64)).astype(np.float32)
    a, b, c = np.concatenate([a, ta]), np.concatenate([b, tb]), np.concatenate([c, tc])
  with np.errstate(all="ignore"):
    fast, exact = F.fma_f32_rn(a, b, c), F.arith("fma", "f32", "rn", a, b, c)
  same = (fast.view(np.uint32) == exact.view(np.uint32)) | (np.isnan(fast) & np.isnan(exact))
  assert same.all(), f"{(~same).sum()} differ, first a={a[~same][0]!r} b={b[~same][0]!r} c={c[~same][0]!r}"
  with np.errstate(all="ignore"):   # scalars and broadcast operands, as immediates give them
    assert F.fma_f32_rn(np.float32(1.5), a[:5], np.float32(2)).view(np.uint32).tolist() == \
      F.arith("fma", "f32", "rn", np.float32(1.5), a[:5], np.float32(2)).view(np.uint32).tolist()
    # compact operands as the SM's registers hold them (one varies along rows, one along columns): the midpoint
    # cases of the last construction above, in every pairing, against the exact path on the broadcast lanes
    A, B = ta.reshape(1, 8, 1, 8), tb.reshape(8, 1, 8, 1)
    C = (rng.choice([-1, 1], (8, 8, 8, 8)) * rng.uniform(1.0, 2.0 ** 20, (8, 8, 8, 8))).astype(np.float32)
    want = F.arith("fma", "f32", "rn", *(x.reshape(-1) for x in np.broadcast_arrays(A, B, C)))
    got = F.fma_f32_rn(A, B, C)
    assert got.shape == C.shape and got.reshape(-1).view(np.uint32).tolist() == want.view(np.uint32).tolist()
