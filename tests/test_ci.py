"""The CI test run itself: the README's command is .ci/run's, and its rules hold in the pytest-xdist workers it starts."""
from __future__ import annotations
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = '''
import os
from tests.tools import require, require_tool

def test_a_missing_tool():
  require_tool("hcq-no-such-tool")

def test_a_missing_condition():
  require(False, "a header")

def test_the_emulator_interleaves():
  assert os.environ.get("HCQ_EMU_INTERLEAVE") == "1"  # tests/conftest.py's setting reaches every worker
'''


def test_readme_runs_what_ci_runs():
  readme = re.search(r"this is what CI runs.*?```sh notest\n(.*?)\n```", (ROOT / "README.md").read_text(), re.S)
  assert readme, "README.md no longer shows the CI test command"
  assert (ROOT / ".ci" / "run").read_text().rstrip().splitlines()[-1] == readme.group(1)


def test_a_missing_tool_fails_in_ci_under_xdist(tmp_path):
  """With CI set, a test that needs a missing tool fails in the xdist worker (CI must have every tool; without CI it
  skips, as every local run shows), and tests/conftest.py's settings reach the workers."""
  (tmp_path / "test_probe.py").write_text(PROBE)
  env = {k: v for k, v in os.environ.items() if k not in ("HCQ_EMU_INTERLEAVE", "PYTEST_ADDOPTS")}
  env.update(PYTHONPATH=str(ROOT), CI="1")
  command = [sys.executable, "-m", "pytest", "-q", "-n", "1", "-p", "no:cacheprovider", "-p", "no:hypothesispytest",
             "-p", "tests.conftest", str(tmp_path / "test_probe.py")]  # one worker: a worker is what is tested
  out = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
  assert "2 failed, 1 passed" in out.stdout and "is required in CI" in out.stdout, out.stdout + out.stderr
