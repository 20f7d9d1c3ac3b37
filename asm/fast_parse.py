"""Parsing a line without re-reading the table: one regular expression splits the operands, and what each operand
and modifier token means is remembered per token (registers, numbers and modifiers repeat across a program).

The tokens mean what hcq.asm.parser's own operand_value and _modifier say they mean (they are called once per
new token); the instruction is built by the per-opcode builders. A line this path does not cover (a VOPD pair,
|abs| bars, nested brackets, text operands) or any error goes to hcq.asm.parser.parse_line_generic, so errors
keep their line:column and wording. tests/test_asm_fast.py checks both give the same bytes and errors.
"""
from __future__ import annotations
import re
from typing import Any

from hcq.asm import parser
from hcq.asm.fast_build import builder_of
from hcq.asm.instruction import Instruction
from hcq.asm.isa import ISA, Opcode
from hcq.asm.operands import OperandError

# a run of separators, then one operand: brackets, parentheses and |abs| bars group (one level of brackets, as
# assembly writes them); anything else does not match and goes to the generic scanner
_GROUP = r"\[[^\[\]()|]*\]|\([^\[\]()|]*\)"
_PIECE = rf"(?:[^ \t,\[\]()|]|{_GROUP}|\|(?:[^\[\]()|]|{_GROUP})*\|)+"  # one way to match any text: no backtracking blowup
_TOKEN = re.compile(rf"([ \t,]*)({_PIECE})")
_COVERED = re.compile(rf"[ \t,]*(?:{_PIECE}(?:[ \t,]+{_PIECE})*)?[ \t,]*")  # the whole text is tokens and separators
_TOKEN_CACHE_LIMIT = 1 << 16  # distinct operand tokens remembered per arch; more start the memo afresh


class _Defer(Exception):
  """This line needs the generic parser."""


def split_tokens(rest: str) -> list[tuple[str, str]] | None:
  """[(separator, token)] as hcq.asm.tokens.split_operands gives them, or None when the text needs its full
  scanner (nesting, unbalanced brackets or bars)."""
  if _COVERED.fullmatch(rest) is None: return None
  out = [("," if "," in run else " ", tok) for run, tok in _TOKEN.findall(rest)]
  if out and out[0][0] == " ": out[0] = ("", out[0][1])
  return out


class LineParser:
  """Per-arch fast line parser: mnemonic -> candidate opcodes, operand token -> value, (opcode, token) ->
  modifier, each remembered."""

  def __init__(self, isa: ISA) -> None:
    self.isa = isa
    self.builder = builder_of(isa)
    self.candidates: dict[str, Opcode | bool] = {}  # mnemonic as written -> its first candidate (False: none)
    self.values: dict[str, Any] = {}
    self.mods: dict[tuple[int, str], tuple[str, Any] | None] = {}
    self.shapes: dict[int, tuple[int, bool]] = {}  # id(opcode) -> (positional operands at most, EXP's space)

  def parse(self, text: str, line: int = 1, column: int = 1) -> Instruction:
    """As parser.parse_line_generic(isa, text, line, column)."""
    try: return self._parse(text)
    except (_Defer, OperandError, KeyError, ValueError, TypeError, IndexError, StopIteration):
      return parser.parse_line_generic(self.isa, text, line, column)

  def _parse(self, text: str) -> Instruction:
    body = text.strip()
    if " :: " in body: raise _Defer
    mnemonic, _, rest = body.partition(" ")
    opc = self.candidates.get(mnemonic)
    if opc is None:
      # the first candidate is the one the generic parser tries first: ours, or defer so that it decides
      opcodes = parser.candidates(self.isa, mnemonic.lower())
      opc = opcodes[0] if opcodes else False
      if len(self.candidates) < _TOKEN_CACHE_LIMIT: self.candidates[mnemonic] = opc
    if opc is False: raise _Defer
    if opc.fmt.name == "SOPP":  # the whole rest is one operand
      stripped = rest.strip()
      return self._parse_with(opc, [("", stripped)] if stripped else [])
    toks = split_tokens(rest)
    if toks is None: raise _Defer
    return self._parse_with(opc, toks)

  def _parse_with(self, opc: Opcode, toks: list[tuple[str, str]]) -> Instruction:
    shape = self.shapes.get(id(opc))
    if shape is None:
      shape = self.shapes[id(opc)] = (len(opc.operands) + (1 if opc.returned else 0), opc.fmt.name == "EXP", parser.required_modifiers(opc))
    npos, exp, required = shape
    # the positional operands are the comma-separated run from the start (as parser._parse_with takes them)
    known, args = self.values, []
    for i, (sep, tok) in enumerate(toks):
      if i >= npos or i and sep != "," and not (exp and i == 1): break
      v = known.get(tok, _MISSING)
      args.append(self._value(tok) if v is _MISSING else v)
    if len(args) == len(toks) and not required: return self.builder.build(opc, args, {})
    mods: dict[str, Any] = {}
    order, place = parser.modifier_order(opc), -1
    for _, tok in toks[len(args):]:
      km = self.mods.get((id(opc), tok), False)
      if km is False:
        try: km = parser._modifier(opc, tok)
        except OperandError: km = None
        if len(self.mods) > _TOKEN_CACHE_LIMIT: self.mods.clear()
        self.mods[(id(opc), tok)] = km
      if km is None or order.get(km[0], place) < place: raise _Defer  # out of llvm-mc's order: the generic parser says so
      place = order.get(km[0], place)
      mods[km[0]] = km[1]
    if any(f not in mods for f in required): raise _Defer  # the generic parser says what is missing
    return self.builder.build(opc, args, mods)  # an OperandError sends the line to the generic parser

  def _value(self, token: str) -> Any:
    v = self.values.get(token, _MISSING)
    if v is _MISSING:
      v = parser.operand_value(token)
      if len(self.values) > _TOKEN_CACHE_LIMIT: self.values.clear()
      self.values[token] = v
    return v


_MISSING = object()


def line_parser(isa: ISA) -> LineParser:
  """The fast line parser of an arch (made once per process)."""
  return isa.helper(LineParser)
