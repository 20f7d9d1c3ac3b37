"""hcq.asm speed, side by side with peers in one run: DSL construction+encoding, decoding to instruction objects,
text assembly and text disassembly of a 100k-instruction mixed program, and text assembly and disassembly of 100k
lines of clang-19's output for nine OpenCL kernels (when clang-19 is installed).

Peers: tinygrad's RDNA3 DSL (tinygrad.runtime.autogen.amd.rdna3.ins; put on sys.path from TINYGRAD_PATH, default
/tmp/tinygrad-bench, inside this script only) building the SAME instruction list (the bench checks the bytes agree),
and llvm-mc-19 on the same 100k-line file. Text assembly and disassembly time whole processes (`python -m hcq.asm
asm FILE.s --raw`, `python -m hcq.asm disasm FILE.bin`, `llvm-mc-19`), process start included, and check the
outputs. Issue 3's targets: DSL >= 5x tinygrad, decoding >= 10x tinygrad, text >= llvm-mc's lines/s.

Every figure is the best of --repeat rounds, with the median beside it; each round runs hcq and its peers in turn,
so that both see the same load (the machine is shared and noisy).

  python bench/asm_speed.py [--count N] [--repeat R]
"""
from __future__ import annotations
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from hcq.asm import assemble, decode_all, llvm
from hcq.asm.isa import load

ARCH = "gfx1100"
TINYGRAD_PATH = os.environ.get("TINYGRAD_PATH", "/tmp/tinygrad-bench")


def hcq_mix() -> list:
  """A typical compute-kernel mix (scalar, vector, memory, constants, literals, modifiers), one maker per kind;
  registers, offsets and constants vary with the instruction's index."""
  from hcq.asm.rdna3 import (ds_load_b32, global_load_b32, global_store_b32, s, s_add_u32, s_load_b128, s_mov_b32, s_waitcnt, v,
                             v_add_f32_e32, v_add_nc_u32_e32, v_cmp_gt_i32_e32, v_cndmask_b32_e32, v_fma_f32, v_lshlrev_b32_e32,
                             v_mov_b32_e32, v_mul_f32_e64)
  return [
    lambda i: v_add_f32_e32(v[i % 200], v[(i + 1) % 200], v[(i + 2) % 200]),
    lambda i: v_fma_f32(v[i % 200], v[(i + 3) % 200], 2.0, v[(i + 5) % 200]),
    lambda i: v_mul_f32_e64(v[i % 200], -v[(i + 1) % 200], abs(v[(i + 2) % 200]), clamp=True),
    lambda i: s_load_b128(s[4 * (i % 20):4 * (i % 20) + 3], s[0:1], (i % 64) * 16),
    lambda i: global_load_b32(v[i % 200], v[(i + 1) % 200], s[2:3], offset=i % 2048),
    lambda i: global_store_b32(v[(i + 1) % 200], v[i % 200], s[2:3]),
    lambda i: v_mov_b32_e32(v[i % 200], 0x12345678 + i),
    lambda i: s_add_u32(s[i % 100], s[(i + 1) % 100], i % 60),
    lambda i: v_lshlrev_b32_e32(v[i % 200], i % 31, v[(i + 1) % 200]),
    lambda i: v_add_nc_u32_e32(v[i % 200], s[i % 100], v[(i + 4) % 200]),
    lambda i: v_cmp_gt_i32_e32(v[i % 200], v[(i + 1) % 200]),
    lambda i: v_cndmask_b32_e32(v[i % 200], i % 8, v[(i + 1) % 200]),
    lambda i: ds_load_b32(v[i % 200], v[(i + 1) % 200], offset=(i % 256) * 4),
    lambda i: s_mov_b32(s[i % 100], i),
    lambda i: s_waitcnt((i % 64) << 4 | 7),  # lgkmcnt(i % 64) expcnt(7)
  ]


def tinygrad_mix() -> list | None:
  """The same instructions in tinygrad's RDNA3 DSL (its field order: vdst, src0, ...; DS offsets as offset0/offset1;
  SMEM's offset by keyword), or None when tinygrad is not importable."""
  if os.path.isdir(TINYGRAD_PATH) and TINYGRAD_PATH not in sys.path: sys.path.append(TINYGRAD_PATH)
  try:
    from tinygrad.runtime.autogen.amd.rdna3.ins import (NULL, ds_load_b32, global_load_b32, global_store_b32, s, s_add_u32, s_load_b128,
                                                         s_mov_b32, s_waitcnt, v, v_add_f32_e32, v_add_nc_u32_e32, v_cmp_gt_i32_e32,
                                                         v_cndmask_b32_e32, v_fma_f32, v_lshlrev_b32_e32, v_mov_b32_e32, v_mul_f32_e64)
  except ImportError:
    return None
  return [
    lambda i: v_add_f32_e32(v[i % 200], v[(i + 1) % 200], v[(i + 2) % 200]),
    lambda i: v_fma_f32(v[i % 200], v[(i + 3) % 200], 2.0, v[(i + 5) % 200]),
    lambda i: v_mul_f32_e64(v[i % 200], -v[(i + 1) % 200], abs(v[(i + 2) % 200]), clmp=1),
    lambda i: s_load_b128(sdata=s[4 * (i % 20):4 * (i % 20) + 3], sbase=s[0:1], soffset=NULL, offset=(i % 64) * 16),
    lambda i: global_load_b32(vdst=v[i % 200], addr=v[(i + 1) % 200], saddr=s[2:3], offset=i % 2048),
    lambda i: global_store_b32(addr=v[(i + 1) % 200], data=v[i % 200], saddr=s[2:3]),
    lambda i: v_mov_b32_e32(v[i % 200], 0x12345678 + i),
    lambda i: s_add_u32(s[i % 100], s[(i + 1) % 100], i % 60),
    lambda i: v_lshlrev_b32_e32(v[i % 200], i % 31, v[(i + 1) % 200]),
    lambda i: v_add_nc_u32_e32(v[i % 200], s[i % 100], v[(i + 4) % 200]),
    lambda i: v_cmp_gt_i32_e32(v[i % 200], v[(i + 1) % 200]),
    lambda i: v_cndmask_b32_e32(v[i % 200], i % 8, v[(i + 1) % 200]),
    lambda i: ds_load_b32(vdst=v[i % 200], addr=v[(i + 1) % 200], offset0=(i % 256) * 4 & 0xff, offset1=(i % 256) * 4 >> 8),
    lambda i: s_mov_b32(s[i % 100], i),
    lambda i: s_waitcnt(simm16=(i % 64) << 4 | 7),
  ]


def tinygrad_decode(code: bytes) -> list:
  """tinygrad's own decode loop (as its viz/serve.py amd_decode): detect the format, from_bytes, step by size().
  amd_decode slices the whole rest of the buffer per instruction, which is quadratic; this gives it a 16-byte
  window (an instruction is at most 12), so its figure is its decoder's, not the copying's."""
  from tinygrad.renderer.amd import detect_format
  out, pos = [], 0
  while pos < len(code):
    rest = code[pos:pos + 16]
    inst = detect_format(rest, "rdna3").from_bytes(rest)
    out.append(inst)
    pos += inst.size()
  return out


def build_and_encode(mix: list, n: int, encode) -> bytes:
  insts = [mix[i % len(mix)](i) for i in range(n)]
  return b"".join([encode(x) for x in insts])


def interleaved(repeat: int, **fns) -> dict[str, tuple[object, float, float]]:
  """name -> (result, best seconds, median seconds) over `repeat` rounds; each round runs every fn once, in turn,
  so that a peer and hcq see the same load on a shared machine."""
  times: dict[str, list[float]] = {k: [] for k in fns}
  out: dict[str, object] = {}
  for _ in range(repeat):
    for k, fn in fns.items():
      t = time.perf_counter()
      out[k] = fn()
      times[k].append(time.perf_counter() - t)
  return {k: (out[k], min(ts), statistics.median(ts)) for k, ts in times.items()}


# processes run as after `pip install`, with Python's bytecode cache on (a sandbox may turn it off, which makes
# every process compile the 0.5 MB ISA table again)
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run_process(args: list[str], stdout=subprocess.DEVNULL) -> None:
  p = subprocess.run(args, stdout=stdout, stderr=subprocess.PIPE, env=CHILD_ENV)
  if p.returncode: raise SystemExit(f"{' '.join(args)} failed: {p.stderr.decode()[-2000:]}")


def text_timings(text: str, code: bytes, rep: int) -> tuple[bool, dict]:
  """Whole-process text assembly and disassembly of one program by hcq and llvm-mc, interleaved; (whether our CLI's
  bytes are `code` and its text is our own disassembly of it, name -> (result, best, median))."""
  insts = decode_all(code, ARCH)
  with tempfile.TemporaryDirectory() as d:
    s_path, bin_path, out_path, hex_path, dis_path = (os.path.join(d, f) for f in ("p.s", "p.bin", "out.bin", "p.txt", "dis.s"))
    open(s_path, "w").write(text)
    open(bin_path, "wb").write(code)
    pos, lines = 0, []
    for i in insts:
      lines.append(",".join(f"0x{b:02x}" for b in code[pos:pos + i.size])); pos += i.size
    open(hex_path, "w").write("\n".join(lines) + "\n")
    py = [sys.executable, "-m", "hcq.asm"]
    run_process(py + ["disasm", bin_path, "--arch", ARCH])  # warm-up: bytecode caches written, not timed
    fns = {"asm": lambda: run_process(py + ["asm", s_path, "--arch", ARCH, "--raw", "-o", out_path]),
           "dis": lambda: run_process(py + ["disasm", bin_path, "--arch", ARCH], open(dis_path, "w"))}
    if llvm.available():
      mc = [llvm.LLVM_MC, "-arch=amdgcn", f"-mcpu={ARCH}"]
      fns.update(mc_asm=lambda: run_process(mc + ["-filetype=obj", "-o", os.devnull, s_path]),
                 mc_dis=lambda: run_process(mc + ["--disassemble", hex_path]))
    r = interleaved(rep, **fns)
    ok = open(out_path, "rb").read() == code and open(dis_path).read() == "".join(str(i) + "\n" for i in insts)
  return ok, r


# kernels for the compiler-output program: float and integer ALU, f16 and f64, transcendentals, loops, LDS and
# barriers, atomics, cross-lane moves
KERNELS = r"""
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#define LID() ((int)__builtin_amdgcn_workitem_id_x())
#define GRP() ((int)__builtin_amdgcn_workgroup_id_x())
#define GID() (GRP() * (int)__builtin_amdgcn_workgroup_size_x() + LID())
#define BARRIER() do { __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); __builtin_amdgcn_s_barrier(); __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup"); } while (0)
__kernel void axpby(__global float* y, __global const float* x, float a, float b, int n) { int i = GID(); if (i < n) y[i] = a * x[i] + b * y[i]; }
__kernel void gelu(__global float* o, __global const float* a) {
  int i = GID(); float x = a[i], u = 1.5957691f * (x + 0.044715f * x * x * x); o[i] = x / (1.0f + __builtin_expf(-u)); }
__kernel void softmax_row(__global float* o, __global const float* a, int n) {
  __local float red[256]; int l = LID(); const __global float* r = a + GRP() * n; float m = -1e30f;
  for (int k = l; k < n; k += 256) m = __builtin_fmaxf(m, r[k]);
  red[l] = m; BARRIER();
  for (int s = 128; s > 0; s >>= 1) { if (l < s) red[l] = __builtin_fmaxf(red[l], red[l + s]); BARRIER(); }
  m = red[0]; float t = 0; for (int k = l; k < n; k += 256) t += __builtin_expf(r[k] - m);
  BARRIER(); red[l] = t; BARRIER();
  for (int s = 128; s > 0; s >>= 1) { if (l < s) red[l] += red[l + s]; BARRIER(); }
  for (int k = l; k < n; k += 256) o[GRP() * n + k] = __builtin_expf(r[k] - m) / red[0]; }
__kernel void matmul(__global float* c, __global const float* a, __global const float* b, int n) {
  int i = GRP(), j = LID(); float acc = 0; for (int k = 0; k < n; k++) acc = __builtin_fmaf(a[i * n + k], b[k * n + j], acc); c[i * n + j] = acc; }
__kernel void hash(__global uint* o, __global const uint* a) {
  uint x = a[GID()]; for (int r = 0; r < 4; r++) { x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; } o[GID()] = x % 1000003u; }
__kernel void halfs(__global half* o, __global const half* a, __global const half* b) { int i = GID(); o[i] = (a[i] * b[i] + (half)0.25) * (half)3.0; }
__kernel void doubles(__global double* o, __global const double* a) { int i = GID(); o[i] = __builtin_sqrt(a[i]) / (a[i] + 1.0); }
__kernel void histogram(__global int* h, __global const uchar* a) { __atomic_fetch_add(&h[a[GID()]], 1, __ATOMIC_RELAXED); }
__kernel void shuffle(__global int* o, __global const int* a) { int i = GID(); o[i] = __builtin_amdgcn_ds_bpermute(4 * ((i + 3) & 31), a[i]) + __builtin_amdgcn_readfirstlane(a[i]); }
"""


def compiler_output(n: int) -> str | None:
  """n lines of the instructions clang-19 makes of KERNELS for ARCH, as clang writes them (a tab in front),
  branch targets made numbers so that the lines repeat; None without clang-19."""
  if shutil.which("clang-19") is None: return None
  with tempfile.TemporaryDirectory() as d:
    open(os.path.join(d, "k.cl"), "w").write(KERNELS)
    subprocess.run(["clang-19", "-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", f"-mcpu={ARCH}", "-O2", "-nogpulib", "-S",
                    "-o", os.path.join(d, "k.s"), os.path.join(d, "k.cl")], check=True, capture_output=True)
    lines, in_text = [], False
    for raw in open(os.path.join(d, "k.s")).read().splitlines():
      body = raw.split(";")[0].strip()
      if body.startswith((".text", ".section")): in_text = body.startswith(".text")
      elif in_text and body and not body.startswith(".") and not body.endswith(":"):
        lines.append("\t" + re.sub(r"^(s_branch|s_cbranch_\w+)\s+\S+$", r"\1 3", body))
  return "\n".join(lines[i % len(lines)] for i in range(n)) + "\n"


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--count", type=int, default=100_000)
  ap.add_argument("--repeat", type=int, default=3)
  a = ap.parse_args()
  n, rep = a.count, a.repeat
  isa = load(ARCH)
  mix, tg = hcq_mix(), tinygrad_mix()
  code = build_and_encode(mix, n, lambda x: x.encode())  # the program, and both DSLs' first-use work, untimed
  fns = {"dsl": lambda: build_and_encode(mix, n, lambda x: x.encode()), "dec": lambda: decode_all(code, ARCH)}
  if tg is not None:
    build_and_encode(tg, len(tg), lambda x: x.to_bytes())
    fns.update(tiny_dsl=lambda: build_and_encode(tg, n, lambda x: x.to_bytes()), tiny_dec=lambda: tinygrad_decode(code))
  r = interleaved(rep, **fns)
  insts = r["dec"][0]
  pair_of = lambda k: r[k][1:] if k in r else None  # (best, median) of the latest rounds
  agree = "" if tg is None else "same bytes" if r["tiny_dsl"][0] == code else "BYTES DIFFER"
  rows = [("DSL construction + encoding", "inst/s", pair_of("dsl"), None, pair_of("tiny_dsl"), "5x tinygrad"),
          ("decoding to instruction objects", "inst/s", pair_of("dec"), None, pair_of("tiny_dec"), "10x tinygrad")]

  text = "\n".join(str(i) for i in insts) + "\n"
  mix_ok, r = text_timings(text, code, rep)
  rows.append(("text assembly (process)", "lines/s", pair_of("asm"), pair_of("mc_asm"), None, "llvm-mc"))
  rows.append(("text disassembly (process)", "lines/s", pair_of("dis"), pair_of("mc_dis"), None, "llvm-mc"))
  dsl_best, dec_best, ab, db = rows[0][2][0], rows[1][2][0], rows[2][2][0], rows[3][2][0]
  clang_text = compiler_output(n)
  if clang_text is not None:
    clang_ok, r = text_timings(clang_text, assemble(clang_text, ARCH), rep)
    rows.append(("text assembly, clang-19 output", "lines/s", pair_of("asm"), pair_of("mc_asm"), None, "llvm-mc"))
    rows.append(("text disassembly, clang-19 output", "lines/s", pair_of("dis"), pair_of("mc_dis"), None, "llvm-mc"))

  rate = lambda t: f"{n / t / 1e3:7.1f}k" if t else "-"
  pair = lambda bm: f"{rate(bm[0])} ({rate(bm[1]).strip()})" if bm else "-"
  print(f"{n} mixed instructions ({len(code)} bytes, {len(isa.by_mnemonic)} {ARCH} opcodes in the table), best of {rep} (median)")
  print(f"tinygrad: {'not importable (TINYGRAD_PATH=' + TINYGRAD_PATH + ')' if tg is None else agree + ' as hcq for the mix'}; "
        f"CLI output {'equals' if mix_ok else 'DIFFERS FROM'} the program")
  if clang_text is None: print("clang-19 output: clang-19 is not installed, rows left out")
  else: print(f"clang-19 output: {n} lines of the instructions clang-19 -O2 makes of {len(KERNELS.split('__kernel')) - 1} OpenCL kernels "
              f"(branch targets as numbers, repeated to {n} lines); CLI output {'agrees' if clang_ok else 'DISAGREES'}")
  print(f"  {'':40s} {'hcq.asm':>19s} {'llvm-mc-19':>19s} {'tinygrad 0.14':>19s}  target: ratio")
  for name, unit, ours, mc, tiny, target in rows:
    peer = tiny if target.endswith("tinygrad") else mc
    need = float(target.split("x")[0]) if target.endswith("tinygrad") else 1.0
    ratio = f"{peer[0] / ours[0] / need:.2f} of {target}" if peer else f"{target}: peer missing"
    print(f"  {name + ' ' + unit:40s} {pair(ours):>19s} {pair(mc):>19s} {pair(tiny):>19s}  {ratio}")
  print("  (per second; process rows include interpreter start and imports, bytecode cache on; ratio = our best rate / the target rate)")
  fixed = [("DSL", dsl_best, 210e3), ("decoding", dec_best, 350e3), ("assembly", ab, 202e3), ("disassembly", db, 299e3)]
  print("  against issue 3's fixed figures (5x 42k/s, 10x 35k/s, llvm-mc's 202k and 299k lines/s): " +
        ", ".join(f"{what} {n / t / rate:.2f}" for what, t, rate in fixed))


if __name__ == "__main__":
  main()
