"""Runs one kernel launch: blocks in batches, threads of a batch as numpy lanes, divergence by a per-thread PC.

Scheduling (PTX ISA 3.3 "independent thread scheduling" as sm_70+ implement it, simplified): while every live thread
is at one PC the batch runs converged; after a divergent branch, the threads at the lowest PC run next, so both
sides of an if/else run and the paths meet again at their common successor. bar.sync holds a thread until every
non-exited thread of its block has arrived (exited threads count as arrived, as on sm_70+). Blocks of one launch
are independent (the programming model gives no order between them), so many run in one batch.
"""
from __future__ import annotations
import math
from dataclasses import dataclass
from functools import cached_property
from typing import Callable

import numpy as np

from . import floats as F
from . import intops as I
from .errors import SMFault
from .memory import LOCAL_WINDOW, SHARED_WINDOW, WINDOW_SIZE, Fault, GlobalSpace, WindowSpace, fault_to_sm
from .parser import SINK, Addr, Imm, Instr, Kernel, PredPair, Reg, Sym, Vec, type_bytes
from .types import SINT, UINT, VALUE_DTYPE, as_uint, int_limits, is_float, is_signed, storage_dtype

ROUND = ("rn", "rz", "rm", "rp")
IROUND = {"rni": "rn", "rzi": "rz", "rmi": "rm", "rpi": "rp"}
SPACES = ("global", "shared", "local", "param", "const", "generic")
BATCH_THREADS = 1 << 16   # threads run as one numpy batch: large enough to amortise Python, small enough for the caches


class Unsupported(Exception):
  pass


@dataclass
class Launch:
  grid: tuple[int, int, int]
  block: tuple[int, int, int]
  params_va: int
  shared_bytes: int
  local_bytes: int


class Batch:
  """The state of `nblk` blocks (first linear block index `blk0`) running together: T = nblk * block threads."""

  def __init__(self, ex: "Executor", blk0: int, nblk: int):
    self.ex, self.blk0, self.nblk = ex, blk0, nblk
    L = ex.launch
    self.bs = L.block[0] * L.block[1] * L.block[2]
    self.T = nblk * self.bs
    self.regs: dict[str, np.ndarray] = {}
    self.shared = WindowSpace("shared", nblk, L.shared_bytes)
    self.local = WindowSpace("local", self.T, L.local_bytes)
    self._special: dict[str, np.ndarray] = {}

  @cached_property
  def local_tid(self) -> np.ndarray:
    """Each thread's linear index in its block."""
    return np.tile(np.arange(self.bs, dtype=np.int64), self.nblk)

  @cached_property
  def block_of(self) -> np.ndarray:
    """Each thread's block, counted from the batch's first."""
    return np.repeat(np.arange(self.nblk, dtype=np.int64), self.bs)

  @cached_property
  def thread_index(self) -> np.ndarray:
    return np.arange(self.T)

  def special(self, name: str) -> np.ndarray:
    if name in self._special: return self._special[name]
    L = self.ex.launch
    bx, by, _ = L.block
    gx, gy, _ = L.grid
    base, comp = name.split(".") if "." in name else (name, "")
    ax = "xyz".index(comp) if comp else 0
    lt = np.arange(self.bs, dtype=np.int64)             # per thread of one block, then tiled over the batch
    lin = np.arange(self.blk0, self.blk0 + self.nblk)   # per block, then repeated for its threads
    per_thread = per_block = None
    if base == "%tid": per_thread = [lt % bx, lt // bx % by, lt // (bx * by)][ax]
    elif base == "%ntid": per_thread = np.full(self.bs, L.block[ax])
    elif base == "%ctaid": per_block = [lin % gx, lin // gx % gy, lin // (gx * gy)][ax]
    elif base == "%nctaid": per_thread = np.full(self.bs, L.grid[ax])
    elif base == "%laneid": per_thread = lt % 32
    elif base == "%warpid": per_thread = lt // 32
    elif base == "%nwarpid": per_thread = np.full(self.bs, (self.bs + 31) // 32)
    elif base in ("%smid", "%gridid"): per_thread = np.zeros(self.bs)
    elif base == "%nsmid": per_thread = np.full(self.bs, 132)   # an H200 has 132 SMs
    elif base.startswith("%lanemask_"):
      one = np.uint64(1) << (lt % 32).astype(np.uint64)
      per_thread = {"eq": one, "lt": one - np.uint64(1), "le": (one << np.uint64(1)) - np.uint64(1),
                    "gt": ~((one << np.uint64(1)) - np.uint64(1)), "ge": ~(one - np.uint64(1))}[base[10:]] & np.uint64(0xffffffff)
    elif base in ("%clock", "%clock64", "%globaltimer", "%globaltimer_lo", "%globaltimer_hi"):
      return np.broadcast_to(np.array(self.ex.steps, np.uint64 if base in ("%clock64", "%globaltimer") else np.uint32), (self.T,))
    elif base == "%dynamic_smem_size": per_thread = np.full(self.bs, L.shared_bytes - self.ex.kernel.static_shared_bytes)
    elif base == "%total_smem_size": per_thread = np.full(self.bs, L.shared_bytes)
    else: raise Unsupported(f"special register {name}")
    v = np.tile(per_thread.astype(np.uint32), self.nblk) if per_thread is not None else np.repeat(per_block.astype(np.uint32), self.bs)
    self._special[name] = v
    return v


class Executor:
  """One launch of `kernel`: call run()."""

  def __init__(self, module, kernel: Kernel, mem, launch: Launch, trace: Callable[[str], None] | None):
    self.module, self.kernel, self.mem, self.launch, self.trace = module, kernel, mem, launch, trace
    self.glob = GlobalSpace(mem)
    self.steps = 0
    self.lane_ops = 0
    self.ins: Instr | None = None

  # --- operands -----------------------------------------------------------------------------------------------
  def rd(self, b: Batch, op, t: str):
    """Operand `op` as values of type t (array of T, or a scalar for an immediate)."""
    dt = VALUE_DTYPE[t]
    if isinstance(op, Reg):
      if op.name in self.kernel.regs:
        arr = b.regs.get(op.name)
        if arr is None: arr = b.regs[op.name] = np.broadcast_to(np.zeros(1, storage_dtype(self.kernel.regs[op.name])), (b.T,))
      else: arr = b.special(op.name)
      return self.fit(arr, t)
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
      return (k.static_shared_bytes + 15) // 16 * 16 + off if o < 0 else o + off
    if name in k.local: return k.local[name][0] + off
    if name in self.module.const_offsets: return self.module.const_offsets[name] + off
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
    if v.ndim == 0 or v.shape != (b.T,): v = np.broadcast_to(v, (b.T,))
    if m is not None:
      old = b.regs.get(op.name)
      if old is None: old = np.zeros(b.T, sd)
      v = np.where(m, v, old)
    b.regs[op.name] = v

  # --- the loop -----------------------------------------------------------------------------------------------
  def run(self) -> None:
    L = self.launch
    bs = L.block[0] * L.block[1] * L.block[2]
    nblocks = L.grid[0] * L.grid[1] * L.grid[2]
    per = max(1, min(nblocks, BATCH_THREADS // max(bs, 1)))
    for blk0 in range(0, nblocks, per):
      self.run_batch(Batch(self, blk0, min(per, nblocks - blk0)))

  def run_batch(self, b: Batch) -> None:
    code = self.kernel.instrs
    n = len(code)
    DEAD = n + 1
    pc, pcs, alive, blocked = 0, None, None, None
    while True:
      if pcs is None:
        if pc >= n: return
        ins = code[pc]
        m = alive
        kind = self.step(b, ins, m)
        if kind is None: pc += 1
        elif kind == "bra":
          g = self.guard(b, ins, m)
          tgt = self.kernel.labels[ins.args[0].name]
          if g is None: pc = tgt
          else:
            g = g if m is None else g & m
            live = m if m is not None else True
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
        elif kind == "bar": pc += 1   # converged: every live thread of every block is here
        elif kind == "trap": raise self.fault("trap", None, "trap instruction executed")
        continue
      # divergent
      runnable = alive if blocked is None else (alive & ~blocked if alive is not None else ~blocked)
      pr = pcs if runnable is None else np.where(runnable, pcs, DEAD)
      minpc = int(pr.min())
      if minpc >= n:
        if blocked is not None and blocked.any():
          if self.release(b, alive, blocked, pcs): continue
          raise SMFault("barrier", None, self.kernel.name, None, "every live thread waits at bar.sync but some block can never "
                        "complete its barrier")
        return
      m = pr == minpc
      if blocked is None or not blocked.any():
        if (m == (alive if alive is not None else True)).all():
          pc, pcs, blocked = minpc, None, None
          continue
      ins = code[minpc]
      kind = self.step(b, ins, m)
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
      elif kind == "bar":
        g = self.guard(b, ins, m)
        arr = m if g is None else m & g
        blocked = arr if blocked is None else blocked | arr
        pcs = np.where(m & ~arr, pcs + 1, pcs)
        self.release(b, alive, blocked, pcs)
      elif kind == "trap": raise self.fault("trap", None, "trap instruction executed")

  def release(self, b: Batch, alive, blocked, pcs) -> bool:
    """Let every block whose live threads all wait at a barrier go on; whether any did (pcs, blocked in place)."""
    al = np.ones(b.T, bool) if alive is None else alive
    done = (blocked | ~al).reshape(b.nblk, b.bs).all(1) & blocked.reshape(b.nblk, b.bs).any(1)
    if not done.any(): return False
    rel = blocked & np.repeat(done, b.bs)
    pcs[rel] += 1
    blocked[rel] = False
    return True

  def guard(self, b: Batch, ins: Instr, m):
    if ins.pred is None: return None
    p = self.rd(b, ins.pred, "pred")
    p = ~p if ins.pred_neg else p
    return np.broadcast_to(p, (b.T,))

  def fault(self, kind: str, address: int | None, message: str) -> SMFault:
    return SMFault(kind, address, self.kernel.name, self.ins.line if self.ins else None, message)

  def step(self, b: Batch, ins: Instr, m):
    """Execute ins for the threads in m (None: all); returns the control kind or None."""
    self.ins = ins
    self.steps += 1
    if self.trace: self.trace(f"{self.kernel.name} line {ins.line}: {ins.text}  [{b.T if m is None else int(m.sum())} threads]")
    op = ins.op
    if op in ("bra", "exit", "ret", "trap"): return op
    if op in ("bar", "barrier") and ins.mods[:1] != ("warp",):
      if len(ins.args) > 1: raise self.fault("unsupported", None, "bar.sync with a thread count is not supported")
      return "bar"
    g = self.guard(b, ins, m)
    mm = g if m is None else (m if g is None else m & g)
    if mm is not None and not mm.any(): return None
    try:
      fn = OPS.get(op)
      if fn is None: raise Unsupported(f"instruction {op}")
      fn(self, b, ins, mm)
    except Fault as f: raise fault_to_sm(f, self.kernel.name, ins.line) from None
    except Unsupported as u:
      raise SMFault("unsupported", None, self.kernel.name, ins.line, f"{ins.text}: {u} is not supported by the emulated SM") from None
    self.lane_ops += b.T if mm is None else int(np.count_nonzero(mm))
    return None


# --- instruction semantics ----------------------------------------------------------------------------------------
OPS: dict[str, Callable] = {}


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


def float_in(ex: Executor, b: Batch, ins: Instr, t: str, k: int) -> np.ndarray:
  v = ex.rd(b, ins.args[k], t)
  return F.ftz(v, t) if "ftz" in ins.mods and t in ("f32", "f16") else v


def float_out(ex: Executor, b: Batch, ins: Instr, t: str, v, m) -> None:
  if "ftz" in ins.mods and t in ("f32", "f16"): v = F.ftz(v, t)
  if "sat" in ins.mods: v = F.saturate(v, t)
  ex.wr(b, ins.args[0], v, t, m)


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


@op("add", "sub", "mul", "mad", "fma")
def _arith(ex: Executor, b: Batch, ins: Instr, m) -> None:
  t = mods_type(ins)
  o = ins.op
  if is_float(t) or packed(t):
    fop = {"add": "add", "sub": "sub", "mul": "mul", "mad": "fma", "fma": "fma"}[o]
    mode = rounding(ins)
    n = 3 if fop == "fma" else 2
    def f(ft, *xs):
      xs = [fpre(ins, ft, x) for x in xs]
      if ft == "f32" and mode == "rn" and fop in ("add", "sub", "mul"):  # numpy's f32 arithmetic is IEEE RN already
        with np.errstate(all="ignore"):
          r = xs[0] + xs[1] if fop == "add" else xs[0] - xs[1] if fop == "sub" else xs[0] * xs[1]
      elif ft == "f32" and mode == "rn" and fop == "fma": r = F.fma_f32_rn(*xs)
      else: r = F.arith(fop, ft, mode, *xs)
      if "relu" in ins.mods: r = relu(r, ft)
      return fpost(ins, ft, r)
    lanewise(ex, b, ins, t, m, f, n)
    return
  a = ex.rd(b, ins.args[1], t)
  c = ex.rd(b, ins.args[2], t)
  mode = next((x for x in ins.mods if x in ("lo", "hi", "wide", "24")), None)
  if o in ("add", "sub"):
    if "sat" in ins.mods:
      r = np.asarray(a).astype(np.int64) + (np.asarray(c).astype(np.int64) * (1 if o == "add" else -1))
      ex.wr(b, ins.args[0], I.saturate_int(r, t), t, m)
      return
    if "cc" in ins.mods or ins.op.endswith("c"): raise Unsupported("carry chains (add.cc/addc)")
    n = type_bytes(t)
    ua, uc = as_uint(a, n), as_uint(c, n)
    ex.wr(b, ins.args[0], (ua + uc) if o == "add" else (ua - uc), t, m)
    return
  if o == "mul":
    if "24" in ins.mods: raise Unsupported("mul24")
    ex.wr(b, ins.args[0], I.mul(mode or "lo", t, a, c), t, m)
    return
  d = ex.rd(b, ins.args[3], "s" + t[1:] if mode == "wide" and False else ({"wide": ("s" if is_signed(t) else "u") + str(type_bytes(t) * 16)}.get(mode, t)))
  p = I.mul(mode or "lo", t, a, c)
  if mode == "hi" and "sat" in ins.mods:
    r = np.asarray(p).astype(np.int64) + np.asarray(d).astype(np.int64)
    ex.wr(b, ins.args[0], I.saturate_int(r, t), t, m)
    return
  wt = t if mode != "wide" else ("s" if is_signed(t) else "u") + str(type_bytes(t) * 16)
  n = type_bytes(wt)
  ex.wr(b, ins.args[0], as_uint(p, n) + as_uint(d, n), wt, m)


def relu(r, ft):
  v = F.from_fmt(r, ft)
  return np.where(v < 0, F.to_fmt(np.float64(0), ft), r) if ft != "bf16" else np.where(v < 0, np.uint16(0), r)


@op("div", "rem")
def _div(ex, b, ins, m):
  t = mods_type(ins)
  if is_float(t):
    def f(ft, x, y):
      x, y = fpre(ins, ft, x), fpre(ins, ft, y)
      return fpost(ins, ft, F.arith("div", ft, rounding(ins), x, y))   # approx/full: correctly rounded is within 2 ulp
    lanewise(ex, b, ins, t, m, f, 2)
    return
  ex.wr(b, ins.args[0], I.div(t, ex.rd(b, ins.args[1], t), ex.rd(b, ins.args[2], t), ins.op == "rem"), t, m)


@op("rcp", "sqrt", "rsqrt", "sin", "cos", "lg2", "ex2", "tanh")
def _unary_float(ex, b, ins, m):
  """rcp.rn / sqrt.rn are IEEE; .approx forms are computed in f64 and rounded, which lies inside every bound the
  PTX ISA gives (9.7.3: rcp.approx.f32 1 ulp, sqrt.approx.f32 rel. 2^-23, rsqrt.approx.f32 rel. 2^-22.9,
  sin/cos.approx.f32 abs. 2^-20.9 in [-pi, pi], lg2.approx.f32 abs. 2^-22.6, ex2.approx.f32 2 ulp,
  tanh.approx.f32 rel. 2^-11)."""
  t = mods_type(ins)
  o = ins.op
  def f(ft, x):
    x = fpre(ins, ft, x)
    if o == "sqrt" and "approx" not in ins.mods: return fpost(ins, ft, F.arith("sqrt", ft, rounding(ins), x))
    if o == "rcp" and "approx" not in ins.mods:
      one = F.to_fmt(np.ones(np.shape(x)), ft)
      return fpost(ins, ft, F.arith("div", ft, rounding(ins), one, x))
    v = F.from_fmt(x, ft)
    with np.errstate(all="ignore"):
      r = {"rcp": lambda: 1.0 / v, "sqrt": lambda: np.sqrt(v), "rsqrt": lambda: 1.0 / np.sqrt(v), "sin": lambda: np.sin(v),
           "cos": lambda: np.cos(v), "lg2": lambda: np.log2(v), "ex2": lambda: np.exp2(v), "tanh": lambda: np.tanh(v)}[o]()
    return fpost(ins, ft, F.to_fmt(r, ft))
  lanewise(ex, b, ins, t, m, f, 1)


@op("abs", "neg")
def _absneg(ex, b, ins, m):
  t = mods_type(ins)
  if is_float(t) or packed(t):
    def f(ft, x):
      x = fpre(ins, ft, x)
      if ft == "bf16": return (np.asarray(x, np.uint16) & np.uint16(0x7fff)) if ins.op == "abs" else (np.asarray(x, np.uint16) ^ np.uint16(0x8000))
      return fpost(ins, ft, np.abs(x) if ins.op == "abs" else -x)
    lanewise(ex, b, ins, t, m, f, 1)
    return
  a = ex.rd(b, ins.args[1], t)
  n = type_bytes(t)
  with np.errstate(all="ignore"):
    r = np.abs(a) if ins.op == "abs" else (np.zeros_like(a) - a)
  ex.wr(b, ins.args[0], r, t, m)


@op("min", "max")
def _minmax(ex, b, ins, m):
  """Floats: a NaN operand gives the other (both NaN: canonical NaN), and min(-0, +0) is -0 (PTX 9.7.3.12: '-0.0 is
  considered smaller than +0.0' from sm_80 on; the stricter, IEEE 754-2019 minimumNumber, behaviour)."""
  t = mods_type(ins)
  if is_float(t) or packed(t):
    def f(ft, x, y):
      x, y = fpre(ins, ft, x), fpre(ins, ft, y)
      X, Y = F.from_fmt(x, ft), F.from_fmt(y, ft)
      if "NaN" in ins.mods: r = np.minimum(X, Y) if ins.op == "min" else np.maximum(X, Y)
      else: r = np.fmin(X, Y) if ins.op == "min" else np.fmax(X, Y)
      zero = (X == 0) & (Y == 0)
      if zero.any():
        sgn = (np.signbit(X) | np.signbit(Y)) if ins.op == "min" else (np.signbit(X) & np.signbit(Y))
        r = np.where(zero, np.where(sgn, -0.0, 0.0), r)
      r = F.to_fmt(r, ft)
      if "relu" in ins.mods: r = relu(r, ft)
      return fpost(ins, ft, r)
    lanewise(ex, b, ins, t, m, f, 2)
    return
  a, c = ex.rd(b, ins.args[1], t), ex.rd(b, ins.args[2], t)
  r = np.minimum(a, c) if ins.op == "min" else np.maximum(a, c)
  if "relu" in ins.mods: r = np.maximum(r, 0)
  ex.wr(b, ins.args[0], r, t, m)


@op("copysign")
def _copysign(ex, b, ins, m):
  t = mods_type(ins)
  ex.wr(b, ins.args[0], np.copysign(ex.rd(b, ins.args[2], t), ex.rd(b, ins.args[1], t)), t, m)


@op("testp")
def _testp(ex, b, ins, m):
  t = mods_type(ins)
  v = F.from_fmt(ex.rd(b, ins.args[1], t), t)
  k = next(x for x in ins.mods if x in ("finite", "infinite", "number", "notanumber", "normal", "subnormal"))
  tiny = {"f32": np.finfo(np.float32).tiny, "f64": np.finfo(np.float64).tiny}[t]
  r = {"finite": np.isfinite(v), "infinite": np.isinf(v), "number": ~np.isnan(v), "notanumber": np.isnan(v),
       "normal": np.isfinite(v) & (np.abs(v) >= tiny), "subnormal": (v != 0) & (np.abs(v) < tiny)}[k]
  ex.wr(b, ins.args[0], r, "pred", m)


@op("and", "or", "xor", "not", "cnot")
def _logic(ex, b, ins, m):
  t = mods_type(ins)
  a = ex.rd(b, ins.args[1], t)
  if ins.op == "not": r = ~a
  elif ins.op == "cnot": r = (np.asarray(a) == 0).astype(VALUE_DTYPE[t])
  else:
    c = ex.rd(b, ins.args[2], t)
    r = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[ins.op](a, c)
  ex.wr(b, ins.args[0], r, t, m)


@op("shl", "shr")
def _shift(ex, b, ins, m):
  t = mods_type(ins)
  ex.wr(b, ins.args[0], I.shift(ins.op, t, ex.rd(b, ins.args[1], t), ex.rd(b, ins.args[2], "u32")), t, m)


@op("popc", "clz", "brev", "bfind")
def _bits(ex, b, ins, m):
  t = mods_type(ins)
  a = ex.rd(b, ins.args[1], t)
  if ins.op == "popc": ex.wr(b, ins.args[0], I.popc(t, a), "u32", m)
  elif ins.op == "clz": ex.wr(b, ins.args[0], I.clz(t, a), "u32", m)
  elif ins.op == "brev": ex.wr(b, ins.args[0], I.brev(t, np.broadcast_to(a, (b.T,))), t, m)
  else: ex.wr(b, ins.args[0], I.bfind(t, a, "shiftamt" in ins.mods), "u32", m)


@op("bfe")
def _bfe(ex, b, ins, m):
  t = mods_type(ins)
  ex.wr(b, ins.args[0], I.bfe(t, ex.rd(b, ins.args[1], t), ex.rd(b, ins.args[2], "u32"), ex.rd(b, ins.args[3], "u32")), t, m)


@op("bfi")
def _bfi(ex, b, ins, m):
  t = mods_type(ins)
  ex.wr(b, ins.args[0], I.bfi(t, ex.rd(b, ins.args[1], t), ex.rd(b, ins.args[2], t), ex.rd(b, ins.args[3], "u32"),
                              ex.rd(b, ins.args[4], "u32")), t, m)


@op("prmt")
def _prmt(ex, b, ins, m):
  mode = next((x for x in ins.mods if x in ("f4e", "b4e", "rc8", "ecl", "ecr", "rc16")), None)
  ex.wr(b, ins.args[0], I.prmt(*(ex.rd(b, ins.args[i], "b32") for i in (1, 2, 3)), mode), "b32", m)


@op("shf")
def _shf(ex, b, ins, m):
  d = "l" if "l" in ins.mods else "r"
  ex.wr(b, ins.args[0], I.shf(d, "clamp" if "clamp" in ins.mods else "wrap", *(ex.rd(b, ins.args[i], "b32") for i in (1, 2, 3))), "b32", m)


@op("lop3")
def _lop3(ex, b, ins, m):
  ex.wr(b, ins.args[0], I.lop3(*(ex.rd(b, ins.args[i], "b32") for i in (1, 2, 3)), int(ins.args[4].value)), "b32", m)


CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
       "lo": np.less, "ls": np.less_equal, "hi": np.greater, "hs": np.greater_equal}


def compare(ins: Instr, t: str, a, c):
  cmp = next(x for x in ins.mods if x in CMP or x in ("equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan"))
  if is_float(t):
    a, c = F.from_fmt(fpre(ins, t, a), t), F.from_fmt(fpre(ins, t, c), t)
    nan = np.isnan(a) | np.isnan(c)
    if cmp == "num": return ~nan
    if cmp == "nan": return nan
    if cmp.endswith("u") and cmp != "nu": return CMP[cmp[:2]](a, c) | nan
    return CMP[cmp](a, c) & ~nan if cmp != "ne" else (a != c) & ~nan
  return CMP[cmp](a, c)


BOOL = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}


@op("setp", "set")
def _setp(ex, b, ins, m):
  t = ins.types[-1]
  r = compare(ins, t, ex.rd(b, ins.args[1], t), ex.rd(b, ins.args[2], t))
  bop = next((x for x in ins.mods if x in BOOL), None)
  if bop:
    c = ex.rd(b, ins.args[3], "pred")
    r2 = BOOL[bop](r, c)
    rn = BOOL[bop](~r, c)
  else: r2, rn = r, ~r
  dst = ins.args[0]
  if ins.op == "set":
    dt = ins.types[0]
    v = F.to_fmt(r2.astype(np.float64), dt) if is_float(dt) else np.where(r2, VALUE_DTYPE[dt](-1 if is_signed(dt) else np.iinfo(VALUE_DTYPE[dt]).max), 0).astype(VALUE_DTYPE[dt])
    ex.wr(b, dst, v, dt, m)
    return
  if isinstance(dst, PredPair):
    ex.wr(b, dst.p, r2, "pred", m)
    if dst.q is not None: ex.wr(b, dst.q, rn, "pred", m)
  else: ex.wr(b, dst, r2, "pred", m)


@op("selp")
def _selp(ex, b, ins, m):
  t = mods_type(ins)
  ex.wr(b, ins.args[0], np.where(ex.rd(b, ins.args[3], "pred"), ex.rd(b, ins.args[1], t), ex.rd(b, ins.args[2], t)), t, m)


@op("slct")
def _slct(ex, b, ins, m):
  t, ct = ins.types
  c = ex.rd(b, ins.args[3], ct)
  ex.wr(b, ins.args[0], np.where(c >= 0, ex.rd(b, ins.args[1], t), ex.rd(b, ins.args[2], t)), t, m)


@op("mov")
def _mov(ex, b, ins, m):
  t = mods_type(ins)
  d, s = ins.args[0], ins.args[1]
  n = type_bytes(t)
  if isinstance(d, Vec):   # unpack: the low part goes to the first register (PTX 9.7.9.10)
    w = n // len(d.items)
    v = np.asarray(ex.rd(b, s, t)).astype(UINT[n]).astype(np.uint64)
    for i, r in enumerate(d.items):
      ex.wr(b, r, ((v >> np.uint64(8 * w * i)) & np.uint64((1 << 8 * w) - 1)).astype(UINT[w]), "b" + str(8 * w), m)
    return
  if isinstance(s, Vec):
    w = n // len(s.items)
    v = np.uint64(0)
    for i, r in enumerate(s.items):
      v = v | (np.asarray(ex.rd(b, r, "b" + str(8 * w))).astype(np.uint64) << np.uint64(8 * w * i))
    ex.wr(b, d, np.asarray(v).astype(UINT[n]), t, m)
    return
  ex.wr(b, d, ex.rd(b, s, t), t, m)


@op("cvt")
def _cvt(ex, b, ins, m):
  ts = ins.types
  dt, st = ts[0], ts[-1]
  if dt in ("f16x2", "bf16x2"):   # cvt.rn.f16x2.f32 d, a, b: a to the upper half, b to the lower
    half = packed(dt)
    hi = F.to_fmt(ex.rd(b, ins.args[1], st).astype(np.float64), half, rounding(ins))
    lo = F.to_fmt(ex.rd(b, ins.args[2], st).astype(np.float64), half, rounding(ins))
    if "relu" in ins.mods: hi, lo = relu(hi, half), relu(lo, half)
    ex.wr(b, ins.args[0], join2(lo, hi, half), "b32", m)
    return
  a = ex.rd(b, ins.args[1], st)
  ex.wr(b, ins.args[0], convert(ins, dt, st, a), dt, m)


def convert(ins: Instr, dt: str, st: str, a):
  """cvt's rules (PTX 9.7.9.21): float->int rounds by .rni/.rzi/.rmi/.rpi and always saturates (NaN -> 0);
  int->float and narrowing float->float round by .rn/.rz/.rm/.rp; .ftz flushes f32 subnormals; .sat clamps."""
  if is_float(st): a = fpre(ins, st, a)
  if is_float(dt) and is_float(st):
    v = F.from_fmt(a, st)
    ir = next((IROUND[x] for x in ins.mods if x in IROUND), None)
    if ir: v = {"rn": np.rint, "rz": np.trunc, "rm": np.floor, "rp": np.ceil}[ir](v)
    r = F.to_fmt(v, dt, rounding(ins))
    if "relu" in ins.mods: r = relu(r, dt)
    return fpost(ins, dt, r)
  if is_float(dt):   # int -> float, exactly: the value as hi*2^32 + lo, summed with its error, rounded once
    x = np.asarray(a)
    if type_bytes(st) == 8:
      u = x.view(np.uint64) if not is_signed(st) else np.abs(x.astype(np.int64)).view(np.uint64)
      hi = (u >> np.uint64(32)).astype(np.float64) * 4294967296.0
      lo = (u & np.uint64(0xffffffff)).astype(np.float64)
      s, e = F.two_sum(hi, lo)
      if is_signed(st): s, e = np.where(x < 0, -s, s), np.where(x < 0, -e, e)
      v = F.round_odd(s, np.sign(e)) if dt != "f64" else F.adjust_f64(s, np.sign(e), rounding(ins))
    else: v = x.astype(np.float64)
    return fpost(ins, dt, F.to_fmt(v, dt, rounding(ins)))
  if is_float(st):   # float -> int
    v = F.from_fmt(a, st)
    ir = next((IROUND[x] for x in ins.mods if x in IROUND), "rz")
    v = {"rn": np.rint, "rz": np.trunc, "rm": np.floor, "rp": np.ceil}[ir](v)
    lo, hi = int_limits(dt)
    v = np.where(np.isnan(v), 0, v)
    big = v >= float(hi)
    r = np.clip(v, lo, hi)
    out = np.where(big, 0, r).astype(np.float64)
    out = out.astype(SINT[8] if is_signed(dt) else UINT[8])
    out = np.where(big, (SINT[8] if is_signed(dt) else UINT[8])(hi), out)
    return out.astype(VALUE_DTYPE[dt])
  # int -> int
  x = np.asarray(a)
  if "sat" in ins.mods:
    lo, hi = int_limits(dt)
    wide = x.astype(np.int64) if is_signed(st) or type_bytes(st) < 8 else x
    if not is_signed(st) and type_bytes(st) == 8: r = np.minimum(x, np.uint64(hi)).astype(VALUE_DTYPE[dt]) if hi >= 0 else x
    elif is_signed(st) and not is_signed(dt) and type_bytes(dt) == 8: r = np.maximum(wide, 0).astype(np.uint64)
    else: r = np.clip(wide, lo, min(hi, (1 << 63) - 1)).astype(VALUE_DTYPE[dt])
    return r.astype(VALUE_DTYPE[dt])
  n = type_bytes(dt)
  ext = (x.astype(np.int64).view(np.uint64) if is_signed(st) else x.astype(np.uint64))
  return ext.astype(UINT[n]).view(VALUE_DTYPE[dt])


# --- memory -------------------------------------------------------------------------------------------------------
def space_of(ins: Instr) -> str:
  for s in ("global", "shared", "local", "param", "const"):
    if s in ins.mods: return s
  return "generic"


def addresses(ex: Executor, b: Batch, a: Addr, space: str) -> np.ndarray:
  """The addresses an [address] operand names, per thread (uint64)."""
  if isinstance(a.base, Reg): return np.broadcast_to(ex.rd(b, a.base, "u64"), (b.T,)) + np.uint64(a.offset & 0xffffffffffffffff)
  if isinstance(a.base, Sym): return np.full(b.T, ex.symbol_address(a), np.uint64)
  return np.full(b.T, a.offset & 0xffffffffffffffff, np.uint64)


def classify(addrs: np.ndarray):
  """Split generic addresses into (global, shared, local) lane masks."""
  sh = (addrs >= np.uint64(SHARED_WINDOW)) & (addrs < np.uint64(SHARED_WINDOW + WINDOW_SIZE))
  lo = (addrs >= np.uint64(LOCAL_WINDOW)) & (addrs < np.uint64(LOCAL_WINDOW + WINDOW_SIZE))
  return ~(sh | lo), sh, lo


def mem_access(ex: Executor, b: Batch, space: str, addrs: np.ndarray, lanes: np.ndarray, size: int, store=None):
  """Load (store is None) or store words of `size` bytes at addrs[lanes] in `space`; returns the loaded words."""
  a = addrs[lanes] if lanes is not None else addrs
  if space == "generic":
    g, sh, lo = classify(a)
    if g.all(): space = "global"
    else:
      out = np.zeros(a.size, UINT[size])
      for sub, sp, base in ((g, "global", 0), (sh, "shared", SHARED_WINDOW), (lo, "local", LOCAL_WINDOW)):
        if sub.any():
          sl = lanes[sub] if lanes is not None else np.nonzero(sub)[0]
          r = mem_access(ex, b, sp, addrs - np.uint64(base), sl, size, None if store is None else store)
          if store is None: out[sub] = r
      return out
  st = None if store is None else (store[lanes] if lanes is not None and np.ndim(store) else store)
  if space == "global":
    if store is None: return ex.glob.load(a, size)
    ex.glob.store(a, np.broadcast_to(st, a.shape), size)
    return None
  if space in ("shared", "local"):
    win = b.shared if space == "shared" else b.local
    owner = (b.block_of if space == "shared" else b.thread_index)
    owner = owner[lanes] if lanes is not None else owner
    if store is None: return win.load(owner, a, size)
    win.store(owner, a, np.broadcast_to(st, a.shape), size)
    return None
  if space == "param":
    if store is not None: raise Unsupported("st.param in a kernel")
    # kernel parameters live in constant bank 0 where the launch points: read them through the VA space
    return ex.glob.load(a + np.uint64(ex.launch.params_va), size)
  if space == "const":
    if store is not None: raise Fault("const", int(a[0]), "store to the constant space")
    data = ex.module.const_data
    bad = a + np.uint64(size) > np.uint64(data.size)
    if bad.any(): raise Fault("mmu", int(a[np.argmax(bad)]), f"const access at {int(a[np.argmax(bad)]):#x} outside the module's .const data")
    return data[a.astype(np.int64)[:, None] + np.arange(size)].copy().view(UINT[size]).reshape(-1)
  raise Unsupported(f"state space {space}")


def lanes_of(m):
  return None if m is None else np.nonzero(m)[0]


@op("ld", "ldu")
def _ld(ex, b, ins, m):
  t = mods_type(ins)
  vec = next((int(x[1:]) for x in ins.mods if x in ("v2", "v4", "v8")), 1)
  space = space_of(ins)
  size = type_bytes(t)
  dsts = ins.args[0].items if isinstance(ins.args[0], Vec) else (ins.args[0],)
  lanes = lanes_of(m)
  if space == "param" and lanes is None and not isinstance(ins.args[1].base, Reg):   # uniform: one read, broadcast
    va = ex.launch.params_va + ex.symbol_address(ins.args[1])
    for i, d in enumerate(dsts):
      w = ex.glob.load(np.array([va + i * size], np.uint64), size)
      ex.wr(b, d, w.view(VALUE_DTYPE[t] if t != "pred" else np.uint8)[0], t, None)
    return
  addrs = addresses(ex, b, ins.args[1], space)
  if vec > 1 and space != "param": check_vec_alignment(ex, addrs if lanes is None else addrs[lanes], size * vec, space)
  for i, d in enumerate(dsts):
    w = mem_access(ex, b, space, addrs + np.uint64(i * size), lanes, size)
    v = w.view(VALUE_DTYPE[t]) if t != "pred" else w != 0
    if lanes is not None:
      full = np.zeros(b.T, v.dtype)
      full[lanes] = v
      v = full
    ex.wr(b, d, v, t, m)


def check_vec_alignment(ex, addrs, size, space):
  from .memory import check_aligned
  if space in ("global", "generic"): check_aligned(addrs, size, space)


@op("st")
def _st(ex, b, ins, m):
  t = mods_type(ins)
  space = space_of(ins)
  size = type_bytes(t)
  srcs = ins.args[1].items if isinstance(ins.args[1], Vec) else (ins.args[1],)
  lanes = lanes_of(m)
  addrs = addresses(ex, b, ins.args[0], space)
  if len(srcs) > 1: check_vec_alignment(ex, addrs if lanes is None else addrs[lanes], size * len(srcs), space)
  for i, s in enumerate(srcs):
    v = np.broadcast_to(ex.rd(b, s, t), (b.T,))
    w = v.astype(np.uint8) if t == "pred" else v.view(UINT[size]) if v.dtype.itemsize == size else ex.fit(v, "b" + str(8 * size))
    mem_access(ex, b, space, addrs + np.uint64(i * size), lanes, size, store=w)


@op("cvta")
def _cvta(ex, b, ins, m):
  t = mods_type(ins)
  space = space_of(ins)
  a = ex.rd(b, ins.args[1], t).astype(np.uint64)
  base = {"shared": SHARED_WINDOW, "local": LOCAL_WINDOW}.get(space, 0)
  if space in ("param", "const"): raise Unsupported(f"cvta.{space}")
  r = a - np.uint64(base) if "to" in ins.mods else a + np.uint64(base)
  ex.wr(b, ins.args[0], r, t, m)


@op("isspacep")
def _isspacep(ex, b, ins, m):
  a = np.broadcast_to(ex.rd(b, ins.args[1], "u64"), (b.T,))
  g, sh, lo = classify(a)
  ex.wr(b, ins.args[0], {"global": g, "shared": sh, "local": lo}[space_of(ins)], "pred", m)


@op("membar", "fence", "prefetch", "prefetchu", "nanosleep", "pmevent", "griddepcontrol", "discard", "applypriority", "createpolicy")
def _nop(ex, b, ins, m):
  if ins.op == "createpolicy": ex.wr(b, ins.args[0], np.uint64(0), "b64", m)   # a cache policy: no effect on values


@op("bar", "barrier")
def _barwarp(ex, b, ins, m):
  pass   # bar.warp.sync: the lanes of a warp run in lockstep here


@op("call")
def _call(ex, b, ins, m):
  raise Unsupported("call (the SM runs kernels whose device functions are inlined)")


# --- atomics ------------------------------------------------------------------------------------------------------
def atomic_update(op_: str, t: str, old, x, y):
  dt = VALUE_DTYPE[t]
  if t in ("f16", "bf16", "f32", "f64"):
    o, v = F.from_fmt(old, t), F.from_fmt(x, t)
    if op_ == "add": return F.to_fmt(o + v, t) if t != "f64" else o + v   # atom.add.f32 rounds to nearest (PTX 9.7.12.5)
    if op_ == "min": return F.to_fmt(np.fmin(o, v), t)
    if op_ == "max": return F.to_fmt(np.fmax(o, v), t)
    if op_ == "exch": return x
    raise Unsupported(f"atom.{op_}.{t}")
  n = type_bytes(t)
  old, x = np.asarray(old).astype(dt), np.asarray(x).astype(dt)
  if op_ == "add": return (old.astype(UINT[n]) + x.astype(UINT[n])).view(dt)
  if op_ == "sub": return (old.astype(UINT[n]) - x.astype(UINT[n])).view(dt)
  if op_ == "min": return np.minimum(old, x)
  if op_ == "max": return np.maximum(old, x)
  if op_ == "and": return old & x
  if op_ == "or": return old | x
  if op_ == "xor": return old ^ x
  if op_ == "exch": return x
  if op_ == "cas": return np.where(old == x, np.asarray(y).astype(dt), old)
  if op_ == "inc": return np.where(old >= x, dt(0), (old.astype(UINT[n]) + UINT[n](1)).view(dt))   # PTX: ((old >= b) ? 0 : old+1)
  if op_ == "dec": return np.where((old == 0) | (old > x), x, (old.astype(UINT[n]) - UINT[n](1)).view(dt))
  raise Unsupported(f"atom.{op_}")


ATOM_OPS = ("add", "sub", "min", "max", "and", "or", "xor", "exch", "cas", "inc", "dec")


def do_atomic(ex, b, ins, m, addr_arg: Addr, op_: str, t: str, x, y, want_old: bool):
  """Apply the atomic for every active lane in lane order (each lane sees the previous lane's result at the same
  address, as if serialised); returns old values for all lanes (zeros where inactive)."""
  space = space_of(ins)
  size = type_bytes(t)
  lanes = np.arange(b.T) if m is None else np.nonzero(m)[0]
  addrs = addresses(ex, b, addr_arg, space)[lanes]
  x = np.broadcast_to(x, (b.T,))[lanes]
  y = np.broadcast_to(y, (b.T,))[lanes] if y is not None else None
  oldall = np.zeros(lanes.size, UINT[size])
  if space == "generic":
    g, sh, lo = classify(addrs)
    parts = [(g, "global", 0), (sh, "shared", SHARED_WINDOW), (lo, "local", LOCAL_WINDOW)]
  else: parts = [(np.ones(lanes.size, bool), space, 0)]
  for sub, sp, base in parts:
    if not sub.any(): continue
    a = addrs[sub] - np.uint64(base)
    if sp == "global": views = ex.glob.views(a, size)
    elif sp in ("shared", "local"):
      win = b.shared if sp == "shared" else b.local
      owner = (b.block_of if sp == "shared" else b.thread_index)[lanes[sub]]
      views = win.views(owner, a, size)
    else: raise Unsupported(f"atom.{sp}")
    sidx = np.nonzero(sub)[0]
    for view, idx, vl in views:
      sel = sidx if vl is None else sidx[vl]
      oldall[sel] = serial_apply(view, idx, op_, t, x[sel], None if y is None else y[sel], want_old)
  full = np.zeros(b.T, UINT[size])
  full[lanes] = oldall
  return full.view(VALUE_DTYPE[t])


def serial_apply(view: np.ndarray, idx: np.ndarray, op_: str, t: str, x, y, want_old: bool) -> np.ndarray:
  dt = VALUE_DTYPE[t]
  tv = view.view(dt)
  uniq, first, counts = np.unique(idx, return_index=True, return_counts=True)
  if counts.max() == 1:
    old = tv[idx].copy()
    tv[idx] = atomic_update(op_, t, old, x, y)
    return old.view(UINT[type_bytes(t)])
  if op_ in ("add", "sub", "and", "or", "xor", "min", "max") and not is_float(t) and not want_old:
    n = type_bytes(t)
    uf = {"add": np.add, "sub": np.subtract, "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
          "min": np.minimum, "max": np.maximum}[op_]
    if op_ in ("add", "sub"): uf.at(tv.view(UINT[n]), idx, np.asarray(x).astype(dt).view(UINT[n]))
    else: uf.at(tv, idx, np.asarray(x).astype(dt))
    return np.zeros(idx.size, UINT[n])
  if op_ == "add" and t in ("f32", "f64") and not want_old:
    np.add.at(tv, idx, np.asarray(x).astype(dt))   # unbuffered, in lane order: the same rounding as serial adds
    return np.zeros(idx.size, UINT[type_bytes(t)])
  if op_ == "add" and not is_float(t):   # old = value before + the earlier lanes' sum at the same address
    n = type_bytes(t)
    order = np.argsort(idx, kind="stable")
    xs = np.asarray(x).astype(dt).view(UINT[n])[order]
    cs = np.cumsum(xs, dtype=UINT[n])
    si = idx[order]
    start = np.searchsorted(si, si, side="left")
    excl = cs - xs - np.where(start > 0, cs[start - 1], 0).astype(UINT[n])
    old = np.empty(idx.size, UINT[n])
    old[order] = tv.view(UINT[n])[si] + excl
    np.add.at(tv.view(UINT[n]), idx, np.asarray(x).astype(dt).view(UINT[n]))
    return old
  old = np.empty(idx.size, UINT[type_bytes(t)])
  rest = np.arange(idx.size)
  while rest.size:
    _, f = np.unique(idx[rest], return_index=True)
    now = rest[f]
    o = tv[idx[now]].copy()
    tv[idx[now]] = atomic_update(op_, t, o, np.asarray(x)[now], None if y is None else np.asarray(y)[now])
    old[now] = o.view(UINT[type_bytes(t)])
    rest = np.setdiff1d(rest, now, assume_unique=True)
  return old


@op("atom", "red")
def _atom(ex, b, ins, m):
  t = mods_type(ins)
  op_ = next((x for x in ins.mods if x in ATOM_OPS), None)
  if op_ is None: raise Unsupported(f"{ins.op} without an operation ({', '.join(ATOM_OPS)})")
  if ins.op == "red":
    addr, xs = ins.args[0], ins.args[1:]
  else: addr, xs = ins.args[1], ins.args[2:]
  x = ex.rd(b, xs[0], t)
  y = ex.rd(b, xs[1], t) if op_ == "cas" else None
  old = do_atomic(ex, b, ins, m, addr, op_, t, x, y, ins.op == "atom")
  if ins.op == "atom": ex.wr(b, ins.args[0], old, t, m)


# --- warp-level ---------------------------------------------------------------------------------------------------
def warp_ids(b: Batch) -> np.ndarray:
  """A warp number per thread, unique within the batch."""
  return b.block_of * ((b.bs + 31) // 32) + b.local_tid // 32


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
  if "not" in ins.mods or (isinstance(ins.args[1], tuple)): pass
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
