"""--watch: redraw a view in place on a schedule, without scrolling.

Each frame moves the cursor home, overwrites line by line (clearing each line's tail), and clears the
rest of the screen, so nothing scrolls and nothing flickers; frames taller than the terminal are cut.
"""
from __future__ import annotations
import os
import sys
import time
from typing import Callable, TextIO

HOME, CLEAR_LINE_END, CLEAR_SCREEN_END = "\x1b[H", "\x1b[K", "\x1b[J"


def frame_text(lines: list[str], max_rows: int | None) -> str:
  """One frame as the escape sequences that draw it over the previous one."""
  if max_rows is not None and len(lines) > max_rows:
    lines = lines[:max_rows - 1] + [f"... {len(lines) - max_rows + 1} more lines (enlarge the terminal)"]
  return HOME + "".join(line + CLEAR_LINE_END + "\n" for line in lines) + CLEAR_SCREEN_END


def terminal_rows(out: TextIO) -> int | None:
  try:
    return os.get_terminal_size(out.fileno()).lines if out.isatty() else None
  except (OSError, ValueError, AttributeError):
    return None


def watch(draw: Callable[[int], tuple[list[str] | str, int]], interval: float, count: int | None, out: TextIO = sys.stdout,
          sleep: Callable[[float], None] = time.sleep, in_place: bool = True) -> int:
  """Call `draw(frame_number)` every `interval` seconds, `count` times (forever when None), and show what it
  returns: lines to redraw in place, or (with in_place False) text to append, such as a JSON line.
  Returns the exit code of the last frame."""
  code, n = 0, 0
  next_at = time.monotonic()
  while count is None or n < count:
    content, code = draw(n)
    if in_place:
      out.write(frame_text(content if isinstance(content, list) else content.splitlines(), terminal_rows(out)))
    else:
      out.write(content if isinstance(content, str) else "\n".join(content))
      out.write("\n")
    out.flush()
    n += 1
    if count is not None and n >= count: break
    next_at += interval
    sleep(max(0.0, next_at - time.monotonic()))  # keep the schedule even when a refresh is slow
  return code
