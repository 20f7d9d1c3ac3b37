"""MockNVOS: the OS-call layer of a machine with an emulated H200, for `MOCKNV+NV`.

It presents what the NVIDIA 580 driver shows on such a machine (the device nodes, /proc/driver/nvidia/version and
gpus/<bus>/information, the PCI device in sysfs: what hcq.smi reads) and sends ioctls on /dev/nvidiactl, /dev/nvidia0
and /dev/nvidia-uvm to the mock RM (hcq.drivers.mock.nv.rm). The usermode page mapped from /dev/nvidia0 is ordinary
memory; a store to its NOTIFY_CHANNEL_PENDING register (mmio_write32) rings the emulated GPU's doorbell.
"""
from __future__ import annotations
import errno
import os
import posixpath
from typing import Any

from hcq.drivers import libc
from hcq.drivers.mock.nv.rm import MockRM
from hcq.drivers.mock.os import FAKE_FD_BASE, MockTreeOS
from hcq.autogen.nv import classes as C

PCI_PARENT = "/sys/devices/pci0000:17/0000:17:01.0/0000:18:00.0"  # the switch port above the GPU
NODES = {"/dev/nvidiactl": "ctl", "/dev/nvidia0": "gpu", "/dev/nvidia-uvm": "uvm"}


class MockNVOS(MockTreeOS):
  """The OS layer of the emulated NVIDIA machine; `rm` is the mock RM behind the device nodes."""
  owned = ("/sys", "/dev", "/proc/driver/nvidia")

  def __init__(self, rm: MockRM | None = None):
    super().__init__()
    self.rm = rm or MockRM()
    self.fds: dict[int, str] = {}
    self.next_fd = FAKE_FD_BASE
    self.usermode_pages: set[int] = set()
    self._build_tree()

  def _build_tree(self) -> None:
    f, b = self.files, self.rm.board
    PCI_SLOT, PCI_PATH = b.pci_slot, f"{PCI_PARENT}/{b.pci_slot}"
    f["/proc/driver/nvidia/version"] = (f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {b.driver_version}  Release Build  "
                                        "(hcq emulated)\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")
    f[f"/proc/driver/nvidia/gpus/{PCI_SLOT}/information"] = (
      f"Model: \t\t {b.name}\nIRQ:   \t\t 0\nGPU UUID: \t {b.uuid}\nVideo BIOS: \t 96.00.99.00.01\nBus Type: \t PCIe\n"
      f"DMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\nBus Location: \t {PCI_SLOT}\nDevice Minor: \t 0\n"
      f"GPU Firmware: \t {b.driver_version}\nGPU Excluded:\t No\n")
    f[f"{PCI_PATH}/vendor"], f[f"{PCI_PATH}/device"] = "0x10de\n", f"{b.pci_device_id:#06x}\n"
    f[f"{PCI_PATH}/revision"], f[f"{PCI_PATH}/class"] = "0xa1\n", "0x030200\n"
    f[f"{PCI_PATH}/current_link_speed"], f[f"{PCI_PATH}/current_link_width"] = "32.0 GT/s PCIe\n", "16\n"
    f[f"{PCI_PATH}/hcq_emulated_state"] = self._state
    self.links[f"/sys/bus/pci/devices/{PCI_SLOT}"] = f"../../../devices/{PCI_PATH[len('/sys/devices/'):]}"
    self.links[f"{PCI_PATH}/driver"] = "../../../../bus/pci/drivers/nvidia"
    for node in NODES: f[node] = ""
    f["/sys/module/nvidia/version"] = f"{b.driver_version}\n"

  def _state(self) -> str:
    gpu = self.rm.gpu
    return (f"channels {len(gpu.channels)}\nmethods {sum(c.methods for c in gpu.channels.values())}\n"
            f"vram_used {self.rm.vram_used}\nxids {len(self.rm.xids)}\n")

  def open(self, path: str, flags: int, mode: int = 0o666) -> int:
    if not self._mine(path): return super().open(path, flags, mode)
    kind = NODES.get(posixpath.normpath(path))
    if kind is None: raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    fd, self.next_fd = self.next_fd, self.next_fd + 1
    self.fds[fd] = kind
    return fd

  def close(self, fd: int) -> None:
    if self.fds.pop(fd, None) is None: super().close(fd)

  def ioctl(self, fd: int, request: int, arg: Any) -> int:
    kind = self.fds.get(fd)
    if kind is None: return super().ioctl(fd, request, arg)
    if kind == "uvm": return self.rm.uvm_ioctl(request, arg)
    return self.rm.ioctl(kind, request, arg)

  def mmap(self, address: int, length: int, prot: int, flags: int, fd: int, offset: int) -> int:
    if fd not in self.fds: return libc.mmap(address, length, prot, flags, fd, offset)
    # nv-mmap.c nvidia_mmap: only an offset RM_MAP_MEMORY handed out on this node, at its length
    ctx = self.rm.mmap_contexts.get(offset) if self.fds[fd] == "gpu" else None
    if ctx is None or length != ctx[1]: raise OSError(errno.EINVAL, f"mmap of {self.fds[fd]} node at offset {offset:#x} ({length} bytes): no RM mapping there")
    addr = libc.mmap(address, length, prot, (flags & ~libc.MAP_SHARED) | libc.MAP_PRIVATE | libc.MAP_ANONYMOUS, -1, 0)
    self.usermode_pages.add(addr)
    return addr

  def munmap(self, address: int, length: int) -> None:
    self.usermode_pages.discard(address)
    libc.munmap(address, length)

  def mmio_write32(self, address: int, value: int) -> None:
    super().mmio_write32(address, value)
    page = address & ~0xFFF
    if page in self.usermode_pages and address - page == C.NVC361_NOTIFY_CHANNEL_PENDING: self.rm.gpu.doorbell(value)

  def fault_details(self) -> list[str]:
    """The Xid lines the RM logged (the kernel log of a real machine)."""
    return list(self.rm.xids)
