"""Raw mmap(2)/munmap(2)/msync(2) through libc: Python's mmap module hides the addresses drivers need."""
from __future__ import annotations
import ctypes
import ctypes.util
import functools
import mmap as _mmap
import os

PROT_NONE, PROT_READ, PROT_WRITE = _mmap.PROT_NONE if hasattr(_mmap, "PROT_NONE") else 0, _mmap.PROT_READ, _mmap.PROT_WRITE
MAP_SHARED, MAP_PRIVATE, MAP_ANONYMOUS = _mmap.MAP_SHARED, _mmap.MAP_PRIVATE, _mmap.MAP_ANONYMOUS
MAP_FIXED, MAP_NORESERVE = 0x10, 0x4000  # Linux values (asm-generic/mman-common.h)
MS_ASYNC = 1
MAP_FAILED = ctypes.c_void_p(-1).value


@functools.cache
def _libc() -> ctypes.CDLL:
  libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
  libc.mmap.restype, libc.mmap.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
  libc.munmap.restype, libc.munmap.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t]
  libc.msync.restype, libc.msync.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
  return libc


def mmap(address: int, length: int, prot: int, flags: int, fd: int, offset: int) -> int:
  """mmap(2); OSError with the errno on failure. `offset` may use bit 63 (KFD's offsets do), as the kernel sees off_t bits."""
  off = offset - (1 << 64) if offset >= 1 << 63 else offset
  addr = _libc().mmap(address or None, length, prot, flags, fd, off)
  if addr in (None, MAP_FAILED):
    err = ctypes.get_errno()
    raise OSError(err, f"mmap of {length} bytes at {address:#x} failed: {os.strerror(err)}")
  return addr


def munmap(address: int, length: int) -> None:
  if _libc().munmap(address, length) != 0:
    err = ctypes.get_errno()
    raise OSError(err, f"munmap of {length} bytes at {address:#x} failed: {os.strerror(err)}")


def is_mapped(address: int, length: int) -> bool:
  """Whether [address, address+length) is all mapped in this process (msync fails with ENOMEM otherwise):
  how a mock kernel checks a user pointer the way copy_from_user would fault on it."""
  if length <= 0: return True
  page = address & ~0xfff
  return _libc().msync(page, address + length - page, MS_ASYNC) == 0
