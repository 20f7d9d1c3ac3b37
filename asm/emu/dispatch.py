"""Launch: a Dispatch (what the command processor programs) becomes batches of waves with their initial state.

Initial state follows LLVM's AMDGPUUsage for gfx11: user SGPRs from COMPUTE_USER_DATA (the kernel descriptor says
which: dispatch ptr, queue ptr, kernarg ptr, ...), then the system SGPRs RSRC2 enables in order (workgroup id X, Y,
Z, workgroup info; every emulated arch has architected flat scratch, so RSRC2.SCRATCH_EN sets up FLAT_SCRATCH and loads
no private segment wave offset SGPR: AMDGPUUsage ENABLE_PRIVATE_SEGMENT), and v0 = workitem id x | y << 10 | z << 20 (gfx11 packs them).
gfx12 also has the workgroup ids in TTMP9 (X) and TTMP7 (Y | Z << 16), where LLVM reads them. gfx942 (gfx90a+) packs
the workitem ids into v0 as gfx11 does, has architected flat scratch (no private segment buffer), counts VGPRs and
AGPRs together in granules of 8 and puts the AGPRs at RSRC3.ACCUM_OFFSET. Each family's registers are decoded with
its own generated table (gc_9_4_3, gc_11_0_0, gc_12_0_0), at the absolute offsets the board's IP discovery gives.
"""
from __future__ import annotations
import functools
import os
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from hcq.asm.emu.engine import Program, Stats, execute
from hcq.asm.emu.errors import Cancelled, TrapError
from hcq.asm.emu.gfx9 import GFX9_ARCHS
from hcq.asm.emu.memory import VirtualMemory
from hcq.asm.emu.scratch import GFX9_SCRATCH, RDNA_SCRATCH, ScratchRing
from hcq.asm.emu.wave import EXEC, TTMP0, Waves

LDS_GRANULE = 512  # RSRC2.LDS_SIZE unit on gfx11 (128 dwords)
MAX_LDS = 64 * 1024
# a runaway kernel on the mock GPU stops with InstructionLimit after this many wave-instructions (0: no limit)
DEFAULT_MAX_INSTRUCTIONS = int(os.environ.get("HCQ_EMU_MAX_INSTRUCTIONS", "0")) or None


def interleave_from_env() -> int | None:
  """HCQ_EMU_INTERLEAVE=SEED runs the waves of each workgroup interleaved in an order drawn from SEED (races show);
  unset, empty or "off": lockstep. Read at every dispatch, so a test may set it for a while."""
  value = os.environ.get("HCQ_EMU_INTERLEAVE", "").strip()
  if value.lower() in ("", "off"): return None
  try:
    return int(value, 0)
  except ValueError:
    raise ValueError(f"HCQ_EMU_INTERLEAVE={value!r}: give an integer seed (e.g. 1), or off for lockstep") from None


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
  scratch: ScratchRing | None = None   # where the waves' private memory lives; None: host memory of the emulator's own

  @property
  def lanes(self) -> int: return 32 if self.wave32 else 64


def _field(value: int, reg, name: str) -> int:
  return reg.decode(value)[name]


@dataclass(frozen=True)
class Board:
  """What the shader core needs of the board: where its GC registers sit, and the shader engines of one XCC (the
  one a dispatch runs on) with how many waves one engine holds."""
  engines: int = 6             # Navi31 (RX 7900 XTX)
  engine_waves: int = 16 * 32  # 16 CUs per engine x 2 SIMDs x 16 waves
  sh_base: int = 0x1260        # absolute dword offset of GC register segment 0 (IP discovery; Navi31's): SH registers' base


def from_state(state, arch: str = "gfx1100", board: Board = Board()) -> Dispatch:
  """A Dispatch from the mock command processor's DispatchState (grid, DISPATCH_INITIATOR, SET_SH_REG values at their
  absolute offsets), decoded with the arch family's register table. A wave's private memory is its slot of the scratch
  ring COMPUTE_DISPATCH_SCRATCH_BASE and COMPUTE_TMPRING_SIZE describe, in the family's units and WAVES meaning
  (hcq.asm.emu.scratch: gfx12 only widens WAVESIZE, gc_12_0_0_sh_mask.h; gfx9.4.3 counts 1 KiB and one XCC's slots)."""
  gc = _family_registers(arch)
  sh = state.sh
  reg = lambda r: sh.get(board.sh_base + r.offset, 0)
  code = (reg(gc.regCOMPUTE_PGM_LO) | (reg(gc.regCOMPUTE_PGM_HI) << 32)) << 8
  rsrc2 = reg(gc.regCOMPUTE_PGM_RSRC2)
  r2 = gc.regCOMPUTE_PGM_RSRC2.decode(rsrc2)
  user = [sh.get(board.sh_base + gc.regCOMPUTE_USER_DATA_0.offset + i, 0) for i in range(r2["user_sgpr"])]
  local = tuple(max(1, gc.regCOMPUTE_NUM_THREAD_X.decode(reg(r))["num_thread_full"])
                for r in (gc.regCOMPUTE_NUM_THREAD_X, gc.regCOMPUTE_NUM_THREAD_Y, gc.regCOMPUTE_NUM_THREAD_Z))
  # gfx9 has no CS_W32_EN (gc_9_4_3_sh_mask.h): wave64 only
  wave32 = bool(gc.regCOMPUTE_DISPATCH_INITIATOR.decode(state.initiator).get("cs_w32_en", 0))
  rules = GFX9_SCRATCH if arch in GFX9_ARCHS else RDNA_SCRATCH
  tmpring = gc.regCOMPUTE_TMPRING_SIZE.decode(reg(gc.regCOMPUTE_TMPRING_SIZE))
  private = tmpring["wavesize"] * rules.unit // (32 if wave32 else 64)
  ring = None
  if not r2["scratch_en"]:
    private = 0   # a wave without SCRATCH_EN gets no slot: any private access faults
  elif tmpring["wavesize"]:
    base = (reg(gc.regCOMPUTE_DISPATCH_SCRATCH_BASE_LO) | (reg(gc.regCOMPUTE_DISPATCH_SCRATCH_BASE_HI) & 0xff) << 32) << 8
    ring = ScratchRing.from_registers(base, tmpring["waves"], tmpring["wavesize"], rules, board.engines, board.engine_waves)
  return Dispatch(code, reg(gc.regCOMPUTE_PGM_RSRC1), rsrc2, reg(gc.regCOMPUTE_PGM_RSRC3), user, tuple(state.grid), local, wave32,
                  None, private, arch, ring)


def dispatch(mem: VirtualMemory, state, max_instructions: int | None = DEFAULT_MAX_INSTRUCTIONS,
             cancel: Callable[[], bool] | None = None, arch: str = "gfx1100", board: Board = Board(),
             interleave: int | None | str = "env", share: tuple[int, int, int] | None = None,
             vet: Callable[[Dispatch], None] | None = None, trace: Callable | None = None, trace_wave: int | None = None) -> Stats:
  """Run the grid a DISPATCH_DIRECT describes (the mock GPU's shader core, whose board says `arch` and its engines).
  Raises PageFault / WaveError on faults; HCQ_EMU_MAX_INSTRUCTIONS bounds a runaway kernel; `cancel()` true stops it
  with Cancelled. `interleave`: a seed for interleaved waves (see `launch`), None for lockstep, "env" for
  HCQ_EMU_INTERLEAVE's. `share`: (chunk, parts, part) runs only the workgroups of one XCC (see `share_of`). `vet(d)`
  sees the decoded dispatch before it runs and may refuse it (the mock GPU checks its XCCs' scratch rings there);
  `trace`/`trace_wave` as for `launch`."""
  seed = interleave_from_env() if interleave == "env" else interleave
  d = from_state(state, arch, board)
  if vet is not None: vet(d)
  return launch(mem, d, max_instructions, trace=trace, trace_wave=trace_wave, cancel=cancel, interleave=seed, share=share)


def share_of(groups: int, share: tuple[int, int, int] | None) -> np.ndarray | None:
  """The linear workgroup ids (x fastest) one XCC runs: chunks of `chunk` consecutive ids dealt round robin over `parts`
  XCCs, XCC `part` taking chunks part, part + parts, ... (None: every workgroup)."""
  if share is None: return None
  chunk, parts, part = share
  ids = np.arange(groups)
  return ids[ids // chunk % parts == part]


@dataclass(frozen=True, eq=False)   # hashed by identity: _plan returns one object per register set
class _Plan:
  """What a dispatch's registers say, decoded once per distinct set of values (the same kernel launched again
  costs a dictionary lookup, not a register decode)."""
  vgprs: int
  lds: int
  wpg: int                 # waves per workgroup
  packed: np.ndarray       # v0 of every lane of a workgroup's waves
  exec_mask: np.ndarray    # EXEC of each wave of a workgroup
  mode: int
  system: tuple[str, ...]  # the system SGPRs after the user SGPRs, in order


def _family_registers(arch: str):
  """The arch's GC register table (generated from Linux amdgpu's gc_*_offset.h / sh_mask.h): gfx942 is GC 9.4.3, whose
  COMPUTE_* fields differ from gfx11's (RSRC3.ACCUM_OFFSET, TMPRING_SIZE's widths); RSRC1 bits 21 and 23 are DX10_CLAMP
  and IEEE_MODE on gfx9 and gfx11, WG_RR_EN and DISABLE_PERF on gfx12."""
  from hcq.autogen.am import gc_9_4_3, gc_11_0_0, gc_12_0_0
  return gc_12_0_0 if arch.startswith("gfx12") else gc_9_4_3 if arch in GFX9_ARCHS else gc_11_0_0


@functools.lru_cache(maxsize=256)
def _plan(rsrc1: int, rsrc2: int, local: tuple[int, int, int], wave32: bool, lds_bytes: int | None, vgpr_granule: int | None = None,
          arch: str = "gfx1100") -> _Plan:
  gc = _family_registers(arch)
  r1 = gc.regCOMPUTE_PGM_RSRC1.decode(rsrc1)
  r2 = gc.regCOMPUTE_PGM_RSRC2.decode(rsrc2)
  lds = lds_bytes if lds_bytes is not None else r2["lds_size"] * LDS_GRANULE
  if lds > MAX_LDS: raise ValueError(f"LDS of {lds} bytes exceeds the {MAX_LDS} a gfx11 workgroup can have")
  threads = local[0] * local[1] * local[2]
  if threads > 1024: raise ValueError(f"workgroup of {threads} work-items exceeds 1024")
  wpg, packed, exec_mask = _workgroup_layout(local, 32 if wave32 else 64, r2["tidig_comp_cnt"])
  system = tuple(n for n, en in (("x", "tgid_x_en"), ("y", "tgid_y_en"), ("z", "tgid_z_en"), ("tg", "tg_size_en")) if r2[en])
  return _Plan((r1["vgprs"] + 1) * (vgpr_granule or (8 if wave32 else 4)), lds, wpg, packed, exec_mask, _initial_mode(r1), system)


@functools.lru_cache(maxsize=256)
def _batch(plan: _Plan, g0: int, count: int, grid: tuple[int, int, int], share: tuple[int, int, int] | None = None):
  """Per-wave arrays of a batch of `count` workgroups from `g0` (read-only, shared by every launch of that shape):
  workgroup within the batch, workgroup ids X/Y/Z, v0 and EXEC. With a `share`, g0 counts the XCC's own workgroups."""
  gx, gy, gz = grid
  mine = share_of(gx * gy * gz, share)
  gid = np.repeat(np.arange(g0, g0 + count) if mine is None else mine[g0:g0 + count], plan.wpg)
  out = (np.repeat(np.arange(count), plan.wpg), (gid % gx, (gid // gx) % gy, gid // (gx * gy)),
         np.tile(plan.packed, (count, 1)), np.tile(plan.exec_mask, count))
  for a in (out[0], *out[1], out[2], out[3]): a.flags.writeable = False
  return out


def launch(mem: VirtualMemory, d: Dispatch, max_instructions: int | None = None, trace: Callable | None = None,
           trace_wave: int | None = None, max_batch_bytes: int = 256 << 20, cancel: Callable[[], bool] | None = None,
           interleave: int | None = None, share: tuple[int, int, int] | None = None) -> Stats:
  """Run every workgroup of `d` (or of its `share`, see `share_of`) to completion, in batches of workgroups whose waves run in lockstep; with an
  `interleave` seed, the waves of each workgroup (of more than one wave) run interleaved in an order drawn from it, so
  that a missing barrier or an unsynchronised LDS / global access shows (engine.execute). The same seed gives the
  same order."""
  gfx9 = d.arch in GFX9_ARCHS
  # gfx90a+: VGPRs and AGPRs share one file counted in granules of 8; AGPRs start at RSRC3.ACCUM_OFFSET (AMDGPUUsage)
  plan = _plan(d.rsrc1, d.rsrc2, tuple(d.local), d.wave32, d.lds_bytes, 8 if gfx9 else None, d.arch)
  traps = _rsrc3(d.rsrc3, d.wave32, d.arch)
  agpr_base = (traps["accum_offset"] + 1) * 4 if gfx9 else 0
  lanes, vgprs, lds, wpg = d.lanes, plan.vgprs, plan.lds, plan.wpg
  gx, gy, gz = d.grid
  mine = share_of(gx * gy * gz, share)
  groups = gx * gy * gz if mine is None else len(mine)
  ring = d.scratch
  per_wave = vgprs * lanes * 4 + 128 * 4 + (0 if ring else lanes * d.private_bytes) + 64
  per_group = wpg * per_wave + lds
  batch = max(1, min(groups, max_batch_bytes // max(per_group, 1), max(1, 65536 // wpg)))
  if ring:   # only the waves that hold a scratch slot run at once
    ring.check(mem, wpg)
    batch = min(batch, ring.groups_in_flight(wpg))
    turn = np.zeros(ring.engines, np.int64)
  prog = Program(mem, d.arch, agpr_base)
  stats = Stats()
  nuser = len(d.user_sgprs)
  user = np.array(d.user_sgprs, np.int64).astype(np.uint32)[:, None] if nuser else None
  gfx12 = d.arch.startswith("gfx12")
  old = np.seterr(all="ignore")
  try:
    for g0 in range(0, groups, batch):
      if cancel is not None and cancel(): raise Cancelled(f"dispatch cancelled before workgroup {g0} of {groups}")
      count = min(groups, g0 + batch) - g0
      wg_of_wave, ids, v0, exec_mask = _batch(plan, g0, count, (gx, gy, gz), share) if count * wpg <= 4096 else \
        _batch.__wrapped__(plan, g0, count, (gx, gy, gz), share)
      n = count * wpg
      st = Waves(n, lanes, vgprs, wg_of_wave, lds, count, d.private_bytes, ring.slot_addresses(g0, count, wpg, turn) if ring else None)
      st.mem, st.first_wave = mem, g0 * wpg
      st.pc[:] = d.code
      st.mode[:] = plan.mode
      st.mode_changed()
      if nuser: st.s[:nuser] = user
      for k, what in enumerate(plan.system, nuser):
        st.s[k] = ids["xyz".index(what)] if what in ("x", "y", "z") else wpg
      if gfx12:   # architected SGPRs: TTMP9 = workgroup id X, TTMP7 = Y | Z << 16
        st.s[TTMP0 + 9] = ids[0]
        st.s[TTMP0 + 7] = (ids[1] & 0xffff) | (ids[2] << 16)
      st.v[0] = v0
      st.set_mask(EXEC, slice(None), exec_mask)
      if traps.get("trap_on_start"): raise TrapError("RSRC3.TRAP_ON_START with no trap handler", d.code, st.first_wave, st.dump(0), "(wave start)")
      rng = None if interleave is None or wpg == 1 else np.random.default_rng((interleave & (1 << 64) - 1, g0))
      execute(st, prog, stats, None if max_instructions is None else max_instructions - stats.instructions, trace, trace_wave, cancel, d.code,
              rng, wpg)
      if traps.get("trap_on_end"): raise TrapError("RSRC3.TRAP_ON_END with no trap handler", int(st.pc[0]), st.first_wave, st.dump(0), "(wave end)")
  finally:
    np.seterr(**old)
  return stats


@functools.lru_cache(maxsize=64)
def _rsrc3(rsrc3: int, wave32: bool, arch: str) -> dict[str, int]:
  """COMPUTE_PGM_RSRC3 decoded with the family's table (gfx12's is not read: {}). gfx9.4.3 (gc_9_4_3_sh_mask.h):
  ACCUM_OFFSET (5:0) is where the AGPRs start, in 4-register granules less one; TRAP_ON_START / TRAP_ON_END (10, 11)
  as on gfx11. gfx11 (AMDGPUUsage, "compute_pgm_rsrc3 for GFX10-GFX12"): SHARED_VGPR_CNT (3:0) counts the
  VGPR blocks shared by a wave64's halves in subvector mode and must be 0 in wave32; INST_PREF_SIZE (9:4) is how much
  code the SQ prefetches (speed only: no consequence here); TRAP_ON_START / TRAP_ON_END (10, 11) enter the trap
  handler when a wave starts / ends, which the emulated GPU does not run: it reports the trap, as it does for s_trap
  (stricter than a GPU whose CWSR handler returns from such a trap); IMAGE_OP (31) tells the SPI the shader samples
  images, which a compute dispatch here cannot (image ops are refused as graphics-only)."""
  if arch.startswith("gfx12"): return {}
  r3 = _family_registers(arch).regCOMPUTE_PGM_RSRC3.decode(rsrc3)
  if r3.get("shared_vgpr_cnt") and wave32:
    raise ValueError(f"COMPUTE_PGM_RSRC3.SHARED_VGPR_CNT={r3['shared_vgpr_cnt']} in a wave32 dispatch: shared VGPRs exist only in wave64 (must be 0)")
  return r3


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
  """MODE from RSRC1: FP_ROUND (3:0), FP_DENORM (7:4), DX10_CLAMP (8), IEEE (9); gfx12's RSRC1 has no DX10_CLAMP / IEEE_MODE."""
  return (r1["float_mode"] & 0xff) | (r1.get("dx10_clamp", 0) << 8) | (r1.get("ieee_mode", 0) << 9)
