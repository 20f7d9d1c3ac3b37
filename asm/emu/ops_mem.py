"""Memory instructions: SMEM (scalar loads), GLOBAL/FLAT/SCRATCH (per-lane), DS (LDS), with the atomics LLVM emits.

Global addresses go through the dispatch's VirtualMemory (a fault names address and PC). LDS is one byte array per
workgroup of the batch; scratch one private array per lane. Flat addresses in the shared / private apertures reach
LDS / scratch as on hardware.
"""
from __future__ import annotations
import re

import numpy as np

from hcq.asm.emu.errors import IllegalInstruction, LDSFault, ScratchFault
from hcq.asm.emu.operands import PRIVATE_APERTURE_HI, SHARED_APERTURE_HI, scalar_reader
from hcq.asm.emu.operands import write_vgpr
from hcq.asm.emu.scratch import swizzled
from hcq.asm.emu.wave import EXEC, NULL, Waves

u8, u16, u32, u64, i64 = np.uint8, np.uint16, np.uint32, np.uint64, np.int64


# ---- byte-buffer primitives ---------------------------------------------------------------------------------
def gather(buf: np.ndarray, offs: np.ndarray, nbytes: int) -> np.ndarray:
  """(n, nbytes//4) uint32 for dword sizes, else (n, nbytes) uint8, read at byte offsets `offs` of a uint8 buffer: one
  per row (contiguous bytes), or (n, k) for pieces placed apart (k dwords, or k = nbytes single bytes: swizzled scratch)."""
  if offs.ndim == 2:
    if offs.shape[1] != nbytes: return buf[:buf.size // 4 * 4].view(u32)[offs >> 2]
    b = buf[offs]
    return b.view(u32) if nbytes % 4 == 0 else b
  if nbytes % 4 == 0 and offs.size and not np.any(offs & 3):
    u = buf[:buf.size // 4 * 4].view(u32)
    if nbytes == 4: return u[offs >> 2][:, None]
    return u[(offs >> 2)[:, None] + np.arange(nbytes // 4)]
  b = buf[offs[:, None] + np.arange(nbytes)]
  return b.view(u32) if nbytes % 4 == 0 else b


def scatter(buf: np.ndarray, offs: np.ndarray, data: np.ndarray) -> None:
  """Write rows of `data` ((n, k) uint32 or uint8) at byte offsets (or (n, k) offsets, as gather reads them); a later
  row wins where two overlap (lane order)."""
  if offs.ndim == 2:
    if data.dtype == u32 and offs.shape == data.shape:
      buf[:buf.size // 4 * 4].view(u32)[offs >> 2] = data
    else:
      buf[offs] = np.ascontiguousarray(data).view(u8).reshape(offs.shape)
    return
  if data.dtype == u32 and offs.size and not np.any(offs & 3):
    u = buf[:buf.size // 4 * 4].view(u32)
    if data.shape[1] == 1: u[offs >> 2] = data[:, 0]
    else: u[(offs >> 2)[:, None] + np.arange(data.shape[1])] = data
    return
  b = np.ascontiguousarray(data).view(u8).reshape(len(offs), -1)
  buf[offs[:, None] + np.arange(b.shape[1])] = b


def _as_int(x: np.ndarray, signed: bool, bits: int) -> np.ndarray:
  x = x.astype(u64)
  return ((x.astype(i64) << (64 - bits)) >> (64 - bits)).astype(u64) if signed else x


ATOMIC_OPS = {
  "add": lambda o, s, b: o + s, "sub": lambda o, s, b: o - s, "swap": lambda o, s, b: s,
  "and": lambda o, s, b: o & s, "or": lambda o, s, b: o | s, "xor": lambda o, s, b: o ^ s,
  "umin": lambda o, s, b: np.minimum(o, s), "umax": lambda o, s, b: np.maximum(o, s),
  "smin": lambda o, s, b: np.where(_as_int(o, True, b).astype(i64) < _as_int(s, True, b).astype(i64), o, s),
  "smax": lambda o, s, b: np.where(_as_int(o, True, b).astype(i64) > _as_int(s, True, b).astype(i64), o, s),
  "inc": lambda o, s, b: np.where(o >= s, u64(0), o + u64(1)), "dec": lambda o, s, b: np.where((o == 0) | (o > s), s, o - u64(1)),
  "csub": lambda o, s, b: np.where(o >= s, o - s, u64(0)), "rsub": lambda o, s, b: s - o,
}


def _fop(fn):
  def f(o, s, b):
    dt, ut = (np.float32, u32) if b == 32 else (np.float64, u64)
    r = fn(o.astype(ut).view(dt), s.astype(ut).view(dt))
    return r.astype(dt).view(ut).astype(u64)
  return f


def _pk_add(t):
  """Two 16-bit float adds in one dword (ds_pk_add_f16 / _bf16), each rounded to nearest even."""
  from hcq.asm.emu.numerics import bits_to, to_bits
  def f(o, s, b):
    o32, s32 = o.astype(u32), s.astype(u32)
    lo, hi = (bits_to(o32, t, h).astype(np.float32) + bits_to(s32, t, h).astype(np.float32) for h in (False, True))
    lo, hi = (x.astype(np.float16) if t == "f16" else x for x in (lo, hi))
    return ((to_bits(lo, t) & u32(0xffff)) | (to_bits(hi, t) << u32(16))).astype(u64)
  return f


ATOMIC_OPS.update({"cond_sub": lambda o, s, b: np.where(o >= s, o - s, o), "pk_add_f16": _pk_add("f16"), "pk_add_bf16": _pk_add("bf16")})
ATOMIC_OPS.update({"add_f32": _fop(np.add), "min_f32": _fop(np.fmin), "max_f32": _fop(np.fmax), "add_f64": _fop(np.add),
                   "min_f64": _fop(np.fmin), "max_f64": _fop(np.fmax), "add_rtn_f32": _fop(np.add)})


_ATOMIC_TYPES = r"(u32|i32|b32|f32|u64|i64|b64|f64|f16|bf16)"
_RENAMED = {"storexchg": "swap", "cmpstore": "cmpswap", "min_num": "min", "max_num": "max", "sub_clamp": "csub", "clamp_sub": "csub"}


def atomic_op(core: str, t: str) -> str | None:
  """An atomic mnemonic's operation and type (global_atomic_min_i32 -> 'min', 'i32') as an ATOMIC_OPS key (or cmpswap,
  mskor, wrap); None for what is not modelled. gfx12 renames: min_num/max_num (f32), sub_clamp; pk_add on f16/bf16."""
  op = _RENAMED.get(core, core)
  if op == "pk_add": op = f"pk_add_{t}"
  elif t[0] == "f" or t == "bf16":
    if op != "swap": op = f"{op}_{t}"   # cmpswap_f32/_f64 compare as floats
  elif op in ("min", "max"): op = ("s" if t[0] == "i" else "u") + op
  return op if op in ATOMIC_OPS or op in ("cmpswap", "cmpswap_f32", "cmpswap_f64", "mskor", "wrap") else None


def atomic(buf: np.ndarray, offs: np.ndarray, src: np.ndarray, cmp: np.ndarray | None, op: str, bits: int) -> np.ndarray:
  """Apply an atomic per lane in lane order (lanes hitting one address see each other's results); the old values."""
  if offs.ndim == 2: raise NotImplementedError(f"a {bits}-bit atomic whose dwords the scratch slot places apart is not modelled")
  n = offs.size
  old = np.zeros(n, u64)
  if n == 0: return old
  nbytes = bits // 8
  m = u64((1 << bits) - 1)
  fn = ATOMIC_OPS.get(op)
  order = np.argsort(offs, kind="stable")
  so = offs[order]
  start = np.r_[0, np.nonzero(so[1:] != so[:-1])[0] + 1]
  rank = np.empty(n, i64)
  rank[order] = np.arange(n) - np.repeat(start, np.diff(np.r_[start, n]))
  for r in range(int(rank.max()) + 1):
    sel = np.nonzero(rank == r)[0]
    cur = gather(buf, offs[sel], nbytes).view(u32 if bits == 32 else u64).reshape(-1).astype(u64)
    s = src[sel]
    if op == "cmpswap": new = np.where(cur == cmp[sel], s, cur)
    elif op.startswith("cmpswap_f"):   # RDNA3 ISA *_CMPSWAP_F32 / DS_CMPSTORE_F32: tmp.f32 == cmp.f32 (+0 == -0; a NaN equals nothing)
      dt, ut = (np.float32, u32) if bits == 32 else (np.float64, u64)
      new = np.where(cur.astype(ut).view(dt) == cmp[sel].astype(ut).view(dt), s, cur)
    elif op == "mskor": new = (cur & ~s) | cmp[sel]   # ds_mskor: clear data0's bits, set data1's
    elif op == "wrap": new = np.where(cur >= s, cur - s, cur + cmp[sel]) & m   # ds_wrap: down by data0 or up by data1
    else: new = fn(cur, s, bits) & m
    scatter(buf, offs[sel], new.astype(u32 if bits == 32 else u64).reshape(-1, 1).view(u32))
    old[sel] = cur
  return old


# ---- address spaces -----------------------------------------------------------------------------------------
def _lds_pieces(st: Waves, w, addr: np.ndarray, ex: np.ndarray, size: int, pc: int):
  """addr: (k, L) LDS byte addresses; the pieces of the workgroup-shared LDS array for the active lanes."""
  a = addr[ex].astype(i64)
  if a.size and (a.min() < 0 or a.max() + size > st.lds_bytes):
    bad = int(a[np.argmax((a < 0) | (a + size > st.lds_bytes))])
    raise LDSFault(f"LDS access of {size} bytes at {bad:#x} outside the workgroup's {st.lds_bytes} bytes", pc)
  wg = np.broadcast_to(st.wg[w][:, None], ex.shape)[ex]
  return [(st.lds, wg * max(st.lds_bytes, 4) + a, None)]


def _scratch_pieces(st: Waves, w, addr: np.ndarray, ex: np.ndarray, size: int, pc: int, write: bool):
  """addr: (k, L) private byte offsets. In the wave's scratch slot in GPU memory, lanes interleaved by dword
  (hcq.asm.emu.scratch), when the launch gave the waves slots; else in the emulator's own per-lane array."""
  a = addr[ex].astype(i64)
  # stricter than the GPU, which lets a lane reach past its segment into its neighbours'
  if a.size and (a.min() < 0 or a.max() + size > st.private_bytes):
    bad = int(a[np.argmax((a < 0) | (a + size > st.private_bytes))])
    raise ScratchFault(f"scratch access of {size} bytes at {bad:#x} outside the lane's {st.private_bytes}-byte private segment", pc)
  waves = np.arange(st.count)[w]
  if st.scratch_slot is None:
    lane = (waves[:, None] * st.lanes + st.lane_ids[None, :].astype(i64))
    lane = np.broadcast_to(lane, ex.shape)[ex]
    return [(st.scratch, lane * st.private_bytes + a, None)]
  if not a.size: return []
  slot = np.broadcast_to(st.scratch_slot[waves][:, None], ex.shape)[ex]
  lane = np.broadcast_to(st.lane_ids[None, :].astype(i64), ex.shape)[ex]
  if size % 4 == 0 and not np.any(a & 3): part, unit = a[:, None] + 4 * np.arange(size // 4), 4   # whole dwords, each placed apart
  elif size < 4 and not np.any((a & 3) + size > 4): part, unit = a[:, None], size                  # within one dword
  else: part, unit = a[:, None] + np.arange(size), 1                                                 # bytes, each placed apart
  where = swizzled(slot[:, None], lane[:, None], part, st.lanes)
  if part.shape[1] == 1: return st.mem.locate(where[:, 0], unit, write, pc)
  pieces = st.mem.locate(where.reshape(-1), unit, write, pc)   # a fault names the first element that is not mapped
  if len(pieces) > 1 or pieces[0][2] is not None:
    raise NotImplementedError("a scratch access whose parts lie in different mappings is not modelled (a ring is one buffer)")
  return [(pieces[0][0], pieces[0][1].reshape(where.shape), None)]


_APERTURES_LO, _APERTURES_HI = min(SHARED_APERTURE_HI, PRIVATE_APERTURE_HI) << 32, (max(SHARED_APERTURE_HI, PRIVATE_APERTURE_HI) + 1) << 32


def _global_pieces(st: Waves, w, addr: np.ndarray, ex: np.ndarray, size: int, pc: int, write: bool):
  a = np.broadcast_to(addr, ex.shape).reshape(-1) if st.exec_full(w, ex) else addr[ex]
  if not a.size: return []
  fast = st.mem.locate_fast(a, size, write)
  if fast is not None: return fast
  lo, hi = int(a.min()), int(a.max())
  if hi >= _APERTURES_LO and lo < _APERTURES_HI:
    top = (a >> u64(32)).astype(u32)
    if np.any(top == SHARED_APERTURE_HI) or np.any(top == PRIVATE_APERTURE_HI): return _flat_pieces(st, w, addr, ex, size, pc, write)
  return st.mem.locate(a, size, write, pc, (lo, hi))


def _flat_pieces(st, w, addr, ex, size, pc, write):
  """Flat addresses: each lane to LDS, scratch or global memory by aperture."""
  hi = (addr >> u64(32)).astype(u32)
  low = (addr & u64(0xffffffff)).astype(i64)
  pos = np.arange(int(ex.sum()))
  out = []
  for kind in ("lds", "scratch", "global"):
    sel = ex & ((hi == SHARED_APERTURE_HI) if kind == "lds" else (hi == PRIVATE_APERTURE_HI) if kind == "scratch" else ((hi != SHARED_APERTURE_HI) & (hi != PRIVATE_APERTURE_HI)))
    if not sel.any(): continue
    lanes = pos[sel[ex]]
    if kind == "lds": pieces = _lds_pieces(st, w, low, sel, size, pc)
    elif kind == "scratch": pieces = _scratch_pieces(st, w, low, sel, size, pc, write)
    else: pieces = st.mem.locate(addr[sel], size, write, pc)
    out += [(b, o, lanes if l is None else lanes[l]) for b, o, l in pieces]
  return out


# ---- data movement between lanes and pieces -----------------------------------------------------------------
def _load(pieces, n: int, nbytes: int) -> np.ndarray:
  """Gather the pieces into one (n, ...) array in active-lane order."""
  if len(pieces) == 1 and pieces[0][2] is None: return gather(pieces[0][0], pieces[0][1], nbytes)   # one mapping, every lane
  out = np.zeros((n, nbytes // 4) if nbytes % 4 == 0 else (n, nbytes), u32 if nbytes % 4 == 0 else u8)
  for buf, offs, lanes in pieces:
    if lanes is None: out[:] = gather(buf, offs, nbytes)
    else: out[lanes] = gather(buf, offs, nbytes)
  return out


def _store(pieces, data: np.ndarray) -> None:
  for buf, offs, lanes in pieces:
    scatter(buf, offs, data if lanes is None else data[lanes])


def _extend(b: np.ndarray, signed: bool) -> np.ndarray:
  """(n, 1|2) bytes -> (n,) uint32, zero- or sign-extended."""
  v = b[:, 0].astype(u32) if b.shape[1] == 1 else b.view(u16).reshape(-1).astype(u32)
  bits = 8 * b.shape[1]
  return ((v.astype(np.int32) << (32 - bits)) >> (32 - bits)).view(u32) if signed else v


_LOAD = re.compile(r"(load|store)_(d16_hi_|d16_)?(b8|b16|b32|b64|b96|b128|u8|i8|u16|i16)$")


def _shape(kind: str) -> tuple[int, bool, str]:
  """b32 -> (4 bytes, signed?, mode) where mode is dword / ext (u8..i16 -> one dword) / d16 / d16_hi."""
  m = _LOAD.search(kind)
  d16, t = m.group(2), m.group(3)
  nbytes = {"b8": 1, "u8": 1, "i8": 1, "b16": 2, "u16": 2, "i16": 2, "b32": 4, "b64": 8, "b96": 12, "b128": 16}[t]
  mode = "d16_hi" if d16 == "d16_hi_" else "d16" if d16 == "d16_" else ("dword" if nbytes >= 4 else "ext")
  return nbytes, t.startswith("i"), mode


def _write_loaded(st: Waves, w, vdst: int, ex: np.ndarray, data: np.ndarray, nbytes: int, signed: bool, mode: str) -> None:
  if mode == "dword" and st.exec_full(w, ex):
    for i in range(nbytes // 4): write_vgpr(st, vdst + i, w, data[:, i].reshape(ex.shape), ex)
    return
  if mode == "dword":
    for i in range(nbytes // 4):
      col = np.zeros(ex.shape, u32); col[ex] = data[:, i]
      write_vgpr(st, vdst + i, w, col, ex)
    return
  val = _extend(data, signed)
  col = np.zeros(ex.shape, u32); col[ex] = val
  if mode == "ext": write_vgpr(st, vdst, w, col, ex); return
  cur = st.v[vdst][w]
  col &= u32(0xffff)
  new = (cur & u32(0xffff0000)) | col if mode == "d16" else (cur & u32(0xffff)) | (col << u32(16))
  write_vgpr(st, vdst, w, new, ex)


def _store_data(st: Waves, w, data: int, ex: np.ndarray, nbytes: int, mode: str) -> np.ndarray:
  if nbytes >= 4 and st.exec_full(w, ex): return np.stack([st.v[data + i][w].reshape(-1) for i in range(nbytes // 4)], axis=1)
  if nbytes >= 4: return np.stack([st.v[data + i][w][ex] for i in range(nbytes // 4)], axis=1)
  x = st.v[data][w][ex]
  if mode == "d16_hi": x = x >> u32(16)
  return x.astype(u32).view(u8).reshape(-1, 4)[:, :nbytes].copy()


# ---- SMEM ---------------------------------------------------------------------------------------------------
_SMEM_SUBDWORD = {"u8": (1, False), "i8": (1, True), "u16": (2, False), "i16": (2, True)}


def build_smem(ins, pc: int):
  """s_load / s_buffer_load (gfx11: b32-b512; gfx12 adds u8/i8/u16/i16), the offset a signed immediate as wide as the
  encoding's field (21 bits on gfx11, 24 on gfx12); cache and prefetch ops do nothing."""
  name, v = ins.opcode.mnemonic.removesuffix("_e64"), ins.values
  if name in ("s_dcache_inv", "s_gl1_inv", "s_atc_probe", "s_atc_probe_buffer") or "prefetch" in name: return lambda st, w: None
  m = re.match(r"s_(buffer_)?load_(b\d+|u8|i8|u16|i16)$", name)
  if not m: return None
  sub = _SMEM_SUBDWORD.get(m.group(2))
  ndw = 1 if sub else int(m.group(2)[1:]) // 32
  buffer = m.group(1) is not None
  sbase, sdata = v["sbase"] * 2, v["sdata"]
  f = ins.opcode.fmt.fields["offset"]
  bits = f.hi - f.lo + 1
  off = v["offset"] - (1 << bits) if v["offset"] >> (bits - 1) & 1 else v["offset"]
  soff = scalar_reader(v["soffset"]) if v["soffset"] != NULL else None
  base = scalar_reader(sbase, 64)
  def smem(st: Waves, w):
    b = base(st, w)
    if buffer: b = b & u64(0xffffffffffff)
    a = b.astype(i64) + off + (soff(st, w).astype(i64) if soff is not None else 0)
    if sub:   # a byte or short at its own (aligned to its size) address, zero- or sign-extended
      a = (a & ~(sub[0] - 1)).astype(u64)
      data = _extend(_load(st.mem.locate(a, sub[0], False, pc), len(a), sub[0]), sub[1])[:, None]
    else:
      a = (a & ~3).astype(u64)
      data = _load(st.mem.locate_fast(a, 4 * ndw) or st.mem.locate(a, 4 * ndw, False, pc), len(a), 4 * ndw)
    for i in range(ndw):
      if sdata + i < 128: st.s[sdata + i, w] = data[:, i]
    if sdata + ndw > EXEC: st.exec_written()
  return smem


# ---- GLOBAL / FLAT / SCRATCH ------------------------------------------------------------------------------------
def _pick(v: dict, *names: str):
  """The first of `names` the encoding has: gfx12's VMEM encodings rename fields (addr -> vaddr, data -> vsrc,
  offset -> ioffset)."""
  for n in names:
    if n in v: return v[n]
  raise KeyError(f"none of the fields {names}")


def _signed_offset(ins, v: dict) -> int:
  """The instruction's immediate offset, signed, as wide as its field (13 bits on gfx11 GLOBAL, 24 on gfx12)."""
  name = "ioffset" if "ioffset" in v else "offset"
  f = ins.opcode.fmt.fields[name]
  bits = f.hi - f.lo + 1
  return v[name] - (1 << bits) if v[name] >> (bits - 1) & 1 else v[name]


_VMEM_KIND = {"GLOBAL": "GLOBAL", "FLAT": "FLAT", "SCRATCH": "SCRATCH", "VGLOBAL": "GLOBAL", "VFLAT": "FLAT", "VSCRATCH": "SCRATCH"}


def build_vmem(ins, pc: int):
  name, v = ins.opcode.mnemonic, ins.values
  fmt = _VMEM_KIND[ins.opcode.fmt.name]
  if name.split("_", 1)[1] in ("inv", "wb", "wbinv"): return lambda st, w: None   # gfx12 cache control: nothing cached here
  off = _signed_offset(ins, v)
  saddr, vaddr = v.get("saddr", NULL), _pick(v, "addr", "vaddr")
  if "data" not in v and "vsrc" in v: v = {**v, "data": v["vsrc"]}
  if "glc" not in v and "th" in v: v = {**v, "glc": v["th"] & 1}   # gfx12 atomics return the old value with TH_ATOMIC_RETURN
  kind = name.split("_", 1)[1]
  addtid = kind in ("load_addtid_b32", "store_addtid_b32")
  if fmt == "SCRATCH":
    use_v = bool(v.get("sve", 0))
    rs = scalar_reader(saddr) if saddr != NULL else None
    def address(st, w):
      a = np.zeros((st.count if isinstance(w, slice) else len(w), st.lanes), i64) + off
      if use_v: a = a + st.v[vaddr][w].astype(i64)
      if rs is not None: a = a + rs(st, w).astype(i64)[:, None]
      return a
    pieces = lambda st, w, a, ex, size, write: _scratch_pieces(st, w, a, ex, size, pc, write)
  else:
    rs = scalar_reader(saddr, 64) if (fmt == "GLOBAL" and saddr not in (NULL, 0x7d)) else None
    if addtid:   # saddr (0 with off) + offset + lane * 4; no VGPR address
      def address(st, w):
        base = rs(st, w)[:, None] if rs is not None else np.zeros((1, 1), u64)
        return base + (st.lane_ids[None, :].astype(u64) * u64(4)) + u64(off & 0xffffffffffffffff)
      kind = kind.replace("addtid_", "")
    else:
      def address(st, w):
        if rs is not None: return rs(st, w)[:, None] + st.v[vaddr][w].astype(u64) + u64(off & 0xffffffffffffffff)
        return (st.v[vaddr][w].astype(u64) | (st.v[vaddr + 1][w].astype(u64) << u64(32))) + u64(off & 0xffffffffffffffff)
    pieces = lambda st, w, a, ex, size, write: _global_pieces(st, w, a, ex, size, pc, write)
  if kind.startswith(("load_", "store_")) and "lds" not in kind:
    nbytes, signed, mode = _shape(kind)
    if kind.startswith("load_"):
      vdst = v["vdst"]
      def load(st: Waves, w):
        ex = st.exec_lanes(w)
        if not ex.any(): return
        data = _load(pieces(st, w, address(st, w), ex, nbytes, False), int(ex.sum()), nbytes)
        _write_loaded(st, w, vdst, ex, data, nbytes, signed, mode)
      return load
    data_reg = v["data"]
    def store(st: Waves, w):
      ex = st.exec_lanes(w)
      if not ex.any(): return
      _store(pieces(st, w, address(st, w), ex, nbytes, True), _store_data(st, w, data_reg, ex, nbytes, mode))
    return store
  m = re.match(r"atomic_(\w+?)_" + _ATOMIC_TYPES + "$", kind)
  if m:
    op, t = atomic_op(m.group(1), m.group(2)), m.group(2)
    bits = 64 if t.endswith("64") else 32
    if op is None or op in ("mskor", "wrap"): return None
    return _atomic_builder(op, bits, v["data"], v["vdst"], bool(v.get("glc", 0)), address, pieces)
  return None


def _atomic_builder(op, bits, data, vdst, returns, address, pieces, lanes_ok=None):
  nd = bits // 32
  def atom(st: Waves, w):
    ex = st.exec_lanes(w)
    if lanes_ok is not None: ex = ex & lanes_ok(st, w, ex)
    if not ex.any(): return
    n = int(ex.sum())
    def val(r):
      lo = st.v[r][w][ex].astype(u64)
      return lo | (st.v[r + 1][w][ex].astype(u64) << u64(32)) if bits == 64 else lo
    src = val(data)
    cmp = val(data + nd) if op.startswith("cmpswap") else None
    old = np.zeros(n, u64)
    for buf, offs, lanes in pieces(st, w, address(st, w), ex, bits // 8, True):
      sel = slice(None) if lanes is None else lanes
      old[sel] = atomic(buf, offs, src[sel], None if cmp is None else cmp[sel], op, bits)
    if returns:
      for i in range(nd):
        col = np.zeros(ex.shape, u32); col[ex] = ((old >> u64(32 * i)) & u64(0xffffffff)).astype(u32)
        write_vgpr(st, vdst + i, w, col, ex)
  return atom


# ---- DS -----------------------------------------------------------------------------------------------------
_DS_ATOM = {"add": "add", "sub": "sub", "rsub": "rsub", "inc": "inc", "dec": "dec", "min_i32": "smin", "max_i32": "smax", "min_u32": "umin",
            "max_u32": "umax", "and": "and", "or": "or", "xor": "xor", "min_i64": "smin", "max_i64": "smax", "min_u64": "umin", "max_u64": "umax"}


def build_ds(ins, pc: int):
  name, v = ins.opcode.mnemonic, ins.values
  addr_reg, d0, d1, vdst = v["addr"], v["data0"], v["data1"], v["vdst"]
  o0, o1 = v["offset0"], v["offset1"]
  base_off = o0 | (o1 << 8)
  def address(st, w, extra):
    return (st.v[addr_reg][w].astype(i64) + extra) & 0xffffffff   # 32-bit address arithmetic (LLVM folds negative bases into offsets)
  pieces = lambda st, w, a, ex, size: _lds_pieces(st, w, a, ex, size, pc)
  kind = name[3:]
  m = re.match(r"(load|store)_2addr_(stride64_)?b(32|64)$", kind)
  if m:
    size = int(m.group(3)) // 8
    scale = size * (64 if m.group(2) else 1)
    if m.group(1) == "load":
      def load2(st: Waves, w):
        ex = st.exec_lanes(w)
        if not ex.any(): return
        n = int(ex.sum())
        a = _load(pieces(st, w, address(st, w, o0 * scale), ex, size), n, size)
        b = _load(pieces(st, w, address(st, w, o1 * scale), ex, size), n, size)
        _write_loaded(st, w, vdst, ex, np.concatenate([a, b], axis=1), 2 * size, False, "dword")
      return load2
    def store2(st: Waves, w):
      ex = st.exec_lanes(w)
      if not ex.any(): return
      _store(pieces(st, w, address(st, w, o0 * scale), ex, size), _store_data(st, w, d0, ex, size, "dword"))
      _store(pieces(st, w, address(st, w, o1 * scale), ex, size), _store_data(st, w, d1, ex, size, "dword"))
    return store2
  if kind in ("load_addtid_b32", "store_addtid_b32"):   # LDS[M0[15:0] + offset + lane * 4]
    def addtid(st: Waves, w):
      ex = st.exec_lanes(w)
      if not ex.any(): return
      a = (st.s[125, w].astype(i64) & 0xffff)[:, None] + base_off + st.lane_ids[None, :].astype(i64) * 4
      a = np.broadcast_to(a, ex.shape)
      if kind.startswith("load"): _write_loaded(st, w, vdst, ex, _load(pieces(st, w, a, ex, 4), int(ex.sum()), 4), 4, False, "dword")
      else: _store(pieces(st, w, a, ex, 4), _store_data(st, w, d0, ex, 4, "dword"))
    return addtid
  m = re.match(r"storexchg_2addr_(stride64_)?rtn_b(32|64)$", kind)
  if m:   # two exchanges: data0 at offset0, data1 at offset1; the old values come back in vdst (then vdst + size)
    size = int(m.group(2)) // 8
    scale = size * (64 if m.group(1) else 1)
    nd = size // 4
    def xchg2(st: Waves, w):
      ex = st.exec_lanes(w)
      if not ex.any(): return
      n = int(ex.sum())
      olds = []
      for o, d in ((o0, d0), (o1, d1)):
        p = pieces(st, w, address(st, w, o * scale), ex, size)
        olds.append(_load(p, n, size))
        _store(p, _store_data(st, w, d, ex, size, "dword"))
      _write_loaded(st, w, vdst, ex, np.concatenate(olds, axis=1), 2 * size, False, "dword")
    return xchg2
  if kind == "condxchg32_rtn_b64":   # per dword of data: bit 31 set -> store its low 31 bits; the old dwords return
    def condxchg(st: Waves, w):
      ex = st.exec_lanes(w)
      if not ex.any(): return
      a = address(st, w, base_off) & 0xfff8
      olds = []
      for half in range(2):
        p = pieces(st, w, a + 4 * half, ex, 4)
        old = _load(p, int(ex.sum()), 4)
        new = st.v[d0 + half][w][ex]
        _store(p, np.where((new >> u32(31)) == 1, new & u32(0x7fffffff), old[:, 0])[:, None])
        olds.append(old)
      _write_loaded(st, w, vdst, ex, np.concatenate(olds, axis=1), 8, False, "dword")
    return condxchg
  if kind.startswith(("load_", "store_")) and "addtid" not in kind:
    # DS spells d16 as a suffix (ds_load_u16_d16_hi, ds_store_b8_d16_hi): the GLOBAL order for _shape
    m16 = re.match(r"(load|store)_(\w+?)_(d16_hi|d16)$", kind)
    if m16: kind = f"{m16.group(1)}_{m16.group(3)}_{m16.group(2)}"
    nbytes, signed, mode = _shape(kind)
    if kind.startswith("load_"):
      def load(st: Waves, w):
        ex = st.exec_lanes(w)
        if not ex.any(): return
        data = _load(pieces(st, w, address(st, w, base_off), ex, nbytes), int(ex.sum()), nbytes)
        _write_loaded(st, w, vdst, ex, data, nbytes, signed, mode)
      return load
    def store(st: Waves, w):
      ex = st.exec_lanes(w)
      if not ex.any(): return
      _store(pieces(st, w, address(st, w, base_off), ex, nbytes), _store_data(st, w, d0, ex, nbytes, mode))
    return store
  if kind == "bpermute_b32" or kind == "permute_b32":
    def perm(st: Waves, w):
      ex = st.exec_lanes(w)
      idx = ((address(st, w, base_off) >> 2) % st.lanes).astype(i64)
      src = np.where(ex, st.v[d0][w], u32(0))
      k = np.arange(idx.shape[0])[:, None]
      if kind == "bpermute_b32": out = src[k, idx]
      else:
        out = np.zeros_like(src)
        for lane in range(st.lanes):
          act = ex[:, lane]
          out[k[act, 0], idx[act, lane]] = src[act, lane]
      write_vgpr(st, vdst, w, out, ex)
    return perm
  if kind == "nop": return lambda st, w: None
  if kind == "swizzle_b32": return _ds_swizzle(v, pc)
  if kind in ("append", "consume"): return _ds_append(kind, v, pc)
  base = kind.replace("_rtn", "")
  m = re.match(r"(cmpstore|storexchg|mskor|wrap|add|sub|rsub|inc|dec|min|max|min_num|max_num|and|or|xor|cond_sub|sub_clamp|pk_add)_"
               r"(u32|i32|b32|f32|u64|i64|b64|f64|f16|bf16)$", base)
  if m:
    returns = "_rtn" in kind
    op, t = atomic_op(m.group(1), m.group(2)), m.group(2)
    bits = 64 if t.endswith("64") else 32
    if op is None: return None
    nd = bits // 32
    def datom(st: Waves, w):
      ex = st.exec_lanes(w)
      if not ex.any(): return
      def val(r):
        lo = st.v[r][w][ex].astype(u64)
        return lo | (st.v[r + 1][w][ex].astype(u64) << u64(32)) if bits == 64 else lo
      src = val(d0)
      cmp = val(d1) if op.startswith("cmpswap") or op in ("mskor", "wrap") else None   # gfx11 ds_cmpstore: data0 is the new value, data1 the compare value
      (buf, offs, _), = pieces(st, w, address(st, w, base_off), ex, bits // 8)
      old = atomic(buf, offs, src, cmp, op, bits)
      if returns:
        for i in range(nd):
          col = np.zeros(ex.shape, u32); col[ex] = ((old >> u64(32 * i)) & u64(0xffffffff)).astype(u32)
          write_vgpr(st, vdst + i, w, col, ex)
    return datom
  return None


def _ds_swizzle(v, pc):
  """ds_swizzle_b32: offset[15] quad-permute mode (2 bits per lane of the quad), else bit-mask mode over groups of 32:
  source lane = ((lane & and) | or) ^ xor."""
  off, d0, vdst = v["offset0"] | (v["offset1"] << 8), v["addr"], v["vdst"]
  def op(st: Waves, w):
    lane = np.arange(st.lanes)
    if off & 0x8000: src = (lane & ~3) | ((off >> (2 * (lane & 3))) & 3)
    else: src = (lane & ~31) | ((((lane & 31) & (off & 31)) | ((off >> 5) & 31)) ^ ((off >> 10) & 31))
    ex = st.exec_lanes(w)
    x = np.where(ex, st.v[d0][w], u32(0))[:, src]
    write_vgpr(st, vdst, w, x, ex)
  return op


def _ds_append(kind, v, pc):
  """ds_append / ds_consume: the LDS dword at M0's base + offset grows / shrinks by the wave's active lane count;
  every lane gets the old value."""
  off, vdst = v["offset0"] | (v["offset1"] << 8), v["vdst"]
  def op(st: Waves, w):
    ex = st.exec_lanes(w)
    waves = np.arange(st.count)[w]
    n = ex.sum(axis=1).astype(u64)
    addr = ((st.s[125, w].astype(i64) & 0xffff) + off)
    for k, wave in enumerate(waves.tolist()):
      if not n[k]: continue
      pieces = _lds_pieces(st, np.array([wave]), addr[k:k + 1, None], np.ones((1, 1), bool), 4, pc)
      buf, offs, _ = pieces[0]
      old = atomic(buf, offs, np.array([n[k]]), None, "add" if kind == "append" else "sub", 32)
      cur = st.v[vdst][wave]
      st.v[vdst][wave] = np.where(ex[k], u32(old[0]), cur)
  return op


# ---- MUBUF / MTBUF (buffer resource V# in 4 SGPRs) -----------------------------------------------------------------
def _rsrc_sgpr(ins) -> int:
  """The first SGPR of the V#: gfx9/gfx11 encode it divided by 4 in a 5-bit field; gfx12's VBUFFER holds the SGPR number
  itself in 7 bits (llvm-mc-19 -mcpu=gfx1201 encodes s[4:7] as 4 and s[8:11] as 8 in bits 47:41)."""
  name = "srsrc" if "srsrc" in ins.values else "rsrc"
  f = ins.opcode.fmt.fields[name]
  return ins.values[name] * (4 if f.hi - f.lo + 1 == 5 else 1)


def _buffer_address(v, pc: int, gfx9: bool, rs: int):
  """address(st, w, ex, nbytes, extra=0) -> (addresses, lanes in range) for a MUBUF/MTBUF instruction (`extra`: the
  byte offset of one dword of a wider access, which is range-checked per dword). V# base and stride as on every arch;
  the range check is gfx10+'s OOB_SELECT, or with `gfx9` GCN's (AMD's Vega / CDNA3 ISA guides, "Range checking"): a
  structured buffer (idxen and stride != 0) checks index < num_records, a raw one the offset (instruction offset +
  VGPR offset, not soffset) < num_records in bytes. An out-of-range lane loads 0 and its store is dropped."""
  rsrc = scalar_reader(rs, 64), scalar_reader(rs + 2, 64)
  soff = scalar_reader(v["soffset"]) if v["soffset"] != NULL else None
  offen, idxen, inst_off, vaddr = bool(v["offen"]), bool(v["idxen"]), _pick(v, "offset", "ioffset"), v["vaddr"]
  def address(st: Waves, w, ex, nbytes, extra=0):
    d01, d23 = rsrc[0](st, w), rsrc[1](st, w)
    base = (d01 & u64(0xffffffffffff))[:, None]
    stride = ((d01 >> u64(48)) & u64(0x3fff)).astype(i64)[:, None]
    num = (d23 & u64(0xffffffff)).astype(i64)[:, None]
    index = st.v[vaddr][w].astype(i64) if idxen else np.zeros(ex.shape, i64)
    voff = st.v[vaddr + (1 if idxen else 0)][w].astype(i64) if offen else np.zeros(ex.shape, i64)
    off = voff + (inst_off + extra)
    so = soff(st, w).astype(i64)[:, None] if soff is not None else 0
    if gfx9:
      # swizzled (dword 1 bit 31) and ADD_TID (dword 3 bit 23) addressing interleave records per lane: not modelled
      if (((d01 >> u64(63)) | (d23 >> u64(55))) & u64(1)).any():
        raise IllegalInstruction("a gfx9 V# with SWIZZLE_ENABLE or ADD_TID_ENABLE set (not modelled)", pc)
      inside = np.where(idxen & (stride != 0), index < num, off < num)
    else:
      oob_sel = ((d23 >> u64(60)) & u64(3)).astype(i64)[:, None]
      # gfx10+ OOB_SELECT: 0 structured (index and offset vs stride), 1 index only, 2 raw offset, 3 no check
      inside = np.where(oob_sel == 3, True, np.where(oob_sel == 2, off + nbytes <= num,
               np.where(oob_sel == 1, index < num, (index < num) & (off + nbytes <= np.maximum(stride, 1)))))
      if not idxen and not offen: inside = np.broadcast_to(np.where(oob_sel == 3, True, off + nbytes <= num), ex.shape)
    addr = base + (so + off + index * stride).astype(u64)
    return addr, ex & inside
  return address


_FORMAT_OP = re.compile(r"t?buffer_(load|store)_(d16_)?(hi_)?format_(x|xy|xyz|xyzw)$")


def build_mubuf(ins, pc: int):
  """buffer_load/store (and the cache invalidates) with a V#: base, stride, num_records and its range check; an
  out-of-range lane loads 0 and its store is dropped (AMDGPUUsage relies on this for buffer bounds). Formatted
  loads/stores (buffer_*_format_*, MTBUF's tbuffer_*) convert through the buffer format (buffer_formats.py): the
  V#'s FORMAT (dword 3 bits 18:12) for MUBUF, the instruction's for MTBUF."""
  name, v = ins.opcode.mnemonic, ins.values
  if name in ("buffer_gl0_inv", "buffer_gl1_inv"): return lambda st, w: None   # caches: nothing to invalidate in order
  if v.get("lds", 0) or v.get("tfe", 0): return None
  fm = _FORMAT_OP.match(name)
  if fm: return _build_format(ins, fm, pc)
  m = re.match(r"buffer_(load|store)_(d16_hi_|d16_)?(b8|b16|b32|b64|b96|b128|u8|i8|u16|i16)$", name)
  am = re.match(r"buffer_atomic_(\w+?)_" + _ATOMIC_TYPES + "$", name)
  if not m and not am: return None
  nbytes = _shape(name.split("_", 1)[1])[0] if m else (8 if am.group(2).endswith("64") else 4)
  address = _buffer_address(v, pc, bool(getattr(ins, "gfx9", False)), _rsrc_sgpr(ins))
  if am:
    op = atomic_op(am.group(1), am.group(2))
    if op is None or op in ("mskor", "wrap"): return None
    # atomics are range-checked all or nothing
    addr_only = lambda st, w: address(st, w, st.exec_lanes(w), nbytes)[0]
    in_range = lambda st, w, ex: address(st, w, ex, nbytes)[1]
    pieces = lambda st, w, a, ex, size, write: st.mem.locate(a[ex], size, write, pc)
    returns = bool(v.get("glc", 0)) or bool(v.get("th", 0) & 1)   # gfx12: TH_ATOMIC_RETURN
    return _atomic_builder(op, nbytes * 8, v["vdata"], v["vdata"], returns, addr_only, pieces, in_range)
  signed, mode = _shape(name.split("_", 1)[1])[1:]
  # dwordx2/x3/x4 are range-checked per dword (the ISA guides' range-checking notes): a partly outside access keeps
  # its inside dwords
  parts = [(4 * c, 4) for c in range(nbytes // 4)] if nbytes > 4 else [(0, nbytes)]
  if m.group(1) == "load":
    vdst = v["vdata"]
    def load(st: Waves, w):
      ex = st.exec_lanes(w)
      full = np.zeros((int(ex.sum()),) + ((nbytes // 4,) if nbytes % 4 == 0 else (nbytes,)), u32 if nbytes % 4 == 0 else u8)
      for at, size in parts:
        addr, ok = address(st, w, ex, size, at)
        if not ok.any(): continue
        data = _load(st.mem.locate(addr[ok], size, False, pc), int(ok.sum()), size)
        if len(parts) > 1: full[ok[ex], at // 4] = data[:, 0]
        else: full[ok[ex]] = data
      _write_loaded(st, w, vdst, ex, full, nbytes, signed, mode)
    return load
  data_reg = v["vdata"]
  def store(st: Waves, w):
    ex = st.exec_lanes(w)
    for at, size in parts:
      addr, ok = address(st, w, ex, size, at)
      if ok.any(): _store(st.mem.locate(addr[ok], size, True, pc), _store_data(st, w, data_reg + at // 4, ok, size, mode))
  return store


def _build_format(ins, fm, pc: int):
  """Formatted buffer load/store of 1-4 components (d16: two 16-bit components per VGPR; d16_hi: the high half)."""
  from hcq.asm.emu import buffer_formats as BF
  v = ins.values
  load, d16, hi, ncomp = fm.group(1) == "load", bool(fm.group(2)), bool(fm.group(3)), len(fm.group(4))
  gfx9 = bool(getattr(ins, "gfx9", False))
  address = _buffer_address(v, pc, gfx9, _rsrc_sgpr(ins))
  vdata = v["vdata"]
  number = BF.gfx9_format if gfx9 else (lambda n: n)   # gfx9: DATA_FORMAT | NUM_FORMAT << 4 -> the gfx11 number
  # tbuffer_*: the format is in the instruction (checked when built); buffer_*_format_*: in each wave's V#
  fixed = BF.buffer_format(number(v["format"])) if ins.opcode.mnemonic.startswith("tbuffer") else None
  rsrc_hi = scalar_reader(_rsrc_sgpr(ins) + 3)
  def formats(st: Waves, w):
    """(format, waves) groups: MTBUF has one; MUBUF reads each wave's V# FORMAT (gfx9: DATA_FORMAT, NUM_FORMAT)."""
    if fixed is not None: return [(fixed, w)]
    d3 = rsrc_hi(st, w)
    nums = ((d3 >> u32(15)) & u32(15)) | (((d3 >> u32(12)) & u32(7)) << u32(4)) if gfx9 else (d3 >> u32(12)) & u32(0x7f)
    waves = np.arange(st.count)[w]
    try:
      return [(BF.buffer_format(number(int(n))), waves[nums == n]) for n in np.unique(nums).tolist()]
    except ValueError as e:   # the V#'s format is data: a wave's fault, not a build error
      raise IllegalInstruction(str(e), pc) from None
  def regs_of(component: int) -> tuple[int, int]:   # (VGPR, 16-bit half or -1 for the whole dword)
    if not d16: return vdata + component, -1
    if hi: return vdata, 1
    return vdata + component // 2, component & 1
  def run(st: Waves, w):
    for fmt, ws in formats(st, w):
      ex = st.exec_lanes(ws)
      if not ex.any(): continue
      addr, ok = address(st, ws, ex, fmt.size)
      n = int(ex.sum())
      if load:
        raw = np.zeros((n, fmt.size), u8)
        if ok.any(): raw[ok[ex]] = _load(st.mem.locate(addr[ok], fmt.size, False, pc), int(ok.sum()), fmt.size).view(u8).reshape(-1, fmt.size)
        comps = BF.unpack(fmt, raw)
        for c in range(ncomp):
          val = BF.to_value(fmt, comps[c], fmt.bits[c], d16) if c < len(fmt.bits) else np.full(n, BF.default(fmt, c, d16), u32)
          val = np.where(ok[ex], val, u32(0))   # out of range: 0 (the format's defaults do not apply)
          reg, half = regs_of(c)
          col = st.v[reg][ws].copy()
          if half < 0: col[ex] = val
          else:
            sh = u32(16 * half)
            col[ex] = (col[ex] & ~(u32(0xffff) << sh)) | ((val & u32(0xffff)) << sh)
          write_vgpr(st, reg, ws, col, ex)
      else:
        if not ok.any(): continue
        comps = []
        for c in range(len(fmt.bits)):
          if c >= ncomp: comps.append(np.zeros(int(ok.sum()), u64)); continue
          reg, half = regs_of(c)
          x = st.v[reg][ws][ok]
          if half >= 0: x = (x >> u32(16 * half)) & u32(0xffff)
          comps.append(BF.from_value(fmt, x, fmt.bits[c], d16))
        _store(st.mem.locate(addr[ok], fmt.size, True, pc), BF.pack(fmt, comps))
  return run
