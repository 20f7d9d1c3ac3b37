"""Reusable work arrays for the hot paths: a temporary that never leaves its function is taken from here instead of
allocated per instruction (a batch's 65,536 lanes make every temporary half a megabyte of fresh memory)."""
from __future__ import annotations
import threading

import numpy as np

_local = threading.local()   # one set per thread: launches on two threads must not share temporaries


def scratch(slot: str, n: int, dtype) -> np.ndarray:
  """A work array of n elements of dtype for `slot`; its contents are garbage and the next call for the slot reuses it."""
  bufs = _local.__dict__.setdefault("bufs", {})
  a = bufs.get((slot, dtype))
  if a is None or a.size < n: a = bufs[(slot, dtype)] = np.empty(n, dtype)
  return a[:n]
