"""Pre-decoded forms of the instructions kernels spend their time in: each is compiled once per kernel into a closure
with its operand slots resolved (register name, view dtype, immediate value), so a step does no modifier parsing.

Only forms whose meaning is plain numpy arithmetic get one (integer add/sub/mul/mad/shift/logic without .sat/.cc,
f32 add/sub/mul/fma with .rn and no .ftz/.sat, setp without a boolean operator, mov, cvta.to.global, selp,
unpredicated-mask ld/st.global and ld.shared); every other form, and every operand the closure cannot resolve, takes the general
path in ops_*.py. A closure must give the same bits as that path: the corpus and the random programs judge both.
Registers are compact rank-6 arrays (executor.Batch): an element-wise form computes on its inputs' broadcast shape,
so a loop counter or a base pointer costs one lane, an address from %ctaid.y and %tid.y one per row, not T; a
global load gathers once per distinct address slot and a store writes every thread's lane in thread order.
"""
from __future__ import annotations
from typing import TYPE_CHECKING, Callable

import numpy as np

from . import floats as F
from .ops_alu import CMP, compare
from .ops_common import OPS, Unsupported
from .parser import SINK, Addr, Imm, Instr, Kernel, Reg, Vec, type_bytes
from .types import SINT, UINT, VALUE_DTYPE, storage_dtype

if TYPE_CHECKING: from .executor import Batch, Executor  # noqa: F401

Fast = Callable[["Executor", "Batch", "np.ndarray | None"], None]
INT = {f"{s}{n}" for s in "usb" for n in (16, 32, 64)}


def _reader(k: Kernel, op, t: str):
  """fn(ex, b) -> op's value as type t: a register of t's width is a view of its bits, an immediate a constant."""
  dt = VALUE_DTYPE[t]
  if isinstance(op, Reg) and op.name in k.regs and t != "pred":
    rt = k.regs[op.name]
    if rt != "pred" and type_bytes(rt) == type_bytes(t):
      name = op.name
      def reg(ex, b):
        a = b.compact.get(name)
        return (a if a is not None else ex.reg(b, op)).view(dt)
      return reg
  if isinstance(op, Reg) and t == "pred" and k.regs.get(op.name) == "pred":
    name = op.name
    return lambda ex, b: b.compact[name] if name in b.compact else ex.reg(b, op)
  if isinstance(op, Imm):
    from .executor import Executor
    try: v = Executor.rd(None, None, op, t)   # an immediate's value depends on nothing of the launch
    except Unsupported: return None
    return lambda ex, b: v
  if isinstance(op, Reg): return lambda ex, b: ex.fit(ex.reg(b, op), t)   # another width, or a special register
  return None


def _writer(k: Kernel, op, t: str):
  """fn(ex, b, v, m): v (type t) into register op for the threads in m (None: all)."""
  if not isinstance(op, Reg) or op is SINK or op.name not in k.regs: return None
  rt = k.regs[op.name]
  if (rt == "pred") != (t == "pred") or (t != "pred" and type_bytes(rt) != type_bytes(t)): return None
  name, sd, n = op.name, storage_dtype(rt), (1 if t == "pred" else type_bytes(t))
  def write(ex, b, v, m):
    if not isinstance(v, np.ndarray) or v.dtype.itemsize != n or (sd is np.bool_) != (v.dtype == np.bool_):
      return ex.wr(b, op, v, t, m)
    if v.dtype != sd: v = v.view(sd)
    if v.ndim != 6: v = b.lanes(v)
    if m is not None:
      old = b.compact.get(name)
      v = np.where(m.reshape(b.shape), v, old if old is not None else sd(0))
    b.compact[name] = v
  return write


def _binary(k, ins, t, f, nin=2, out_t=None):
  """A closure computing f(*inputs as type t) into args[0] (as out_t), on the inputs' compact shapes."""
  rs = [_reader(k, a, t) for a in ins.args[1:1 + nin]]
  w = _writer(k, ins.args[0], out_t or t)
  if None in rs or w is None: return None
  if nin == 1:
    r0, = rs
    return lambda ex, b, m: w(ex, b, np.asarray(f(r0(ex, b))), m)
  if nin == 2:
    r0, r1 = rs
    return lambda ex, b, m: w(ex, b, np.asarray(f(r0(ex, b), r1(ex, b))), m)
  r0, r1, r2 = rs
  return lambda ex, b, m: w(ex, b, np.asarray(f(r0(ex, b), r1(ex, b), r2(ex, b))), m)


def _compile(k: Kernel, ins: Instr) -> Fast | None:
  o, mods = ins.op, ins.mods
  t = mods[-1] if mods else ""
  if o in ("add", "sub", "mul", "mad", "and", "or", "xor") and t in INT and len(mods) <= 2:
    mode = mods[0] if len(mods) == 2 else None
    n = type_bytes(t)
    ut = "b" + str(8 * n)
    if o in ("and", "or", "xor") and mode is None:
      return _binary(k, ins, ut, {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[o])
    if o in ("add", "sub") and mode is None: return _binary(k, ins, ut, np.add if o == "add" else np.subtract)
    if o == "mul" and mode == "lo": return _binary(k, ins, ut, np.multiply)
    if o == "mad" and mode == "lo": return _binary(k, ins, ut, lambda a, c, d: a * c + d, 3)
    if o == "mul" and mode == "wide" and n < 8 and t[0] != "b":
      wt = (SINT if t[0] == "s" else UINT)[2 * n]
      return _binary(k, ins, t, lambda a, c: np.multiply(a, c, dtype=wt), out_t=t[0] + str(16 * n))   # widened in the loop
    return None
  if o in ("shl", "shr") and t in INT and len(mods) == 1 and isinstance(ins.args[2], Imm) and 0 <= ins.args[2].value < 8 * type_bytes(t):
    s = UINT[type_bytes(t)](ins.args[2].value)
    if o == "shl": return _binary(k, ins, "b" + t[1:], lambda a: a << s, 1)
    vt = ("s" if t[0] == "s" else "u") + t[1:]   # shr.sN keeps the sign, shr.uN / shr.bN fill with zeros
    s = VALUE_DTYPE[vt](ins.args[2].value)
    return _binary(k, ins, vt, lambda a: a >> s, 1)
  if o in ("add", "sub", "mul", "fma") and t == "f32" and set(mods) <= {"f32", "rn"} and (o != "fma" or "rn" in mods):
    if o == "fma": return _binary(k, ins, t, F.fma_f32_rn, 3)
    return _binary(k, ins, t, {"add": np.add, "sub": np.subtract, "mul": np.multiply}[o])
  if o == "setp" and len(mods) == 2 and not isinstance(ins.args[0], tuple) and isinstance(ins.args[0], Reg):
    cmp = mods[0]
    if t in INT and cmp in CMP:
      vt = t if t[0] != "b" else "u" + t[1:]
      return _binary(k, ins, vt, CMP[cmp], out_t="pred")
    if t in ("f32", "f64"): return _binary(k, ins, t, lambda a, c: compare(ins, t, a, c), out_t="pred")
    return None
  if (o == "mov" and len(mods) == 1 and t != "pred") or (o == "cvta" and mods == ("to", "global", "u64")):
    if isinstance(ins.args[0], Reg) and isinstance(ins.args[1], (Reg, Imm)) and t in VALUE_DTYPE:
      return _binary(k, ins, t, lambda a: a, 1)
    return None
  if o == "selp" and len(mods) == 1 and t in VALUE_DTYPE and t != "pred":
    rs = [_reader(k, a, x) for a, x in zip(ins.args[1:4], (t, t, "pred"))]
    w = _writer(k, ins.args[0], t)
    if None in rs or w is None: return None
    r0, r1, r2 = rs
    return lambda ex, b, m: w(ex, b, np.where(r2(ex, b), r0(ex, b), r1(ex, b)), m)
  if o in ("ld", "st") and mods[0] == "global" and set(mods[1:-1]) <= {"nc"} and t in VALUE_DTYPE and t != "pred":
    return _global(k, ins, t)
  if o == "ld" and mods[0] == "shared" and mods[1:-1] in ((), ("v2",), ("v4",)) and t in VALUE_DTYPE and t != "pred":
    return _shared_load(k, ins, t)
  return None


def _global(k: Kernel, ins: Instr, t: str) -> Fast | None:
  """ld/st.global of one scalar for every thread (a mask takes the general path: masked lanes must not fault)."""
  addr, val = (ins.args[1], ins.args[0]) if ins.op == "ld" else (ins.args[0], ins.args[1])
  if not (isinstance(addr, Addr) and isinstance(addr.base, Reg) and k.regs.get(addr.base.name) in ("u64", "b64", "s64")): return None
  size = type_bytes(t)
  base, off = addr.base.name, addr.offset
  general = OPS[ins.op]
  if ins.op == "ld":
    w = _writer(k, val, t)
    if w is None: return None
    dt = VALUE_DTYPE[t]
    def ld(ex, b, m):
      a = b.compact.get(base) if m is None else None
      if a is None: return general(ex, b, ins, m)
      w(ex, b, ex.glob.load(a.reshape(-1), size, off).view(dt).reshape(a.shape), None)   # one gather per distinct address slot
    return ld
  r = _reader(k, val, "b" + str(8 * size))
  if r is None: return None
  def st(ex, b, m):
    a = b.compact.get(base) if m is None else None
    if a is None: return general(ex, b, ins, m)
    ex.glob.store(b.flat(a), b.flat(b.lanes(r(ex, b))), size, off)   # every thread's store, in thread order
  return st


def _shared_load(k: Kernel, ins: Instr, t: str) -> Fast | None:
  """ld.shared (.v2/.v4) for every thread, on the address's compact shape and the block's: a tile's row read by every
  x of a block is one load per row per block (a mask takes the general path). Each element is checked and loaded
  at its own address, and the address is read before any destination is written, as in the general path."""
  dsts, addr = (ins.args[0].items if isinstance(ins.args[0], Vec) else (ins.args[0],)), ins.args[1]
  if not (isinstance(addr, Addr) and isinstance(addr.base, Reg) and k.regs.get(addr.base.name) in INT - {"u16", "s16", "b16"}):
    return None
  ws = [_writer(k, d, t) for d in dsts]
  if None in ws: return None
  size, dt, off, general = type_bytes(t), VALUE_DTYPE[t], addr.offset & 0xffffffffffffffff, OPS["ld"]
  def ld(ex, b, m):
    if m is not None: return general(ex, b, ins, m)
    a = ex.fit(ex.reg(b, addr.base), "u64")   # as the general path reads it: a 32-bit register zero-extended
    shape = np.broadcast_shapes(a.shape, b.block_index.shape)
    owner, a = np.broadcast_to(b.block_index, shape).reshape(-1), np.broadcast_to(a, shape).reshape(-1)
    words = [b.shared.load(owner, a + np.uint64((off + i * size) & 0xffffffffffffffff), size) for i in range(len(ws))]
    for w, x in zip(ws, words): w(ex, b, x.view(dt).reshape(shape), None)
  return ld


def compile_kernel(k: Kernel) -> list[Fast | None]:
  """The fast closure of each instruction of k (None where the general path runs), made once per kernel."""
  if k.fast is None: k.fast = [_compile(k, ins) for ins in k.instrs]
  return k.fast
