"""Splitting LLVM AMDGPU operand text into tokens, shared by the table generator and the text parser."""
from __future__ import annotations

_OPEN = {"(": ")", "[": "]"}


def split_operands(rest: str) -> list[tuple[str, str]]:
  """Operand text -> [(separator, token)]: separator is ',' or ' ' (or '' for the first); brackets, parentheses
  and |abs| bars group, so 'hwreg(1, 2, 3)', 'op_sel:[1,0]' and '-|v1|' stay whole."""
  return [(sep, tok) for sep, tok, _ in split_operands_at(rest)]


def split_operands_at(rest: str) -> list[tuple[str, str, int]]:
  """As split_operands, with each token's start index in `rest`."""
  out: list[tuple[str, str, int]] = []
  sep, cur, start, depth, in_abs = "", [], 0, [], False
  for i, ch in enumerate(rest):
    if not depth and not in_abs and ch in ", \t":
      if cur: out.append((sep, "".join(cur), start)); cur = []; sep = "," if ch == "," else " "
      elif ch == ",": sep = ","
      continue
    if not cur: start = i
    if ch in _OPEN: depth.append(_OPEN[ch])
    elif depth and ch == depth[-1]: depth.pop()
    elif ch == "|" and not depth: in_abs = not in_abs
    cur.append(ch)
  if cur: out.append((sep, "".join(cur), start))
  return out
