"""Run a few instructions on one batch of waves with chosen register values: per-instruction tests and quick
experiments ("what does v_med3_f32 do with a NaN?") without a code object."""
from __future__ import annotations

import numpy as np

from hcq.asm.emu.engine import Program, Stats, execute
from hcq.asm.emu.gfx9 import GFX9_ARCHS
from hcq.asm.emu.memory import VirtualMemory
from hcq.asm.emu.wave import EXEC, Waves

SNIPPET_BASE = 0x7e0000000000


def run_snippet(code: "str | bytes", s: dict[int, int] | None = None, v: dict[int, "np.ndarray | list | int"] | None = None,
                lanes: int = 32, waves: int = 1, exec_mask: int | None = None, scc: int = 0, mem: VirtualMemory | None = None,
                lds_bytes: int = 0, private_bytes: int = 0, vgprs: int = 32, arch: str = "gfx1100",
                max_instructions: int | None = 100000, scratch_slots: "np.ndarray | None" = None,
                interleave: int | None = None, lds: "bytes | None" = None) -> Waves:
  """Assemble `code` (text, or machine code bytes), append s_endpgm, run it on `waves` waves and return their state.

  `s` maps SGPR number (operand encoding: 106 VCC_LO, 125 M0, ...) to a value for every wave (or a list, one per wave); `v` maps a VGPR to one
  value or one per lane (the same for every wave). gfx942: the AGPRs are the upper half of the `vgprs` registers
  (a0 = v[vgprs // 2], as a kernel descriptor's accum_offset would put them). `scratch_slots`: each wave's scratch slot
  address in `mem`, where its private memory then lives as on gfx11 (hcq.asm.emu.scratch); else it is the emulator's own.
  The waves form one workgroup (one LDS); `interleave`: a seed to run them interleaved (hcq.asm.emu.launch), else lockstep. `lds`: the initial contents of the
  first bytes of LDS (each workgroup's; the rest is zero)."""
  from hcq.asm.text import assemble
  data = (assemble(code, arch) if isinstance(code, str) else bytes(code)) + assemble("s_endpgm", arch)
  mem = mem or VirtualMemory()
  mem.map(SNIPPET_BASE, len(data) + 16, np.frombuffer(data + bytes(16), np.uint8).copy(), writable=False)
  st = Waves(waves, lanes, vgprs, np.zeros(waves, np.int64), lds_bytes, 1, private_bytes,
             None if scratch_slots is None else np.asarray(scratch_slots, np.uint64))
  st.mem = mem
  if lds is not None:
    if len(lds) > lds_bytes: raise ValueError(f"lds: {len(lds)} initial bytes do not fit lds_bytes={lds_bytes}")
    st.lds[:len(lds)] = np.frombuffer(bytes(lds), np.uint8)
  st.pc[:] = SNIPPET_BASE
  st.scc[:] = scc
  st.mode[:] = 0xf0   # as LLVM's gfx11 kernels start: round to nearest even, denormals kept
  st.mode_changed()
  st.set_mask(EXEC, slice(None), np.full(waves, (1 << lanes) - 1 if exec_mask is None else exec_mask, np.uint64))
  for r, val in (s or {}).items(): st.s[r, :] = np.asarray(val, np.int64) & 0xffffffff   # one value, or one per wave
  for r, val in (v or {}).items():
    arr = np.asarray(val)
    st.v[r] = (arr.astype(np.int64) & 0xffffffff).astype(np.uint32) if arr.dtype.kind in "iub" else arr.astype(np.float32).view(np.uint32) if arr.dtype.kind == "f" and arr.dtype.itemsize == 4 else arr
  old = np.seterr(all="ignore")
  try:
    execute(st, Program(mem, arch, vgprs // 2 if arch in GFX9_ARCHS else 0), Stats(), max_instructions,
            interleave=None if interleave is None else np.random.default_rng(interleave), wave_slots=waves)
  finally:
    np.seterr(**old)
    mem.unmap(SNIPPET_BASE)   # the caller's map is left as it was given
  return st
