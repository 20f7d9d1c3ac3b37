"""Warp-level instructions: shfl.sync, vote.sync, match.sync, redux.sync, activemask (PTX ISA 9.7.9.6-9.7.9.8,
9.7.12.11)."""
from __future__ import annotations
from typing import TYPE_CHECKING

import numpy as np

from .ops_common import mods_type, op
from .parser import PredPair
from .types import VALUE_DTYPE, is_signed

if TYPE_CHECKING: from .executor import Batch, Executor  # noqa: F401


# --- warp-level ---------------------------------------------------------------------------------------------------
def member(b: Batch, ex, ins, mask_arg, m) -> np.ndarray:
  """Threads taking part: active (m) and named in the membermask."""
  mm = np.broadcast_to(ex.rd(b, mask_arg, "u32"), (b.T,)).astype(np.uint64)
  lane = (b.local_tid % 32).astype(np.uint64)
  inmask = ((mm >> lane) & np.uint64(1)) == 1
  return inmask if m is None else inmask & m


def warp_reduce(b: Batch, values: np.ndarray, part: np.ndarray, ufunc, identity):
  W = (b.bs + 31) // 32
  pad = np.full((b.nblk, W * 32), identity, dtype=values.dtype)
  pad[:, :b.bs] = np.where(part, values, identity).reshape(b.nblk, b.bs)
  r = ufunc.reduce(pad.reshape(b.nblk, W, 32), axis=2)
  return np.repeat(r.reshape(b.nblk, W), 32, axis=1)[:, :b.bs].reshape(-1)


@op("shfl")
def _shfl(ex, b, ins, m):
  """shfl.sync (PTX 9.7.9.6): minLane = lane & c[12:8], maxLane = minLane | (c[4:0] & ~c[12:8]); a source outside
  [minLane, maxLane] (or past the warp) yields the thread's own value and a false predicate."""
  mode = next(x for x in ins.mods if x in ("up", "down", "bfly", "idx"))
  dst = ins.args[0]
  pdst = dst.q if isinstance(dst, PredPair) else None
  dst = dst.p if isinstance(dst, PredPair) else dst
  a = np.broadcast_to(ex.rd(b, ins.args[1], "b32"), (b.T,))
  bv = np.broadcast_to(ex.rd(b, ins.args[2], "u32"), (b.T,)).astype(np.int64)
  c = np.broadcast_to(ex.rd(b, ins.args[3], "u32"), (b.T,)).astype(np.int64)
  lane = b.local_tid % 32
  seg = (c >> 8) & 31
  minl = lane & seg
  maxl = minl | (c & 31 & ~seg)
  if mode == "up": j, ok = lane - bv, lane - bv >= maxl
  elif mode == "down": j, ok = lane + bv, lane + bv <= maxl
  elif mode == "bfly": j, ok = lane ^ bv, (lane ^ bv) <= maxl
  else:
    j = minl | (bv & 31 & ~seg)
    ok = j <= maxl
  warp_base = b.local_tid - lane
  ok = ok & (warp_base + j < b.bs) & (j >= 0)
  src = np.where(ok, b.block_of * b.bs + warp_base + j, b.thread_index)
  ex.wr(b, dst, a[src], "b32", m)
  if pdst is not None: ex.wr(b, pdst, ok, "pred", m)


@op("vote")
def _vote(ex, b, ins, m):
  mode = next(x for x in ins.mods if x in ("all", "any", "uni", "ballot"))
  sync = "sync" in ins.mods
  part = member(b, ex, ins, ins.args[-1], m) if sync else (np.ones(b.T, bool) if m is None else m)
  p = np.broadcast_to(ex.rd(b, ins.args[1], "pred"), (b.T,))
  if mode == "ballot":
    bits = np.where(p & part, np.uint32(1) << (b.local_tid % 32).astype(np.uint32), np.uint32(0))
    ex.wr(b, ins.args[0], warp_reduce(b, bits.astype(np.uint32), part, np.bitwise_or, np.uint32(0)), "b32", m)
    return
  anyv = warp_reduce(b, p & part, part, np.logical_or, False)
  allv = warp_reduce(b, p | ~part, part, np.logical_and, True)
  r = {"all": allv, "any": anyv, "uni": allv | ~anyv}[mode]
  ex.wr(b, ins.args[0], r, "pred", m)


@op("activemask")
def _activemask(ex, b, ins, m):
  part = np.ones(b.T, bool) if m is None else m
  bits = np.where(part, np.uint32(1) << (b.local_tid % 32).astype(np.uint32), np.uint32(0))
  ex.wr(b, ins.args[0], warp_reduce(b, bits, part, np.bitwise_or, np.uint32(0)), "b32", m)


@op("match")
def _match(ex, b, ins, m):
  """match.any/all.sync (PTX 9.7.9.8): the lanes (of the member mask) holding the same value; .all gives the member
  mask when every lane agrees, else 0, and sets the predicate."""
  t = mods_type(ins)
  dst = ins.args[0]
  pdst = dst.q if isinstance(dst, PredPair) else None
  dst = dst.p if isinstance(dst, PredPair) else dst
  part = member(b, ex, ins, ins.args[2], m)
  v = np.broadcast_to(ex.rd(b, ins.args[1], t), (b.T,)).astype(np.uint64)
  W = (b.bs + 31) // 32
  pv = np.zeros((b.nblk, W * 32), np.uint64)
  pp = np.zeros((b.nblk, W * 32), bool)
  pv[:, :b.bs], pp[:, :b.bs] = v.reshape(b.nblk, -1), part.reshape(b.nblk, -1)
  pv, pp = pv.reshape(-1, 32), pp.reshape(-1, 32)
  same = (pv[:, :, None] == pv[:, None, :]) & pp[:, None, :] & pp[:, :, None]
  bits = (same * (np.uint32(1) << np.arange(32, dtype=np.uint32))[None, None, :]).sum(2).astype(np.uint32)
  if "all" in ins.mods:
    allm = (pp * (np.uint32(1) << np.arange(32, dtype=np.uint32))).sum(1).astype(np.uint32)
    agree = (bits == allm[:, None])
    res = np.where(agree, allm[:, None], np.uint32(0))
    r = res.reshape(b.nblk, -1)[:, :b.bs].reshape(-1)
    if pdst is not None: ex.wr(b, pdst, agree.reshape(b.nblk, -1)[:, :b.bs].reshape(-1), "pred", m)
  else: r = bits.reshape(b.nblk, -1)[:, :b.bs].reshape(-1)
  ex.wr(b, dst, r, "b32", m)


@op("redux")
def _redux(ex, b, ins, m):
  t = mods_type(ins)
  o = next(x for x in ins.mods if x in ("add", "min", "max", "and", "or", "xor"))
  part = member(b, ex, ins, ins.args[2], m)
  v = np.broadcast_to(ex.rd(b, ins.args[1], t), (b.T,))
  dt = VALUE_DTYPE[t]
  uf = {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[o]
  ident = {"add": 0, "min": np.iinfo(dt).max, "max": np.iinfo(dt).min, "and": np.iinfo(dt).max if not is_signed(t) else -1,
           "or": 0, "xor": 0}[o]
  with np.errstate(all="ignore"):
    ex.wr(b, ins.args[0], warp_reduce(b, v.astype(dt), part, uf, dt(ident)), t, m)

