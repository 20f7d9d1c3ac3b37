"""hcq.autogen.am register modules against the header text they came from, and the Register API.

The judge is a regex over linux-source's .h files, independent of the libclang path that generated the
modules. Tests that need linux-source (or libclang, for the generator tests) skip locally and fail in CI.
"""
from __future__ import annotations
import importlib
import importlib.util
import random
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

from hcq.autogen.generator.clangtools import GeneratorError
from hcq.autogen.generator.registers import BLOCKS, KNOWN_DEFECTS
from hcq.autogen.support import Register
from tests.tools import require

_DEFINE = re.compile(r"^#define[ \t]+(\w+)[ \t]+(0[xX][0-9a-fA-F]+|\d+)[uUlL]*[ \t]*$", re.M)
_BLOCK_NAMES = [b[0] for b in BLOCKS]


def header(relpath: str, package: str) -> Path:
  """A linux-source header, or stop the test (skip locally, fail in CI) when its linux-source package is not installed."""
  from hcq.autogen.generator.sources import linux_source
  try:
    return linux_source(relpath, package)
  except GeneratorError as e:
    require(False, f"{package} ({e})")


def defines(path: Path) -> dict[str, int]:
  """Every `#define NAME <integer literal>` of a header, by regex."""
  return {name: int(value, 0) if not re.fullmatch(r"0\d+", value) else int(value, 8) for name, value in _DEFINE.findall(path.read_text())}


_cache: dict[str, tuple[dict[str, int], dict[str, int]]] = {}


def block(name: str) -> tuple[types.ModuleType, dict[str, int], dict[str, int]]:
  """(module, offset.h defines, sh_mask.h defines) of a register block."""
  if name not in _cache:
    _, offset_rel, sh_mask_rel, package = next(b for b in BLOCKS if b[0] == name)
    _cache[name] = defines(header(offset_rel, package)), defines(header(sh_mask_rel, package))
  return importlib.import_module(f"hcq.autogen.am.{name}"), *_cache[name]


def prefix_split(name: str) -> tuple[str, str]:
  m = re.match(r"([a-z]+)(.*)", name)
  return m.group(1), m.group(2)


# ---- the modules against the header text

@pytest.mark.parametrize("name", _BLOCK_NAMES)
def test_every_constant_matches_header(name):
  """Each #define of both headers is a module attribute under its C name, with the header's value."""
  mod, offsets, masks = block(name)
  assert offsets and masks
  for c_name, value in {**offsets, **masks}.items():
    got = getattr(mod, c_name)
    if isinstance(got, Register):
      assert (got.name, got.offset) == (c_name, value), c_name
    else:
      assert got == value, c_name
  # ... and the module serves nothing the headers do not define.
  served = {n for n in dir(mod) if not n.startswith("_") and n != "RegisterTable"}
  assert served == set(offsets) | set(masks)


@pytest.mark.parametrize("name", _BLOCK_NAMES)
def test_registers_and_segments(name):
  """Every register has the header's offset and BASE_IDX (segment None only where the header has none)."""
  mod, offsets, _ = block(name)
  regs = [n for n in offsets if not n.endswith("_BASE_IDX")]
  assert len(regs) > 50
  for reg in regs:
    r = getattr(mod, reg)
    assert isinstance(r, Register) and r.offset == offsets[reg] and r.segment == offsets.get(reg + "_BASE_IDX"), reg


@pytest.mark.parametrize("name", _BLOCK_NAMES)
def test_sampled_fields(name):
  """300 seeded random fields: Register.fields[field] == (SHIFT, MASK) from sh_mask.h, for every register of that name."""
  mod, offsets, masks = block(name)
  by_bare: dict[str, list[str]] = {}
  for reg in offsets:
    if not reg.endswith("_BASE_IDX"): by_bare.setdefault(prefix_split(reg)[1], []).append(reg)
  pairs = sorted({tuple(n[:-7].split("__")) for n in masks if n.endswith("__SHIFT")})
  pairs = [(r, f) for r, f in pairs if r in by_bare and f"{r}__{f}_MASK" in masks]
  rng = random.Random(f"fields-{name}")
  sample = rng.sample(pairs, min(300, len(pairs)))
  assert len(sample) >= 200
  for bare, fld in sample:
    shift, mask = masks[f"{bare}__{fld}__SHIFT"], masks[f"{bare}__{fld}_MASK"]
    for reg in by_bare[bare]:
      fields = getattr(mod, reg).fields
      if f"{bare}__{fld}" in KNOWN_DEFECTS and fld.lower() not in fields: continue
      assert fields[fld.lower()] == (shift, mask), f"{reg}.{fld}"


@pytest.mark.parametrize("name", _BLOCK_NAMES)
def test_field_count_matches_header(name):
  """Each register has exactly the header's fields (both SHIFT and MASK defined), less listed defects."""
  mod, offsets, masks = block(name)
  want: dict[str, set[str]] = {}
  for n in masks:
    if n.endswith("__SHIFT"):
      bare, fld = n[:-7].split("__")
      if f"{bare}__{fld}_MASK" in masks: want.setdefault(bare, set()).add(fld.lower())
  for reg in offsets:
    if reg.endswith("_BASE_IDX"): continue
    bare = prefix_split(reg)[1]
    got = set(getattr(mod, reg).fields)
    dropped = {k.split("__")[1].lower() for k in KNOWN_DEFECTS if k.split("__")[0] == bare}
    assert got <= want.get(bare, set()) and want.get(bare, set()) - got <= dropped, reg


def test_named_gc_11_0_0():
  """Registers the driver relies on, checked against the header text by name."""
  mod, offsets, masks = block("gc_11_0_0")
  rsrc1 = mod.regCOMPUTE_PGM_RSRC1
  for fld in ("VGPRS", "SGPRS"):
    assert rsrc1.fields[fld.lower()] == (masks[f"COMPUTE_PGM_RSRC1__{fld}__SHIFT"], masks[f"COMPUTE_PGM_RSRC1__{fld}_MASK"])
  assert rsrc1.fields["vgprs"] == (0, 0x3F) and rsrc1.fields["sgprs"] == (6, 0x3C0)
  assert (rsrc1.offset, rsrc1.segment) == (offsets["regCOMPUTE_PGM_RSRC1"], offsets["regCOMPUTE_PGM_RSRC1_BASE_IDX"])
  db = mod.regCP_HQD_PQ_DOORBELL_CONTROL
  assert (db.offset, db.segment) == (offsets["regCP_HQD_PQ_DOORBELL_CONTROL"], offsets["regCP_HQD_PQ_DOORBELL_CONTROL_BASE_IDX"])
  for fld in ("DOORBELL_OFFSET", "DOORBELL_EN", "DOORBELL_HIT"):
    assert db.fields[fld.lower()] == (masks[f"CP_HQD_PQ_DOORBELL_CONTROL__{fld}__SHIFT"], masks[f"CP_HQD_PQ_DOORBELL_CONTROL__{fld}_MASK"])
  rb = mod.regSDMA0_QUEUE0_RB_CNTL
  assert rb.offset == offsets["regSDMA0_QUEUE0_RB_CNTL"]
  assert rb.fields["rb_size"] == (masks["SDMA0_QUEUE0_RB_CNTL__RB_SIZE__SHIFT"], masks["SDMA0_QUEUE0_RB_CNTL__RB_SIZE_MASK"])
  assert mod.SDMA0_QUEUE0_RB_CNTL__RB_SIZE_MASK == masks["SDMA0_QUEUE0_RB_CNTL__RB_SIZE_MASK"]
  assert mod.regCOMPUTE_PGM_RSRC1_BASE_IDX == offsets["regCOMPUTE_PGM_RSRC1_BASE_IDX"]


def test_known_defects_stay_constants():
  """A header defect keeps its raw constants but is not a usable field."""
  mod, _, masks = block("gc_11_0_0")
  assert mod.GL1C_UTCL0_CNTL1__FORCE_IN_ORDER_MASK == masks["GL1C_UTCL0_CNTL1__FORCE_IN_ORDER_MASK"] == 0x06000000
  assert "force_in_order" not in mod.regGL1C_UTCL0_CNTL1.fields and "force_miss" in mod.regGL1C_UTCL0_CNTL1.fields
  assert mod.SQ_CONFIG__WCLK_HYSTERESIS_CNT__SHIFT == masks["SQ_CONFIG__WCLK_HYSTERESIS_CNT__SHIFT"]
  assert not hasattr(mod, "SQ_CONFIG__WCLK_HYSTERESIS_CNT_MASK")


# ---- Register behaviour

def test_encode_decode_round_trip():
  """Random values in random fields of 200 seeded random registers of every block encode and decode back."""
  rng = random.Random("round-trip")
  for name in _BLOCK_NAMES:
    mod, offsets, _ = block(name)
    regs = sorted(n for n in offsets if not n.endswith("_BASE_IDX"))
    for reg in rng.sample(regs, min(200, len(regs))):
      r = getattr(mod, reg)
      values = {k: rng.randrange((m >> s) + 1) for k, (s, m) in r.fields.items() if rng.random() < 0.6}
      word = r.encode(**values)
      assert 0 <= word < 1 << 32
      assert r.decode(word) == {k: values.get(k, 0) for k in r.fields}
      assert r.encode(**r.decode(word)) == word


def test_encode_known_value():
  mod, _, _ = block("gc_11_0_0")
  assert mod.regCOMPUTE_PGM_RSRC1.encode(vgprs=3, sgprs=2) == 3 | 2 << 6
  assert mod.regCOMPUTE_PGM_RSRC1.decode(0x83)["sgprs"] == 2
  assert mod.regCOMPUTE_PGM_RSRC1.encode() == 0


def test_encode_errors():
  mod, _, _ = block("gc_11_0_0")
  r = mod.regCOMPUTE_PGM_RSRC1
  with pytest.raises(ValueError, match=r"no field 'vgpr'\. Did you mean vgprs.*Valid fields: vgprs, sgprs"): r.encode(vgpr=1)
  with pytest.raises(ValueError, match=r"lower-case, use vgprs="): r.encode(VGPRS=1)
  with pytest.raises(ValueError, match=r"regCOMPUTE_PGM_RSRC1\.vgprs: value 64 .*6 bits"): r.encode(vgprs=64)
  with pytest.raises(ValueError, match=r"vgprs: value -1 "): r.encode(vgprs=-1)
  with pytest.raises(TypeError, match=r"vgprs: value must be an int"): r.encode(vgprs=1.0)
  assert r.encode(vgprs=63) == 63 and r.encode(fwd_progress=True) == 1 << 31


def test_repr():
  mod, _, _ = block("gc_11_0_0")
  text = repr(mod.regCOMPUTE_PGM_RSRC1)
  assert text.startswith("<Register regCOMPUTE_PGM_RSRC1 offset=0x1bb2 segment=0 fields: vgprs[5:0] sgprs[9:6]")
  assert "segment" not in repr(mod.ixGC_CAC_ID)


def test_missing_attribute():
  mod, _, _ = block("gc_11_0_0")
  with pytest.raises(AttributeError, match=r"no register or constant 'regCOMPUTE_PGM_RSRC'; did you mean .*regCOMPUTE_PGM_RSRC1"):
    mod.regCOMPUTE_PGM_RSRC
  assert not hasattr(mod, "__path__") and not hasattr(mod, "regNOT_A_REGISTER") and not hasattr(mod, "ixGC_CAC_ID_BASE_IDX")


def test_lazy_and_cached():
  """Importing builds nothing and pulls in no heavy module; the first access builds a Register and caches it."""
  code = ("import sys, hcq.autogen.am.gc_11_0_0 as m\n"
          "assert 'regCOMPUTE_PGM_RSRC1' not in vars(m)\n"
          "heavy = {'difflib', 'dataclasses', 'typing', 'inspect', 're'} & set(sys.modules) - pre\n"
          "assert not heavy, heavy\n"
          "r = m.regCOMPUTE_PGM_RSRC1\n"
          "assert vars(m)['regCOMPUTE_PGM_RSRC1'] is r is m.regCOMPUTE_PGM_RSRC1\n")
  pre = "import sys; pre = set(sys.modules)\n"
  out = subprocess.run([sys.executable, "-c", pre + code], capture_output=True, text=True)
  assert out.returncode == 0, out.stderr


def test_star_import():
  ns: dict = {}
  exec("from hcq.autogen.am.osssys_6_0_0 import *", ns)
  assert isinstance(ns["regIH_VMID_0_LUT"], Register) and "IH_VMID_0_LUT__PASID_MASK" in ns


# ---- the generator (libclang) on small synthetic headers

def _clang() -> None:
  require(importlib.util.find_spec("clang") is not None, "libclang Python bindings (pip install 'libclang>=16')")


def _generate(tmp_path: Path, offset: str, sh_mask: str) -> types.ModuleType:
  from hcq.autogen.generator.registers import generate
  (tmp_path / "t_offset.h").write_text(offset)
  (tmp_path / "t_sh_mask.h").write_text(sh_mask)
  text = generate(tmp_path / "t_offset.h", tmp_path / "t_sh_mask.h", "# generated for a test\n")
  assert text.startswith("# generated for a test\n")
  mod = types.ModuleType("t_regs")
  exec(compile(text, "t_regs", "exec"), mod.__dict__)
  return mod, text


GOOD_OFFSET = """#ifndef T_OFFSET
#define T_OFFSET
#define regA 0x10
#define regA_BASE_IDX 1
#define mmOLD (0x20 + 2)
#define mmOLD_BASE_IDX 0
#define ixIND 0x4
#endif
"""
GOOD_SH_MASK = """#define A__LO__SHIFT 0x0
#define A__LO_MASK 0x0000000FL
#define A__HI__SHIFT 0x1c
#define A__HI_MASK 0xF0000000UL
#define OLD__X__SHIFT 4
#define OLD__X_MASK 0x10
#define NOREG__Y__SHIFT 0x2
#define NOREG__Y_MASK 0x4
#define NOREG__Y_MASK 0x4
"""


def test_generate_synthetic(tmp_path):
  _clang()
  mod, text = _generate(tmp_path, GOOD_OFFSET, GOOD_SH_MASK)
  assert (mod.regA.offset, mod.regA.segment, mod.regA.fields) == (0x10, 1, {"lo": (0, 0xF), "hi": (28, 0xF0000000)})
  assert (mod.mmOLD.offset, mod.mmOLD_BASE_IDX, mod.mmOLD.fields) == (0x22, 0, {"x": (4, 0x10)})  # clang evaluated (0x20 + 2)
  assert mod.ixIND.segment is None and mod.ixIND.fields == {}
  assert mod.NOREG__Y_MASK == 4 and not hasattr(mod, "regNOREG")  # fields without a register stay constants
  assert mod.regA.encode(lo=1, hi=0xF) == 0xF0000001
  assert _generate(tmp_path, GOOD_OFFSET, GOOD_SH_MASK)[1] == text  # deterministic


@pytest.mark.parametrize("offset_extra, sh_mask_extra, message", [
  ("", "#define A__MID__SHIFT 0x2\n#define A__MID_MASK 0x0000000CL\n", r"A__MID: bits 0xc overlap field\(s\) LO"),
  ("", "#define A__ODD__SHIFT 0x8\n#define A__ODD_MASK 0x00000500L\n", r"A__ODD: mask 0x500 is not one run"),
  ("", "#define A__HALF__SHIFT 0x8\n", r"A__HALF: __SHIFT without _MASK"),
  ("#define regGONE_BASE_IDX 0\n", "", r"regGONE_BASE_IDX: BASE_IDX without a register"),
  ("#define NOT_A_REGISTER 3\n", "", r"NOT_A_REGISTER: not a register name"),
  ("", "#define A_LOOSE 3\n", r"A_LOOSE: not a field constant"),
  ("#define regFN(x) (x)\n", "", r"regFN: not a non-negative integer constant"),
  ("#define regA 0x11\n", "", r"macro redefined|'regA' macro redefined"),
])
def test_generate_errors(tmp_path, offset_extra, sh_mask_extra, message):
  _clang()
  with pytest.raises(GeneratorError, match=message):
    _generate(tmp_path, GOOD_OFFSET + offset_extra, GOOD_SH_MASK + sh_mask_extra)


@pytest.mark.parametrize("name", ["osssys_6_0_0", "hdp_6_0_0", "mmhub_3_0_0"])
def test_committed_module_is_reproducible(name):
  """Regenerating a (small) block gives the committed module byte for byte."""
  _clang()
  from hcq.autogen.generator.registers import build
  try:
    text = build(name)
  except GeneratorError as e:
    require(False, f"the block's linux-source package ({e})")
  mod = importlib.import_module(f"hcq.autogen.am.{name}")
  assert Path(mod.__file__).read_text() == text
