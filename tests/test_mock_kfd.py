"""The mock /dev/kfd answers misuse as Linux 6.1's amdkfd does: same errno, checks in the kernel's order."""
from __future__ import annotations
import ctypes
import errno
import os

import pytest

from hcq.autogen import kfd as K
from hcq.drivers import libc
from hcq.drivers.mock.amdgpu.gpu import BoardSpec
from hcq.drivers.mock.kfd import DOORBELL_SLICE, ENOTSUPP, MMAP_GPU_ID_SHIFT, MMAP_TYPE_DOORBELL, MMAP_TYPE_SHIFT, MockKFD, cwsr_sizes
from hcq.drivers.mock.os import MockKFDOS

GTT = K.KFD_IOC_ALLOC_MEM_FLAGS_GTT | K.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE
VRAM = K.KFD_IOC_ALLOC_MEM_FLAGS_VRAM | K.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE


class Process:
  """A user of the mock kernel: its OS object, open fds and a helper to call ioctls by name."""

  def __init__(self, acquire: bool = True, kernel: str = "6.1", boards: tuple[BoardSpec, ...] = (BoardSpec(),)):
    self.os = MockKFDOS(MockKFD(boards, kernel=kernel))
    self.gpu_id = next(iter(self.os.kfd.nodes))
    self.kfd = self.os.open("/dev/kfd", os.O_RDWR)
    self.drm = self.os.open("/dev/dri/renderD128", os.O_RDWR)
    if acquire: self.call("ACQUIRE_VM", "acquire_vm", drm_fd=self.drm, gpu_id=self.gpu_id)
    self.va = libc.mmap(0, 1 << 30, libc.PROT_NONE, libc.MAP_PRIVATE | libc.MAP_ANONYMOUS | libc.MAP_NORESERVE, -1, 0)

  def call(self, name: str, struct: str, **fields):
    args = getattr(K, f"struct_kfd_ioctl_{struct}_args")(**fields)
    self.os.ioctl(self.kfd, getattr(K, f"AMDKFD_IOC_{name}"), args)
    return args

  def errno_of(self, name: str, struct: str, **fields) -> int:
    with pytest.raises(OSError) as e:
      self.call(name, struct, **fields)
    return e.value.errno

  def alloc(self, size: int, flags: int = GTT, va: int | None = None):
    return self.call("ALLOC_MEMORY_OF_GPU", "alloc_memory_of_gpu", va_addr=self.va if va is None else va, size=size, gpu_id=self.gpu_id, flags=flags)

  def map(self, handle: int, *gpu_ids: int):
    ids = (ctypes.c_uint32 * len(gpu_ids))(*gpu_ids)
    return self.call("MAP_MEMORY_TO_GPU", "map_memory_to_gpu", handle=handle, device_ids_array_ptr=ctypes.addressof(ids), n_devices=len(gpu_ids))


@pytest.fixture
def p():
  return Process()


def test_dispatcher(p):
  v = p.call("GET_VERSION", "get_version")
  assert (v.major_version, v.minor_version) == (1, 11)
  with pytest.raises(OSError) as e:
    p.os.ioctl(p.kfd, (K.AMDKFD_IOC_GET_VERSION & ~0xff) | 0x30, K.struct_kfd_ioctl_get_version_args())
  assert e.value.errno == errno.ENOTTY
  with pytest.raises(OSError) as e:
    p.os.ioctl(p.drm, K.AMDKFD_IOC_GET_VERSION, K.struct_kfd_ioctl_get_version_args())
  assert e.value.errno == errno.ENOTTY  # the render node is not /dev/kfd


def test_acquire_vm():
  q = Process(acquire=False)
  assert q.errno_of("ALLOC_MEMORY_OF_GPU", "alloc_memory_of_gpu", va_addr=q.va, size=4096, gpu_id=q.gpu_id, flags=GTT) == errno.ENODEV
  assert q.errno_of("CREATE_QUEUE", "create_queue", gpu_id=q.gpu_id, queue_type=K.KFD_IOC_QUEUE_TYPE_SDMA, ring_size=4096) == errno.ESRCH
  assert q.errno_of("ACQUIRE_VM", "acquire_vm", drm_fd=12345, gpu_id=q.gpu_id) == errno.EINVAL  # not a render node fd
  assert q.errno_of("ACQUIRE_VM", "acquire_vm", drm_fd=q.drm, gpu_id=0) == errno.EINVAL
  q.call("ACQUIRE_VM", "acquire_vm", drm_fd=q.drm, gpu_id=q.gpu_id)
  q.call("ACQUIRE_VM", "acquire_vm", drm_fd=q.drm, gpu_id=q.gpu_id)  # the same file again: fine
  other = q.os.open("/dev/dri/renderD128", os.O_RDWR)
  assert q.errno_of("ACQUIRE_VM", "acquire_vm", drm_fd=other, gpu_id=q.gpu_id) == errno.EBUSY


def test_alloc_checks(p):
  assert p.errno_of("ALLOC_MEMORY_OF_GPU", "alloc_memory_of_gpu", va_addr=p.va, size=0, gpu_id=p.gpu_id, flags=GTT) == errno.EINVAL
  assert p.errno_of("ALLOC_MEMORY_OF_GPU", "alloc_memory_of_gpu", va_addr=p.va, size=4096, gpu_id=0x1234, flags=GTT) == errno.EINVAL
  assert p.errno_of("ALLOC_MEMORY_OF_GPU", "alloc_memory_of_gpu", va_addr=p.va, size=4096, gpu_id=p.gpu_id,
                    flags=K.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE) == errno.EINVAL  # no domain
  assert p.errno_of("ALLOC_MEMORY_OF_GPU", "alloc_memory_of_gpu", va_addr=p.va, size=4096, gpu_id=p.gpu_id,
                    flags=K.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR) == errno.EINVAL  # USERPTR without an address
  assert p.errno_of("ALLOC_MEMORY_OF_GPU", "alloc_memory_of_gpu", va_addr=p.va, size=4096, gpu_id=p.gpu_id,
                    flags=K.KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL) == errno.EINVAL  # doorbell BO must be the process slice
  assert p.errno_of("ALLOC_MEMORY_OF_GPU", "alloc_memory_of_gpu", va_addr=p.va, size=48 << 30, gpu_id=p.gpu_id, flags=VRAM) == errno.ENOMEM
  a = p.alloc(1000)  # not page-aligned: rounded up, as the kernel does
  assert a.handle >> 32 == p.gpu_id and a.handle & 0xffffffff == 0
  assert p.alloc(4096).handle & 0xffffffff == 1  # IDR handles count up per device


def test_map_unmap_free_checks(p):
  a = p.alloc(8192)
  ids = (ctypes.c_uint32 * 1)(p.gpu_id)
  assert p.errno_of("MAP_MEMORY_TO_GPU", "map_memory_to_gpu", handle=a.handle, device_ids_array_ptr=ctypes.addressof(ids), n_devices=0) == errno.EINVAL
  assert p.errno_of("MAP_MEMORY_TO_GPU", "map_memory_to_gpu", handle=a.handle, device_ids_array_ptr=ctypes.addressof(ids), n_devices=1,
                    n_success=2) == errno.EINVAL
  assert p.errno_of("MAP_MEMORY_TO_GPU", "map_memory_to_gpu", handle=(p.gpu_id << 32) | 77, device_ids_array_ptr=ctypes.addressof(ids),
                    n_devices=1) == errno.ENOMEM  # unknown handle: ENOMEM, as amdkfd says it
  assert p.errno_of("MAP_MEMORY_TO_GPU", "map_memory_to_gpu", handle=a.handle, device_ids_array_ptr=8, n_devices=1) == errno.EFAULT
  assert p.errno_of("UNMAP_MEMORY_FROM_GPU", "unmap_memory_from_gpu", handle=a.handle, device_ids_array_ptr=ctypes.addressof(ids),
                    n_devices=1) == errno.EINVAL  # not mapped
  assert p.map(a.handle, p.gpu_id).n_success == 1
  assert p.map(a.handle, p.gpu_id).n_success == 1  # mapping again is not an error
  b = p.alloc(4096, va=p.va + 4096)  # overlaps a's pages: the overlap shows at map time
  with pytest.raises(OSError) as e:
    p.map(b.handle, p.gpu_id)
  assert e.value.errno == errno.EINVAL
  c = p.alloc(4096, va=p.va + (1 << 20) + 12)  # unaligned VA
  with pytest.raises(OSError) as e:
    p.map(c.handle, p.gpu_id)
  assert e.value.errno == errno.EINVAL
  d = p.alloc(4096, va=0x2000)  # the kernel's CWSR page
  with pytest.raises(OSError) as e:
    p.map(d.handle, p.gpu_id)
  assert e.value.errno == errno.EINVAL
  assert p.errno_of("FREE_MEMORY_OF_GPU", "free_memory_of_gpu", handle=a.handle) == errno.EBUSY  # still mapped
  assert p.errno_of("FREE_MEMORY_OF_GPU", "free_memory_of_gpu", handle=(p.gpu_id << 32) | 999) == errno.EINVAL
  p.call("UNMAP_MEMORY_FROM_GPU", "unmap_memory_from_gpu", handle=a.handle, device_ids_array_ptr=ctypes.addressof(ids), n_devices=1)
  p.call("FREE_MEMORY_OF_GPU", "free_memory_of_gpu", handle=a.handle)


def test_a_map_batch_reports_how_many_devices_it_did(p):
  """MAP/UNMAP walk device_ids_array[n_success:n_devices], raising n_success past each device done; a failure leaves it
  at the devices done, and a retry from there with n_success == n_devices has nothing left and succeeds
  (kfd_chardev.c kfd_ioctl_map_memory_to_gpu / kfd_ioctl_unmap_memory_from_gpu, Linux 6.1; ROCr retries this way)."""
  a = p.alloc(4096)
  bogus = p.gpu_id ^ 0xdead

  def batch(name: str, struct: str, ids: tuple[int, ...], n_success: int = 0):
    arr = (ctypes.c_uint32 * len(ids))(*ids)
    args = getattr(K, f"struct_kfd_ioctl_{struct}_args")(handle=a.handle, device_ids_array_ptr=ctypes.addressof(arr), n_devices=len(ids), n_success=n_success)
    try:
      p.os.ioctl(p.kfd, getattr(K, f"AMDKFD_IOC_{name}"), args)
      return 0, args.n_success
    except OSError as e:
      return e.errno, args.n_success

  m, u = ("MAP_MEMORY_TO_GPU", "map_memory_to_gpu"), ("UNMAP_MEMORY_FROM_GPU", "unmap_memory_from_gpu")
  assert batch(*m, (p.gpu_id, bogus, p.gpu_id)) == (errno.EINVAL, 1)  # the first device mapped, the second unknown
  assert p.errno_of("FREE_MEMORY_OF_GPU", "free_memory_of_gpu", handle=a.handle) == errno.EBUSY  # the first mapping stands
  assert batch(*m, (p.gpu_id, bogus, p.gpu_id), n_success=2) == (0, 3)  # a retry skips the devices done
  assert batch(*m, (p.gpu_id, p.gpu_id), n_success=2) == (0, 2)  # all done already: nothing to do, no error
  assert batch(*m, (p.gpu_id,), n_success=2) == (errno.EINVAL, 2)
  assert batch(*u, (p.gpu_id, bogus)) == (errno.EINVAL, 1)
  assert batch(*u, (p.gpu_id,), n_success=1) == (0, 1)
  p.call("FREE_MEMORY_OF_GPU", "free_memory_of_gpu", handle=a.handle)  # unmapped by the first device of the failed batch


def test_create_queue_checks(p):
  wptr = p.alloc(4096, va=p.va + (8 << 20))
  p.map(wptr.handle, p.gpu_id)
  big = p.alloc(8192, va=p.va + (9 << 20))
  p.map(big.handle, p.gpu_id)
  base = dict(gpu_id=p.gpu_id, queue_type=K.KFD_IOC_QUEUE_TYPE_SDMA, ring_size=4096, ring_base_address=p.va + (16 << 20),
              read_pointer_address=p.va + (8 << 20), write_pointer_address=p.va + (8 << 20) + 8, queue_percentage=100)
  for change, code in [({"queue_percentage": 101}, errno.EINVAL), ({"queue_priority": 16}, errno.EINVAL),
                       ({"ring_base_address": 1 << 47}, errno.EFAULT), ({"ring_size": 3000}, errno.EINVAL),
                       ({"read_pointer_address": 1 << 47}, errno.EFAULT), ({"write_pointer_address": 1 << 47}, errno.EFAULT),
                       ({"queue_type": 9}, ENOTSUPP), ({"gpu_id": 5}, errno.EINVAL),
                       ({"write_pointer_address": p.va + (10 << 20)}, errno.EINVAL),  # wptr not in a mapped BO (MES)
                       ({"write_pointer_address": p.va + (9 << 20)}, errno.EINVAL)]:  # wptr BO larger than a page
    assert p.errno_of("CREATE_QUEUE", "create_queue", **{**base, **change}) == code, change
  q = p.call("CREATE_QUEUE", "create_queue", **{**base, "ring_size": 512})
  assert q.ring_size == 1024  # raised to the minimum and written back
  assert q.doorbell_offset >> MMAP_TYPE_SHIFT == MMAP_TYPE_DOORBELL and (q.doorbell_offset >> MMAP_GPU_ID_SHIFT) & 0xffff == p.gpu_id
  with pytest.raises(OSError) as e:
    p.os.mmap(0, 4096, libc.PROT_READ | libc.PROT_WRITE, libc.MAP_SHARED, p.kfd, q.doorbell_offset & ~(DOORBELL_SLICE - 1))
  assert e.value.errno == errno.EINVAL  # the doorbell mmap must be the whole process slice
  p.call("DESTROY_QUEUE", "destroy_queue", queue_id=q.queue_id)
  assert p.errno_of("DESTROY_QUEUE", "destroy_queue", queue_id=q.queue_id) == errno.EINVAL


def test_events(p):
  page = p.alloc(4096 * 8, va=p.va + (32 << 20))
  small = p.alloc(4096, va=p.va + (40 << 20))
  assert p.errno_of("CREATE_EVENT", "create_event", event_type=K.KFD_IOC_EVENT_SIGNAL, event_page_offset=small.handle) == errno.EINVAL
  e1 = p.call("CREATE_EVENT", "create_event", event_type=K.KFD_IOC_EVENT_SIGNAL, auto_reset=1, event_page_offset=page.handle)
  assert e1.event_id == 1  # id 0 is reserved
  assert p.errno_of("CREATE_EVENT", "create_event", event_type=K.KFD_IOC_EVENT_SIGNAL, event_page_offset=page.handle) == errno.EINVAL
  assert p.errno_of("FREE_MEMORY_OF_GPU", "free_memory_of_gpu", handle=page.handle) == errno.EPERM
  data = (K.struct_kfd_event_data * 1)()
  data[0].event_id = e1.event_id
  w = p.call("WAIT_EVENTS", "wait_events", events_ptr=ctypes.addressof(data), num_events=1, timeout=10)
  assert w.wait_result == K.KFD_IOC_WAIT_RESULT_TIMEOUT  # a timeout is not an error
  p.call("SET_EVENT", "set_event", event_id=e1.event_id)
  assert p.call("WAIT_EVENTS", "wait_events", events_ptr=ctypes.addressof(data), num_events=1, timeout=10).wait_result == K.KFD_IOC_WAIT_RESULT_COMPLETE
  assert p.call("WAIT_EVENTS", "wait_events", events_ptr=ctypes.addressof(data), num_events=1, timeout=0).wait_result == K.KFD_IOC_WAIT_RESULT_TIMEOUT  # auto-reset
  hw = p.call("CREATE_EVENT", "create_event", event_type=K.KFD_IOC_EVENT_HW_EXCEPTION)
  assert hw.event_id >= 0x40000000
  assert p.errno_of("SET_EVENT", "set_event", event_id=hw.event_id) == errno.EINVAL  # only signal events
  assert p.errno_of("SET_EVENT", "set_event", event_id=4000) == errno.EINVAL
  data[0].event_id = 4000
  assert p.errno_of("WAIT_EVENTS", "wait_events", events_ptr=ctypes.addressof(data), num_events=1, timeout=0) == errno.EINVAL


def test_render_node_mmap_needs_the_acquiring_file(p):
  a = p.alloc(4096)
  other = p.os.open("/dev/dri/renderD128", os.O_RDWR)
  with pytest.raises(OSError) as e:
    p.os.mmap(0, 4096, libc.PROT_READ | libc.PROT_WRITE, libc.MAP_SHARED, other, a.mmap_offset)
  assert e.value.errno == errno.EACCES
  addr = p.os.mmap(0, 4096, libc.PROT_READ | libc.PROT_WRITE, libc.MAP_SHARED, p.drm, a.mmap_offset)
  ctypes.c_uint32.from_address(addr).value = 0xabcd
  node = p.os.kfd.nodes[p.gpu_id]
  assert int(node.bos[a.handle].host[:4].view("<u4")[0]) == 0xabcd  # the GPU's view is the same memory


@pytest.mark.parametrize("kernel", ["6.1", "6.12", "mainline"])
def test_create_queue_buffer_rules_by_kernel_version(kernel):
  """6.12's kfd_queue_acquire_buffers: each queue buffer a GPU mapping of exactly its size, EOP and control stack sizes
  the node's, the CWSR size exactly the node's (mainline: at least) and its buffer that plus the debugger area. 6.1: none."""
  p = Process(kernel=kernel)
  sizes = cwsr_sizes(next(iter(p.os.kfd.nodes.values())).board)
  assert (sizes.cwsr, sizes.ctl_stack, sizes.debug) == (0x2bea000, 0xa000, 0x18000)  # gfx1100, 96 CUs (as kfd_queue.c computes)
  page = lambda n: (n + 4095) // 4096 * 4096

  def mapped(off: int, size: int) -> int:
    p.map(p.alloc(size, va=p.va + off).handle, p.gpu_id)
    return p.va + off
  ptrs, ring, eop = mapped(0, 4096), mapped(1 << 20, 8192), mapped(2 << 20, 4096)
  cwsr, big = mapped(4 << 20, page(sizes.cwsr + sizes.debug)), mapped(256 << 20, page(sizes.cwsr + 4096 + sizes.debug))
  good = dict(gpu_id=p.gpu_id, queue_type=K.KFD_IOC_QUEUE_TYPE_COMPUTE, ring_base_address=ring, ring_size=8192, queue_percentage=100,
              read_pointer_address=ptrs, write_pointer_address=ptrs + 8, eop_buffer_address=eop, eop_buffer_size=4096,
              ctx_save_restore_address=cwsr, ctx_save_restore_size=sizes.cwsr, ctl_stack_size=sizes.ctl_stack)
  bad = [{"ring_size": 4096},                                    # the ring's mapping is 8 KiB
         {"ring_base_address": ring + 4096},                     # not where a mapping starts
         {"eop_buffer_size": 8192},                              # the node's EOP buffer is 4 KiB
         {"ctl_stack_size": sizes.ctl_stack + 4096},
         {"ctx_save_restore_size": sizes.cwsr - 4096},           # too small: refused by 6.12 and mainline
         {"ctx_save_restore_address": cwsr, "ctx_save_restore_size": sizes.cwsr + 4096},  # its buffer lacks the extra page
         {"ctx_save_restore_address": big}]                      # a buffer larger than size + debugger area
  def created(args: dict) -> bool:
    try:
      q = p.call("CREATE_QUEUE", "create_queue", **args)
    except OSError as e:
      assert e.errno == errno.EINVAL, e
      return False
    p.call("DESTROY_QUEUE", "destroy_queue", queue_id=q.queue_id)
    return True
  for change in bad:
    assert created({**good, **change}) == (kernel == "6.1"), change  # 6.1 has none of these rules
  larger = {"ctx_save_restore_address": big, "ctx_save_restore_size": sizes.cwsr + 4096}  # over-allocation: mainline takes it
  assert created({**good, **larger}) == (kernel != "6.12")
  assert created(good)
