"""NVIDIA programs: a kernel of a cubin (or of PTX / LLVM IR compiled to one) loaded on an NV device.

A launch's block in the kernarg ring is the QMD (QMD_LAYOUTS[arch.qmd].nbytes, 256-byte aligned) followed by constant
bank 0 as the kernel sees it: the driver's part, then the parameters at the arch's parameter base (EIATTR_PARAM_CBANK:
0x160 on sm_80-89, 0x210 on sm_90, 0x380 on sm_100/120), at the offsets the cubin declares. The queue sends the QMD's
address (SEND_PCAS_A) and schedules it; the QMD points at the bank, the code and the local memory.
"""
from __future__ import annotations
import ctypes
import operator
import re
import struct
from typing import TYPE_CHECKING, Any, Sequence

from hcq.autogen.nv import clc6c0, clc7c0, clc9c0, clcbc0, clcdc0, clcec0
from hcq.device import LAUNCH_QUEUES_KEPT
from hcq.drivers.nv.compile import compile_ptx, cuda_to_ptx, llvm_to_ptx
from hcq.drivers.nv.cubin import DRIVER_CONSTANTS, CubinError, CubinKernel, bank_number, read_cubin
from hcq.drivers.nv.launch_plan import LaunchPlan
from hcq.drivers.nv.qmd import QMD_ALIGN, QMD_LAYOUTS, RELEASE_FOUR_WORDS, RELEASE_MEMBAR_SYS, RELEASE_ONE_WORD, QMDAddress, QMDPatch, encode_qmd
from hcq.drivers.nv.relocate import apply_relocations
from hcq.errors import HCQError, ProgramArgumentError
from hcq.program import KernelArg, Program, launch_dims, pack_kernargs
from hcq.sym import Sym

if TYPE_CHECKING:
  from hcq.buffer import Buffer
  from hcq.drivers.nv.device import NVDevice
  from hcq.drivers.nv.queue import NVComputeQueue

# per-block and per-grid limits of sm_80 to sm_120 (CUDA C Programming Guide, compute capabilities 8.x-12.x)
MAX_THREADS_PER_BLOCK = 1024
MAX_BLOCK_DIMS = (1024, 1024, 64)
MAX_GRID_DIMS = ((1 << 31) - 1, 65535, 65535)
REGISTERS_PER_BLOCK = 65536
# the generic-address windows of shared and local memory (SET_SHADER_SHARED/LOCAL_MEMORY_WINDOW): in the VA space (below
# 2^49) where hcq maps nothing (its buffers lie below 17 TiB), 4 GiB apart
SHARED_WINDOW, LOCAL_WINDOW = 0xFE00_0000_0000, 0xFF00_0000_0000
# Each thread's stack starts at STACK_TOP of its 16 MiB local address space (the bank-0 word ptxas's code loads into R1),
# STACK_RESERVED bytes below the top. 0xfffdc0 is the value the CUDA driver writes there (its bank 0 read back from a
# CUDA process on an sm_120 GPU, driver 590; the same value on sm_80-90 is unconfirmed here: no GPU); the QMD's high
# local memory part covers the stack and the reserved bytes above it.
LOCAL_SPACE, STACK_RESERVED = 1 << 24, 0x240
STACK_TOP = LOCAL_SPACE - STACK_RESERVED
# the per-thread stack of a kernel whose stack ptxas cannot bound (recursion): the CUDA runtime's default
# cudaLimitStackSize, 1 KiB (CUDA Runtime API, cudaDeviceSetLimit); dev.program(code, stack_size=N) chooses another
DEFAULT_STACK_SIZE = 1024
MAX_STACK_SIZE = STACK_TOP - 16   # stack + STACK_RESERVED within SHADER_LOCAL_MEMORY_HIGH_SIZE's 24 bits, 16-byte steps
MAX_SHARED_PER_BLOCK = {"sm_80": 163 << 10, "sm_86": 99 << 10, "sm_89": 99 << 10, "sm_90": 227 << 10, "sm_100": 227 << 10, "sm_120": 99 << 10}
# PTX .param types -> argument kinds; a .u64 parameter (with or without .ptr) is a buffer's address
_PTX_KINDS = {"u8": "u8", "s8": "i8", "u16": "u16", "s16": "i16", "u32": "u32", "s32": "i32", "u64": "buffer", "s64": "i64",
              "f16": "f16", "f32": "f32", "f64": "f64", "b8": "b8", "b16": "b16", "b32": "b32", "b64": "b64"}
_ENTRY = re.compile(r"\.entry\s+([\w$.]+)\s*\(([^)]*)\)", re.S)
_PARAM = re.compile(r"\.param\s+(?:\.align\s+\d+\s+)?\.(\w+)\s+(?:\.ptr\s+(?:\.(?!align\b)\w+\s+)*(?:\.align\s+\d+\s+)?)?(?:\.align\s+\d+\s+)?([\w$]+)\s*(?:\[\s*(\d+)\s*\])?")


def ptx_param_kinds(ptx: str) -> dict[str, list[tuple[str, str]]]:
  """Each .entry's parameters as (name, kind), in declaration order, from PTX text."""
  out = {}
  for m in _ENTRY.finditer(ptx):
    params = []
    for decl in filter(None, (d.strip() for d in m.group(2).split(","))):
      p = _PARAM.match(decl)
      if p is None: raise HCQError(f"PTX entry {m.group(1)}: cannot read the parameter declaration {decl!r}")
      typ, name, count = p.groups()
      kind = _PTX_KINDS.get(typ)
      if kind is None: raise HCQError(f"PTX entry {m.group(1)}: parameter {name} has type .{typ}; valid: {', '.join('.' + t for t in _PTX_KINDS)}")
      if count is not None: kind = f"b{8 * int(count) * (int(typ[1:]) // 8)}"  # an array: bytes of that size
      params.append((name, kind))
    out[m.group(1)] = params
  return out


def to_cubin(code: Any, arch: str) -> tuple[bytes, str | None]:
  """(cubin, the PTX it came from or None) for a cubin, PTX text, CUDA C++ (a __global__ function) or LLVM IR; HCQError
  naming what `code` may be."""
  if isinstance(code, (bytes, bytearray, memoryview)) and bytes(code[:4]) == b"\x7fELF": return bytes(code), None
  text = code.decode("utf-8", "replace") if isinstance(code, (bytes, bytearray)) else code
  if isinstance(text, str):
    ptx = text if ".entry" in text and ".target" in text else cuda_to_ptx(text, arch) if "__global__" in text \
      else llvm_to_ptx(text, arch) if "define " in text else None
    if ptx is not None: return compile_ptx(ptx, arch), ptx  # compile_ptx records the code's PTX for the emulated SM
  raise HCQError(f"dev.program on NV takes a cubin (ELF bytes), PTX text (with .target and .entry), CUDA C++ (with a __global__ "
                 f"function) or LLVM IR (with a define); "
                 f"got {type(code).__name__} {str(code)[:40]!r}")


class NVProgram(Program):
  """A kernel of a cubin loaded on an NV device: its code in GPU memory, its QMD template, its argument layout."""

  def __init__(self, device: "NVDevice", code: Any, name: str | None = None, stack_size: int | None = None):
    """`stack_size`: bytes of stack per thread for a kernel that needs more than ptxas's bound, or one ptxas cannot
    bound (recursion: DEFAULT_STACK_SIZE when not given), as cudaDeviceSetLimit(cudaLimitStackSize) sets it."""
    arch = device.arch.sm
    cubin_bytes, ptx = to_cubin(code, arch)
    try:
      cubin = read_cubin(cubin_bytes)
    except CubinError as e:
      raise CubinError(f"invalid cubin: {e}") from None
    if cubin.arch != arch: raise HCQError(f"the cubin is for {cubin.arch}, the device is {device.arch.name} {arch}")
    if name is None:
      if len(cubin.kernels) != 1: raise HCQError(f"the cubin has kernels {', '.join(cubin.kernels)}: name one")
      name = next(iter(cubin.kernels))
    if name not in cubin.kernels: raise HCQError(f"no kernel {name!r} in the cubin; it has {', '.join(cubin.kernels)}")
    k: CubinKernel = cubin.kernels[name]
    self.kernel, self.layout_qmd = k, QMD_LAYOUTS[device.arch.qmd]
    self.qmd_bytes = self.layout_qmd.nbytes
    kinds = ptx_param_kinds(ptx).get(name) if ptx else None
    layout = []
    for i, p in enumerate(k.params):
      pname, kind = kinds[i] if kinds and i < len(kinds) else (f"arg{i}", f"b{8 * p.size}")
      if KernelArg(pname, 0, kind).size != p.size: raise HCQError(f"{name}: parameter {pname} is {kind} in the PTX but {p.size} bytes in the cubin")
      layout.append(KernelArg(pname, self.qmd_bytes + k.param_base + p.offset, kind))
    # the module's global variables, then the code, banks and initialisers with their relocations applied
    self.globals = {sec: device.alloc(max(size, 1), "device") for sec, (size, _) in k.globals.items()}
    places = {f".text.{name}": bytearray(k.code), **{sec: bytearray(init.ljust(size, b"\0")) for sec, (size, init) in k.globals.items()}}
    banks = {i: bytearray(d) for i, d in k.constant_banks.items()}
    places.update({r.target: banks[bank_number(r.target)] for r in k.relocations if r.target.startswith(".nv.constant")})
    apply_relocations(k, places, {sec: buf.addr for sec, buf in self.globals.items()})
    for sec, buf in self.globals.items(): device.upload(buf, bytes(places[sec]))
    code = bytes(places[f".text.{name}"])
    bank0 = bytes(banks.get(0, b""))
    self.cbank0_size = (max(len(bank0), k.param_base + k.param_size) + 15) // 16 * 16
    self.cbank0_init = bank0[:k.param_base]
    self.driver_constants = DRIVER_CONSTANTS.get(arch)
    if self.driver_constants is None: raise HCQError(f"{name}: where {arch}'s code reads the block and grid sizes in constant bank 0 is not known")
    super().__init__(device, name, layout, self.qmd_bytes + self.cbank0_size)
    self.code = device.alloc(max(len(code), 1) + 256, "device")  # the SM prefetches past the end of a program
    device.upload(self.code, code)
    self.banks = {}
    for i, data in sorted(banks.items()):
      if i == 0 or not data: continue
      if i > 7: raise HCQError(f"{name}: constant bank {i}; a QMD binds banks 0 to 7")
      buf = self.banks[i] = device.alloc(len(data), "device")
      device.upload(buf, bytes(data))
    self.max_shared = MAX_SHARED_PER_BLOCK.get(arch, 48 << 10)
    self.shared_size = k.shared_size
    if stack_size is not None:   # an int (numpy's too), not a bool or a float: the QMD field takes whole bytes
      try:
        if isinstance(stack_size, bool): raise TypeError
        stack_size = operator.index(stack_size)
      except TypeError:
        raise ProgramArgumentError(f"{name}: stack_size={stack_size!r} ({type(stack_size).__name__}); valid: an int 0..{MAX_STACK_SIZE}") from None
      if not 0 <= stack_size <= MAX_STACK_SIZE:
        raise ProgramArgumentError(f"{name}: stack_size={stack_size}; valid 0..{MAX_STACK_SIZE} (the QMD's 24-bit local size holds it and {STACK_RESERVED:#x} more)")
    stack = max(k.stack_size, stack_size if stack_size is not None else DEFAULT_STACK_SIZE if k.stack_unbounded else 0)
    self.stack_size = (stack + 15) // 16 * 16
    self.local_per_thread = self.stack_size + STACK_RESERVED if stack else 0  # the QMD's high local part
    self._patch, self._releases = launch_patch(self.layout_qmd)
    ring = device.kernargs.buf  # written through a memoryview: ctypes.memmove would release the GIL to the emulator's threads
    self._ring = memoryview((ctypes.c_uint8 * ring.nbytes).from_address(ring.host_addr)).cast("B")
    self._ring32 = self._ring.cast("I")
    self._templates: dict[tuple, bytes] = {}  # (grid, block, shared) -> block_template
    self._plans: dict[tuple, LaunchPlan] = {}  # (grid, block, shared as given; grid and block also as plain ints) -> LaunchPlan
    self.fast_launch = True  # False: every launch takes the generic path (the tests hold the two to the same bytes)

  def variable(self, name: str) -> "Buffer":
    """Module variable `name` where this program's load placed it, as a Buffer view: a .global (`__device__`) one in
    the module's global memory, a .const (`__constant__`) one in constant bank 3. copyin/copyout write and read it as
    cudaMemcpyToSymbol/FromSymbol do; launches submitted after a copyin see the new value. Each program is one load of
    its module: two programs of one cubin have their own variables."""
    v = self.kernel.variables.get(name)
    if v is None: raise HCQError(f"{self.name}: no module variable {name!r}; the module has {', '.join(sorted(self.kernel.variables)) or 'none'}")
    buf = self.globals.get(v.section) if v.section.startswith(".nv.global") else self.banks.get(bank_number(v.section))
    if buf is None: raise HCQError(f"{self.name}: module variable {name!r} is in {v.section}, which this program did not load")
    return buf.offset(v.offset, v.size)

  def check_limits(self, gs: tuple[int, int, int], ls: tuple[int, int, int], shared: int) -> None:
    """The launch limits of the arch, before anything is sent; ProgramArgumentError naming the limit."""
    threads = ls[0] * ls[1] * ls[2]
    k, name = self.kernel, self.name
    if threads > MAX_THREADS_PER_BLOCK: raise ProgramArgumentError(f"{name}: a block of {ls} = {threads} threads exceeds {MAX_THREADS_PER_BLOCK}")
    for axis, n, most in zip("xyz", ls, MAX_BLOCK_DIMS):
      if n > most: raise ProgramArgumentError(f"{name}: block {axis} = {n} exceeds {most}")
    for axis, n, most in zip("xyz", gs, MAX_GRID_DIMS):
      if n > most: raise ProgramArgumentError(f"{name}: grid {axis} = {n} blocks exceeds {most}")
    if k.reqntid and tuple(k.reqntid) != ls: raise ProgramArgumentError(f"{name}: the kernel was built for blocks of exactly {tuple(k.reqntid)} (.reqntid), got {ls}")
    if k.max_threads and threads > k.max_threads[0] * k.max_threads[1] * k.max_threads[2]:
      raise ProgramArgumentError(f"{name}: a block of {threads} threads exceeds the kernel's .maxntid {tuple(k.max_threads)}")
    regs = k.registers * ((threads + 31) // 32 * 32)
    if regs > REGISTERS_PER_BLOCK:
      raise ProgramArgumentError(f"{name}: {k.registers} registers x {threads} threads (whole warps) = {regs} exceed the {REGISTERS_PER_BLOCK} registers of an SM")
    if shared > self.max_shared:
      raise ProgramArgumentError(f"{name}: {shared} bytes of shared memory per block exceed {self.device.arch.sm}'s {self.max_shared}")

  def qmd_template(self, gs: tuple[int, int, int], ls: tuple[int, int, int], shared: int) -> bytes:
    """The QMD of a launch with constant bank 0's address left 0 (place_kernargs fills it)."""
    cbanks = {0: (0, self.cbank0_size), **{i: (b.addr, b.nbytes) for i, b in self.banks.items()}}
    q = encode_qmd(self.layout_qmd, program=self.code.addr, registers=self.kernel.registers, grid=gs, block=ls, shared=shared,
                   shared_max=self.max_shared, local_per_thread=self.local_per_thread, barriers=self.kernel.barriers, cbanks=cbanks)
    return q.to_bytes(self.qmd_bytes, "little")

  def driver_part(self, gs: tuple[int, int, int], ls: tuple[int, int, int]) -> bytes:
    """Constant bank 0 below the parameters: ptxas's initial contents with what the code reads from the driver: the block
    and grid sizes (%ntid, %nctaid), the stack's start (STACK_TOP) and the local and shared windows the queue sets
    (cvta.local/.shared). The default memory descriptor stays as ptxas left it: 0, no cache policy (what the CUDA driver
    writes there is not known; a createpolicy descriptor always sets bit 60)."""
    c, out = self.driver_constants, bytearray(self.cbank0_init.ljust(self.kernel.param_base, b"\0"))
    struct.pack_into("<3I", out, c.ntid, *ls)
    struct.pack_into("<3I", out, c.nctaid, *gs)
    struct.pack_into("<I", out, c.stack_top, STACK_TOP)
    struct.pack_into("<Q", out, c.local_window, LOCAL_WINDOW)
    if c.shared_window is not None: struct.pack_into("<Q", out, c.shared_window, SHARED_WINDOW)
    return bytes(out)

  def block_template(self, gs: tuple[int, int, int], ls: tuple[int, int, int], shared: int) -> bytes:
    """A launch block of one shape without its parameters: the QMD, the driver's part of bank 0, zeros. Made (and the
    launch limits checked) once per shape: a launch of a known shape copies it and packs only its arguments."""
    key = (gs, ls, shared)
    t = self._templates.get(key)
    if t is None:
      if shared < self.shared_size: raise ProgramArgumentError(f"{self.name}: shared={shared} is less than its {self.shared_size} bytes of static shared memory")
      self.check_limits(gs, ls, shared)
      t = self._templates[key] = (self.qmd_template(gs, ls, shared) + self.driver_part(gs, ls)).ljust(self.kernarg_size, b"\0")
    return t

  def kernargs(self, bufs: Sequence, vals: Sequence[Any], gs: tuple[int, int, int], ls: tuple[int, int, int], shared: int | None = None) -> bytearray:
    """The launch block: the QMD (bank 0's address still 0), the driver's part of bank 0, the parameters. The launch limits
    are checked here (once per shape), so a block made for a replayed queue is checked as a launch is."""
    template = self.block_template(gs, ls, self.shared_size if shared is None else shared)
    return pack_kernargs(self.name, self.layout, bufs, vals, self.kernarg_size, self.device, template)

  def place_kernargs(self, block: bytes | bytearray, timeline_value: int, signal_addr: int = 0, end_addr: int = 0) -> int:
    """Write a launch block into the kernarg ring and point its QMD at its constant bank 0; returns the QMD's address.
    With `signal_addr`, the QMD's RELEASE1 writes `timeline_value` there (64 bits) when the grid completes, and with
    `end_addr` RELEASE0 the same value and the GPU timer after it (a signal's value and timestamp)."""
    ring = self.device.kernargs
    addr = ring.reserve(len(block), timeline_value)
    at = addr - ring.buf.addr
    self._ring[at:at + len(block)] = block
    self.point_qmd(self._ring32, at >> 2, addr + self.qmd_bytes, timeline_value, signal_addr, end_addr)
    return addr

  def point_qmd(self, words, at: int, bank0_addr: int, timeline_value: int, signal_addr: int, end_addr: int) -> None:
    """OR a launch's QMD fields into a QMD encoded without them (32-bit words from word `at`: small ints, no copy):
    constant bank 0's address and the releases place_kernargs describes. A 0 leaves its field as it is."""
    self._patch.store(words, at, bank0_addr, end_addr, timeline_value if end_addr else 0, signal_addr, timeline_value if signal_addr else 0)
    for on, enables in ((end_addr, self._releases[0]), (signal_addr, self._releases[1])):
      if on:
        for i, b in enables: words[at + i] |= b

  def __call__(self, *bufs, global_size=1, local_size=1, vals=(), wait: bool = False, shared: int | None = None) -> float | None:
    """Launch over `global_size` blocks of `local_size` threads; `shared`: bytes of shared memory per block (static and
    dynamic; the kernel's static size by default). With wait=True, the GPU seconds it took."""
    if self.fast_launch and not (wait or self.device.profiling):  # the common launch: see LaunchPlan
      ints = type(global_size) is int and type(local_size) is int  # plain ints key the plan as they are (1-D launches)
      plan = self._plans.get((global_size, local_size, shared)) if ints else None
      if plan is None:
        gs, ls = launch_dims(global_size, "global_size"), launch_dims(local_size, "local_size")
        plan = self._plans.get((gs, ls, shared))
        if plan is None:
          if len(self._plans) >= 2 * LAUNCH_QUEUES_KEPT: self._plans.clear()   # bounded as the launch queues (a plan has two keys)
          plan = self._plans[(gs, ls, shared)] = LaunchPlan(self, gs, ls, self.shared_size if shared is None else shared)
        if ints: self._plans[(global_size, local_size, shared)] = plan
      return plan.launch(bufs, vals if type(vals) is tuple else tuple(vals))  # a generator or list as the generic path takes it
    gs, ls = launch_dims(global_size, "global_size"), launch_dims(local_size, "local_size")
    return self.device.launch(self, self.kernargs(bufs, tuple(vals), gs, ls, shared), gs, ls, wait)


def launch_patch(layout) -> tuple[QMDPatch, tuple[tuple, tuple]]:
  """The QMD fields a launch sets (constant bank 0's address, RELEASE0 and RELEASE1's addresses and payloads) and the
  fields that turn RELEASE0 and RELEASE1 on, as (word, bits) pairs of the QMD. RELEASE1 signals the
  timeline: one 64-bit word; RELEASE0 the end of a timed launch: four words, the payload and the timer (first, so that
  it is written before the timeline where the releases go in index order; wait=True also waits for its payload). Both
  after a system membar, so the grid's writes are visible before the host sees the signal."""
  rel = lambda what, i: layout.release(what, i)
  values = [(layout.cbank("addr_lower", 0), layout.cbank("addr_upper", 0), layout.cbank_shift)]
  for i in (0, 1): values += [(rel("addr_lower", i), rel("addr_upper", i), 0), (rel("payload_lower", i), rel("payload_upper", i), 0)]
  on = lambda i, size: {rel("enable", i): 1, rel("structure_size", i): size, rel("payload64b", i): 1, rel("membar_type", i): RELEASE_MEMBAR_SYS}
  patch = QMDPatch(layout, values, also=tuple(on(0, 0)) + tuple(on(1, 0)))
  return patch, (patch.fixed_words(**on(0, RELEASE_FOUR_WORDS)), patch.fixed_words(**on(1, RELEASE_ONE_WORD)))


def compute_class(class_id: int) -> tuple[Any, str]:
  """(generated module, method prefix) of a compute class: 0xcbc0 -> (clcbc0, "NVCBC0")."""
  for mod in (clc6c0, clc7c0, clc9c0, clcbc0, clcdc0, clcec0):
    name = mod.__name__.rsplit(".", 1)[1]
    if int(name[2:], 16) == class_id: return mod, "NV" + name[2:].upper()
  raise HCQError(f"no generated compute class module for class {class_id:#x}")


def slm_bytes_per_tpc(device: "NVDevice", per_thread: int) -> int:
  """Local memory one TPC needs for `per_thread` bytes of every thread it may hold (NVK nvk_device.c nvk_slm_area_ensure:
  a warp's share aligned to 0x200, times the warps of an SM and the SMs of a TPC, aligned to 0x8000, the alignment
  SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A/B take)."""
  per_warp = (per_thread * 32 + 0x1FF) // 0x200 * 0x200
  return (per_warp * device.max_warps_per_sm * device.sms_per_tpc + 0x7FFF) // 0x8000 * 0x8000


def local_memory(device: "NVDevice", per_thread: int):
  """The device's local memory for `per_thread` bytes a thread, for every TPC the RM reports (device.tpc_count): (buffer,
  bytes per TPC), grown (never shrunk, and the old buffer kept for queues built with it) when a program needs more.
  None when no program needs any."""
  cur = getattr(device, "_nv_local", None)
  if per_thread == 0: return cur
  per_tpc = slm_bytes_per_tpc(device, per_thread)
  if cur is None or cur[1] < per_tpc:
    buf = device.alloc(per_tpc * device.tpc_count, "device")
    device.__dict__.setdefault("_nv_local_old", []).append(cur)
    device._nv_local = cur = (buf, per_tpc)
  return cur


def exec_methods(q: "NVComputeQueue", program: NVProgram, qmd_addr: "int | Sym", wfi: bool = True) -> "NVComputeQueue":
  """The compute class methods of one launch: the local and shared memory state (what the CUDA driver sends once per
  channel; sent with each launch here, so a recovered channel or a grown local memory needs nothing else), the QMD's
  address (SEND_PCAS_A), SEND_SIGNALING_PCAS2_B to invalidate, copy and schedule it, and (`wfi`) a wait for idle.
  Without the wait for idle the channel goes on while the grid runs: what comes next must not depend on it unless the
  QMD's own release semaphores say when it is done (NVDevice's launches: the next one acquires that release)."""
  from hcq.drivers.nv.queue import COMPUTE_SUBCHANNEL
  if not isinstance(qmd_addr, Sym) and qmd_addr % QMD_ALIGN: raise HCQError(f"a QMD at {qmd_addr:#x} is not {QMD_ALIGN}-byte aligned")
  sub = COMPUTE_SUBCHANNEL
  cls, prefix = compute_class(program.device.arch.compute)
  m = lambda name: getattr(cls, f"{prefix}_{name}")
  enc = lambda name, **f: cls.register(f"{prefix}_{name}").encode(**f)
  local = local_memory(program.device, program.local_per_thread)
  if local is not None:  # as NVK's nvk_queue_state_update: the base, the bytes per TPC, MAX_SM_COUNT 0xff
    buf, per_tpc = local
    q.method(sub, m("SET_SHADER_LOCAL_MEMORY_A"), buf.addr >> 32, buf.addr & 0xFFFFFFFF)
    q.method(sub, m("SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A"), per_tpc >> 32, per_tpc & 0xFFFFFFFF, 0xFF)
  q.method(sub, m("SET_SHADER_LOCAL_MEMORY_WINDOW_A"), LOCAL_WINDOW >> 32, LOCAL_WINDOW & 0xFFFFFFFF)
  q.method(sub, m("SET_SHADER_SHARED_MEMORY_WINDOW_A"), SHARED_WINDOW >> 32, SHARED_WINDOW & 0xFFFFFFFF)
  q.method(sub, m("SEND_PCAS_A"), QMDAddress(qmd_addr) if isinstance(qmd_addr, Sym) else qmd_addr >> 8)
  q.method(sub, m("SEND_SIGNALING_PCAS2_B"), enc("SEND_SIGNALING_PCAS2_B", pcas_action=getattr(cls, f"{prefix}_SEND_SIGNALING_PCAS2_B_PCAS_ACTION_INVALIDATE_COPY_SCHEDULE")))
  # A queue of separate execs knows nothing of what each kernel reads: a wait for idle keeps them in order, as NVK's
  # pipeline barrier does between dependent dispatches (nvk_cmd_buffer.c nvk_barrier_flushes_waits: WAIT_FOR_IDLE).
  return q.method(0, program.device.arch.m("WFI"), 0) if wfi else q  # WFI's SCOPE 0: the current subcontext
