"""The state of a batch of waves run in lockstep: register files as numpy arrays with one column per wave.

SGPRs are indexed by their operand encoding (0-105 SGPRs, 106/107 VCC, 108-123 TTMP, 124 NULL, 125 M0,
126/127 EXEC), so a decoded source field indexes the file directly (gfx9's M0, operand 124, is renumbered to 125 when
its instructions are translated: hcq.asm.emu.gfx9). VGPRs are (register, wave, lane), so one
register across every wave of the batch is one contiguous (waves, lanes) array.
"""
from __future__ import annotations

import numpy as np

VCC, TTMP0, NULL, M0, EXEC = 106, 108, 124, 125, 126


class Waves:
  """Registers, PCs and status of `count` waves of `lanes` lanes; `wg` gives each wave's workgroup in the batch."""

  def __init__(self, count: int, lanes: int, vgprs: int, wg: np.ndarray, lds_bytes: int, groups: int, private_bytes: int,
               scratch_slot: np.ndarray | None = None):
    self.count, self.lanes = count, lanes
    self.s = np.zeros((128, count), np.uint32)
    self.v = np.zeros((max(vgprs, 1), count, lanes), np.uint32)
    self.scc = np.zeros(count, np.uint32)
    self.pc = np.zeros(count, np.int64)
    self.done = np.zeros(count, bool)
    self.blocked = np.zeros(count, bool)   # waiting at s_barrier / s_barrier_wait
    self.signals = np.zeros(count, np.int64)   # barriers each wave has signalled (s_barrier, gfx12 s_barrier_signal)
    self.groups = groups
    self.wg = wg.astype(np.int64)
    self.mode = np.zeros(count, np.uint32)  # hardware MODE register (round/denorm/ieee bits)
    self.lds_bytes = lds_bytes
    self.lds = np.zeros(groups * max(lds_bytes, 4), np.uint8)
    self.private_bytes = private_bytes
    # private memory: each wave's scratch slot address in GPU memory (hcq.asm.emu.scratch), or else an array of the emulator's own
    self.scratch_slot = scratch_slot
    self.scratch = np.zeros(count * lanes * private_bytes if scratch_slot is None else 0, np.uint8)
    self.lane_ids = np.arange(lanes, dtype=np.uint32)
    self.first_wave = 0   # index of wave 0 of this batch in the dispatch (for messages)
    self.mem = None       # the VirtualMemory every global access goes through
    self._exec_cache = None   # (lanes bools, all set?) for the whole batch; dropped whenever EXEC is written
    self._dpp = self._dpp1 = None
    self.ftz = 0   # denormal flushing from MODE.FP_DENORM: bit 0/1 f32 inputs/outputs, bit 2/3 f16+f64 inputs/outputs
    self.dx10_clamp = False   # MODE.DX10_CLAMP (bit 8): the clamp modifier turns a NaN into 0 (LLVM AMDGPUUsage, COMPUTE_PGM_RSRC1)
    self.round = 0   # MODE.FP_ROUND: bits 1:0 f32, 3:2 f16+f64 (0 nearest even, 1 toward +inf, 2 toward -inf, 3 toward 0)
    self.mode_wave = 0   # the wave whose MODE ftz/round follow: the first; interleaved, the first of those running
    self.mode_seen = -1  # the MODE value they were computed from

  def mode_changed(self) -> None:
    """Recompute the flush flags and round modes from MODE (of `mode_wave`: the waves running together share their MODE
    in practice, as LLVM sets it uniformly)."""
    m = int(self.mode[self.mode_wave]) if self.count else 0
    self.mode_seen = m
    self.round = m & 0xf
    self.dx10_clamp = bool(m >> 8 & 1)
    flags = 0
    for shift, bit in ((4, 0), (6, 2)):
      d = (m >> shift) & 3   # 0 flush in+out, 1 flush out, 2 flush in, 3 keep denormals (amdgpu_kd FLOAT_DENORM_MODE_*)
      if d in (0, 2): flags |= 1 << bit
      if d in (0, 1): flags |= 2 << bit
    self.ftz = flags

  def follow_mode(self, wave: int) -> None:
    """Interleaved waves may be at different MODEs (one past s_round_mode, one not yet): follow the running one's."""
    self.mode_wave = wave
    if int(self.mode[wave]) != self.mode_seen: self.mode_changed()

  def signal(self, w) -> None:
    """Barrier arrival (s_barrier, s_barrier_signal): the wave's count of signalled barriers goes up."""
    self.signals[w] += 1

  def first_to_signal(self, w) -> np.ndarray:
    """Per wave of `w`: whether it is the first of its workgroup to signal the barrier it is about to signal
    (s_barrier_signal_isfirst); of waves signalling together, the lowest."""
    waves = np.arange(self.count)[w]
    ahead = np.full(self.groups, -1, np.int64)
    np.maximum.at(ahead, self.wg, self.signals)
    wg = self.wg[waves]
    return (ahead[wg] < self.signals[waves] + 1) & np.r_[True, wg[1:] != wg[:-1]]

  def release_barriers(self) -> None:
    """Let parked waves go on whose workgroup's live waves have all signalled the barrier they wait for (waves that
    ended no longer count, as on hardware). Exact per workgroup, whatever order the waves ran in."""
    if not self.blocked.any(): return
    least = np.full(self.groups, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(least, self.wg, np.where(self.done, np.iinfo(np.int64).max, self.signals))
    self.blocked &= least[self.wg] < self.signals

  @property
  def dpp(self) -> np.ndarray:
    """Scratch register for a DPP instruction's permuted src0 (allocated on first use)."""
    if self._dpp is None: self._dpp = np.zeros((self.count, self.lanes), np.uint32)
    return self._dpp

  @property
  def dpp1(self) -> np.ndarray:
    """Scratch register for an SDWA instruction's selected src1, or a 64-bit DPP src0's high dword (gfx9; allocated on first use)."""
    if self._dpp1 is None: self._dpp1 = np.zeros((self.count, self.lanes), np.uint32)
    return self._dpp1

  def next_pc(self, w, target) -> None:
    """Branch: the engine has already advanced pc past the instruction; a branch overrides it."""
    self.pc[w] = target

  # lane masks (EXEC, VCC, compare results) as uint64 per wave, bools per lane
  def mask(self, reg: int, w) -> np.ndarray:
    """A lane mask per wave: uint32 in wave32, uint64 (register pair) in wave64."""
    lo = self.s[reg, w]
    if self.lanes == 32: return lo
    return lo.astype(np.uint64) | (self.s[reg + 1, w].astype(np.uint64) << np.uint64(32))

  def set_mask(self, reg: int, w, m: np.ndarray) -> None:
    if reg == NULL: return
    if reg >= EXEC - 1: self._exec_cache = None
    m = np.asarray(m)
    if self.lanes == 32:
      self.s[reg, w] = m.astype(np.uint32) if m.dtype != np.uint64 else (m & np.uint64(0xffffffff)).astype(np.uint32)
      return
    m = m.astype(np.uint64)
    self.s[reg, w] = (m & np.uint64(0xffffffff)).astype(np.uint32)
    if reg + 1 != NULL: self.s[reg + 1, w] = (m >> np.uint64(32)).astype(np.uint32)

  def lanes_of(self, m: np.ndarray) -> np.ndarray:
    """(k,) masks -> (k, lanes) bools."""
    dt = np.uint32 if self.lanes == 32 else np.uint64
    m = np.ascontiguousarray(np.asarray(m).astype(dt, copy=False).reshape(-1))
    return np.unpackbits(m.view(np.uint8).reshape(-1, self.lanes // 8), axis=1, bitorder="little").view(bool)

  def mask_of(self, b: np.ndarray) -> np.ndarray:
    """(k, lanes) bools -> (k,) masks (uint32 in wave32, uint64 in wave64)."""
    packed = np.packbits(b, axis=1, bitorder="little")
    return packed.view(np.uint32 if self.lanes == 32 else np.uint64).reshape(-1)

  def exec_lanes(self, w) -> np.ndarray:
    """EXEC as (k, lanes) bools (cached for the whole batch until EXEC is written)."""
    if isinstance(w, slice):
      c = self._exec_cache
      if c is None:
        ex = self.lanes_of(self.mask(EXEC, w))
        self._exec_cache = c = (ex, bool(ex.all()))
      return c[0]
    return self.lanes_of(self.mask(EXEC, w))

  def exec_full(self, w, ex: np.ndarray) -> bool:
    """Whether `ex` is this batch's cached EXEC with every lane of every wave set (writes may skip masking)."""
    c = self._exec_cache
    return c is not None and c[0] is ex and c[1] and isinstance(w, slice)

  def exec_written(self) -> None:
    self._exec_cache = None

  def dump(self, wave: int, vgprs: int = 16) -> str:
    """A readable dump of one wave's state (for fault messages and traces)."""
    ex = int(self.mask(EXEC, wave))
    lines = [f"pc={int(self.pc[wave]):#x} exec={ex:#0{self.lanes // 4 + 2}x} vcc={int(self.mask(VCC, wave)):#x} scc={int(self.scc[wave])} "
             f"m0={int(self.s[M0, wave]):#x} workgroup={int(self.wg[wave])}"]
    sg = self.s[:106, wave]
    last = int(np.nonzero(sg)[0].max()) + 1 if sg.any() else 0
    for i in range(0, max(last, 1), 8):
      lines.append(f"s[{i}:{i + 7}] = " + " ".join(f"{int(x):08x}" for x in sg[i:i + 8]))
    for r in range(min(vgprs, self.v.shape[0])):
      lines.append(f"v{r} = " + " ".join(f"{int(x):08x}" for x in self.v[r, wave, :min(self.lanes, 8)]) + (" ..." if self.lanes > 8 else ""))
    return "\n".join(lines)
