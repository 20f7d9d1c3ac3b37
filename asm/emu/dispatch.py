"""Launch: a Dispatch (what the command processor programs) becomes batches of waves with their initial state.

Initial state follows LLVM's AMDGPUUsage for gfx11: user SGPRs from COMPUTE_USER_DATA (the kernel descriptor says
which: dispatch ptr, queue ptr, kernarg ptr, ...), then the system SGPRs RSRC2 enables in order (workgroup id X, Y,
Z, workgroup info, private segment wave offset), and v0 = workitem id x | y << 10 | z << 20 (gfx11 packs them).
"""
from __future__ import annotations
import functools
import os
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from hcq.asm.emu.engine import Program, Stats, execute
from hcq.asm.emu.memory import VirtualMemory
from hcq.asm.emu.wave import EXEC, Waves

SH_BASE = 0x1260   # absolute dword offset of GC register segment 0 (what SET_SH_REG offsets are relative to)
LDS_GRANULE = 512  # RSRC2.LDS_SIZE unit on gfx11 (128 dwords)
SCRATCH_GRANULE = 256  # TMPRING_SIZE.WAVESIZE unit on gfx11 (bytes per wave)
MAX_LDS = 64 * 1024
# a runaway kernel on the mock GPU stops with InstructionLimit after this many wave-instructions (0: no limit)
DEFAULT_MAX_INSTRUCTIONS = int(os.environ.get("HCQ_EMU_MAX_INSTRUCTIONS", "0")) or None


@dataclass
class Dispatch:
  """Everything the shader core needs to run one grid, independent of who programmed it (mock CP or `run`)."""
  code: int                         # entry point address
  rsrc1: int
  rsrc2: int
  rsrc3: int = 0
  user_sgprs: list[int] = field(default_factory=list)
  grid: tuple[int, int, int] = (1, 1, 1)     # workgroups
  local: tuple[int, int, int] = (1, 1, 1)    # work-items per workgroup
  wave32: bool = True
  lds_bytes: int | None = None      # None: from RSRC2.LDS_SIZE
  private_bytes: int = 0            # scratch bytes per lane
  arch: str = "gfx1100"

  @property
  def lanes(self) -> int: return 32 if self.wave32 else 64


def _field(value: int, reg, name: str) -> int:
  return reg.decode(value)[name]


def from_state(state) -> Dispatch:
  """A Dispatch from the mock command processor's DispatchState (grid, DISPATCH_INITIATOR, SET_SH_REG values)."""
  from hcq.autogen.am import gc_11_0_0 as gc
  sh = state.sh
  reg = lambda r: sh.get(SH_BASE + r.offset, 0)
  code = (reg(gc.regCOMPUTE_PGM_LO) | (reg(gc.regCOMPUTE_PGM_HI) << 32)) << 8
  rsrc2 = reg(gc.regCOMPUTE_PGM_RSRC2)
  nuser = gc.regCOMPUTE_PGM_RSRC2.decode(rsrc2)["user_sgpr"]
  user = [sh.get(SH_BASE + gc.regCOMPUTE_USER_DATA_0.offset + i, 0) for i in range(nuser)]
  local = tuple(max(1, gc.regCOMPUTE_NUM_THREAD_X.decode(reg(r))["num_thread_full"])
                for r in (gc.regCOMPUTE_NUM_THREAD_X, gc.regCOMPUTE_NUM_THREAD_Y, gc.regCOMPUTE_NUM_THREAD_Z))
  wave32 = bool(state.initiator >> 15 & 1)
  tmpring = gc.regCOMPUTE_TMPRING_SIZE.decode(reg(gc.regCOMPUTE_TMPRING_SIZE))
  private = tmpring["wavesize"] * SCRATCH_GRANULE // (32 if wave32 else 64)
  return Dispatch(code, reg(gc.regCOMPUTE_PGM_RSRC1), rsrc2, reg(gc.regCOMPUTE_PGM_RSRC3), user, tuple(state.grid), local, wave32,
                  None, private)


def dispatch(mem: VirtualMemory, state, max_instructions: int | None = DEFAULT_MAX_INSTRUCTIONS,
             cancel: Callable[[], bool] | None = None) -> Stats:
  """Run the grid a DISPATCH_DIRECT describes (the mock GPU's shader core). Raises PageFault / WaveError on faults;
  HCQ_EMU_MAX_INSTRUCTIONS bounds a runaway kernel; `cancel()` true stops it with Cancelled."""
  return launch(mem, from_state(state), max_instructions, cancel=cancel)


def launch(mem: VirtualMemory, d: Dispatch, max_instructions: int | None = None, trace: Callable | None = None,
           trace_wave: int | None = None, max_batch_bytes: int = 256 << 20, cancel: Callable[[], bool] | None = None) -> Stats:
  """Run every workgroup of `d` to completion, in batches of workgroups whose waves run in lockstep."""
  from hcq.autogen.am import gc_11_0_0 as gc
  r1 = gc.regCOMPUTE_PGM_RSRC1.decode(d.rsrc1)
  r2 = gc.regCOMPUTE_PGM_RSRC2.decode(d.rsrc2)
  lanes = d.lanes
  vgprs = (r1["vgprs"] + 1) * (8 if d.wave32 else 4)
  lds = d.lds_bytes if d.lds_bytes is not None else r2["lds_size"] * LDS_GRANULE
  if lds > MAX_LDS: raise ValueError(f"LDS of {lds} bytes exceeds the {MAX_LDS} a gfx11 workgroup can have")
  lx, ly, lz = d.local
  threads = lx * ly * lz
  if threads > 1024: raise ValueError(f"workgroup of {threads} work-items exceeds 1024")
  wpg, packed, exec_mask = _workgroup_layout(d.local, lanes, r2["tidig_comp_cnt"])
  gx, gy, gz = d.grid
  groups = gx * gy * gz
  per_wave = vgprs * lanes * 4 + 128 * 4 + lanes * d.private_bytes + 64
  per_group = wpg * per_wave + lds
  batch = max(1, min(groups, max_batch_bytes // max(per_group, 1), max(1, 65536 // wpg)))
  prog = Program(mem, d.arch)
  stats = Stats()
  old = np.seterr(all="ignore")
  try:
    for g0 in range(0, groups, batch):
      g = np.arange(g0, min(groups, g0 + batch))
      n = len(g) * wpg
      wg_of_wave = np.repeat(np.arange(len(g)), wpg)
      st = Waves(n, lanes, vgprs, wg_of_wave, lds, len(g), d.private_bytes)
      st.mem, st.first_wave = mem, g0 * wpg
      st.pc[:] = d.code
      st.mode[:] = _initial_mode(r1)
      st.mode_changed()
      for i, val in enumerate(d.user_sgprs): st.s[i, :] = val & 0xffffffff
      s = len(d.user_sgprs)
      gid = np.repeat(g, wpg)
      ids = (gid % gx, (gid // gx) % gy, gid // (gx * gy))
      for en, ident in zip(("tgid_x_en", "tgid_y_en", "tgid_z_en"), ids):
        if r2[en]: st.s[s, :] = ident; s += 1
      if r2["tg_size_en"]: st.s[s, :] = wpg; s += 1
      if r2["scratch_en"]: st.s[s, :] = 0; s += 1   # private segment wave offset: scratch is addressed per lane here
      st.v[0] = np.tile(packed, (len(g), 1))
      m = np.tile(exec_mask, len(g))
      st.set_mask(EXEC, slice(None), m)
      execute(st, prog, stats, None if max_instructions is None else max_instructions - stats.instructions, trace, trace_wave, cancel)
  finally:
    np.seterr(**old)
  return stats


@functools.lru_cache(maxsize=64)
def _workgroup_layout(local: tuple[int, int, int], lanes: int, tidig: int) -> tuple[int, np.ndarray, np.ndarray]:
  """Waves per workgroup, v0 of every lane (workitem ids packed the gfx11 way, x fastest) and each wave's EXEC.
  The same for every dispatch of a shape, so it is computed once (read-only arrays)."""
  lx, ly, lz = local
  threads = lx * ly * lz
  wpg = -(-threads // lanes)
  tid = np.arange(wpg * lanes)
  tx, ty, tz = tid % lx, (tid // lx) % ly, tid // (lx * ly)
  valid = (tid < threads).reshape(wpg, lanes)
  packed = (tx | (ty << 10 if tidig >= 1 else 0) | (tz << 20 if tidig >= 2 else 0)).astype(np.uint32)
  packed = np.where(tid < threads, packed, 0).reshape(wpg, lanes)
  exec_mask = np.packbits(np.pad(valid, ((0, 0), (0, 64 - lanes))), axis=1, bitorder="little").view(np.uint64).reshape(-1)
  packed.flags.writeable = exec_mask.flags.writeable = False
  return wpg, packed, exec_mask


def _initial_mode(r1: dict) -> int:
  """MODE from RSRC1: FP_ROUND (3:0), FP_DENORM (7:4), DX10_CLAMP (8), IEEE (9)."""
  return (r1["float_mode"] & 0xff) | (r1["dx10_clamp"] << 8) | (r1["ieee_mode"] << 9)
