"""gfx11 scratch as the shader processor input (SPI) places it: each wave in flight gets a slot of the dispatch's
scratch ring, and its private memory lives there, lanes interleaved a dword at a time.

The rules and their sources:
- gfx11 has architected flat scratch (LLVM AMDGPU.td: FeatureISAVersion11_Common lists FeatureArchitectedFlatScratch):
  the SPI points each wave's FLAT_SCRATCH at its slot itself, and kernels get neither a flat scratch init nor a wave
  offset SGPR (clang-19 -mcpu=gfx1100 emits no `.amdhsa_user_sgpr_flat_scratch_init`; gfx1030 does). The ring starts
  at COMPUTE_DISPATCH_SCRATCH_BASE_LO/HI (the address >> 8), written before the dispatch (Mesa radv_queue.c
  radv_emit_compute_scratch, GFX11).
- COMPUTE_TMPRING_SIZE.WAVESIZE is the bytes of one wave's slot in 256-byte units on gfx11 (1 KiB before), and WAVES
  counts slots per shader engine: ROCr (amd_aql_queue.cpp FillComputeTmpRingSize_Gfx11: "For GFX11 we specify number
  of waves per engine instead of total", num_waves /= NumShaderBanks) and radv (waves /= num_se) divide the slots of
  the buffer, which they size for every engine, by the engine count.
- A lane's private byte `off` is at slot + (off / 4) * 4 * lanes + lane * 4 + off % 4: the private segment is
  interleaved by dword so that lanes reading one private address touch adjacent dwords (AMDGPUUsage, "Memory Spaces",
  private segment). Every dword of a wider access is placed on its own.
- Not documented, so the strictest model consistent with the above: the slots of engine `se` are the WAVES slots from
  base + se * WAVES * slot bytes; workgroups go to the engines round robin; every wave in flight holds a distinct
  slot of its engine, handed out in turn (so a long dispatch uses every slot); an engine holds at most
  min(WAVES, its CUs' wave slots) waves at once, and a WAVES too small for one workgroup is an error (the wave could
  never launch; radeonsi's si_compute.c: a wrong WAVES hangs the GPU when SCRATCH_EN is set). A dispatch whose ring
  does not lie in one writable mapping faults before it starts, at the first byte past that buffer, instead of when
  the scheduling first hands a wave a slot there (or silently writes a neighbouring buffer, as the GPU would).
"""
from __future__ import annotations
from dataclasses import dataclass

import numpy as np

from hcq.asm.emu.memory import PageFault, VirtualMemory

SLOT_GRANULE = 256  # TMPRING_SIZE.WAVESIZE unit on gfx11 (bytes per wave)


@dataclass(frozen=True)
class ScratchRing:
  """One dispatch's scratch: the ring the registers describe, on a board of `engines` shader engines whose engines
  each hold `engine_waves` waves."""
  base: int            # COMPUTE_DISPATCH_SCRATCH_BASE, in bytes
  waves: int           # TMPRING_SIZE.WAVES: slots per shader engine
  slot_bytes: int      # TMPRING_SIZE.WAVESIZE * 256
  engines: int
  engine_waves: int

  @property
  def nbytes(self) -> int:
    return self.engines * self.waves * self.slot_bytes

  def check(self, mem: VirtualMemory, waves_per_group: int) -> None:
    """Refuse a ring a workgroup cannot launch in (a hang on the GPU) and one whose memory is not all mapped."""
    if self.waves < waves_per_group:
      raise ValueError(f"COMPUTE_TMPRING_SIZE.WAVES = {self.waves} scratch slots per shader engine cannot hold a workgroup of "
                       f"{waves_per_group} waves: the dispatch would never launch (the GPU hangs)")
    try:   # one buffer holds the ring (as ROCr and radv allocate it); running into a neighbour is a fault here
      m, off = mem.find(self.base, 1, True)
      bad = None if off + self.nbytes <= m.size else m.va + m.size
    except PageFault:
      bad = self.base
    if bad is not None:
      se, slot = divmod((bad - self.base) // self.slot_bytes, self.waves)
      raise PageFault(bad, self.slot_bytes, True, what=f"scratch slot {slot} of shader engine {se}: the ring at {self.base:#x} "
                      f"holds {self.engines} engines x {self.waves} slots x {self.slot_bytes} bytes = {self.nbytes:#x}")

  def groups_in_flight(self, waves_per_group: int) -> int:
    """How many workgroups run at once: each engine takes as many as its slots and wave slots allow."""
    return self.engines * (min(self.waves, self.engine_waves) // waves_per_group)

  def slot_addresses(self, first_group: int, groups: int, waves_per_group: int, turn: np.ndarray) -> np.ndarray:
    """The slot address of every wave of workgroups first_group .. first_group + groups - 1 (at most
    groups_in_flight of them), in wave order; `turn` (one counter per engine) is where each engine's next slot is."""
    engine = (np.arange(first_group, first_group + groups) % self.engines).repeat(waves_per_group)
    order = np.argsort(engine, kind="stable")
    rank = np.empty(engine.size, np.int64)   # the wave's place among its engine's waves in this batch
    counts = np.bincount(engine, minlength=self.engines)
    rank[order] = np.arange(engine.size) - np.repeat(np.cumsum(counts) - counts, counts)
    slot = (turn[engine] + rank) % self.waves
    turn += counts
    return (self.base + (engine * self.waves + slot) * self.slot_bytes).astype(np.uint64)


def swizzled(slot: np.ndarray, lane: np.ndarray, offset: np.ndarray, lanes: int) -> np.ndarray:
  """The address of private byte (or dword) `offset` of `lane` in a wave whose slot is at `slot` (broadcasting)."""
  return slot + ((offset >> 2) * (4 * lanes) + lane * 4 + (offset & 3)).astype(np.uint64)
