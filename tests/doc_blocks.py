"""The fenced code blocks of the docs, and a runner that runs one page's blocks as a reader would (tests/test_docs.py).

A block's info string is `LANG [MARKER] [file=NAME]`:
  python, sh       run in page order: python blocks in one namespace, sh blocks with bash, all in one temp folder;
  sketch           shows a shape, not code to run as it is (left out);
  notest           runs as written but is left out of the tests (it sets up a machine or takes minutes);
  file=NAME        the block is a file the page's later blocks use: written to NAME in that folder, not run.
Blocks in other languages (or none) are text. A python expression statement followed by a comment that starts with a
Python literal (`x.hex()   # '0a1b'`, `len(b)   # 64: one packet`) must evaluate to it: the literal is the value's repr
or str, up to `, `, `: `, two spaces or the end of the comment.

  python tests/doc_blocks.py docs/asm.md     # runs the page's blocks in the current folder
"""
from __future__ import annotations
import ast
import io
import re
import subprocess
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

RUN_LANGS = ("python", "sh")
MARKERS = ("sketch", "notest")
_FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.M | re.S)


@dataclass
class Block:
  """One fenced block: where it is, its language, marker and file name (from the info string), and its text."""
  path: Path
  line: int
  lang: str
  marker: str | None
  file: str | None
  text: str

  @property
  def runs(self) -> bool: return self.lang in RUN_LANGS and self.marker is None and self.file is None

  def where(self) -> str: return f"{self.path.name}:{self.line}"


def blocks(path: Path) -> list[Block]:
  """The fenced blocks of a Markdown file, in order; a bad info string (unknown word) is a ValueError naming its line."""
  source = path.read_text()
  out = []
  for m in _FENCE.finditer(source):
    line = source.count("\n", 0, m.start()) + 1
    words = m.group(1).split()
    lang, marker, file = (words[0] if words else ""), None, None
    for w in words[1:]:
      if w in MARKERS and marker is None: marker = w
      elif w.startswith("file=") and file is None and len(w) > 5: file = w[5:]
      else: raise ValueError(f"{path.name}:{line}: info string word {w!r}; valid after the language: one of {', '.join(MARKERS)}, file=NAME")
    out.append(Block(path, line, lang, marker, file, m.group(2)))
  return out


def expected_value(comment: str) -> str | None:
  """The value a `# ...` comment claims for its statement: its longest leading Python literal (cut at `, `, `: `, two
  spaces or the end), or None for prose."""
  text = comment.lstrip("#").strip()
  cuts = sorted({m.start() for m in re.finditer(r", |: |  ", text)} | {len(text)}, reverse=True)
  for cut in cuts:
    try:
      ast.literal_eval(text[:cut])
      return text[:cut]
    except (ValueError, SyntaxError, TypeError, RecursionError):
      continue
  return None


def _comments(text: str) -> dict[int, str]:
  """Line number -> the comment on that line."""
  return {tok.start[0]: tok.string for tok in tokenize.generate_tokens(io.StringIO(text).readline) if tok.type == tokenize.COMMENT}


def run_python(block: Block, namespace: dict) -> None:
  """Run a python block statement by statement, checking the values its comments claim."""
  tree = ast.parse(block.text, filename=block.where())
  comments = _comments(block.text)
  for stmt in tree.body:
    claim = expected_value(comments[stmt.end_lineno]) if isinstance(stmt, ast.Expr) and stmt.end_lineno in comments else None
    where = f"{block.path.name}:{block.line + stmt.lineno}"
    if claim is None:
      exec(compile(ast.Module([stmt], []), where, "exec"), namespace)
      continue
    value = eval(compile(ast.Expression(stmt.value), where, "eval"), namespace)
    if claim not in (repr(value), str(value)):
      raise AssertionError(f"{where}: the comment says {claim}, the statement gives {value!r}")


def run_page(path: Path) -> None:
  """Run every block of the page that runs, in order, in the current folder."""
  namespace: dict = {"__name__": "__main__"}
  for block in blocks(path):
    if block.file is not None: Path(block.file).write_text(block.text)
    if not block.runs: continue
    print(f"--- {block.where()} ({block.lang})", flush=True)
    if block.lang == "python": run_python(block, namespace)
    else:
      done = subprocess.run(["bash", "-euo", "pipefail", "-c", block.text])
      if done.returncode: raise SystemExit(f"{block.where()}: the sh block exited with {done.returncode}")


if __name__ == "__main__":
  run_page(Path(sys.argv[1]).resolve())
