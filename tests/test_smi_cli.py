"""`python -m hcq.smi` as a user runs it: a fresh process, pointed at a recorded machine with HCQ_SYSROOT."""
from __future__ import annotations
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hcq.drivers.mock.amdgpu.gpu import BOARDS

FIXTURES = Path(__file__).parent / "fixtures" / "sysfs"


def smi(*args: str, board: str | None = None, denied: str | None = None, dev: str | None = None) -> subprocess.CompletedProcess:
  env = {k: v for k, v in os.environ.items() if k not in ("DEV", "HCQ_SYSROOT", "HCQ_SYSROOT_DENIED", "HCQ_DEBUG")}
  if board: env["HCQ_SYSROOT"] = str(FIXTURES / board)
  if denied: env["HCQ_SYSROOT_DENIED"] = denied
  if dev: env["DEV"] = dev
  return subprocess.run([sys.executable, "-m", "hcq.smi", *args], capture_output=True, text=True, env=env, timeout=60)


def test_one_shot_table():
  out = smi(board="rx7900xtx")
  assert out.returncode == 0, out.stderr
  assert "AMD Radeon RX 7900 XTX" in out.stdout and "gfx1100" in out.stdout and out.stderr == ""


def test_json_document():
  out = smi("--json", "--pids", board="mi300x")
  assert out.returncode == 0, out.stderr
  doc = json.loads(out.stdout)
  assert doc["schema_version"] == 1 and [d["arch"] for d in doc["devices"]] == ["gfx942", "gfx942"]
  assert doc["root"] == str(FIXTURES / "mi300x") and {p["pid"] for p in doc["processes"]} == {5150, 31337}


def test_watch_two_refreshes_in_place():
  out = smi("--watch", "0", "--count", "2", board="rx7900xtx")
  assert out.returncode == 0, out.stderr
  frames = out.stdout.split("\x1b[H")[1:]
  assert len(frames) == 2 and "frame 1 of 2]" in frames[0] and "frame 2 of 2]" in frames[1]
  assert all(f.endswith("\x1b[J") and "AMD Radeon RX 7900 XTX" in f for f in frames)


def test_ctrl_c_ends_a_watch_cleanly():
  env = {**os.environ, "HCQ_SYSROOT": str(FIXTURES / "rx7900xtx")}
  # Ctrl-C as a terminal delivers it: a test run started in the background (`pytest &`) passes SIGINT down ignored
  interactive = "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); runpy.run_module('hcq.smi', run_name='__main__')"
  proc = subprocess.Popen([sys.executable, "-c", interactive, "--watch", "0.2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
  try:
    first = os.read(proc.stdout.fileno(), 65536)  # the first frame is drawn: main()'s handlers are in place
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
  finally:
    proc.kill()
  assert proc.returncode == 0 and b"Traceback" not in err and first.startswith(b"\x1b[H")


def test_watch_json_is_one_document_per_line():
  out = smi("--json", "--count", "2", "--watch", "0", board="mi300x")
  lines = out.stdout.splitlines()
  assert out.returncode == 0 and len(lines) == 2 and all(json.loads(line)["schema_version"] == 1 for line in lines)


def test_pids_and_dev_filter():
  out = smi("--pids", "--dev", "26:00.0", board="mi300x")
  assert out.returncode == 0, out.stderr
  assert "0000:26:00.0" in out.stdout and "0000:05:00.0" not in out.stdout
  assert "pt_main_thread" in out.stdout and "rocm-smi-daemon" in out.stdout


def test_no_gpu():
  out = smi(board="no-gpu")
  assert out.returncode == 3 and "no GPU found (/dev/kfd absent, no NVIDIA driver)" in out.stdout
  doc = json.loads(smi("--json", board="no-gpu").stdout)
  assert doc["devices"] == [] and doc["exit_code"] == 3 and doc["notes"][0]["kind"] == "no_gpu"


def test_no_permission():
  out = smi("--pids", board="rx7900xtx", denied="/dev/kfd:/proc/999/fd")
  assert out.returncode == 4
  assert "permission denied on /dev/kfd: add your user to the render group" in out.stdout
  assert "AMD Radeon RX 7900 XTX" in out.stdout and "1 process could not be inspected" in out.stdout


def test_no_match_and_usage_errors_never_show_a_traceback():
  for args, env, code in ((("--dev", "9"), {}, 5), (("--count", "0"), {}, 2), (("--bogus",), {}, 2), ((), {"dev": "INTEL"}, 2),
                          ((), {"dev": "MOCKKFD+AMD"}, 2), ((), {"dev": "KFD+AMD::gfx1100"}, 5), ((), {"dev": "CPU"}, 5)):
    out = smi(*args, board="mi300x", **env)
    assert out.returncode == code, (args, env, out.stdout, out.stderr)
    assert "Traceback" not in out.stdout + out.stderr


def test_help_describes_everything():
  out = smi("--help")
  assert out.returncode == 0
  for word in ("--watch", "--json", "--pids", "--dev", "--count", "HCQ_SYSROOT", "exit codes", "DEV=", "docs/smi.md"):
    assert word in out.stdout, word


@pytest.mark.parametrize("arch", list(BOARDS))
def test_emulated_gpu(arch):
  """Each arch's emulated board, one device (MOCKKFD+AMD alone is gfx1100's), as JSON and as the table."""
  out = smi("--json", dev="MOCKKFD+AMD" if arch == "gfx1100" else f"MOCKKFD+AMD::{arch}")
  assert out.returncode == 0, out.stderr
  (d,) = json.loads(out.stdout)["devices"]
  assert d["emulated"] is True and d["arch"] == arch and d["emulated_state"]["queues"] == 0  # a fresh process: idle
  table = smi(dev=f"MOCKKFD+AMD::{arch}")
  assert table.returncode == 0 and "emulated" in table.stdout and arch in table.stdout


@pytest.mark.skipif(os.path.exists("/dev/kfd") or os.path.exists("/proc/driver/nvidia"), reason="this machine has a GPU driver")
def test_this_machine_without_gpu():
  out = smi("--json")
  assert out.returncode == 3 and json.loads(out.stdout)["root"] == "/"
