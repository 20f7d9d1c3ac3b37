"""Device-function calls (PTX ISA 9.7.13.3 call, 7 "Abstracting the ABI"): each `call` of a .func with a body in the
same module is inlined into the kernel when the module is parsed, so divergence, barriers and faults inside a
function work as in the kernel body.

    { .param .b32 param0; st.param.b32 [param0], %r1; .param .b32 retval0;
      call.uni (retval0), f, (param0); ld.param.b32 %r2, [retval0]; }

The caller's scoped .param variables are per-thread memory (the ABI passes them on the stack or in registers; ptxas
decides): they become the thread's local memory, and the callee's own parameter names are renamed to the caller's
argument variables. The callee's registers, labels and .local variables get a per-call-site suffix; `ret` in the
callee branches to the end of its inlined body. A call that cannot be inlined stays a `call` and faults when a thread
reaches it: a function without a body here (an external one such as vprintf), an indirect call through a register,
arguments that are not .param variables, and recursion (the SM keeps no call stack; ptxas would give the function a
stack frame, and a depth the compiler cannot bound is refused rather than guessed).
"""
from __future__ import annotations
from dataclasses import dataclass, replace

from .errors import PTXError
from .ops_common import Unsupported, op
from .parser import Addr, Instr, Kernel, PredPair, Reg, Sym, Vec, Variable, _align

MAX_INLINED = 1 << 20   # instructions a kernel may grow to by inlining


@dataclass
class Func:
  body: Kernel | None   # None: a declaration (.extern .func or a prototype)
  rets: list[str]
  params: list[str]


def call_parts(ins: Instr):
  """(return variables, callee, argument operands) of `call[.uni] [(ret),] f[, (args)][, proto]`."""
  a = list(ins.args)
  rets = a.pop(0).items if a and isinstance(a[0], Vec) else ()
  callee = a.pop(0) if a else None
  args = a.pop(0).items if a and isinstance(a[0], Vec) else ()
  return rets, callee, args


def _refused(ins: Instr, why: str) -> Instr:
  return replace(ins, why=why)


def inline_calls(k: Kernel, funcs: dict[str, Func], name: str) -> None:
  """Replace k's calls by the callees' bodies (in place); ld/st.param on call variables become ld/st.local."""
  if not any(ins.op == "call" for ins in k.instrs): return
  counter = [0]
  items = _expand(k, k, funcs, (k.name,), counter)
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


def _expand(k: Kernel, f: Kernel, funcs: dict[str, Func], stack: tuple, counter: list) -> list:
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
    if callee.name in stack:
      path = " -> ".join(stack[stack.index(callee.name):] + (callee.name,))
      out.append(_refused(it, f"a recursive call ({path}; the emulated SM inlines device functions and keeps no call stack)"))
      continue
    if not all(isinstance(x, Sym) for x in tuple(rets) + tuple(args)) or len(rets) != len(fn.rets) or len(args) != len(fn.params):
      out.append(_refused(it, f"a call to {callee.name} whose arguments are not {len(fn.params)} .param variables and "
                              f"{len(fn.rets)} return variables"))
      continue
    counter[0] += 1
    site = f"${callee.name}${counter[0]}"
    body = _expand(k, fn.body, funcs, stack + (callee.name,), counter)
    ren = {p: a.name for p, a in zip(fn.params + fn.rets, tuple(args) + tuple(rets))}
    for r, t in fn.body.regs.items(): k.regs[r + site] = t
    for v, (o, var) in fn.body.local.items():
      nv = v + site
      o = _align(k.local_bytes, var.align)
      k.local[nv] = (o, var)
      k.local_bytes = o + var.size
      ren[v] = nv
      if v in fn.body.call_params: k.call_params.add(nv)
    for v, (o, var) in fn.body.shared.items():   # one variable per block, however often the function is called
      if v not in k.shared:
        o = _align(k.static_shared_bytes, var.align)
        k.shared[v] = (o, var)
        k.static_shared_bytes = o + var.size
    labels = {x for x in body if isinstance(x, str)}   # the callee's labels and those of its own inlined callees
    end = "$ret" + site
    if it.pred is not None:   # `@p call`: the threads without p go around the inlined body
      out.append(replace(it, op="bra", mods=(), args=(Sym(end),), pred_neg=not it.pred_neg))
    for x in body:
      if isinstance(x, str): out.append(x + site)
      else:
        y = _rename(x, site, labels, ren, k)
        if y.op == "ret": y = replace(y, op="bra", mods=(), args=(Sym(end),))
        out.append(y)
    out.append(end)
  return out


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
