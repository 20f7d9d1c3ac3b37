"""python -m hcq.asm asm/disasm/run as a user runs them (subprocesses), on the emulated GPU."""
from __future__ import annotations
import re
import subprocess
import sys

import numpy as np
import pytest

from hcq.drivers.mock.amdgpu.gpu import BOARDS
from tests.amd_boards import ADD_ID, board, lanes, spelled_for
from tests.tools import require_tool

ADD = """; c[i] = a[i] + b[i]: s[0:1] kernarg pointer, s2 workgroup id x, v0 thread id
s_load_b128 s[4:7], s[0:1], null
s_load_b64 s[8:9], s[0:1], 0x10
v_lshl_add_u32 v0, s2, 6, v0
v_lshlrev_b32_e32 v1, 2, v0
s_waitcnt lgkmcnt(0)
global_load_b32 v2, v1, s[4:5]
global_load_b32 v3, v1, s[6:7]
s_waitcnt vmcnt(0)
v_add_f32_e32 v2, v2, v3
global_store_b32 v1, v2, s[8:9]
s_endpgm
"""


WAIT_FOR_LOAD = {"gfx11": "s_waitcnt vmcnt(0)", "gfx12": "s_wait_loadcnt", "gfx9": "s_waitcnt vmcnt(0)"}


def hcq_asm(*args: str):
  return subprocess.run([sys.executable, "-m", "hcq.asm", *args], capture_output=True, text=True, timeout=300)


def test_asm_writes_a_code_object_and_disasm_reads_it(tmp_path):
  (tmp_path / "add.s").write_text(ADD)
  out = hcq_asm("asm", str(tmp_path / "add.s"), "--arch", "gfx1100", "-o", str(tmp_path / "add.co"))
  assert out.returncode == 0 and "code object for gfx1100" in out.stdout, out.stderr
  notes = subprocess.run([require_tool("llvm-readelf-19"), "--notes", str(tmp_path / "add.co")], capture_output=True, text=True)
  assert ".symbol:         add.kd" in notes.stdout
  dis = hcq_asm("disasm", str(tmp_path / "add.co"))
  assert dis.returncode == 0 and dis.stdout.splitlines()[1].strip() == "s_load_b128 s[4:7], s[0:1], null" and "s_endpgm" in dis.stdout


def test_run_fills_launches_and_prints(tmp_path):
  (tmp_path / "add.s").write_text(ADD)
  np.save(tmp_path / "b.npy", np.full(256, 0.5, np.float32))
  out = hcq_asm("run", str(tmp_path / "add.s"), "--arg", "a=buffer:f32:256:arange", "--arg", f"b=buffer:{tmp_path / 'b.npy'}",
                "--arg", "c=buffer:f32:256", "--grid", "4", "--block", "64", "--save", str(tmp_path / "out"))
  assert out.returncode == 0, out.stderr
  assert "(emulated)" in out.stdout and "GPU time:" in out.stdout and "c: [0.5, 1.5, 2.5" in out.stdout
  assert "emulator's wall time for this launch, not a performance figure" in out.stdout
  np.testing.assert_array_equal(np.load(tmp_path / "out" / "c.npy"), np.arange(256, dtype=np.float32) + 0.5)


@pytest.mark.parametrize("arch", list(BOARDS))   # each arch's own board (a partition mode is named with --dev: test_amd_boards)
def test_run_on_each_emulated_board(tmp_path, arch):
  """No --dev: the arch's own emulated board, said once; two waves of the board's size (the second wave's trace shows
  lanes from one wave on: v2 = 2 x lanes), the result checked to the last element."""
  family, n = board(arch).family, 2 * lanes(arch)
  (tmp_path / "add.s").write_text(spelled_for(arch, ADD_ID))
  out = hcq_asm("run", str(tmp_path / "add.s"), "--arch", arch, "--arg", f"x=buffer:u32:{n}:arange", "--block", str(n),
                "--trace", "1", "--show", str(n))
  assert out.returncode == 0, out.stderr
  assert f"code object for {arch} on MOCKKFD+AMD::{arch} (emulated)" in out.stdout
  assert out.stderr.count(f"emulated {arch} (MOCKKFD+AMD::{arch})") == 1, out.stderr
  assert "wave 1 pc" in out.stdout and WAIT_FOR_LOAD[family] in out.stdout and f"v2=[{2 * lanes(arch):x} {2 * lanes(arch) + 2:x} " in out.stdout
  assert "x: [" + ", ".join(str(2 * i) for i in range(n)) + "]" in out.stdout


def test_run_trace_and_instruction_limit(tmp_path):
  (tmp_path / "add.s").write_text(ADD)
  out = hcq_asm("run", str(tmp_path / "add.s"), "--arg", "a=buffer:f32:64:ones", "--arg", "b=buffer:f32:64:ones", "--arg", "c=buffer:f32:64",
                "--block", "64", "--trace", "1")
  assert out.returncode == 0, out.stderr
  assert "wave 1 pc" in out.stdout and "v_add_f32_e32 v2, v2, v3" in out.stdout and "v2=[40000000" in out.stdout
  (tmp_path / "spin.s").write_text("loop:\ns_add_u32 s5, s5, 1\ns_branch loop\n")
  out = hcq_asm("run", str(tmp_path / "spin.s"), "--max-instructions", "40")
  assert out.returncode == 1 and "stopped after" in out.stderr and "s[0:7] =" in out.stderr and "Traceback" not in out.stderr


def test_run_errors_say_what_is_wrong(tmp_path):
  (tmp_path / "bad.s").write_text("s_load_b128 s[4:7], s[0:1], null\nv_bogus v0\n")
  out = hcq_asm("run", str(tmp_path / "bad.s"))
  assert out.returncode == 2 and "bad.s:2:" in out.stderr and "Traceback" not in out.stderr
  out = hcq_asm("run", str(tmp_path / "bad.s"), "--arg", "x=buffer:f99:4")
  assert out.returncode == 2 and "DTYPE one of" in out.stderr
  out = hcq_asm("run", str(tmp_path / "missing.s"))
  assert out.returncode == 2 and "cannot read" in out.stderr


def test_run_rand_buffers_are_seeded_apart(tmp_path):
  """Two :rand buffers hold different data (one seed each), so a kernel reading the wrong pointer shows."""
  (tmp_path / "add.s").write_text(ADD)
  out = hcq_asm("run", str(tmp_path / "add.s"), "--arg", "a=buffer:f32:64:rand", "--arg", "b=buffer:f32:64:rand", "--arg", "c=buffer:f32:64",
                "--save", str(tmp_path / "out"))
  assert out.returncode == 0, out.stderr
  a, b, c = (np.load(tmp_path / "out" / f"{n}.npy") for n in "abc")
  assert not np.array_equal(a, b) and np.array_equal(c, a + b)
  again = hcq_asm("run", str(tmp_path / "add.s"), "--arg", "a=buffer:f32:64:rand", "--arg", "b=buffer:f32:64:rand", "--arg", "c=buffer:f32:64")
  assert again.stdout.splitlines()[1] == out.stdout.splitlines()[1]  # the same seed gives the same data


def test_run_help_lists_inits_and_the_emulated_board():
  out = hcq_asm("run", "--help")
  text = " ".join(out.stdout.split())
  assert out.returncode == 0 and all(k in text for k in ("zeros", "ones", "arange", "rand", "FILE.npy"))
  assert "emulated board of --arch (MOCKKFD+AMD::gfx1100, ::gfx1201, ::gfx942)" in text and "not a performance figure" in text


def test_run_faults_show_the_wave(tmp_path):
  """Page and LDS faults print the faulting wave's registers, as --help promises, under the one-line error."""
  (tmp_path / "pf.s").write_text("v_mov_b32 v0, 0\nv_mov_b32 v1, 0x10\nglobal_store_b32 v[0:1], v0, off\ns_endpgm\n")
  (tmp_path / "lds.s").write_text("v_mov_b32 v0, 0x100000\nds_store_b32 v0, v0\ns_endpgm\n")
  for name, fault, register in (("pf.s", "GPU page fault at 0x1000000000", "v1 = 00000010"),
                                 ("lds.s", "LDSFault: LDS access of 4 bytes at 0x100000", "v0 = 00100000")):
    out = hcq_asm("run", str(tmp_path / name))
    assert out.returncode == 1 and fault in out.stderr and "Traceback" not in out.stderr, out.stderr
    # which of the block's two waves faults first depends on the emulator's wave order (interleaved in tests)
    assert re.search(r"the faulting wave \([01]\):", out.stderr) and register in out.stderr, out.stderr
