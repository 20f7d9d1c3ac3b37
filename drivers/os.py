"""The OS-call layer: every open/ioctl/mmap and sysfs/procfs read that hcq makes goes through one object.

`HostOS` makes the real calls. `FixtureOS` serves a recorded tree of files (tests/fixtures/sysfs/...) as
if it were the machine's root, and can deny chosen paths to play an unprivileged user. The mock kernel
interface (MOCKKFD) will be a third implementation: drivers and `hcq.smi` take the object as a
parameter, so swapping it needs no monkeypatching of builtins.

Errors are what the real calls raise: OSError with an errno (FileNotFoundError for ENOENT,
PermissionError for EACCES/EPERM, ...), naming the path as the caller asked for it.

Kept free of heavy imports: `python -m hcq.smi` imports this on every run.
"""
from __future__ import annotations
import errno
import os
import posixpath
from typing import Any

_MMIO32: dict[int, Any] = {}  # address -> the ctypes c_uint32 there (a pointer: a store through it is the store from_address makes)


class HostOS:
  """The real operating system: thin wrappers over os/fcntl, one method per kernel call the drivers make."""

  #: Root of the tree this object reads, as shown to users ("/" for the real machine).
  root = "/"
  #: True where the devices behind this object are emulated (the MOCKKFD kernel interface sets it).
  emulated = False

  def open(self, path: str, flags: int, mode: int = 0o666) -> int:
    """open(2): a file descriptor for `path`."""
    return os.open(path, flags, mode)

  def close(self, fd: int) -> None:
    """close(2)."""
    os.close(fd)

  def read_text(self, path: str) -> str:
    """The whole content of a small text file (sysfs attribute, procfs entry), decoded as UTF-8."""
    with open(path, "rb") as f: return f.read().decode("utf-8", "replace")

  def read_bytes(self, path: str) -> bytes:
    """The whole content of a file as bytes (binary sysfs attributes such as a PCI config space)."""
    with open(path, "rb") as f: return f.read()

  def listdir(self, path: str) -> list[str]:
    """Entry names of a directory, unsorted, as os.listdir gives them."""
    return os.listdir(path)

  def exists(self, path: str) -> bool:
    """Whether `path` exists (following symlinks); False rather than an error when a parent is unreadable."""
    return os.path.exists(path)

  def readlink(self, path: str) -> str:
    """readlink(2): the target of a symlink, unresolved (e.g. /proc/PID/fd/N -> "/dev/kfd")."""
    return os.readlink(path)

  def stat(self, path: str) -> os.stat_result:
    """stat(2), following symlinks."""
    return os.stat(path)

  def access(self, path: str, mode: int) -> bool:
    """access(2): whether this process may use `path` with `mode` (R_OK | W_OK ...), without opening it.
    smi checks /dev/kfd this way because opening it creates a KFD process context."""
    return os.access(path, mode)

  def ioctl(self, fd: int, request: int, arg: Any) -> int:
    """ioctl(2) on `fd`; `arg` is a mutable buffer (a ctypes structure) that the kernel reads and writes."""
    import fcntl  # only drivers that talk to a kernel need it; smi never does
    return fcntl.ioctl(fd, request, arg, True)

  def mmap(self, address: int, length: int, prot: int, flags: int, fd: int, offset: int) -> int:
    """mmap(2) with the arguments in its order: the address of the new mapping (drivers need raw addresses,
    which Python's mmap module does not give)."""
    from hcq.drivers import libc
    return libc.mmap(address, length, prot, flags, fd, offset)

  def munmap(self, address: int, length: int) -> None:
    """munmap(2)."""
    from hcq.drivers import libc
    libc.munmap(address, length)

  def ring_doorbell(self, address: int, value: int) -> None:
    """Write a queue's 64-bit write pointer to its doorbell (an uncached MMIO page on real hardware); the
    mock kernel's OS object also wakes the emulated engine behind it."""
    import ctypes
    ctypes.c_uint64.from_address(address).value = value

  def mmio_write32(self, address: int, value: int) -> None:
    """A 32-bit store to a mapped register page (the NVIDIA usermode doorbell); the mock's OS object also tells the
    emulated GPU behind it."""
    reg = _MMIO32.get(address)  # every launch rings a doorbell: the ctypes word is made once per address
    if reg is None:
      import ctypes
      reg = _MMIO32[address] = ctypes.c_uint32.from_address(address)
    reg.value = value

  def __repr__(self) -> str:
    return f"{type(self).__name__}()"


class FixtureOS(HostOS):
  """A recorded machine: absolute paths are served from under `root` (so "/sys/class/drm" reads
  `root`/sys/class/drm), and every path in `denied`, or below it, fails with EACCES as it would for a
  user without the right group. Symlinks inside the tree must be relative to stay inside it; absolute
  links (such as /proc/PID/fd/N -> /dev/kfd) are only ever read with `readlink`, never followed.

  Opening a fixture file gives a real, read-only descriptor on an ordinary file, so ioctl on it fails
  with ENOTTY as it would on a wrong device node, and writes fail with EBADF."""

  def __init__(self, root: str, denied: tuple[str, ...] | list[str] | set[str] = ()):
    if not os.path.isdir(root): raise FileNotFoundError(errno.ENOENT, "fixture root is not a directory", root)
    self.root = os.path.abspath(root)
    self.denied = frozenset(posixpath.normpath(p) for p in denied)
    for p in self.denied:
      if not p.startswith("/"): raise ValueError(f"denied path {p!r} must be absolute, like the paths it stands for")

  def host_path(self, path: str) -> str:
    """Where the file for the absolute machine path `path` lies in the fixture; raises EACCES for denied paths."""
    if not path.startswith("/"): raise ValueError(f"FixtureOS needs absolute paths, got {path!r}")
    norm = posixpath.normpath(path)
    if norm.startswith("//"): norm = "/" + norm.lstrip("/")  # POSIX keeps a leading "//"; the kernel does not
    host = self.root + norm if norm != "/" else self.root
    if self.denied:
      self._check(norm, path)
      # Permissions belong to the file a path leads to: /sys/class/drm/renderD128/device/x is denied when
      # the /sys/devices/... file it resolves to is.
      resolved = os.path.realpath(host)
      if resolved.startswith(self.root + os.sep): self._check(resolved[len(self.root):], path)
    return host

  def _check(self, machine_path: str, asked: str) -> None:
    probe = machine_path
    while True:  # a denied directory denies everything below it, as a 0700 directory would
      if probe in self.denied: raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), asked)
      if probe == "/": return
      probe = posixpath.dirname(probe)

  def _call(self, fn, path: str, *args):
    # Errors name the machine path the caller asked for, not the fixture's file.
    try:
      return fn(self.host_path(path), *args)
    except OSError as e:
      raise type(e)(e.errno, e.strerror, path) from None

  def open(self, path: str, flags: int, mode: int = 0o666) -> int:
    # The recorded tree is never modified: the descriptor is read-only whatever was asked, so a write fails (EBADF).
    read_only = flags & ~(os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND)
    return self._call(os.open, path, read_only, mode)

  def read_text(self, path: str) -> str:
    return self._call(super().read_text, path)

  def read_bytes(self, path: str) -> bytes:
    return self._call(super().read_bytes, path)

  def listdir(self, path: str) -> list[str]:
    return self._call(os.listdir, path)

  def exists(self, path: str) -> bool:
    try:
      return os.path.exists(self.host_path(path))
    except PermissionError:
      # Like stat(2): a denied file still exists; a path below a denied folder cannot be looked up.
      norm = posixpath.normpath(path)
      return norm in self.denied and os.path.lexists(self.root + norm)

  def readlink(self, path: str) -> str:
    return self._call(os.readlink, path)

  def stat(self, path: str) -> os.stat_result:
    return self._call(os.stat, path)

  def access(self, path: str, mode: int) -> bool:
    # The denied set is the fixture's only permission model (tests run as root, for whom mode bits mean nothing).
    try:
      return os.path.exists(self.host_path(path))
    except PermissionError:
      return False

  def __repr__(self) -> str:
    return f"FixtureOS({self.root!r}, denied={sorted(self.denied)!r})"
