"""The emulated SM's two errors: PTXError for text it cannot accept, SMFault for what stops a running kernel."""
from __future__ import annotations


class PTXError(Exception):
  """A PTX text the SM cannot accept; the message is `name:line:col: what is wrong, what is valid`."""

  def __init__(self, name: str, line: int, col: int, message: str):
    super().__init__(f"{name}:{line}:{col}: {message}")
    self.name, self.line, self.col = name, line, col


class SMFault(Exception):
  """What stops a kernel on the SM, as the GPU would report it: `kind` is "mmu" (an access outside every mapping),
  "misaligned", "shared" / "local" (outside the block's shared window or the thread's local window), "trap",
  "barrier" (a block that can never leave a bar.sync), "resources" (the launch gives too little shared or local
  memory) or "unsupported"; `address` the faulting address or None; `ptx_line` the kernel's PTX line or None."""

  def __init__(self, kind: str, address: int | None, kernel: str, ptx_line: int | None, message: str):
    where = f"kernel {kernel}" + (f", PTX line {ptx_line}" if ptx_line is not None else "")
    super().__init__(f"SM fault ({kind}) in {where}" + (f" at {address:#x}" if address is not None else "") + f": {message}")
    self.kind, self.address, self.kernel, self.ptx_line, self.message = kind, address, kernel, ptx_line, message
