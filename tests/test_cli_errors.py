"""Every command line, given bad input of each kind, as a user runs it (a subprocess): one line that says what is
wrong, a non-zero exit, never a traceback."""
from __future__ import annotations
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

GOOD = "s_endpgm\n"


def make_files(d: Path) -> None:
  (d / "good.s").write_text(GOOD)
  (d / "latin1.s").write_bytes(b"s_endpgm ; caf\xe9\n")
  (d / "hwreg.s").write_text("s_getreg_b32 s0, hwreg(UNKNOWN)\ns_endpgm\n")
  (d / "adir").mkdir()
  (d / "afile").write_text("")
  (d / "stub.co").write_bytes(b"\x7fELF")
  (d / "garbage.npy").write_bytes(b"\x93NUMPY nonsense")
  np.save(d / "objects.npy", np.array([object(), 1], dtype=object), allow_pickle=True)
  np.save(d / "text.npy", np.array(["a", "b"]))
  from hcq.asm.kernel import Kernel
  co = bytearray(Kernel("k", "gfx1100").add(GOOD).to_elf())
  co[0x28:0x30] = (1 << 40).to_bytes(8, "little")  # e_shoff far past the end
  (d / "bad_shoff.co").write_bytes(bytes(co))


ASM = [sys.executable, "-m", "hcq.asm"]
RUN = [*ASM, "run"]
CASES = [  # (command, what the one line must say)
  ([*ASM, "asm", "latin1.s"], "latin1.s: the assembly file is not UTF-8 text (byte 14 is 0xe9)"),
  ([*ASM, "asm", "hwreg.s"], "UNKNOWN"),
  ([*ASM, "asm", "missing.s"], "cannot read missing.s"),
  ([*ASM, "asm", "good.s", "-o", "nodir/good.co"], "cannot write nodir/good.co: No such file or directory"),
  ([*ASM, "asm", "good.s", "-o", "adir"], "cannot write adir: Is a directory"),
  ([*ASM, "asm", "good.s", "--arch", "gfx9999"], "invalid choice: 'gfx9999'"),
  ([*ASM, "disasm", "stub.co"], "stub.co: ELF file of 4 bytes is shorter than an ELF64 header"),
  ([*ASM, "disasm", "bad_shoff.co"], "section header 0 at 0x10000000000 runs past the end of the file"),
  ([*RUN, "latin1.s"], "not UTF-8 text"),
  ([*RUN, "hwreg.s"], "UNKNOWN"),
  ([*RUN, "good.s", "--arch", "gfx9999"], "--arch 'gfx9999': unknown; valid: gfx1100, gfx1201, gfx942 (the emulated GPU is gfx1100)"),
  ([*RUN, "good.s", "--arch", "gfx1201", "--dev", "MOCKKFD+AMD"], "the emulated GPU of --dev MOCKKFD+AMD is gfx1100; assemble for --arch gfx1100"),
  ([*RUN, "good.s", "--dev", "CPU"], "the CPU device takes LLVM IR"),
  ([*RUN, "good.s", "--dev", "BOGUS"], "DevStringError"),
  ([*RUN, "good.s", "--arg", "a=buffer:garbage.npy"], "garbage.npy is not a numeric .npy array"),
  ([*RUN, "good.s", "--arg", "a=buffer:objects.npy"], "objects.npy is not a numeric .npy array: Object arrays cannot be loaded"),
  ([*RUN, "good.s", "--arg", "a=buffer:text.npy"], "text.npy holds <U1; a buffer needs numbers"),
  ([*RUN, "good.s", "--arg", "a=buffer:missing.npy"], "cannot read missing.npy"),
  ([*RUN, "good.s", "--arg", "a=buffer:f32:99999999999999"], "is 399999999999996 bytes; a buffer from the command line is at most 1 GiB"),
  ([*RUN, "good.s", "--save", "afile"], "--save afile: cannot make the folder"),
  ([*RUN, "good.s", "--workgroup-ids", "xq"], "--workgroup-ids 'xq': expected a combination of x, y and z"),
  ([*RUN, "good.s", "--workgroup-ids", "xx"], "each at most once"),
  ([sys.executable, "-m", "hcq.asm.generator", "gfx9999"], "unknown arch 'gfx9999'; valid: gfx1100, gfx1201, gfx942"),
  ([sys.executable, "-m", "hcq.asm.verify", "gfx9999"], "unknown arch 'gfx9999'; valid: gfx1100, gfx1201, gfx942"),
  ([sys.executable, "-m", "hcq.smi", "--watch", "nan"], "--watch nan: the interval must be a finite number"),
  ([sys.executable, "-m", "hcq.smi", "--watch", "inf"], "--watch inf: the interval must be a finite number"),
  ([sys.executable, "-m", "hcq.smi", "--dev", ""], "--dev '' names no GPU"),
  ([sys.executable, "-m", "hcq.autogen", "kdf"], "unknown module(s): kdf (did you mean kfd"),
]


def error_lines(stderr: str) -> list[str]:
  """stderr without argparse's usage block and the notice that the emulated GPU stands in."""
  return [line for line in stderr.splitlines() if line.strip() and not line.startswith(("usage:", " ", "hcq: no AMD GPU found"))]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
  d = tmp_path_factory.mktemp("cli")
  make_files(d)
  return d


@pytest.mark.parametrize("command,says", CASES, ids=[" ".join(c[2:]) for c, _ in CASES])
def test_bad_input_is_one_line(folder, command, says):
  out = subprocess.run(command, capture_output=True, text=True, cwd=folder, timeout=300)
  lines = error_lines(out.stderr)
  assert out.returncode != 0 and "Traceback" not in out.stderr, out.stderr
  assert len(lines) == 1 and says in lines[0], out.stderr


def test_verify_help(folder):
  out = subprocess.run([sys.executable, "-m", "hcq.asm.verify", "--help"], capture_output=True, text=True, cwd=folder, timeout=60)
  assert out.returncode == 0 and "usage: python -m hcq.asm.verify" in out.stdout and "gfx942" in out.stdout, out.stderr


def test_disasm_into_a_closed_pipe_is_quiet(folder):
  """`disasm | head`: the reader leaves early; the disassembler stops without a BrokenPipeError traceback."""
  from hcq.asm import assemble
  (folder / "many.bin").write_bytes(assemble("v_mov_b32 v0, v0", "gfx1100") * 6000)  # more than a pipe holds
  p = subprocess.Popen([*ASM, "disasm", "many.bin"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=folder)
  first = p.stdout.readline()
  p.stdout.close()
  err = p.stderr.read().decode()
  assert p.wait(timeout=120) == 0 and first.startswith(b"v_mov_b32") and err == "", err
