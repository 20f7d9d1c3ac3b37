"""Every fenced python and sh block of README.md and docs/*.md runs as written (tests/doc_blocks.py says how blocks are
marked), so the docs cannot drift from the code: one process per page, in a temp folder, with the default devices."""
from __future__ import annotations
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.doc_blocks import blocks
from tests.tools import require_tool

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNNABLE = [p for p in PAGES if any(b.runs for b in blocks(p))]  # a bad info string stops collection, naming its line
TOOLS = ("clang-19", "ld.lld-19", "llvm-mc-19")


@pytest.mark.parametrize("page", RUNNABLE, ids=lambda p: p.name)
def test_page_blocks_run(page, tmp_path):
  runs = [b for b in blocks(page) if b.runs]
  for tool in TOOLS:
    if any(tool in b.text for b in runs): require_tool(tool)
  env = {k: v for k, v in os.environ.items() if k != "DEV"}  # the docs describe the default devices
  env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # `python` in sh blocks is this one
  done = subprocess.run([sys.executable, str(ROOT / "tests" / "doc_blocks.py"), str(page)], cwd=tmp_path, env=env,
                        capture_output=True, text=True, timeout=180)
  assert done.returncode == 0, f"{page.name}:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"


def test_bad_info_string_is_refused(tmp_path):
  """A misspelt marker would make a block run (or not) by accident."""
  page = tmp_path / "p.md"
  page.write_text("```python skech\nx = 1\n```\n")
  with pytest.raises(ValueError, match=r"p.md:1: info string word 'skech'; valid after the language: one of sketch, notest"):
    blocks(page)


def test_value_comments_are_read():
  from tests.doc_blocks import expected_value
  assert expected_value("# 0xc0584b02, the ioctl request number") == "0xc0584b02"
  assert expected_value("# ['a, b', 'c']  (a list)") == "['a, b', 'c']"
  assert expected_value("# 64: one AQL packet") == "64"
  assert expected_value("# what ran") is None and expected_value("# 1.5 seconds") is None


def test_runner_reports_wrong_values_and_failing_commands(tmp_path, monkeypatch):
  from tests.doc_blocks import run_page
  monkeypatch.chdir(tmp_path)
  page = tmp_path / "p.md"
  page.write_text("```python\nx = 3\nx + 1   # 5: a wrong claim\n```\n")
  with pytest.raises(AssertionError, match="p.md:3: the comment says 5, the statement gives 4"): run_page(page)
  page.write_text("```txt file=a.txt\nhi\n```\n```sh\ngrep -q hi a.txt\nfalse\n```\n```sh notest\nexit 3\n```\n")
  with pytest.raises(SystemExit, match="p.md:4: the sh block exited with 1"): run_page(page)
