"""Programs as text: assemble (labels, branches, comments) and disassemble."""
from __future__ import annotations
import re

from hcq.asm.fast_asm import assembler
from hcq.asm.fast_decode import decode_all_at
from hcq.asm.fast_disasm import disassembler
from hcq.asm.fast_parse import line_parser
from hcq.asm.instruction import Instruction
from hcq.asm.isa import load
from hcq.asm.parser import AsmError, parse_line

_LABEL = re.compile(r"^\s*([A-Za-z_.$][\w.$]*):")
_COMMENT_MARKS = (";", "//", "#")


def _strip_comment(line: str) -> str:
  for mark in _COMMENT_MARKS:
    i = line.find(mark)
    if i >= 0: line = line[:i]
  return line


def assemble(text: str, arch: str = "gfx1100") -> bytes:
  """LLVM AMDGPU assembly -> machine code. Labels ('name:') may be branch targets; ';', '//' and '#' start comments;
  lines starting with '.' (directives) are skipped. AsmError says line:column and what was expected: a label
  defined twice first, then the first line in error, then undefined labels and branches out of range."""
  isa = load(arch)
  fast = assembler(isa)
  encoders, encoder, parse = fast.encoders, fast.encoder, line_parser(isa).parse
  labels: dict[str, int] = {}  # label -> the index of the instruction it names
  pending: list[str] = []  # labels waiting for their instruction
  chunks: list[bytes | tuple] = []  # each instruction's bytes; (line, text, label) for a branch to a label
  branches = 0
  lines = text.splitlines()
  comments = any(mark in text for mark in _COMMENT_MARKS)
  for n, raw in enumerate(lines, 1):
    line = _strip_comment(raw) if comments and (";" in raw or "/" in raw or "#" in raw) else raw  # the cheap test first
    body = line.strip()
    head, _, rest = body.partition(" ")
    if ":" in head:  # a label is a name and a colon before any blank
      line = _take_labels(line, n, labels, pending)
      body = line.strip()
      head, _, rest = body.partition(" ")
    if not body or body[0] == ".": continue
    data = (encoders.get(head) or encoder(head))(rest)  # lines as llvm-mc prints them, straight to bytes
    if data is None:
      target = _branch_label(isa, line)
      if target is not None: data, branches = (n, line, target), branches + 1
      else:
        try: data = parse(line, n, 1).encode()
        except AsmError:
          for m in range(n, len(lines)): _take_labels(_strip_comment(lines[m]), m + 1, labels, pending)  # a twice-defined label first
          raise
    chunks.append(data)
    if pending:
      for name in pending: labels[name] = len(chunks) - 1
      pending.clear()
  if not branches: return b"".join(chunks)  # type: ignore[arg-type]
  offsets, pos = [], 0
  for c in chunks:
    offsets.append(pos)
    pos += 4 if type(c) is tuple else len(c)
  end = pos
  for i, c in enumerate(chunks):
    if type(c) is not tuple: continue
    n, line, target = c
    at = line.rfind(target)  # the label is the last operand
    if target not in labels and target not in pending: raise AsmError(f"undefined label {target!r}", n, at + 1)
    dest = offsets[labels[target]] if target in labels else end
    delta = (dest - offsets[i] - 4) // 4
    if not -32768 <= delta < 32768: raise AsmError(f"branch to {target!r} is out of range ({delta} dwords)", n, at + 1)
    chunks[i] = parse_line(isa, line[:at] + str(delta & 0xffff) + line[at + len(target):], n, 1).encode()
  return b"".join(chunks)  # type: ignore[arg-type]


def _take_labels(line: str, n: int, labels: dict[str, int], pending: list[str]) -> str:
  """The line with its leading labels blanked out, each added to `pending`; AsmError for one defined before."""
  while ":" in line:
    m = _LABEL.match(line)
    if not m: break
    name = m.group(1)
    if name in labels or name in pending: raise AsmError(f"label {name!r} is defined twice", n, m.start(1) + 1)
    pending.append(name)
    line = " " * m.end() + line[m.end():]
  return line


def _branch_label(isa, line: str) -> str | None:
  """The label a branch (s_branch, s_cbranch_*, s_call_b64) names, or None if its target is a number."""
  parts = line.split(None, 1)  # split(None) skips leading blanks itself
  if len(parts) < 2 or parts[0].lower() not in _branches(isa): return None
  last = parts[1].split(",")[-1].strip()
  return last if re.fullmatch(r"[A-Za-z_.$][\w.$]*", last) else None


def _branches(isa) -> frozenset[str]:
  """The DSL names of the opcodes whose decimal simm16 operand is a branch offset (a label in text), per ISA."""
  return isa.helper(_branch_names)


def _branch_names(isa) -> frozenset[str]:
  return frozenset(m for m, opc in isa.by_mnemonic.items() if any(isinstance(o, tuple) and o[0] == "simm16" and o[3] == "{dec}" for o in opc.operands))


def disassemble(data: bytes, arch: str = "gfx1100") -> list[str]:
  """Machine code -> one LLVM-syntax line per instruction. DecodeError names the byte offset it cannot decode."""
  return disassembler(load(arch)).lines(data)


def decode_all(data: bytes, arch: str = "gfx1100") -> list[Instruction]:
  """Machine code -> Instruction objects. DecodeError names the byte offset it cannot decode."""
  return decode_all_at(load(arch), data)
