"""python -m hcq.check on the emulated boards: every step passes, a refused RM call is a named row, never a traceback."""
from __future__ import annotations
import subprocess
import sys

from hcq import check
from hcq.devstring import parse_dev
from hcq.drivers.mock.nv import rm as mock_rm
from hcq.drivers.mock.nv.os import MockNVOS
from hcq.drivers.nv.device import NVDevice

STEPS = ["open", "memory kinds", "copy both ways", "signal/wait", "timestamps", "replay"]
NV_STEPS = STEPS + ["launch"]  # NV devices also launch a kernel through a QMD


def test_every_step_passes_on_the_emulated_nvidia_board(capsys):
  assert check.main(["--dev", "MOCKNV+NV", "--bytes", str((1 << 20) + 3)]) == 0
  out = capsys.readouterr().out.splitlines()
  rows = out[2:]
  assert [r.split("  ")[0].strip() for r in rows] == NV_STEPS and all(" ok " in r for r in rows)
  assert "results equal" in rows[-1]
  assert "host->device" in out[4] and "bytes equal" in out[4]


def test_the_same_table_on_the_emulated_amd_board(capsys):
  assert check.main(["--dev", "MOCKKFD+AMD", "--bytes", "65536"]) == 0
  assert len(capsys.readouterr().out.splitlines()) == 2 + len(STEPS)


def test_a_refused_rm_call_is_named_and_the_other_steps_still_run():
  class NoVideoMemory(mock_rm.MockRM):  # an RM that refuses video memory, as a sandbox may refuse a call it does not pass
    def alloc(self, a):
      from hcq.autogen.nv import classes as C
      if a.hClass == C.NV01_MEMORY_LOCAL_USER: raise mock_rm.RMError(mock_rm.S.NV_ERR_NOT_SUPPORTED, "refused")
      return super().alloc(a)
  rows = {r.step: r for r in check.run("MOCKNV+NV", 1 << 16, 10, opener=lambda s: NVDevice(parse_dev(s), MockNVOS(rm=NoVideoMemory())))}
  assert list(rows) == NV_STEPS
  for step in ("memory kinds", "copy both ways", "launch"):  # the launch uploads its code to video memory
    assert not rows[step].ok and rows[step].detail.startswith("RM refused:")
    assert "NV01_MEMORY_LOCAL_USER" in rows[step].detail and "NV_ERR_NOT_SUPPORTED" in rows[step].detail
  assert rows["signal/wait"].ok and rows["replay"].ok


def test_a_device_that_does_not_open_is_one_row_and_exit_1():
  rows = check.run("MOCKNV+NV", 1 << 16, 10, opener=lambda s: (_ for _ in ()).throw(OSError(2, "No such file or directory", "/dev/nvidiactl")))
  assert [(r.step, r.ok) for r in rows] == [("open", False)] and "nvidiactl" in rows[0].detail


def test_bad_arguments_exit_2_without_a_traceback():
  p = subprocess.run([sys.executable, "-m", "hcq.check", "--bytes", "0"], capture_output=True, text=True)
  assert p.returncode == 2 and "must be positive" in p.stderr and "Traceback" not in p.stderr


def test_the_hardware_script_runs_the_check_from_the_tree_without_installing_hcq(tmp_path):
  """tools/hardware_check.sh, what a session lent the H200 runs: hcq imported from a symlink tree of this checkout (no
  pip, no registry there), one header line, then the check's table; here on the emulated board."""
  import os
  from pathlib import Path
  script = Path(__file__).resolve().parent.parent / "tools" / "hardware_check.sh"
  env = {**os.environ, "PYTHON": sys.executable, "HCQ_CHECK_LIMIT": "120"}
  p = subprocess.run(["bash", str(script), "--dev", "MOCKNV+NV", "--bytes", "65536"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=150)
  assert p.returncode == 0, p.stdout + p.stderr
  lines = p.stdout.splitlines()
  assert lines[0].startswith("host: Linux") and lines[1].startswith("hcq.check MOCKNV+NV") and len(lines) == 3 + len(NV_STEPS)
  assert "GPU-" in lines[3] and "580." in lines[3]  # the open row names the UUID (GID control) and the driver version
