"""NV programs: the cubin reader against ptxas's output for every arch of the table (and cuobjdump's reading of it),
malformed and fuzzed cubins, PTX parameter kinds and argument packing, QMDs encoded and decoded back with the generated
layouts, the launch limits. Launches on the emulated GPU are in test_nv_launch.py."""
import os
import re
import struct
import subprocess

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import hcq
from hcq.drivers.nv.compile import SASS_RECORDS, compile_ptx, llvm_to_ptx, ptxas_path
from hcq.drivers.nv.cubin import DRIVER_CONSTANTS, CubinError, read_cubin
from hcq.drivers.nv.device import ARCHS
from hcq.drivers.nv.program import ptx_param_kinds
from hcq.drivers.nv.qmd import QMD_LAYOUTS, cbank_address_bits, encode_qmd
from hcq.errors import HCQError, ProgramArgumentError

PTX_VERSION = {"sm_80": "8.0", "sm_86": "8.0", "sm_89": "8.0", "sm_90": "8.0", "sm_100": "8.8", "sm_120": "8.8"}
ADD = """
.version {v}
.target {arch}
.address_size 64
.visible .entry add(.param .u64 out, .param .u64 a, .param .u32 n, .param .u8 flag, .param .f64 s, .param .align 8 .b8 blob[12])
{{
  .reg .b32 %r<4>; .reg .b64 %rd<8>; .reg .pred %p;
  mov.u32 %r1, %tid.x; ld.param.u32 %r2, [n]; setp.ge.u32 %p, %r1, %r2; @%p bra DONE;
  ld.param.u64 %rd1, [out]; ld.param.u64 %rd2, [a]; cvta.to.global.u64 %rd1, %rd1; cvta.to.global.u64 %rd2, %rd2;
  mul.wide.u32 %rd3, %r1, 4; add.u64 %rd4, %rd2, %rd3; ld.global.u32 %r3, [%rd4]; add.u32 %r3, %r3, 1;
  add.u64 %rd5, %rd1, %rd3; st.global.u32 [%rd5], %r3;
DONE: ret;
}}
"""
STACK = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry sh(.param .u64 out)
{
  .reg .b32 %r<4>; .reg .b64 %rd<8>; .shared .align 4 .b32 buf[64]; .local .align 4 .b32 loc[40];
  mov.u32 %r1, %tid.x; shl.b32 %r2, %r1, 2; mov.u32 %r3, buf; add.u32 %r3, %r3, %r2; st.shared.u32 [%r3], %r1; bar.sync 0;
  mov.u64 %rd3, loc; cvt.u64.u32 %rd4, %r2; add.u64 %rd3, %rd3, %rd4; st.local.u32 [%rd3], %r1; ld.local.u32 %r1, [%rd3];
  ld.shared.u32 %r1, [%r3]; ld.param.u64 %rd1, [out]; cvta.to.global.u64 %rd1, %rd1; mul.wide.u32 %rd2, %r1, 4;
  add.u64 %rd1, %rd1, %rd2; st.global.u32 [%rd1], %r1; ret;
}
"""


def add_ptx(arch: str) -> str:
  return ADD.format(v=PTX_VERSION[arch], arch=arch)


@pytest.fixture(scope="module")
def cubins():
  return {row.sm: compile_ptx(add_ptx(row.sm), row.sm) for row in ARCHS}


def cuobjdump_facts(cubin: bytes, tmp_path) -> dict:
  """What cuobjdump -elf says of a cubin's kernel: register count, frame size, parameters, parameter base and size."""
  p = tmp_path / "k.cubin"
  p.write_bytes(cubin)
  out = subprocess.run([os.path.join(os.path.dirname(ptxas_path()), "cuobjdump"), "-elf", str(p)], capture_output=True, text=True, check=True).stdout
  params = sorted((int(o, 16), int(off, 16), int(sz, 16)) for o, off, sz in
                  re.findall(r"Ordinal : (0x[0-9a-f]+)\s+Offset\s+: (0x[0-9a-f]+)\s+Size\s+: (0x[0-9a-f]+)", out))
  packed = int(re.search(r"EIATTR_PARAM_CBANK\s+Format:\s+EIFMT_SVAL\s+Value:\s+0x[0-9a-f]+ (0x[0-9a-f]+)", out).group(1), 16)
  return {"sm": "sm_" + re.search(r"sm=(\d+)", out).group(1), "registers": int(re.search(r"register count: (\d+)", out).group(1)),
          "frame": int(re.search(r"frame size: (0x[0-9a-f]+)", out).group(1), 16), "params": params,
          "param_base": packed & 0xFFFF, "param_size": packed >> 16}


@pytest.mark.parametrize("arch", [row.sm for row in ARCHS])
def test_reader_agrees_with_cuobjdump_on_every_arch(cubins, arch, tmp_path):
  c = read_cubin(cubins[arch])
  k = c.kernels["add"]
  facts = cuobjdump_facts(cubins[arch], tmp_path)
  assert c.arch == facts["sm"] == arch
  assert k.registers == facts["registers"] and k.frame_size == facts["frame"]
  assert [(p.ordinal, p.offset, p.size) for p in k.params] == facts["params"]
  assert (k.param_base, k.param_size) == (facts["param_base"], facts["param_size"])
  assert k.code and len(k.code) % 16 == 0 and not k.relocations
  assert SASS_RECORDS.get(k.code).entry == "add"


DIMS = """
.version {v}
.target {arch}
.address_size 64
.visible .entry dims(.param .u64 out)
{{
  .reg .b32 %r<8>; .reg .b64 %rd<8>; .shared .align 4 .b32 sh[4]; .local .align 4 .b32 loc[4];
  mov.u64 %rd2, sh; cvta.shared.u64 %rd2, %rd2; mov.u64 %rd3, loc; cvta.local.u64 %rd3, %rd3;
  mov.u32 %r1, %ntid.x; mov.u32 %r2, %ntid.y; mov.u32 %r3, %ntid.z; mov.u32 %r4, %nctaid.x; mov.u32 %r5, %nctaid.y; mov.u32 %r6, %nctaid.z;
  add.u32 %r1, %r1, %r2; add.u32 %r1, %r1, %r3; add.u32 %r1, %r1, %r4; add.u32 %r1, %r1, %r5; add.u32 %r1, %r1, %r6;
  st.u32 [%rd2], %r1; st.u32 [%rd3], %r1; ld.u32 %r7, [%rd2]; ld.u32 %r6, [%rd3]; add.u32 %r1, %r7, %r6;
  ld.param.u64 %rd1, [out]; st.global.u32 [%rd1], %r1; ret;
}}
"""


@pytest.mark.parametrize("arch", [row.sm for row in ARCHS])
def test_driver_constants_are_where_the_sass_reads_them(arch, tmp_path):
  """Differential: the constant-bank 0 words below the parameters that ptxas's code reads (cuobjdump -sass, nvdisasm) are
  exactly the block and grid sizes, the stack's start, the memory descriptor and the generic windows (cvta.local, and
  cvta.shared where it reads the bank) of DRIVER_CONSTANTS."""
  cubin = compile_ptx(DIMS.format(v=PTX_VERSION[arch], arch=arch), arch)
  (tmp_path / "k.cubin").write_bytes(cubin)
  bindir = os.path.dirname(ptxas_path())
  sass = subprocess.run([os.path.join(bindir, "cuobjdump"), "-sass", str(tmp_path / "k.cubin")], capture_output=True, text=True, check=True,
                        env={**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", "")}).stdout
  base = read_cubin(cubin).kernels["dims"].param_base
  read = {int(x, 16) for x in re.findall(r"c\[0x0\]\[(0x[0-9a-f]+)\]", sass)}
  c = DRIVER_CONSTANTS[arch]
  windows = {c.local_window, c.local_window + 4} | ({c.shared_window, c.shared_window + 4} if c.shared_window is not None else set())
  assert {o for o in read if o < base} == {c.ntid, c.ntid + 4, c.ntid + 8, c.nctaid, c.nctaid + 4, c.nctaid + 8, c.stack_top, c.memory_descriptor} | windows
  assert c.shared_window is not None or "SR_SWINHI" in sass  # sm_90 on: the shared window from a special register


def test_stack_shared_and_barriers(tmp_path):
  k = read_cubin(compile_ptx(STACK, "sm_90")).kernels["sh"]
  assert k.frame_size == cuobjdump_facts(compile_ptx(STACK, "sm_90"), tmp_path)["frame"] == 160
  assert k.stack_size >= 160 and k.barriers == 1
  assert k.shared_size >= 256  # the 64 words of buf (and the reserved part ptxas adds on sm_90)


def _with(data: bytes, off: int, fmt: str, value) -> bytes:
  b = bytearray(data)
  struct.pack_into(fmt, b, off, value)
  return bytes(b)


def _section_header(data: bytes, name: str) -> int:
  shoff, = struct.unpack_from("<Q", data, 0x28)
  shnum, shstrndx = struct.unpack_from("<HH", data, 0x3C)
  str_off, = struct.unpack_from("<Q", data, shoff + 64 * shstrndx + 24)
  for i in range(shnum):
    n, = struct.unpack_from("<I", data, shoff + 64 * i)
    if data[str_off + n:].split(b"\0", 1)[0].decode() == name: return shoff + 64 * i
  raise KeyError(name)


def test_malformed_cubins_name_the_offset(cubins):
  good = cubins["sm_90"]
  info = _section_header(good, ".nv.info.add")
  info_off, = struct.unpack_from("<Q", good, info + 24)
  cases = {
    "not an ELF file": b"\x7fELG" + good[4:],
    "64-bit little-endian": _with(good, 4, "B", 1),
    "EM_CUDA": _with(good, 0x12, "<H", 62),
    "section headers do not fit": good[:len(good) // 2],
    "runs past the end": _with(good, info + 32, "<Q", 1 << 20),
    "has format 9": _with(good, info_off, "B", 9),
  }
  for what, data in cases.items():
    with pytest.raises(CubinError, match=what):
      read_cubin(data)
  with pytest.raises(CubinError, match=r"offset 0x[0-9a-f]+"):
    read_cubin(_with(good, info + 32, "<Q", 1 << 20))


@settings(max_examples=int(os.environ.get("HCQ_FUZZ_EXAMPLES", 150)), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_fuzzed_cubins_parse_or_raise_cubin_error(cubins, data):
  """Random byte changes and truncations: the reader returns a cubin or raises CubinError, never anything else."""
  good = bytearray(cubins[data.draw(st.sampled_from(sorted(cubins)))])
  # anywhere, or inside the attribute sections and the section headers, where most bytes matter
  regions = [(0, len(good))]
  for name in (".nv.info", ".nv.info.add", ".symtab"):
    at = _section_header(bytes(good), name)
    off, size = struct.unpack_from("<QQ", good, at + 24)
    regions += [(off, off + size), (at, at + 64)]
  lo, hi = data.draw(st.sampled_from(regions))
  for _ in range(data.draw(st.integers(1, 8))):
    good[data.draw(st.integers(lo, hi - 1))] = data.draw(st.integers(0, 255))
  if data.draw(st.booleans()): good = good[:data.draw(st.integers(0, len(good)))]
  try:
    read_cubin(bytes(good))
  except CubinError:
    pass


def test_ptx_parameter_kinds():
  kinds = ptx_param_kinds(add_ptx("sm_90"))["add"]
  assert kinds == [("out", "buffer"), ("a", "buffer"), ("n", "u32"), ("flag", "u8"), ("s", "f64"), ("blob", "b96")]
  with pytest.raises(HCQError, match=r"parameter p has type \.pred"):
    ptx_param_kinds(".entry k(.param .pred p)")
  assert ptx_param_kinds(".entry k(.param .u64 .ptr .global .align 16 p_0, .param .u32 n)")["k"] == [("p_0", "buffer"), ("n", "u32")]


@pytest.fixture(scope="module")
def dev():
  return hcq.Device("MOCKNV+NV")


def test_program_layout_at_the_parameter_base(dev):
  prg = dev.program(add_ptx("sm_90"))
  k = prg.kernel
  assert [(a.name, a.kind) for a in prg.layout] == [("out", "buffer"), ("a", "buffer"), ("n", "u32"), ("flag", "u8"), ("s", "f64"), ("blob", "b96")]
  assert [a.offset for a in prg.layout] == [prg.qmd_bytes + k.param_base + p.offset for p in k.params]
  assert k.param_base == 0x210 and prg.qmd_bytes == 384  # Hopper: parameters at 0x210, QMD v4


def test_arguments_pack_at_their_offsets_and_refuse_changed_values(dev):
  prg = dev.program(add_ptx("sm_90"))
  a, b = dev.alloc(64, "device"), dev.alloc(64, "device")
  block = prg.kernargs([a, b], (7, 255, 0.5, bytes(range(12))), (1, 1, 1), (32, 1, 1))
  at = {arg.name: arg.offset for arg in prg.layout}
  assert struct.unpack_from("<QQIBd", block, at["out"]) [:2] == (a.addr, b.addr)
  assert struct.unpack_from("<I", block, at["n"])[0] == 7 and block[at["flag"]] == 255
  assert struct.unpack_from("<d", block, at["s"])[0] == 0.5 and block[at["blob"]:at["blob"] + 12] == bytes(range(12))
  for vals, what in [((2**32, 1, 0.0, bytes(12)), "n .*cannot hold 4294967296"), ((1, 256, 0.0, bytes(12)), "flag .*cannot hold 256"),
                     ((1.5, 1, 0.0, bytes(12)), "not an integer"), ((1, 1, 0.0, bytes(11)), "takes 12 bytes, got 11")]:
    with pytest.raises(ProgramArgumentError, match=what):
      prg.kernargs([a, b], vals, (1, 1, 1), (32, 1, 1))
  assert prg.kernargs([a, b], (np.uint32(7), np.uint8(1), np.float32(0.5), bytes(12)), (1, 1, 1), (32, 1, 1))[at["n"]] == 7


def test_code_for_another_arch_is_refused_naming_both(dev, cubins):
  with pytest.raises(HCQError, match="the cubin is for sm_80, the device is Hopper sm_90"):
    dev.program(cubins["sm_80"])


def test_bad_code_is_refused_with_what_is_valid(dev):
  for bad in (12, b"\x00\xff\xfe", "int main() {}"):
    with pytest.raises(HCQError, match="takes a cubin"):
      dev.program(bad)
  with pytest.raises(HCQError, match="ptxas -arch=sm_90 refused"):
    dev.program(add_ptx("sm_90").replace("add.u32", "add.q32"))
  with pytest.raises(CubinError, match="invalid cubin"):
    dev.program(b"\x7fELF" + bytes(60))


def test_llvm_ir_through_nvptx_and_ptxas(dev):
  ir = """
target triple = "nvptx64-nvidia-cuda"
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
define void @k(ptr addrspace(1) %out, float %v) {
  %t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %p = getelementptr float, ptr addrspace(1) %out, i32 %t
  store float %v, ptr addrspace(1) %p
  ret void
}
!nvvm.annotations = !{!0}
!0 = !{ptr @k, !"kernel", i32 1}
"""
  assert ".entry k" in llvm_to_ptx(ir, "sm_90")
  prg = dev.program(ir)
  assert [(a.kind) for a in prg.layout] == ["buffer", "f32"]


@pytest.mark.parametrize("version", sorted(QMD_LAYOUTS))
def test_qmd_fields_decode_back_with_the_generated_layout(version):
  L = QMD_LAYOUTS[version]
  q = encode_qmd(L, program=0x1_0000_2000, registers=37, grid=(5, 6, 7), block=(64, 4, 2), shared=3000, shared_max=100 << 10,
                 local_per_thread=100, barriers=1, cbanks={0: (0, 0x240), 3: (0x2_0000_0040, 0x100)})
  q |= cbank_address_bits(L, 0, 0x7F_1234_5640)
  assert L.nbytes == {3: 256, 4: 384, 5: 384}[version]  # 64 and 96 words, as NVK's Qmd3_0/Qmd4_0/Qmd5_0 hold them
  assert q.bit_length() <= 8 * L.nbytes
  f = L.register.decode(q)
  assert f["qmd_major_version"] == version and f[L.registers_field] == 37 and f["barrier_count"] == 1
  assert tuple(f[n] for n in L.grid_fields) == (5, 6, 7)
  assert (f["cta_thread_dimension0"], f["cta_thread_dimension1"], f["cta_thread_dimension2"]) == (64, 4, 2)
  assert (f[L.program_fields[1]] << 32 | f[L.program_fields[0]]) << L.program_shift == 0x1_0000_2000
  assert f[L.shared_field] << L.shared_shift == 3072  # rounded up to 256 bytes
  assert (f[L.local_fields[0]], f[L.local_fields[1]] << L.local_shift) == (0, 112)  # the high part, rounded up to 16 bytes
  addr = lambda i: (f[L.cbank("addr_upper", i)] << 32 | f[L.cbank("addr_lower", i)]) << L.cbank_shift
  assert addr(0) == 0x7F_1234_5640 and addr(3) == 0x2_0000_0040
  assert f["constant_buffer_size_shifted4_0"] == 0x24 and f["constant_buffer_valid_3"] and not f["constant_buffer_valid_1"]
  assert f["constant_buffer_invalidate_0"] and f["constant_buffer_invalidate_3"]


@pytest.mark.parametrize("version", sorted(QMD_LAYOUTS))
def test_qmd_launch_patch_sets_bank_0_and_the_releases(version):
  """The per-launch patch (bank 0's address, RELEASE0/1 addresses and payloads, their enables) decodes back with each
  version's own field names (v3 RELEASE0_ADDRESS_LOWER..., v4/v5 RELEASE_SEMAPHORE0_ADDR_LOWER...)."""
  from hcq.drivers.nv.program import launch_patch
  L = QMD_LAYOUTS[version]
  patch, (end_on, timeline_on) = launch_patch(L)
  q = encode_qmd(L, program=0x1000, registers=8, grid=(1, 1, 1), block=(32, 1, 1), shared=0, shared_max=0, local_per_thread=0,
                 barriers=0, cbanks={0: (0, 0x240)})
  words = memoryview(bytearray(q.to_bytes(L.nbytes, "little"))).cast("I")
  values = (0x7F_1234_5640, 0xFF_0000_0010, (1 << 40) + 3, 0xFF_0000_0020, 7)
  patch.store(words, 0, *values)
  for i, b in end_on + timeline_on: words[i] |= b
  stored = int.from_bytes(words.tobytes(), "little")
  assert stored == q | patch.bits(*values) << 8 * patch.start | sum(b << 32 * i for i, b in end_on + timeline_on)  # the two forms agree
  f, r = L.register.decode(stored), lambda what, i: f[L.release(what, i)]
  assert (f[L.cbank("addr_upper", 0)] << 32 | f[L.cbank("addr_lower", 0)]) << L.cbank_shift == 0x7F_1234_5640
  assert (r("addr_upper", 0) << 32 | r("addr_lower", 0), r("payload_upper", 0) << 32 | r("payload_lower", 0)) == (0xFF_0000_0010, (1 << 40) + 3)
  assert (r("addr_upper", 1) << 32 | r("addr_lower", 1), r("payload_lower", 1)) == (0xFF_0000_0020, 7)
  assert (r("enable", 0), r("structure_size", 0), r("enable", 1), r("structure_size", 1), r("payload64b", 1), r("membar_type", 0)) == (1, 0, 1, 1, 1, 1)
  assert f["qmd_major_version"] == version and f[L.registers_field] == 8  # the patch touches nothing else
  assert L.register.decode(sum(b << 32 * i for i, b in timeline_on))[L.release("enable", 0)] == 0
  for form in (patch.bits, lambda *v: patch.store(words, 0, *v)):
    with pytest.raises(HCQError, match="does not fit its"):
      form(0, 1 << 60, 0, 0, 0)  # a release address beyond the field (40 bits on v3, 57 from v4)


def test_qmd_refuses_values_it_cannot_hold():
  L = QMD_LAYOUTS[4]
  with pytest.raises(HCQError, match="not a multiple of 64"):
    cbank_address_bits(L, 0, 0x1000_0010)
  with pytest.raises(ValueError, match="register_count"):
    encode_qmd(L, program=0, registers=1 << 9, grid=(1, 1, 1), block=(1, 1, 1), shared=0, shared_max=0, local_per_thread=0, barriers=0, cbanks={})


@pytest.mark.parametrize("gs,ls,what", [((1, 1, 1), (1025, 1, 1), "exceeds 1024"), ((1, 1, 1), (1, 1, 65), "block z = 65 exceeds 64"),
                                         ((1, 65536, 1), (1, 1, 1), "grid y = 65536 blocks exceeds 65535"),
                                         ((2**31, 1, 1), (1, 1, 1), "grid x = 2147483648")])
def test_limits_are_checked_before_launch(dev, gs, ls, what):
  prg = dev.program(add_ptx("sm_90"))
  a = dev.alloc(64, "device")
  with pytest.raises(ProgramArgumentError, match=what):
    prg(a, a, vals=(1, 1, 0.0, bytes(12)), global_size=gs, local_size=ls)


def test_register_and_shared_limits(dev):
  prg = dev.program(add_ptx("sm_90"))
  old, prg.kernel.registers = prg.kernel.registers, 100  # as ptxas would report for a register-hungry kernel
  try:
    with pytest.raises(ProgramArgumentError, match=r"100 registers x 1024 threads"):
      prg.check_limits((1, 1, 1), (1024, 1, 1), 0)
  finally:
    prg.kernel.registers = old
  with pytest.raises(ProgramArgumentError, match="shared memory per block exceed sm_90's 232448"):
    prg.check_limits((1, 1, 1), (32, 1, 1), 300 << 10)


@pytest.mark.parametrize("arch", [row.sm for row in ARCHS])
def test_the_check_kernel_has_a_cubin_for_every_arch(arch):
  """drivers/nv/check_kernel.py (tools/nv_check_kernel.py): the cubin hcq.check loads agrees with what ptxas makes now."""
  from hcq.drivers.nv.check_kernel import cubin_for, ptx_for
  shipped = read_cubin(cubin_for(arch))
  fresh = read_cubin(compile_ptx(ptx_for(arch), arch))
  assert shipped.arch == arch and list(shipped.kernels) == ["check_axpi"]
  a, b = shipped.kernels["check_axpi"], fresh.kernels["check_axpi"]
  assert (a.params, a.param_base, a.param_size) == (b.params, b.param_base, b.param_size)


GLOBALS = """
.version 8.0
.target sm_90
.address_size 64
.global .align 4 .u32 counter = 5;
.global .align 8 .u64 ptr = counter;
.global .align 4 .b8 zeros[64];
.visible .entry g(.param .u64 out)
{
  .reg .b32 %r<4>; .reg .b64 %rd<8>;
  ld.global.u64 %rd1, [ptr]; ld.u32 %r1, [%rd1]; mov.u64 %rd2, zeros; st.global.u32 [%rd2+4], %r1;
  ld.param.u64 %rd3, [out]; st.global.u32 [%rd3], %r1; ret;
}
"""
CALLS = """
.version 8.0
.target sm_90
.address_size 64
.global .align 4 .u32 counter = 5;
.func (.reg .u32 rv) add1(.reg .u32 a) { add.u32 rv, a, 1; ret; }
.func (.reg .u32 rv) add2(.reg .u32 a) { add.u32 rv, a, 2; ret; }
.visible .entry c(.param .u64 out, .param .u32 k)
{
  .reg .b32 %r<4>; .reg .b64 %rd<8>; .reg .pred %p;
  ld.param.u32 %r1, [k]; ld.global.u32 %r3, [counter]; setp.eq.u32 %p, %r1, %r3;
  @%p call (%r2), add1, (%r1);
  @!%p call (%r2), add2, (%r1);
  ld.param.u64 %rd3, [out]; st.global.u32 [%rd3], %r2; ret;
}
"""
FPTR = CALLS.replace("""  @%p call (%r2), add1, (%r1);
  @!%p call (%r2), add2, (%r1);""", """  mov.u64 %rd1, add1; mov.u64 %rd2, add2; selp.b64 %rd4, %rd1, %rd2, %p;
  proto: .callprototype (.param .u32 _) _ (.param .u32 _);
  { .param .u32 a; .param .u32 b; st.param.u32 [a], %r1; call (b), %rd4, (a), proto; ld.param.u32 %r2, [b]; }""")


def _ptxas(ptx: str, tmp_path, *flags: str) -> bytes:
  (tmp_path / "k.ptx").write_text(ptx)
  subprocess.run([ptxas_path(), "-arch=sm_90", *flags, str(tmp_path / "k.ptx"), "-o", str(tmp_path / "k.o")], check=True, capture_output=True)
  return (tmp_path / "k.o").read_bytes()


@pytest.mark.parametrize("ptx,flags", [(GLOBALS, ()), (GLOBALS, ("-c",)), (CALLS, ("-c",)), (FPTR, ("-c",))], ids=["globals", "globals-c", "calls-c", "fptr-c"])
def test_relocations_agree_with_cuobjdump(ptx, flags, tmp_path):
  """Differential: the relocations against what the loader places (code, constant banks, .nv.global.init), with the
  R_CUDA names of their type numbers, are the ones cuobjdump -elf lists (its debug sections aside)."""
  cubin = _ptxas(ptx, tmp_path, *flags)
  out = subprocess.run([os.path.join(os.path.dirname(ptxas_path()), "cuobjdump"), "-elf", str(tmp_path / "k.o")], capture_output=True, text=True,
                       check=True).stdout
  want, section = set(), None
  for line in out.splitlines():
    if line.startswith(".section"): section = re.match(r"\.section \.rela?(\S+)", line).group(1) if ".rel" in line else None
    elif section and not section.startswith(".debug") and (m := re.match(r"(0x[0-9a-f]+)\s+(\S+)\s+(R_CUDA_\w+)", line)):
      want.add((section, int(m.group(1), 16), m.group(3), m.group(2)))
  (k,) = read_cubin(cubin).kernels.values()
  assert want and {(r.target, r.offset, r.type_name, r.symbol) for r in k.relocations} == want


def test_global_variables_are_placed_and_their_relocations_applied(dev, tmp_path):
  """A linked cubin: the globals' addresses go into constant bank 4 (R_CUDA_64), a pointer initialiser into
  .nv.global.init (R_CUDA_G64); .nv.global starts zeroed."""
  prg = dev.program(_ptxas(GLOBALS, tmp_path))
  init, bss = prg.globals[".nv.global.init"], prg.globals[".nv.global"]
  data = init.copyout(np.empty(init.nbytes, np.uint8)).tobytes()
  counter = init.addr + 8  # ptxas lays out ptr (8 bytes) then counter
  assert struct.unpack_from("<QI", data) == (counter, 5)
  assert prg.banks[4].copyout(np.empty(3, np.uint64)).tolist() == [counter, init.addr, bss.addr]
  assert not bss.copyout(np.empty(64, np.uint8)).any()


def test_code_relocations_patch_the_instruction_immediates(dev, tmp_path):
  """A relocatable cubin (ptxas -c): R_CUDA_ABS32_LO_32/HI_32 put the address halves into the instructions' 32-bit
  immediates; nvdisasm of the loaded code shows them."""
  prg = dev.program(_ptxas(GLOBALS, tmp_path, "-c"))
  (tmp_path / "code.bin").write_bytes(prg.code.copyout(np.empty(prg.code.nbytes, np.uint8)).tobytes()[:len(prg.kernel.code)])
  sass = subprocess.run([os.path.join(os.path.dirname(ptxas_path()), "nvdisasm"), "-b", "SM90", str(tmp_path / "code.bin")], capture_output=True,
                        text=True, check=True).stdout
  lines = {int(m.group(1), 16): m.group(2).strip() for m in re.finditer(r"/\*([0-9a-f]{4})\*/\s+(.*?);", sass)}
  bases = {".nv.global.init": prg.globals[".nv.global.init"].addr, ".nv.global": prg.globals[".nv.global"].addr}
  code_relocs = [r for r in prg.kernel.relocations if r.target.startswith(".text")]
  assert len(code_relocs) == 4
  for r in code_relocs:
    addr = bases[r.symbol_section] + r.value + r.addend
    assert lines[r.offset].endswith(hex(addr & 0xFFFFFFFF if r.type_name.endswith("LO_32") else addr >> 32)), (r, lines[r.offset])


@pytest.mark.parametrize("ptx,pattern", [(CALLS, r"R_CUDA_ABS55_16_34 at \.text\.c\+0x[0-9a-f]+ to add[12]: hcq applies R_CUDA_64, R_CUDA_G64"),
                                         (FPTR, r"R_CUDA_(ABS56_16_34|UNIFIED32_(LO|HI)_32) at \.text\.c")])
def test_relocations_hcq_does_not_apply_are_refused_by_name(dev, ptx, pattern, tmp_path):
  with pytest.raises(HCQError, match=pattern):
    dev.program(_ptxas(ptx, tmp_path, "-c"))


def test_the_memory_descriptor_is_the_default_cache_policy(tmp_path):
  """Differential (cuobjdump -sass): on sm_90 a plain global load names the descriptor loaded from bank 0's
  memory_descriptor word, while a load with .L2::cache_hint names the value PTX's createpolicy made instead: the word is
  the default cache policy, which hcq leaves 0 (no policy) and the emulated GPU requires to be 0."""
  ptx = """.version 8.0
.target sm_90
.address_size 64
.visible .entry cp(.param .u64 out, .param .u64 in)
{
  .reg .b32 %r<4>; .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [in]; ld.param.u64 %rd2, [out];
  createpolicy.fractional.L2::evict_last.b64 %rd3, 1.0;
  ld.global.L2::cache_hint.u32 %r1, [%rd1], %rd3;
  ld.global.u32 %r2, [%rd1+4];
  add.u32 %r1, %r1, %r2; st.global.u32 [%rd2], %r1; ret;
}"""
  (tmp_path / "k.cubin").write_bytes(compile_ptx(ptx, "sm_90"))
  sass = subprocess.run([os.path.join(os.path.dirname(ptxas_path()), "cuobjdump"), "-sass", str(tmp_path / "k.cubin")], capture_output=True,
                        text=True, check=True).stdout
  default = re.search(rf"ULDC\.64 (UR\d+), c\[0x0\]\[{DRIVER_CONSTANTS['sm_90'].memory_descriptor:#x}\]", sass).group(1)
  loads = dict((off, ur) for ur, off in re.findall(r"LDG\.E R\d+, desc\[(UR\d+)\]\[R\d+\.64(\+0x4)?\]", sass))
  assert loads["+0x4"] == default and loads[""] != default  # the plain load, the hinted one
