"""Device-function calls (PTX ISA 9.7.13.3 call, 7 "Abstracting the ABI"). A `call` of a .func with a body in the same
module is inlined into the kernel when the module is parsed, so divergence, barriers and faults inside a function work
as in the kernel body:

    { .param .b32 param0; st.param.b32 [param0], %r1; .param .b32 retval0;
      call.uni (retval0), f, (param0); ld.param.b32 %r2, [retval0]; }

The caller's scoped .param variables are per-thread memory (the ABI passes them on the stack or in registers; ptxas
decides): they become the thread's local memory, and the callee's own parameter names are renamed to the caller's
argument variables. The callee's registers, labels and .local variables get a per-call-site suffix; `ret` in the
callee branches to the end of its inlined body.

A recursive function (one that can reach itself through calls) cannot be inlined: it gets one out-of-line body after
the kernel's, with its own registers and local slots (parameters, return values, .local and its calls' .param
variables), and every call of it is a real call with a per-thread call stack in the thread's local memory, growing down
from the top of its local window: a call pushes a frame holding what an outer activation of the callee still needs
(its registers and slots live after one of its calls, by a liveness pass that errs on the large side) and the return
address, then passes the arguments; `ret` passes the return values back and pops it, so each thread returns to its own
call site at its own depth. The stack is the local memory the launch gives each thread (the QMD's, from the stack size
the program chose: ptxas cannot bound a recursive kernel's); the SM's own slots lie below it. Frames hold PTX
registers, not ptxas's (fib: 48 bytes here, 40 in ptxas 13's frame; a tree walk 96 and 80), so the emulated stack
overflows at a somewhat smaller depth than the GPU's (the stricter side). A frame that does not fit is a stack overflow:
SMFault "local" at the address just below the stack's bottom, naming the kernel and the call's PTX line. On the GPU a
push past the thread's local memory is a local access out of range, an SM exception (Xid 13) at that address; the
fault stands for it (the address is in the SM's window, not the GPU's local address space).

A call that can be neither inlined nor called stays a `call` and faults when a thread reaches it: a function without a
body here (an external one such as vprintf), an indirect call through a register, arguments that are not .param
variables.
"""
from __future__ import annotations
from dataclasses import dataclass, field, replace

import numpy as np

from .errors import PTXError
from .ops_common import Unsupported, op
from .parser import Addr, Instr, Kernel, PredPair, Reg, Sym, Vec, Variable, _align, type_bytes
from .types import storage_dtype

MAX_INLINED = 1 << 20   # instructions a kernel may grow to by inlining


@dataclass
class Func:
  body: Kernel | None   # None: a declaration (.extern .func or a prototype)
  rets: list[str]
  params: list[str]
  decls: list[Variable] = field(default_factory=list)   # the .param declarations of rets and params


@dataclass
class Frame:
  """A recursive function's out-of-line body in the kernel: where it starts and what a real call saves."""
  name: str
  entry: str                         # the label of its first instruction
  regs: list[tuple[str, str, int]]   # (register, type, offset in the frame) of its registers live across its calls
  slots: list[tuple[int, int, int]]  # (local address, bytes, offset in the frame) of its local slots live across them
  params: list[str]                  # the local slots of its parameters, in declaration order
  rets: list[str]                    # and of its return values
  pc_at: int                         # where the return address is in the frame
  locals: list[tuple[str, int]]      # (register, offset in the frame): each .local variable's address register
  size: int                          # bytes of one frame (16-byte aligned)


def call_parts(ins: Instr):
  """(return variables, callee, argument operands) of `call[.uni] [(ret),] f[, (args)][, proto]`."""
  a = list(ins.args)
  rets = a.pop(0).items if a and isinstance(a[0], Vec) else ()
  callee = a.pop(0) if a else None
  args = a.pop(0).items if a and isinstance(a[0], Vec) else ()
  return rets, callee, args


def _refused(ins: Instr, why: str) -> Instr:
  return replace(ins, why=why)


@dataclass
class _Context:
  funcs: dict[str, Func]
  recursive: set[str]
  counter: int = 0
  outlined: list = field(default_factory=list)   # the recursive functions' bodies, after the kernel's
  pending: list = field(default_factory=list)    # recursive functions called and not outlined yet


def recursive_functions(funcs: dict[str, Func]) -> set[str]:
  """The functions with a body that can reach themselves through direct calls."""
  callees = {n: {c.name for ins in f.body.instrs if ins.op == "call" and isinstance(c := call_parts(ins)[1], Sym)}
             for n, f in funcs.items() if f.body is not None}
  out = set()
  for n in callees:
    seen, todo = set(), list(callees[n])
    while todo:
      c = todo.pop()
      if c == n: out.add(n); break
      if c in seen or c not in callees: continue
      seen.add(c)
      todo.extend(callees[c])
  return out


def inline_calls(k: Kernel, funcs: dict[str, Func], name: str) -> None:
  """Replace k's calls by the callees' bodies (in place), recursive functions by real calls of their out-of-line
  bodies; ld/st.param on call variables become ld/st.local."""
  if not any(ins.op == "call" for ins in k.instrs): return
  ctx = _Context(funcs, recursive_functions(funcs))
  items = _expand(k, k, funcs, (k.name,), ctx)
  while ctx.pending: _outline(k, ctx.pending.pop(0), ctx)   # one after the other: each function's slots stay together
  if ctx.outlined:   # the kernel's end exits before the functions' bodies
    last = k.instrs[-1]
    items += [replace(last, op="ret", mods=(), args=(), pred=None, pred_neg=False, why=None)] + ctx.outlined
  instrs, labels = [], {}
  for it in items:
    if isinstance(it, str): labels[it] = len(instrs)
    else: instrs.append(it)
  if len(instrs) > MAX_INLINED:
    raise PTXError(name, k.line, 1, f"kernel {k.name!r} has {len(instrs)} instructions after inlining its calls; at most {MAX_INLINED}")
  k.instrs, k.labels = [_param_to_local(ins, k.call_params) for ins in instrs], labels


def _items(f: Kernel) -> list:
  """f's body as labels (str) and instructions in order."""
  at: dict[int, list[str]] = {}
  for lab, i in f.labels.items(): at.setdefault(i, []).append(lab)
  out = []
  for i, ins in enumerate(f.instrs):
    out.extend(at.get(i, []))
    out.append(ins)
  out.extend(at.get(len(f.instrs), []))
  return out


def _expand(k: Kernel, f: Kernel, funcs: dict[str, Func], stack: tuple, ctx: _Context) -> list:
  out = []
  for it in _items(f):
    if isinstance(it, str) or it.op != "call" or it.why:
      out.append(it)
      continue
    rets, callee, args = call_parts(it)
    if not isinstance(callee, Sym):
      out.append(_refused(it, f"an indirect call through {getattr(callee, 'name', callee)}"))
      continue
    fn = funcs.get(callee.name)
    if fn is None or fn.body is None:
      out.append(_refused(it, f"a call to {callee.name}, which has no body in this module (an external function)"))
      continue
    if not all(isinstance(x, Sym) for x in tuple(rets) + tuple(args)) or len(rets) != len(fn.rets) or len(args) != len(fn.params):
      out.append(_refused(it, f"a call to {callee.name} whose arguments are not {len(fn.params)} .param variables and "
                              f"{len(fn.rets)} return variables"))
      continue
    if callee.name in ctx.recursive or callee.name in stack:   # a real call of its out-of-line body
      if callee.name not in k.functions and callee.name not in ctx.pending: ctx.pending.append(callee.name)
      out.append(it)
      continue
    ctx.counter += 1
    site = f"${callee.name}${ctx.counter}"
    body = _expand(k, fn.body, funcs, stack + (callee.name,), ctx)
    ren = {p: a.name for p, a in zip(fn.params + fn.rets, tuple(args) + tuple(rets))}
    end = "$ret" + site
    if it.pred is not None:   # `@p call`: the threads without p go around the inlined body
      out.append(replace(it, op="bra", mods=(), args=(Sym(end),), pred_neg=not it.pred_neg))
    out.extend(_place(k, fn, body, site, ren, lambda y: replace(y, op="bra", mods=(), args=(Sym(end),))))
    out.append(end)
  return out


def _place(k: Kernel, fn: Func, body: list, site: str, ren: dict, on_ret) -> list:
  """fn's expanded body renamed for `site` (its registers, labels and .local variables get the suffix and join k),
  each `ret` replaced by on_ret(ret)."""
  for r, t in fn.body.regs.items(): k.regs[r + site] = t
  for v, (o, var) in fn.body.local.items():
    ren[v] = _new_slot(k, v + site, var)
    if v in fn.body.call_params: k.call_params.add(v + site)
  for v, (o, var) in fn.body.shared.items():   # one variable per block, however often the function is called
    if v not in k.shared:
      o = _align(k.static_shared_bytes, var.align)
      k.shared[v] = (o, var)
      k.static_shared_bytes = o + var.size
  labels = {x for x in body if isinstance(x, str)}   # the callee's labels and those of its own inlined callees
  out = []
  for x in body:
    if isinstance(x, str): out.append(x + site)
    else:
      y = _rename(x, site, labels, ren, k)
      out.append(on_ret(y) if y.op == "ret" else y)
  return out


def _new_slot(k: Kernel, name: str, var: Variable) -> str:
  o = _align(k.local_bytes, var.align)
  k.local[name] = (o, var)
  k.local_bytes = o + var.size
  return name


def _outline(k: Kernel, name: str, ctx: _Context) -> None:
  """The out-of-line body of recursive function `name` (once per kernel): appended to ctx.outlined, its Frame in
  k.functions; the recursive functions it calls are queued. Its `ret`s become `$ret` (pop the frame, back to the caller)."""
  k.functions[name] = None   # being outlined: its own recursive calls must not queue it again
  fn, site = ctx.funcs[name], f"${name}$frame"
  regs_before, slots_before = set(k.regs), set(k.local)
  ren = {}
  for v in fn.decls:   # its parameters and return values: slots in local memory
    ren[v.name] = _new_slot(k, v.name + site, v)
    k.call_params.add(v.name + site)
  body = _expand(k, fn.body, ctx.funcs, (name,), ctx)
  placed = _place(k, fn, body, site, ren, lambda y: replace(y, op="$ret", mods=(), args=(Sym(name),)))
  new = set(k.local) - slots_before
  # its .local variables live in each activation's frame: their address is a register the call sets (frame base + offset)
  frame_vars = sorted(v for v in new if k.local[v][1].space == "local")
  bases = {v: Reg(f"%$frame${v}") for v in frame_vars}
  for r in bases.values(): k.regs[r.name] = "u64"
  placed = [x if isinstance(x, str) else _frame_addresses(x, bases) for x in placed]
  slots = {v: k.local[v][1].size for v in new if v not in bases}
  live = _live_across_calls(placed, slots, [ren[r] for r in fn.rets])
  regs, off = [], 0
  for r in sorted(set(k.regs) - regs_before):
    if r not in live: continue
    n = 1 if k.regs[r] == "pred" else type_bytes(k.regs[r])
    off = _align(off, n)
    regs.append((r, k.regs[r], off))
    off += n
  saved = []
  for v in sorted(slots):
    if v not in live: continue
    off = _align(off, k.local[v][1].align)
    saved.append((k.local[v][0], slots[v], off))
    off += slots[v]
  pc_at = _align(off, 8)
  off = pc_at + 8
  locals_ = []
  for v in frame_vars:
    off = _align(off, k.local[v][1].align)
    locals_.append((bases[v].name, off))
    off += k.local[v][1].size
  entry = f"$entry{site}"
  k.functions[name] = Frame(name, entry, regs, saved, [ren[p] for p in fn.params], [ren[r] for r in fn.rets], pc_at, locals_, _align(off, 16))
  ctx.outlined += [entry] + placed


def _frame_addresses(ins: Instr, bases: dict[str, Reg]) -> Instr:
  """ins with each name of a frame variable (`v`, `[v+N]`) replaced by the register holding its address."""
  def fix(a):
    if isinstance(a, Sym) and a.name in bases: return bases[a.name]
    if isinstance(a, Addr) and isinstance(a.base, Sym) and a.base.name in bases: return Addr(bases[a.base.name], a.offset)
    if isinstance(a, Vec): return Vec(tuple(fix(x) for x in a.items))
    return a
  return replace(ins, args=tuple(fix(a) for a in ins.args))


# opcodes whose first operand is read, not written (a store's address, a barrier's number, a call's variables)
_NO_DEST = {"st", "red", "bar", "barrier", "bra", "brx", "call", "ret", "$ret", "exit", "trap", "membar", "fence", "prefetch",
            "prefetchu", "nanosleep", "pmevent", "cp", "wmma", "stmatrix", "discard", "applypriority", "griddepcontrol"}


def _regs_in(a) -> list[Reg]:
  if isinstance(a, Reg): return [a]
  if isinstance(a, (Vec, tuple)): return [r for x in (a.items if isinstance(a, Vec) else a[1:]) for r in _regs_in(x)]
  if isinstance(a, Addr): return _regs_in(a.base)
  if isinstance(a, PredPair): return [x for x in (a.p, a.q) if x is not None]
  return []


def _live_across_calls(placed: list, slots: dict[str, int], rets: list[str]) -> set[str]:
  """The registers and local slots live after some real call in a function's body (backward liveness over its
  branches): what an outer activation still needs when an inner one returns, so what a frame saves. Reads are
  over-approximated (every register operand but a written first operand), a predicated or partial write kills nothing,
  a slot whose address is taken is always live, and `$ret` reads the return values: the set errs on the large side."""
  code, labels = [], {}
  for x in placed:
    if isinstance(x, str): labels[x] = len(code)
    else: code.append(x)
  n = len(code)
  reads, kills, succ, taken = [], [], [], set()
  slot_of = lambda a: a.base.name if isinstance(a, Addr) and isinstance(a.base, Sym) and a.base.name in slots else None
  for i, ins in enumerate(code):
    dest = ins.op not in _NO_DEST and bool(ins.args) and isinstance(ins.args[0], (Reg, Vec, PredPair))
    r = {x.name for a in (ins.args[1:] if dest else ins.args) for x in _regs_in(a)} | ({ins.pred.name} if ins.pred is not None else set())
    if dest and isinstance(ins.args[0], Addr): r |= {x.name for x in _regs_in(ins.args[0].base)}
    w = {x.name for x in _regs_in(ins.args[0])} if dest else set()
    if ins.op == "ld" and (v := slot_of(ins.args[1])): r.add(v)
    elif ins.op == "st" and (v := slot_of(ins.args[0])):
      vec = next((int(m[1:]) for m in ins.mods if m in ("v2", "v4", "v8")), 1)
      if ins.args[0].offset == 0 and ins.types and type_bytes(ins.types[0]) * vec >= slots[v]: w.add(v)
    elif ins.op == "call":
      c_rets, _, c_args = call_parts(ins)
      r |= {a.name for a in c_args if isinstance(a, Sym)}
      w |= {a.name for a in c_rets if isinstance(a, Sym)}
    elif ins.op == "$ret": r |= set(rets)
    else: taken |= {a.name if isinstance(a, Sym) else a.base.name for a in ins.args
                    if (isinstance(a, Sym) and a.name in slots) or slot_of(a)}   # an address of a slot escapes
    reads.append(r)
    kills.append(w if ins.pred is None else set())
    nxt = [] if ins.op in ("ret", "$ret", "exit", "trap") or (ins.op == "bra" and ins.pred is None) else [i + 1]
    if ins.op in ("bra", "brx"): nxt += [labels[a.name] for a in ins.args if isinstance(a, Sym) and a.name in labels]
    succ.append([j for j in nxt if j < n])
  live_in = [set() for _ in range(n)]
  changed = True
  while changed:
    changed = False
    for i in range(n - 1, -1, -1):
      out = set().union(*(live_in[j] for j in succ[i])) if succ[i] else set()
      new = reads[i] | (out - kills[i])
      if new != live_in[i]: live_in[i], changed = new, True
  # after a call: what the code after it reads, but the call's return variables (written after the frame is popped)
  return taken.union(*(live_in[i + 1] - kills[i] for i, ins in enumerate(code) if is_real_call(ins) and ins.op == "call" and i + 1 < n))


def _rename(ins: Instr, site: str, labels: set, ren: dict, k: Kernel) -> Instr:
  def reg(r):
    return Reg(r.name + site) if r.name + site in k.regs else r
  def sym(s):
    if s.name in labels: return Sym(s.name + site)
    return Sym(ren.get(s.name, s.name))
  def opnd(a):
    if isinstance(a, Reg): return reg(a)
    if isinstance(a, Sym): return sym(a)
    if isinstance(a, Addr): return Addr(reg(a.base) if isinstance(a.base, Reg) else sym(a.base) if isinstance(a.base, Sym) else None, a.offset)
    if isinstance(a, Vec): return Vec(tuple(opnd(x) for x in a.items))
    if isinstance(a, PredPair): return PredPair(reg(a.p), reg(a.q) if a.q is not None else None)
    if isinstance(a, tuple): return (a[0], opnd(a[1]))
    return a
  return replace(ins, args=tuple(opnd(a) for a in ins.args), pred=reg(ins.pred) if ins.pred is not None else None)


def _param_to_local(ins: Instr, call_params: set) -> Instr:
  if ins.op not in ("ld", "st") or "param" not in ins.mods or not call_params: return ins
  a = ins.args[1] if ins.op == "ld" else ins.args[0]
  if isinstance(a, Addr) and isinstance(a.base, Sym) and a.base.name in call_params:
    return replace(ins, mods=tuple("local" if m == "param" else m for m in ins.mods))
  return ins


def declare_call_param(k: Kernel, v: Variable) -> None:
  """A scoped `.param` in a body (a call's argument or return variable): per-thread memory. Call sites reuse a name in
  sibling scopes; a redeclaration keeps one slot, at least as large as every declaration."""
  old = k.local.get(v.name)
  k.call_params.add(v.name)
  if old is not None and old[1].size >= v.size and old[1].align >= v.align: return
  o = _align(k.local_bytes, v.align)
  k.local[v.name] = (o, v)
  k.local_bytes = o + v.size


@op("call")
def _call(ex, b, ins, m):
  raise Unsupported(ins.why or "call")


def is_real_call(ins: Instr) -> bool:
  """A call of a recursive function's out-of-line body, or its return: each thread goes its own way (pcs)."""
  return (ins.op == "call" and ins.why is None) or ins.op == "$ret"


def _rows(b, lanes: np.ndarray, at, n: int) -> np.ndarray:
  """Indices of n bytes at local address `at` (per lane or one for all) of each lane's local window."""
  return (lanes.astype(np.int64) * b.local.stride + np.asarray(at, np.int64))[:, None] + np.arange(n)


def _stack_pointers(b) -> np.ndarray:
  if b.stack is None: b.stack = np.full(b.T, b.ex.launch.local_bytes, np.int64)
  return b.stack


def _guarded_lanes(ex, b, ins: Instr, m: np.ndarray, pcs: np.ndarray) -> np.ndarray:
  """The lanes of m whose guard holds; the others step past the instruction."""
  g = ex.guard(b, ins, m)
  go = m if g is None else m & g
  pcs[m & ~go] += 1
  return np.nonzero(go)[0]


def real_call(ex, b, ins: Instr, m: np.ndarray, pcs: np.ndarray, pc: int) -> None:
  """The threads in m at `call` (pcs in place): those whose guard holds push a frame and enter the callee."""
  lanes = _guarded_lanes(ex, b, ins, m, pcs)
  if not lanes.size: return
  k = ex.kernel
  rets, callee, args = call_parts(ins)
  f: Frame = k.functions[callee.name]
  data = b.local.data
  vals = [data[_rows(b, lanes, k.local[a.name][0], k.local[p][1].size)] for a, p in zip(args, f.params)]
  sp = _stack_pointers(b)[lanes] - f.size
  if (low := sp < k.local_bytes).any():   # the push's first byte outside the stack: the address just below its bottom
    used = ex.launch.local_bytes - int(sp[np.argmax(low)]) - f.size
    raise ex.fault("local", k.local_bytes - 1, f"stack overflow: the call of {callee.name} needs a {f.size}-byte frame, the "
                   f"thread's stack [{k.local_bytes:#x}, {ex.launch.local_bytes:#x}) has {ex.launch.local_bytes - k.local_bytes - used} "
                   f"of its {ex.launch.local_bytes - k.local_bytes} bytes left (the local memory the launch gives each thread)")
  _save(b, lanes, f, sp)
  data[_rows(b, lanes, sp + f.pc_at, 8)] = np.full(lanes.size, pc + 1, np.int64).view(np.uint8).reshape(-1, 8)
  for r, off in f.locals: _set_lanes(b, r, np.uint64, lanes, (sp + off).astype(np.uint64))
  for p, v in zip(f.params, vals): data[_rows(b, lanes, k.local[p][0], v.shape[1])] = v
  b.stack[lanes] = sp
  pcs[lanes] = k.labels[f.entry]


def real_return(ex, b, ins: Instr, m: np.ndarray, pcs: np.ndarray) -> None:
  """The threads in m at a recursive function's `ret`: those whose guard holds pass their return values to their call
  site's variables, pop the frame and continue after that call."""
  lanes = _guarded_lanes(ex, b, ins, m, pcs)
  if not lanes.size: return
  k = ex.kernel
  f: Frame = k.functions[ins.args[0].name]
  data = b.local.data
  sp = b.stack[lanes]
  vals = [data[_rows(b, lanes, k.local[r][0], k.local[r][1].size)] for r in f.rets]
  back = data[_rows(b, lanes, sp + f.pc_at, 8)].copy().view(np.int64).reshape(-1)
  _restore(b, lanes, f, sp)
  b.stack[lanes] = sp + f.size
  for at in np.unique(back):   # threads returning to one call site
    sel = back == at
    rets, _, _ = call_parts(k.instrs[int(at) - 1])
    for r, v in zip(rets, vals):
      n = min(v.shape[1], k.local[r.name][1].size)
      data[_rows(b, lanes[sel], k.local[r.name][0], n)] = v[sel, :n]
  pcs[lanes] = back


def _save(b, lanes: np.ndarray, f: Frame, sp: np.ndarray) -> None:
  """The frame at sp of each lane: f's registers and slots as they are now."""
  data = b.local.data
  for r, t, off in f.regs:
    a = b.regs.get(r)
    sd = storage_dtype(t)
    v = np.zeros(lanes.size, sd) if a is None else np.broadcast_to(a, (b.T,))[lanes].astype(sd, copy=False)
    data[_rows(b, lanes, sp + off, v.dtype.itemsize)] = np.ascontiguousarray(v).view(np.uint8).reshape(lanes.size, -1)
  for at, n, off in f.slots: data[_rows(b, lanes, sp + off, n)] = data[_rows(b, lanes, at, n)]


def _restore(b, lanes: np.ndarray, f: Frame, sp: np.ndarray) -> None:
  """f's registers and slots back from each lane's frame at sp."""
  data = b.local.data
  for r, t, off in f.regs:
    sd = np.dtype(storage_dtype(t))
    _set_lanes(b, r, sd, lanes, data[_rows(b, lanes, sp + off, sd.itemsize)].copy().view(sd).reshape(-1))
  for at, n, off in f.slots: data[_rows(b, lanes, at, n)] = data[_rows(b, lanes, sp + off, n)]


def _set_lanes(b, r: str, sd, lanes: np.ndarray, v: np.ndarray) -> None:
  """Register r (container dtype sd) set to v for `lanes`, the other threads' values kept."""
  a = b.regs.get(r)
  full = np.zeros(b.T, sd) if a is None else np.array(np.broadcast_to(a, (b.T,)), sd)
  full[lanes] = v
  b.regs[r] = full
