"""Scratch as the shader processor input (SPI) places it: each wave in flight gets a slot of the dispatch's scratch
ring, and its private memory lives there, lanes interleaved a dword at a time. gfx11, gfx12 and gfx942 (gfx9.4.3) all
have it; they differ in WAVESIZE's unit and in what WAVES counts (`ScratchRules`).

The rules and their sources:
- All three have architected flat scratch (AMDGPUUsage, compute_pgm_rsrc2 ENABLE_PRIVATE_SEGMENT: on such targets it
  sets up the FLAT_SCRATCH pair instead of a wave offset SGPR): the SPI points each wave's FLAT_SCRATCH at its slot
  itself, and kernels get neither a flat scratch init nor a wave offset SGPR. clang-19 spells RSRC2 bit 0
  `.amdhsa_enable_private_segment` (the architected spelling) for -mcpu=gfx1100 and gfx942, with no flat scratch init,
  and `.amdhsa_system_sgpr_private_segment_wavefront_offset` for gfx1030 and gfx90a, whose kernels take a private
  segment buffer instead. The ring starts at COMPUTE_DISPATCH_SCRATCH_BASE_LO/HI (the address >> 8, written
  before the dispatch: Mesa radv_queue.c radv_emit_compute_scratch on GFX11; gc_9_4_3_offset.h has the same pair at
  SH 0x0e10 on gfx9.4.3, one per XCC: each XCC's CP keeps its own SH registers).
- COMPUTE_TMPRING_SIZE.WAVESIZE is the bytes of one wave's slot in 256-byte units on gfx11+ and 1 KiB units before
  (ROCr amd_aql_queue.cpp: mem_alignment_size 256 for major version >= 11, else 1024, and WAVESIZE = the wave's bytes
  / mem_alignment_size; LLVM's scratch_ps test: alignto(size * lanes, 1024) / 1024 before gfx11).
- What WAVES counts: on gfx11+ the slots of each shader engine (ROCr FillComputeTmpRingSize_Gfx11: "For GFX11 we
  specify number of waves per engine instead of total", num_waves /= NumShaderBanks; radv: waves /= num_se). On
  gfx9.4.3 the slots of one XCC's ring (ROCr FillComputeTmpRingSize: (queue scratch / NumXcc) / wave bytes, the
  scratch_backing_memory_byte_size "per XCC"), which the SPI shares among the XCC's engines: ROCr asserts WAVES %
  (NumShaderBanks / NumXcc) == 0, "Must be divisible by #SEs". So engine `se` of an XCC has WAVES / engines slots,
  and a WAVES the engines do not divide is refused (what the hardware does with the remainder is not documented).
- A lane's private byte `off` is at slot + (off / 4) * 4 * lanes + lane * 4 + off % 4: the private segment is
  interleaved by dword so that lanes reading one private address touch adjacent dwords (AMDGPUUsage, "Memory Spaces",
  private segment). Every dword of a wider access is placed on its own.
- Not documented, so the strictest model consistent with the above: the slots of engine `se` are its slots from
  base + se * slots * slot bytes; workgroups go to the engines round robin; every wave in flight holds a distinct
  slot of its engine, handed out in turn (so a long dispatch uses every slot); an engine holds at most
  min(its slots, its CUs' wave slots) waves at once, and too few slots for one workgroup is an error (the wave could
  never launch; radeonsi's si_compute.c: a wrong WAVES hangs the GPU when SCRATCH_EN is set). A dispatch whose ring
  does not lie in one writable mapping faults before it starts, at the first byte past that buffer, instead of when
  the scheduling first hands a wave a slot there (or silently writes a neighbouring buffer, as the GPU would).
"""
from __future__ import annotations
from dataclasses import dataclass

import numpy as np

from hcq.asm.emu.memory import PageFault, VirtualMemory


@dataclass(frozen=True)
class ScratchRules:
  """A family's COMPUTE_TMPRING_SIZE: the bytes of WAVESIZE's unit, and whether WAVES counts each engine's slots."""
  unit: int
  waves_per_engine: bool


RDNA_SCRATCH = ScratchRules(unit=256, waves_per_engine=True)    # gfx11, gfx12
GFX9_SCRATCH = ScratchRules(unit=1024, waves_per_engine=False)  # gfx9.4.3: WAVES is one XCC's, shared by its engines


@dataclass(frozen=True)
class ScratchRing:
  """One dispatch's scratch: the ring the registers describe, on a board of `engines` shader engines whose engines
  each hold `engine_waves` waves."""
  base: int            # COMPUTE_DISPATCH_SCRATCH_BASE, in bytes
  waves: int           # TMPRING_SIZE.WAVES: slots per shader engine
  slot_bytes: int      # TMPRING_SIZE.WAVESIZE * 256
  engines: int
  engine_waves: int

  @classmethod
  def from_registers(cls, base: int, waves: int, wavesize: int, rules: ScratchRules, engines: int, engine_waves: int) -> "ScratchRing":
    """The ring COMPUTE_DISPATCH_SCRATCH_BASE (`base`, in bytes) and COMPUTE_TMPRING_SIZE's WAVES and WAVESIZE describe
    on a family with `rules`, for one XCC of `engines` shader engines."""
    if not rules.waves_per_engine:
      if waves % engines:
        raise ValueError(f"COMPUTE_TMPRING_SIZE.WAVES = {waves} scratch slots per XCC do not divide among its {engines} "
                         f"shader engines (ROCr: WAVES must be divisible by the XCC's engines); give a multiple of {engines}")
      waves //= engines
    return cls(base, waves, wavesize * rules.unit, engines, engine_waves)

  @property
  def nbytes(self) -> int:
    return self.engines * self.waves * self.slot_bytes

  def check(self, mem: VirtualMemory, waves_per_group: int) -> None:
    """Refuse a ring a workgroup cannot launch in (a hang on the GPU) and one whose memory is not all mapped."""
    if self.waves < waves_per_group:
      raise ValueError(f"{self.waves} scratch slots per shader engine (from COMPUTE_TMPRING_SIZE.WAVES) cannot hold a workgroup of "
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
