"""Batch front end to llvm-mc 19: many instructions per process, since process start dominates a single call."""
from __future__ import annotations
import concurrent.futures
import os
import re
import shutil
import subprocess
from dataclasses import dataclass

LLVM_MC = "llvm-mc-19"
_DIAG = re.compile(r"^<stdin>:(\d+):(\d+): (error|warning): (.*)$")
_ENCODED = re.compile(r"^\s*(.*?)\s*; encoding: \[([0-9a-fx,]*)\]\s*$")


@dataclass(frozen=True)
class Decoded:
  """One instruction as llvm-mc decoded it: its text and the bytes it consumed."""
  text: str
  data: bytes


def available() -> bool:
  return shutil.which(LLVM_MC) is not None


def version() -> str:
  """The first line of `llvm-mc-19 --version` that names the version, e.g. 'Debian LLVM version 19.1.7'."""
  out = subprocess.run([LLVM_MC, "--version"], capture_output=True, text=True).stdout
  return next((l.strip() for l in out.splitlines() if "version" in l), out.strip())


def _run(args: list[str], text: str) -> tuple[str, str]:
  p = subprocess.run([LLVM_MC, "-arch=amdgcn", *args], input=text, capture_output=True, text=True)
  return p.stdout, p.stderr


def _encoded_lines(stdout: str) -> list[tuple[str, bytes]]:
  out = []
  for line in stdout.splitlines():
    m = _ENCODED.match(line)
    if m: out.append((m.group(1), bytes(int(b, 16) for b in m.group(2).split(",") if b)))
  return out


# Ends each case: llvm-mc reads bytes across lines, so four s_nop words absorb a case that over-reads and
# `s_nop 0x3d5a` (SOPP op 0 on every arch; a case's own bytes print it at odds of 2**-32 per word) marks the next.
_PAD = bytes.fromhex("000080bf") * 4
_MARKER_TEXT = "s_nop 0x3d5a"
_MARKER = bytes.fromhex("5a3d80bf")


def disassemble_each(cases: list[bytes], mcpu: str, pad: int = 4) -> list[Decoded | None]:
  """Disassemble the first instruction of each byte string; None where llvm-mc rejects it.

  Decoded.data is llvm-mc's re-encoding of what it decoded (canonical bytes, which can differ from the input).
  `pad` s_nop words follow each case to absorb an over-read (random words); a case that still over-reads
  swallows the marker and raises RuntimeError. Large batches run as parallel llvm-mc processes, one per CPU."""
  workers = min(os.cpu_count() or 1, len(cases) // 20000)
  if workers > 1:
    step = -(-len(cases) // workers)
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
      parts = pool.map(lambda i: _disassemble_batch(cases[i:i + step], mcpu, pad), range(0, len(cases), step))
    return [d for part in parts for d in part]
  return _disassemble_batch(cases, mcpu, pad)


# Words llvm-mc 19 crashes on (it segfaults on some gfx942 VOP3P words): each counts as rejected, and is kept here
# so that differential checks can report them apart.
CRASHED: set[bytes] = set()


def _disassemble_batch(cases: list[bytes], mcpu: str, pad: int) -> list[Decoded | None]:
  tail = ",".join(f"0x{b:02x}" for b in _PAD[:4 * pad] + _MARKER) + "\n"
  text = "".join(",".join(f"0x{b:02x}" for b in c) + "\n" + tail for c in cases)
  args = [LLVM_MC, "-arch=amdgcn", "--disassemble", "-show-encoding", f"-mcpu={mcpu}"]
  p = subprocess.run(args, input=text, capture_output=True, text=True, env={**os.environ, "LLVM_DISABLE_SYMBOLIZATION": "1"})
  if p.returncode < 0:
    # a crash loses the buffered output: run again on a terminal, where llvm-mc writes unbuffered, to see how
    # many cases came through; the next one crashed it
    done = _groups(_on_terminal(args, text))[:-1]
    k = len(done) if len(done) < len(cases) else len(cases) - 1
    CRASHED.add(cases[k])
    return _disassemble_batch(cases[:k], mcpu, pad) + [None] + _disassemble_batch(cases[k + 1:], mcpu, pad) if len(cases) > 1 else [None]
  stdout, stderr = p.stdout, p.stderr
  rejected = set()
  for line in stderr.splitlines():
    m = _DIAG.match(line)
    if m and m.group(2) == "1": rejected.add((int(m.group(1)) - 1) // 2)
  groups = _groups(stdout)
  if len(groups) != len(cases) + 1: raise RuntimeError(f"llvm-mc gave {len(groups) - 1} groups for {len(cases)} cases")
  return [None if i in rejected or not groups[i] else Decoded(*groups[i][0]) for i in range(len(cases))]


def _groups(stdout: str) -> list[list[tuple[str, bytes]]]:
  """The (text, encoding) lines of each case, split at the marker instruction."""
  groups: list[list[tuple[str, bytes]]] = [[]]
  for t, d in _encoded_lines(stdout):
    if t == _MARKER_TEXT: groups.append([])
    else: groups[-1].append((t, d))
  return groups


def _on_terminal(args: list[str], text: str) -> str:
  """llvm-mc's stdout when it is a pseudo-terminal (unbuffered), up to wherever the process ended."""
  import pty
  import tempfile
  import threading
  master, slave = pty.openpty()
  with tempfile.TemporaryFile() as err:  # diagnostics: a file, so that they never block the process
    proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=slave, stderr=err, env={**os.environ, "LLVM_DISABLE_SYMBOLIZATION": "1"})
    os.close(slave)

    def feed() -> None:
      try: proc.stdin.write(text.encode()); proc.stdin.close()
      except BrokenPipeError: pass
    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    chunks = []
    while True:
      try: chunk = os.read(master, 1 << 16)
      except OSError: break  # EIO: the process closed the terminal
      if not chunk: break
      chunks.append(chunk)
    os.close(master)
    proc.wait()
    writer.join()
  return b"".join(chunks).decode(errors="replace").replace("\r\n", "\n")


def assemble_each(lines: list[str], mcpu: str) -> list[bytes | str]:
  """Assemble each line on its own; bytes where llvm-mc accepts it, else the error message."""
  stdout, stderr = _run(["-show-encoding", f"-mcpu={mcpu}"], "".join(l + "\n" for l in lines))
  errors: dict[int, str] = {}
  for line in stderr.splitlines():
    m = _DIAG.match(line)
    if m and m.group(3) == "error": errors.setdefault(int(m.group(1)) - 1, m.group(4))
  encoded = iter(_encoded_lines(stdout))
  return [errors[i] if i in errors else next(encoded)[1] for i in range(len(lines))]
