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


def require_module(name: str):
  """An importable Python module (a dependency of the test extras), or stop the test as `require` does."""
  import importlib
  try:
    return importlib.import_module(name)
  except ImportError:
    require(False, f"python package {name}")


def compile_opencl(source: str, folder, link: bool = True, mcpu: str = "gfx1100", extra: tuple[str, ...] = ()) -> bytes:
  """OpenCL C -> an AMDGPU code object with clang-19 (and ld.lld-19 when `link`): ET_DYN, or ET_REL without linking."""
  import subprocess
  from pathlib import Path
  folder = Path(folder)
  (folder / "k.cl").write_text(source)
  subprocess.run([require_tool("clang-19"), "-target", "amdgcn-amd-amdhsa", f"-mcpu={mcpu}", "-nogpulib", "-O2", *extra, "-c",
                  str(folder / "k.cl"), "-o", str(folder / "k.o")], check=True)
  if not link: return (folder / "k.o").read_bytes()
  subprocess.run([require_tool("ld.lld-19"), "-shared", str(folder / "k.o"), "-o", str(folder / "k.so")], check=True)
  return (folder / "k.so").read_bytes()
