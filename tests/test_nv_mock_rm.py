"""RM misuse on MOCKNV returns the RM's own NV_STATUS codes (or the escape layer's EINVAL), and the driver names the call.

Each case is one wrong argument to an otherwise valid call; CASES counts them."""
from __future__ import annotations
import ctypes

import pytest

from hcq.autogen.nv import classes as C, clc56f, clc8b5, clcbc0, ctrl0080, ctrl2080 as X, ctrl_fifo as F, nv_ioctl as I, nvos as O, uvm as U
from hcq.drivers import libc
from hcq.drivers.mock.nv.os import MockNVOS
from hcq.drivers.nv.rm import RMCallError, RMInterface, check_branch, iowr
from hcq.errors import HCQError

PAGE = 4096


@pytest.fixture
def rm():
  """A client with a device, subdevice, VA space, 1 host page mapped, and a channel group."""
  r = RMInterface(MockNVOS())
  r.device = r.alloc(r.client, C.NV01_DEVICE_0, C.struct_NV0080_ALLOC_PARAMETERS())
  r.subdevice = r.alloc(r.device, C.NV20_SUBDEVICE_0, C.struct_NV2080_ALLOC_PARAMETERS())
  r.vas = r.alloc(r.device, C.FERMI_VASPACE_A, O.NV_VASPACE_ALLOCATION_PARAMETERS())
  r.page = libc.mmap(0, 4 * PAGE, libc.PROT_READ | libc.PROT_WRITE, libc.MAP_PRIVATE | libc.MAP_ANONYMOUS, -1, 0)
  r.mem = r.alloc_os_descriptor(r.device, r.page, 4 * PAGE)
  r.va = r.map_dma(r.device, r.vas, r.mem, 4 * PAGE)
  r.group = r.alloc(r.device, C.KEPLER_CHANNEL_GROUP_A, O.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(engineType=C.NV2080_ENGINE_TYPE_GRAPHICS))
  yield r
  if r.client in r.os.rm.clients: r.free(r.client)  # the RM lets go of the pages (stops channels on them) before they go
  libc.munmap(r.page, 4 * PAGE)


def channel_params(r, **kw):
  p = O.NV_CHANNEL_ALLOC_PARAMS(gpFifoOffset=r.va, gpFifoEntries=64, engineType=C.NV2080_ENGINE_TYPE_GRAPHICS)
  p.hUserdMemory[0], p.userdOffset[0] = r.mem, 2 * PAGE
  for k, v in kw.items():
    if k == "userdOffset": p.userdOffset[0] = v
    elif k == "hUserdMemory": p.hUserdMemory[0] = v[0]
    else: setattr(p, k, v)
  return p


def share(r, parent=None, handle=0x5678, **kw) -> int:
  """Allocate a FERMI_CONTEXT_SHARE_A (SUBCONTEXT_SYNC in the VA space unless `kw` says otherwise); its status."""
  p = O.NV_CTXSHARE_ALLOCATION_PARAMETERS(**{"hVASpace": r.vas, "flags": O.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_SYNC, **kw})
  return raw_alloc(r, r.client, parent or r.group, handle, C.FERMI_CONTEXT_SHARE_A, p)


def raw_alloc(r, root, parent, handle, cls, params=None):
  a = O.NVOS21_PARAMETERS(hRoot=root, hObjectParent=parent, hObjectNew=handle, hClass=cls,
                          pAllocParms=ctypes.addressof(params) if params is not None else None, paramsSize=ctypes.sizeof(params) if params is not None else 0)
  r.ioctl(r.ctl, I.NV_ESC_RM_ALLOC, a)
  return a.status


def ctrl(r, obj, cmd, params, size=None, ptr=None):
  a = O.NVOS54_PARAMETERS(hClient=r.client, hObject=obj, cmd=cmd, params=ctypes.addressof(params) if ptr is None else ptr,
                          paramsSize=ctypes.sizeof(params) if size is None else size)
  r.ioctl(r.ctl, I.NV_ESC_RM_CONTROL, a)
  return a.status


# (name, what it does -> NV_STATUS, expected status name)
CASES = [
  ("alloc in a client that does not exist", lambda r: raw_alloc(r, 0xDEAD, r.device, 0x1234, C.NV20_SUBDEVICE_0, C.struct_NV2080_ALLOC_PARAMETERS()), "NV_ERR_INVALID_CLIENT"),
  ("alloc under a parent that does not exist", lambda r: raw_alloc(r, r.client, 0x4321, 0x1234, C.NV20_SUBDEVICE_0, C.struct_NV2080_ALLOC_PARAMETERS()), "NV_ERR_INVALID_OBJECT_PARENT"),
  ("alloc with a taken handle", lambda r: raw_alloc(r, r.client, r.device, r.subdevice, C.FERMI_VASPACE_A, O.NV_VASPACE_ALLOCATION_PARAMETERS()), "NV_ERR_INSERT_DUPLICATE_NAME"),
  ("alloc with handle 0", lambda r: raw_alloc(r, r.client, r.device, 0, C.NV20_SUBDEVICE_0, C.struct_NV2080_ALLOC_PARAMETERS()), "NV_ERR_INVALID_OBJECT_HANDLE"),
  ("alloc with the client's handle", lambda r: raw_alloc(r, r.client, r.device, r.client, C.NV20_SUBDEVICE_0, C.struct_NV2080_ALLOC_PARAMETERS()), "NV_ERR_INVALID_OBJECT_HANDLE"),
  ("alloc of a class the GPU lacks", lambda r: raw_alloc(r, r.client, r.device, 0x1234, 0xBEEF), "NV_ERR_INVALID_CLASS"),
  ("subdevice under the client", lambda r: raw_alloc(r, r.client, r.client, 0x1234, C.NV20_SUBDEVICE_0, C.struct_NV2080_ALLOC_PARAMETERS()), "NV_ERR_INVALID_OBJECT_PARENT"),
  ("channel under the device", lambda r: raw_alloc(r, r.client, r.device, 0x1234, clc56f.AMPERE_CHANNEL_GPFIFO_A, channel_params(r)), "NV_ERR_INVALID_OBJECT_PARENT"),
  ("device params of the wrong size", lambda r: raw_alloc(r, r.client, r.client, 0x1234, C.NV01_DEVICE_0, C.struct_NV2080_ALLOC_PARAMETERS()), "NV_ERR_INVALID_ARGUMENT"),
  ("device 1 on a one-GPU machine", lambda r: raw_alloc(r, r.client, r.client, 0x1234, C.NV01_DEVICE_0, C.struct_NV0080_ALLOC_PARAMETERS(deviceId=1)), "NV_ERR_INVALID_ARGUMENT"),
  ("subdevice 1", lambda r: raw_alloc(r, r.client, r.device, 0x1234, C.NV20_SUBDEVICE_0, C.struct_NV2080_ALLOC_PARAMETERS(subDeviceId=1)), "NV_ERR_INVALID_ARGUMENT"),
  ("memory of size 0", lambda r: raw_alloc(r, r.client, r.device, 0x1234, C.NV01_MEMORY_LOCAL_USER, O.NV_MEMORY_ALLOCATION_PARAMS(size=0)), "NV_ERR_INVALID_ARGUMENT"),
  ("more video memory than the board has", lambda r: raw_alloc(r, r.client, r.device, 0x1234, C.NV01_MEMORY_LOCAL_USER, O.NV_MEMORY_ALLOCATION_PARAMS(size=1 << 40)), "NV_ERR_NO_MEMORY"),
  ("usermode with parameters", lambda r: raw_alloc(r, r.client, r.subdevice, 0x1234, C.HOPPER_USERMODE_A, C.struct_NV2080_ALLOC_PARAMETERS()), "NV_ERR_INVALID_ARGUMENT"),
  ("channel group of an unknown engine", lambda r: raw_alloc(r, r.client, r.device, 0x1234, C.KEPLER_CHANNEL_GROUP_A, O.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(engineType=0x7777)), "NV_ERR_INVALID_ARGUMENT"),
  ("GPFIFO entries not a power of two", lambda r: raw_alloc(r, r.client, r.group, 0x1234, clc56f.AMPERE_CHANNEL_GPFIFO_A, channel_params(r, gpFifoEntries=48)), "NV_ERR_INVALID_ARGUMENT"),
  ("GPFIFO outside the VA space", lambda r: raw_alloc(r, r.client, r.group, 0x1234, clc56f.AMPERE_CHANNEL_GPFIFO_A, channel_params(r, gpFifoOffset=0x1000)), "NV_ERR_INVALID_ADDRESS"),
  ("GPFIFO not 8-byte aligned", lambda r: raw_alloc(r, r.client, r.group, 0x1234, clc56f.AMPERE_CHANNEL_GPFIFO_A, channel_params(r, gpFifoOffset=r.va + 4)), "NV_ERR_INVALID_ARGUMENT"),
  ("USERD offset not 512-byte aligned", lambda r: raw_alloc(r, r.client, r.group, 0x1234, clc56f.AMPERE_CHANNEL_GPFIFO_A, channel_params(r, userdOffset=100)), "NV_ERR_INVALID_OFFSET"),
  ("USERD memory that is not a memory object", lambda r: raw_alloc(r, r.client, r.group, 0x1234, clc56f.AMPERE_CHANNEL_GPFIFO_A, channel_params(r, hUserdMemory=(r.vas,))), "NV_ERR_OBJECT_NOT_FOUND"),
  ("USERD past its memory", lambda r: raw_alloc(r, r.client, r.group, 0x1234, clc56f.AMPERE_CHANNEL_GPFIFO_A, channel_params(r, userdOffset=4 * PAGE)), "NV_ERR_INVALID_OFFSET"),
  ("a copy object on a compute channel", lambda r: (raw_alloc(r, r.client, r.group, 0x1234, clc56f.AMPERE_CHANNEL_GPFIFO_A, channel_params(r)),
                                                    raw_alloc(r, r.client, 0x1234, 0x1235, clc8b5.HOPPER_DMA_COPY_A))[1], "NV_ERR_INVALID_ARGUMENT"),
  ("compute object under a channel group", lambda r: raw_alloc(r, r.client, r.group, 0x1234, clcbc0.HOPPER_COMPUTE_A), "NV_ERR_INVALID_OBJECT_PARENT"),
  ("context share without a VA space (the mock's device has no implicit one)", lambda r: share(r, hVASpace=0), "NV_ERR_INVALID_STATE"),
  ("context share in a VA space that does not exist", lambda r: share(r, hVASpace=0x4321), "NV_ERR_OBJECT_NOT_FOUND"),
  ("context share in a memory object, not a VA space", lambda r: share(r, hVASpace=r.mem), "NV_ERR_INVALID_OBJECT_HANDLE"),
  ("context share with unknown flags", lambda r: share(r, flags=4), "NV_ERR_INVALID_ARGUMENT"),
  ("context share under a device", lambda r: share(r, parent=r.device), "NV_ERR_INVALID_OBJECT_PARENT"),
  ("two SYNC context shares (VEID 0 twice)", lambda r: (share(r), share(r, handle=0x5679))[1], "NV_ERR_NO_MEMORY"),
  ("SPECIFIED context share past the 64 VEIDs", lambda r: share(r, flags=O.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_SPECIFIED, subctxId=64), "NV_ERR_NO_MEMORY"),
  ("channel naming a context share and a VA space", lambda r: (share(r), raw_alloc(r, r.client, r.group, 0x1234, clc56f.AMPERE_CHANNEL_GPFIFO_A,
                                                                                    channel_params(r, hContextShare=0x5678, hVASpace=r.vas)))[1], "NV_ERR_INVALID_ARGUMENT"),
  ("channel naming a context share that does not exist", lambda r: raw_alloc(r, r.client, r.group, 0x1234, clc56f.AMPERE_CHANNEL_GPFIFO_A,
                                                                             channel_params(r, hContextShare=0x4321)), "NV_ERR_OBJECT_NOT_FOUND"),
  ("channel naming a VA space as its context share", lambda r: raw_alloc(r, r.client, r.group, 0x1234, clc56f.AMPERE_CHANNEL_GPFIFO_A,
                                                                         channel_params(r, hContextShare=r.vas)), "NV_ERR_INVALID_OBJECT_HANDLE"),
  ("channel naming another group's context share", lambda r: (share(r, parent=r.alloc(r.device, C.KEPLER_CHANNEL_GROUP_A, O.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(
                                                                engineType=C.NV2080_ENGINE_TYPE_GRAPHICS))),
                                                              raw_alloc(r, r.client, r.group, 0x1234, clc56f.AMPERE_CHANNEL_GPFIFO_A, channel_params(r, hContextShare=0x5678)))[1],
   "NV_ERR_INVALID_OBJECT_PARENT"),
  ("a legacy channel beside one with a context share", lambda r: (share(r), raw_alloc(r, r.client, r.group, 0x1234, clc56f.AMPERE_CHANNEL_GPFIFO_A, channel_params(r, hContextShare=0x5678)),
                                                                  raw_alloc(r, r.client, r.group, 0x1236, clc56f.AMPERE_CHANNEL_GPFIFO_A, channel_params(r, userdOffset=3 * PAGE)))[2],
   "NV_ERR_INVALID_ARGUMENT"),
  ("control on an object that does not exist", lambda r: ctrl(r, 0x4321, ctrl0080.NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2, ctrl0080.NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS()), "NV_ERR_INVALID_OBJECT_HANDLE"),
  ("control with the wrong parameter size", lambda r: ctrl(r, r.device, ctrl0080.NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2, ctrl0080.NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS(), size=8), "NV_ERR_INVALID_ARGUMENT"),
  ("control with a size but no pointer", lambda r: ctrl(r, r.device, ctrl0080.NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2, ctrl0080.NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS(), ptr=0), "NV_ERR_INVALID_ARGUMENT"),
  ("control sent to the wrong class", lambda r: ctrl(r, r.subdevice, ctrl0080.NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2, ctrl0080.NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS()), "NV_ERR_NOT_SUPPORTED"),
  ("work-submit token of a channel group", lambda r: ctrl(r, r.group, F.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN, F.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS()), "NV_ERR_NOT_SUPPORTED"),
  ("scheduling channels UVM does not know", lambda r: (raw_alloc(r, r.client, r.group, 0x1234, clc56f.AMPERE_CHANNEL_GPFIFO_A, channel_params(r)),
                                                       ctrl(r, r.group, F.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, F.NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS(bEnable=1)))[1], "NV_ERR_INVALID_STATE"),
  ("FB info with an empty list", lambda r: ctrl(r, r.subdevice, X.NV2080_CTRL_CMD_FB_GET_INFO_V2, X.NV2080_CTRL_FB_GET_INFO_V2_PARAMS(fbInfoListSize=0)), "NV_ERR_INVALID_ARGUMENT"),
  ("utilisation samples with a short buffer", lambda r: ctrl(r, r.subdevice, X.NV2080_CTRL_CMD_PERF_GET_GPUMON_PERFMON_UTIL_SAMPLES_V2,
                                                             X.NV2080_CTRL_PERF_GET_GPUMON_PERFMON_UTIL_SAMPLES_V2_PARAMS(type=X.NV2080_CTRL_GPUMON_SAMPLE_TYPE_PERFMON_UTIL, bufSize=8)), "NV_ERR_INVALID_ARGUMENT"),
  ("thermal instructions past the list", lambda r: ctrl(r, r.subdevice, X.NV2080_CTRL_CMD_THERMAL_SYSTEM_EXECUTE_V2, X.NV2080_CTRL_THERMAL_SYSTEM_EXECUTE_V2_PARAMS(instructionListSize=33)), "NV_ERR_INVALID_ARGUMENT"),
  ("GR info with an empty list", lambda r: ctrl(r, r.subdevice, X.NV2080_CTRL_CMD_GR_GET_INFO_V2, X.NV2080_CTRL_GR_GET_INFO_V2_PARAMS(grInfoListSize=0)), "NV_ERR_INVALID_ARGUMENT"),
  ("GR info with an index past the list", lambda r: ctrl(r, r.subdevice, X.NV2080_CTRL_CMD_GR_GET_INFO_V2, _gr_params([X.NV2080_CTRL_GR_INFO_MAX_SIZE])),
   "NV_ERR_INVALID_ARGUMENT"),
  ("free of a handle that does not exist", lambda r: _status(lambda: r.free(0x4321)), "NV_ERR_INVALID_OBJECT_HANDLE"),
  ("DMA map into something not a VA space", lambda r: _status(lambda: r.map_dma(r.device, r.subdevice, r.mem, PAGE)), "NV_ERR_INVALID_OBJECT_HANDLE"),
  ("DMA map past the memory", lambda r: _status(lambda: r.map_dma(r.device, r.vas, r.mem, 8 * PAGE)), "NV_ERR_INVALID_LIMIT"),
  ("fixed DMA offset not page aligned", lambda r: _status(lambda: r.map_dma(r.device, r.vas, r.mem, PAGE, fixed_va=r.page + 8)), "NV_ERR_INVALID_OFFSET"),
  ("fixed DMA offset below the VA space", lambda r: _status(lambda: r.map_dma(r.device, r.vas, r.mem, PAGE, fixed_va=0x1000)), "NV_ERR_INVALID_ARGUMENT"),
  ("fixed DMA offset past the VA space", lambda r: _status(lambda: r.map_dma(r.device, r.vas, r.mem, 2 * PAGE, fixed_va=(1 << 49) - PAGE)), "NV_ERR_INVALID_ARGUMENT"),
  ("fixed DMA offset over a mapping", lambda r: _status(lambda: r.map_dma(r.device, r.vas, r.mem, PAGE, fixed_va=r.va + PAGE)), "NV_ERR_NO_MEMORY"),
  ("DMA unmap where it is not mapped", lambda r: _status(lambda: r.unmap_dma(r.device, r.vas, r.mem, r.va + PAGE)), "NV_ERR_INVALID_OFFSET"),
  ("OS descriptor not page aligned", lambda r: _status(lambda: r.alloc_os_descriptor(r.device, r.page + 8, PAGE)), "NV_ERR_INVALID_ARGUMENT"),
  ("OS descriptor of unmapped pages", lambda r: _status(lambda: r.alloc_os_descriptor(r.device, 0x1000, PAGE)), "NV_ERR_INVALID_ADDRESS"),
  ("CPU map of a memory object (only usermode is emulated)", lambda r: _status(lambda: r.map_cpu(r.device, r.mem, PAGE)), "NV_ERR_NOT_SUPPORTED"),
]


def _gr_params(indices):
  p = X.NV2080_CTRL_GR_GET_INFO_V2_PARAMS(grInfoListSize=len(indices))
  for e, i in zip(p.grInfoList, indices): e.index = i
  return p


def test_gr_info_reports_the_boards_sms():
  """NV2080_CTRL_CMD_GR_GET_INFO_V2 answers per board; the driver sizes local memory from it (bytes per TPC x TPCs)."""
  import hcq
  from hcq.drivers.mock.nv.gpu import NVBoardSpec
  from hcq.drivers.mock.nv.rm import MockRM
  from hcq.drivers.nv.device import NVDevice
  from hcq.devstring import parse_dev
  from hcq.drivers.nv.program import local_memory
  small = MockNVOS(MockRM(NVBoardSpec(tpc_count=10, sms_per_tpc=2, max_warps_per_sm=48)))
  dev = NVDevice(parse_dev("MOCKNV+NV"), os_layer=small)
  assert (dev.tpc_count, dev.sms_per_tpc, dev.max_warps_per_sm) == (10, 2, 48)
  buf, per_tpc = local_memory(dev, 100)
  assert per_tpc == 0x8000 * -(-(0xE00 * 48 * 2) // 0x8000) and buf.nbytes >= 10 * per_tpc  # 100 * 32 -> 0xe00 a warp
  assert hcq.Device("MOCKNV+NV").tpc_count * hcq.Device("MOCKNV+NV").sms_per_tpc == 132  # the H200's SMs


def _status(call) -> int:
  from hcq.autogen.nv import nvstatus as S
  try:
    call()
  except RMCallError as e:
    return e.status
  return S.NV_OK


@pytest.mark.parametrize("name,call,expected", CASES, ids=[c[0] for c in CASES])
def test_misuse_returns_the_rms_status(rm, name, call, expected):
  from hcq.autogen.nv import nvstatus as S
  assert S.NV_STATUS_NAMES[call(rm)][0] == expected


def test_case_count():
  assert len(CASES) == 57


def test_context_shares_take_veids_as_the_rm_hands_them_out(rm):
  """kctxshareInitCommon: SYNC is VEID 0, ASYNC the highest free, ASYNC_PREFER_LOWER the lowest from 1, SPECIFIED the
  one asked; freeing one gives its VEID back."""
  got = []
  for h, flags, sub in [(0x100, O.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_SYNC, 0), (0x101, O.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC, 0),
                        (0x102, O.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC_PREFER_LOWER, 0), (0x103, O.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_SPECIFIED, 7)]:
    p = O.NV_CTXSHARE_ALLOCATION_PARAMETERS(hVASpace=rm.vas, flags=flags, subctxId=sub)
    rm.alloc(rm.group, C.FERMI_CONTEXT_SHARE_A, p, handle=h)
    got.append(p.subctxId)
  assert got == [0, 63, 1, 7]
  rm.free(0x103)
  assert share(rm, handle=0x104, flags=O.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_SPECIFIED, subctxId=7) == 0


def test_the_driver_runs_its_channels_in_a_context_share():
  import hcq
  dev = hcq.Device("MOCKNV+NV")
  objs = dev.os.rm.clients[dev.rm.client].data["objects"]
  share_obj = objs[dev.context_share]
  assert share_obj.cls == C.FERMI_CONTEXT_SHARE_A and share_obj.parent.handle == dev.group and share_obj.data == {"veid": 0, "vaspace": dev.vaspace}
  assert not objs[dev.group].data["legacy"]


def test_fixed_dma_offset_maps_at_the_address_asked(rm):
  """NVOS46_FLAGS_DMA_OFFSET_FIXED: the GPU sees the memory at the caller's address (here its CPU address); an RM-picked
  mapping later steps around it."""
  va = rm.map_dma(rm.device, rm.vas, rm.mem, 4 * PAGE, fixed_va=rm.page)
  assert va == rm.page
  ctypes.memmove(rm.page, b"fixed", 5)
  assert rm.os.rm.gpu.mem.read(va, 5) == b"fixed"
  assert rm.map_dma(rm.device, rm.vas, rm.mem, 4 * PAGE) not in (va, rm.va)
  rm.unmap_dma(rm.device, rm.vas, rm.mem, va)
  assert rm.map_dma(rm.device, rm.vas, rm.mem, PAGE, fixed_va=rm.page) == rm.page  # free again after the unmap


def test_errors_name_the_call_class_and_status(rm):
  with pytest.raises(RMCallError, match=r"NV_ESC_RM_ALLOC of NV20_SUBDEVICE_0 under .* failed: NV_ERR_INVALID_ARGUMENT"):
    rm.alloc(rm.device, C.NV20_SUBDEVICE_0, C.struct_NV2080_ALLOC_PARAMETERS(subDeviceId=3))
  with pytest.raises(RMCallError, match=r"NV_ESC_RM_CONTROL NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN on .* NV_ERR_NOT_SUPPORTED"):
    rm.control(rm.device, F.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN, F.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS())


def test_escape_layer_refuses_wrong_sizes_and_nodes(rm):
  """escape.c: a parameter struct of the wrong size, or an RM escape on a GPU node, fails the ioctl itself (EINVAL)."""
  with pytest.raises(OSError) as e:
    rm.os.ioctl(rm.ctl, iowr(I.NV_ESC_RM_ALLOC, 8), (ctypes.c_uint8 * 8)())
  assert e.value.errno == 22
  with pytest.raises(HCQError, match="EINVAL"):
    rm.ioctl(rm.gpu, I.NV_ESC_RM_FREE, O.NVOS00_PARAMETERS(hRoot=rm.client, hObjectOld=rm.vas))


def test_free_frees_the_subtree(rm):
  rm.free(rm.device)
  assert _status(lambda: rm.free(rm.vas)) != 0  # gone with its parent
  rm.free(rm.client)
  with pytest.raises(RMCallError, match="NV_ERR_INVALID_CLIENT"):
    rm.alloc(rm.client, C.NV01_DEVICE_0, C.struct_NV0080_ALLOC_PARAMETERS())


def test_uvm_register_order_and_uuid(rm):
  fd = rm.os.open("/dev/nvidia-uvm", 2)
  reg = U.UVM_REGISTER_GPU_PARAMS(hClient=rm.client, rmCtrlFd=-1)
  rm.os.ioctl(fd, U.UVM_REGISTER_GPU, reg)
  assert reg.rmStatus == __import__("hcq.autogen.nv.nvstatus", fromlist=["x"]).NV_ERR_ILLEGAL_ACTION
  rm.os.ioctl(fd, U.UVM_INITIALIZE, U.UVM_INITIALIZE_PARAMS())
  rm.os.ioctl(fd, U.UVM_REGISTER_GPU, reg)  # an all-zero UUID names no GPU
  assert reg.rmStatus == __import__("hcq.autogen.nv.nvstatus", fromlist=["x"]).NV_ERR_GPU_UUID_NOT_FOUND


def test_branch_check():
  line = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {}  Release Build  (dvs-builder@U16)\n"
  assert check_branch(line.format("580.159")) == "580.159"
  with pytest.raises(HCQError, match=r"570\.86 \(branch 570\).*580"):
    check_branch(line.format("570.86"))
  with pytest.raises(HCQError, match="cannot read /proc/driver/nvidia/version"):
    check_branch(None)


def test_opening_refuses_another_branch():
  class OldDriver(MockNVOS):
    def _build_tree(self):
      super()._build_tree()
      self.files["/proc/driver/nvidia/version"] = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  575.64  Release Build\n"
  with pytest.raises(HCQError, match=r"575\.64 \(branch 575\)"):
    RMInterface(OldDriver())


def test_the_classlist_lists_the_hopper_classes(rm):
  p = rm.control(rm.device, ctrl0080.NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2, ctrl0080.NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS())
  got = set(p.classList[:p.numClasses])
  assert {clcbc0.HOPPER_COMPUTE_A, clc8b5.HOPPER_DMA_COPY_A, C.HOPPER_USERMODE_A} <= got
