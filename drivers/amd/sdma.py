"""The AMD copy queue: SDMA 6.0 and 7.0 packets built from the generated packet table (hcq.drivers.amd.sdma_packets).

SDMA 7.0 (RDNA4) keeps SDMA 6.0's packet header (Linux 6.12 sdma_v7_0.c includes sdma_v6_0_0_pkt_open.h) and its
pointer reporting (a 64-bit byte count, sdma_v7_0_ring_get_rptr), but its COPY_LINEAR sets CPV in the header and
carries an eighth dword, the compression parameters (sdma_v7_0_emit_copy_buffer: 0 for a plain copy).

SDMA 4.4.2 (MI300) reads vega10_sdma_pkt_open.h's layouts (Linux 6.12 sdma_v4_4_2.c), which for the packets hcq sends
are SDMA 6.0's but for two fields: FENCE's header has no MTYPE (sdma_v4_4_2_ring_emit_fence writes the bare opcode) and
COPY_LINEAR's count is 22 bits (0x3FFFFF), which the 4 MiB chunks fit (copy_max_bytes 0x400000). Its read pointer is a
64-bit byte count as SDMA 6.0's (sdma_v4_4_2_ring_get_rptr)."""
from __future__ import annotations
from typing import TYPE_CHECKING

from hcq.autogen.am import sdma_v6_0_0_pkt_open as sdma
from hcq.drivers.amd.sdma_packets import sdma_packets
from hcq.drivers.amd.signal_halves import SplitWaits, signal_halves
from hcq.queue import DwordQueue, copy_args
from hcq.sym import Sym, hi32, lo32

if TYPE_CHECKING:
  from hcq.signal import Signal

SDMA_MAJORS = (4, 6, 7)     # the SDMA IP versions whose packets this builds: 4.4 (gfx9.4.3), 6.0 (gfx11), 7.0 (gfx12)
COPY_LINEAR_MAX = 1 << 22   # bytes per COPY_LINEAR: its count field holds bytes - 1 in 22 bits
POLL_GEQ = 5                 # POLL_REGMEM compare function: memory >= value


class AMDCopyQueue(SplitWaits, DwordQueue):
  """SDMA packets as dwords in `self._q`; a symbolic value may fill a whole dword (addresses, data) as a patch slot.
  `sdma_major`: the engine's SDMA IP major version (4 on gfx9.4.3, 6 on gfx11, 7 on gfx12)."""

  def __init__(self, sdma_major: int = 6):
    super().__init__()
    if sdma_major not in SDMA_MAJORS: raise ValueError(f"SDMA {sdma_major}.x; this driver builds SDMA 4.4, 6.0 and 7.0 packets")
    self.sdma_major = sdma_major

  def packet(self, name: str, **fields: "int | Sym") -> "AMDCopyQueue":
    """Append packet `name` with its fields; `op`/`sub_op` come from the packet's own name."""
    pkt = sdma_packets()[name]
    plain = {k: v for k, v in fields.items() if not isinstance(v, Sym)}
    words = pkt.build(**plain)
    start = len(self._q)
    self._q.extend(words)
    for k, v in fields.items():
      if not isinstance(v, Sym): continue
      f = pkt.fields[k]
      if f.shift or f.mask != 0xffffffff: raise ValueError(f"SDMA {name}.{k} shares its dword with other fields: it cannot be symbolic")
      self._put(self._q, start + f.dword, v)
    return self

  def copy(self, dest, src, nbytes: int) -> "AMDCopyQueue":
    """COPY_LINEAR in chunks of at most 4 MiB."""
    if isinstance(nbytes, Sym): raise ValueError("an SDMA copy's size must be known when the queue is built")
    dest, src, nbytes = copy_args(dest, src, nbytes)
    for off in range(0, nbytes, COPY_LINEAR_MAX):
      n = min(COPY_LINEAR_MAX, nbytes - off)
      s, d = src + off, dest + off
      self.packet("COPY_LINEAR", op=sdma.SDMA_OP_COPY, sub_op=sdma.SDMA_SUBOP_COPY_LINEAR, count=n - 1, cpv=int(self.sdma_major >= 7),
                  src_addr_31_0=lo32(s), src_addr_63_32=hi32(s), dst_addr_31_0=lo32(d), dst_addr_63_32=hi32(d))
      if self.sdma_major >= 7: self._q.append(0)  # the compression dword: no DCC on either side
    return self

  def wait(self, signal: "Signal", value) -> "AMDCopyQueue":
    """Wait until the signal's 64-bit value is >= `value`: two 32-bit POLL_REGMEMs, high word then low word (SDMA before
    gfx12.5 has no 64-bit poll; the precondition that makes this exact: hcq.drivers.amd.signal_halves)."""
    self.split_wait(signal, value, lambda word, ref: self.packet("POLL_REGMEM", op=sdma.SDMA_OP_POLL_REGMEM, func=POLL_GEQ, mem_poll=1,
                    addr_31_0=lo32(word), addr_63_32=hi32(word), value=ref, mask=0xffffffff, interval=0x04, retry_count=0xfff))
    return self

  def signal(self, signal: "Signal", value) -> "AMDCopyQueue":
    """Two 32-bit FENCE writes, low half first (a reader never sees more than the value: signal_halves), then a TRAP for its event."""
    self.split_signal(signal, value)  # the engine runs its packets in order: a later wait comes after this write
    for addr, half in signal_halves(signal.value_addr, value):
      self.packet("FENCE", op=sdma.SDMA_OP_FENCE, mtype=3 if self.sdma_major >= 6 else 0, addr_31_0=lo32(addr), addr_63_32=hi32(addr), data=half)
    event = getattr(signal, "event_id", None)
    if event: self.packet("TRAP", op=sdma.SDMA_OP_TRAP, int_context=event)
    return self

  def timestamp(self, signal: "Signal") -> "AMDCopyQueue":
    addr = signal.timestamp_addr
    if isinstance(addr, int) and addr % 8: raise ValueError(f"SDMA timestamps need an 8-byte aligned address, got {addr:#x}")
    return self.packet("TIMESTAMP_GET_GLOBAL", op=sdma.SDMA_OP_TIMESTAMP, sub_op=sdma.SDMA_SUBOP_TIMESTAMP_GET_GLOBAL,
                       write_addr_31_3=(addr & 0xffffffff) >> 3, write_addr_63_32=addr >> 32)

  def memory_barrier(self) -> "AMDCopyQueue":
    return self  # SDMA packets complete in order and FENCE writes are posted after the copies before them

  def _submit(self, device) -> None:
    device.submit_sdma(self)
