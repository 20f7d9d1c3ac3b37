"""QMDs: the compute class's launch descriptor, per arch, filled from the generated field tables (hcq.autogen.nv).

One arch row names its QMD version (NVArch.qmd): v3 (QMDV03_00, 256 bytes) on Ampere and Ada, v4 (QMDV04_00, 384
bytes) on Hopper and v5 (QMDV05_00, 384 bytes) on Blackwell. Two sources settle Hopper's: Mesa NVK picks the QMD by
compute class (nak qmd.rs nak_fill_qmd: HOPPER_COMPUTE_A and later take Qmd4_0, BLACKWELL_COMPUTE_A Qmd5_0), and
NVIDIA's own QMD header of the Hopper class (open-gpu-doc classes/compute/clcbc0qmd.h) is where QMDV04_00 is defined,
as NVCBC0_QMDV04_00, next to the older NVCBC0_QMDV03_00 (Ampere's clc6c0qmd.h has only V03_00, Blackwell's
clcdc0qmd.h only V05_00). So Hopper takes v3 and v4 and v4 is its own; which one the CUDA driver sends on Hopper
was not observed (no Hopper GPU was at hand). Bit positions come only from the generated Registers; what differs
between versions here is the names of the fields and their units (SHIFTED4/6/7).

Release semaphores: a QMD carries up to three (RELEASE0..2), written by the compute engine when the grid has
completed: an address, a payload (32 or 64 bits), a structure size (ONE_WORD: the payload; FOUR_WORDS: the payload
and the global timer after it, the 16-byte layout of a host semaphore release with RELEASE_TIMESTAMP, which is
hcq.signal's), an optional reduction and a membar (FE_SYSMEMBAR: the grid's writes are visible to the system before
the release).
"""
from __future__ import annotations
from dataclasses import dataclass
from types import ModuleType

from hcq.autogen.nv import clc6c0qmd, clcbc0qmd, clcdc0qmd
from hcq.autogen.support import Register
from hcq.errors import HCQError
from hcq.sym import Sym


@dataclass(frozen=True)
class QMDLayout:
  """One QMD version: its generated Register, size, and the names and units of the fields a launch fills."""
  version: int
  module: ModuleType
  register_name: str
  minor_field: str
  grid_fields: tuple[str, str, str]
  registers_field: str
  program_fields: tuple[str, str]
  program_shift: int
  shared_field: str
  shared_shift: int
  local_fields: tuple[str, str]
  local_shift: int
  cbank_fields: str   # format string over the bank index: "{}_{i}" completes addr_lower/addr_upper
  cbank_shift: int
  release_names: dict[str, str]  # release semaphore field -> its name in this version, a format string over {i}
  fixed: tuple[tuple[str, int], ...] = ()

  @property
  def register(self) -> Register:
    return self.module.register(self.register_name)

  @property
  def nbytes(self) -> int:
    """The QMD's size: its generated fields' extent, in whole 32-bit words (256 bytes for v3, 384 for v4 and v5)."""
    return (max(mask.bit_length() for _, mask in self.register.fields.values()) + 31) // 32 * 4

  def cbank(self, part: str, i: int) -> str:
    return self.cbank_fields.format(part=part, i=i)

  def release(self, what: str, i: int) -> str:
    """The name of release semaphore `i`'s field `what` (addr_lower, payload_upper, enable, structure_size...)."""
    return self.release_names[what].format(i=i)


_RELEASE_PARTS = ("enable", "structure_size", "membar_type", "reduction_enable", "reduction_op", "reduction_format", "payload64b")
# v3 (clc6c0qmd.h) spells them RELEASE0_ADDRESS_LOWER, RELEASE0_ENABLE...; v4 and v5 RELEASE_SEMAPHORE0_ADDR_LOWER, RELEASE_ENABLE(0)...
_RELEASE_V3 = {**{f"{k}_{p}": f"release{{i}}_{'address' if k == 'addr' else k}_{p}" for k in ("addr", "payload") for p in ("lower", "upper")},
               **{p: f"release{{i}}_{p}" for p in _RELEASE_PARTS}}
_RELEASE_V4 = {**{f"{k}_{p}": f"release_semaphore{{i}}_{k}_{p}" for k in ("addr", "payload") for p in ("lower", "upper")},
               **{p: f"release_{p}_{{i}}" for p in _RELEASE_PARTS}}
# the encodings every version shares (clc6c0qmd.h, clcbc0qmd.h, clcdc0qmd.h: *_STRUCTURE_SIZE_SEMAPHORE_*, *_MEMBAR_TYPE_FE_*)
RELEASE_FOUR_WORDS, RELEASE_ONE_WORD = 0, 1
RELEASE_MEMBAR_SYS = 1


QMD_LAYOUTS = {
  3: QMDLayout(3, clc6c0qmd, "NVC6C0_QMDV03_00", "qmd_version", ("cta_raster_width", "cta_raster_height", "cta_raster_depth"),
               "register_count_v", ("program_address_lower", "program_address_upper"), 0, "shared_memory_size", 0,
               ("shader_local_memory_low_size", "shader_local_memory_high_size"), 0, "constant_buffer_{part}_{i}", 0,
               _RELEASE_V3, (("sm_global_caching_enable", 1),)),
  4: QMDLayout(4, clcbc0qmd, "NVCBC0_QMDV04_00", "qmd_minor_version", ("grid_width", "grid_height", "grid_depth"),
               "register_count", ("program_address_lower", "program_address_upper"), 0, "shared_memory_size", 0,
               ("shader_local_memory_low_size", "shader_local_memory_high_size"), 0, "constant_buffer_{part}_shifted6_{i}", 6, _RELEASE_V4),
  5: QMDLayout(5, clcdc0qmd, "NVCDC0_QMDV05_00", "qmd_minor_version", ("grid_width", "grid_height", "grid_depth"),
               "register_count", ("program_address_lower_shifted4", "program_address_upper_shifted4"), 4, "shared_memory_size_shifted7", 7,
               ("shader_local_memory_low_size_shifted4", "shader_local_memory_high_size_shifted4"), 4, "constant_buffer_{part}_shifted6_{i}", 6,
               _RELEASE_V4, (("qmd_type", 2), ("qmd_group_id", 0x1F))),  # NVK's Qmd5_0::new: a grid QMD in group 0x1f
}
QMD_ALIGN = 256  # SEND_PCAS_A and SET_INLINE_QMD_ADDRESS take the QMD's address shifted right by 8


def sm_config_shared(nbytes: int) -> int:
  """The SM's shared-memory carve-out for a block using `nbytes`, in the QMD's *_SM_CONFIG_SHARED_MEM_SIZE encoding
  (4 KiB units plus one; the steps 8/16/32/64/96 KiB of Volta and later, as NVK's gv100_sm_config_smem_size encodes them;
  the larger carve-outs of Ampere and Hopper (up to 228 KiB) continue in the same units)."""
  for step in (8, 16, 32, 64, 100, 132, 164, 196, 228):
    if nbytes <= step << 10: return (step << 10) // 4096 + 1
  raise HCQError(f"{nbytes} bytes of shared memory exceed the largest carve-out (228 KiB)")


def _split(value: int, shift: int, what: str) -> tuple[int, int]:
  if value & ((1 << shift) - 1): raise HCQError(f"{what} {value:#x} is not a multiple of {1 << shift} (the QMD holds it shifted by {shift})")
  v = value >> shift
  return v & 0xFFFFFFFF, v >> 32


def encode_qmd(layout: QMDLayout, *, program: int, registers: int, grid: tuple[int, int, int], block: tuple[int, int, int],
               shared: int, shared_max: int, local_per_thread: int, barriers: int, cbanks: dict[int, tuple[int, int]]) -> int:
  """The QMD as one integer of layout.nbytes * 8 bits. `cbanks`: bank -> (address, size); addresses may be 0 here and
  filled per launch with cbank_address_bits. `local_per_thread`: the high part of each thread's local memory (see
  below). Values that do not fit a field raise (Register.encode)."""
  f = dict(layout.fixed)
  f.update(qmd_major_version=layout.version, api_visible_call_limit=1, sampler_index=0)  # NO_CHECK, INDEPENDENTLY
  f[layout.minor_field] = 0
  for name, v in zip(layout.grid_fields, grid): f[name] = v
  f.update(cta_thread_dimension0=block[0], cta_thread_dimension1=block[1], cta_thread_dimension2=block[2], barrier_count=barriers)
  f[layout.registers_field] = registers
  f[layout.program_fields[0]], f[layout.program_fields[1]] = _split(program, layout.program_shift, "program address")
  shared = (shared + 255) // 256 * 256
  f[layout.shared_field] = shared >> layout.shared_shift
  f.update(min_sm_config_shared_mem_size=sm_config_shared(shared), target_sm_config_shared_mem_size=sm_config_shared(shared),
           max_sm_config_shared_mem_size=sm_config_shared(max(shared, shared_max)))
  # a thread's local address space has a low part from 0 up and a high part from its top (2^24) down; ptxas's code keeps
  # everything on its stack, which starts near the top (STACK_TOP in program.py): all of it is the high part
  local = (local_per_thread + 15) // 16 * 16
  f[layout.local_fields[0]], f[layout.local_fields[1]] = 0, local >> layout.local_shift
  for i, (addr, size) in cbanks.items():
    f[f"constant_buffer_valid_{i}"] = 1
    f[f"constant_buffer_invalidate_{i}"] = 1  # the kernarg ring reuses its slots: never read a bank from a stale constant cache
    f[f"constant_buffer_size_shifted4_{i}"] = (size + 15) // 16
    if addr: f[layout.cbank("addr_lower", i)], f[layout.cbank("addr_upper", i)] = _split(addr, layout.cbank_shift, f"constant bank {i} address")
  return layout.register.encode(**f)


class QMDPatch:
  """QMD fields a launch sets in a QMD encoded with them 0. Each value is a (lower, upper) field pair (an address, a
  64-bit payload; upper may be None) holding it shifted right by `shift`; a value that is misaligned or does not fit
  raises, naming the field. `store(words, at, *values)` ORs them into the QMD's 32-bit words (no field of a QMD crosses
  a word), `bits(*values)` gives them as one integer counted from byte `start` (bytes [start, end) cover them).
  `also` names further fields the range must cover, set with `fixed`/`fixed_words` (the release enables)."""

  def __init__(self, layout: QMDLayout, values: list[tuple[str, str | None, int]], also: tuple[str, ...] = ()):
    fields, self.layout = layout.register.fields, layout
    used = [fields[n] for lo, hi, _ in values for n in (lo, hi) if n] + [fields[n] for n in also]
    self.start, self.end = min(s for s, _ in used) // 8, (max(m.bit_length() for _, m in used) + 7) // 8
    self._parts, self._words = [], []
    for lo, hi, shift in values:
      (ls, lm), (hs, hm) = fields[lo], fields[hi] if hi else (0, 0)
      lo_bits, hi_bits = (lm >> ls).bit_length(), (hm >> hs).bit_length()
      if ls % 32 + lo_bits > 32 or hs % 32 + hi_bits > 32: raise ValueError(f"QMD field {lo} or {hi} crosses a 32-bit word")
      limit = (1 << lo_bits + hi_bits) - 1
      self._parts.append((lo, shift, ls - 8 * self.start, (1 << lo_bits) - 1, lo_bits, hs - 8 * self.start, limit))
      self._words.append((lo, shift, limit, ls // 32, ls % 32, (1 << lo_bits) - 1, lo_bits, hs // 32 if hi else None, hs % 32))

  def _check(self, name: str, shift: int, limit: int, v: int) -> int:
    w = v >> shift
    if w << shift != v or w > limit or v < 0:
      raise HCQError(f"QMD field {name}: {v:#x} " + (f"is not a multiple of {1 << shift} (the QMD holds it shifted by {shift})"
                                                    if w << shift != v else f"does not fit its {limit.bit_length() + shift} bits"))
    return w

  def bits(self, *values: int) -> int:
    out = 0
    for v, (name, shift, lo_at, lo_mask, lo_bits, hi_at, limit) in zip(values, self._parts):
      w = self._check(name, shift, limit, v)
      out |= (w & lo_mask) << lo_at | (w >> lo_bits) << hi_at
    return out

  def store(self, words, at: int, *values: int) -> None:
    """OR the values into `words` (32-bit words, a memoryview cast to "I"), the QMD starting at word `at`."""
    for v, (name, shift, limit, lo_word, lo_at, lo_mask, lo_bits, hi_word, hi_at) in zip(values, self._words):
      if not v: continue
      w = v >> shift
      if w << shift != v or w > limit: self._check(name, shift, limit, v)  # raises, saying why
      words[at + lo_word] |= (w & lo_mask) << lo_at
      if hi_word is not None: words[at + hi_word] |= (w >> lo_bits) << hi_at

  def qwords(self, qmd: bytes) -> list[tuple[int, int, int, int]]:
    """Each value as (byte offset in the QMD, the 64 bits of `qmd` there, shift, limit) when its lower field is a whole
    word and its upper field starts the next word (every address and payload of v3-v5): a launch ORs the value in with
    one 64-bit store. ValueError if a value is laid out otherwise."""
    out = []
    for name, shift, limit, lo_word, lo_at, lo_mask, lo_bits, hi_word, hi_at in self._words:
      if lo_at or lo_bits != 32 or hi_word != lo_word + 1 or hi_at: raise ValueError(f"QMD field {name} and its upper half are not one 64-bit word")
      out.append((4 * lo_word, int.from_bytes(qmd[4 * lo_word:4 * lo_word + 8], "little"), shift, limit))
    return out

  def check(self, i: int, v: int) -> None:
    """Raise, naming the field, if value `i` is misaligned or does not fit."""
    name, shift, limit = self._words[i][:3]
    self._check(name, shift, limit, v)

  def fixed(self, **fields: int) -> int:
    """Fields that lie in the range, as bits counted from byte `start` (Register.encode checks each value)."""
    return self.layout.register.encode(**fields) >> 8 * self.start

  def fixed_words(self, **fields: int) -> tuple[tuple[int, int], ...]:
    """The same as (word index in the QMD, bits) pairs, to OR into the words a launch stores."""
    v = self.layout.register.encode(**fields)
    return tuple((i, (v >> 32 * i) & 0xFFFFFFFF) for i in range((v.bit_length() + 31) // 32) if (v >> 32 * i) & 0xFFFFFFFF)


def cbank_address_bits(layout: QMDLayout, bank: int, addr: int) -> int:
  """Constant bank `bank`'s address fields alone, to OR into a QMD encoded with address 0."""
  p = QMDPatch(layout, [(layout.cbank("addr_lower", bank), layout.cbank("addr_upper", bank), layout.cbank_shift)])
  return p.bits(addr) << 8 * p.start


@dataclass(frozen=True, eq=False)
class QMDAddress(Sym):
  """A QMD's address as SEND_PCAS_A takes it (shifted right by 8), of a symbolic address; refuses a misaligned one."""
  base: Sym

  def eval(self, var_vals: dict[str, int]) -> int:
    addr = self.base.eval(var_vals)
    if addr % QMD_ALIGN: raise ValueError(f"a QMD at {addr:#x} is not {QMD_ALIGN}-byte aligned (SEND_PCAS_A takes the address >> 8)")
    return addr >> 8
