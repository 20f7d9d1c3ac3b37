"""The mock NVIDIA resource manager: the RM escapes of /dev/nvidiactl and /dev/nvidia0, checked as the 580 RM checks them.

Every RM call carries an NV_STATUS in its parameters; the ioctl itself fails (EINVAL) only where escape.c refuses the
call before the RM sees it (a wrong parameter size, a control-node escape on a GPU node). Each check names the
RM source it mirrors (NVIDIA/open-gpu-kernel-modules 580.142, src/nvidia/...); where the mock is unsure what the RM
does it takes the stricter rule and says so. Objects form the RM's tree: client -> device -> subdevice, VA space,
memory, channel group -> channel -> engine object; freeing an object frees what lies below it (resserv rs_client.c
clientFreeResource).
"""
from __future__ import annotations
import ctypes
import errno
import os
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hcq.autogen.nv import classes as C, clc56f, clc86f, clc8b5, clcbc0, ctrl0080, ctrl2080 as X, ctrl_fifo as F, nv_ioctl as I, nvos as O, nvstatus as S, uvm as U
from hcq.drivers import libc
from hcq.drivers.mock.nv.gpu import Channel, MockNVGPU, NVBoardSpec, notifier_write
from hcq.drivers.nv.host_class import HOST_CLASSES
from hcq.drivers.va import AddressSpace

PAGE = 4096
CLIENT_HANDLE_BASE = 0xC1D00000     # rs_server.c: client handles come from the server's range (serverAllocClient)
VA_BASE, VA_SIZE = 1 << 32, 1 << 40  # the GPU VA the VA space hands out (uvm/RM pick from 4 GiB up on GH100; unsure, the mock starts there)
# gpu_vaspace.c gvaspaceConstruct_IMPL (580.142): a VA space starts at gvaspaceGetReservedVaspaceBase (1 MiB) and ends at
# the MMU format's top bit; 49 bits here (Ampere's format; Hopper's may reach 57, unsure: the stricter limit).
VA_START_MIN, VA_LIMIT = 1 << 20, (1 << 49) - 1
SUBCONTEXTS = 64  # VEIDs per channel group on GH100 (kfifoGetMaxSubcontext; the subctxId heap of kchangrpInit spans 0..63)
USERMODE_MAP_OFFSET = 0x7F0000000   # the mmap offset the RM gives a usermode mapping (an opaque cookie to user space)


class RMError(Exception):
  """An RM call's failure: the NV_STATUS and why (what the RM would print at LEVEL_INFO)."""

  def __init__(self, status: int, why: str):
    super().__init__(f"{S.NV_STATUS_NAMES[status][0]}: {why}")
    self.status = status


@dataclass
class RMObject:
  handle: int
  parent: "RMObject | None"
  cls: int
  children: dict[int, "RMObject"] = field(default_factory=dict)
  data: dict[str, Any] = field(default_factory=dict)


# class -> classes its parent may have (the RM's resource descriptor table, resource_list.h RS_ENTRY parent lists)
PARENTS: dict[int, tuple[int, ...]] = {
  C.NV01_DEVICE_0: (C.NV01_ROOT, C.NV01_ROOT_NON_PRIV),
  C.NV20_SUBDEVICE_0: (C.NV01_DEVICE_0,),
  C.FERMI_VASPACE_A: (C.NV01_DEVICE_0,),
  C.NV01_MEMORY_LOCAL_USER: (C.NV01_DEVICE_0, C.NV20_SUBDEVICE_0),
  C.NV01_MEMORY_SYSTEM: (C.NV01_DEVICE_0, C.NV20_SUBDEVICE_0),
  C.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR: (C.NV01_DEVICE_0, C.NV20_SUBDEVICE_0),
  C.KEPLER_CHANNEL_GROUP_A: (C.NV01_DEVICE_0, C.NV20_SUBDEVICE_0),
  C.FERMI_CONTEXT_SHARE_A: (C.KEPLER_CHANNEL_GROUP_A,),
  clc56f.AMPERE_CHANNEL_GPFIFO_A: (C.KEPLER_CHANNEL_GROUP_A,),
  clc86f.HOPPER_CHANNEL_GPFIFO_A: (C.KEPLER_CHANNEL_GROUP_A,),
  clcbc0.HOPPER_COMPUTE_A: (clc56f.AMPERE_CHANNEL_GPFIFO_A, clc86f.HOPPER_CHANNEL_GPFIFO_A),
  clc8b5.HOPPER_DMA_COPY_A: (clc56f.AMPERE_CHANNEL_GPFIFO_A, clc86f.HOPPER_CHANNEL_GPFIFO_A),
  C.HOPPER_USERMODE_A: (C.NV20_SUBDEVICE_0,),
}
# class -> its allocation parameter struct (None: takes no parameters); sizes are checked exactly (rs_server.c
# serverAllocResource copies in pAllocParms of paramsSize; each class's constructor casts it, and rmapi/alloc_free.c
# rmapiAllocWithSecInfo rejects a size the class's NVOC table does not list with NV_ERR_INVALID_ARGUMENT; unsure which
# classes tolerate a short struct on 580, the mock requires the exact size)
ALLOC_PARAMS: dict[int, Any] = {
  C.NV01_DEVICE_0: C.struct_NV0080_ALLOC_PARAMETERS, C.NV20_SUBDEVICE_0: C.struct_NV2080_ALLOC_PARAMETERS,
  C.FERMI_VASPACE_A: O.NV_VASPACE_ALLOCATION_PARAMETERS, C.NV01_MEMORY_LOCAL_USER: O.NV_MEMORY_ALLOCATION_PARAMS,
  C.NV01_MEMORY_SYSTEM: O.NV_MEMORY_ALLOCATION_PARAMS, C.KEPLER_CHANNEL_GROUP_A: O.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS,
  C.FERMI_CONTEXT_SHARE_A: O.NV_CTXSHARE_ALLOCATION_PARAMETERS,
  clc56f.AMPERE_CHANNEL_GPFIFO_A: O.NV_CHANNEL_ALLOC_PARAMS, clc86f.HOPPER_CHANNEL_GPFIFO_A: O.NV_CHANNEL_ALLOC_PARAMS,
  clcbc0.HOPPER_COMPUTE_A: None, clc8b5.HOPPER_DMA_COPY_A: None, C.HOPPER_USERMODE_A: None,
}
CHANNEL_CLASSES = (clc56f.AMPERE_CHANNEL_GPFIFO_A, clc86f.HOPPER_CHANNEL_GPFIFO_A)
MEMORY_CLASSES = (C.NV01_MEMORY_LOCAL_USER, C.NV01_MEMORY_SYSTEM, C.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR)
# control -> (the class it is sent to, its parameter struct) (ctrl0080gpu.h, ctrla06c.h, ctrlc36f.h)
CONTROLS = {
  ctrl0080.NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2: ((C.NV01_DEVICE_0,), ctrl0080.NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS),
  F.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE: ((C.KEPLER_CHANNEL_GROUP_A,), F.NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS),
  F.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN: (CHANNEL_CLASSES, F.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS),
  # what smi reads (hcq.smi.nvidia_rm)
  X.NV2080_CTRL_CMD_FB_GET_INFO_V2: ((C.NV20_SUBDEVICE_0,), X.NV2080_CTRL_FB_GET_INFO_V2_PARAMS),
  X.NV2080_CTRL_CMD_PERF_GET_GPUMON_PERFMON_UTIL_SAMPLES_V2: ((C.NV20_SUBDEVICE_0,), X.NV2080_CTRL_PERF_GET_GPUMON_PERFMON_UTIL_SAMPLES_V2_PARAMS),
  X.NV2080_CTRL_CMD_THERMAL_SYSTEM_EXECUTE_V2: ((C.NV20_SUBDEVICE_0,), X.NV2080_CTRL_THERMAL_SYSTEM_EXECUTE_V2_PARAMS),
  X.NV2080_CTRL_CMD_GPU_GET_GID_INFO: ((C.NV20_SUBDEVICE_0,), X.NV2080_CTRL_GPU_GET_GID_INFO_PARAMS),
  X.NV2080_CTRL_CMD_GR_GET_INFO_V2: ((C.NV20_SUBDEVICE_0,), X.NV2080_CTRL_GR_GET_INFO_V2_PARAMS),
}


def ioc_nr(request: int) -> int:
  return request & 0xFF


def ioc_size(request: int) -> int:
  return (request >> 16) & 0x3FFF


class MockRM:
  """The RM of one process with one emulated GPU (`board`). `ctl_fds`/`dev_fds` are the open nodes the OS object tracks."""

  def __init__(self, board: NVBoardSpec = NVBoardSpec()):
    self.board = board
    self.gpu = MockNVGPU(board, on_error=self._channel_error)
    self.lock = threading.RLock()
    self.clients: dict[int, RMObject] = {}
    self.next_client = CLIENT_HANDLE_BASE
    self.va = AddressSpace(VA_BASE, VA_SIZE, granule=PAGE)
    self.fixed_vas: set[int] = set()  # GPU ranges mapped at a caller's address (NVOS46_FLAGS_DMA_OFFSET_FIXED), not from self.va
    self.next_chid = 1
    self.mmap_contexts: dict[int, tuple[int, int]] = {}  # mmap offset -> (kind, size): what mmap of /dev/nvidia0 maps there
    self.xids: list[str] = []  # what the RM logs to the kernel log ("NVRM: Xid (PCI:...): 31, pid=...")
    self.vram_used = 0
    self.util_mark = (0, 0)  # (GPU clock, GPU busy ns) at the previous utilisation query
    self.uvm_initialized: int | bool = False  # False, or the flags UVM_INITIALIZE took
    self.uvm_gpus: set[bytes] = set()
    self.uvm_clients: set[int] = set()  # RM clients whose channels UVM knows (UVM_REGISTER_GPU's hClient)
    self.last_error = ""
    self.classes = [C.NV01_ROOT, C.NV01_DEVICE_0, C.NV20_SUBDEVICE_0, C.FERMI_VASPACE_A, *MEMORY_CLASSES,
                    C.KEPLER_CHANNEL_GROUP_A, C.FERMI_CONTEXT_SHARE_A, *CHANNEL_CLASSES, clcbc0.HOPPER_COMPUTE_A, clc8b5.HOPPER_DMA_COPY_A, C.HOPPER_USERMODE_A]

  # ---- the escape layer: nvidia_ioctl (kernel-open/nvidia/nv.c) -> RmIoctl (arch/nvalloc/unix/src/escape.c) ----
  def ioctl(self, node: str, request: int, arg) -> int:
    """An ioctl on /dev/nvidiactl (`node` "ctl") or /dev/nvidia0 ("gpu")."""
    if (request >> 8) & 0xFF != I.NV_IOCTL_MAGIC: raise OSError(errno.ENOTTY, "not an NVIDIA ioctl (type is not NV_IOCTL_MAGIC 'F')")
    nr, size = ioc_nr(request), ioc_size(request)
    expected = {I.NV_ESC_RM_ALLOC: (O.NVOS21_PARAMETERS, O.NVOS64_PARAMETERS), I.NV_ESC_RM_FREE: (O.NVOS00_PARAMETERS,),
                I.NV_ESC_RM_CONTROL: (O.NVOS54_PARAMETERS,), I.NV_ESC_RM_ALLOC_MEMORY: (I.nv_ioctl_nvos02_parameters_with_fd,),
                I.NV_ESC_RM_MAP_MEMORY_DMA: (O.NVOS46_PARAMETERS,), I.NV_ESC_RM_UNMAP_MEMORY_DMA: (O.NVOS47_PARAMETERS,),
                I.NV_ESC_RM_MAP_MEMORY: (I.nv_ioctl_nvos33_parameters_with_fd,), I.NV_ESC_CHECK_VERSION_STR: (I.struct_nv_ioctl_rm_api_version,),
                I.NV_ESC_REGISTER_FD: (I.struct_nv_ioctl_register_fd,)}.get(nr)
    if expected is None: raise OSError(errno.EINVAL, f"escape {nr:#x} is not emulated")
    # escape.c: "if (dataSize != sizeof(*pApi)) { rmStatus = NV_ERR_INVALID_ARGUMENT; goto done; }" -> nvidia_ioctl -EINVAL
    if size != ctypes.sizeof(arg) or size not in [ctypes.sizeof(t) for t in expected]:
      raise OSError(errno.EINVAL, f"escape {nr:#x}: {size} bytes of parameters, the RM takes {' or '.join(str(ctypes.sizeof(t)) for t in expected)}")
    # escape.c NV_CTL_DEVICE_ONLY / NV_ACTUAL_DEVICE_ONLY: RM_ALLOC/FREE/CONTROL/ALLOC_MEMORY/DMA go to the control node;
    # REGISTER_FD (and RM_MAP_MEMORY's fd) to a GPU node
    if (nr == I.NV_ESC_REGISTER_FD) != (node == "gpu"): raise OSError(errno.EINVAL, f"escape {nr:#x} on the wrong node ({node})")
    if nr in (I.NV_ESC_REGISTER_FD, I.NV_ESC_CHECK_VERSION_STR):
      if nr == I.NV_ESC_CHECK_VERSION_STR: self._check_version(arg)
      return 0
    params = arg.params if nr in (I.NV_ESC_RM_ALLOC_MEMORY, I.NV_ESC_RM_MAP_MEMORY) else arg
    handler = {I.NV_ESC_RM_ALLOC: self.alloc, I.NV_ESC_RM_FREE: self.free, I.NV_ESC_RM_CONTROL: self.control,
               I.NV_ESC_RM_ALLOC_MEMORY: self.alloc_memory, I.NV_ESC_RM_MAP_MEMORY_DMA: self.map_memory_dma,
               I.NV_ESC_RM_UNMAP_MEMORY_DMA: self.unmap_memory_dma, I.NV_ESC_RM_MAP_MEMORY: self.map_memory}[nr]
    with self.lock:
      try:
        handler(params)
        params.status = S.NV_OK
      except RMError as e:
        params.status = e.status
        self.last_error = str(e)  # what the RM would print at LEVEL_INFO; tests read it
    return 0

  def _check_version(self, a) -> None:
    """escape.c NV_ESC_CHECK_VERSION_STR -> rm_perform_version_check: STRICT needs the exact version string."""
    ours = self.board.driver_version.encode()
    if a.cmd == I.NV_RM_API_VERSION_CMD_QUERY or a.versionString.split(b"\0")[0] == ours: a.reply = I.NV_RM_API_VERSION_REPLY_RECOGNIZED
    else: a.reply = I.NV_RM_API_VERSION_REPLY_UNRECOGNIZED
    a.versionString = ours

  # ---- object lookup (resserv rs_server.c / rs_client.c) ----
  def _client(self, h: int) -> RMObject:
    c = self.clients.get(h)
    if c is None: raise RMError(S.NV_ERR_INVALID_CLIENT, f"no client {h:#x}")  # rs_client.c serverGetClientUnderLock
    return c

  def _object(self, client: RMObject, h: int, classes: tuple[int, ...] | None = None, status: int = S.NV_ERR_INVALID_OBJECT_HANDLE) -> RMObject:
    obj = client if h == client.handle else client.data["objects"].get(h)
    if obj is None: raise RMError(status, f"no object {h:#x} in client {client.handle:#x}")
    if classes is not None and obj.cls not in classes:
      raise RMError(status, f"object {h:#x} is class {obj.cls:#x}, not {' or '.join(f'{c:#x}' for c in classes)}")
    return obj

  def _params(self, ptr: int, size: int, struct, cls: int):
    """Copy in a class's allocation parameters (rmapi/alloc_free.c rmapiParamsAcquire -> NV_ERR_INVALID_ARGUMENT on a bad size)."""
    if struct is None:
      if size or ptr: raise RMError(S.NV_ERR_INVALID_ARGUMENT, f"class {cls:#x} takes no allocation parameters, got {size} bytes")
      return None
    if size != ctypes.sizeof(struct): raise RMError(S.NV_ERR_INVALID_ARGUMENT, f"class {cls:#x}: {size} bytes of parameters, the RM takes {ctypes.sizeof(struct)}")
    if not ptr or not libc.is_mapped(ptr, size): raise RMError(S.NV_ERR_INVALID_ADDRESS, f"class {cls:#x}: parameters at {ptr:#x} are not readable")  # portMemExCopyFromUser
    return struct.from_address(ptr)

  # ---- NV_ESC_RM_ALLOC: rmapi/alloc_free.c rmapiAllocWithSecInfo -> resserv serverAllocResource ----
  def alloc(self, a) -> None:
    if a.hClass in (C.NV01_ROOT, C.NV01_ROOT_NON_PRIV):
      # serverAllocClient: user space asks for a handle (0: the server picks). The RM also takes NV01_ROOT_CLIENT
      # (cl0041.h, not among the generated classes yet); the mock refuses it
      h = a.hObjectNew or self.next_client
      if h in self.clients: raise RMError(S.NV_ERR_INSERT_DUPLICATE_NAME, f"client {h:#x} exists")
      self.next_client = max(self.next_client, h) + 1
      self.clients[h] = RMObject(h, None, a.hClass, data={"objects": {}})
      a.hObjectNew = h
      return
    client = self._client(a.hRoot)
    if a.hClass not in PARENTS: raise RMError(S.NV_ERR_INVALID_CLASS, f"class {a.hClass:#x} is not supported by this GPU")  # rs_server.c resservFindResourceDesc
    parent = self._object(client, a.hObjectParent, status=S.NV_ERR_INVALID_OBJECT_PARENT)
    # rs_client.c clientValidateNewResourceHandle: not the client's own handle, not 0, not taken
    if a.hObjectNew in (0, client.handle): raise RMError(S.NV_ERR_INVALID_OBJECT_HANDLE, f"new handle {a.hObjectNew:#x} (user space must pick a nonzero handle)")
    if a.hObjectNew in client.data["objects"]: raise RMError(S.NV_ERR_INSERT_DUPLICATE_NAME, f"handle {a.hObjectNew:#x} is taken")
    if parent.cls not in PARENTS[a.hClass]:  # rs_server.c _serverAllocResourceUnderLock: the descriptor's parent list
      raise RMError(S.NV_ERR_INVALID_OBJECT_PARENT, f"class {a.hClass:#x} cannot be a child of class {parent.cls:#x}")
    p = self._params(a.pAllocParms or 0, a.paramsSize, ALLOC_PARAMS[a.hClass], a.hClass)
    obj = RMObject(a.hObjectNew, parent, a.hClass)
    init = {C.NV01_DEVICE_0: self._new_device, C.NV20_SUBDEVICE_0: self._new_subdevice, C.FERMI_VASPACE_A: self._new_vaspace,
            C.NV01_MEMORY_LOCAL_USER: self._new_memory, C.NV01_MEMORY_SYSTEM: self._new_memory,
            C.KEPLER_CHANNEL_GROUP_A: self._new_channel_group, C.FERMI_CONTEXT_SHARE_A: self._new_context_share}.get(a.hClass)
    if a.hClass in CHANNEL_CLASSES: init = self._new_channel
    if a.hClass in (clcbc0.HOPPER_COMPUTE_A, clc8b5.HOPPER_DMA_COPY_A): init = self._new_engine_object
    if init: init(client, obj, p)
    parent.children[obj.handle] = obj
    client.data["objects"][obj.handle] = obj

  def _new_device(self, client, obj, p) -> None:
    if p.deviceId != 0: raise RMError(S.NV_ERR_INVALID_ARGUMENT, f"deviceId {p.deviceId}: this machine has one GPU (device 0)")  # device.c deviceConstruct
    if any(o.cls == C.NV01_DEVICE_0 for o in client.children.values()):  # device.c: one device object per client and GPU
      raise RMError(S.NV_ERR_STATE_IN_USE, "the client already has a device object for GPU 0")

  def _new_subdevice(self, client, obj, p) -> None:
    if p.subDeviceId != 0: raise RMError(S.NV_ERR_INVALID_ARGUMENT, f"subDeviceId {p.subDeviceId}: the device has one subdevice")

  def _new_vaspace(self, client, obj, p) -> None:
    if any(o.cls == C.FERMI_VASPACE_A for o in obj.parent.children.values()):  # one VA space per device in the mock (stricter: the RM allows several)
      raise RMError(S.NV_ERR_STATE_IN_USE, "the mock supports one VA space per device")

  def _new_memory(self, client, obj, p) -> None:
    """mem_mgr/video_mem.c vidmemConstruct, system_mem.c sysmemConstruct: a size of pages, at most what the heap has."""
    if p.size == 0: raise RMError(S.NV_ERR_INVALID_ARGUMENT, "memory of size 0")
    size = (p.size + PAGE - 1) // PAGE * PAGE
    if obj.cls == C.NV01_MEMORY_LOCAL_USER:
      if self.vram_used + size > self.board.vram_bytes: raise RMError(S.NV_ERR_NO_MEMORY, f"{size} bytes of video memory: {self.board.vram_bytes - self.vram_used} free")
      self.vram_used += size
    obj.data.update(size=size, backing=np.zeros(size, np.uint8), mappings=set())
    p.size, p.limit = size, size - 1

  def alloc_memory(self, a) -> None:
    """NV_ESC_RM_ALLOC_MEMORY (NVOS02) of NV01_MEMORY_SYSTEM_OS_DESCRIPTOR: the user's own pages
    (rmapi/alloc_free.c RmAllocMemory -> mem_mgr/os_desc_mem.c osdescConstruct)."""
    client = self._client(a.hRoot)
    if a.hClass != C.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR: raise RMError(S.NV_ERR_INVALID_CLASS, f"NVOS02 class {a.hClass:#x}: the mock takes OS descriptors only")
    parent = self._object(client, a.hObjectParent, status=S.NV_ERR_INVALID_OBJECT_PARENT)
    if parent.cls not in PARENTS[a.hClass]: raise RMError(S.NV_ERR_INVALID_OBJECT_PARENT, f"an OS descriptor under class {parent.cls:#x}")
    if a.hObjectNew in (0, client.handle) or a.hObjectNew in client.data["objects"]:
      raise RMError(S.NV_ERR_INSERT_DUPLICATE_NAME if a.hObjectNew in client.data["objects"] else S.NV_ERR_INVALID_OBJECT_HANDLE, f"new handle {a.hObjectNew:#x}")
    addr, size = a.pMemory or 0, a.limit + 1
    # os_desc_mem.c: the descriptor must start on a page (stricter: the RM rounds inside osCreateMemFromOsDescriptor) and be mapped
    if addr % PAGE or size % PAGE: raise RMError(S.NV_ERR_INVALID_ARGUMENT, f"OS descriptor {addr:#x}+{size:#x} is not page aligned")
    if not libc.is_mapped(addr, size): raise RMError(S.NV_ERR_INVALID_ADDRESS, f"OS descriptor {addr:#x}+{size:#x} is not mapped in the process")
    obj = RMObject(a.hObjectNew, parent, a.hClass, data={"size": size, "backing": addr, "mappings": set()})
    parent.children[obj.handle] = obj
    client.data["objects"][obj.handle] = obj

  def _new_channel_group(self, client, obj, p) -> None:
    """fifo/kernel_channel_group_api.c kchangrpapiConstruct: an engine type the GPU has; a VA space of this device if given."""
    if p.engineType not in (C.NV2080_ENGINE_TYPE_GRAPHICS, *range(C.NV2080_ENGINE_TYPE_COPY0, C.NV2080_ENGINE_TYPE_COPY9 + 1)):
      raise RMError(S.NV_ERR_INVALID_ARGUMENT, f"channel group engine type {p.engineType}")
    if p.hVASpace: self._object(client, p.hVASpace, (C.FERMI_VASPACE_A,))
    obj.data.update(engine=p.engineType, enabled=False, veids=set(), legacy=False)

  def _new_context_share(self, client, obj, p) -> None:
    """fifo/kernel_ctxshare.c kctxshareapiConstruct_IMPL and kctxshareInitCommon_IMPL (580.142): a subcontext (VEID) of
    the channel group in a VA space. The RM takes hVASpace 0 as the device's implicit VA space, which the mock does
    not have: it refuses that as the RM does in MULTIPLE_VASPACES mode (vaspaceGetByHandleOrDeviceDefault, stricter)."""
    group = obj.parent
    if p.hVASpace == 0: raise RMError(S.NV_ERR_INVALID_STATE, "hVASpace 0: the mock's device has no implicit VA space; name a FERMI_VASPACE_A")
    # vaspaceGetByHandleOrDeviceDefault -> serverutilGetResourceRefWithType: missing NV_ERR_OBJECT_NOT_FOUND, other class INVALID_OBJECT_HANDLE
    self._object(client, p.hVASpace, status=S.NV_ERR_OBJECT_NOT_FOUND)
    self._object(client, p.hVASpace, (C.FERMI_VASPACE_A,))
    free = [v for v in range(SUBCONTEXTS) if v not in group.data["veids"]]
    # kctxshareInitCommon: SYNC takes VEID 0, SPECIFIED the one asked for, ASYNC the highest free from 63 down to 1 (then
    # 0), ASYNC_PREFER_LOWER the lowest from 1 up (then 0); any other flags value is NV_ERR_INVALID_ARGUMENT
    if p.flags == O.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_SYNC: want = [0]
    elif p.flags == O.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_SPECIFIED: want = [p.subctxId]
    elif p.flags == O.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC: want = sorted((v for v in free if v), reverse=True) + [0]
    elif p.flags == O.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC_PREFER_LOWER: want = sorted(v for v in free if v) + [0]
    else: raise RMError(S.NV_ERR_INVALID_ARGUMENT, f"context share flags {p.flags:#x}: SUBCONTEXT_SYNC, _ASYNC, _SPECIFIED or _ASYNC_PREFER_LOWER (0..3)")
    veid = next((v for v in want if v in free), None)
    # eheapAlloc of a taken or out-of-range VEID fails; the RM returns its status (unsure which: the mock says NV_ERR_NO_MEMORY)
    if veid is None: raise RMError(S.NV_ERR_NO_MEMORY, f"no free subcontext for flags {p.flags} (subctxId {p.subctxId}; {len(free)} of {SUBCONTEXTS} free)")
    group.data["veids"].add(veid)
    obj.data.update(veid=veid, vaspace=p.hVASpace)
    p.subctxId = veid

  def _new_channel(self, client, obj, p) -> None:
    """fifo/kernel_channel.c kchannelConstruct: GPFIFO entries a power of two in a mapped range, USERD memory of this device."""
    n = p.gpFifoEntries
    if n < 2 or n & (n - 1): raise RMError(S.NV_ERR_INVALID_ARGUMENT, f"gpFifoEntries {n} is not a power of two >= 2")
    if p.gpFifoOffset % 8: raise RMError(S.NV_ERR_INVALID_ARGUMENT, f"gpFifoOffset {p.gpFifoOffset:#x} is not 8-byte aligned")
    try:
      self.gpu.mem.find(p.gpFifoOffset, n * 8)
    except Exception:
      raise RMError(S.NV_ERR_INVALID_ADDRESS, f"the GPFIFO {p.gpFifoOffset:#x}+{n * 8:#x} is not mapped in the VA space") from None
    # volta/kernel_channel_gv100.c kchannelCreateUserdMemDescBc_GV100: the USERD handle must be a Memory object
    userd = self._object(client, p.hUserdMemory[0], MEMORY_CLASSES, S.NV_ERR_OBJECT_NOT_FOUND)
    ctrl = ctypes.sizeof(clc56f.struct_Nvc56fControl_struct)
    # The RM shifts the USERD address right by NV_RAMUSERD_BASE_SHIFT (9; kfifoGetUserdSizeAlign_GM107), silently dropping
    # an unaligned offset's low bits, so the GPU would read USERD elsewhere: the mock refuses it (stricter)
    if p.userdOffset[0] % 512 or p.userdOffset[0] + ctrl > userd.data["size"]:
      raise RMError(S.NV_ERR_INVALID_OFFSET, f"USERD offset {p.userdOffset[0]:#x} in {userd.data['size']:#x} bytes (512-byte aligned, room for {ctrl})")
    self._channel_context(client, obj.parent, p)
    notifier = None
    if p.hObjectError:
      err = self._object(client, p.hObjectError, MEMORY_CLASSES)
      notifier = self._host_view(err)
    group = obj.parent
    engine = "compute" if p.engineType == C.NV2080_ENGINE_TYPE_GRAPHICS else "copy"
    if p.engineType not in (C.NV2080_ENGINE_TYPE_GRAPHICS, *range(C.NV2080_ENGINE_TYPE_COPY0, C.NV2080_ENGINE_TYPE_COPY9 + 1)):
      raise RMError(S.NV_ERR_INVALID_ARGUMENT, f"channel engine type {p.engineType}")
    view = self._host_view(userd)[p.userdOffset[0]:p.userdOffset[0] + ctrl].view(np.uint32)
    chid, self.next_chid = self.next_chid, self.next_chid + 1
    obj.data.update(chid=chid, group=group)
    ch = Channel(chid, engine, HOST_CLASSES[obj.cls], p.gpFifoOffset, n, view, notifier)
    if group.data.get("enabled"): ch.scheduled.set()
    obj.data["channel"] = ch
    self.gpu.add_channel(ch)

  def _channel_context(self, client, group: RMObject, p) -> None:
    """kernel_channel.c kchannelConstruct_IMPL (580.142): a channel names a context share or a VA space, not both; the
    channels of a group either all name a context share of that group or none does (then the group is in legacy mode)."""
    if p.hContextShare and p.hVASpace:
      raise RMError(S.NV_ERR_INVALID_ARGUMENT, "both hContextShare and hVASpace: a channel takes its VA space from its context share")
    has_channels = any("channel" in c.data for c in group.children.values())
    if has_channels and group.data["legacy"] == bool(p.hContextShare):
      raise RMError(S.NV_ERR_INVALID_ARGUMENT, "all channels of a channel group must name a context share if any one of them does")
    if p.hContextShare:
      share = self._object(client, p.hContextShare, status=S.NV_ERR_OBJECT_NOT_FOUND)  # clientGetResourceRefByType
      if share.cls != C.FERMI_CONTEXT_SHARE_A: raise RMError(S.NV_ERR_INVALID_OBJECT_HANDLE, f"hContextShare {p.hContextShare:#x} is class {share.cls:#x}")
      if share.parent is not group: raise RMError(S.NV_ERR_INVALID_OBJECT_PARENT, f"context share {p.hContextShare:#x} belongs to another channel group")
    else:
      group.data["legacy"] = True  # kchangrpapiSetLegacyMode: the RM makes the group's own context shares

  def _new_engine_object(self, client, obj, p) -> None:
    ch: Channel = obj.parent.data["channel"]
    want = "copy" if obj.cls == clc8b5.HOPPER_DMA_COPY_A else "compute"
    if ch.engine != want: raise RMError(S.NV_ERR_INVALID_ARGUMENT, f"a {want} object on a {ch.engine} channel")  # kernel_channel.c: the engine must match

  @staticmethod
  def _host_view(mem: RMObject) -> np.ndarray:
    b = mem.data["backing"]
    return b if isinstance(b, np.ndarray) else np.frombuffer((ctypes.c_uint8 * mem.data["size"]).from_address(b), np.uint8)

  # ---- NV_ESC_RM_FREE: rmapi/alloc_free.c rmapiFreeWithSecInfo ----
  def free(self, a) -> None:
    client = self._client(a.hRoot)
    if a.hObjectOld == client.handle:
      for h in list(client.children): self._free_tree(client, client.children[h])
      del self.clients[client.handle]
      return
    obj = self._object(client, a.hObjectOld)
    self._free_tree(client, obj)

  def _free_tree(self, client: RMObject, obj: RMObject) -> None:
    for child in list(obj.children.values()): self._free_tree(client, child)
    if "channel" in obj.data: self.gpu.remove_channel(obj.data["chid"])
    if "veid" in obj.data: obj.parent.data["veids"].discard(obj.data["veid"])
    for va in list(obj.data.get("mappings", ())): self._unmap(obj, va)
    if obj.cls == C.NV01_MEMORY_LOCAL_USER: self.vram_used -= obj.data["size"]
    obj.parent.children.pop(obj.handle, None)
    client.data["objects"].pop(obj.handle, None)

  # ---- NV_ESC_RM_CONTROL: rmapi/control.c rmapiControlWithSecInfo ----
  def control(self, a) -> None:
    client = self._client(a.hClient)
    entry = CONTROLS.get(a.cmd)
    # control.c: a pointer without a size or a size without a pointer, or a size other than the control's -> INVALID_ARGUMENT
    if (a.paramsSize != 0) != bool(a.params) or (entry and a.paramsSize != ctypes.sizeof(entry[1])):
      raise RMError(S.NV_ERR_INVALID_ARGUMENT, f"control {a.cmd:#x}: params {a.params or 0:#x} of {a.paramsSize} bytes" +
                    (f", the control takes {ctypes.sizeof(entry[1])}" if entry else ""))
    obj = self._object(client, a.hObject)
    if entry is None or obj.cls not in entry[0]:  # rs_resource.c resControlLookup: no such method on the object's class
      raise RMError(S.NV_ERR_NOT_SUPPORTED, f"control {a.cmd:#x} on class {obj.cls:#x}")
    p = entry[1].from_address(a.params)
    if a.cmd == ctrl0080.NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2:
      p.numClasses = len(self.classes)
      for i, c in enumerate(self.classes): p.classList[i] = c
    elif a.cmd == F.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE:  # kernel_channel_group_api.c kchangrpapiCtrlCmdGpFifoSchedule
      # "fail channel scheduling if the channels have not been registered with UVM" (kchannelIsSchedulable_HAL)
      if any("channel" in c.data for c in obj.children.values()) and client.handle not in self.uvm_clients:
        raise RMError(S.NV_ERR_INVALID_STATE, "the channels are not registered with UVM (UVM_REGISTER_GPU with this client)")
      obj.data["enabled"] = bool(p.bEnable)
      for c in obj.children.values():
        if "channel" in c.data:
          (c.data["channel"].scheduled.set if p.bEnable else c.data["channel"].scheduled.clear)()
          c.data["channel"].doorbell.set()
    elif a.cmd == F.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN:
      p.workSubmitToken = obj.data["chid"]
    elif a.cmd == X.NV2080_CTRL_CMD_FB_GET_INFO_V2: self._fb_info(p)
    elif a.cmd == X.NV2080_CTRL_CMD_PERF_GET_GPUMON_PERFMON_UTIL_SAMPLES_V2: self._util_samples(p)
    elif a.cmd == X.NV2080_CTRL_CMD_THERMAL_SYSTEM_EXECUTE_V2: self._thermal(p)
    elif a.cmd == X.NV2080_CTRL_CMD_GPU_GET_GID_INFO: self._gid_info(p)
    elif a.cmd == X.NV2080_CTRL_CMD_GR_GET_INFO_V2: self._gr_info(p)

  def _fb_info(self, p) -> None:
    """kern_mem_sys_ctrl.c subdeviceCtrlCmdFbGetInfoV2_IMPL (580.142): 1..NV2080_CTRL_FB_INFO_MAX_LIST_SIZE entries; sizes in KiB.
    Only the size indices are emulated; any other index is refused (stricter: the RM answers many more)."""
    if not 0 < p.fbInfoListSize <= X.NV2080_CTRL_FB_INFO_MAX_LIST_SIZE:
      raise RMError(S.NV_ERR_INVALID_ARGUMENT, f"fbInfoListSize {p.fbInfoListSize}: 1..{X.NV2080_CTRL_FB_INFO_MAX_LIST_SIZE}")
    total = self.board.vram_bytes >> 10
    values = {X.NV2080_CTRL_FB_INFO_INDEX_RAM_SIZE: total, X.NV2080_CTRL_FB_INFO_INDEX_TOTAL_RAM_SIZE: total,
              X.NV2080_CTRL_FB_INFO_INDEX_HEAP_SIZE: total, X.NV2080_CTRL_FB_INFO_INDEX_USABLE_RAM_SIZE: total,
              X.NV2080_CTRL_FB_INFO_INDEX_HEAP_FREE: (self.board.vram_bytes - self.vram_used) >> 10}
    for e in p.fbInfoList[:p.fbInfoListSize]:
      if e.index not in values: raise RMError(S.NV_ERR_INVALID_ARGUMENT, f"FB info index {e.index:#x} is not emulated")
      e.data = values[e.index]

  def _gr_info(self, p) -> None:
    """kernel_graphics.c subdeviceCtrlCmdKGrGetInfoV2_IMPL -> _kgraphicsCtrlCmdGrGetInfoV2 (580.142): 1..NV2080_CTRL_GR_INFO_MAX_SIZE
    entries, else NV_ERR_INVALID_ARGUMENT, and each index below NV2080_CTRL_GR_INFO_MAX_SIZE, else NV_ERR_INVALID_ARGUMENT
    (checked entry by entry, the earlier ones filled). grRouteInfo must name no engine (kgrmgrCtrlRouteKGRWithDevice; the
    mock has no MIG). Only the indices below are emulated; any other is refused (stricter: the RM answers all)."""
    if not 0 < p.grInfoListSize <= X.NV2080_CTRL_GR_INFO_MAX_SIZE:
      raise RMError(S.NV_ERR_INVALID_ARGUMENT, f"grInfoListSize {p.grInfoListSize}: 1..{X.NV2080_CTRL_GR_INFO_MAX_SIZE}")
    if p.grRouteInfo.flags or p.grRouteInfo.route: raise RMError(S.NV_ERR_INVALID_ARGUMENT, "grRouteInfo names an engine; the mock has no MIG")
    b = self.board
    values = {X.NV2080_CTRL_GR_INFO_INDEX_SHADER_PIPE_COUNT: b.tpc_count, X.NV2080_CTRL_GR_INFO_INDEX_SHADER_PIPE_SUB_COUNT: b.sms_per_tpc,
              X.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_SM_PER_TPC: b.sms_per_tpc, X.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_GPCS: b.gpcs,
              X.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_TPC_PER_GPC: b.tpcs_per_gpc, X.NV2080_CTRL_GR_INFO_INDEX_MAX_WARPS_PER_SM: b.max_warps_per_sm}
    for e in p.grInfoList[:p.grInfoListSize]:
      if e.index >= X.NV2080_CTRL_GR_INFO_MAX_SIZE: raise RMError(S.NV_ERR_INVALID_ARGUMENT, f"GR info index {e.index}: below {X.NV2080_CTRL_GR_INFO_MAX_SIZE}")
      if e.index not in values: raise RMError(S.NV_ERR_INVALID_ARGUMENT, f"GR info index {e.index} is not emulated")
      e.data = values[e.index]

  def _gid_info(self, p) -> None:
    """subdevice_ctrl_gpu_kernel.c subdeviceCtrlCmdGpuGetGidInfo_IMPL -> gpu.c gpuGetGidInfo_IMPL (580.142): the TYPE field
    must be SHA1 (else NV_ERR_INVALID_FLAGS); FORMAT BINARY gives the 16 bytes, any other FORMAT value the string
    "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" with its NUL (gpu_uuid.c transformGidToUserFriendlyString:
    NV_UUID_STR_LEN, 41 bytes); `index` is ignored, as the RM ignores it."""
    flags = X.register("NV2080_GPU_CMD_GPU_GET_GID_FLAGS").decode(p.flags)
    if flags["type"] != X.NV2080_GPU_CMD_GPU_GET_GID_FLAGS_TYPE_SHA1: raise RMError(S.NV_ERR_INVALID_FLAGS, f"GID flags {p.flags:#x}: TYPE must be SHA1")
    gid = self.board_uuid_bytes()
    data = gid if flags["format"] == X.NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_BINARY else self.board.uuid.encode() + b"\0"
    ctypes.memmove(p.data, data, len(data))
    p.length = len(data)

  def _util_samples(self, p) -> None:
    """kern_perf_ctrl.c subdeviceCtrlCmdPerfGetGpumonPerfmonUtilSamplesV2 (580.142): bufSize is the whole ring's size. The
    mock's ring holds one sample: the graphics engine's busy share (pct*100) since the previous query."""
    if p.type != X.NV2080_CTRL_GPUMON_SAMPLE_TYPE_PERFMON_UTIL or p.bufSize != ctypes.sizeof(p.samples):
      raise RMError(S.NV_ERR_INVALID_ARGUMENT, f"sample type {p.type} / bufSize {p.bufSize}: type PERFMON_UTIL, bufSize {ctypes.sizeof(p.samples)}")
    now, busy = self.gpu.clock(), self.gpu.busy_ns
    since, busy_before = self.util_mark
    self.util_mark = (now, busy)
    ctypes.memset(ctypes.addressof(p.samples), 0, ctypes.sizeof(p.samples))
    sample = p.samples[0]
    sample.base.timeStamp = now
    sample.gr.util = min(10000, (busy - busy_before) * 10000 // max(1, now - since))
    for engine in (sample.fb, sample.gr, sample.nvenc, sample.nvdec, sample.nvjpg, sample.nvofa): engine.procId = X.NV2080_GPUMON_PID_INVALID
    p.count, p.tracker = 1, 1

  def _thermal(self, p) -> None:
    """subdevice_ctrl_gpu_kernel.c subdeviceCtrlCmdThermalSystemExecuteV2_IMPL (580.142): at most the list's entries; the
    client's API version, revision and instruction size must be the header's (else it goes to physical RM, which the mock
    refuses: stricter). One sensor, the GPU's, reading board.temperature_c; other opcodes are not emulated."""
    if p.instructionListSize > len(p.instructionList): raise RMError(S.NV_ERR_INVALID_ARGUMENT, f"instructionListSize {p.instructionListSize}")
    if (p.clientAPIVersion, p.clientAPIRevision, p.clientInstructionSizeOf) != (X.THERMAL_SYSTEM_API_VER, X.THERMAL_SYSTEM_API_REV, ctypes.sizeof(X.NV2080_CTRL_THERMAL_SYSTEM_INSTRUCTION)):
      raise RMError(S.NV_ERR_NOT_SUPPORTED, "thermal API version/revision/instruction size other than the 580 header's")
    p.successfulInstructions = 0
    for ins in p.instructionList[:p.instructionListSize]:
      ins.executed = 1
      if ins.opcode == X.NV2080_CTRL_THERMAL_SYSTEM_GET_INFO_SENSORS_AVAILABLE_OPCODE:
        ins.operands.getInfoSensorsAvailable.availableSensors, ins.result = 1, S.NV_OK
      elif ins.opcode == X.NV2080_CTRL_THERMAL_SYSTEM_GET_STATUS_SENSOR_READING_OPCODE and ins.operands.getStatusSensorReading.sensorIndex == 0:
        ins.operands.getStatusSensorReading.value, ins.result = self.board.temperature_c, S.NV_OK
      else:
        ins.result = S.NV_ERR_NOT_SUPPORTED
      if ins.result != S.NV_OK and not p.executeFlags & X.NV2080_CTRL_THERMAL_SYSTEM_EXECUTE_FLAGS_IGNORE_FAIL:
        raise RMError(ins.result, f"thermal instruction opcode {ins.opcode:#x} is not emulated")
      p.successfulInstructions += ins.result == S.NV_OK

  # ---- GPU mappings: rmapi/mapping.c rmapiMapWithSecInfo (NVOS46) and rmapiUnmapWithSecInfo (NVOS47) ----
  def _dma_objects(self, a) -> tuple[RMObject, RMObject]:
    client = self._client(a.hClient)
    self._object(client, a.hDevice, (C.NV01_DEVICE_0,))
    vas = self._object(client, a.hDma, (C.FERMI_VASPACE_A,))
    mem = self._object(client, a.hMemory, MEMORY_CLASSES)
    return vas, mem

  def map_memory_dma(self, a) -> None:
    vas, mem = self._dma_objects(a)
    length = a.length or mem.data["size"] - a.offset
    if a.offset % PAGE or a.offset + length > mem.data["size"] or length <= 0:  # mapping.c: the range must lie in the memory
      raise RMError(S.NV_ERR_INVALID_LIMIT, f"offset {a.offset:#x} length {a.length:#x} in memory of {mem.data['size']:#x} bytes")
    fixed = O.register("NVOS46_FLAGS").decode(a.flags)["dma_offset_fixed"] == O.NVOS46_FLAGS_DMA_OFFSET_FIXED_TRUE
    va = self._fixed_va(a.dmaOffset, length) if fixed else self._free_va(length)
    backing = mem.data["backing"]
    self.gpu.mem.map(va, length, backing[a.offset:a.offset + length] if isinstance(backing, np.ndarray) else backing + a.offset)
    mem.data["mappings"].add(va)
    a.dmaOffset = va

  def _fixed_va(self, va: int, length: int) -> int:
    """The caller's GPU address for a DMA_OFFSET_FIXED mapping, checked as virt_mem_allocator_gm107.c dmaAllocMapping_GM107
    and gpu_vaspace.c gvaspaceAlloc_IMPL (580.142) check it."""
    # dmaAllocMapping_GM107 aligns the address down to the page size; the mock refuses an unaligned one (stricter).
    if va % PAGE: raise RMError(S.NV_ERR_INVALID_OFFSET, f"fixed DMA offset {va:#x} is not page aligned ({PAGE:#x}; stricter than the RM)")
    end = va + (length + PAGE - 1) // PAGE * PAGE
    # gvaspaceAlloc_IMPL clips the range to the VA space; a size that no longer fits is NV_ERR_INVALID_ARGUMENT
    if va < VA_START_MIN or end - 1 > VA_LIMIT:
      raise RMError(S.NV_ERR_INVALID_ARGUMENT, f"fixed DMA offset {va:#x}+{length:#x} outside the VA space [{VA_START_MIN:#x}, {VA_LIMIT:#x}]")
    # gvaspaceAlloc_IMPL: eheapAlloc at a taken address fails, returned as NV_ERR_NO_MEMORY
    if self.gpu.mem.overlaps(va, end - va): raise RMError(S.NV_ERR_NO_MEMORY, f"fixed DMA offset {va:#x}+{length:#x} overlaps a mapping")
    self.fixed_vas.add(va)
    return va

  def _free_va(self, length: int) -> int:
    """A GPU address the RM picks: the next free range of self.va clear of fixed mappings (those found taken are held aside)."""
    held = []
    try:
      while self.gpu.mem.overlaps(va := self.va.alloc(length), length): held.append(va)
      return va
    finally:
      for h in held: self.va.free(h, length)

  def unmap_memory_dma(self, a) -> None:
    vas, mem = self._dma_objects(a)
    if a.dmaOffset not in mem.data["mappings"]: raise RMError(S.NV_ERR_INVALID_OFFSET, f"memory {a.hMemory:#x} is not mapped at {a.dmaOffset:#x}")
    self._unmap(mem, a.dmaOffset)

  def _unmap(self, mem: RMObject, va: int) -> None:
    size = self.gpu.mem.find(va, 1)[0].size
    self.gpu.mem.unmap(va)
    if va in self.fixed_vas: self.fixed_vas.discard(va)
    else: self.va.free(va, size)
    mem.data["mappings"].discard(va)

  # ---- CPU mappings: NV_ESC_RM_MAP_MEMORY (rmapi/mapping_cpu.c memMap_IMPL): the usermode doorbell page ----
  def map_memory(self, a) -> None:
    client = self._client(a.hClient)
    self._object(client, a.hDevice, (C.NV20_SUBDEVICE_0, C.NV01_DEVICE_0))
    obj = self._object(client, a.hMemory)
    if obj.cls != C.HOPPER_USERMODE_A: raise RMError(S.NV_ERR_NOT_SUPPORTED, f"CPU mappings of class {obj.cls:#x} are not emulated (usermode only)")
    if a.offset or a.length != PAGE: raise RMError(S.NV_ERR_INVALID_LIMIT, f"usermode mapping {a.offset:#x}+{a.length:#x}: one page at 0")
    a.pLinearAddress = USERMODE_MAP_OFFSET
    self.mmap_contexts[USERMODE_MAP_OFFSET] = (C.HOPPER_USERMODE_A, PAGE)

  # ---- channel errors (gpu/rc/kernel_rc.c krcErrorSendEventNotifications, kernel_rc_notification.c) ----
  def _channel_error(self, ch: Channel, message: str, xid: int) -> None:
    if ch.notifier is not None: notifier_write(ch.notifier, xid, self.gpu.clock())
    self.xids.append(f"NVRM: Xid (PCI:{self.board.pci_slot[:-2]}): {xid}, pid={os.getpid()}, name=python, Ch {ch.chid:08x}, {message}")

  # ---- /dev/nvidia-uvm: uvm.c uvm_ioctl ----
  def uvm_ioctl(self, request: int, arg) -> int:
    if request == U.UVM_INITIALIZE:
      # uvm.c uvm_api_initialize: again with other flags is NV_ERR_INVALID_ARGUMENT, with the same a no-op
      if self.uvm_initialized is not False and self.uvm_initialized != arg.flags: arg.rmStatus = S.NV_ERR_INVALID_ARGUMENT
      else: self.uvm_initialized, arg.rmStatus = arg.flags, S.NV_OK
      return 0
    if request == U.UVM_REGISTER_GPU:
      # uvm_gpu.c uvm_va_space_register_gpu: UVM_INITIALIZE first; the GPU by UUID; its RM client
      if self.uvm_initialized is False: arg.rmStatus = S.NV_ERR_ILLEGAL_ACTION
      elif bytes(arg.gpu_uuid.uuid) != self.board_uuid_bytes(): arg.rmStatus = S.NV_ERR_GPU_UUID_NOT_FOUND
      elif arg.hClient not in self.clients: arg.rmStatus = S.NV_ERR_INVALID_CLIENT
      else:
        self.uvm_gpus.add(bytes(arg.gpu_uuid.uuid))
        self.uvm_clients.add(arg.hClient)
        arg.rmStatus = S.NV_OK
      return 0
    raise OSError(errno.EINVAL, f"UVM ioctl {request:#x} is not emulated")

  def board_uuid_bytes(self) -> bytes:
    return bytes.fromhex(self.board.uuid[4:].replace("-", ""))
