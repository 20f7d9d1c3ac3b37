"""How PTX's fundamental types map to numpy: the dtype an instruction computes in, and the raw container a register holds."""
from __future__ import annotations
import numpy as np

from .parser import type_bytes

VALUE_DTYPE = {
  "b8": np.uint8, "u8": np.uint8, "s8": np.int8, "b16": np.uint16, "u16": np.uint16, "s16": np.int16,
  "b32": np.uint32, "u32": np.uint32, "s32": np.int32, "b64": np.uint64, "u64": np.uint64, "s64": np.int64,
  "f16": np.float16, "bf16": np.uint16, "f32": np.float32, "f64": np.float64, "f16x2": np.uint32, "bf16x2": np.uint32,
  "pred": np.bool_, "tf32": np.uint32,
}
UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
SINT = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}


def is_signed(t: str) -> bool:
  return t[0] == "s"


def is_float(t: str) -> bool:
  return t in ("f16", "bf16", "f32", "f64")


def storage_dtype(t: str):
  """The container a register of type t lives in: its raw bits, unsigned (a .pred is a bool)."""
  return np.bool_ if t == "pred" else UINT[type_bytes(t)]


def int_limits(t: str) -> tuple[int, int]:
  bits = type_bytes(t) * 8
  return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if is_signed(t) else (0, (1 << bits) - 1)


def as_uint(x, n: int) -> np.ndarray:
  """x's bits as unsigned n-byte words: a view when the width matches, a wrapping conversion otherwise."""
  x = np.asarray(x)
  if x.dtype.itemsize == n and x.dtype != np.bool_: return x.view(UINT[n])
  return x.astype(SINT[x.dtype.itemsize] if x.dtype.kind == "i" else x.dtype).astype(UINT[n])
