"""Host CPU per small launch on each emulated AMD board: what the MI300X's 8-XCC split costs against one CP.

  python bench/board_launch.py [launches per sample]

One launch (+ wait) of an 11-instruction kernel over 8 workgroups of 64 (tests/amd_boards.py's ADD_WG in the board's
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tests.amd_boards import ADD_WG, spelled_for  # noqa: E402

GROUPS, LOCAL = 8, 64


def ms_per_launch(arch: str, cps_only: bool, per: int) -> float:
  dev = AMDDevice(parse_dev(f"MOCKKFD+AMD::{arch}"))
  gpu = next(iter(dev.os.kfd.nodes.values())).gpu
  if cps_only: gpu.shader_core = lambda g, state, cancel=None: None
  prg = dev.program(Kernel("add", arch, args=[("x", "u64")]).add(spelled_for(arch, ADD_WG)).to_elf())
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
