"""Exceptions a wave raises: every one names the wave, its PC and the instruction, and carries a state dump."""
from __future__ import annotations


class WaveError(Exception):
  """A wave stopped: `pc` is where, `wave` which (index in the dispatch), `state` a text dump of its registers."""

  def __init__(self, reason: str, pc: int | None = None, wave: int | None = None, state: str = "", instruction: str = ""):
    where = (f" at pc {pc:#x}" if pc is not None else "") + (f" in wave {wave}" if wave is not None else "")
    what = f" ({instruction})" if instruction else ""
    super().__init__(f"{reason}{where}{what}" + (f"\n{state}" if state else ""))
    self.reason, self.pc, self.wave, self.state, self.instruction = reason, pc, wave, state, instruction


class IllegalInstruction(WaveError):
  """Bytes the emulator cannot execute: not a gfx11 instruction, or one it does not implement yet."""


class TrapError(WaveError):
  """`s_trap` (or `s_sendmsghalt`) with no trap handler: the wave is halted, as the hardware would report it."""


class InstructionLimit(WaveError):
  """The dispatch ran more instructions than `max_instructions` allowed (a runaway loop, or a limit set to inspect)."""


class LDSFault(WaveError):
  """A DS access outside the workgroup's LDS allocation (hardware drops it; the emulator stops so the bug is seen)."""


class ScratchFault(WaveError):
  """A scratch access outside the lane's private segment."""


class Cancelled(Exception):
  """The dispatch was called off from outside (its queue was destroyed or reset): not the kernel's fault."""
