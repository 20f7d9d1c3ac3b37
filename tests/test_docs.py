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
TOOLS = ("clang-19", "ld.lld-19", "llvm-mc-19")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_page_blocks_run(page, tmp_path):
  runs = [b for b in blocks(page) if b.runs]
  if not runs: pytest.skip(f"{page.name} has no block that runs")
  for tool in TOOLS:
    if any(tool in b.text for b in runs): require_tool(tool)
  env = {k: v for k, v in os.environ.items() if k != "DEV"}  # the docs describe the default devices
  env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # `python` in sh blocks is this one
  done = subprocess.run([sys.executable, str(ROOT / "tests" / "doc_blocks.py"), str(page)], cwd=tmp_path, env=env,
                        capture_output=True, text=True, timeout=180)
  assert done.returncode == 0, f"{page.name}:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"


def test_info_strings_are_known():
  """A misspelt marker would make a block run (or not) by accident: every info string parses."""
  for page in PAGES: blocks(page)


def test_value_comments_are_read():
  from tests.doc_blocks import expected_value
  assert expected_value("# 0xc0584b02, the ioctl request number") == "0xc0584b02"
  assert expected_value("# ['a, b', 'c']  (a list)") == "['a, b', 'c']"
  assert expected_value("# 64: one AQL packet") == "64"
  assert expected_value("# what ran") is None and expected_value("# 1.5 seconds") is None
