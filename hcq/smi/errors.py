"""Exit codes of `python -m hcq.smi` (documented in docs/smi.md) and the error that carries one."""
from __future__ import annotations

OK = 0            # every GPU found was read
INTERNAL = 1      # a bug in hcq.smi: one line on stderr, HCQ_DEBUG=1 shows the traceback
USAGE = 2         # bad option or DEV value
NO_GPU = 3        # no GPU found; the message says what was looked for
PERMISSION = 4    # something was denied (/dev/kfd, a KFD node, /dev/nvidiactl); output shows what was visible
NO_MATCH = 5      # GPUs were found, but none matches --dev / DEV
INTERRUPTED = 130  # Ctrl-C outside --watch (in --watch, Ctrl-C is the normal way out and exits 0)


class SmiError(Exception):
  """A failure that ends the command with a one-line message and `code` (one of the exit codes above)."""

  def __init__(self, code: int, message: str):
    super().__init__(message)
    self.code = code
