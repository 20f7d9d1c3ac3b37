"""RMInterface: the NVIDIA resource manager through /dev/nvidiactl and /dev/nvidiaN, one call per RM escape.

Every call that the RM refuses raises RMCallError naming the escape, the class or control, and the NV_STATUS name.
The RM ABI changes between driver branches, so opening refuses a running driver of another branch than the one the
bindings were generated from (hcq.autogen.nv.*.NV_SOURCE_VERSION).
"""
from __future__ import annotations
import ctypes
import errno
import functools
import os as _os

from hcq.autogen.nv import classes as C, nv_ioctl as I, nvos as O, nvstatus as S, uvm as U
from hcq.errors import HCQError

PROC_VERSION = "/proc/driver/nvidia/version"


class RMCallError(HCQError):
  """An RM call that returned a status other than NV_OK: `status` is the NV_STATUS, `call` what was asked."""

  def __init__(self, call: str, status: int):
    name, msg = S.NV_STATUS_NAMES.get(status, (f"NV_STATUS {status:#x}", "unknown status"))
    super().__init__(f"{call} failed: {name} ({msg})")
    self.call, self.status, self.status_name = call, status, name


CLASS_PREFIXES = ("NV01_", "NV20_", "FERMI_", "KEPLER_", "TURING_", "AMPERE_", "ADA_", "HOPPER_", "BLACKWELL_")


def class_name(cls: int) -> str:
  """The C name of an RM class (NV01_DEVICE_0), else its number."""
  for mod in _class_modules():
    for k, v in vars(mod).items():
      if v == cls and k.startswith(CLASS_PREFIXES) and not k.endswith(("_PARAMETERS", "_PARAMS")): return k
  return f"class {cls:#x}"


@functools.cache
def _class_modules():
  import importlib
  return [importlib.import_module(f"hcq.autogen.nv.{m}") for m in ("classes", "clc56f", "clc86f", "clc96f", "clca6f", "clc6b5", "clc7b5", "clc8b5",
                                                                     "clc9b5", "clcab5", "clc6c0", "clc7c0", "clc9c0", "clcbc0", "clcdc0", "clcec0")]


def control_name(cmd: int) -> str:
  """The C name of an RM control (NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2), else its number."""
  import importlib
  family = {0x0000: "ctrl0000", 0x0080: "ctrl0080", 0x2080: "ctrl2080"}.get(cmd >> 16, "ctrl_fifo")  # the class a control is for
  for k, v in vars(importlib.import_module(f"hcq.autogen.nv.{family}")).items():
    if v == cmd and "_CTRL_CMD_" in k: return k
  return f"control {cmd:#x}"


def check_branch(version_text: str | None) -> str:
  """The running driver's version, refused (HCQError naming both) when its branch is not the bindings' (the RM ABI,
  NVOS structs and escapes, changes between branches): hcq.autogen.nvrm_version's check on the OS layer's file."""
  from hcq.autogen.nvrm_version import DriverVersionError, check_driver_version
  if version_text is None: raise HCQError(f"cannot read {PROC_VERSION}: is the nvidia kernel module loaded?")
  try:
    return check_driver_version(version_text)
  except DriverVersionError as e:
    raise HCQError(str(e)) from None


def iowr(nr: int, size: int) -> int:
  """_IOWR(NV_IOCTL_MAGIC, nr, size), as nv-ioctl.h builds every NVIDIA ioctl request."""
  return (3 << 30) | (size << 16) | (I.NV_IOCTL_MAGIC << 8) | nr


class RMInterface:
  """/dev/nvidiactl with a root client, and the GPU node `minor` registered to it."""

  def __init__(self, osl, minor: int = 0):
    self.os = osl
    try:
      text = osl.read_text(PROC_VERSION)
    except OSError:
      text = None
    self.driver_version = check_branch(text)
    self.ctl = self._open("/dev/nvidiactl")
    self.gpu = self._open(f"/dev/nvidia{minor}")
    self.ioctl(self.gpu, I.NV_ESC_REGISTER_FD, I.struct_nv_ioctl_register_fd(ctl_fd=self.ctl))
    self.next_handle = 0xCAF00000  # handles user space picks for its objects; the client's comes from the RM
    self.client = self.alloc(0, C.NV01_ROOT)

  def _open(self, path: str) -> int:
    try:
      return self.os.open(path, _os.O_RDWR | _os.O_CLOEXEC)
    except PermissionError:
      raise HCQError(f"permission denied on {path}: the nvidia device nodes need the video group or mode 0666") from None
    except FileNotFoundError:
      raise HCQError(f"{path} is absent: the nvidia kernel module is not loaded (nvidia-modprobe creates the nodes)") from None

  def ioctl(self, fd: int, nr: int, args) -> None:
    """One escape; an ioctl the kernel refuses before the RM (a wrong size, a wrong node) is an HCQError with the errno."""
    try:
      self.os.ioctl(fd, iowr(nr, ctypes.sizeof(args)), args)
    except OSError as e:
      raise HCQError(f"NVIDIA escape {nr:#x} ({type(args).__name__}) failed: {errno.errorcode.get(e.errno, e.errno)} {e.strerror or ''}".rstrip()) from None

  def _check(self, call: str, status: int) -> None:
    if status != S.NV_OK: raise RMCallError(call, status)

  # ---- objects ----
  def alloc(self, parent: int, cls: int, params=None, handle: int | None = None) -> int:
    """NV_ESC_RM_ALLOC of `cls` under `parent` with its allocation parameters; returns the new handle."""
    if handle is None and cls != C.NV01_ROOT:
      self.next_handle += 1
      handle = self.next_handle
    a = O.NVOS21_PARAMETERS(hRoot=self.client if cls != C.NV01_ROOT else 0, hObjectParent=parent, hObjectNew=handle or 0, hClass=cls,
                            pAllocParms=ctypes.addressof(params) if params is not None else None,
                            paramsSize=ctypes.sizeof(params) if params is not None else 0)
    self.ioctl(self.ctl, I.NV_ESC_RM_ALLOC, a)
    self._check(f"NV_ESC_RM_ALLOC of {class_name(cls)} under {parent:#x}", a.status)
    return a.hObjectNew

  def free(self, handle: int, parent: int = 0) -> None:
    a = O.NVOS00_PARAMETERS(hRoot=self.client, hObjectParent=parent, hObjectOld=handle)
    self.ioctl(self.ctl, I.NV_ESC_RM_FREE, a)
    self._check(f"NV_ESC_RM_FREE of {handle:#x}", a.status)

  def control(self, obj: int, cmd: int, params):
    """NV_ESC_RM_CONTROL `cmd` on `obj`; returns the parameters as the RM filled them."""
    a = O.NVOS54_PARAMETERS(hClient=self.client, hObject=obj, cmd=cmd, params=ctypes.addressof(params), paramsSize=ctypes.sizeof(params))
    self.ioctl(self.ctl, I.NV_ESC_RM_CONTROL, a)
    self._check(f"NV_ESC_RM_CONTROL {control_name(cmd)} on {obj:#x}", a.status)
    return params

  def gpu_uuid(self, subdevice: int, binary: bool = False) -> "str | bytes":
    """The GPU's UUID through NV2080_CTRL_CMD_GPU_GET_GID_INFO (SHA-1 GID): the string nvidia-smi shows ("GPU-" and
    the canonical UUID form), or its 16 bytes (`binary`), which UVM registers the GPU by."""
    from hcq.autogen.nv import ctrl2080 as X
    fmt = X.NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_BINARY if binary else X.NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_ASCII
    p = self.control(subdevice, X.NV2080_CTRL_CMD_GPU_GET_GID_INFO,
                     X.NV2080_CTRL_GPU_GET_GID_INFO_PARAMS(flags=X.register("NV2080_GPU_CMD_GPU_GET_GID_FLAGS").encode(
                       format=fmt, type=X.NV2080_GPU_CMD_GPU_GET_GID_FLAGS_TYPE_SHA1)))
    data = bytes(p.data[:min(p.length, len(p.data))])
    return data if binary else data.split(b"\0")[0].decode("ascii")

  def gr_info(self, subdevice: int, *indices: int) -> list[int]:
    """Values of the graphics engine's NV2080_CTRL_GR_INFO_INDEX_* `indices` (NV2080_CTRL_CMD_GR_GET_INFO_V2: the list
    inside the parameters, no user pointer; kernel_graphics.c _kgraphicsCtrlCmdGrGetInfoV2)."""
    from hcq.autogen.nv import ctrl2080 as X
    p = X.NV2080_CTRL_GR_GET_INFO_V2_PARAMS(grInfoListSize=len(indices))
    for e, i in zip(p.grInfoList, indices): e.index = i
    self.control(subdevice, X.NV2080_CTRL_CMD_GR_GET_INFO_V2, p)
    return [e.data for e in p.grInfoList[:len(indices)]]

  # ---- memory ----
  def alloc_os_descriptor(self, parent: int, address: int, size: int) -> int:
    """NV_ESC_RM_ALLOC_MEMORY of NV01_MEMORY_SYSTEM_OS_DESCRIPTOR: the process's pages at `address` as an RM memory object."""
    self.next_handle += 1
    a = I.nv_ioctl_nvos02_parameters_with_fd(fd=-1)
    a.params.hRoot, a.params.hObjectParent, a.params.hObjectNew, a.params.hClass = self.client, parent, self.next_handle, C.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR
    a.params.pMemory, a.params.limit = address, size - 1
    self.ioctl(self.ctl, I.NV_ESC_RM_ALLOC_MEMORY, a)
    self._check(f"NV_ESC_RM_ALLOC_MEMORY of NV01_MEMORY_SYSTEM_OS_DESCRIPTOR at {address:#x}+{size:#x}", a.params.status)
    return self.next_handle

  def map_dma(self, device: int, vaspace: int, memory: int, length: int, fixed_va: int | None = None) -> int:
    """NV_ESC_RM_MAP_MEMORY_DMA: map a memory object into the VA space; returns its GPU address, `fixed_va` when given
    (NVOS46_FLAGS_DMA_OFFSET_FIXED), else one the RM picks."""
    flags = 0 if fixed_va is None else O.register("NVOS46_FLAGS").encode(dma_offset_fixed=O.NVOS46_FLAGS_DMA_OFFSET_FIXED_TRUE)
    a = O.NVOS46_PARAMETERS(hClient=self.client, hDevice=device, hDma=vaspace, hMemory=memory, offset=0, length=length,
                            flags=flags, dmaOffset=fixed_va or 0)
    self.ioctl(self.ctl, I.NV_ESC_RM_MAP_MEMORY_DMA, a)
    at = "" if fixed_va is None else f" at {fixed_va:#x}"
    self._check(f"NV_ESC_RM_MAP_MEMORY_DMA of {memory:#x} ({length:#x} bytes){at}", a.status)
    return a.dmaOffset

  def unmap_dma(self, device: int, vaspace: int, memory: int, va: int) -> None:
    a = O.NVOS47_PARAMETERS(hClient=self.client, hDevice=device, hDma=vaspace, hMemory=memory, dmaOffset=va)
    self.ioctl(self.ctl, I.NV_ESC_RM_UNMAP_MEMORY_DMA, a)
    self._check(f"NV_ESC_RM_UNMAP_MEMORY_DMA of {memory:#x} at {va:#x}", a.status)

  def map_cpu(self, device: int, memory: int, length: int) -> int:
    """NV_ESC_RM_MAP_MEMORY then mmap of the GPU node: a CPU mapping of an RM object (the usermode registers)."""
    a = I.nv_ioctl_nvos33_parameters_with_fd(fd=self.gpu)
    a.params.hClient, a.params.hDevice, a.params.hMemory, a.params.offset, a.params.length = self.client, device, memory, 0, length
    self.ioctl(self.ctl, I.NV_ESC_RM_MAP_MEMORY, a)
    self._check(f"NV_ESC_RM_MAP_MEMORY of {memory:#x}", a.params.status)
    from hcq.drivers import libc
    return self.os.mmap(0, length, libc.PROT_READ | libc.PROT_WRITE, libc.MAP_SHARED, self.gpu, a.params.pLinearAddress)

  # ---- UVM ----
  def uvm_register(self, uuid: bytes) -> None:
    """/dev/nvidia-uvm: UVM_INITIALIZE and UVM_REGISTER_GPU with this client, as the CUDA driver does before channels."""
    self.uvm = self._open("/dev/nvidia-uvm")
    for request, args, what in ((U.UVM_INITIALIZE, U.UVM_INITIALIZE_PARAMS(), "UVM_INITIALIZE"),
                                (U.UVM_REGISTER_GPU, U.UVM_REGISTER_GPU_PARAMS(rmCtrlFd=-1, hClient=self.client), "UVM_REGISTER_GPU")):
      if request == U.UVM_REGISTER_GPU: ctypes.memmove(args.gpu_uuid.uuid, uuid, 16)
      try:
        self.os.ioctl(self.uvm, request, args)
      except OSError as e:
        raise HCQError(f"{what} failed: {errno.errorcode.get(e.errno, e.errno)}") from None
      self._check(what, args.rmStatus)
