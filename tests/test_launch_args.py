"""Launch arguments, dimensions and buffers at their edges (issue 14, points 1-3), on every path that packs kernel arguments:
the CPU device, the emulated AMD GPU (MOCKKFD+AMD) and hcq.asm.emu.run. Each case checks the bytes the kernel sees or the
error's text."""
from __future__ import annotations
import re
import subprocess
import sys

import numpy as np
import pytest

import hcq
from hcq.asm.emu.run import run as emu_run
from hcq.errors import ProgramArgumentError
from hcq.program import DIM_LIMIT, KernelArg, by_value_kind, launch_dims, pack_value
from tests.tools import compile_opencl, require_module

# echo(out, f, i, u, l, h, d, c, us): each value stored at its kernarg offset - 8, so `out` holds what the kernel read
ECHO_CL = r"""
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
__kernel void echo(__global uchar *out, float f, int i, uint u, long l, half h, double d, char c, ushort us) {
  *(__global float *)(out + 0) = f; *(__global int *)(out + 4) = i; *(__global uint *)(out + 8) = u;
  *(__global long *)(out + 16) = l; *(__global half *)(out + 24) = h; *(__global double *)(out + 32) = d;
  out[40] = c; *(__global ushort *)(out + 42) = us;
}
typedef int myint;
__kernel void untyped(__global uint *out, myint x) { out[0] = as_uint(x); }
__kernel void sizes(__global uint *out) { out[0] = __builtin_amdgcn_workgroup_size_x(); out[1] = __builtin_amdgcn_grid_size_x(); }
__kernel void __attribute__((reqd_work_group_size(64, 1, 1))) fixed(__global uint *out) { out[__builtin_amdgcn_workitem_id_x()] = 1; }
"""
# the CPU kernel of the same signature: the kernarg bytes after the buffer pointer, copied to `out`
ECHO_IR = r"""
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)
define void @echo(ptr %ka, i32 %gx, i32 %gy, i32 %gz, i32 %lx, i32 %ly, i32 %lz) {
  %out = load ptr, ptr %ka
  %src = getelementptr i8, ptr %ka, i64 8
  call void @llvm.memcpy.p0.p0.i64(ptr %out, ptr %src, i64 44, i1 false)
  ret void
}
"""
KINDS = ["buffer", "f32", "i32", "u32", "i64", "f16", "f64", "i8", "u16"]
NAMES = ["out", "f", "i", "u", "l", "h", "d", "c", "us"]
# what the kernel wrote, as numpy reads it (offsets are the kernarg offsets - 8, from clang's layout)
SEEN = np.dtype({"names": NAMES[1:], "formats": ["<f4", "<i4", "<u4", "<i8", "<f2", "<f8", "i1", "<u2"],
                 "offsets": [0, 4, 8, 16, 24, 32, 40, 42], "itemsize": 44})
PATHS = ["CPU", "AMD", "emu"]
ZERO = (0.0, 0, 0, 0, 0.0, 0.0, 0, 0)


@pytest.fixture(scope="module")
def code_object(tmp_path_factory):
  return compile_opencl(ECHO_CL, tmp_path_factory.mktemp("k"), extra=("-cl-kernel-arg-info",))


@pytest.fixture(scope="module")
def cpu():
  require_module("llvmlite")  # a pip dependency of the test extras: skips here, fails in CI
  return hcq.Device("CPU")


@pytest.fixture(scope="module")
def amd():
  return hcq.Device("MOCKKFD+AMD")


@pytest.fixture(scope="module")
def echo(request, code_object, cpu, amd):
  """launch(path, vals) -> the record the kernel wrote, through that path."""
  cpu_prg = cpu.program(ECHO_IR, "echo", args=KINDS, arg_names=NAMES)
  amd_prg = amd.program(code_object, "echo")

  def launch(path: str, vals: tuple, **dims):
    if path == "emu":
      out = np.zeros(SEEN.itemsize, np.uint8)
      emu_run(code_object, [out, *vals], kernel="echo", **dims)
      return out.view(SEEN)[0]
    dev, prg = (cpu, cpu_prg) if path == "CPU" else (amd, amd_prg)
    buf = dev.alloc(SEEN.itemsize)
    buf.copyin(np.zeros(SEEN.itemsize, np.uint8))
    prg(buf, vals=vals, wait=True, **dims)
    return buf.copyout(np.empty(SEEN.itemsize, np.uint8)).view(SEEN)[0]
  return launch


# (values passed, values the kernel must see): Python and numpy scalars, converted by the declared type
ACCEPTED = [
  ((2, 4.0, np.uint32(7), np.int64(-5), 0.5, np.float32(0.25), -3, np.uint16(9)), (2.0, 4, 7, -5, 0.5, 0.25, -3, 9)),
  ((np.float64(1.5), np.int32(-4), 2**32 - 1, -2**63, np.float16(-2.0), 1e300, np.int8(-128), 65535),
   (1.5, -4, 2**32 - 1, -2**63, -2.0, 1e300, -128, 65535)),
  ((np.float32(0.5), np.int64(4), np.float64(3.0), 2**63 - 1, 65504, np.int32(-7), 127, np.uint64(1)),
   (0.5, 4, 3, 2**63 - 1, 65504.0, -7.0, 127, 1)),
  # ints into floats round to nearest, as a C assignment does; nan and inf pass as they are
  ((16777217, 0, 0, 0, float("inf"), float("-inf"), 0, 0), (16777216.0, 0, 0, 0, np.inf, -np.inf, 0, 0)),
]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("vals,seen", ACCEPTED)
def test_values_packed_by_declared_type(echo, path, vals, seen):
  got = echo(path, vals)
  for name, want in zip(NAMES[1:], seen):
    assert got[name] == want, f"{name}: passed {vals[NAMES.index(name) - 1]!r}, the kernel saw {got[name]!r}, want {want!r}"


@pytest.mark.parametrize("path", PATHS)
def test_nan_reaches_the_kernel(echo, path):
  got = echo(path, (float("nan"), 0, 0, 0, np.float16("nan"), np.float64("nan"), 0, 0))
  assert np.isnan(got["f"]) and np.isnan(got["h"]) and np.isnan(got["d"])


# (argument index among the values, value, the error's text): each would change on its way to the kernel
REFUSED = [
  (1, 2.5, r"argument i \(i32\) cannot take 2.5: not an integer"),
  (1, np.float32(2.5), r"argument i \(i32\) cannot take .*2.5.*: not an integer"),
  (1, float("nan"), r"argument i \(i32\) cannot take nan: not an integer"),
  (1, 2**31, r"argument i \(i32\) cannot hold 2147483648: valid -2147483648..2147483647"),
  (2, 2**32 + 4, r"argument u \(u32\) cannot hold 4294967300: valid 0..4294967295"),
  (2, -1, r"argument u \(u32\) cannot hold -1: valid 0..4294967295"),
  (2, np.int64(-1), r"argument u \(u32\) cannot hold .*-1.*: valid 0..4294967295"),
  (0, 1e39, r"argument f \(f32\) cannot hold 1e\+39: the largest finite value is 3.40282"),
  (0, np.float64(-1e39), r"argument f \(f32\) cannot hold .*-1e\+39.*: the largest finite value is 3.40282"),
  (0, 1e-50, r"argument f \(f32\) cannot hold 1e-50: it would round to 0"),
  (0, 2**200, r"argument f \(f32\) cannot hold 1606938.*: the largest finite value"),
  (5, 10**400, r"argument d \(f64\) cannot hold 1000.*: past every float's range"),
  (4, 70000.0, r"argument h \(f16\) cannot hold 70000.0: the largest finite value is 65504.0"),
  (6, 128, r"argument c \(i8\) cannot hold 128: valid -128..127"),
  (7, -1, r"argument us \(u16\) cannot hold -1: valid 0..65535"),
  (1, True, r"argument i \(i32\) cannot take True: a bool, not an integer"),
  (3, "5", r"argument l \(i64\) cannot take '5': a str, not an integer"),
  (0, "x", r"argument f \(f32\) cannot take str 'x': valid are ints and floats"),
  (0, None, r"argument f \(f32\) cannot take NoneType None: valid are ints and floats"),
]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("index,value,message", REFUSED)
def test_values_that_would_change_are_refused(echo, path, index, value, message):
  vals = ZERO[:index] + (value,) + ZERO[index + 1:]
  with pytest.raises(ProgramArgumentError, match="echo: " + message):
    echo(path, vals)


def test_untyped_arguments_keep_the_size_rule(code_object, amd):
  """Without a .type_name clang knows (a typedef here, or HIP's metadata) only the size is known: an int packs as an int, a
  float as the float of that width, bytes of the size as they are (docs/hcq.md)."""
  prg = amd.program(code_object, "untyped")
  assert [a.kind for a in prg.layout] == ["buffer", "b32"]
  out = amd.alloc(4)
  for value, bits in [(4, 4), (-1, 0xffffffff), (2.0, 0x40000000), (np.float32(0.5), 0x3f000000), (b"\x01\x02\x03\x04", 0x04030201)]:
    prg(out, vals=(value,), wait=True)
    assert out.copyout(np.empty(1, np.uint32))[0] == bits, value
    got = np.zeros(1, np.uint32)
    emu_run(code_object, [got, value], kernel="untyped")
    assert got[0] == bits, value
  for value, message in [(2**32, r"untyped: argument x \(b32: 4 bytes of unknown type\) cannot hold 4294967296: valid -2147483648..4294967295"),
                         (b"\x01", r"takes 4 bytes, got 1"), (True, r"cannot take bool True")]:
    with pytest.raises(ProgramArgumentError, match=message):
      prg(out, vals=(value,))


def test_type_names():
  assert [by_value_kind(s, t) for s, t in [(4, "float"), (4, "uint"), (8, "ulong"), (2, "half"), (1, "char"), (4, "myint"), (8, "int2"),
                                           (16, "float4"), (4, "double")]] == ["f32", "u32", "u64", "f16", "i8", "b32", "b64", "b128", "b32"]
  out = bytearray(16)
  pack_value("k", KernelArg("v", 0, "b128"), np.arange(4, dtype=np.float32).tobytes(), out)
  assert np.frombuffer(out, np.float32).tolist() == [0, 1, 2, 3]
  with pytest.raises(ProgramArgumentError, match=r"argument v \(b128: 16 bytes of unknown type\) takes bytes of exactly that size, got float"):
    pack_value("k", KernelArg("v", 0, "b128"), 1.0, out)
  flag = KernelArg("b", 3, "bool")
  for v, want in [(True, 1), (np.True_, 1), (np.False_, 0), (1, 1), (0, 0), (np.int8(1), 1)]:
    pack_value("k", flag, v, out)
    assert out[3] == want, v
  for v in (2, 0.5, "1", None):
    with pytest.raises(ProgramArgumentError, match=r"argument b \(bool\) cannot take .*: valid are True, False, 0 and 1"):
      pack_value("k", flag, v, out)


def test_the_asm_kernel_builder_types_its_arguments():
  """hcq.asm's Kernel writes the .type_name clang would, so its kernels pack each value by the kind it was declared with."""
  from hcq.asm.codeobject import read_code_object
  from hcq.asm.kernel import ARG_SIZES, Kernel
  from hcq.program import metadata_layout
  kinds = [k for k in ARG_SIZES]
  co = read_code_object(Kernel("k", args=[(f"a{i}", k) for i, k in enumerate(kinds)]).add("s_endpgm").to_elf())
  assert [a.kind for a in metadata_layout(co.kernels["k"])[0]] == kinds


# ---- launch dimensions ----

@pytest.mark.parametrize("path", PATHS)
def test_grid_past_32_bits_is_refused(echo, path):
  with pytest.raises(ProgramArgumentError, match=r"global_size must be 1 to 3 ints from 1 to 4294967295 .*got 4294967299"):
    echo(path, ZERO, global_size=2**32 + 3)
  with pytest.raises(ProgramArgumentError, match=r"global_size must be .*got \(1, 4294967296\)"):
    echo(path, ZERO, global_size=(1, 2**32))


@pytest.mark.parametrize("path", PATHS)
def test_numpy_ints_for_dims(echo, path):
  got = echo(path, ZERO[:1] + (np.int16(3),) + ZERO[2:], global_size=np.int64(1), local_size=(np.uint32(1), np.int8(1)))
  assert got["i"] == 3


@pytest.mark.parametrize("bad", [0, -1, 1.0, (1, 2, 3, 4), (), "4", b"4", True, (1, True), None, (np.float32(2),), np.zeros((2, 2), int)])
def test_launch_dims_refuses(bad):
  with pytest.raises(ProgramArgumentError, match="must be 1 to 3 ints from 1 to 4294967295"):
    launch_dims(bad, "global_size")
  assert launch_dims(np.uint64(DIM_LIMIT), "g") == (DIM_LIMIT, 1, 1)
  assert launch_dims(np.array([4, 2]), "g") == (4, 2, 1) and launch_dims([np.int8(3)], "g") == (3, 1, 1)


@pytest.mark.parametrize("path", ["AMD", "emu"])
def test_workgroup_limits_from_the_metadata(echo, code_object, amd, path):
  # OpenCL kernels are built for at most 256 threads per workgroup unless they say otherwise
  with pytest.raises(ProgramArgumentError, match=r"echo: a workgroup of 512x1x1 = 512 threads exceeds the kernel's limit of 256 "
                                                 r"\(its .max_flat_workgroup_size\)"):
    echo(path, ZERO, local_size=512)
  with pytest.raises(ProgramArgumentError, match=r"16x16x2 = 512 threads exceeds the kernel's limit of 256"):
    echo(path, ZERO, local_size=(16, 16, 2))
  echo(path, ZERO, local_size=256)
  # a grid of 2**32 threads in x does not fit the dispatch's 32-bit grid size (nor the hidden block count it implies)
  with pytest.raises(ProgramArgumentError, match=r"echo: 16777216 workgroups of 256 threads in x is 4294967296 threads; a dispatch holds "
                                                 r"at most 4294967295"):
    echo(path, ZERO, global_size=2**24, local_size=256)
  # .reqd_workgroup_size: exactly that
  out = np.zeros(64, np.uint32)
  with pytest.raises(ProgramArgumentError, match=r"fixed: the kernel was built for workgroups of exactly \(64, 1, 1\) threads"):
    if path == "emu": emu_run(code_object, [out], kernel="fixed", local_size=(32,))
    else: amd.program(code_object, "fixed")(amd.alloc(256), local_size=32)


def test_hidden_arguments_hold_every_grid_launch_dims_lets_through(code_object, amd):
  """The largest grid and workgroup the checks allow fit the hidden arguments (32-bit block counts, 16-bit group sizes):
  no struct.error is left for a launch to meet."""
  import struct
  prg = amd.program(code_object, "sizes")
  hidden = dict(prg.hidden)
  out = prg.kernargs([amd.alloc(64)], (), (DIM_LIMIT, DIM_LIMIT, DIM_LIMIT), (1, 1, prg.max_workgroup_size))
  assert struct.unpack_from("<III", out, hidden["hidden_block_count_x"]) == (DIM_LIMIT,) * 3
  assert struct.unpack_from("<HHH", out, hidden["hidden_group_size_x"]) == (1, 1, 256)


def test_numpy_dims_reach_the_kernel(code_object, amd):
  """The group size and grid size the kernel reads (hidden arguments) from numpy-int dimensions."""
  got = np.zeros(2, np.uint32)
  emu_run(code_object, [got], kernel="sizes", global_size=np.int64(3), local_size=[np.int32(8)])
  out = amd.alloc(8)
  amd.program(code_object, "sizes")(out, global_size=np.int64(3), local_size=(np.int32(8),), wait=True)
  assert got.tolist() == out.copyout(np.empty(2, np.uint32)).tolist() == [8, 24]


def test_numpy_ints_for_sizes(cpu, amd):
  for dev in (cpu, amd):
    buf = dev.alloc(np.int64(16), "host")
    assert buf.nbytes == 16 and type(buf.nbytes) is int
    assert buf.offset(np.int32(4), np.uint8(8)).nbytes == 8
    for bad in (np.float32(16), "16", 0, -1, True):
      with pytest.raises(ValueError, match="alloc needs a positive number of bytes"):
        dev.alloc(bad)


# ---- buffers ----

@pytest.mark.parametrize("which", ["CPU", "AMD"])
def test_object_arrays_never_reach_the_device(cpu, amd, which):
  dev = cpu if which == "CPU" else amd
  buf = dev.alloc(64, "host").copyin(np.arange(8, dtype=np.int64))
  for arr in (np.empty(8, dtype=object), np.zeros(4, dtype=[("a", "i4"), ("b", "O")])):
    with pytest.raises(ValueError, match=r"copyout: a .* array holds Python objects"):
      buf.copyout(arr)
    with pytest.raises(ValueError, match=r"copyin: a .* array holds Python objects"):
      buf.copyin(arr)
  with pytest.raises(ValueError, match=r"copyin: a object array holds Python objects"):
    buf.copyin([1, None] * 4)
  plain = buf.copyout(np.zeros(4, dtype=[("a", "<i4"), ("b", "<u4")]))  # structured, without objects: plain data
  assert plain["a"].tolist() == [0, 1, 2, 3] and plain["b"].tolist() == [0] * 4


@pytest.mark.parametrize("path", ["CPU", "AMD"])
def test_launch_refuses_foreign_and_freed_buffers(cpu, amd, code_object, path):
  dev, other = (cpu, amd) if path == "CPU" else (amd, cpu)
  prg = cpu.program(ECHO_IR, "echo", args=KINDS, arg_names=NAMES) if path == "CPU" else amd.program(code_object, "echo")
  with pytest.raises(ProgramArgumentError, match=rf"echo: argument out is <Buffer 64 bytes .* on {re.escape(str(other))}>, not a buffer of "
                                                 rf"{re.escape(str(dev))}; copy it to {re.escape(str(dev))} first"):
    prg(other.alloc(64), vals=ZERO)
  buf = dev.alloc(64)
  view = buf.offset(8).offset(8)
  buf.free()
  for b in (buf, view):
    with pytest.raises(ProgramArgumentError, match=r"echo: argument out is <Buffer .*>, which was freed"):
      prg(b, vals=ZERO)
  live = dev.alloc(64)
  prg(live.offset(0, 48), vals=ZERO, wait=True)  # a view of a live buffer is fine


@pytest.mark.parametrize("which", ["CPU", "AMD"])
def test_copy_sizes(cpu, amd, which):
  dev = cpu if which == "CPU" else amd
  a, b = dev.alloc(64, "host"), dev.alloc(64, "host")
  for n, message in [(-1, "copy size must be from 0 to 2\\*\\*64-1, got -1"), (np.int64(-8), "got -8"), (2**64, "got 18446744073709551616"),
                     (1.5, "copy size must be an int or a hcq.Variable, got float 1.5")]:
    with pytest.raises(ValueError, match=message):
      dev.copy_queue().copy(b.addr, a.addr, n)
  with pytest.raises(ValueError, match="copy destination .* runs past the 64-bit address space"):
    dev.copy_queue().copy(2**64 - 8, a.addr, 16)
  a.copyin(np.arange(16, dtype=np.int32))
  dev.copy_queue().copy(b.addr, a.addr, np.int64(64)).signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
  dev.synchronize()
  assert b.copyout(np.empty(16, np.int32)).tolist() == list(range(16))


def test_cpu_engine_refuses_a_negative_size_from_a_variable(cpu):
  from hcq.sym import Variable
  a, b = cpu.alloc(64), cpu.alloc(64)
  q = cpu.copy_queue().copy(b.addr, a.addr, Variable("n", -8, 64)).signal(cpu.timeline_signal, Variable("t"))
  q.submit(cpu, {"n": -1, "t": cpu.next_timeline()})
  with pytest.raises(hcq.GPUFault, match=r"copy failed: copy source .* is outside every allocation"):
    cpu.synchronize()


# ---- one Device per physical device ----

def test_spellings_of_one_device_open_one_device(cpu, amd):
  from hcq.device import _DeviceOpener
  from hcq.drivers.amd.kfd import gpu_nodes
  from hcq.drivers.os import HostOS
  assert all(hcq.Device(s) is cpu for s in ("CPU", "CPU:LLVM", "cpu", "CPU+CPU", "cpu+cpu:llvm"))
  mock = ["MOCKKFD+AMD", "MOCKKFD+AMD::gfx1100", "mockkfd+amd:llvm", "MOCKKFD+AMD:ASM:gfx1100", "MOCKKFD+AMD:LLVM:gfx1100"]
  if not gpu_nodes(HostOS()): mock += ["AMD", "AMD:LLVM", "AMD::gfx1100", "amd:asm:gfx1100"]  # AMD is the emulated GPU here
  opened = len(_DeviceOpener._opened)
  assert all(hcq.Device(s) is amd for s in mock)
  assert len(_DeviceOpener._opened) == opened
  assert str(amd) == f"MOCKKFD+AMD::{amd.arch}" and str(cpu) == "CPU"


# ---- python -m hcq.asm run ----

ARG_KERNEL = "s_load_b64 s[2:3], s[0:1], 0x0\ns_load_b32 s4, s[0:1], 0x8\ns_waitcnt lgkmcnt(0)\nv_mov_b32 v1, s4\nv_mov_b32 v0, 0\n" \
             "global_store_b32 v0, v1, s[2:3]\ns_endpgm\n"


@pytest.mark.parametrize("args,rc,output", [
  (["--arg", "x=f32:2"], 0, "o: [1073741824]"),
  (["--arg", "x=i32:4.0"], 0, "o: [4]"),
  (["--arg", "x=u32:0xE"], 0, "o: [14]"),
  (["--arg", "x=i32:2.5"], 2, "error: --arg 'x=i32:2.5': argument x (i32) cannot take 2.5: not an integer"),
  (["--arg", "x=u32:4294967300"], 2, "error: --arg 'x=u32:4294967300': argument x (u32) cannot hold 4294967300: valid 0..4294967295"),
  (["--arg", "x=f32:1e39"], 2, "error: --arg 'x=f32:1e39': argument x (f32) cannot hold 1e+39: the largest finite value is 3.4028234663852886e+38"),
  (["--arg", "x=i16:0x"], 2, "error: --arg 'x=i16:0x': '0x' is not a i16 value"),
  (["--arg", "x=u32:1", "--grid", "4294967299"], 2, "error: --grid '4294967299': expected 1 to 3 integers from 1 to 4294967295 (2**32-1)"),
  (["--arg", "x=u32:1", "--block", "0"], 2, "error: --block '0': expected 1 to 3 integers"),
  (["--arg", "x=u32:1", "--grid", "4194304", "--block", "1024"], 1,
   "error: ProgramArgumentError: k: 4194304 workgroups of 1024 threads in x is 4294967296 threads"),
])
def test_run_cli_values_and_dims(tmp_path, args, rc, output):
  src = tmp_path / "k.s"
  src.write_text(ARG_KERNEL)
  p = subprocess.run([sys.executable, "-m", "hcq.asm", "run", str(src), "--dev", "MOCKKFD+AMD", "--arg", "o=buffer:u32:1", "--block", "1",
                      *args], capture_output=True, text=True, timeout=300)
  assert p.returncode == rc, p.stderr
  assert output in p.stdout + p.stderr
  if rc: assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_arg_struct_packs_what_pack_kernargs_packs_or_leaves_it_to_it(cpu):
  """Differential, on random layouts and values: the launch fast path's ArgStruct gives exactly pack_kernargs's bytes
  for its span, or None (then pack_kernargs packs or refuses); never bytes for a value pack_kernargs refuses."""
  from hcq.program import ArgStruct, natural_layout, pack_kernargs
  rng = np.random.default_rng(18)
  kinds = ["i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f16", "f32", "f64", "bool", "buffer"]
  pick = lambda *xs: xs[rng.integers(len(xs))]
  values = {"i": lambda b: pick(0, -1, 1, (1 << b - 1) - 1, -(1 << b - 1), 1 << b - 1, int(rng.integers(-(1 << 62), 1 << 62)), 2.0, True, np.int16(-3)),
            "u": lambda b: pick(0, 1, (1 << b) - 1, 1 << b, -1, int(rng.integers(0, 1 << 62)), np.uint8(7), 3.5, False),
            "f": lambda b: pick(0.0, -0.0, 1.5, 0.1, 1e-50, 1e-8, -1e39, 65504.0, 65520.0, 1e308, float("inf"), float("nan"), 3, np.float32(0.25), "x"),
            "b": lambda b: pick(True, False, 1, 0, 2, np.bool_(True))}
  bufs = [cpu.alloc(64) for _ in range(3)]
  packed = refused = 0
  for _ in range(400):
    ks = [kinds[i] for i in rng.integers(len(kinds), size=int(rng.integers(1, 7)))]
    layout = natural_layout(ks)
    order = rng.permutation(len(layout))  # declaration order need not be offset order
    layout = [layout[i] for i in order]
    s = ArgStruct.make(layout, cpu)
    bs = [bufs[int(rng.integers(3))] for a in layout if a.kind == "buffer"]
    vs = [values[a.kind[0]](int(a.kind[1:]) if a.kind[1:].isdigit() else 1) for a in layout if a.kind != "buffer"]
    got = s.pack(bs, vs)
    try:
      want = pack_kernargs("k", layout, bs, vs, s.end, cpu)[s.start:s.end]
    except ProgramArgumentError:
      assert got is None, (layout, vs)
      refused += 1
      continue
    assert got is None or got == bytes(want), (layout, vs)
    packed += got is not None
  assert packed > 50 and refused > 50  # both sides of the rule were exercised
