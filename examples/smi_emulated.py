"""hcq.smi on the emulated GPU: the same reader that shows real boards shows the live state of the GPU a
program is using, through that device's OS object.

  python examples/smi_emulated.py
"""
import numpy as np

import hcq
from hcq.smi import snapshot, table


def show(dev, title: str) -> None:
  print(f"--- {title}")
  print("\n".join(table.render(snapshot.take(dev.os))))


dev = hcq.Device("MOCKKFD+AMD")
show(dev, "just opened")
buf = dev.alloc(64 << 20, "device")          # 64 MiB of VRAM
buf.copyin(np.arange(16 << 20, dtype=np.uint32))  # through the SDMA queue
dev.synchronize()
show(dev, "after allocating and filling 64 MiB")
