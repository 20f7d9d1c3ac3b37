"""hcq: user-space GPU driver and kernel-launch toolkit.

`hcq.Device(dev_string)` opens a device (AMD, NV, CPU; see hcq.devstring); `hcq.Variable` names a value
filled in at submit time; `hcq.Tensor` is the tensor compiler's lazy array (hcq.tensor). Names load on first use, so `python -m hcq.smi` and the bindings stay cheap.
"""
from __future__ import annotations
import importlib

_LAZY = {
  "Device": "hcq.device", "Buffer": "hcq.buffer", "Signal": "hcq.signal", "HWQueue": "hcq.queue", "Program": "hcq.program",
  "Variable": "hcq.sym", "parse_dev": "hcq.devstring",
  "HCQError": "hcq.errors", "DevStringError": "hcq.errors", "GPUFault": "hcq.errors", "GPUTimeout": "hcq.errors",
  "ProgramArgumentError": "hcq.errors", "CodeObjectError": "hcq.errors", "Tensor": "hcq.tensor",
}
__all__ = list(_LAZY)


def __getattr__(name: str):
  if name in _LAZY: return getattr(importlib.import_module(_LAZY[name]), name)
  raise AttributeError(f"module 'hcq' has no attribute {name!r}")


def __dir__() -> list[str]:
  return sorted(list(globals()) + __all__)
