"""A 64-bit signal seen by engines that read and write 32 bits at a time (SDMA 4.4/6.0/7.0, and gfx9.4.3's WAIT_REG_MEM).

Which engines compare 64 bits. SDMA 4.4/6.0/7.0 have none: POLL_REGMEM compares one dword (vega10_sdma_pkt_open.h,
sdma_v6_0_0_pkt_open.h; sdma_v7_0.c includes the 6.0 header) and POLL_MEM_VERIFY checks memory against a pattern over
address ranges; ROCr's 64-bit POLL_MEM_64B (op 8, sub-op 5) is for gfx12.5 only (amd_blit_sdma.cpp: is_gfx125plus_ =
major 12, minor >= 5). gfx9: soc15d.h has no WAIT_REG_MEM64, but PAL's gfx9+ PM4 headers list it as a core packet
(gfx9_plus_merged_pm4_it_opcodes.h IT_WAIT_REG_MEM64 0x93 and PM4_MEC_WAIT_REG_MEM64_SIZEDW__CORE, in the releases that
still drove Vega) and PAL sent it on Vega and Raven (gfx9.0) compute and universal queues for two-slot GPU events
(gfx9AcquireReleaseBarrier.cpp IssueAcquireSyncEvent, 2020). No source at hand sends it on gfx9.4.x, whose MEC firmware
is another build; IREE keeps it to gfx1100 and waits with AQL BARRIER_VALUE on gfx9.4, radv's radv_cp_wait_mem and
gfx_v9_4_3.c's waits are 32-bit WAIT_REG_MEMs. Unsure, hcq does not use it on gfx9.4.3 and the mock refuses it there (the
stricter side); a run on an MI300 would settle it. (ROCr's split SDMA waits poll a count-down signal for == 0, high word
then low, where passing a block end cannot happen.)

Waits, `wait_halves`: the high word >= the value's high word H, then the low word >= the value's low word L. Signals only
grow (a user who lowers one is on their own). Never early: when the low-word wait passes, the high word is still >= H
(a half-written signal shows the old high word, which was), so the signal is (H, lo >= L) or above block H: past V.
Never stuck, under the precondition: while the engine polls, the signal, read as the engine reads it, is never in a 2^32
block above V's with its low word below L (never (H' > H, lo < L)); in practice it does not pass the end of V's block,
V | 0xffffffff, before the waiter has passed V. Once the signal reaches V the high-word wait passes, and the low word is
>= L (in block H, or in a later block as the precondition has it), so the low-word wait passes at its next read.

No pair or sequence of 32-bit waits does better, serial-number arithmetic on the low word included. A queue that waits
for a value far ahead (a future timeline value) must hold at (H, x) for x < L, and one that comes to the wait after the
signal went past the block end must pass at (H + 1, x). A wait whose conditions each read one word passes at a signal
that stays put iff every condition holds there: the high-word ones hold at H (they pass at V), the low-word ones at x
(they pass at (H + 1, x)), so all hold at (H, x), early. Only branching on what was read (COND_EXE) or help from the
signal's writers could tell the two apart.

What hcq does about the precondition: a split wait's references are patch slots filled at submit (`SplitWaitRef`). A wait
the signal has already reached when the host submits it (a 64-bit host read), or that an earlier wait of the same queue
on the same signal implies (for a value at least as large; on SDMA an earlier write too), gets references 0 and passes
at once. That covers
waits for older values, the common case (a queue waits for what another queue signalled several submissions ago, after
the timeline has moved on, perhaps past a block end). Not covered, so the user's to keep: a wait not reached at submit
whose signal another queue or the host then carries past V's block end before the engine is through the wait (the
engine still polling, or reaching the wait only later, its ring busy with earlier work): it holds until the low word
climbs back (~2^32 steps). hcq's own timeline steps keep it: each waits for the value just before its own, which no
later step can pass.

Signals, `signal_halves`: the low word first, then the high word. Midway a reader sees (old high, new low), never more
than the new value, so neither a 64-bit host read nor the two waits above pass early; writing the high word first
would show (new high, old low), 0x1_ffff_ffff on the way from 0xffff_ffff to 0x1_0000_0000.
"""
from __future__ import annotations
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from hcq.sym import Sym, hi32, lo32, resolve

if TYPE_CHECKING:
  from hcq.signal import Signal


@dataclass(frozen=True, eq=False)
class SplitWaitRef(Sym):
  """One reference word of a split wait for `signal` >= `value`: the value's `shift` half, or 0 (the wait passes at once)
  when, at submit, the signal already holds the value or one of the `earlier` values (the queue's earlier waits and
  writes on it) is at least as large."""
  signal: "Signal"
  value: "int | Sym"
  shift: int
  earlier: tuple = ()

  def eval(self, var_vals: dict[str, int]) -> int:
    # the high half is patched first: if only the low half's later read finds the value reached, (H, 0) still waits for
    # block H, which the signal is past or in with lo >= L (it had reached V); the other mix, (0, L), cannot happen
    v = resolve(self.value, var_vals)
    if self.signal.value >= v or any(resolve(e, var_vals) >= v for e in self.earlier): return 0
    return (v >> self.shift) & 0xffffffff


class SplitWaits:
  """For a queue that waits with split waits: remembers, per signal, the values its earlier packets wait for or write
  (SplitWaitRef's `earlier`: once past them, the signal holds at least each)."""

  def _reached(self, signal: "Signal", value) -> tuple:
    """The values remembered for `signal` so far; then remembers `value`. Known values are kept as their largest only
    (a wait compares them by >=) and each symbolic one once, so a queue of many waits on one signal stays linear."""
    seen = self.__dict__.setdefault("_split_seen", {})
    known, symbolic = seen.get(signal, (None, ()))
    earlier = symbolic if known is None else (known, *symbolic)
    if isinstance(value, int): known = value if known is None else max(known, value)
    elif not any(s is value for s in symbolic): symbolic = (*symbolic, value)
    seen[signal] = (known, symbolic)
    return earlier

  def split_signal(self, signal: "Signal", value) -> None:
    """This queue writes `value` to the signal here, before it runs any later packet (SDMA's FENCE; not PM4's RELEASE_MEM,
    which writes at end of pipe): a later split wait for no more than it passes at once."""
    self._reached(signal, value)

  def split_wait(self, signal: "Signal", value, wait_word: Callable[[int, SplitWaitRef], object]) -> None:
    """Record the two waits for the signal's u64 to reach `value` with `wait_word(dword address, reference)`, high word
    first. Until a submit fills them, their words show the value's halves (what the engine gets for a wait not reached)."""
    earlier = self._reached(signal, value)
    since = len(self._patches)
    for word, ref in wait_halves(signal, value, earlier): wait_word(word, ref)
    for container, index, sym in self._patches[since:]:
      if isinstance(sym, SplitWaitRef) and not isinstance(sym.value, Sym): container[index] = (sym.value >> sym.shift) & 0xffffffff


def wait_halves(signal: "Signal", value, earlier: tuple = ()) -> tuple[tuple[object, object], ...]:
  """(dword address, reference) for the two 32-bit >= waits that wait for the signal's u64 to reach `value`, high word
  first; `earlier`: the values this queue already waits for on the same signal."""
  addr = signal.value_addr
  return (addr + 4, SplitWaitRef(signal, value, 32, earlier)), (addr, SplitWaitRef(signal, value, 0, earlier))


def signal_halves(addr, value) -> tuple[tuple[object, object], ...]:
  """(dword address, data) for the two 32-bit writes that store the u64 `value` at `addr`."""
  return (addr, lo32(value)), (addr + 4, hi32(value))
