"""MessagePack, as AMDGPU code object v3+ metadata notes use it (the msgpack spec's formats, both ways)."""
from __future__ import annotations
import struct
from typing import Any

from hcq.errors import HCQError


class MsgpackError(HCQError, ValueError):
  """Bytes that are not one msgpack object this reader takes; the message names the byte offset."""


MAX_DEPTH = 64  # metadata nests a few levels; a deeper document is hostile, not a code object's


def unpack(data: bytes) -> Any:
  """The one object in `data`; MsgpackError (with the byte offset) on truncated, malformed or unsupported input."""
  data = bytes(data)
  value, end = _unpack(data, 0, 0)
  if end != len(data): raise MsgpackError(f"{len(data) - end} bytes after the msgpack object (it ends at byte {end})")
  return value


_FIXED = {0xc0: None, 0xc2: False, 0xc3: True}
_NUMS = {0xca: ">f", 0xcb: ">d", 0xcc: ">B", 0xcd: ">H", 0xce: ">I", 0xcf: ">Q", 0xd0: ">b", 0xd1: ">h", 0xd2: ">i", 0xd3: ">q"}
_LENGTHS = {0xd9: (">B", str), 0xda: (">H", str), 0xdb: (">I", str), 0xc4: (">B", bytes), 0xc5: (">H", bytes), 0xc6: (">I", bytes),
            0xdc: (">H", list), 0xdd: (">I", list), 0xde: (">H", dict), 0xdf: (">I", dict)}


def _unpack(d: bytes, i: int, depth: int) -> tuple[Any, int]:
  if i >= len(d): raise MsgpackError(f"truncated msgpack: an object expected at byte {i}, the data ends there")
  b = d[i]
  if b <= 0x7f: return b, i + 1
  if b >= 0xe0: return b - 0x100, i + 1
  if 0xa0 <= b <= 0xbf: return _items(d, i, i + 1, b & 0x1f, str, depth)
  if 0x90 <= b <= 0x9f: return _items(d, i, i + 1, b & 0x0f, list, depth)
  if 0x80 <= b <= 0x8f: return _items(d, i, i + 1, b & 0x0f, dict, depth)
  if b in _FIXED: return _FIXED[b], i + 1
  if b in _NUMS:
    fmt = _NUMS[b]
    n = struct.calcsize(fmt)
    if i + 1 + n > len(d): raise MsgpackError(f"truncated msgpack number at byte {i}: {n} bytes needed, {len(d) - i - 1} left")
    return struct.unpack_from(fmt, d, i + 1)[0], i + 1 + n
  if b in _LENGTHS:
    fmt, kind = _LENGTHS[b]
    n = struct.calcsize(fmt)
    if i + 1 + n > len(d): raise MsgpackError(f"truncated msgpack length at byte {i}")
    return _items(d, i, i + 1 + n, struct.unpack_from(fmt, d, i + 1)[0], kind, depth)
  raise MsgpackError(f"msgpack format byte {b:#04x} at byte {i} is not supported (ext and timestamp types are not metadata)")


def _items(d: bytes, at: int, i: int, n: int, kind: type, depth: int) -> tuple[Any, int]:
  """`n` bytes (str, bytes) or items (list) or key/value pairs (dict) starting at `i`, for the object at `at`."""
  if kind in (str, bytes):
    if i + n > len(d): raise MsgpackError(f"truncated msgpack {kind.__name__} at byte {at}: {n} bytes claimed, {len(d) - i} left")
    raw = d[i:i + n]
    if kind is bytes: return raw, i + n
    try:
      return raw.decode("utf-8"), i + n
    except UnicodeDecodeError as e:
      raise MsgpackError(f"msgpack string at byte {at} is not UTF-8 (byte {i + e.start})") from None
  # every item takes at least one byte: a count past the data is a lie, refused before looping over it
  if n * (1 if kind is list else 2) > len(d) - i:
    raise MsgpackError(f"truncated msgpack {'array' if kind is list else 'map'} at byte {at}: {n} items claimed, {len(d) - i} bytes left")
  if depth >= MAX_DEPTH: raise MsgpackError(f"msgpack nested deeper than {MAX_DEPTH} levels at byte {at}")
  if kind is list:
    out = []
    for _ in range(n):
      v, i = _unpack(d, i, depth + 1)
      out.append(v)
    return out, i
  m = {}
  for _ in range(n):
    key_at = i
    k, i = _unpack(d, i, depth + 1)
    v, i = _unpack(d, i, depth + 1)
    if isinstance(k, (list, dict)): raise MsgpackError(f"msgpack map key at byte {key_at} is {'an array' if isinstance(k, list) else 'a map'}, not a value")
    m[k] = v
  return m, i


_UINTS = ((0xcc, ">B"), (0xcd, ">H"), (0xce, ">I"), (0xcf, ">Q"))
_SINTS = ((0xd0, ">b"), (0xd1, ">h"), (0xd2, ">i"), (0xd3, ">q"))
_STR_LEN, _BIN_LEN = ((0xd9, ">B"), (0xda, ">H"), (0xdb, ">I")), ((0xc4, ">B"), (0xc5, ">H"), (0xc6, ">I"))
_ARRAY_LEN, _MAP_LEN = ((0xdc, ">H"), (0xdd, ">I")), ((0xde, ">H"), (0xdf, ">I"))


def _sized(value: int, codes: tuple[tuple[int, str], ...], signed: bool = False) -> bytes:
  """The first (smallest) of `codes` whose format holds `value`, followed by the value."""
  for code, fmt in codes:
    bits = 8 * struct.calcsize(fmt)
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if lo <= value <= hi: return bytes([code]) + struct.pack(fmt, value)
  raise MsgpackError(f"{value} does not fit msgpack")


def pack(obj: Any) -> bytes:
  """The msgpack bytes of dicts, lists, str, bytes, int, float, bool and None (smallest encodings)."""
  if obj is None: return b"\xc0"
  if obj is True: return b"\xc3"
  if obj is False: return b"\xc2"
  if isinstance(obj, int):
    if -32 <= obj <= 0x7f: return struct.pack(">b", obj)  # positive and negative fixint
    return _sized(obj, _UINTS) if obj >= 0 else _sized(obj, _SINTS, signed=True)
  if isinstance(obj, float): return b"\xcb" + struct.pack(">d", obj)
  if isinstance(obj, str):
    raw = obj.encode()
    return (bytes([0xa0 | len(raw)]) if len(raw) < 32 else _sized(len(raw), _STR_LEN)) + raw
  if isinstance(obj, (bytes, bytearray)): return _sized(len(obj), _BIN_LEN) + bytes(obj)
  if isinstance(obj, (list, tuple)): return (bytes([0x90 | len(obj)]) if len(obj) < 16 else _sized(len(obj), _ARRAY_LEN)) + b"".join(map(pack, obj))
  if isinstance(obj, dict):
    head = bytes([0x80 | len(obj)]) if len(obj) < 16 else _sized(len(obj), _MAP_LEN)
    return head + b"".join(pack(k) + pack(v) for k, v in obj.items())
  raise MsgpackError(f"cannot pack {type(obj).__name__}")
