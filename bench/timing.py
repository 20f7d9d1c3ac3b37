"""Timing helpers shared by the benchmarks."""
from __future__ import annotations
import os
import statistics
import subprocess
import sys
import time


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
  """The environment for timed interpreters: bytecode writing on, so that the warm-up run leaves .pyc files
  (PYTHONDONTWRITEBYTECODE, set on some machines, would make every run compile every module)."""
  env = {**os.environ, **(extra or {})}
  env.pop("PYTHONDONTWRITEBYTECODE", None)
  return env


def median_interpreter_ms(argv: list[str], runs: int, env: dict[str, str] | None = None, check: bool = True) -> float:
  """Median wall time in ms of `python *argv` in a fresh interpreter, process start included, after one warm-up run."""
  cmd, full_env = [sys.executable, *argv], child_env(env)
  quiet = {} if check else {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
  subprocess.run(cmd, check=check, env=full_env, **quiet)
  times = []
  for _ in range(runs):
    t0 = time.perf_counter()
    subprocess.run(cmd, check=check, env=full_env, **quiet)
    times.append((time.perf_counter() - t0) * 1e3)
  return statistics.median(times)
