"""CTA barriers (PTX ISA 9.7.13.1 bar/barrier): 16 per block; bar.sync / barrier.sync a[, b] waits, bar.arrive /
barrier.arrive a, b counts the thread in and goes on. Without b every non-exited thread of the block must arrive (exited
threads count as arrived, as on sm_70+); with b the barrier completes when b threads have arrived. b must be a
multiple of the warp size (the ISA's rule; the stricter reading: a thread count that is not is refused, not rounded).
When a barrier completes, its waiting threads go on and its count starts again from zero."""
from __future__ import annotations

import numpy as np

from .ops_common import Unsupported
from .parser import Instr

NBARRIERS = 16


def barrier_kind(ins: Instr) -> str | None:
  """"sync" (every thread), "count" (sync with a thread count), "arrive", or None when ins is no CTA barrier."""
  if ins.op not in ("bar", "barrier") or ins.mods[:1] == ("warp",): return None
  mods = set(ins.mods) - {"aligned", "cta"}
  if mods == {"sync"} and len(ins.args) <= 2: return "count" if len(ins.args) == 2 else "sync"
  if mods == {"arrive"} and len(ins.args) == 2: return "arrive"
  raise Unsupported("this barrier form (only bar.sync / barrier.sync a[, b] and bar.arrive / barrier.arrive a, b are "
                    "modelled; bar.red is not)")


class Barriers:
  """The waiting threads and arrival counts of one batch's blocks."""

  def __init__(self, b):
    self.b = b
    self.waiting = np.zeros(b.T, bool)
    self.wait_id = np.full(b.T, -1, np.int64)
    self.arrived = np.zeros((b.nblk, NBARRIERS), np.int64)
    self.expected = np.zeros((b.nblk, NBARRIERS), np.int64)   # 0: every non-exited thread of the block

  def arrive(self, ex, ins: Instr, kind: str, arr: np.ndarray) -> None:
    """The threads in arr execute barrier ins (kind from barrier_kind)."""
    b = self.b
    ids = np.broadcast_to(ex.rd(b, ins.args[0], "u32"), (b.T,)).astype(np.int64)[arr]
    if ids.size and (ids.max() >= NBARRIERS): raise Unsupported(f"barrier {int(ids.max())} (a block has barriers 0..15)")
    blk = b.block_of[arr]
    if kind in ("count", "arrive"):
      cnt = np.broadcast_to(ex.rd(b, ins.args[1], "u32"), (b.T,)).astype(np.int64)[arr]
      if ((cnt % 32) != 0).any() or (cnt == 0).any():
        raise Unsupported(f"a barrier thread count of {int(cnt[(cnt % 32 != 0) | (cnt == 0)][0])} (it must be a nonzero multiple of the warp size, 32)")
      self.expected[blk, ids] = cnt
    np.add.at(self.arrived, (blk, ids), 1)
    if kind != "arrive":
      self.waiting |= arr
      self.wait_id[arr] = ids

  def release(self, alive) -> np.ndarray | None:
    """The waiting threads whose barrier completed (they are no longer waiting), or None."""
    b = self.b
    al = np.ones(b.T, bool) if alive is None else alive
    done = (self.expected > 0) & (self.arrived >= self.expected)
    for i in np.unique(self.wait_id[self.waiting]):
      if self.expected[:, i].any() and self.expected[:, i].all(): continue
      w = self.waiting & (self.wait_id == i)
      every = ((w | ~al).reshape(b.nblk, b.bs).all(1) & w.reshape(b.nblk, b.bs).any(1)) & (self.expected[:, i] == 0)
      done[:, i] |= every
    if not done.any(): return None
    rel = self.waiting & done[b.block_of, np.maximum(self.wait_id, 0)]
    self.arrived[done] = 0
    self.expected[done] = 0
    self.waiting &= ~rel
    self.wait_id[rel] = -1
    return rel if rel.any() else None
