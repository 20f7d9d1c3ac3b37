"""Runs one kernel launch: blocks in batches, threads of a batch as numpy lanes, divergence by a per-thread PC.

Scheduling (PTX ISA 3.3 "independent thread scheduling" as sm_70+ implement it, simplified): while every live thread
is at one PC the batch runs converged; after a divergent branch, the threads at the lowest PC run next, so both
sides of an if/else run and the paths meet again at their common successor. bar.sync holds a thread until every
non-exited thread of its block has arrived (exited threads count as arrived, as on sm_70+). Blocks of one launch
are independent (the programming model gives no order between them), so many run in one batch.
"""
from __future__ import annotations
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable

import numpy as np

from . import floats as F
from . import calls, ops_alu, ops_mem, ops_mma, ops_warp  # noqa: F401  (they fill OPS)
from .barriers import Barriers, barrier_kind
from .errors import SMFault
from .fast import compile_kernel
from .memory import Fault, GlobalSpace, WindowSpace, fault_to_sm
from .ops_common import OPS, Unsupported
from .parser import SINK, Addr, Imm, Instr, Kernel, PredPair, Reg, Sym, type_bytes
from .types import SINT, UINT, VALUE_DTYPE, is_float, is_signed, storage_dtype

BATCH_THREADS = 1 << 16   # threads run as one numpy batch: large enough to amortise Python, small enough for the caches


@dataclass
class Launch:
  grid: tuple[int, int, int]
  block: tuple[int, int, int]
  params_va: int
  shared_bytes: int
  local_bytes: int
  variables: dict[str, int] = field(default_factory=dict)   # module .global/.const name -> address (where the loader put it)
  const_bank: tuple[int, int] | None = None                 # (address, bytes) of the bank .const data is read from


def _along(n: int, ax: int) -> np.ndarray:
  """0..n-1 along axis `ax` (x, y or z) of a (z, y, x) triple of axes, size 1 along the other two."""
  return np.arange(n).reshape(tuple(n if 2 - a == ax else 1 for a in range(3)))


class FlatRegs:
  """A batch's registers as T lanes each, for code that reads or writes a whole register itself (the carry flag, call
  frames): a read gives T lanes (a copy where the register is compact), a write is stored compact where it can be."""

  def __init__(self, b: "Batch"):
    self.b = b

  def __contains__(self, name: str) -> bool:
    return name in self.b.compact

  def get(self, name: str, default=None):
    v = self.b.compact.get(name)
    return default if v is None else self.b.flat(v)

  def __getitem__(self, name: str) -> np.ndarray:
    return self.b.flat(self.b.compact[name])

  def __setitem__(self, name: str, v) -> None:
    self.b.compact[name] = self.b.lanes(v)


class Batch:
  """The state of `nblk` blocks (first linear block index `blk0`) running together: T = nblk * block threads.

  A register holds an array of rank 6 over the lanes' `shape` (grid z, y, x for the whole grid, rows, 1, x for whole
  rows of x, else nblk, 1, 1; then block z, y, x), of size 1 along every axis it does not vary on: a value read from
  a parameter is one element, %tid.x one per x, an address from %ctaid.y and %tid.y one per row. numpy's
  broadcasting keeps values compact through element-wise arithmetic; `flat` gives the T lanes the general path uses.
  Lane i of the T is element i of the full shape in C order, so both views agree on which thread is which."""

  def __init__(self, ex: "Executor", blk0: int, nblk: int):
    self.ex, self.blk0, self.nblk = ex, blk0, nblk
    L = ex.launch
    self.bs = L.block[0] * L.block[1] * L.block[2]
    self.T = nblk * self.bs
    gx = L.grid[0]
    self.whole = blk0 == 0 and nblk == gx * L.grid[1] * L.grid[2]
    rows = (nblk // gx, 1, gx) if blk0 % gx == 0 and nblk % gx == 0 else (nblk, 1, 1)   # whole rows of x: %ctaid.x stays per x
    self.shape = ((L.grid[2], L.grid[1], gx) if self.whole else rows) + (L.block[2], L.block[1], L.block[0])
    self.compact: dict[str, np.ndarray] = {}   # register -> its rank-6 value
    self.regs = FlatRegs(self)
    self.shared = WindowSpace("shared", nblk, L.shared_bytes)
    self.local = WindowSpace("local", self.T, L.local_bytes)
    self.stack: np.ndarray | None = None   # each thread's call-stack pointer in its local window (calls.real_call)
    self._special: dict[str, np.ndarray] = {}
    self._special_lanes: dict[str, np.ndarray] = {}

  def lanes(self, v) -> np.ndarray:
    """v (a scalar, T lanes, or already rank 6) as a rank-6 array broadcastable to `shape`, without copying."""
    v = np.asarray(v)
    if v.ndim == 6: return v
    if v.size == 1 or v.strides == (0,): return v.reshape(-1)[:1].reshape(ONE)   # one value for all lanes (a uniform read back)
    return np.broadcast_to(v, (self.T,)).reshape(self.shape)

  def flat(self, v: np.ndarray) -> np.ndarray:
    """A rank-6 value as T lanes: a view when it is full or uniform, a copy when it is compact."""
    if v.size == 1: return np.broadcast_to(v.reshape(1), (self.T,))
    return np.broadcast_to(v, self.shape).reshape(self.T)

  @cached_property
  def local_tid(self) -> np.ndarray:
    """Each thread's linear index in its block."""
    return np.tile(np.arange(self.bs, dtype=np.int64), self.nblk)

  @cached_property
  def block_of(self) -> np.ndarray:
    """Each thread's block, counted from the batch's first."""
    return np.repeat(np.arange(self.nblk, dtype=np.int64), self.bs)

  @cached_property
  def block_index(self) -> np.ndarray:
    """Each block's index in the batch, rank 6 (what block_of is per thread)."""
    return np.arange(self.nblk, dtype=np.int64).reshape(self.shape[:3] + (1, 1, 1))

  @cached_property
  def thread_index(self) -> np.ndarray:
    return np.arange(self.T)

  def special_lanes(self, name: str) -> np.ndarray:
    """Special register `name` as T lanes, made once per batch for the general path."""
    v = self._special_lanes.get(name)
    if v is None:
      v = self.flat(self.special(name))
      if name.split(".")[0] not in CLOCKS: self._special_lanes[name] = v
    return v

  def special(self, name: str) -> np.ndarray:
    """Special register `name` as a rank-6 array, compact (%tid.x varies along the block's x axis only)."""
    if name in self._special: return self._special[name]
    L = self.ex.launch
    gx, gy, _ = L.grid
    base, comp = name.split(".") if "." in name else (name, "")
    ax = "xyz".index(comp) if comp else 0
    lt = np.arange(self.bs, dtype=np.int64).reshape(self.shape[3:])   # a thread's linear index in its block
    per_thread = per_block = v = None
    if base == "%tid": per_thread = _along(L.block[ax], ax)
    elif base == "%ntid": v = L.block[ax]
    elif base == "%ctaid":
      if self.whole or ax == 0 and self.shape[2] == gx: per_block = _along(L.grid[ax], ax)
      else:
        lin = np.arange(self.blk0, self.blk0 + self.nblk).reshape(self.shape[:3])
        per_block = [lin % gx, lin // gx % gy, lin // (gx * gy)][ax]
    elif base == "%nctaid": v = L.grid[ax]
    elif base == "%laneid": per_thread = lt % 32
    elif base == "%warpid": per_thread = lt // 32
    elif base == "%nwarpid": v = (self.bs + 31) // 32
    elif base in ("%smid", "%gridid"): v = 0
    elif base == "%nsmid": v = 132   # an H200 has 132 SMs
    elif base.startswith("%lanemask_"):
      one = np.uint64(1) << (lt % 32).astype(np.uint64)
      per_thread = {"eq": one, "lt": one - np.uint64(1), "le": (one << np.uint64(1)) - np.uint64(1),
                    "gt": ~((one << np.uint64(1)) - np.uint64(1)), "ge": ~(one - np.uint64(1))}[base[10:]] & np.uint64(0xffffffff)
    elif base in CLOCKS:
      return np.array(self.ex.steps, np.uint64 if base in ("%clock64", "%globaltimer") else np.uint32).reshape(ONE)
    elif base == "%dynamic_smem_size": v = L.shared_bytes - self.ex.kernel.static_shared_bytes
    elif base == "%total_smem_size": v = L.shared_bytes
    else: raise Unsupported(f"special register {name}")
    if per_thread is not None: v = per_thread.reshape((1, 1, 1) + per_thread.shape)
    elif per_block is not None: v = per_block.reshape(per_block.shape + (1, 1, 1))
    else: v = np.array(v).reshape(ONE)
    v = self._special[name] = v.astype(np.uint32)
    return v


ONE = (1,) * 6   # the shape of a value every lane shares
CLOCKS = ("%clock", "%clock64", "%globaltimer", "%globaltimer_lo", "%globaltimer_hi")   # read anew each time


def _is_counted(ins: Instr) -> bool:
  try: return barrier_kind(ins) in ("count", "arrive")
  except Unsupported: return False


class Executor:
  """One launch of `kernel`: call run()."""

  def __init__(self, module, kernel: Kernel, mem, launch: Launch, trace: Callable[[str], None] | None):
    self.module, self.kernel, self.mem, self.launch, self.trace = module, kernel, mem, launch, trace
    self.glob = GlobalSpace(mem)
    self.steps = 0
    self.lane_ops = 0
    self.ins: Instr | None = None
    self.fast = compile_kernel(kernel)
    # instructions each thread runs on its own (pcs): counted barrier arrivals, real calls and their returns
    self.counted_barriers = {pc for pc, ins in enumerate(kernel.instrs) if _is_counted(ins) or calls.is_real_call(ins)}

  # --- operands -----------------------------------------------------------------------------------------------
  def rd(self, b: Batch, op, t: str):
    """Operand `op` as values of type t (array of T, or a scalar for an immediate)."""
    dt = VALUE_DTYPE[t]
    if isinstance(op, Reg):
      if op.name not in self.kernel.regs: return self.fit(b.special_lanes(op.name), t)
      arr = self.reg(b, op)
      if 1 < arr.size < b.T:   # compact: the general path reads T lanes; keep them for its next read
        arr = b.compact[op.name] = np.ascontiguousarray(np.broadcast_to(arr, b.shape))
      return self.fit(b.flat(arr), t)
    if isinstance(op, Imm):
      if op.is_float:
        if t == "bf16": return F.to_fmt(np.float64(op.value), "bf16")
        if not is_float(t) and t not in ("b32", "b64"): raise Unsupported(f"a float immediate for a .{t} operand")
        if t in ("b32", "b64", "f32", "f64", "f16"):
          if t == "b32": return np.float32(op.value).view(np.uint32)
          if t == "b64": return np.float64(op.value).view(np.uint64)
          return dt(op.value)
      if t == "pred": return np.bool_(op.value != 0)
      if is_float(t) and t != "bf16": raise Unsupported(f"an integer immediate for a .{t} operand (use 0f/0d)")
      n = type_bytes(t)
      return UINT[n](op.value & ((1 << 8 * n) - 1)).view(dt) if t != "bf16" else np.uint16(op.value & 0xffff)
    if isinstance(op, (Sym, Addr)):
      return self.fit(np.uint64(self.symbol_address(op)), t)
    if isinstance(op, tuple) and op[0] == "not": return ~self.rd(b, op[1], "pred")
    if isinstance(op, tuple) and op[0] == "neg": return -self.rd(b, op[1], t)
    raise Unsupported(f"operand {op}")

  def reg(self, b: Batch, op: Reg) -> np.ndarray:
    """Register (or special register) op's rank-6 bits; a register not yet written reads as zero."""
    if op.name not in self.kernel.regs: return b.special(op.name)
    arr = b.compact.get(op.name)
    if arr is None: arr = b.regs[op.name] = np.zeros(ONE, storage_dtype(self.kernel.regs[op.name]))
    return arr

  def fit(self, arr, t: str):
    """A register's raw bits (or a value) as type t: same width viewed, wider truncated, narrower extended."""
    dt = VALUE_DTYPE[t]
    arr = np.asarray(arr)
    if t == "pred": return arr if arr.dtype == np.bool_ else arr != 0
    if arr.dtype == np.bool_: arr = arr.astype(np.uint8)
    n = type_bytes(t)
    s = arr.dtype.itemsize
    if s == n: return arr.view(dt) if arr.dtype != dt else arr
    if s > n: return arr.astype(UINT[s]).astype(UINT[n]).view(dt)
    return (arr.view(SINT[s]).astype(SINT[n]) if is_signed(t) else arr.view(UINT[s]).astype(UINT[n])).view(dt)

  def symbol_address(self, op) -> int:
    name, off = (op.name, 0) if isinstance(op, Sym) else (op.base.name, op.offset)
    k = self.kernel
    if name in k.param_types: return dict((p[0], p[1]) for p in k.params)[name] + off
    if name in k.shared:
      o = k.shared[name][0]
      if o >= 0: return o + off
      align = max(16, k.shared[name][1].align)   # dynamic shared memory starts after the static part, aligned
      return (k.static_shared_bytes + align - 1) // align * align + off
    if name in k.local: return k.local[name][0] + off
    if name in self.launch.variables: return self.launch.variables[name] + off
    if name in self.module.const_offsets and self.launch.const_bank is None: return self.module.const_offsets[name] + off
    if name in self.module.globals or name in self.module.const_offsets:
      raise Fault("unsupported", None, f"module variable {name!r} has no address: the launch names none (a loader places module variables)")
    raise Unsupported(f"symbol {name!r} is not a parameter or variable of kernel {k.name}")

  def wr(self, b: Batch, op, val, t: str, m) -> None:
    """Write val (type t) to register op under mask m (None: every thread)."""
    if op is SINK or op is None: return
    if isinstance(op, PredPair):
      raise Unsupported("p|q destination outside setp")
    if not isinstance(op, Reg) or op.name not in self.kernel.regs:
      raise Unsupported(f"destination {op} is not a declared register")
    st = self.kernel.regs[op.name]
    sd = storage_dtype(st)
    v = np.asarray(val)
    if sd == np.bool_: v = v.astype(np.bool_) if v.dtype != np.bool_ else v
    else:
      if v.dtype == np.bool_: v = v.astype(np.uint8)
      if v.dtype.itemsize != sd().itemsize:
        v = self.fit(v, ("s" if is_signed(t) else "u") + str(sd().itemsize * 8))
      v = v.view(sd) if v.dtype != sd else v
    if m is not None:
      old = b.compact.get(op.name)
      v = np.where(m.reshape(b.shape), b.lanes(v), old if old is not None else sd(0))
    b.compact[op.name] = b.lanes(v)

  # --- the loop -----------------------------------------------------------------------------------------------
  def run(self) -> None:
    L = self.launch
    bs = L.block[0] * L.block[1] * L.block[2]
    nblocks = L.grid[0] * L.grid[1] * L.grid[2]
    per = max(1, min(nblocks, BATCH_THREADS // max(bs, 1)))
    with np.errstate(all="ignore"):   # wrapping and IEEE specials are results here, not warnings
      for blk0 in range(0, nblocks, per):
        self.run_batch(Batch(self, blk0, min(per, nblocks - blk0)))

  def run_batch(self, b: Batch) -> None:
    code = self.kernel.instrs
    n = len(code)
    DEAD = n + 1
    pc, pcs, alive, bars = 0, None, None, None
    while True:
      if pcs is None:
        if pc >= n: return
        ins = code[pc]
        m = alive
        if pc in self.counted_barriers:   # a thread count or bar.arrive: the threads' arrivals are counted one by one
          pcs = np.full(b.T, pc, np.int64) if m is None else np.where(m, pc, DEAD)
          continue
        kind = self.step(b, pc, m)
        if kind is None: pc += 1
        elif kind == "bra":
          g = self.guard(b, ins, m)
          tgt = self.kernel.labels[ins.args[0].name]
          if g is None: pc = tgt
          else:
            g = g if m is None else g & m
            if g.all() if m is None else (g == m).all(): pc = tgt
            elif not g.any(): pc += 1
            else:
              pcs = np.where(g, tgt, pc + 1)
              if m is not None: pcs = np.where(m, pcs, DEAD)
        elif kind in ("exit", "ret"):
          g = self.guard(b, ins, m)
          if g is None: return
          alive = ~g if alive is None else alive & ~g
          if not alive.any(): return
          pc += 1
        elif kind == "sync": pc += 1   # converged: every live thread of every block is here
        elif kind == "trap": raise self.fault("trap", None, "trap instruction executed")
        continue
      # divergent
      waiting = bars.waiting if bars is not None else None
      runnable = alive if waiting is None else (alive & ~waiting if alive is not None else ~waiting)
      pr = pcs if runnable is None else np.where(runnable, pcs, DEAD)
      minpc = int(pr.min())
      if minpc >= n:
        if waiting is not None and waiting.any():
          rel = bars.release(alive)
          if rel is not None:
            pcs[rel] += 1
            continue
          raise SMFault("barrier", None, self.kernel.name, None, "every live thread waits at a barrier but some block can never "
                        "complete its barrier")
        return
      m = pr == minpc
      if (waiting is None or not waiting.any()) and minpc not in self.counted_barriers:
        if (m == (alive if alive is not None else True)).all():
          pc, pcs = minpc, None
          continue
      ins = code[minpc]
      kind = self.step(b, minpc, m)
      if kind is None: pcs = np.where(m, pcs + 1, pcs)
      elif kind == "bra":
        g = self.guard(b, ins, m)
        tgt = self.kernel.labels[ins.args[0].name]
        tk = m if g is None else m & g
        pcs = np.where(tk, tgt, np.where(m, pcs + 1, pcs))
      elif kind in ("exit", "ret"):
        g = self.guard(b, ins, m)
        ex = m if g is None else m & g
        alive = ~ex if alive is None else alive & ~ex
        pcs = np.where(ex, DEAD, np.where(m, pcs + 1, pcs))
      elif kind in ("sync", "count", "arrive"):
        g = self.guard(b, ins, m)
        arr = m if g is None else m & g
        if bars is None: bars = Barriers(b)
        try: bars.arrive(self, ins, kind, arr)
        except Unsupported as u: raise self.unsupported(ins, u) from None
        pcs = np.where(m & ~arr if kind != "arrive" else m, pcs + 1, pcs)
        rel = bars.release(alive)
        if rel is not None: pcs[rel] += 1
      elif kind == "trap": raise self.fault("trap", None, "trap instruction executed")
      elif kind == "call": calls.real_call(self, b, ins, m, pcs, minpc)
      elif kind == "$ret": calls.real_return(self, b, ins, m, pcs)

  def guard(self, b: Batch, ins: Instr, m):
    if ins.pred is None: return None
    p = self.rd(b, ins.pred, "pred")
    p = ~p if ins.pred_neg else p
    return np.broadcast_to(p, (b.T,))

  def unsupported(self, ins: Instr, u: Unsupported) -> SMFault:
    return SMFault("unsupported", None, self.kernel.name, ins.line, f"{ins.text}: {u} is not supported by the emulated SM")

  def fault(self, kind: str, address: int | None, message: str) -> SMFault:
    return SMFault(kind, address, self.kernel.name, self.ins.line if self.ins else None, message)

  def step(self, b: Batch, pc: int, m):
    """Execute the instruction at pc for the threads in m (None: all); returns the control kind or None."""
    ins = self.ins = self.kernel.instrs[pc]
    self.steps += 1
    if self.trace: self.trace(f"{self.kernel.name} line {ins.line}: {ins.text}  [{b.T if m is None else int(m.sum())} threads]")
    op = ins.op
    if op in ("bra", "exit", "ret", "trap", "$ret") or (op == "call" and ins.why is None): return op
    if op in ("bar", "barrier") and ins.mods[:1] != ("warp",):
      try: return barrier_kind(ins)
      except Unsupported as u: raise self.fault("unsupported", None, f"{ins.text}: {u}") from None
    g = self.guard(b, ins, m)
    mm = g if m is None else (m if g is None else m & g)
    if mm is not None and not mm.any(): return None
    try:
      fast = self.fast[pc]
      if fast is not None: fast(self, b, mm)
      else:
        fn = OPS.get(op)
        if fn is None: raise Unsupported(f"instruction {op}")
        fn(self, b, ins, mm)
    except Fault as f: raise fault_to_sm(f, self.kernel.name, ins.line) from None
    except Unsupported as u: raise self.unsupported(ins, u) from None
    self.lane_ops += b.T if mm is None else int(np.count_nonzero(mm))
    return None
