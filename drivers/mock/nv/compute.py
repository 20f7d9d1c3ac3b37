"""The emulated compute class (the board's, HOPPER_COMPUTE_A on the H200): methods, QMDs, and the SM that runs PTX.

Methods are decoded strictly: a method this model does not know stops the channel with a graphics exception (Xid 13,
nverror.h ROBUST_CHANNEL_GR_EXCEPTION, what the RM logs for an engine exception), as the copy class does with its own. SEND_SIGNALING_PCAS2_B schedules the QMD at SEND_PCAS_A's address: it is read
through the VA space (an unmapped QMD is an MMU fault, Xid 31) and decoded with the generated layout of the board's
QMD version (v4 on Hopper: Mesa NVK's nak qmd.rs picks QMDV04_00 for HOPPER_COMPUTE_A, and open-gpu-doc's
clcbc0qmd.h, the Hopper class's own QMD header, is where QMDV04_00 is defined). The hardware's checks, each
stricter where unsure:
  - the QMD's major version must be the class's (the class rejects another layout; Xid 13);
  - the code at the program address must be SASS the emulated SM knows (hcq.drivers.nv.compile.SASS_RECORDS: what ptxas
    made, by its bytes): other bytes are an illegal instruction (Xid 13), code without PTX a fault that says so;
  - the QMD's register count must cover ptxas's (fewer registers: an out-of-range register access, Xid 13), its
    barrier count the kernel's barriers, its shared memory the kernel's, and a block must fit an SM;
  - constant bank 0 must be valid, mapped, hold the parameters at ptxas's parameter base, and the block and grid sizes
    where ptxas's code reads %ntid and %nctaid (cubin.DRIVER_CONSTANTS);
  - shared memory must cover the kernel's static shared memory;
  - the stack: ptxas's code starts R1 at bank 0's stack-start word and grows it down by its stack size; that range must
    lie in the high part of the thread's 16 MiB local address space the QMD gives (SHADER_LOCAL_MEMORY_HIGH_SIZE, from
    the top down; the low part counts from 0), and the channel's local memory (SET_SHADER_LOCAL_MEMORY_*) must hold
    the low and high parts of every thread a TPC may hold, per TPC (NON_THROTTLED_A/B: bytes per TPC, a multiple of
    0x8000, as NVK's nvk_slm_area_ensure sizes it), for each of the board's TPCs from SET_SHADER_LOCAL_MEMORY_A/B;
  - bank 0's local (and, on sm_80-89, shared) window words, which cvta.local/.shared add, must be the channel's
    SET_SHADER_LOCAL/SHARED_MEMORY_WINDOW (stricter: checked whether or not the code makes generic addresses);
  - bank 0's default memory descriptor (the u64 every plain global access names, LDG desc[UR]) must be 0. It is the
    operand a PTX createpolicy result takes for ld/st .L2::cache_hint (ptxas 13 on sm_90: the hinted load names the
    createpolicy value, the plain one c[0x0][0x208]); every policy ptxas builds sets bit 60, so 0 reads as no policy.
    Unsure what the CUDA driver writes; anything else is refused as not emulated (stricter).
The kernel then runs on the emulated SM (hcq.drivers.mock.nv.sm) reading its parameters from bank 0 through the VA
space. An SM fault (MMU, misaligned, trap) stops the channel with the kernel, address and PTX line in the message.

When the grid has completed, the QMD's release semaphores RELEASE0..2 are written (clcbc0qmd.h QMDV04_00
RELEASE_SEMAPHORE<i>_ADDR/PAYLOAD and RELEASE_ENABLE(i)...), exactly as their fields say: nothing without
RELEASE_ENABLE; ONE_WORD the payload (4 bytes, 8 with PAYLOAD64B); FOUR_WORDS the payload and the global timer at +8
(the host semaphore's timestamped layout, clc56f.h SEM_EXECUTE RELEASE_TIMESTAMP: the header gives the sizes, not
the word order; unsure, so the one layout the host semaphore documents, and 16-byte alignment); a reduction
(RELEASE_REDUCTION_ENABLE) applies its op to the value there, unsigned or signed. An address outside every mapping is
an MMU fault (Xid 31); a misaligned one, TWO_WORDS without PAYLOAD64B, a trap type or another format are refused
(Xid 13; stricter where unsure). They are written in index order (the header does not say; a driver should not
rely on it).

Grids in flight: SEND_SIGNALING_PCAS2_B checks and copies the QMD when it arrives (a fault there stops the channel at
that method), but a grid completes (runs on the SM, then writes its releases) only when the channel waits for it or
has nothing else to do: a host WFI, a semaphore acquire, a membar, or the end of the GPFIFO work the doorbell
announced (gpu.py calls drain). Grids scheduled back to back without one of those between them may run at once on the
GPU, in any order; the model completes them the latest first, so a launch that reads what an earlier one writes
without a barrier between them reads stale data, as the hardware may let it (the stricter choice: a race made
visible every time rather than sometimes).
"""
from __future__ import annotations
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from hcq.asm.emu.memory import PageFault
from hcq.autogen.nv import clcbc0 as CC, clcbc0qmd, clcbc0qmd as CQ, nverror as E
from hcq.drivers.mock.nv.errors import ChannelError
from hcq.drivers.nv.cubin import DRIVER_CONSTANTS

# the board's class and QMD layout (v4: see the module docstring)
QMD_REGISTER = clcbc0qmd.register("NVCBC0_QMDV04_00")
QMD_BYTES, QMD_MAJOR = (max(m.bit_length() for _, m in QMD_REGISTER.fields.values()) + 31) // 32 * 4, 4
_PCAS2 = CC.register("NVCBC0_SEND_SIGNALING_PCAS2_B")
# methods that only set state this model keeps (the values are read at launch)
_STATE = {getattr(CC, f"NVCBC0_{n}") for n in (
  "SET_SHADER_LOCAL_MEMORY_A", "SET_SHADER_LOCAL_MEMORY_B", "SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A",
  "SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_B", "SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C", "SET_SHADER_LOCAL_MEMORY_WINDOW_A",
  "SET_SHADER_LOCAL_MEMORY_WINDOW_B", "SET_SHADER_SHARED_MEMORY_WINDOW_A", "SET_SHADER_SHARED_MEMORY_WINDOW_B", "SEND_PCAS_A")}


LOCAL_SPACE = 1 << 24  # a thread's local address space: the QMD's high local part ends at its top (unsure: 0xfffdc0 + 0x240)
PENDING = "pending"  # a channel's compute state: its grids scheduled and not yet completed, oldest first

# RELEASE_REDUCTION_OP_RED_* (clcbc0qmd.h): (value there, payload, bytes) -> new value; INC/DEC wrap at the payload as
# the PTX atom.inc/dec do (unsure: the header names them only)
_REDUCE = {
  CQ.NVCBC0_QMDV04_00_RELEASE_REDUCTION_OP_RED_ADD: lambda a, b, n: a + b,
  CQ.NVCBC0_QMDV04_00_RELEASE_REDUCTION_OP_RED_MIN: lambda a, b, n: min(a, b),
  CQ.NVCBC0_QMDV04_00_RELEASE_REDUCTION_OP_RED_MAX: lambda a, b, n: max(a, b),
  CQ.NVCBC0_QMDV04_00_RELEASE_REDUCTION_OP_RED_INC: lambda a, b, n: 0 if a % (1 << 8 * n) >= b % (1 << 8 * n) else a + 1,
  CQ.NVCBC0_QMDV04_00_RELEASE_REDUCTION_OP_RED_DEC: lambda a, b, n: b if a % (1 << 8 * n) == 0 or a % (1 << 8 * n) > b % (1 << 8 * n) else a - 1,
  CQ.NVCBC0_QMDV04_00_RELEASE_REDUCTION_OP_RED_AND: lambda a, b, n: a & b,
  CQ.NVCBC0_QMDV04_00_RELEASE_REDUCTION_OP_RED_OR: lambda a, b, n: a | b,
  CQ.NVCBC0_QMDV04_00_RELEASE_REDUCTION_OP_RED_XOR: lambda a, b, n: a ^ b,
}


@dataclass
class Launch:
  """What the compute class decoded of one QMD (kept for tests and --trace)."""
  qmd_addr: int
  fields: dict[str, int]
  entry: str
  grid: tuple[int, int, int]
  block: tuple[int, int, int]
  params_va: int


@dataclass
class ComputeClass:
  """The compute engine of one GPU; `mem` its VA space. `trace` (a callable taking a line) sees each instruction."""
  mem: object
  clock: Callable[[], int] = lambda: 0  # the GPU's global timer (ns), for releases with a timestamp
  tpc_count: int = 66                   # the board's TPCs, SMs per TPC and warps per SM (local memory is per TPC)
  sms_per_tpc: int = 2
  max_warps_per_sm: int = 64
  trace: Callable[[str], None] | None = None
  launches: deque = field(default_factory=lambda: deque(maxlen=64))  # the last launches decoded
  _modules: dict[str, object] = field(default_factory=dict)
  _lock: threading.Lock = field(default_factory=threading.Lock)

  def method(self, state: dict, method: int, data: int, where: str) -> None:
    """One compute-class method on a channel whose class state is `state` (method -> last value; PENDING -> its grids
    in flight)."""
    if method in _STATE:
      state[method] = data
      return
    if method == CC.NVCBC0_SEND_SIGNALING_PCAS2_B:
      action = _PCAS2.decode(data)["pcas_action"]
      if action not in (CC.NVCBC0_SEND_SIGNALING_PCAS2_B_PCAS_ACTION_INVALIDATE_COPY_SCHEDULE, CC.NVCBC0_SEND_SIGNALING_PCAS2_B_PCAS_ACTION_SCHEDULE):
        raise ChannelError(f"{where}: SEND_SIGNALING_PCAS2_B action {action} is not emulated (SCHEDULE, INVALIDATE_COPY_SCHEDULE are)", E.ROBUST_CHANNEL_GR_EXCEPTION)
      self.launch(state, state.get(CC.NVCBC0_SEND_PCAS_A, 0) << 8, where)
      return
    raise ChannelError(f"{where}: compute class {CC.HOPPER_COMPUTE_A:#x} method {method:#x} is not emulated", E.ROBUST_CHANNEL_GR_EXCEPTION)

  def launch(self, state: dict[int, int], qmd_addr: int, where: str) -> None:
    from hcq.drivers.nv.compile import SASS_RECORDS
    q = QMD_REGISTER.decode(int.from_bytes(self.mem.read(qmd_addr, QMD_BYTES), "little"))
    at = f"{where}: QMD at {qmd_addr:#x}"
    if q["qmd_major_version"] != QMD_MAJOR:
      raise ChannelError(f"{at}: QMD major version {q['qmd_major_version']}, the class takes {QMD_MAJOR}", E.ROBUST_CHANNEL_GR_EXCEPTION)
    program = q["program_address_upper"] << 32 | q["program_address_lower"]
    self.mem.read(program, 1)  # an unmapped program address is an MMU fault
    record = None
    for n in SASS_RECORDS.lengths():
      try:
        record = SASS_RECORDS.get(self.mem.read(program, n))
      except PageFault:  # shorter code than this length ends at the mapping's end
        continue
      if record is not None: break
    if record is None:
      raise ChannelError(f"{at}: illegal instruction at program address {program:#x}: the code there is no SASS the emulated SM knows "
                         "(it runs the PTX of code ptxas made in this process: a misplaced program address, or a cubin without PTX)",
                         E.ROBUST_CHANNEL_GR_EXCEPTION)
    if q["register_count"] < record.registers:
      raise ChannelError(f"{at}: kernel {record.entry} uses {record.registers} registers, the QMD gives {q['register_count']}: "
                         "out-of-range register access", E.ROBUST_CHANNEL_GR_EXCEPTION)
    if not q["constant_buffer_valid_0"]: raise ChannelError(f"{at}: kernel {record.entry}: constant bank 0 is not valid", E.ROBUST_CHANNEL_GR_EXCEPTION)
    cb0 = (q["constant_buffer_addr_upper_shifted6_0"] << 32 | q["constant_buffer_addr_lower_shifted6_0"]) << 6
    cb0_size = q["constant_buffer_size_shifted4_0"] << 4
    if cb0_size < record.param_base + record.param_size:
      raise ChannelError(f"{at}: kernel {record.entry}: constant bank 0 holds {cb0_size} bytes, its parameters end at "
                         f"{record.param_base + record.param_size}", E.ROBUST_CHANNEL_GR_EXCEPTION)
    self.mem.read(cb0, cb0_size)  # an unmapped bank is an MMU fault when the SM loads it
    bank = lambda i: ((q[f"constant_buffer_addr_upper_shifted6_{i}"] << 32 | q[f"constant_buffer_addr_lower_shifted6_{i}"]) << 6,
                      q[f"constant_buffer_size_shifted4_{i}"] << 4)
    for i, size in record.banks:  # the code reads c[i][...] too (.const data, globals' addresses): the QMD must bind the bank, mapped
      if not q[f"constant_buffer_valid_{i}"] or bank(i)[1] < size:
        raise ChannelError(f"{at}: kernel {record.entry} reads {size} bytes of constant bank {i}, the QMD binds "
                           f"{bank(i)[1] if q[f'constant_buffer_valid_{i}'] else 'none'}", E.ROBUST_CHANNEL_GR_EXCEPTION)
      self.mem.read(bank(i)[0], size)
    # the module's variables where the driver put them: a .global at the address its relocated bank word holds (the
    # SASS loads it from there: a word left unrelocated sends the access elsewhere), .const data in its bank
    variables = {name: int.from_bytes(self.mem.read(bank(i)[0] + off, 8), "little") - addend for name, i, off, addend in record.global_slots}
    variables.update({name: off for name, i, off in record.const_variables})   # a .const address is its offset in the bank
    const_bank = bank(record.const_variables[0][1]) if record.const_variables else None
    grid = (q["grid_width"], q["grid_height"], q["grid_depth"])
    block = (q["cta_thread_dimension0"], q["cta_thread_dimension1"], q["cta_thread_dimension2"])
    if 0 in grid or 0 in block: raise ChannelError(f"{at}: kernel {record.entry}: empty grid {grid} or block {block}", E.ROBUST_CHANNEL_GR_EXCEPTION)
    threads = block[0] * block[1] * block[2]
    if threads > 1024 or q["register_count"] * ((threads + 31) // 32 * 32) > 65536:  # an SM's 1024 threads and 64K registers
      raise ChannelError(f"{at}: kernel {record.entry}: a block of {threads} threads with {q['register_count']} registers each does not "
                         "fit an SM (1024 threads, 65536 registers)", E.ROBUST_CHANNEL_GR_EXCEPTION)
    shared = q["shared_memory_size"]
    if shared < record.shared_size:  # the block's shared memory must hold the kernel's (with sm_90's reserved 1 KiB)
      raise ChannelError(f"{at}: kernel {record.entry} needs {record.shared_size} bytes of shared memory, the QMD gives {shared}",
                         E.ROBUST_CHANNEL_GR_EXCEPTION)
    if q["barrier_count"] < record.barriers:  # a bar.sync on a barrier the launch did not allocate traps (stricter: unsure)
      raise ChannelError(f"{at}: kernel {record.entry} uses {record.barriers} barriers, the QMD allocates {q['barrier_count']}",
                         E.ROBUST_CHANNEL_GR_EXCEPTION)
    dims = DRIVER_CONSTANTS[record.arch]
    word = lambda off, n=4: int.from_bytes(self.mem.read(cb0 + off, n), "little")
    in_bank = lambda off: tuple(word(off + 4 * i) for i in range(3))
    if in_bank(dims.ntid) != block or in_bank(dims.nctaid) != grid:  # the SASS reads %ntid/%nctaid there, not from the QMD
      raise ChannelError(f"{at}: kernel {record.entry}: constant bank 0 holds block {in_bank(dims.ntid)} and grid {in_bank(dims.nctaid)} at "
                         f"{dims.ntid:#x}/{dims.nctaid:#x}, the QMD launches {block} x {grid}: the code would compute wrong indices "
                         "(stricter: the SM emulates the PTX, whose %ntid is the QMD's)", E.ROBUST_CHANNEL_GR_EXCEPTION)
    for what, off, method in (("local", dims.local_window, CC.NVCBC0_SET_SHADER_LOCAL_MEMORY_WINDOW_A),
                              ("shared", dims.shared_window, CC.NVCBC0_SET_SHADER_SHARED_MEMORY_WINDOW_A)):
      window = state.get(method, 0) << 32 | state.get(method + 4, 0)
      if off is not None and word(off, 8) != window:  # cvta.local/.shared add this word: a generic access would miss the window
        raise ChannelError(f"{at}: kernel {record.entry}: constant bank 0 holds {word(off, 8):#x} at {off:#x}, the channel's {what} window "
                           f"is {window:#x}: generic {what} addresses would be wrong (stricter: checked for every kernel)", E.ROBUST_CHANNEL_GR_EXCEPTION)
    if (desc := word(dims.memory_descriptor, 8)) != 0:  # every plain global access names it (LDG desc[UR], c[0x0][0x208] on sm_90)
      raise ChannelError(f"{at}: kernel {record.entry}: constant bank 0 holds {desc:#x} at {dims.memory_descriptor:#x}, the default memory "
                         "descriptor of every global access: only 0 (no cache policy) is emulated", E.ROBUST_CHANNEL_GR_EXCEPTION)
    low, high = q["shader_local_memory_low_size"], q["shader_local_memory_high_size"]
    local = 0  # bytes of stack each thread has below the stack's start
    if record.stack_size or high:  # R1 starts at bank 0's stack_top word; the stack [top - size, top) must lie in the QMD's high part
      top = word(dims.stack_top)
      local = top - (LOCAL_SPACE - high)
      if top > LOCAL_SPACE or top % 16 or local < record.stack_size:
        raise ChannelError(f"{at}: kernel {record.entry}: its {record.stack_size}-byte stack below {top:#x} (bank 0 at {dims.stack_top:#x}) is not "
                           f"inside the QMD's high local memory [{LOCAL_SPACE - high:#x}, {LOCAL_SPACE:#x}): an out-of-range local access",
                           E.ROBUST_CHANNEL_GR_EXCEPTION)
    if low or high:
      base = state.get(CC.NVCBC0_SET_SHADER_LOCAL_MEMORY_A, 0) << 32 | state.get(CC.NVCBC0_SET_SHADER_LOCAL_MEMORY_B, 0)
      per_tpc = state.get(CC.NVCBC0_SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A, 0) << 32 | state.get(CC.NVCBC0_SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_B, 0)
      need = (low + high) * 32 * self.max_warps_per_sm * self.sms_per_tpc  # every thread a TPC may hold
      if per_tpc % 0x8000 or per_tpc < need:
        raise ChannelError(f"{at}: kernel {record.entry}: {low + high} bytes of local memory per thread need {need:#x} bytes per TPC "
                           f"({self.sms_per_tpc} SMs of {self.max_warps_per_sm} warps), SET_SHADER_LOCAL_MEMORY_NON_THROTTLED gives "
                           f"{per_tpc:#x} (a multiple of 0x8000)", E.ROBUST_CHANNEL_GR_EXCEPTION)
      self.mem.read(base, 1)  # the local memory of the first and the last TPC must be mapped: an MMU fault where not
      self.mem.read(base + per_tpc * self.tpc_count - 1, 1)
    params_va = cb0 + record.param_base
    self.launches.append(Launch(qmd_addr, q, record.entry, grid, block, params_va))
    state.setdefault(PENDING, []).append((record, grid, block, params_va, shared, local, at, q, variables, const_bank))

  def drain(self, state: dict) -> None:
    """Complete the channel's grids in flight (see the module docstring): the latest first, each then its releases."""
    pending = state.get(PENDING)
    while pending:
      record, grid, block, params_va, shared, local, at, q, variables, const_bank = pending.pop()
      self._run(record, grid, block, params_va, shared, local, at, variables, const_bank)
      for i in range(3):
        if q[f"release_enable_{i}"]: self._release(q, i, at)

  def _release(self, q: dict[str, int], i: int, at: str) -> None:
    """Release semaphore `i` of a completed grid (see the module docstring)."""
    g = lambda name: q[name.format(i=i)]
    addr = g("release_semaphore{i}_addr_upper") << 32 | g("release_semaphore{i}_addr_lower")
    wide, size, op = g("release_payload64b_{i}"), g("release_structure_size_{i}"), g("release_reduction_op_{i}")
    nbytes = 8 if wide else 4
    if size == CQ.NVCBC0_QMDV04_00_RELEASE_STRUCTURE_SIZE_SEMAPHORE_TWO_WORDS and not wide:
      raise ChannelError(f"{at}: RELEASE{i} has a two-word structure with a 32-bit payload (not emulated)", E.ROBUST_CHANNEL_GR_EXCEPTION)
    align = 16 if size == CQ.NVCBC0_QMDV04_00_RELEASE_STRUCTURE_SIZE_SEMAPHORE_FOUR_WORDS else nbytes
    if addr % align: raise ChannelError(f"{at}: RELEASE{i} at {addr:#x} is not {align}-byte aligned", E.ROBUST_CHANNEL_GR_EXCEPTION)
    if g("release_trap_type_{i}"): raise ChannelError(f"{at}: RELEASE{i} trap type {g('release_trap_type_{i}')} is not emulated", E.ROBUST_CHANNEL_GR_EXCEPTION)
    payload = (g("release_semaphore{i}_payload_upper") << 32 if wide else 0) | g("release_semaphore{i}_payload_lower")
    if g("release_reduction_enable_{i}"):
      fmt = g("release_reduction_format_{i}")
      if fmt not in (CQ.NVCBC0_QMDV04_00_RELEASE_REDUCTION_FORMAT_SIGNED, CQ.NVCBC0_QMDV04_00_RELEASE_REDUCTION_FORMAT_UNSIGNED):
        raise ChannelError(f"{at}: RELEASE{i} reduction format {fmt} is not emulated (UNSIGNED, SIGNED are)", E.ROBUST_CHANNEL_GR_EXCEPTION)
      signed = fmt == CQ.NVCBC0_QMDV04_00_RELEASE_REDUCTION_FORMAT_SIGNED
      old = int.from_bytes(self.mem.read(addr, nbytes), "little", signed=signed)
      payload = _REDUCE[op](old, int.from_bytes(payload.to_bytes(nbytes, "little"), "little", signed=signed), nbytes) % (1 << 8 * nbytes)
    if align == 16: self.mem.write(addr + 8, self.clock().to_bytes(8, "little"))
    self.mem.write(addr, payload.to_bytes(nbytes, "little"))

  def _run(self, record, grid, block, params_va, shared, local, at, variables, const_bank) -> None:
    from hcq.drivers.mock.nv.sm import PTXError, PTXModule, SMFault
    with self._lock:
      mod = self._modules.get(record.ptx)
      try:
        if mod is None: mod = self._modules[record.ptx] = PTXModule.parse(record.ptx, f"<{record.entry}.ptx>")
      except PTXError as e:   # ptxas took it, the emulated SM cannot run it: a channel error, not a dead engine thread
        raise ChannelError(f"{at}: kernel {record.entry}: the emulated SM cannot run this code's PTX: {e}", E.ROBUST_CHANNEL_GR_EXCEPTION) from None
    try:
      mod.launch(record.entry, mem=self.mem, grid=grid, block=block, params_va=params_va, shared_bytes=shared,
                 local_bytes_per_thread=local, trace=self.trace, variables=variables, const_bank=const_bank)
    except SMFault as e:
      mmu = getattr(e, "kind", "") == "mmu"
      raise ChannelError(f"{at}: kernel {record.entry}: {e}", E.ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT if mmu else E.ROBUST_CHANNEL_GR_EXCEPTION) from None
