"""Constant bank 0 below the kernel parameters as a driver filled it for a launch: the words ptxas's code reads there
(block and grid sizes, the stack's start, the local and shared windows, the default memory descriptor: 0x208 on sm_90).

  python tools/nv_bank0_probe.py [--dev cuda|NV|MOCKNV+NV]
  HCQ_SCRIPT=tools/nv_bank0_probe.py bash tools/hardware_check.sh --dev cuda      (on a GPU machine with NVIDIA's driver)

A one-thread kernel reads the bank at negative offsets from its first parameter: ptxas makes `ld.param.u32 %r,
[out+-N]` an indexed constant-bank load (`LDC R, c[0x0][R+base-N]`, cuobjdump -sass), so the kernel stores every word of
[0, base) into `out`. `--dev cuda` launches it through NVIDIA's CUDA driver (libcuda.so.1 with ctypes; the driver's JIT
compiles the PTX): what the CUDA driver writes, which the emulated GPU's bank-0 checks stand for and which hcq's own
driver part should match; `--dev NV` / `MOCKNV+NV` through hcq. Prints one row per non-zero or named word; exit status
0, or 1 when the launch fails (the row says why), 2 for bad arguments.
"""
from __future__ import annotations
import argparse
import ctypes
import sys

# where the parameters start in bank 0 (EIATTR_PARAM_CBANK of ptxas 13's cubins: tests/test_nv_program.py holds it per arch)
PARAM_BASE = {"sm_80": 0x160, "sm_86": 0x160, "sm_89": 0x160, "sm_90": 0x210, "sm_100": 0x380, "sm_120": 0x380}


def probe_ptx(arch: str) -> str:
  """The probe kernel for `arch`: out[w] = bank 0's u32 word w, for each word below the parameters."""
  base = PARAM_BASE[arch]
  loads = "\n".join(f"  ld.param.u32 %r1, [out+-{base - off}]; st.global.u32 [%rd1+{off}], %r1;" for off in range(0, base, 4))
  return (f".version {'8.0' if int(arch[3:]) < 100 else '8.8'}\n.target {arch}\n.address_size 64\n"
          f".visible .entry bank0_probe(.param .u64 out)\n{{\n  .reg .b32 %r1; .reg .b64 %rd1;\n  ld.param.u64 %rd1, [out];\n{loads}\n  ret;\n}}\n")


def run_cuda() -> tuple[str, bytes]:
  """(arch, bank 0 below the parameters) from a launch through libcuda; RuntimeError naming the failing call."""
  cuda = ctypes.CDLL("libcuda.so.1")

  def check(status: int, what: str) -> None:
    if status:
      name = ctypes.c_char_p()
      cuda.cuGetErrorName(status, ctypes.byref(name))
      raise RuntimeError(f"{what} failed: {name.value.decode() if name.value else status}")
  check(cuda.cuInit(0), "cuInit")
  dev, major, minor, ctx = ctypes.c_int(), ctypes.c_int(), ctypes.c_int(), ctypes.c_void_p()
  check(cuda.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
  check(cuda.cuDeviceGetAttribute(ctypes.byref(major), 75, dev), "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)")
  check(cuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev), "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)")
  arch = f"sm_{major.value}{minor.value}"
  if arch not in PARAM_BASE: raise RuntimeError(f"{arch}: the parameter base is known for {', '.join(PARAM_BASE)}")
  check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
  check(cuda.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
  mod, fn, buf, base = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_uint64(), PARAM_BASE[arch]
  check(cuda.cuModuleLoadData(ctypes.byref(mod), probe_ptx(arch).encode()), "cuModuleLoadData")
  check(cuda.cuModuleGetFunction(ctypes.byref(fn), mod, b"bank0_probe"), "cuModuleGetFunction")
  check(cuda.cuMemAlloc_v2(ctypes.byref(buf), ctypes.c_size_t(base)), "cuMemAlloc")
  arg = ctypes.c_uint64(buf.value)
  params = (ctypes.c_void_p * 1)(ctypes.addressof(arg))
  check(cuda.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, None, params, None), "cuLaunchKernel")
  check(cuda.cuCtxSynchronize(), "cuCtxSynchronize")
  host = (ctypes.c_uint8 * base)()
  check(cuda.cuMemcpyDtoH_v2(host, buf, ctypes.c_size_t(base)), "cuMemcpyDtoH")
  return arch, bytes(host)


def run_hcq(dev_name: str) -> tuple[str, bytes]:
  import numpy as np
  import hcq
  dev = hcq.Device(dev_name)
  arch = dev.arch.sm
  prg = dev.program(probe_ptx(arch))
  out = dev.alloc(PARAM_BASE[arch], "device")
  prg(out, local_size=1, wait=True)
  return arch, out.copyout(np.empty(PARAM_BASE[arch], np.uint8)).tobytes()


def rows(arch: str, bank: bytes) -> list[tuple[int, int, str]]:
  """(offset, u32 value, name) for each word that is non-zero or read by ptxas's code (cubin.DRIVER_CONSTANTS)."""
  from hcq.drivers.nv.cubin import DRIVER_CONSTANTS
  c = DRIVER_CONSTANTS.get(arch)
  names = {}
  if c is not None:
    for field, size in (("ntid", 12), ("nctaid", 12), ("stack_top", 4), ("memory_descriptor", 8), ("local_window", 8), ("shared_window", 8)):
      at = getattr(c, field)
      if at is not None: names.update({at + i: f"{field}[{i // 4}]" if size > 4 else field for i in range(0, size, 4)})
  words = [int.from_bytes(bank[i:i + 4], "little") for i in range(0, len(bank), 4)]
  return [(4 * i, w, names.get(4 * i, "")) for i, w in enumerate(words) if w or 4 * i in names]


def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--dev", default="cuda", help="cuda (NVIDIA's driver through libcuda), NV or MOCKNV+NV (hcq)")
  args = ap.parse_args(argv)
  try: arch, bank = run_cuda() if args.dev == "cuda" else run_hcq(args.dev)
  except Exception as e:   # the row is the result: no traceback on a machine without the driver or a GPU
    print(f"bank 0 probe on {args.dev}: {type(e).__name__}: {e}")
    return 1
  print(f"bank 0 below the parameters on {args.dev} ({arch}), {len(bank)} bytes; words that are non-zero or named:")
  for off, value, name in rows(arch, bank): print(f"  {off:#06x}  {value:#010x}  {name}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
