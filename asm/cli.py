"""What every hcq.asm command line shares: user errors are one line on stderr and a non-zero exit, never a traceback."""
from __future__ import annotations
import os
import sys
from typing import Callable


def user_error(prog: str, message: str, code: int = 1) -> int:
  """Print `prog: message` on stderr; return `code` for the caller to exit with."""
  print(f"{prog}: {message}", file=sys.stderr)
  return code


def guarded(prog: str, command: Callable[[], int]) -> int:
  """Run `command`; the errors each command does not say itself become one line (HCQ_DEBUG=1 shows the traceback)."""
  from hcq.errors import HCQError
  try:
    return command()
  except BrokenPipeError:
    # the reader went away (`| head`): stop quietly; stdout points at devnull so the exit flush does not complain
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0
  except KeyboardInterrupt:
    return 130
  except (HCQError, OSError, ValueError, MemoryError) as e:  # HCQError and the assembler's/loader's ValueErrors say what was wrong
    _debug()
    return user_error(prog, f"{type(e).__name__}: {e}" if isinstance(e, HCQError) else _one_line(e))
  except Exception as e:  # noqa: BLE001 - the promise is no traceback; an internal error still says what it was
    _debug()
    return user_error(prog, f"internal error: {type(e).__name__}: {e} (HCQ_DEBUG=1 shows the traceback; please report it)", 70)


def _one_line(e: BaseException) -> str:
  if isinstance(e, OSError) and e.strerror: return f"{e.filename + ': ' if e.filename else ''}{e.strerror}"
  if isinstance(e, MemoryError): return "out of memory"
  return str(e).splitlines()[0] if str(e) else type(e).__name__


def _debug() -> None:
  if os.environ.get("HCQ_DEBUG"):
    import traceback
    traceback.print_exc()


def read_text(path, what: str = "input") -> str:
  """A UTF-8 text file's contents; OSError/ValueError name the file and, for bad UTF-8, the byte."""
  try:
    return path.read_text(encoding="utf-8")
  except UnicodeDecodeError as e:
    raise ValueError(f"{path}: the {what} is not UTF-8 text (byte {e.start} is {e.object[e.start]:#04x})") from None
  except OSError as e:
    raise OSError(e.errno, f"cannot read {path}: {e.strerror}") from None
