"""Hostile code objects: seeded mutations of real ones (clang-19 + ld.lld ET_DYN and ET_REL, llvmlite ET_REL, hcq.asm's own
writer) through the ELF, kernel-descriptor and metadata readers, and random bytes through the msgpack reader. Whatever
the bytes, the only exception is CodeObjectError (MsgpackError for the msgpack reader), within a time and memory bound.

The normal run tries a few hundred mutations; HCQ_FUZZ_CASES=N runs N (and HCQ_FUZZ_SEED=S another seed)."""
from __future__ import annotations
import ctypes
import os
import random
import struct
import time
import tracemalloc

import pytest


from hcq.asm.codeobject import MAX_ZERO_FILL, CodeObjectError, read_code_object
from hcq.asm.msgpack import MsgpackError, pack, unpack
from hcq.autogen import amdgpu_elf as E
from hcq.errors import HCQError
from tests.test_codeobject import KERNELS  # the reader's own two test kernels
from tests.tools import compile_opencl, require_module

CASES = int(os.environ.get("HCQ_FUZZ_CASES", "300"))
SEED = int(os.environ.get("HCQ_FUZZ_SEED", "14"))
SECONDS_PER_CASE = 2.0  # CPU seconds of this thread (time.thread_time): a busy machine's waits do not count; a case is ~1 ms

IR = """target triple = "amdgcn-amd-amdhsa"
define amdgpu_kernel void @scale(ptr addrspace(1) %p, float %k) {
  %i = call i32 @llvm.amdgcn.workitem.id.x()
  %q = getelementptr float, ptr addrspace(1) %p, i32 %i
  %v = load float, ptr addrspace(1) %q
  %r = fmul float %v, %k
  store float %r, ptr addrspace(1) %q
  ret void
}
declare i32 @llvm.amdgcn.workitem.id.x()
"""


@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> dict[str, bytes]:
  """Real code objects of every kind the loader takes."""
  from hcq.asm.kernel import Kernel
  d = tmp_path_factory.mktemp("co")
  out = {"clang ET_DYN": compile_opencl(KERNELS, d), "clang ET_REL": (d / "k.o").read_bytes()}
  llvm = require_module("llvmlite.binding")
  for init in ("initialize_all_targets", "initialize_all_asmprinters"):
    if hasattr(llvm, init): getattr(llvm, init)()
  tm = llvm.Target.from_triple("amdgcn-amd-amdhsa").create_target_machine(cpu="gfx1100", opt=2)
  out["llvmlite ET_REL"] = tm.emit_object(llvm.parse_assembly(IR))
  out["hcq.asm ET_DYN"] = Kernel("k", "gfx1100", args=[("p", "buffer"), ("n", "u32")]).add("s_endpgm").to_elf()
  for name, data in out.items(): read_code_object(data)  # every seed loads as it is
  return out


def _fields(cls, base: int) -> list[tuple[int, int]]:
  return [(base + getattr(cls, name).offset, getattr(cls, name).size) for name, _ in cls._fields_ if name != "e_ident"]


def targets(data: bytes) -> list[tuple[int, int]]:
  """(offset, size) of every header field, section/program header field, note header word, symbol and relocation field."""
  eh = E.struct_Elf64_Ehdr.from_buffer_copy(data)
  out = _fields(E.struct_Elf64_Ehdr, 0)
  out += [f for i in range(eh.e_phnum) for f in _fields(E.struct_Elf64_Phdr, eh.e_phoff + i * eh.e_phentsize)]
  for i in range(eh.e_shnum):
    at = eh.e_shoff + i * eh.e_shentsize
    out += _fields(E.struct_Elf64_Shdr, at)
    sh = E.struct_Elf64_Shdr.from_buffer_copy(data, at)
    if sh.sh_type == E.SHT_NOTE: out += [(sh.sh_offset + 4 * w, 4) for w in range(3)]
    entry = {E.SHT_SYMTAB: E.struct_Elf64_Sym, E.SHT_DYNSYM: E.struct_Elf64_Sym, E.SHT_RELA: E.struct_Elf64_Rela}.get(sh.sh_type)
    if entry: out += [f for k in range(sh.sh_size // ctypes.sizeof(entry)) for f in _fields(entry, sh.sh_offset + k * ctypes.sizeof(entry))]
  return out


def metadata_span(data: bytes) -> tuple[int, int]:
  """(start, end) of the msgpack metadata in the file."""
  eh = E.struct_Elf64_Ehdr.from_buffer_copy(data)
  for i in range(eh.e_shnum):
    sh = E.struct_Elf64_Shdr.from_buffer_copy(data, eh.e_shoff + i * eh.e_shentsize)
    if sh.sh_type == E.SHT_NOTE:
      pos = sh.sh_offset
      while pos + 12 <= sh.sh_offset + sh.sh_size:
        namesz, descsz, ntype = struct.unpack_from("<III", data, pos)
        desc = pos + 12 + (namesz + 3) // 4 * 4
        if ntype == E.NT_AMDGPU_METADATA: return desc, desc + descsz
        pos = desc + (descsz + 3) // 4 * 4
  raise AssertionError("seed without a metadata note")


def interesting(size: int, rng: random.Random, file_size: int) -> int:
  mask = (1 << (8 * size)) - 1
  return rng.choice([0, 1, 2, 3, 7, 0x40, 0x1000, 1 << 30, 1 << 31, 1 << 63, file_size - 1, file_size, file_size + 1, mask, mask >> 1,
                     rng.getrandbits(8 * size)]) & mask


MSGPACK_HEADS = bytes([0xc0, 0xc1, 0xc3, 0xc4, 0xc6, 0xca, 0xcb, 0xcf, 0xd3, 0xd9, 0xdb, 0xdc, 0xdd, 0xde, 0xdf, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xff])


def mutate(data: bytes, rng: random.Random, fields: list[tuple[int, int]], meta: tuple[int, int]) -> tuple[str, bytes]:
  """One mutation of `data`: (what was done, the bytes)."""
  b = bytearray(data)
  kind = rng.choice(["flip", "set", "truncate", "field", "field", "field", "metadata", "metadata", "many"])
  if kind == "flip":
    i = rng.randrange(len(b))
    b[i] ^= 1 << rng.randrange(8)
    return f"flip bit at {i:#x}", bytes(b)
  if kind == "set":
    i = rng.randrange(len(b))
    b[i] = rng.choice([0, 0xff, 0x7f, 0x80, rng.randrange(256)])
    return f"set byte {i:#x}", bytes(b)
  if kind == "truncate":
    n = rng.randrange(len(b))
    return f"truncate to {n}", bytes(b[:n])
  if kind == "field":
    off, size = rng.choice(fields)
    v = interesting(size, rng, len(b))
    b[off:off + size] = v.to_bytes(size, "little")
    return f"field at {off:#x} ({size} bytes) = {v:#x}", bytes(b)
  if kind == "metadata":
    lo, hi = meta
    i = rng.randrange(lo, hi)
    b[i] = rng.choice([*MSGPACK_HEADS, b[i] ^ (1 << rng.randrange(8))])
    return f"metadata byte {i:#x}", bytes(b)
  for _ in range(rng.randrange(2, 9)):
    i = rng.randrange(len(b))
    b[i] = rng.randrange(256)
  return "random bytes", bytes(b)


def load_bounded(data: bytes, what: str) -> bool:
  """read_code_object on hostile bytes: CodeObjectError or a code object whose every kernel and relocation is usable,
  in bounded time and memory. True when refused."""
  tracemalloc.start()
  t0 = time.thread_time()
  try:
    co = read_code_object(data)
    co.image_at(0x7fff_0000_0000)
    for k in co.kernels.values():
      assert 0 <= k.code_offset < len(co.image) and k.code_offset + k.code_size <= len(co.image)
      (k.kernarg_size, k.wavefront_size, [(a.offset, a.size) for a in k.args])
    refused = False
  except CodeObjectError as e:
    assert str(e) and "\n" not in str(e), what
    refused = True
  except Exception as e:  # noqa: BLE001 - the point: nothing else may escape
    raise AssertionError(f"{what}: {type(e).__name__}: {e}") from e
  finally:
    elapsed = time.thread_time() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
  assert elapsed < SECONDS_PER_CASE, f"{what}: {elapsed:.2f}s"
  assert peak < 4 * (MAX_ZERO_FILL + len(data)) + (8 << 20), f"{what}: {peak >> 20} MiB"
  return refused


def test_mutated_code_objects_raise_only_code_object_error(seeds):
  rng = random.Random(SEED)
  prepared = {name: (data, targets(data), metadata_span(data)) for name, data in seeds.items()}
  rejected = 0
  for case in range(CASES):
    name = rng.choice(sorted(prepared))
    data, fields, meta = prepared[name]
    what, bad = mutate(data, rng, fields, meta)
    rejected += load_bounded(bad, f"case {case} (seed {SEED}): {name}, {what}")
  assert rejected > CASES // 5  # the mutations reach the checks, not only bytes nobody reads


@pytest.mark.parametrize("meta", [{".symbol": 7}, {".symbol": ["k.kd"]}, {".args": 3}, {".args": [5]}, {".args": [{".offset": 0}]},
                                  {".args": [{".offset": "0", ".size": 8, ".value_kind": "global_buffer"}]},
                                  {".args": [{".offset": -8, ".size": 8, ".value_kind": "global_buffer"}]},
                                  {".args": [{".offset": 0, ".size": 8, ".value_kind": 1}]}, {".kernarg_segment_size": "big"},
                                  {".wavefront_size": 48}, {".wavefront_size": True},
                                  {".kernarg_segment_size": 8, ".args": [{".offset": 8, ".size": 8, ".value_kind": "by_value"}]}])
def test_metadata_of_the_wrong_shape_is_named(meta):
  """Metadata that msgpack reads but whose fields have the wrong type: the error names the kernel entry and key."""
  from hcq.asm.elf_writer import KernelImage, kernel_descriptor, write_code_object
  co = write_code_object("gfx1100", [KernelImage("k", b"\x00\x00\x81\xbf", kernel_descriptor(vgprs=1), meta)])
  with pytest.raises(CodeObjectError, match=r"amdhsa\.kernels\[0\]"):
    read_code_object(co)


def _set_field(data: bytes, offset: int, cls_field, value: int) -> bytes:
  b = bytearray(data)
  b[offset + cls_field.offset:offset + cls_field.offset + cls_field.size] = value.to_bytes(cls_field.size, "little")
  return bytes(b)


def _sections(data: bytes) -> list[tuple[int, object]]:
  eh = E.struct_Elf64_Ehdr.from_buffer_copy(data)
  return [(eh.e_shoff + i * 64, E.struct_Elf64_Shdr.from_buffer_copy(data, eh.e_shoff + i * 64)) for i in range(eh.e_shnum)]


def test_huge_alignment_is_refused_at_once(seeds):
  """An ET_REL section claiming 1 GiB alignment (once 8 s and 3 GB): refused in milliseconds, naming the section."""
  data = seeds["llvmlite ET_REL"]
  at, i = next((at, i) for i, (at, sh) in enumerate(_sections(data)) if sh.sh_flags & E.SHF_ALLOC and sh.sh_type == E.SHT_PROGBITS)
  t0 = time.thread_time()
  with pytest.raises(CodeObjectError, match=f"section {i}: alignment 0x40000000"):
    read_code_object(_set_field(data, at, E.struct_Elf64_Shdr.sh_addralign, 1 << 30))
  assert time.thread_time() - t0 < 0.5  # CPU seconds: a busy machine's waits do not count


def test_zero_fill_is_bounded(seeds):
  """A NOBITS-like claim of memory the file does not hold (here a PT_LOAD's p_memsz of 1 TiB) is refused by size."""
  data = seeds["clang ET_DYN"]
  eh = E.struct_Elf64_Ehdr.from_buffer_copy(data)
  load = next(at for at in range(eh.e_phoff, eh.e_phoff + eh.e_phnum * 56, 56) if E.struct_Elf64_Phdr.from_buffer_copy(data, at).p_type == E.PT_LOAD)
  with pytest.raises(CodeObjectError, match="MiB of zero-filled memory"):
    read_code_object(_set_field(data, load, E.struct_Elf64_Phdr.p_memsz, 1 << 40))


@pytest.mark.parametrize("data,match", [(b"\x7fELF", "shorter than an ELF64 header"), (b"", "not an ELF file"), (b"\x7fELF" + bytes(60), "not a 64-bit")])
def test_stubs_are_refused(data, match):
  with pytest.raises(CodeObjectError, match=match): read_code_object(data)


def test_device_program_refuses_bad_code_objects(seeds):
  """dev.program on the emulated GPU: the loader's error as CodeObjectError (an HCQError), never a stray exception."""
  import hcq
  dev = hcq.Device("MOCKKFD+AMD")
  with pytest.raises(hcq.CodeObjectError, match="invalid code object: ELF file of 4 bytes"):
    dev.program(b"\x7fELF")
  rng = random.Random(SEED + 1)
  data = seeds["clang ET_DYN"]
  fields, meta = targets(data), metadata_span(data)
  for case in range(40):
    what, bad = mutate(data, rng, fields, meta)
    try:
      dev.program(bad, "add")
    except HCQError:
      pass
    except Exception as e:  # noqa: BLE001
      raise AssertionError(f"case {case}: {what}: {type(e).__name__}: {e}") from e


def test_device_program_takes_hostile_descriptors():
  """Kernel descriptors with random bytes (sizes, entry offset, rsrc registers, properties): loading one on the emulated
  GPU raises an HCQError or gives a program, never another exception."""
  import hcq
  from hcq.asm.elf_writer import KernelImage, kernel_descriptor, write_code_object
  from hcq.autogen import amdgpu_kd as kd
  dev, rng = hcq.Device("MOCKKFD+AMD"), random.Random(SEED + 2)
  for case in range(max(CASES // 5, 20)):
    raw = bytearray(bytes(kernel_descriptor(vgprs=1)))
    for _ in range(rng.randrange(1, 4)): raw[rng.randrange(64)] = rng.choice([0, 0xff, rng.randrange(256)])
    co = write_code_object("gfx1100", [KernelImage("k", b"\x00\x00\x81\xbf" * 4, kd.struct_kernel_descriptor_t.from_buffer_copy(raw))])
    t0 = time.thread_time()
    try:
      dev.program(co)
    except HCQError:
      pass
    except Exception as e:  # noqa: BLE001
      raise AssertionError(f"case {case}: descriptor {raw.hex()}: {type(e).__name__}: {e}") from e
    assert time.thread_time() - t0 < SECONDS_PER_CASE, f"case {case}: descriptor {raw.hex()}"


def test_device_program_bounds_the_kernarg_segment():
  """A kernarg segment past the driver's kernarg ring is refused when loaded, not with a MemoryError at launch."""
  import hcq
  from hcq.asm.elf_writer import KernelImage, kernel_descriptor, write_code_object
  co = write_code_object("gfx1100", [KernelImage("k", b"\x00\x00\x81\xbf", kernel_descriptor(vgprs=1), {".kernarg_segment_size": 1 << 40})])
  with pytest.raises(hcq.CodeObjectError, match="1099511627776 bytes of kernel arguments"):
    hcq.Device("MOCKKFD+AMD").program(co)


def random_msgpack(rng: random.Random, depth: int = 0):
  choice = rng.randrange(9 if depth < 3 else 6)
  if choice == 0: return rng.choice([None, True, False])
  if choice == 1: return rng.randrange(-2**63, 2**64)
  if choice == 2: return rng.random() * 10 ** rng.randrange(-5, 30)
  if choice == 3: return "".join(chr(rng.randrange(32, 0x3000)) for _ in range(rng.randrange(40)))
  if choice == 4: return bytes(rng.randrange(256) for _ in range(rng.randrange(300)))
  if choice == 5: return rng.randrange(-32, 128)
  if choice in (6, 7): return [random_msgpack(rng, depth + 1) for _ in range(rng.randrange(18))]
  return {f"k{i}": random_msgpack(rng, depth + 1) for i in range(rng.randrange(18))}


def test_msgpack_round_trip_and_mutations():
  """Random documents round-trip; their mutations and random bytes raise only MsgpackError (an HCQError)."""
  rng = random.Random(SEED)
  for case in range(CASES):
    doc = random_msgpack(rng)
    raw = pack(doc)
    assert unpack(raw) == doc or doc != doc  # NaN never equals itself
    b = bytearray(raw)
    for _ in range(rng.randrange(1, 4)):
      i = rng.randrange(len(b))
      b[i] = rng.choice([*MSGPACK_HEADS, rng.randrange(256)])
    for bad in (bytes(b), bytes(b[:rng.randrange(len(b))]), bytes(rng.randrange(256) for _ in range(rng.randrange(64)))):
      try:
        unpack(bad)
      except MsgpackError as e:
        assert isinstance(e, HCQError) and "byte" in str(e), f"case {case}: {bad.hex()}: {e}"
      except Exception as e:  # noqa: BLE001
        raise AssertionError(f"case {case}: {bad.hex()}: {type(e).__name__}: {e}") from e


@pytest.mark.parametrize("raw,match", [(b"\x91" * 5000, "deeper than 64"), (b"\xdd\xff\xff\xff\xff", "4294967295 items claimed"),
                                       (b"\xa2\xff\xfe", "not UTF-8"), (b"\x81\x90\x01", "map key at byte 1 is an array"),
                                       (b"\xd4\x00\x00", "0xd4 at byte 0")])
def test_msgpack_named_errors(raw, match):
  with pytest.raises(MsgpackError, match=match): unpack(raw)
