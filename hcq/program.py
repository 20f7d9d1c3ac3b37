"""Programs: a loaded kernel, its argument layout, and a launch that writes kernargs into the device's ring.

The launch path: `prg(*bufs, global_size=, local_size=, vals=())` checks the dimensions (launch_dims) and packs live
buffers' addresses and the values, each converted exactly to its declared kind or refused (pack_value, the one packer of
every launch path), at the offsets the code object's metadata gives (natural alignment without metadata), writes them
into the kernarg ring, and records wait(timeline) -> timestamp -> exec -> timestamp -> signal(timeline) on a
compute queue. With wait=True it returns the GPU seconds between the two timestamps.
"""
from __future__ import annotations
import functools
import numbers
import operator
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, Sequence

from hcq.errors import ProgramArgumentError

if TYPE_CHECKING:
  from hcq.buffer import Buffer
  from hcq.device import Device

# value kinds -> struct format; "buffer" arguments are 64-bit device addresses
_FORMATS = {"buffer": "Q", "i8": "b", "u8": "B", "i16": "h", "u16": "H", "i32": "i", "u32": "I", "i64": "q", "u64": "Q",
            "f16": "e", "f32": "f", "f64": "d", "bool": "?"}
# integer kinds -> (smallest, largest) value
_INT_RANGES = {k: (-(1 << 8 * struct.calcsize(f) - 1), (1 << 8 * struct.calcsize(f) - 1) - 1) if k[0] == "i"
               else (0, (1 << 8 * struct.calcsize(f)) - 1) for k, f in _FORMATS.items() if k[0] in "iu"}
# float kinds -> (largest finite, the largest magnitude that rounds to zero): a finite value past the one or a nonzero one
# below the other would change into inf or 0 and is refused; nan and inf pass as they are
_FLOAT_LIMITS = {"f16": (65504.0, 2.0 ** -25), "f32": (3.4028234663852886e38, 2.0 ** -150), "f64": (1.7976931348623157e308, 0.0)}
# by-value arguments known only by their size, "b8" to "b64" (metadata without a type name, e.g. HIP's): an int is packed
# signed when negative and unsigned otherwise, a float as the float of that width; bytes of the exact size pack as they are.
# Other widths ("b96", "b128": vectors and structs) take only bytes.
_UNTYPED = {"b8": ("i8", "u8", None), "b16": ("i16", "u16", "f16"), "b32": ("i32", "u32", "f32"), "b64": ("i64", "u64", "f64")}
# clang's .type_name for by-value arguments (OpenCL C spellings) -> value kind; other names (typedefs, vectors, structs)
# leave the argument known only by its size
TYPE_NAMES = {"char": "i8", "signed char": "i8", "uchar": "u8", "unsigned char": "u8", "short": "i16", "ushort": "u16",
              "unsigned short": "u16", "int": "i32", "uint": "u32", "unsigned int": "u32", "long": "i64", "ulong": "u64",
              "unsigned long": "u64", "half": "f16", "float": "f32", "double": "f64", "bool": "bool"}
_PACK = {k: struct.Struct("<" + f).pack_into for k, f in _FORMATS.items()}
# grid and workgroup sizes are 32-bit per dimension in the dispatch (HSA AQL grid_size/workgroup_size, PM4 DISPATCH_DIRECT
# DIM_X/Y/Z, the CPU kernel's uint32 ids)
DIM_LIMIT = (1 << 32) - 1


def kind_size(kind: str) -> int:
  """Bytes an argument of `kind` takes: a value kind, "buffer", or "bN" (N bits known only by size); ValueError otherwise."""
  if kind in _FORMATS: return struct.calcsize(_FORMATS[kind])
  if kind[:1] == "b" and kind[1:].isdigit() and int(kind[1:]) > 0 and int(kind[1:]) % 8 == 0: return int(kind[1:]) // 8
  raise ValueError(f"unknown argument kind {kind!r}; valid: {', '.join(_FORMATS)}, or bN (N bits of unknown type, N a multiple of 8)")


def by_value_kind(size: int, type_name: str | None = None) -> str:
  """The kind of a by-value argument from code object metadata: its .type_name's when that is a scalar type of `size`
  bytes, else "bN" (known only by size)."""
  kind = TYPE_NAMES.get((type_name or "").strip())
  return kind if kind is not None and kind_size(kind) == size else f"b{8 * size}"


@dataclass(frozen=True)
class KernelArg:
  """One kernel argument: its name, where it sits in the kernarg segment, and what it holds."""
  name: str
  offset: int
  kind: str  # "buffer", a value kind (i8..u64, f16, f32, f64, bool), or "bN": N bits of unknown type

  @property
  def size(self) -> int:
    return kind_size(self.kind)


def natural_layout(kinds: Sequence[str], names: Sequence[str] | None = None) -> list[KernelArg]:
  """Arguments laid out one after another at their natural alignment (what a compiler does without telling us)."""
  out, offset = [], 0
  for i, kind in enumerate(kinds):
    size = kind_size(kind)
    align = size if size in (1, 2, 4, 8) else 8
    offset = (offset + align - 1) // align * align
    out.append(KernelArg(names[i] if names else f"arg{i}", offset, kind))
    offset += size
  return out


def metadata_layout(kernel: Any) -> tuple[list[KernelArg], list[tuple[str, int, int]]]:
  """The explicit arguments of a code object's kernel (hcq.asm.codeobject.Kernel): buffers and by-value ones, typed by
  clang's .type_name where the metadata has it; and its hidden ones as (value kind, offset, size)."""
  raw = kernel.metadata.get(".args")
  type_names = [a.get(".type_name") if isinstance(a, dict) else None for a in raw] if isinstance(raw, list) else []
  explicit, hidden = [], []
  for i, a in enumerate(kernel.args):
    type_name = type_names[i] if i < len(type_names) and isinstance(type_names[i], str) else None
    if a.value_kind == "global_buffer": explicit.append(KernelArg(a.name, a.offset, "buffer"))
    elif a.value_kind == "by_value": explicit.append(KernelArg(a.name, a.offset, by_value_kind(a.size, type_name)))
    elif a.value_kind.startswith("hidden_"): hidden.append((a.value_kind, a.offset, a.size))
    else: raise ProgramArgumentError(f"kernel argument {a.name} of kind {a.value_kind} is not supported; supported: global_buffer, "
                                     "by_value, hidden_*")
  return explicit, hidden


def workgroup_limits(kernel: Any) -> tuple[int, tuple[int, int, int] | None]:
  """(most threads per workgroup, the exact workgroup size or None) of a code object's kernel: its metadata's
  .max_flat_workgroup_size (1024, the hardware's limit, without one) and .reqd_workgroup_size."""
  m, r = kernel.metadata.get(".max_flat_workgroup_size"), kernel.metadata.get(".reqd_workgroup_size")
  most = m if type(m) is int and 1 <= m <= 1024 else 1024
  required = tuple(r) if isinstance(r, list) and len(r) == 3 and all(type(x) is int and x >= 1 for x in r) else None
  return most, required


def _is_bool(v: Any) -> bool:
  return isinstance(v, bool) or type(v).__module__ == "numpy" and type(v).__name__ in ("bool", "bool_")  # numpy 2 and 1


def _as_int(v: Any) -> int | None:
  """`v` as the integer it equals (Python or numpy ints; floats with an integral value), else None. Bools are not ints here."""
  if type(v) is int: return v
  if _is_bool(v): return None
  if isinstance(v, numbers.Integral): return int(v)
  if isinstance(v, numbers.Real):
    f = float(v)
    return int(f) if f.is_integer() else None
  return None


def _as_float(v: Any) -> float | None:
  """`v` as a Python float (Python or numpy ints and floats), else None; ints past float range are None."""
  if type(v) is float: return v
  if _is_bool(v) or not isinstance(v, numbers.Real): return None
  try:
    return float(v)
  except OverflowError:
    return None


def pack_value(name: str, arg: KernelArg, v: Any, out: bytearray) -> None:
  """Write by-value argument `arg` of kernel `name` into `out` at its offset, converted to its kind; ProgramArgumentError,
  naming the argument, its kind and the value, when `v` is not of that kind or would change (2.5 into an int, 2**32+4 into
  u32, 1e39 into f32). Ints and floats convert to a float kind with round-to-nearest, as a C assignment does."""
  kind = arg.kind
  if kind in _INT_RANGES:
    x = v if type(v) is int else _as_int(v)
    if x is None:
      _refuse(name, arg, f"cannot take {v!r}: " + ("not an integer" if _as_float(v) is not None else f"a {type(v).__name__}, not an integer"))
    lo, hi = _INT_RANGES[kind]
    if not lo <= x <= hi: _refuse(name, arg, f"cannot hold {v!r}: valid {lo}..{hi}")
    _PACK[kind](out, arg.offset, x)
  elif kind in _FLOAT_LIMITS:
    x = v if type(v) is float else _as_float(v)
    if x is None and _as_int(v) is not None: _refuse(name, arg, f"cannot hold {v!r}: past every float's range")
    if x is None: _refuse(name, arg, f"cannot take {type(v).__name__} {v!r}: valid are ints and floats")
    _pack_float(name, arg, kind, x, v, out)
  elif kind == "bool":
    if not (_is_bool(v) or _as_int(v) in (0, 1)):
      _refuse(name, arg, f"cannot take {type(v).__name__} {v!r}: valid are True, False, 0 and 1")
    _PACK[kind](out, arg.offset, bool(v))
  else:
    _pack_untyped(name, arg, v, out)


def _refuse(name: str, arg: KernelArg, why: str) -> NoReturn:
  kind = arg.kind if arg.kind in _FORMATS else f"{arg.kind}: {arg.size} bytes of unknown type"
  raise ProgramArgumentError(f"{name}: argument {arg.name} ({kind}) {why}")


def _pack_float(name: str, arg: KernelArg, kind: str, x: float, v: Any, out: bytearray) -> None:
  largest, to_zero = _FLOAT_LIMITS[kind]
  if x != 0.0 and abs(x) <= to_zero: _refuse(name, arg, f"cannot hold {v!r}: it would round to 0")
  try:
    _PACK[kind](out, arg.offset, x)
  except (OverflowError, struct.error):
    _refuse(name, arg, f"cannot hold {v!r}: the largest finite value is {largest!r}")


def _pack_untyped(name: str, arg: KernelArg, v: Any, out: bytearray) -> None:
  """An argument known only by its size: packed by the value's own type (see _UNTYPED)."""
  size = arg.size
  if isinstance(v, (bytes, bytearray, memoryview)):
    raw = bytes(v)
    if len(raw) != size: _refuse(name, arg, f"takes {size} bytes, got {len(raw)}")
    out[arg.offset:arg.offset + size] = raw
    return
  signed, unsigned, flt = _UNTYPED.get(arg.kind, (None, None, None))
  if signed is None: _refuse(name, arg, f"takes bytes of exactly that size, got {type(v).__name__} {v!r}")
  if type(v) is float or isinstance(v, numbers.Real) and not isinstance(v, numbers.Integral):
    if flt is None: _refuse(name, arg, f"cannot take float {v!r}: there is no {size}-byte float")
    return _pack_float(name, arg, flt, float(v), v, out)
  x = _as_int(v)
  if x is None: _refuse(name, arg, f"cannot take {type(v).__name__} {v!r}: valid are ints, floats and {size} bytes")
  lo, hi = _INT_RANGES[signed][0], _INT_RANGES[unsigned][1]
  if not lo <= x <= hi: _refuse(name, arg, f"cannot hold {v!r}: valid {lo}..{hi} (signed or unsigned)")
  _PACK[signed if x < 0 else unsigned](out, arg.offset, x)


def pack_kernargs(name: str, layout: Sequence[KernelArg], bufs: Sequence["Buffer"], vals: Sequence[Any], size: int,
                  device: "Device | None" = None, template: bytes | None = None) -> bytearray:
  """The kernarg bytes for one launch: `size` bytes, zeros or a copy of `template` (of that size: what a backend puts
  around the arguments), with the arguments packed in; ProgramArgumentError on a wrong count or value (see pack_value),
  on something that is not a live Buffer, or (with `device`) on a buffer of another device, naming the argument."""
  from hcq.buffer import Buffer
  buf_args = [a for a in layout if a.kind == "buffer"]
  val_args = [a for a in layout if a.kind != "buffer"]
  if len(bufs) != len(buf_args) or len(vals) != len(val_args):
    raise ProgramArgumentError(f"{name} takes {len(buf_args)} buffers ({', '.join(a.name for a in buf_args) or 'none'}) and "
                               f"{len(val_args)} values ({', '.join(f'{a.name}: {a.kind}' for a in val_args) or 'none'}); "
                               f"got {len(bufs)} buffers and {len(vals)} values")
  if template is not None and len(template) != size: raise ValueError(f"{name}: a {len(template)}-byte kernarg template for {size} bytes")
  out = bytearray(size) if template is None else bytearray(template)
  for arg, b in zip(buf_args, bufs):
    if not isinstance(b, Buffer): raise ProgramArgumentError(f"{name}: argument {arg.name} needs a Buffer, got {type(b).__name__}")
    if device is not None and b.device is not device:
      raise ProgramArgumentError(f"{name}: argument {arg.name} is {b!r}, not a buffer of {device}; copy it to {device} first")
    if (b._parent or b).freed: raise ProgramArgumentError(f"{name}: argument {arg.name} is {b!r}, which was freed")
    _PACK["buffer"](out, arg.offset, b.addr)
  for arg, v in zip(val_args, vals): pack_value(name, arg, v, out)
  return out


# kinds an ArgStruct packs straight from a value of exactly this Python type (bool is not int here, as in pack_value)
_STRUCT_TYPES = {**{k: int for k in _INT_RANGES}, "f16": float, "f32": float, "f64": float, "bool": bool}


class ArgStruct:
  """A layout's arguments packed by one precompiled struct.Struct: the launch fast path's packer. `pack(bufs, vals)`
  gives the bytes of the kernarg span [start, end) (the gaps between arguments as zeros) for the common case only: live
  buffers of `device` and values of exactly their kind's Python type (int for integer kinds, float for float kinds,
  bool) that the struct takes. For anything else (numpy scalars, 2.0 for an int, a value out of range, a wrong count)
  it gives None and the caller packs with pack_kernargs, which gives the same bytes or refuses with its error: the two
  cannot disagree."""

  def __init__(self, layout: Sequence[KernelArg], device: "Device"):
    from hcq.buffer import Buffer
    ordered = sorted(layout, key=lambda a: a.offset)
    if not ordered or any(a.kind != "buffer" and a.kind not in _STRUCT_TYPES for a in ordered) or \
       any(a.offset + a.size > b.offset for a, b in zip(ordered, ordered[1:])):
      raise ValueError("an ArgStruct takes a non-empty layout of buffers and typed values that do not overlap")
    self.device, self._buffer = device, Buffer
    self.start, self.end = ordered[0].offset, ordered[-1].offset + ordered[-1].size
    fmt, at = "<", self.start
    for a in ordered:
      fmt += f"{a.offset - at}x" * (a.offset > at) + _FORMATS[a.kind]
      at = a.offset + a.size
    self.struct = struct.Struct(fmt)
    bufs, vals = [a for a in layout if a.kind == "buffer"], [a for a in layout if a.kind != "buffer"]
    self._nbufs = len(bufs)
    # the struct's fields in (buffers, values) order: which argument each takes (None: in that order already)
    self._order = None if ordered == bufs + vals else [ordered.index(a) for a in bufs + vals]
    # (exact type, the largest magnitude that rounds to 0 or 0.0) of each value
    self._vals = [(_STRUCT_TYPES[a.kind], _FLOAT_LIMITS.get(a.kind, (0, 0.0))[1]) for a in vals]

  @staticmethod
  def make(layout: Sequence[KernelArg], device: "Device") -> "ArgStruct | None":
    """The ArgStruct of `layout`, or None where it has none (no arguments, or a kind known only by its size)."""
    try:
      return ArgStruct(layout, device)
    except ValueError:
      return None

  def pack(self, bufs: Sequence[Any], vals: Sequence[Any]) -> bytes | None:
    """The bytes of [start, end) for these arguments, or None: pack them with pack_kernargs (see the class)."""
    if len(bufs) != self._nbufs or len(vals) != len(self._vals): return None
    args, buffer, device = [], self._buffer, self.device
    for b in bufs:
      if not isinstance(b, buffer) or b.device is not device or (b._parent or b).freed: return None
      args.append(b.addr)
    for (typ, to_zero), v in zip(self._vals, vals):
      if type(v) is not typ or to_zero and v and -to_zero <= v <= to_zero: return None  # pack_value refuses what rounds to 0
    args += vals
    if self._order is not None:
      fields = [0] * len(args)
      for i, a in zip(self._order, args): fields[i] = a
      args = fields
    try:
      return self.struct.pack(*args)
    except (struct.error, OverflowError):  # out of range: pack_kernargs says so
      return None


def _dim(x: Any) -> int:
  if isinstance(x, bool): raise TypeError("a bool is not a size")
  return operator.index(x)  # Python and numpy ints


def launch_dims(v: "int | Sequence[int]", what: str) -> tuple[int, int, int]:
  """A grid or workgroup size as (x, y, z): an int or 1 to 3 ints (Python or numpy) from 1 to DIM_LIMIT, padded with 1s;
  ProgramArgumentError otherwise."""
  if type(v) is int and 0 < v <= DIM_LIMIT: return (v, 1, 1)  # the common case, on every launch
  try:
    try:
      t = (_dim(v),)
    except TypeError:
      t = tuple(v) if not isinstance(v, (str, bytes)) else ()  # a tuple, list, numpy array, range, ...
    if not 1 <= len(t) <= 3: raise TypeError
    t = tuple([x if type(x) is int else _dim(x) for x in t])
    if min(t) < 1 or max(t) > DIM_LIMIT: raise TypeError
  except TypeError:
    raise ProgramArgumentError(f"{what} must be 1 to 3 ints from 1 to {DIM_LIMIT} (2**32-1, the dispatch's 32-bit size fields), "
                               f"got {v!r}") from None
  return (t + (1, 1))[:3]


def check_workgroup(name: str, gs: tuple[int, int, int], ls: tuple[int, int, int], max_threads: int,
                    required: Sequence[int] | None = None) -> None:
  """A GPU launch's limits beyond launch_dims: at most `max_threads` threads per workgroup (the kernel's
  .max_flat_workgroup_size: code built for fewer computes wrong indices), exactly `required` when the kernel was built for
  one size (.reqd_workgroup_size), and a grid of at most 2**32-1 threads per dimension (HSA AQL grid_size is 32-bit)."""
  n = ls[0] * ls[1] * ls[2]
  if n > max_threads:
    raise ProgramArgumentError(f"{name}: a workgroup of {ls[0]}x{ls[1]}x{ls[2]} = {n} threads exceeds the kernel's limit of {max_threads} "
                               "(its .max_flat_workgroup_size)")
  if required and tuple(required) != ls:
    raise ProgramArgumentError(f"{name}: the kernel was built for workgroups of exactly {tuple(required)} threads "
                               f"(.reqd_workgroup_size), got {ls}")
  for axis, g, l in zip("xyz", gs, ls):
    if g * l > DIM_LIMIT:
      raise ProgramArgumentError(f"{name}: {g} workgroups of {l} threads in {axis} is {g * l} threads; a dispatch holds at most "
                                 f"{DIM_LIMIT} (2**32-1) per dimension")


class Program:
  """A kernel loaded on a device. Backends fill `layout`, `kernarg_size` and the code handle."""

  def __init__(self, device: "Device", name: str, layout: Sequence[KernelArg], kernarg_size: int | None = None):
    self.device, self.name, self.layout = device, name, list(layout)
    self.kernarg_size = kernarg_size if kernarg_size is not None else max((a.offset + a.size for a in self.layout), default=0)

  def __repr__(self) -> str:
    return f"<Program {self.name} on {self.device}: {', '.join(f'{a.name}: {a.kind}' for a in self.layout) or 'no arguments'}>"

  def place_kernargs(self, kernargs: bytes | bytearray, timeline_value: int) -> int:
    """Put one launch's kernargs where the GPU reads them (the device's kernarg ring); returns their address."""
    return self.device.kernargs.write(kernargs, timeline_value)

  @functools.cached_property
  def _arg_struct(self) -> ArgStruct | None:
    """The launch fast path's packer where the arguments are the whole kernarg block (the CPU's), else None."""
    st = ArgStruct.make(self.layout, self.device)
    return st if st is not None and st.start == 0 and st.end == self.kernarg_size else None

  def __call__(self, *bufs: "Buffer", global_size: "int | Sequence[int]" = 1, local_size: "int | Sequence[int]" = 1,
               vals: Sequence[Any] = (), wait: bool = False) -> float | None:
    """Launch over `global_size` workgroups of `local_size` threads; with wait=True, the GPU seconds it took."""
    gs, ls = launch_dims(global_size, "global_size"), launch_dims(local_size, "local_size")
    vals = vals if type(vals) is tuple else tuple(vals)
    st = self._arg_struct
    args = st.pack(bufs, vals) if st is not None else None   # None: what the struct does not take, which pack_kernargs
    if args is None: args = pack_kernargs(self.name, self.layout, bufs, vals, self.kernarg_size, self.device)   # refuses or packs
    return self.device.launch(self, args, gs, ls, wait)
