"""Tensor dtypes: names, numpy mapping, LLVM types and numpy's type-promotion rules (plus bfloat16)."""
from __future__ import annotations
from dataclasses import dataclass
import numpy as np


@dataclass(frozen=True)
class DType:
  """One element type. `kind` is 'f' (float), 'i' (signed), 'u' (unsigned) or 'b' (bool)."""
  name: str
  itemsize: int
  kind: str
  llvm: str  # LLVM IR scalar type in registers (bool: i1, i8 in memory; bfloat16: float rounded to bf16, i16 in memory)

  @property
  def is_float(self) -> bool: return self.kind == "f"
  @property
  def is_int(self) -> bool: return self.kind in "iu"
  @property
  def is_unsigned(self) -> bool: return self.kind == "u"
  @property
  def bits(self) -> int: return 1 if self.kind == "b" else self.itemsize * 8
  @property
  def llvm_mem(self) -> str:
    """The LLVM type used in memory (bool is stored as one byte, like numpy)."""
    return "i8" if self.kind == "b" else ("i16" if self.name == "bfloat16" else self.llvm)
  @property
  def np(self) -> np.dtype:
    """The numpy dtype that stores this type (bfloat16 has none: it is stored as uint16)."""
    return np.dtype("uint16") if self.name == "bfloat16" else np.dtype(self.name)
  def __repr__(self) -> str: return f"dtypes.{self.name}"


class dtypes:
  """The dtypes the tensor compiler knows."""
  bool = DType("bool", 1, "b", "i1")
  int8 = DType("int8", 1, "i", "i8")
  int16 = DType("int16", 2, "i", "i16")
  int32 = DType("int32", 4, "i", "i32")
  int64 = DType("int64", 8, "i", "i64")
  uint8 = DType("uint8", 1, "u", "i8")
  uint16 = DType("uint16", 2, "u", "i16")
  uint32 = DType("uint32", 4, "u", "i32")
  uint64 = DType("uint64", 8, "u", "i64")
  float16 = DType("float16", 2, "f", "half")
  # bfloat16 computes in float registers, rounded to bf16 after each op: LLVM's own bfloat needs compiler-rt
  # helpers (__truncsfbf2) on CPUs without AVX512-BF16, which a JIT in a Python process cannot count on
  bfloat16 = DType("bfloat16", 2, "f", "float")
  float32 = DType("float32", 4, "f", "float")
  float64 = DType("float64", 8, "f", "double")
  all: tuple[DType, ...] = ()


dtypes.all = (dtypes.bool, dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.uint8, dtypes.uint16,
              dtypes.uint32, dtypes.uint64, dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)
BY_NAME: dict[str, DType] = {d.name: d for d in dtypes.all}
ALIASES = {"f16": "float16", "f32": "float32", "f64": "float64", "bf16": "bfloat16", "half": "float16",
           "float": "float32", "double": "float64", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
           "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64", "bool_": "bool"}


def to_dtype(x) -> DType:
  """A DType from a DType, a numpy dtype or scalar type (`np.int32`), or a name (`"int32"`, `"bf16"`)."""
  if isinstance(x, DType): return x
  if isinstance(x, str):
    name = ALIASES.get(x, x)
    if name in BY_NAME: return BY_NAME[name]
  if x is bool: return dtypes.bool
  if x is int: return dtypes.int64
  if x is float: return dtypes.float64
  try:
    d = np.dtype(x)
  except TypeError:
    d = None
  if d is not None and d.name in BY_NAME: return BY_NAME[d.name]
  raise TypeError(f"unknown dtype {x!r}: use one of {', '.join(BY_NAME)} (or a numpy dtype of those)")


def result_type(*args) -> DType:
  """numpy's promotion (NEP 50: Python scalars are weak) over DTypes and Python scalars; bfloat16 acts like float16
  against integers and promotes to float32 against float16."""
  dts = [a for a in args if isinstance(a, DType)]
  scalars = [a for a in args if not isinstance(a, DType)]
  has_bf16 = any(d == dtypes.bfloat16 for d in dts)
  if has_bf16:
    others = [d for d in dts if d != dtypes.bfloat16]
    if any(d == dtypes.float16 for d in others): others = [dtypes.float32 if d == dtypes.float16 else d for d in others]
    r = to_dtype(np.result_type(*[np.float16] + [d.np for d in others], *scalars))
    return dtypes.bfloat16 if r == dtypes.float16 else r
  return to_dtype(np.result_type(*[d.np for d in dts], *scalars))


def sum_dtype(d: DType) -> DType:
  """numpy's accumulator type for sum/prod: small ints and bool go to the platform 64-bit int."""
  if d.kind == "b" or (d.kind == "i" and d.itemsize < 8): return dtypes.int64
  if d.kind == "u" and d.itemsize < 8: return dtypes.uint64
  return d


def least_float(d: DType) -> DType:
  """The float type numpy computes transcendental functions of `d` in (ints and bool go to float64, like numpy)."""
  if d.is_float: return d
  return {1: dtypes.float16, 2: dtypes.float32}.get(d.itemsize, dtypes.float64) if d.kind != "b" else dtypes.float16


def bf16_to_f32(u16: np.ndarray) -> np.ndarray:
  """bfloat16 bits (uint16) → float32 values."""
  return (u16.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(f: np.ndarray) -> np.ndarray:
  """float32 values → bfloat16 bits (uint16), rounding to nearest even; NaN stays NaN."""
  f = np.array(f, dtype=np.float32)  # a copy that keeps 0-d shapes (ascontiguousarray makes them 1-d)
  u = f.view(np.uint32)
  rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
  return np.where(np.isnan(f), np.uint16(0x7FC0), rounded).astype(np.uint16)
