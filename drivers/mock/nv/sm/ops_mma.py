"""Warp-level matrix multiply-accumulate: mma.sync.aligned.{m16n8k16,m16n8k8}.row.col.f32.{f16,bf16,tf32}.{..}.f32
(PTX ISA 9.7.14.5), the forms compilers emit for f16/bf16/tf32 inputs with f32 accumulators. Each thread holds a
fragment of A (16xK, row-major), B (Kx8, column-major) and C/D (16x8) at the rows and columns the ISA's "Matrix
Fragments for mma.m16n8k16 / mma.m16n8k8" sections give (groupID = laneid >> 2, threadID_in_group = laneid % 4).

Numerics: the products of f16/bf16/tf32 values are exact in f64, the sum is taken in f64 and rounded once to f32 (RN).
The ISA leaves the tensor core's accumulation order and internal precision open, so hardware may differ from this in
the last bits of D; .tf32 operands use their upper 19 bits (sign, exponent, 10 mantissa bits: the low 13 bits are
ignored, the stricter reading; convert with cvt.rna.tf32.f32 first). Refused with a clear fault: other shapes, types,
layouts and integer/f64/sparse forms, and wgmma (Hopper's warpgroup MMA reads A and B from shared memory through
matrix descriptors and runs asynchronously behind wgmma.fence / commit_group / wait_group: a different machine model
the emulated SM does not have).
"""
from __future__ import annotations
from functools import lru_cache

import numpy as np

from .ops_common import Unsupported, op
from .parser import Vec


@lru_cache(maxsize=None)
def layout(shape: str, ab: str):
  """(rows, cols) per lane and element for A, B and C/D: arrays of shape (32, elements)."""
  lane = np.arange(32)[:, None]
  g, t = lane >> 2, lane % 4
  k = int(shape.split("k")[1])
  if ab == "tf32":   # m16n8k8: one element per register
    i = np.arange(4)[None]
    A = (g + 8 * (i & 1), t + 4 * (i >> 1))
    i = np.arange(2)[None]
    B = (t + 4 * i, np.broadcast_to(g, (32, 2)))
  elif k == 16:
    i = np.arange(8)[None]
    A = (g + 8 * ((i >> 1) & 1), t * 2 + (i & 1) + 8 * (i >> 2))
    i = np.arange(4)[None]
    B = (t * 2 + (i & 1) + 8 * (i >> 1), np.broadcast_to(g, (32, 4)))
  else:
    i = np.arange(4)[None]
    A = (g + 8 * (i >> 1), t * 2 + (i & 1))
    i = np.arange(2)[None]
    B = (t * 2 + i, np.broadcast_to(g, (32, 2)))
  i = np.arange(4)[None]
  C = (g + 8 * (i >> 1), t * 2 + (i & 1))
  return tuple(tuple(np.broadcast_arrays(*y)) for y in (A, B, C))


def _elements(regs: list[np.ndarray], ab: str) -> np.ndarray:
  """(T, elements) float64 values of the .b32 fragment registers, low half first for packed f16/bf16."""
  r = np.stack(regs, 1).astype(np.uint32)
  if ab == "tf32": return (r & np.uint32(0xffffe000)).view(np.float32).astype(np.float64)
  halves = np.stack([r & np.uint32(0xffff), r >> np.uint32(16)], 2).reshape(r.shape[0], -1).astype(np.uint16)
  if ab == "f16": return halves.view(np.float16).astype(np.float64)
  return (halves.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)


FORMS = {("m16n8k16", "f16"), ("m16n8k16", "bf16"), ("m16n8k8", "f16"), ("m16n8k8", "bf16"), ("m16n8k8", "tf32")}


@op("mma")
def _mma(ex, b, ins, m):
  shape = next((x for x in ins.mods if x.startswith("m") and "n" in x and "k" in x), None)
  ts = ins.types
  ab = ts[1] if len(ts) == 4 else None
  if not ({"sync", "aligned", "row", "col"} <= set(ins.mods)) or len(ts) != 4 or ts[0] != "f32" or ts[3] != "f32" or \
     ts[1] != ts[2] or (shape, ab) not in FORMS or set(ins.mods) - {"sync", "aligned", "row", "col", shape, *ts}:
    raise Unsupported("this mma form (the emulated SM runs mma.sync.aligned.{m16n8k16,m16n8k8}.row.col.f32.{f16,bf16}."
                      "{f16,bf16}.f32 and mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32)")
  want = (4, 4 if shape == "m16n8k16" or ab == "tf32" else 2, 2 if shape == "m16n8k16" or ab == "tf32" else 1, 4)   # D, A, B, C
  got = tuple(len(a.items) if isinstance(a, Vec) else 0 for a in ins.args[:4])
  if len(ins.args) != 4 or got != want:
    raise Unsupported(f"an mma.{shape}.{ab} with {got} registers in D, A, B, C (the form takes {want})")
  if b.bs % 32: raise Unsupported(f"mma in a block of {b.bs} threads (a partial warp)")
  W = b.T // 32
  if m is not None:
    mw = m.reshape(W, 32)
    if (mw.any(1) & ~mw.all(1)).any(): raise Unsupported("mma.sync.aligned with part of a warp (every thread of the warp must execute it)")
  (ar, ac), (br, bc), (cr, cc) = layout(shape, ab)
  k = int(shape.split("k")[1])
  frag = lambda v, t: _elements([np.broadcast_to(ex.rd(b, r, "b32"), (b.T,)) for r in v.items], t).reshape(W, 32, -1)
  A = np.zeros((W, 16, k))
  A[:, ar.ravel(), ac.ravel()] = frag(ins.args[1], ab).reshape(W, -1)
  B = np.zeros((W, k, 8))
  B[:, br.ravel(), bc.ravel()] = frag(ins.args[2], ab).reshape(W, -1)
  C = np.zeros((W, 16, 8))
  C[:, cr.ravel(), cc.ravel()] = np.stack([np.broadcast_to(ex.rd(b, r, "f32"), (b.T,)).astype(np.float64) for r in ins.args[3].items], 1).reshape(W, -1)
  D = (A @ B + C).astype(np.float32)
  d = D[:, cr, cc].reshape(b.T, 4)
  for i, r in enumerate(ins.args[0].items): ex.wr(b, r, d[:, i], "f32", m)


@op("wgmma")
def _wgmma(ex, b, ins, m):
  raise Unsupported("wgmma (Hopper's asynchronous warpgroup MMA: operands through shared-memory matrix descriptors, "
                    "ordered by wgmma.fence / commit_group / wait_group; the emulated SM has no model of that machine)")
