"""The execution loop: decode each address once into a closure, then step a batch of waves in lockstep.

At every step the waves whose PC is lowest run that instruction together (per-wave EXEC, SCC and registers live
in numpy arrays, so one closure call covers all of them). Waves that branch elsewhere wait until the lowest-PC
group reaches them again, which reconverges loops and if/else the way structured code expects.

Interleaved (a seed given, workgroups of more than one wave): races show. Each workgroup's waves get a random order of
slots; one random slot runs (that wave of every workgroup of the batch, still one numpy call per instruction) through
1-4 of its memory, barrier or wait instructions, then another slot is drawn. A missing barrier or an
unsynchronised LDS/global access then reads what another wave has or has not written yet, as on hardware.

Barriers are exact in both modes: `s_barrier` (gfx12: `s_barrier_signal` then `s_barrier_wait`) holds a wave until
every wave of its workgroup has signalled (a wave that ended counts as arrived, as the hardware drops it from the count).
"""
from __future__ import annotations
import atexit
import os
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from hcq.asm.emu import gfx9, ops_flow, ops_mai, ops_mem, ops_salu, ops_valu, ops_vdpp, ops_vpacked
from hcq.asm.emu.gfx9 import GFX9_ARCHS
from hcq.asm.emu.decode import decode
from hcq.asm.emu.errors import Cancelled, IllegalInstruction, InstructionLimit, WaveError
from hcq.asm.emu.memory import PageFault, VirtualMemory
from hcq.asm.emu.wave import Waves

_BUILDERS = {
  "SOP1": ops_salu.build, "SOP2": ops_salu.build, "SOPC": ops_salu.build, "SOPK": ops_salu.build, "SOPP": ops_flow.build,
  "SMEM": ops_mem.build_smem, "VOP1": ops_valu.build, "VOP2": ops_valu.build, "VOP3": ops_valu.build, "VOP3SD": ops_valu.build,
  "VOPC": ops_valu.build, "VOP3P": ops_vpacked.build, "VOPD": ops_vdpp.build_vopd, "DS": ops_mem.build_ds,
  "GLOBAL": ops_mem.build_vmem, "FLAT": ops_mem.build_vmem, "SCRATCH": ops_mem.build_vmem,
  "MUBUF": ops_mem.build_mubuf, "MTBUF": ops_mem.build_mubuf,
  # gfx12's VMEM encodings (field names differ; ops_mem picks either)
  "VGLOBAL": ops_mem.build_vmem, "VFLAT": ops_mem.build_vmem, "VSCRATCH": ops_mem.build_vmem, "VBUFFER": ops_mem.build_mubuf,
}
_DPP_BASES = ("VOP1", "VOP2", "VOPC", "VOP3", "VOP3SD", "VOP3P")   # VOP3*: gfx11's e64 encodings with DPP
for _f in _DPP_BASES:
  for _d in ("DPP16", "DPP8", "DPP8FI"): _BUILDERS[f"{_f}_{_d}"] = ops_vdpp.build_dpp
for _f in ("VOP1", "VOP2", "VOPC"): _BUILDERS[f"{_f}_SDWA"] = ops_vdpp.build_sdwa   # gfx9
_BUILDERS["VOP3P_MAI"] = ops_mai.build   # gfx9 (CDNA) matrix ops


def _graphics_only(ins, pc):
  """Exports, parameter interpolation, LDS-direct parameter loads and image ops feed the graphics pipeline, which a
  compute dispatch does not have: a clear fault rather than a guess."""
  raise NotImplementedError(f"graphics-only ({ins.opcode.fmt.name}), not emulated")


GRAPHICS_ONLY = ("EXP", "VINTERP", "LDSDIR", "MIMG", "MIMG_NSA", "VIMAGE", "VSAMPLE", "VEXPORT", "VDSDIR")   # gfx11 and gfx12 names
for _f in GRAPHICS_ONLY: _BUILDERS[_f] = _graphics_only
VECTOR_FORMATS = frozenset({"VOP1", "VOP2", "VOP3", "VOP3SD", "VOPC", "VOP3P", "VOPD", "VOP3P_MAI", "VOP1_SDWA", "VOP2_SDWA", "VOPC_SDWA"} |
                           {f"{a}_{b}" for a in _DPP_BASES for b in ("DPP16", "DPP8", "DPP8FI")})


MEMORY_FORMATS = frozenset({"SMEM", "DS", "GLOBAL", "FLAT", "SCRATCH", "MUBUF", "MTBUF", "VGLOBAL", "VFLAT", "VSCRATCH", "VBUFFER"})
SYNC_OPS = frozenset({"s_barrier", "s_barrier_wait", "s_barrier_signal", "s_barrier_signal_isfirst", "s_endpgm", "s_endpgm_saved"})
SWITCH_OPS = frozenset({"s_sleep", "s_sleep_var"})   # (and every s_waitcnt* / gfx12 s_wait_*)


@dataclass
class Compiled:
  fn: Callable
  size: int
  text: str
  fmt: str
  control: bool = False   # may change PCs, end or park waves: the scheduler must look again afterwards
  switch: bool = False    # a memory, barrier or wait instruction: an interleaved run draws the next wave after it
  sync: bool = False      # a barrier arrival or a wave's end: parked waves whose workgroup has all arrived go on
  op: tuple[str, str] | None = None   # (format, opcode name) as the arch's table spells them; None for an illegal one


# HCQ_EMU_COVERAGE=FILE: every (arch, format, opcode) this process compiles (each just before its first execution)
# is appended to FILE at exit, one "arch format opcode" line each; off, the only cost is one test per compile
EXECUTED: set[tuple[str, str, str]] | None = None


def _write_executed(path: str) -> None:
  with open(path, "a") as f: f.write("".join(f"{a} {fm} {o}\n" for a, fm, o in sorted(EXECUTED)))


if os.environ.get("HCQ_EMU_COVERAGE"):
  EXECUTED = set()
  atexit.register(_write_executed, os.environ["HCQ_EMU_COVERAGE"])


_SHARED: dict[tuple, Compiled] = {}   # (arch, pc, bytes) -> Compiled, across dispatches (closures depend on nothing else)
_SHARED_MAX = 1 << 16


@dataclass
class Stats:
  """What a dispatch executed: wave-instructions by format, and VALU lane-operations (lanes x VALU wave-instructions)."""
  by_format: dict = field(default_factory=dict)
  valu_lane_ops: int = 0
  steps: int = 0

  @property
  def instructions(self) -> int: return sum(self.by_format.values())


class Program:
  """Decoded-and-compiled instructions of the code at some addresses of a VirtualMemory, each compiled once."""

  def __init__(self, mem: VirtualMemory, arch: str = "gfx1100", agpr_base: int = 0):
    self.mem, self.arch, self.agpr_base = mem, arch, agpr_base   # agpr_base: gfx9's accum_offset (AGPR a0 = v[agpr_base])
    self.gfx9 = arch in GFX9_ARCHS
    self.cache: dict[int, Compiled] = {}

  def at(self, pc: int) -> Compiled:
    c = self.cache.get(pc)
    if c is None: c = self.cache[pc] = self._compile(pc)
    return c

  def _compile(self, pc: int) -> Compiled:
    m, off = self.mem.find(pc, 4, False, pc)
    data = m.host[off:off + 16].tobytes()
    key = (self.arch, self.agpr_base, pc, data)
    c = _SHARED.get(key)
    if c is None:
      c = self._build(pc, data)
      if len(_SHARED) >= _SHARED_MAX: _SHARED.clear()
      _SHARED[key] = c
    if EXECUTED is not None and c.op is not None: EXECUTED.add((self.arch, *c.op))
    return c

  def _build(self, pc: int, data: bytes) -> Compiled:
    try:
      ins = decode(data, self.arch)
    except Exception as e:   # DecodeError, or a decoder bug: either way these bytes cannot run
      return self._illegal(pc, f"cannot decode {data[:8].hex()}: {e}", data[:8].hex())
    try:
      text = str(ins)
    except Exception:   # the printer cannot spell every field value yet
      text = f"{ins.opcode.mnemonic} {data[:ins.size].hex()}"
    op = (ins.opcode.fmt.name, ins.opcode.name)   # as the arch's table spells them (gfx9.translate renames)
    if self.gfx9:
      try:
        ins = gfx9.translate(ins, self.agpr_base)
      except (ValueError, KeyError, NotImplementedError) as e:
        return self._illegal(pc, f"{ins.opcode.mnemonic}: {e}", text, ins.size)
    fmt = ins.opcode.fmt.name
    builder = _BUILDERS.get(fmt)
    try:
      fn = builder(ins, pc) if builder else None
    except (ValueError, KeyError, NotImplementedError) as e:   # an operand or field value the emulator cannot run
      return self._illegal(pc, f"{ins.opcode.mnemonic}: {e}", text, ins.size)
    if fn is None: return self._illegal(pc, f"{ins.opcode.mnemonic} ({fmt}) is not implemented by the emulator", text, ins.size)
    name = ins.opcode.mnemonic
    sync = name in SYNC_OPS
    return Compiled(fn, ins.size, text, fmt, getattr(fn, "control", fmt == "SOPP" or hasattr(fn, "branch")) or sync,
                    fmt in MEMORY_FORMATS or sync or name in SWITCH_OPS or name.startswith(("s_waitcnt", "s_wait_")), sync, op)

  def _illegal(self, pc: int, reason: str, text: str, size: int = 4) -> Compiled:
    def illegal(st: Waves, w):
      wave = int(np.arange(st.count)[w][0])
      raise IllegalInstruction(reason, pc, st.first_wave + wave, st.dump(wave), text)
    return Compiled(illegal, size, text, "ILLEGAL", True)


_NO_PC = np.iinfo(np.int64).max


def execute(st: Waves, prog: Program, stats: Stats, max_instructions: int | None = None,
            trace: Callable | None = None, trace_wave: int | None = None, cancel: Callable[[], bool] | None = None,
            start_pc: int | None = None, interleave: np.random.Generator | None = None, wave_slots: int = 1) -> None:
  """Run every wave of `st` to s_endpgm. `trace(wave, pc, text, writes)` is called for `trace_wave` (a dispatch index);
  `cancel()`, asked every 16 steps, stops the run with Cancelled (a queue reset ending a kernel that never ends; a
  step of a large batch of waves takes milliseconds, so a preemption waits at most a fraction of a second).
  `start_pc`: every wave is live and starts there (a fresh launch), which spares the first scheduling pass.
  `interleave`: run the `wave_slots` waves of each workgroup (consecutive in `st`) in the random order this generator
  draws, switching at memory, barrier and wait instructions (lockstep when None or with one wave per workgroup)."""
  count = st.count
  all_waves = slice(None)
  executed = 0
  tw = None if trace_wave is None else trace_wave - st.first_wave
  if tw is not None and not 0 <= tw < count: tw = None
  order = _Interleaving(st, wave_slots, interleave) if interleave is not None and wave_slots > 1 and count else None
  uniform, pc = (False, 0) if start_pc is None or not count or order else (True, start_pc)   # uniform: every wave is live and at `pc`
  while True:
    if order is not None:
      if not uniform:
        picked = order.pick()
        if picked is None: return
        pc, w, sel, uniform = picked
        st.follow_mode(int(w[0]))
      k = len(w)
    elif not uniform:
      runnable = ~st.done & ~st.blocked
      if not runnable.any(): return _finished(st)   # barriers release as waves arrive (Waves.release_barriers)
      pcs = np.where(runnable, st.pc, _NO_PC)
      pc = int(pcs.min())
      sel = pcs == pc
      k = int(sel.sum())
      uniform = k == count
      w = all_waves if uniform else np.nonzero(sel)[0]
    else:
      sel, k, w = None, count, all_waves
    c = prog.at(pc)
    if max_instructions is not None and executed + k > max_instructions:
      first = _first(sel)
      raise InstructionLimit(f"stopped after {executed} wave-instructions (max_instructions={max_instructions})", pc,
                             st.first_wave + first, st.dump(first), c.text)
    traced = tw is not None and (sel is None or bool(sel[tw]))
    if traced: before = (st.s[:, tw].copy(), st.v[:, tw].copy(), int(st.scc[tw]))
    st.pc[w] = pc + c.size
    try:
      c.fn(st, w)
    except (WaveError, PageFault) as e:
      if not getattr(e, "state", ""):  # a PageFault, or a WaveError raised with its reason only (LDSFault): add where and the state
        first = _first(sel)
        e.pc = pc if e.pc is None else e.pc
        e.wave, e.state, e.instruction = st.first_wave + first, st.dump(first), c.text
      raise
    except Exception as e:   # a bug or an unsupported operand: say where, keep the cause
      first = _first(sel)
      raise WaveError(f"emulator error in {c.text!r}: {type(e).__name__}: {e}", pc, st.first_wave + first, st.dump(first), c.text) from e
    executed += k
    stats.steps += 1
    if cancel is not None and not stats.steps & 15 and cancel(): raise Cancelled(f"dispatch cancelled at pc {pc:#x}")
    stats.by_format[c.fmt] = stats.by_format.get(c.fmt, 0) + k
    if c.fmt in VECTOR_FORMATS: stats.valu_lane_ops += k * st.lanes
    if traced: trace(st.first_wave + tw, pc, c.text, _writes(st, tw, before))
    if c.sync: st.release_barriers()
    if c.control or (order is not None and c.switch and order.switch()): uniform = False
    else: pc += c.size


class _Interleaving:
  """The interleaved schedule: each workgroup's waves in a random order of slots; a drawn slot runs (that wave of
  every workgroup, lowest PC first as in lockstep) through 1-4 switch points, then the next slot is drawn. Waves of
  different workgroups in one slot still run together (races between workgroups are not what this looks for)."""

  def __init__(self, st: Waves, slots: int, rng: np.random.Generator):
    if st.count % slots: raise ValueError(f"{st.count} waves are not whole workgroups of {slots}")
    self.st, self.rng, self.cur, self.burst = st, rng, None, 0
    groups = st.count // slots
    # slot j of workgroup g is its wave perm[g, j]: each workgroup sees its own order
    perm = rng.permuted(np.tile(np.arange(slots), (groups, 1)), axis=1) + np.arange(groups)[:, None] * slots
    self.slots = [np.ascontiguousarray(perm[:, j]) for j in range(slots)]
    self.slot_of = np.empty(st.count, np.int64)
    self.slot_of[perm.reshape(-1)] = np.tile(np.arange(slots), groups)

  def switch(self) -> bool:
    """At a switch point: whether the drawn slot's burst (1-4 switch points, so that a wave may run well ahead) is over."""
    self.burst -= 1
    if self.burst > 0: return False
    self.cur = None
    return True

  def pick(self):
    """(pc, waves, selection over all waves, whether that is the slot's every wave) of the next step; None: all ended."""
    st, rng = self.st, self.rng
    live = ~st.done & ~st.blocked
    if self.cur is not None and not live[self.slots[self.cur]].any(): self.cur = None   # parked or ended: draw again
    if self.cur is None:
      if not live.any(): return _finished(st)
      cands = np.unique(self.slot_of[live])
      self.cur, self.burst = int(cands[rng.integers(len(cands))]), int(rng.integers(1, 5))
    waves = self.slots[self.cur]
    pcs = np.where(live[waves], st.pc[waves], _NO_PC)
    pc = int(pcs.min())
    here = pcs == pc
    w = waves if here.all() else waves[here]
    sel = np.zeros(st.count, bool)
    sel[w] = True
    return pc, w, sel, bool(here.all())


def _finished(st: Waves) -> None:
  """No wave can run: every wave ended, or (which Waves.release_barriers rules out) some wait at a barrier forever."""
  if st.blocked.any():
    wave = int(np.nonzero(st.blocked)[0][0])
    raise WaveError("waves wait at a barrier that can never complete", int(st.pc[wave]), st.first_wave + wave, st.dump(wave), "s_barrier")


def _first(sel) -> int:
  """The first wave of the running group (for messages): sel is None when every wave runs."""
  return 0 if sel is None else int(np.nonzero(sel)[0][0])


def _writes(st: Waves, wv: int, before) -> list[str]:
  s0, v0, scc0 = before
  out = [f"s{i}={int(st.s[i, wv]):#x}" for i in np.nonzero(st.s[:, wv] != s0)[0]]
  for r in np.nonzero((st.v[:, wv] != v0).any(axis=1))[0]:
    out.append(f"v{r}=[" + " ".join(f"{int(x):x}" for x in st.v[r, wv, :8]) + (" ...]" if st.lanes > 8 else "]"))
  if int(st.scc[wv]) != scc0: out.append(f"scc={int(st.scc[wv])}")
  return out


def coverage(arch: str = "gfx1100") -> dict[str, tuple[int, int, list[str]]]:
  """Per encoding format: (opcodes the emulator implements, opcodes in the table, the missing mnemonics)."""
  from hcq.asm.instruction import Instruction
  from hcq.asm.isa import load
  isa = load(arch)
  out = {}
  for fmt, ops in isa.by_op.items():
    builder = _BUILDERS.get(fmt)
    missing = []
    for opc in ops.values():
      values = {f: 0 for f in opc.fmt.fields if f != "op"}
      values.update(opc.fixed)
      for f in ("src0", "src1", "src2", "ssrc0", "ssrc1"):
        if f in values: values[f] = 256 if fmt.startswith("VOP") and f == "src0" else 1
      values.update({f: v for f, v in opc.defaults.items() if f in values})
      if "saddr" in values: values["saddr"] = 124
      if fmt == "VOP3P_MAI": values.update(src1=257, src2=258)   # matrix ops take registers only
      if "format" in values: values["format"] = 1   # BUF_FMT_8_UNORM, the assembler's default (0 is INVALID)
      ok = False
      for src0 in ((256, 1) if "src0" in values else (None,)):   # a VGPR first; ops that read an SGPR there (writelane) then
        if src0 is not None: values["src0"] = src0
        ins = Instruction(isa, opc, dict(values), 0 if opc.has_literal_operand else None)
        try:
          b = builder
          if arch in GFX9_ARCHS:
            ins = gfx9.translate(ins, 0)
            b = _BUILDERS.get(ins.opcode.fmt.name)
          ok = b is not None and b(ins, 0) is not None
        except Exception:
          ok = False
        if ok: break
      if not ok: missing.append(opc.name)
    out[fmt] = (len(ops) - len(missing), len(ops), sorted(missing))
  return out
