"""Programs: a loaded kernel, its argument layout, and a launch that writes kernargs into the device's ring.

The launch path: `prg(*bufs, global_size=, local_size=, vals=())` packs buffer addresses and values at the
offsets the code object's metadata gives (natural alignment without metadata), writes them into the
kernarg ring, and records wait(timeline) -> timestamp -> exec -> timestamp -> signal(timeline) on a
compute queue. With wait=True it returns the GPU seconds between the two timestamps.
"""
from __future__ import annotations
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from hcq.errors import ProgramArgumentError

if TYPE_CHECKING:
  from hcq.buffer import Buffer
  from hcq.device import Device

# value kinds -> struct format; "buffer" arguments are 64-bit device addresses
_FORMATS = {"buffer": "Q", "i8": "b", "u8": "B", "i16": "h", "u16": "H", "i32": "i", "u32": "I", "i64": "q", "u64": "Q",
            "f16": "e", "f32": "f", "f64": "d", "bool": "?"}
# untyped by-value arguments of a width (code object metadata gives only sizes): an int (signed or not) or a float
_RAW = {"b8": ("b", "B", None), "b16": ("h", "H", "e"), "b32": ("i", "I", "f"), "b64": ("q", "Q", "d")}
_FORMATS.update({k: v[1] for k, v in _RAW.items()})


@dataclass(frozen=True)
class KernelArg:
  """One kernel argument: its name, where it sits in the kernarg segment, and what it holds."""
  name: str
  offset: int
  kind: str  # "buffer" or a value kind: i8..u64, f16, f32, f64, bool

  @property
  def size(self) -> int:
    return struct.calcsize(_FORMATS[self.kind])


def natural_layout(kinds: Sequence[str], names: Sequence[str] | None = None) -> list[KernelArg]:
  """Arguments laid out one after another at their natural alignment (what a compiler does without telling us)."""
  out, offset = [], 0
  for i, kind in enumerate(kinds):
    if kind not in _FORMATS: raise ValueError(f"unknown argument kind {kind!r}; valid: {', '.join(_FORMATS)}")
    size = struct.calcsize(_FORMATS[kind])
    offset = (offset + size - 1) // size * size
    out.append(KernelArg(names[i] if names else f"arg{i}", offset, kind))
    offset += size
  return out


def pack_kernargs(name: str, layout: Sequence[KernelArg], bufs: Sequence["Buffer"], vals: Sequence[Any], size: int) -> bytearray:
  """The kernarg bytes for one launch; ProgramArgumentError on a wrong count or type, naming the argument."""
  from hcq.buffer import Buffer
  buf_args = [a for a in layout if a.kind == "buffer"]
  val_args = [a for a in layout if a.kind != "buffer"]
  if len(bufs) != len(buf_args) or len(vals) != len(val_args):
    raise ProgramArgumentError(f"{name} takes {len(buf_args)} buffers ({', '.join(a.name for a in buf_args) or 'none'}) and "
                               f"{len(val_args)} values ({', '.join(f'{a.name}: {a.kind}' for a in val_args) or 'none'}); "
                               f"got {len(bufs)} buffers and {len(vals)} values")
  out = bytearray(size)
  for arg, b in zip(buf_args, bufs):
    if not isinstance(b, Buffer): raise ProgramArgumentError(f"{name}: argument {arg.name} needs a Buffer, got {type(b).__name__}")
    struct.pack_into("<Q", out, arg.offset, b.addr)
  for arg, v in zip(val_args, vals):
    if arg.kind in _RAW:
      signed, unsigned, flt = _RAW[arg.kind]
      fmt = flt if isinstance(v, float) else signed if isinstance(v, int) and v < 0 else unsigned
      if fmt is None or isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ProgramArgumentError(f"{name}: argument {arg.name} is a {arg.size}-byte value, got {type(v).__name__} {v!r}")
      try:
        struct.pack_into("<" + fmt, out, arg.offset, v)
      except (struct.error, OverflowError) as e:
        raise ProgramArgumentError(f"{name}: argument {arg.name} ({arg.size} bytes) cannot hold {v!r}: {e}") from None
      continue
    floating = arg.kind.startswith("f")
    if isinstance(v, bool) and arg.kind != "bool" or not isinstance(v, (int, float) if floating else int):
      raise ProgramArgumentError(f"{name}: argument {arg.name} is {arg.kind}, got {type(v).__name__} {v!r}")
    try:
      struct.pack_into("<" + _FORMATS[arg.kind], out, arg.offset, v)
    except struct.error as e:
      raise ProgramArgumentError(f"{name}: argument {arg.name} ({arg.kind}) cannot hold {v!r}: {e}") from None
  return out


def launch_dims(v: "int | Sequence[int]", what: str) -> tuple[int, int, int]:
  """A grid or workgroup size as (x, y, z): an int or 1 to 3 positive ints, padded with 1s; ProgramArgumentError otherwise."""
  t = (v,) if isinstance(v, int) else tuple(v)
  if not 1 <= len(t) <= 3 or not all(isinstance(x, int) and x >= 1 for x in t):
    raise ProgramArgumentError(f"{what} must be 1 to 3 positive ints, got {v!r}")
  return (t + (1, 1))[:3]


class Program:
  """A kernel loaded on a device. Backends fill `layout`, `kernarg_size` and the code handle."""

  def __init__(self, device: "Device", name: str, layout: Sequence[KernelArg], kernarg_size: int | None = None):
    self.device, self.name, self.layout = device, name, list(layout)
    self.kernarg_size = kernarg_size if kernarg_size is not None else max((a.offset + a.size for a in self.layout), default=0)

  def __repr__(self) -> str:
    return f"<Program {self.name} on {self.device}: {', '.join(f'{a.name}: {a.kind}' for a in self.layout) or 'no arguments'}>"

  def __call__(self, *bufs: "Buffer", global_size: "int | Sequence[int]" = 1, local_size: "int | Sequence[int]" = 1,
               vals: Sequence[Any] = (), wait: bool = False) -> float | None:
    """Launch over `global_size` workgroups of `local_size` threads; with wait=True, the GPU seconds it took."""
    gs, ls = launch_dims(global_size, "global_size"), launch_dims(local_size, "local_size")
    args = pack_kernargs(self.name, self.layout, bufs, tuple(vals), self.kernarg_size)
    return self.device.launch(self, args, gs, ls, wait)
