"""Test helpers for external tools: a missing tool skips locally but fails in CI, where .ci/run installs it."""
from __future__ import annotations
import os
import shutil

import pytest


def require(condition: bool, what: str) -> None:
  """Stop the test when `condition` is false: fail when CI is set (CI must have every tool), skip otherwise."""
  if condition: return
  if os.environ.get("CI"): pytest.fail(f"{what} is required in CI (.ci/run installs it)", pytrace=False)
  pytest.skip(f"{what} is not available")


def require_tool(name: str) -> str:
  """The path of an executable on PATH, or stop the test as `require` does."""
  path = shutil.which(name)
  require(path is not None, f"tool {name!r}")
  return path
