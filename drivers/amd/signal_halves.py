"""A 64-bit signal seen by engines that read and write 32 bits at a time (SDMA 4.4/6.0/7.0, and gfx9's WAIT_REG_MEM).

SDMA has no 64-bit poll: POLL_REGMEM compares one dword (sdma_v6_0_0_pkt_open.h, and vega10_sdma_pkt_open.h for 4.4;
sdma_v7_0.c includes the 6.0 header), and POLL_MEM_VERIFY checks memory against a pattern over address ranges, not a
value. gfx9's soc15d.h has no WAIT_REG_MEM64 (nvd.h, gfx10+, has it). Comparing only the low word of a timeline that
passes 2^32 passes early (a wait for 0x1_0000_0000 passes at 0xffff_ffff) or never passes.

Waits, `wait_halves`: the high word >= the value's high word, then the low word >= the value's low word. Exact for a
signal that only grows and does not run past the end of the value's 2^32 block (value | 0xffffffff) while the second
wait polls: once the high word reached the value's, the signal lies in that block, where the low words order as the
whole values do. Every timeline and counter hcq waits on keeps that: each step waits for the value before its own, so
the signal never passes the awaited value before the waiter does. ROCr splits its SDMA waits the same way
(amd_blit_sdma.cpp SubmitCommand: a dependency polled high word, then low word, each with a 32-bit POLL_REGMEM).

Signals, `signal_halves`: the low word first, then the high word. Midway a reader sees (old high, new low), never more
than the new value, so neither a 64-bit host read nor the two waits above pass early; writing the high word first
would show (new high, old low), 0x1_ffff_ffff on the way from 0xffff_ffff to 0x1_0000_0000.
"""
from __future__ import annotations

from hcq.sym import hi32, lo32


def wait_halves(addr, value) -> tuple[tuple[object, object], ...]:
  """(dword address, reference) for the two 32-bit >= waits that wait for the u64 at `addr` to reach `value`."""
  return (addr + 4, hi32(value)), (addr, lo32(value))


def signal_halves(addr, value) -> tuple[tuple[object, object], ...]:
  """(dword address, data) for the two 32-bit writes that store the u64 `value` at `addr`."""
  return (addr, lo32(value)), (addr + 4, hi32(value))
