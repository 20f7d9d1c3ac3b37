"""Memory instructions: ld/st/atom/red/cvta/isspacep in the global, shared, local, param, const and generic spaces
(PTX ISA 9.7.9, 9.7.12), and the no-ops (fences, prefetches) that change no value here."""
from __future__ import annotations
from typing import TYPE_CHECKING

import numpy as np

from . import floats as F
from .memory import LOCAL_WINDOW, SHARED_WINDOW, WINDOW_SIZE, Fault, check_aligned
from .ops_common import Unsupported, mods_type, op
from .parser import Addr, Instr, Reg, Sym, Vec, type_bytes
from .types import UINT, VALUE_DTYPE, is_float

if TYPE_CHECKING: from .executor import Batch, Executor  # noqa: F401


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
    if ex.launch.const_bank is not None:   # the bank the QMD binds, read through the VA space within its bytes (stricter)
      va, nbytes = ex.launch.const_bank
      bad = a + np.uint64(size) > np.uint64(nbytes)
      if bad.any(): raise Fault("const", int(a[np.argmax(bad)]), f"const access of {size} bytes at {int(a[np.argmax(bad)]):#x} outside the "
                                                                 f"{nbytes}-byte constant bank the launch binds at {va:#x}")
      return ex.glob.load(a, size, va)
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


@op("tex", "tld4", "txq", "suld", "sust", "sured", "suq", "istypep")
def _texture(ex, b, ins, m):
  raise Unsupported(f"{ins.op} (texture and surface access: the emulated SM has no texture unit; the sampler's filtering, "
                    "addressing modes and the descriptor heap the driver would fill are not modelled)")


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
  if uniq.size <= 256:   # contention on few addresses: each address's lanes in order, a scan where the op allows one
    order = np.argsort(idx, kind="stable")
    bounds = np.searchsorted(idx[order], uniq)
    scan = {"add": np.add, "min": np.fmin if is_float(t) else np.minimum, "max": np.fmax if is_float(t) else np.maximum,
            "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}.get(op_)
    xs = np.broadcast_to(np.asarray(x).astype(dt), idx.shape)
    for g, (a, n) in enumerate(zip(bounds.tolist(), counts.tolist())):
      lanes = order[a:a + n]
      if scan is not None and t not in ("f16", "bf16"):
        with np.errstate(all="ignore"): acc = scan.accumulate(np.concatenate([tv[uniq[g]:uniq[g] + 1], xs[lanes]]), dtype=dt)
        old[lanes] = acc[:-1].view(UINT[type_bytes(t)])
        tv[uniq[g]] = acc[-1]
        continue
      cur = tv[uniq[g]:uniq[g] + 1].copy()
      for k in lanes.tolist():   # cas, exch, inc, dec, half types: one lane after another
        old[k] = cur.view(UINT[type_bytes(t)])[0]
        cur = np.asarray(atomic_update(op_, t, cur, xs[k:k + 1], None if y is None else np.broadcast_to(y, idx.shape)[k:k + 1])).astype(dt)
      tv[uniq[g]] = cur[0]
    return old
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


