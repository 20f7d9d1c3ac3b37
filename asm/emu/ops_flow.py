"""SOPP: branches, s_endpgm, s_barrier, waits and messages. An in-order machine has nothing to wait for, so the
s_waitcnt family, s_delay_alu, s_clause and cache invalidates do nothing."""
from __future__ import annotations

import numpy as np

from hcq.asm.emu.errors import IllegalInstruction, TrapError
from hcq.asm.emu.wave import EXEC, VCC, Waves

NOPS = {"s_nop", "s_waitcnt", "s_waitcnt_depctr", "s_delay_alu", "s_clause", "s_sleep", "s_setprio", "s_icache_inv", "s_wait_idle",
        "s_set_inst_prefetch_distance", "s_ttracedata", "s_ttracedata_imm", "s_incperflevel", "s_decperflevel", "s_wakeup",
        "s_sethalt", "s_setkill", "s_wait_event",
        # gfx12 splits s_waitcnt into one counter per kind; s_wait_alu is gfx12's s_waitcnt_depctr
        "s_wait_alu", "s_wait_loadcnt", "s_wait_storecnt", "s_wait_kmcnt", "s_wait_dscnt", "s_wait_expcnt", "s_wait_samplecnt",
        "s_wait_bvhcnt", "s_wait_loadcnt_dscnt", "s_wait_storecnt_dscnt", "s_singleuse_vdst"}
MSG_DEALLOC_VGPRS = 3


def build(ins, pc: int):
  name = ins.opcode.mnemonic
  k = ins.values.get("simm16", 0)
  target = pc + 4 + 4 * (k - 0x10000 if k & 0x8000 else k)
  if name in NOPS or name == "s_sendmsg":   # no message has a visible effect in a compute dispatch
    def nop(st: Waves, w): pass
    nop.control = False
    return nop
  if name in ("s_denorm_mode", "s_round_mode"):   # MODE[7:4] / MODE[3:0] from the immediate
    shift = 4 if name == "s_denorm_mode" else 0
    def set_mode(st: Waves, w):
      st.mode[w] = (st.mode[w] & np.uint32(~(0xf << shift) & 0xffffffff)) | np.uint32((k & 0xf) << shift)
      st.mode_changed()
    set_mode.control = False
    return set_mode
  if name in ("s_endpgm", "s_endpgm_saved"):
    def endpgm(st: Waves, w): st.done[w] = True
    return endpgm
  if name == "s_barrier":   # signal and wait: the engine releases the workgroup once all its waves signalled
    def barrier(st: Waves, w):
      st.signal(w)
      st.blocked[w] = True
    return barrier
  if name == "s_barrier_wait":   # gfx12: waits for the barrier s_barrier_signal (ops_salu) signalled
    def barrier_wait(st: Waves, w): st.blocked[w] = True
    return barrier_wait
  if name in ("s_trap", "s_sendmsghalt"):
    def trap(st: Waves, w):
      wave = int(np.arange(st.count)[w][0]) if not isinstance(w, slice) else 0
      raise TrapError(f"{name} {k:#x} with no trap handler", pc, st.first_wave + wave, st.dump(wave), name)
    return trap
  if name == "s_code_end":
    def code_end(st: Waves, w):
      wave = int(np.arange(st.count)[w][0])
      raise IllegalInstruction("ran past the end of the program (s_code_end)", pc, st.first_wave + wave, st.dump(wave), name)
    return code_end
  cond = {"s_branch": None,
          "s_cbranch_scc0": lambda st, w: st.scc[w] == 0, "s_cbranch_scc1": lambda st, w: st.scc[w] != 0,
          "s_cbranch_vccz": lambda st, w: st.mask(VCC, w) == 0, "s_cbranch_vccnz": lambda st, w: st.mask(VCC, w) != 0,
          "s_cbranch_execz": lambda st, w: st.mask(EXEC, w) == 0, "s_cbranch_execnz": lambda st, w: st.mask(EXEC, w) != 0}
  if name in cond:
    c = cond[name]
    if c is None:
      def branch(st: Waves, w): st.next_pc(w, np.int64(target))
    else:
      def branch(st: Waves, w): st.next_pc(w, np.where(c(st, w), np.int64(target), np.int64(pc + 4)))
    branch.branch = True
    return branch
  if name.startswith("s_cbranch_cdbg"):
    def nobranch(st, w): pass   # no debugger attached: never taken
    return nobranch
  return None
