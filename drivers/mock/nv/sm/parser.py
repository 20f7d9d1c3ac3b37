"""PTX text -> kernels: directives, declarations, labels and instructions, as the PTX ISA reference's grammar has them
(PTX ISA 8.x, chapters 4 "Syntax", 5 "State Spaces, Types, and Variables", 6 "Instruction Operands").

A statement is a directive or `[@[!]pred] opcode[.mod]* operand, ...;`; an operand is a register, a vector
`{a, b}`, an address `[base]`, `[base+imm]`, `[imm]`, an immediate (decimal, 0x hex, 0 octal, 0b binary, optional U
suffix; floats as decimal, 0fXXXXXXXX (f32 bits) or 0dXXXXXXXXXXXXXXXX (f64 bits)), a label or a variable name.
What the SM cannot accept is a PTXError naming name:line:col.
"""
from __future__ import annotations
import re
import struct
from dataclasses import dataclass, field, replace

from .errors import PTXError

_TOKEN = re.compile(r"""
  (?P<ws>[ \t\r]+) | (?P<nl>\n) | (?P<lc>//[^\n]*) | (?P<bc>/\*.*?\*/) |
  (?P<str>"(?:[^"\\\n]|\\.)*") |
  (?P<num>0[fF][0-9a-fA-F]{8}(?![\w.]) | 0[dD][0-9a-fA-F]{16}(?![\w.]) |
          (?:\d+\.\d*(?:[eE][+-]?\d+)? | \.\d+(?:[eE][+-]?\d+)? | \d+[eE][+-]?\d+) |
          0[xX][0-9a-fA-F]+U? | 0[bB][01]+U? | \d+U?) |
  (?P<id>[%$.A-Za-z_](?:[\w$%.]|::)*) |   # `::` joins qualifiers such as ld.global.L1::evict_last
  (?P<punct>[{}()\[\],;:+\-@!<>=|*/&~^])
""", re.X | re.S)

FUNDAMENTAL_TYPES = {"b8", "b16", "b32", "b64", "b128", "u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64",
                     "f16", "f16x2", "bf16", "bf16x2", "f32", "f64", "pred", "tf32", "e4m3x2", "e5m2x2"}


_TYPE_BYTES = {t: 1 if t == "pred" else 4 if t in ("f16x2", "bf16x2", "tf32") else 2 if t.endswith("x2") else int(re.sub(r"\D", "", t)) // 8
               for t in FUNDAMENTAL_TYPES}


def type_bytes(t: str) -> int:
  """Size in bytes of a PTX fundamental type (.pred counts as 1 byte in memory; PTX 5.2)."""
  return _TYPE_BYTES[t]


@dataclass(frozen=True)
class Tok:
  kind: str
  text: str
  line: int
  col: int


@dataclass(frozen=True)
class Reg:
  name: str


@dataclass(frozen=True)
class Imm:
  value: int | float
  is_float: bool = False
  bits: str | None = None  # "f32" / "f64" for 0f/0d literals (the value is the exact bit pattern's float)


@dataclass(frozen=True)
class Sym:
  name: str  # a label, a variable or a parameter


@dataclass(frozen=True)
class Addr:
  base: Reg | Sym | None
  offset: int


@dataclass(frozen=True)
class Vec:
  items: tuple


@dataclass(frozen=True)
class PredPair:
  p: Reg
  q: Reg | None  # `p|q` destinations of setp; `_` sink is None


SINK = Reg("_")


@dataclass
class Instr:
  op: str                    # the opcode without modifiers ("ld", "add", ...)
  mods: tuple[str, ...]      # the modifiers in order, without dots ("global", "v4", "f32", ...)
  args: tuple
  pred: Reg | None
  pred_neg: bool
  line: int
  col: int
  text: str
  why: str | None = None     # set on a call the SM cannot inline: the reason it faults when reached (calls.py)

  @property
  def types(self) -> list[str]:
    return [m for m in self.mods if m in FUNDAMENTAL_TYPES]


@dataclass
class Variable:
  name: str
  space: str        # "shared", "local", "const", "global", "param"
  type: str
  count: int        # elements (0: an unsized extern array)
  align: int
  init: list | None = None
  extern: bool = False

  @property
  def size(self) -> int:
    return type_bytes(self.type) * self.count


@dataclass
class Kernel:
  """One .entry: its parameters as ptxas lays them out (declaration order, natural alignment), registers,
  variables and instructions."""
  name: str
  params: list[tuple[str, int, int]] = field(default_factory=list)     # (name, offset, size)
  param_types: dict[str, str] = field(default_factory=dict)
  regs: dict[str, str] = field(default_factory=dict)                    # register name -> type
  shared: dict[str, tuple[int, Variable]] = field(default_factory=dict)  # name -> (offset in the block's window, var)
  local: dict[str, tuple[int, Variable]] = field(default_factory=dict)
  static_shared_bytes: int = 0
  local_bytes: int = 0
  dynamic_shared: str | None = None   # the `extern .shared` array's name, placed after the static part
  reqntid: tuple[int, ...] | None = None
  maxntid: tuple[int, ...] | None = None
  instrs: list[Instr] = field(default_factory=list)
  labels: dict[str, int] = field(default_factory=dict)
  line: int = 0
  plain_regs: bool = False   # some register is declared without '%'
  call_params: set = field(default_factory=set)   # scoped .param variables of calls: per-thread memory (calls.py)
  functions: dict = field(default_factory=dict)   # recursive device functions called for real: name -> calls.Frame
  fast: list | None = None   # fast.compile_kernel's closures, one per instruction, made at the first launch


def _align(x: int, a: int) -> int:
  return (x + a - 1) // a * a


def _imm(tok: Tok, neg: bool) -> Imm:
  t = tok.text
  if t[:2] in ("0f", "0F"):
    v = struct.unpack("<f", struct.pack("<I", int(t[2:], 16)))[0]
    return Imm(-v if neg else v, True, "f32")
  if t[:2] in ("0d", "0D"):
    v = struct.unpack("<d", struct.pack("<Q", int(t[2:], 16)))[0]
    return Imm(-v if neg else v, True, "f64")
  if re.fullmatch(r"\d+\.\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+", t):
    return Imm(-float(t) if neg else float(t), True)
  s = t.rstrip("U")
  if s[:2] in ("0x", "0X"): v = int(s[2:], 16)
  elif s[:2] in ("0b", "0B"): v = int(s[2:], 2)
  elif len(s) > 1 and s[0] == "0":
    if not re.fullmatch(r"[0-7]+", s): raise ValueError("octal")
    v = int(s, 8)
  else: v = int(s)
  return Imm(-v if neg else v)


class _Parser:
  def __init__(self, text: str, name: str):
    self.name, self.toks = name, []
    pos, line, lstart = 0, 1, 0
    while pos < len(text):
      m = _TOKEN.match(text, pos)
      if not m: raise PTXError(name, line, pos - lstart + 1, f"unexpected character {text[pos]!r}: not part of PTX syntax")
      k = m.lastgroup
      if k == "nl": line, lstart = line + 1, m.end()
      elif k == "bc":
        nls = m.group().count("\n")
        if nls: line, lstart = line + nls, pos + m.group().rfind("\n") + 1
      elif k == "num" and re.match(r"[\w.$]", text[m.end():m.end() + 1]):
        bad = re.compile(r"[\w.$]+").match(text, pos).group()
        raise PTXError(name, line, pos - lstart + 1, f"{bad!r} is not a valid number: PTX numbers are decimal, 0x hex, 0 octal, "
                                                     "0b binary (optional U suffix), decimal floats, 0fXXXXXXXX or 0dXXXXXXXXXXXXXXXX")
      elif k not in ("ws", "lc"): self.toks.append(Tok(k, m.group(), line, pos - lstart + 1))
      pos = m.end()
    self.i = 0
    self.lines = text.split("\n")
    self.module_shared: dict[str, Variable] = {}
    self.funcs: dict = {}   # .func name -> calls.Func

  # --- token helpers ---------------------------------------------------------------------------------------
  def peek(self, k: int = 0) -> Tok | None:
    return self.toks[self.i + k] if self.i + k < len(self.toks) else None

  def err(self, tok: Tok | None, msg: str) -> PTXError:
    if tok is None:
      last = self.toks[-1] if self.toks else Tok("", "", 1, 1)
      return PTXError(self.name, last.line, last.col + len(last.text), f"unexpected end of text: {msg}")
    return PTXError(self.name, tok.line, tok.col, msg)

  def next(self, what: str) -> Tok:
    t = self.peek()
    if t is None: raise self.err(None, f"expected {what}")
    self.i += 1
    return t

  def expect(self, text: str) -> Tok:
    t = self.next(repr(text))
    if t.text != text: raise self.err(t, f"expected {text!r}, found {t.text!r}")
    return t

  def accept(self, text: str) -> bool:
    t = self.peek()
    if t is not None and t.text == text:
      self.i += 1
      return True
    return False

  def number(self, what: str) -> int:
    neg = self.accept("-")
    t = self.next(what)
    if t.kind != "num": raise self.err(t, f"expected {what} (an integer), found {t.text!r}")
    try: v = _imm(t, neg)
    except ValueError: raise self.err(t, f"{t.text!r} is not a valid integer (decimal, 0x hex, 0 octal or 0b binary)") from None
    if v.is_float: raise self.err(t, f"expected {what} (an integer), found the float {t.text!r}")
    return int(v.value)

  # --- module --------------------------------------------------------------------------------------------
  def module(self) -> tuple[dict, dict, dict]:
    kernels, consts, header = {}, {}, {}
    while self.peek() is not None:
      t = self.peek()
      if t.text in (".version", ".target", ".address_size"):
        self.i += 1
        vals = [self.next("a value").text]
        while self.accept(","): vals.append(self.next("a value").text)
        if t.text == ".target":
          bad = [v for v in vals if not re.fullmatch(r"sm_\d+[af]?|texmode_\w+|debug|map_f64_to_f32", v)]
          if bad: raise self.err(t, f".target {bad[0]!r} is not a PTX target (sm_XX, texmode_*, debug)")
        header[t.text[1:]] = vals
      elif t.text in (".file", ".loc", ".pragma"):
        self._skip_statement()
      elif t.text == ".section":
        self._skip_section()
      elif t.text in (".visible", ".extern", ".weak", ".entry", ".func", ".global", ".const", ".shared", ".common"):
        self._toplevel(kernels, consts)
      else:
        raise self.err(t, f"unexpected {t.text!r} at module level: expected a directive (.version, .target, .address_size, "
                          ".entry, .func, .global, .const, .shared)")
    from .calls import inline_calls   # here, not at the top: calls.py builds on this module's types
    for k in kernels.values():
      inline_calls(k, self.funcs, self.name)
      self._add_module_shared(k)
    if "version" not in header: raise PTXError(self.name, 1, 1, "missing .version directive: PTX text starts with .version X.Y")
    if "target" not in header: raise PTXError(self.name, 1, 1, "missing .target directive: PTX text names its target (.target sm_XX)")
    return kernels, consts, header

  def _add_module_shared(self, k: Kernel) -> None:
    """Module-scope .shared variables a kernel names join its shared window (static ones after its own, as ptxas
    allocates only what a kernel references); an `.extern .shared` array is its dynamic shared memory."""
    used = {a.name if isinstance(a, Sym) else a.base.name for ins in k.instrs for a in ins.args
            if isinstance(a, Sym) or (isinstance(a, Addr) and isinstance(a.base, Sym))}
    for v in self.module_shared.values():
      if v.name not in used or v.name in k.shared: continue
      if v.extern:
        k.shared[v.name] = (-1, v)
        k.dynamic_shared = v.name
      else:
        o = _align(k.static_shared_bytes, v.align)
        k.shared[v.name] = (o, v)
        k.static_shared_bytes = o + v.size

  def _skip_statement(self) -> None:
    start = self.next("a directive")
    while True:
      t = self.peek()
      if t is None or t.line != start.line: return
      self.i += 1
      if t.text == ";": return

  def _skip_section(self) -> None:
    self.next(".section")
    depth = 0
    while True:
      t = self.next("the end of the .section block")
      if t.text == "{": depth += 1
      elif t.text == "}":
        depth -= 1
        if depth == 0: return

  def _toplevel(self, kernels: dict, consts: dict) -> None:
    linkage = []
    while self.peek() is not None and self.peek().text in (".visible", ".extern", ".weak", ".common"): linkage.append(self.next("").text)
    t = self.peek()
    if t is None: raise self.err(None, "expected .entry, .func or a variable")
    if t.text == ".entry": self._entry(kernels)
    elif t.text == ".func": self._func()
    elif t.text in (".global", ".const", ".shared"):
      v = self._variable(t.text[1:], ".extern" in linkage)
      if v.space == "shared": self.module_shared[v.name] = v
      else: consts[v.name] = v   # .const and .global: their data is where a loader puts it (the launch's variables)
    else: raise self.err(t, f"expected .entry, .func or a variable after {' '.join(linkage)}, found {t.text!r}")

  def _func(self) -> None:
    """A device function: `.func [(.param ret)] name[(.param ...)] { body }` or a declaration ending in `;`."""
    from .calls import Func
    self.next(".func")
    rets = self._param_list() if self.peek() is not None and self.peek().text == "(" else []
    nt = self.next("the function's name")
    if nt.kind != "id" or nt.text.startswith((".", "%")): raise self.err(nt, f"expected the function's name, found {nt.text!r}")
    params = self._param_list() if self.peek() is not None and self.peek().text == "(" else []
    self.accept(".noreturn")
    if self.accept(";"):
      self.funcs.setdefault(nt.text, Func(None, [v.name for v in rets], [v.name for v in params], rets + params))
      return
    self.expect("{")
    f = Kernel(nt.text, line=nt.line)
    self._body(f)
    self.funcs[nt.text] = Func(f, [v.name for v in rets], [v.name for v in params], rets + params)

  def _param_list(self) -> list[Variable]:
    self.expect("(")
    out = []
    while not self.accept(")"):
      t = self.peek()
      if t is None or t.text not in (".param", ".reg"): raise self.err(t, "expected .param in the function's parameter list")
      if t.text == ".reg": raise self.err(t, ".reg function parameters are not supported: the emulated SM passes .param variables")
      out.append(self._param())
      if not self.accept(","):
        self.expect(")")
        break
    return out

  def _variable(self, space: str, extern: bool) -> Variable:
    start = self.next("a state space")
    align, vec, typ = 0, 1, None
    while True:
      t = self.next("a type or a name")
      if t.text == ".align": align = self.number(".align's byte count")
      elif t.text in (".v2", ".v4", ".v8"): vec = int(t.text[2:])
      elif t.text in (".ptr",): pass
      elif t.text.startswith(".") and t.text[1:] in FUNDAMENTAL_TYPES: typ = t.text[1:]
      elif t.text.startswith("."): raise self.err(t, f"unknown variable attribute {t.text!r}: expected .align N, .v2/.v4 or a type")
      else:
        name = t
        break
    if typ is None: raise self.err(name, f"variable {name.text!r} has no type (.b8 .. .b64, .u/.s/.f types)")
    count, sized = vec, True
    while self.accept("["):
      if self.accept("]"):
        sized = False
        continue
      count *= self.number("an array size")
      self.expect("]")
    init = None
    if self.accept("="):
      init = self._initializer(symbols=space == "global")
    self.expect(";")
    v = Variable(name.text, space, typ, count if sized else 0, align or type_bytes(typ) * vec, init, extern)
    if not sized and not (extern and space == "shared"):
      raise self.err(name, f"{name.text!r}: an unsized array is only valid as `.extern .shared` (dynamic shared memory)")
    return v

  def _initializer(self, symbols: bool = False) -> list:
    """Initial values; with `symbols` (a .global's) also a variable's address, `name`, `name+N` or `generic(name)[+N]`,
    kept as (name, N): the loader relocates those (R_CUDA_G64), the SM never reads a .global's initialiser."""
    out = []
    if self.accept("{"):
      while not self.accept("}"):
        out.extend(self._initializer(symbols))
        self.accept(",")
      return out
    neg = self.accept("-")
    t = self.next("an initial value")
    if symbols and t.kind == "id" and not neg:
      if t.text == "generic" and self.accept("("):
        t = self.next("a variable's name")
        self.expect(")")
      return [(t.text, self.number("an offset") if self.accept("+") else 0)]
    if t.kind != "num": raise self.err(t, f"initial value {t.text!r}: expected a number (a variable's address initialises only a .global)")
    return [_imm(t, neg).value]

  def _entry(self, kernels: dict) -> None:
    self.next(".entry")
    nt = self.next("the kernel's name")
    if nt.kind != "id" or nt.text.startswith((".", "%")): raise self.err(nt, f"expected the kernel's name, found {nt.text!r}")
    k = Kernel(nt.text, line=nt.line)
    if k.name in kernels: raise self.err(nt, f"kernel {k.name!r} defined twice")
    off = 0
    if self.accept("("):
      while not self.accept(")"):
        t = self.peek()
        if t is None or t.text != ".param": raise self.err(t, "expected .param in the kernel's parameter list")
        v = self._param()
        size = v.size
        off = _align(off, v.align)
        k.params.append((v.name, off, size))
        k.param_types[v.name] = v.type
        off += size
        if not self.accept(","):
          self.expect(")")
          break
    while self.peek() is not None and self.peek().text in (".maxntid", ".reqntid", ".minnctapersm", ".maxnreg", ".maxnctapersm",
                                                            ".noreturn", ".pragma", ".explicitcluster", ".reqnctapercluster", ".maxclusterrank"):
      d = self.next("")
      if d.text == ".pragma":
        self.next("a pragma string"); self.expect(";"); continue
      if d.text in (".noreturn", ".explicitcluster"): continue
      vals = [self.number(d.text + "'s value")]
      while self.accept(","): vals.append(self.number(d.text + "'s value"))
      if d.text == ".reqntid": k.reqntid = tuple(vals)
      if d.text == ".maxntid": k.maxntid = tuple(vals)
    if self.accept(";"):
      kernels[k.name] = k
      return
    self.expect("{")
    self._body(k)
    kernels[k.name] = k

  def _param(self) -> Variable:
    self.next(".param")
    align, typ, vec, ptr = 0, None, 1, False
    while True:
      t = self.next("a parameter type or name")
      if t.text == ".align":
        n = self.number(".align's byte count")
        if not ptr: align = n  # after .ptr it is the pointee's alignment (.param .u64 .ptr .global .align 16 p: still at 8)
      elif t.text in (".v2", ".v4"): vec = int(t.text[2:])
      elif t.text == ".ptr": ptr = True
      elif t.text in (".global", ".shared", ".const", ".local"): pass
      elif t.text.startswith(".") and t.text[1:] in FUNDAMENTAL_TYPES: typ = t.text[1:]
      elif t.text.startswith("."): raise self.err(t, f"unknown parameter attribute {t.text!r}: expected .align N, .ptr, a state space or a type")
      else:
        name = t
        break
    if typ is None: raise self.err(name, f"parameter {name.text!r} has no type")
    count = vec
    while self.accept("["):
      count *= self.number("an array size")
      self.expect("]")
    # ptxas aligns a plain parameter to its size, a .ptr's pointee alignment does not move it (PTX 5.1.6.1)
    return Variable(name.text, "param", typ, count, align or type_bytes(typ) * vec if align == 0 else align)

  def _body(self, k: Kernel) -> None:
    depth = 1
    while True:
      t = self.peek()
      if t is None: raise self.err(None, f"kernel {k.name!r} has no closing '}}'")
      if t.text == "}":
        self.i += 1
        depth -= 1
        if depth == 0: break
        continue
      if t.text == "{":
        self.i += 1; depth += 1; continue
      if t.text == ".reg": self._reg_decl(k)
      elif t.text in (".shared", ".local", ".const", ".param") or (t.text == ".extern" and self.peek(1) and self.peek(1).text == ".shared"):
        ext = self.accept(".extern")
        sp = self.peek().text[1:]
        v = self._variable(sp, ext)
        if sp == "shared":
          if v.extern:
            k.shared[v.name] = (-1, v)
            k.dynamic_shared = v.name
          else:
            o = _align(k.static_shared_bytes, v.align)
            k.shared[v.name] = (o, v)
            k.static_shared_bytes = o + v.size
        elif sp == "local":
          o = _align(k.local_bytes, v.align)
          k.local[v.name] = (o, v)
          k.local_bytes = o + v.size
        elif sp == "param":
          from .calls import declare_call_param
          declare_call_param(k, v)
        else: raise self.err(t, f"{t.text} declarations belong at module scope")
      elif t.text in (".loc", ".pragma", ".file"): self._skip_statement()
      elif t.text == ".callprototype":   # `name: .callprototype ...;` declares an indirect call's signature (PTX 9.7.13.3)
        while self.next("the end of the .callprototype").text != ";": pass
      elif t.kind == "id" and self.peek(1) is not None and self.peek(1).text == ":" and not t.text.startswith("%"):
        self.i += 2
        if t.text in k.labels: raise self.err(t, f"label {t.text!r} defined twice")
        k.labels[t.text] = len(k.instrs)
      else: k.instrs.append(self._instr())
    if k.plain_regs: k.instrs = [_plain_regs(ins, k.regs) for ins in k.instrs]
    for ins in k.instrs:
      for a in ins.args:
        if isinstance(a, Sym) and ins.op in ("bra", "brx") and a.name not in k.labels:
          raise PTXError(self.name, ins.line, ins.col, f"branch to undefined label {a.name!r}")
      for r in self._regs_of(ins):
        if r.name not in k.regs and not _is_special(r.name) and r.name != "_":
          raise PTXError(self.name, ins.line, ins.col, f"register {r.name} is not declared (declare it with .reg)")

  def _regs_of(self, ins: Instr):
    stack = list(ins.args) + ([ins.pred] if ins.pred else [])
    while stack:
      a = stack.pop()
      if isinstance(a, Reg): yield a
      elif isinstance(a, Vec): stack.extend(a.items)
      elif isinstance(a, Addr) and isinstance(a.base, Reg): yield a.base
      elif isinstance(a, PredPair): stack.extend([x for x in (a.p, a.q) if x is not None])

  def _reg_decl(self, k: Kernel) -> None:
    self.next(".reg")
    typ, vec = None, 1
    while self.peek() is not None and self.peek().text.startswith("."):
      t = self.next("")
      if t.text[1:] in FUNDAMENTAL_TYPES: typ = t.text[1:]
      elif t.text in (".v2", ".v4"): vec = int(t.text[2:])
      else: raise self.err(t, f"unknown register attribute {t.text!r}: expected a type (.b32, .f32, .pred, ...)")
    if typ is None: raise self.err(self.peek(), "a .reg declaration needs a type (.b32, .f32, .pred, ...)")
    if vec != 1: raise self.err(self.peek(), "vector registers (.reg .v2/.v4) are not supported; declare scalar registers")
    while True:
      t = self.next("a register name")
      if t.kind != "id" or t.text.startswith("."): raise self.err(t, f"expected a register name (%name), found {t.text!r}")
      if not t.text.startswith("%"): k.plain_regs = True   # a scoped `{ .reg .b32 tmp; ... }` as LLVM writes one
      if t.text in k.regs and k.regs[t.text] != typ:
        raise self.err(t, f"register {t.text} declared again as .{typ} (it is .{k.regs[t.text]}): the emulated SM keeps one "
                          "register namespace per kernel, so a scoped redeclaration must keep the type")
      if self.accept("<"):
        n = self.number("the register count")
        self.expect(">")
        for j in range(n): k.regs[f"{t.text}{j}"] = typ
      else: k.regs[t.text] = typ
      if not self.accept(","): break
    self.expect(";")

  def _instr(self) -> Instr:
    first = self.peek()
    pred, neg = None, False
    if self.accept("@"):
      neg = self.accept("!")
      p = self.next("a predicate register")
      if not p.text.startswith("%"): raise self.err(p, f"expected a predicate register after '@', found {p.text!r}")
      pred = Reg(p.text)
    t = self.next("an instruction")
    if t.kind != "id" or t.text.startswith((".", "%")): raise self.err(t, f"expected an instruction opcode, found {t.text!r}")
    parts = t.text.split(".")
    op, mods = parts[0], tuple(parts[1:])
    args = []
    if not self.accept(";"):
      while True:
        args.append(self._operand())
        if self.accept(";"): break
        if not self.accept(","):
          u = self.peek()
          raise self.err(u, f"expected ',' or ';' after an operand of {t.text}, found {u.text if u else 'the end'!r}")
    return Instr(op, mods, tuple(args), pred, neg, first.line, first.col, self.lines[first.line - 1].strip())

  def _operand(self):
    t = self.peek()
    if t is None: raise self.err(None, "expected an operand")
    if t.text == "{":
      self.i += 1
      items = []
      while True:
        items.append(self._operand())
        if self.accept("}"): break
        self.expect(",")
      return Vec(tuple(items))
    if t.text == "[":
      self.i += 1
      base, off = None, 0
      u = self.next("an address")
      if u.kind == "id": base = Reg(u.text) if u.text.startswith("%") else Sym(u.text)
      elif u.kind == "num" or u.text == "-":
        self.i -= 1
        off = self.number("an address")
      else: raise self.err(u, f"expected a register, a variable or an integer address, found {u.text!r}")
      if base is not None and self.accept(","):   # a texture/surface operand [tex, {coords}]: parsed, refused when run
        items = [base]
        while True:
          items.append(self._operand())
          if self.accept("]"): return Vec(tuple(items))
          self.expect(",")
      while self.peek() is not None and self.peek().text in ("+", "-"):
        sign = self.next("").text
        if self.accept("-"): sign = "+" if sign == "-" else "-"
        v = self.number("an address offset")
        off += -v if sign == "-" else v
      self.expect("]")
      return Addr(base, off)
    if t.text in ("-", "!") or t.kind == "num":
      neg = self.accept("-")
      if not neg and self.accept("!"):
        r = self.next("a predicate")
        return ("not", Reg(r.text))
      u = self.next("a number")
      if u.kind == "num":
        try: return _imm(u, neg)
        except ValueError: raise self.err(u, f"{u.text!r} is not a valid number") from None
      if neg and u.text.startswith("%"): return ("neg", Reg(u.text))
      raise self.err(u, f"expected a number after '-', found {u.text!r}")
    if t.kind == "id":
      self.i += 1
      if t.text.startswith("%"):
        r = Reg(t.text)
        if self.accept("|"):
          q = self.next("a predicate")
          return PredPair(r, None if q.text == "_" else Reg(q.text))
        return r
      if t.text == "_": return SINK
      if t.text.startswith("."): raise self.err(t, f"unexpected {t.text!r}: modifiers attach to the opcode without spaces")
      if self.peek() is not None and self.peek().text == "+" and self.peek(1) is not None and self.peek(1).kind == "num":
        self.i += 1
        return Addr(Sym(t.text), self.number("an offset"))
      return Sym(t.text)
    if t.text == "(":   # call argument lists
      self.i += 1
      items = []
      while not self.accept(")"):
        items.append(self._operand())
        self.accept(",")
      return Vec(tuple(items))
    raise self.err(t, f"unexpected {t.text!r}: expected an operand (register, immediate, [address], {{vector}}, label)")


def _plain_regs(ins: Instr, regs: dict) -> Instr:
  """ins with the names of registers declared without '%' (parsed as symbols) as registers."""
  def fix(a):
    if isinstance(a, Sym) and a.name in regs: return Reg(a.name)
    if isinstance(a, Addr) and isinstance(a.base, Sym) and a.base.name in regs: return Addr(Reg(a.base.name), a.offset)
    if isinstance(a, Vec): return Vec(tuple(fix(x) for x in a.items))
    return a
  return replace(ins, args=tuple(fix(a) for a in ins.args))


SPECIAL = re.compile(r"%(tid|ntid|ctaid|nctaid)(\.[xyz])?|%(laneid|warpid|nwarpid|smid|nsmid|gridid|clock|clock64|globaltimer|"
                     r"globaltimer_lo|globaltimer_hi|lanemask_(eq|le|lt|ge|gt)|dynamic_smem_size|total_smem_size|clusterid\.[xyz]|"
                     r"nclusterid\.[xyz]|cluster_ctaid\.[xyz]|cluster_nctaid\.[xyz]|cluster_ctarank|cluster_nctarank|is_explicit_cluster|"
                     r"envreg\d+|pm\d)")


def _is_special(name: str) -> bool:
  return SPECIAL.fullmatch(name) is not None


def parse(text: str, name: str) -> tuple[dict[str, Kernel], dict[str, Variable], dict]:
  """Parse PTX text into its kernels, module-scope .const and .global variables and header (.version, .target,
  .address_size)."""
  return _Parser(text, name).module()
