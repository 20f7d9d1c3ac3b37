"""SDMA packet layouts read from the generated sdma_v6_0_0_pkt_open module: one table for building and decoding.

The header defines, for every packet P, dword D and field f, `SDMA_PKT_<P>_<D>_<f>_offset` (the dword),
`_mask` and `_shift`. Packet and dword names are upper case, field names lower case, and every packet's
dword 0 is its HEADER, which is how packet names are told apart from dword names.
"""
from __future__ import annotations
import functools
from dataclasses import dataclass


@dataclass(frozen=True)
class SDMAField:
  dword: int
  shift: int
  mask: int  # unshifted


@dataclass(frozen=True)
class SDMAPacket:
  name: str
  fields: dict[str, SDMAField]  # lower-case field name (prefixed by its dword name where names repeat)
  size: int                     # dwords

  def build(self, **values: int) -> list[int]:
    """The packet's dwords with the named fields set (others 0); ValueError for unknown fields or values that do not fit."""
    out = [0] * self.size
    for name, v in values.items():
      f = self.fields.get(name)
      if f is None: raise ValueError(f"SDMA {self.name} has no field {name!r}; fields: {', '.join(self.fields)}")
      if not 0 <= v <= f.mask: raise ValueError(f"SDMA {self.name}.{name} = {v:#x} does not fit its mask {f.mask:#x}")
      out[f.dword] |= v << f.shift
    return out

  def decode(self, dwords) -> dict[str, int]:
    return {name: (int(dwords[f.dword]) >> f.shift) & f.mask for name, f in self.fields.items()}


@functools.cache
def sdma_packets() -> dict[str, SDMAPacket]:
  """Every SDMA 6.0 packet by name (COPY_LINEAR, FENCE, POLL_REGMEM, TIMESTAMP_GET_GLOBAL, TRAP, ...)."""
  from hcq.autogen.am import sdma_v6_0_0_pkt_open as h
  parts: dict[str, dict[tuple[str, str], int]] = {"_offset": {}, "_mask": {}, "_shift": {}}  # suffix -> (prefix, field) -> value
  for key, value in vars(h).items():
    if not key.startswith("SDMA_PKT_") or not isinstance(value, int): continue
    suffix = next((s for s in parts if key.endswith(s)), None)
    if suffix is None: continue
    stem = key[len("SDMA_PKT_"):-len(suffix)]
    i = next((k for k in range(1, len(stem)) if stem[k].islower() and stem[k - 1] == "_"), None)
    if i is not None: parts[suffix][(stem[:i - 1], stem[i:])] = value  # ("COPY_LINEAR_COUNT", "count")
  names = sorted({p[:-len("_HEADER")] for p, _ in parts["_offset"] if p.endswith("_HEADER")}, key=len, reverse=True)
  packets: dict[str, dict[str, SDMAField]] = {}
  for (prefix, fname), dword in parts["_offset"].items():
    pkt = next((n for n in names if prefix == n + "_HEADER" or prefix.startswith(n + "_")), None)
    if pkt is None: continue
    fields = packets.setdefault(pkt, {})
    key = fname if fname not in fields else f"{prefix[len(pkt) + 1:].lower()}_{fname}"  # a name reused in another dword
    fields[key] = SDMAField(dword, parts["_shift"][(prefix, fname)], parts["_mask"][(prefix, fname)])
  return {n: SDMAPacket(n, f, max(x.dword for x in f.values()) + 1) for n, f in packets.items()}
