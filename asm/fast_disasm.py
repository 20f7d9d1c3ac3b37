"""Disassembling straight from the words: one function per opcode, compiled once from the decoder's plan (the bits
and field verdicts that make a word valid) and the printer's word printer (its text), so that a valid word
becomes its line with no Instruction object between.

An instruction the compiled function is not sure of returns 0 and goes the whole way through
hcq.asm.fast_decode.Decoder.decode_at and hcq.asm.fast_print's render, which accept it, print it or raise their own
DecodeError. The formats are tried in the decoder's order, so that a word means the same opcode on both paths.
tests/test_asm_fast.py checks this path against decode-then-render on random words and every opcode's samples.
"""
from __future__ import annotations
import struct

from hcq.asm.codegen import make_function
from hcq.asm.fast_decode import Decoder, decoder
from hcq.asm.fast_print import Printer, _Texts, printer_of, word_text_code
from hcq.asm.instruction import DecodeError
from hcq.asm.isa import ISA, Opcode


class Disassembler:
  """Per-arch text from words. The first dword's bits that decide its format and opcode (its top 9 bits, the fixed
  bits of the formats that could match there, their opcode fields) key a memo of what to do with it: the compiled
  function of its opcode, or the formats to try by the bits past the first dword, in decode_at's order."""

  _MEMO_LIMIT = 1 << 16  # keys remembered; past that the candidates are worked out per instruction

  def __init__(self, isa: ISA) -> None:
    self.isa = isa
    self.decoder: Decoder = decoder(isa)
    self.printer: Printer = printer_of(isa)
    self.compiled: dict[int, object] = {}  # id(opcode) -> fn(word, words, i, n, append) -> dwords, 0 for the slow path
    self.deciding = [0xff800000 | _deciding(cands) for cands in self.decoder.by_top]  # by top 9 bits
    self.memo: dict[int, object] = {}
    self.derived: dict[tuple, tuple] = {}  # tables made from others, see _derived

  def lines(self, data: bytes) -> list[str]:
    """One line per instruction of `data`, as render(decode_at(...)) gives them; DecodeError names the byte offset."""
    words = _dwords(data)
    n, out, i = len(words), [], 0
    append, memo, deciding, resolve = out.append, self.memo, self.deciding, self._resolve
    while i < n:
      first = words[i]
      how = memo.get(first & deciding[first >> 23])
      if how is None: how = resolve(first)
      if type(how) is not tuple: size = how(first, words, i, n, append)  # one single-dword opcode can match
      else:
        size = 0
        for dwords, fmask, fvalue, fn in how:  # as decode_at tries them
          if i + dwords > n: break
          w = first if dwords == 1 else first | words[i + 1] << 32 if dwords == 2 else first | words[i + 1] << 32 | words[i + 2] << 64
          if w & fmask != fvalue: continue  # fixed bits past the first dword (VOP3 DPP's src0 = 250/233/234)
          size = fn(w, words, i, n, append)
          break
      if not size: size = self._slow(data, 4 * i, append)
      i += size
    if 4 * n < len(data): self._slow(data, 4 * n, append)  # a tail shorter than a dword: the decoder's error
    return out

  def _resolve(self, first: int):
    """What to do with a first dword: decode_at's candidates that its bits leave, up to the first that needs no
    more bits to be sure of, each with its opcode's compiled function (the slow path's where none); memoised by
    the deciding bits."""
    dec = self.decoder
    how: list = []
    for fmt, fmask, fvalue, op_lo, op_mask, ops, _, size in dec.by_key.get(first >> 23 << 9 | first & 0x1ff) or dec._candidates(first):
      if first & fmask & 0xffffffff != fvalue & 0xffffffff: continue
      opc = ops.get(first >> op_lo & op_mask)
      if opc is None:  # no such opcode (VOP3 and VOP3SD share fixed bits): the next format, once the words suffice
        if size > 4: how.append((size // 4, *_NO_WORD, None))
        continue
      how.append((size // 4, fmask, fvalue, self._compiled(opc)))
      if fmask >> 32 == 0: break  # all its fixed bits lie in the first dword: it is the one
    result = how[0][3] if len(how) == 1 and how[0][0] == 1 else tuple(how)
    if len(self.memo) < self._MEMO_LIMIT: self.memo[first & self.deciding[first >> 23]] = result
    return result

  def _slow(self, data: bytes, pos: int, append) -> int:
    """Decode and render the instruction at byte `pos` the whole way; its size in dwords."""
    try: inst = self.decoder.decode_at(data, pos)
    except DecodeError as e: raise DecodeError(f"at byte {pos}: {e}") from None
    append(self.printer.render(inst))
    return inst.size // 4

  def _compiled(self, opc: Opcode):
    fn = self.compiled.get(id(opc))
    if fn is None: fn = self.compiled[id(opc)] = self._compile(opc) or _slow_path
    return fn

  def _derived(self, base: dict, verdicts: list, fn, *args) -> dict:
    """A table computed from `base` and `verdicts` by fn, made once for them (as base's own type)."""
    key = (id(base),) + tuple(id(v) for v in verdicts)
    t = self.derived.get(key)
    if t is None: t = self.derived[key] = (type(base)(fn, *args), base, verdicts)  # the sources kept alive: ids stay theirs
    return t[0]

  def _compile(self, opc: Opcode):
    """fn(word, words, i, n, append) -> dwords after appending the text, or 0 where the slow path decides; None
    when the decoder's or the printer's plan does not cover the opcode."""
    plan = self.decoder._plan(opc)
    pplan = self.printer.plan_of(opc)
    if plan is None or pplan is None: return None
    _, need_mask, need_value, literal_always, literal_fields, checks = plan
    fmt = opc.fmt
    env: dict = {"FAIL": 0}
    groups: dict[tuple[int, int], list] = {}  # the verdicts on each field
    for lo, m, verdicts in checks: groups.setdefault((lo, m), []).append(verdicts)
    folded: set[tuple[int, int]] = set()

    def fold(texts: _Texts, name: str, unseen: tuple) -> _Texts:
      """A field's texts with its verdicts folded in (None where one says no), when the texts are looked up for
      every value the verdicts could refuse."""
      f = fmt.fields[name]
      vs = groups.get((f.lo, f.mask))
      if not vs or not all(v[u] for v in vs for u in unseen): return texts
      folded.add((f.lo, f.mask))
      return self._derived(texts, vs, lambda x: texts[x] if all(v[x] for v in vs) else None, texts.registers)
    body = word_text_code(opc, pplan, env, values_ok=False, wrap=fold)
    if body is None: return None
    dwords = fmt.size // 4
    code = ["def text_of(w, words, i, n, append):"]
    if need_mask: code.append(f"  if w & {need_mask} != {need_value}: return 0")
    has_literal = "True" if literal_always else " or ".join(f"w >> {lo} & {m} == 255" for lo, m in literal_fields)
    taken = [f"  if i + {dwords} >= n: return 0", f"  lit = words[i + {dwords}]", f"  size = {dwords + 1}"]
    if has_literal == "True": code += taken
    elif has_literal: code += [f"  if {has_literal}:"] + ["  " + t for t in taken] + ["  else:", "    lit = None", f"    size = {dwords}"]
    else: code += ["  lit = None", f"  size = {dwords}"]
    for k, ((lo, m), vs) in enumerate(groups.items()):  # one table per field for the verdicts not folded
      if (lo, m) in folded: continue
      env[f"V{k}"] = vs[0] if len(vs) == 1 else self._derived(vs[0], vs, lambda x, vs=vs: all(v[x] for v in vs))
      code.append(f"  if not V{k}[w >> {lo} & {m}]: return 0")
    code += body + ["  append(text)", "  return size"]
    return make_function(code, env, "text_of")  # one compile per shape of opcode: names and numbers from its plans


_NO_WORD = (0, 1)  # a (mask, value) no word matches: the dispatch loop checks the words suffice, then goes on


def _slow_path(*args) -> int:
  return 0


def _deciding(cands: tuple) -> int:
  """The first-dword bits that decide among these candidate formats: their fixed bits and opcode fields."""
  m = 0
  for fmt, fmask, fvalue, op_lo, op_mask, *_ in cands: m |= fmask & 0xffffffff | op_mask << op_lo
  return m


def _dwords(data: bytes) -> tuple[int, ...]:
  """The little-endian dwords of data (a tail shorter than a dword left out)."""
  return struct.unpack_from(f"<{len(data) // 4}I", data)


def disassembler(isa: ISA) -> Disassembler:
  """The text-from-words disassembler of an arch (made once per process)."""
  return isa.helper(Disassembler)
