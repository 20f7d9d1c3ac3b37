"""Host CPU per small launch on each emulated AMD board: what the MI300X's 8-XCC split costs against one CP.

  python bench/board_launch.py [launches per sample]

One launch (+ wait) of an 11-instruction kernel over 8 workgroups of 64 (tests/test_amd_xcc.py's ADD in the board's
spellings), timed as the process's CPU time (the host thread, every engine thread, the wavefront emulator), best of
15 samples: noisy machines make wall time meaningless. Rows: the whole launch, and the CPs alone (the shader core
replaced by nothing: the PM4 parse per XCC, PRED_EXEC, the barrier waits, the L2 write-backs). Prints the load too.
"""
from __future__ import annotations
import os
import sys
import time

import numpy as np

from hcq.asm.kernel import Kernel
from hcq.devstring import parse_dev
from hcq.drivers.amd.device import AMDDevice
from hcq.drivers.mock.amdgpu.gpu import BOARDS

GROUPS, LOCAL = 8, 64
# x[g * 64 + t] += t + 1 (GCN spellings; the RDNA boards take the renames below)
ADD = """s_load_dwordx2 s[6:7], s[0:1], 0x0
s_waitcnt lgkmcnt(0)
s_lshl_b32 s4, s2, 8
v_lshlrev_b32 v1, 2, v0
v_add_u32 v1, s4, v1
global_load_dword v2, v1, s[6:7]
s_waitcnt vmcnt(0)
v_add_u32 v2, v2, v0
v_add_u32 v2, 1, v2
global_store_dword v1, v2, s[6:7]
s_endpgm"""
RDNA = {"s_load_dwordx2": "s_load_b64", "global_load_dword": "global_load_b32", "global_store_dword": "global_store_b32",
        "v_add_u32": "v_add_nc_u32"}
GFX12_WAITS = {"s_waitcnt lgkmcnt(0)": "s_wait_kmcnt 0x0", "s_waitcnt vmcnt(0)": "s_wait_loadcnt 0x0"}


def source(arch: str) -> str:
  family = BOARDS[arch].family
  if family == "gfx9": return ADD
  renames = {**RDNA, **(GFX12_WAITS if family == "gfx12" else {})}
  text = ADD
  for old, new in renames.items(): text = text.replace(old, new)
  return text


def ms_per_launch(arch: str, cps_only: bool, per: int) -> float:
  dev = AMDDevice(parse_dev(f"MOCKKFD+AMD::{arch}"))
  gpu = next(iter(dev.os.kfd.nodes.values())).gpu
  if cps_only: gpu.shader_core = lambda g, state, cancel=None: None
  prg = dev.program(Kernel("add", arch, args=[("x", "u64")]).add(source(arch)).to_elf())
  x = dev.alloc(4 * GROUPS * LOCAL, "device")
  x.copyin(np.zeros(GROUPS * LOCAL, np.uint32))
  launch = lambda: prg(vals=(x.addr,), global_size=(GROUPS, 1, 1), local_size=(LOCAL, 1, 1), wait=True)
  for _ in range(5): launch()
  best = float("inf")
  for _ in range(15):
    t = time.process_time()
    for _ in range(per): launch()
    best = min(best, (time.process_time() - t) / per)
  if not cps_only:  # the figure is for a launch that computed the right thing
    out = np.empty(GROUPS * LOCAL, np.uint32)
    x.copyout(out)
    assert (out == np.tile(np.arange(1, LOCAL + 1, dtype=np.uint32), GROUPS) * (5 + 15 * per)).all(), f"{arch}: wrong result"
  return best * 1e3


def main() -> None:
  per = int(sys.argv[1]) if len(sys.argv) > 1 else 20
  print(f"host CPU per launch of {GROUPS} x {LOCAL} work-items (best of 15 x {per}), load {os.getloadavg()[0]:.1f}")
  print(f"  {'board':8s} {'XCCs':>4s} {'whole launch ms':>16s} {'CPs alone ms':>13s}")
  for arch, board in BOARDS.items():
    print(f"  {arch:8s} {board.num_xcc:4d} {ms_per_launch(arch, False, per):16.2f} {ms_per_launch(arch, True, per):13.2f}")


if __name__ == "__main__":
  main()
