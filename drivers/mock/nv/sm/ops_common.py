"""The instruction table the executor dispatches on, and what the instruction modules share: operand types,
rounding modifiers, packed f16x2/bf16x2 halves, .ftz/.sat."""
from __future__ import annotations
from typing import Callable

import numpy as np

from . import floats as F
from .parser import Instr

ROUND = ("rn", "rz", "rm", "rp")
IROUND = {"rni": "rn", "rzi": "rz", "rmi": "rm", "rpi": "rp"}


class Unsupported(Exception):
  """An instruction or form the SM does not model; the executor reports it as SMFault("unsupported")."""


OPS: dict[str, Callable] = {}   # opcode -> fn(executor, batch, instr, mask)


def op(*names):
  def deco(f):
    for n in names: OPS[n] = f
    return f
  return deco


def mods_type(ins: Instr) -> str:
  ts = ins.types
  if not ts: raise Unsupported(f"{ins.op} without a type")
  return ts[-1]


def rounding(ins: Instr, default: str = "rn") -> str:
  for r in ROUND:
    if r in ins.mods: return r
  return default


def packed(t: str) -> str | None:
  return {"f16x2": "f16", "bf16x2": "bf16"}.get(t)


def split2(v, half: str):
  u = np.asarray(v).astype(np.uint32)
  lo, hi = (u & np.uint32(0xffff)).astype(np.uint16), (u >> np.uint32(16)).astype(np.uint16)
  return (lo.view(np.float16), hi.view(np.float16)) if half == "f16" else (lo, hi)


def join2(lo, hi, half: str):
  lo, hi = (np.asarray(x).view(np.uint16) if half == "f16" else np.asarray(x, np.uint16) for x in (lo, hi))
  return lo.astype(np.uint32) | (hi.astype(np.uint32) << np.uint32(16))


def lanewise(ex, b, ins, t, m, f, nin):
  """Run f on each half of packed f16x2/bf16x2 operands, or once on scalars."""
  half = packed(t)
  if half is None:
    ex.wr(b, ins.args[0], f(t, *[ex.rd(b, ins.args[1 + i], t) for i in range(nin)]), t, m)
    return
  parts = [split2(ex.rd(b, ins.args[1 + i], "b32"), half) for i in range(nin)]
  lo = f(half, *[p[0] for p in parts])
  hi = f(half, *[p[1] for p in parts])
  ex.wr(b, ins.args[0], join2(lo, hi, half), "b32", m)


def fpost(ins: Instr, t: str, v):
  if "ftz" in ins.mods and t in ("f32", "f16"): v = F.ftz(v, t)
  if "sat" in ins.mods: v = F.saturate(v, t)
  return v


def fpre(ins: Instr, t: str, v):
  return F.ftz(v, t) if "ftz" in ins.mods and t in ("f32", "f16") else v




def relu(r, ft):
  v = F.from_fmt(r, ft)
  return np.where(v < 0, F.to_fmt(np.float64(0), ft), r) if ft != "bf16" else np.where(v < 0, np.uint16(0), r)
