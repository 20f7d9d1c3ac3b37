"""The NVIDIA modules hcq.autogen.nv.*: RM and UVM ABI, class and control parameters, method and QMD fields.

Inputs are NVIDIA's headers (open-gpu-kernel-modules at a 580.x tag, open-gpu-doc's classes/) from the
folder given by --nv-src or HCQ_NV_SRC (see nv_sources). Each module is made by the same libclang
generator as the AMD bindings (ctypes_gen); on top, DRF fields (`#define X_FIELD hi:lo`, QMD `MW(hi:lo)`)
are grouped under their method or QMD version into a hcq.autogen.support.FieldTable, whose Registers
encode and decode like the AMD registers.

Because CI cannot get these headers, generation also runs gcc over them once and stores gcc's answer
for every fact of the module (record sizes, alignments and offsets, constants, field bits) as
hcq.autogen.nv.gcc.<module>; the tests compare the ctypes module with that table, and with gcc directly
when HCQ_NV_SRC is set.
"""
from __future__ import annotations
import functools
import types
from pathlib import Path

from hcq.autogen.generator import clangtools, gcc_judge
from hcq.autogen.generator.clangtools import GeneratorError
from hcq.autogen.generator.ctypes_gen import BindingSpec, generate_bindings
from hcq.autogen.generator.nv_sources import SDK, NVSource, nv_source

K = "open-gpu-kernel-modules/"
S = K + SDK + "/"
D = "open-gpu-doc/classes/"
UVM = K + "kernel-open/nvidia-uvm/"
NVTYPES = '#include "nvtypes.h"\n'  # the SDK's class headers use NvU32 without including it
QMD_PRELUDE = "#define MW(x) x\n"  # the QMD headers leave MW to the reader (nvmisc.h's DRF_*_MW); hi:lo as for DRF

# module under hcq.autogen.nv -> (headers below the NV source folder, prelude)
MODULES: dict[str, tuple[list[str], str]] = {
  "nv_ioctl": ([K + "kernel-open/common/inc/nv-ioctl-numbers.h", K + "kernel-open/common/inc/nv-ioctl.h",
                K + "src/nvidia/arch/nvalloc/unix/include/nv_escape.h", K + "src/nvidia/arch/nvalloc/unix/include/nv-unix-nvos-params-wrappers.h"], ""),
  "nvos": ([S + "nvos.h", S + "alloc/alloc_channel.h", S + "nvgputypes.h"], ""),
  "nverror": ([S + "nverror.h"], ""),
  "nvstatus": ([S + "nvstatus.h"], ""),
  "classes": ([S + f"class/{c}.h" for c in ("cl0000", "cl0001", "cl0080", "cl2080", "cl90f1", "cl003e", "cl0040", "cl0070", "cl0071",
                                              "cla06c", "cl9067", "clc461", "clc561", "clc661", "clc761", "clc361", "cl2080_notification")], ""),
  "ctrl0000": ([S + f"ctrl/ctrl0000/ctrl0000{x}.h" for x in ("base", "client", "gpu", "system", "unix")], ""),
  "ctrl0080": ([S + f"ctrl/ctrl0080/ctrl0080{x}.h" for x in ("base", "gpu", "fifo", "fb")], ""),
  "ctrl2080": ([S + f"ctrl/ctrl2080/ctrl2080{x}.h" for x in ("base", "gpu", "fb", "perf", "thermal", "power", "mc", "bus", "fifo",
                                                             "ce", "tmr", "rc", "ecc", "pmgr", "gpumon", "gr")], ""),
  "ctrl_fifo": ([S + "ctrl/ctrla06c.h", S + "ctrl/ctrla06f/ctrla06fgpfifo.h", S + "ctrl/ctrlc36f.h"], ""),
  "uvm": ([UVM + "uvm_ioctl.h", UVM + "uvm_linux_ioctl.h"], ""),
  # GPFIFO host methods: Ampere from open-gpu-doc; Hopper and Blackwell, which open-gpu-doc lacks, from the SDK's class/.
  "clc56f": ([D + "host/clc56f.h"], ""),
  **{f"cl{c}6f": ([S + f"class/cl{c}6f.h"], NVTYPES) for c in ("c8", "c9", "ca")},
  **{f"cl{c}b5": ([D + f"dma-copy/cl{c}b5.h"], "") for c in ("c6", "c7", "c8", "c9", "ca")},
  **{f"cl{c}c0": ([D + f"compute/cl{c}c0.h"], "") for c in ("c6", "c7", "c9", "cb", "cd", "ce")},
  **{f"cl{c}c0qmd": ([D + f"compute/cl{c}c0qmd.h"], QMD_PRELUDE) for c in ("c6", "cb", "cd")},
}
MAX_INDEX = 32  # an indexed QMD field F(i) is expanded for i below this, while it stays inside its QMD and clear of other fields


def spec(name: str, src: NVSource | None = None) -> BindingSpec:
  src = src or nv_source()
  headers, prelude = MODULES[name]
  return BindingSpec(f"nv.{name}", f"NVIDIA {src.version}", [src.header(h) for h in headers], args=src.include_args(), prelude=prelude)


# ---- DRF fields ----
def _is_field(m: clangtools.Macro) -> bool:
  if m.params is None: return ":" in m.body and "?" not in m.body or m.body[:2] == ("MW", "(")
  return len(m.params) == 1 and m.body[:2] == ("MW", "(")


def _bits(exprs: dict[str, str], source: str, args: list[str]) -> dict[str, tuple[int, int]]:
  """(hi, lo) of each field expression as C's DRF idiom reads it: (1?F) is the high bit, (0?F) the low one."""
  decls = {}
  for k, e in exprs.items(): decls.update({(k, 1): f"(1?{e})", (k, 0): f"(0?{e})"})
  v = clangtools.evaluate(decls, source, args)
  return {k: (v[(k, 1)], v[(k, 0)]) for k in exprs if isinstance(v.get((k, 1)), int) and isinstance(v.get((k, 0)), int)
          and 0 <= v[(k, 0)] <= v[(k, 1)]}


def field_table(sp: BindingSpec) -> tuple[str, list[str]]:
  """The FieldTable data (one line per method/QMD group) and the field macros left out, with why."""
  args = ["-x", "c", "-std=gnu11", *sp.args]
  source = sp.prelude + "".join(f'#include "{h}"\n' for h in sp.headers)
  tu = clangtools.parse(source, args)
  found = [m for m in clangtools.macros(tu, {str(h.resolve()) for h in sp.headers}) if m.body]
  fields = [m for m in found if _is_field(m)]
  if not fields: return "", []
  plain = _bits({m.name: m.name for m in fields if m.params is None}, source, args)
  ints = clangtools.evaluate({m.name: m.name for m in found if m.params is None and not _is_field(m)}, source, args)
  field_names = {m.name for m in fields}
  # A method is an integer macro that is not a value of some field (NVC56F_SEM_EXECUTE_OPERATION_ACQUIRE is one).
  methods = {n: v for n, v in ints.items() if isinstance(v, int) and v >= 0
             and not any(n.startswith(f + "_") for f in _prefixes(n) if f in field_names)}
  skipped, groups = [], {}
  orphans = []
  for m in fields:
    owner = next((p for p in _prefixes(m.name) if p in methods), None)
    if m.params is not None or m.body[:1] == ("MW",):
      owner = _qmd_group(m.name)
      if owner is None:
        skipped.append(f"{m.name}: an MW field outside a QMD_V<major>_<minor> group")
        continue
    if owner is None:
      orphans.append(m)
      continue
    groups.setdefault(owner, []).append(m)
  for m in orphans:  # fields without a method (GP entries): grouped by their longest prefix shared with another such field
    if not _prefixes(m.name):
      skipped.append(f"{m.name}: a hi:lo range with no name to group it by (an aperture such as NVC361's, not a field)")
      continue
    shared = next((p for p in _prefixes(m.name) if sum(o.name.startswith(p + "_") for o in orphans) >= 2), None)
    groups.setdefault(shared or _prefixes(m.name)[0], []).append(m)
  _merge_subgroups(groups, methods, plain)
  lines = []
  for owner, ms in groups.items():
    items, taken = [], 0
    for m in ms:
      if m.params is None:
        if m.name not in plain:
          skipped.append(f"{m.name}: not a bit range hi:lo with hi >= lo (e.g. a caps byte:mask)")
          continue
        hi, lo = plain[m.name]
        items.append((m.name[len(owner) + 1:], hi, lo))
        taken |= ((1 << (hi - lo + 1)) - 1) << lo
    top = taken.bit_length()
    # The headers give no count for an indexed field F(i). Each index is taken while it stays inside the QMD and clear
    # of the plain fields; then every family of one kind (the first word after the QMD prefix: CONSTANT_, RELEASE_...)
    # keeps only the indices all of them reach, since one family running on into undefined bits says nothing.
    fits: dict[str, list[tuple[int, int]]] = {}
    for m in ms:
      if m.params is None: continue
      expanded = _bits({i: f"{m.name}({i})" for i in range(MAX_INDEX)}, source, args)
      fits[m.name] = []
      for i in range(MAX_INDEX):
        if i not in expanded: break
        hi, lo = expanded[i]
        if hi >= top or (((1 << (hi - lo + 1)) - 1) << lo) & taken: break
        fits[m.name].append((hi, lo))
    kinds: dict[str, int] = {}
    for name, ranges in fits.items():
      kind = name[len(owner) + 1:].split("_")[0]
      kinds[kind] = min(kinds.get(kind, MAX_INDEX), len(ranges))
    for name, ranges in fits.items():
      count = kinds[name[len(owner) + 1:].split("_")[0]]
      if not count: skipped.append(f"{name}(i): no index fits inside {owner} clear of its other fields")
      items += [(f"{name[len(owner) + 1:]}({i})", hi, lo) for i, (hi, lo) in enumerate(ranges[:count])]
    if not items: continue
    offset = "-" if owner not in methods else f"{methods[owner]:x}"
    lines.append(" ".join([owner, offset] + [f"{n}:{hi:x}:{lo:x}" for n, hi, lo in items]))
  return "\n".join(lines), skipped


def _merge_subgroups(groups: dict[str, list], methods: dict[str, int], plain: dict[str, tuple[int, int]]) -> None:
  """Fold a method-less group into the method-less group its name extends when their bits are clear of each other:
  NVOS46_FLAGS_DMA_OFFSET_FIXED (15:15) is a field of the NVOS46_FLAGS word, not a register of its own; NVOS46_FLAGS_P2P_ENABLE
  stays apart because it lies inside NVOS46_FLAGS_P2P, and GP_ENTRY0/GP_ENTRY1 stay apart because no group GP exists."""
  def plain_only(owner: str) -> bool: return owner not in methods and all(m.params is None and m.body[:1] != ("MW",) for m in groups[owner])
  def mask(owner: str) -> int:
    return functools.reduce(lambda a, b: a | b, (((1 << (hi - lo + 1)) - 1) << lo for hi, lo in (plain[m.name] for m in groups[owner] if m.name in plain)), 0)
  for owner in sorted(groups, key=len, reverse=True):
    if owner not in groups or not plain_only(owner): continue
    parent = next((p for p in _prefixes(owner) if p in groups and plain_only(p)), None)
    if parent is not None and not mask(owner) & mask(parent): groups[parent] += groups.pop(owner)


def _prefixes(name: str) -> list[str]:
  """NAME's proper prefixes at '_' boundaries, longest first."""
  parts = name.split("_")
  return ["_".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)]


def _qmd_group(name: str) -> str | None:
  parts = name.split("_")
  for i, p in enumerate(parts):
    if p.startswith("QMDV") and i + 1 < len(parts): return "_".join(parts[:i + 2])
  return None


# ---- status names ----
def status_table(sp: BindingSpec) -> str:
  """NV_STATUS value -> (name, message) from nvstatuscodes.h's NV_STATUS_CODE(name, value, "message") lines."""
  import ast
  codes = Path(sp.headers[0]).parent / "nvstatuscodes.h"
  tu = clangtools.parse(f'#include "{codes}"\n', ["-x", "c", *sp.args, "-DNV_STATUS_CODE(a,b,c)="])
  toks = [t.spelling for t in tu.get_tokens(extent=tu.get_extent(str(codes), (0, len(codes.read_bytes()))))]
  entries: list[tuple[str, str]] = []
  for i, t in enumerate(toks):
    if t == "NV_STATUS_CODE" and toks[i + 1] == "(" and toks[i - 1] != "define":
      j = toks.index(")", i)
      args = toks[i + 2:j]
      entries.append((args[0], "".join(ast.literal_eval(s) for s in args[args.index(",", 2) + 1:] if s.startswith('"'))))
  if len(entries) < 100: raise GeneratorError(f"{codes}: only {len(entries)} NV_STATUS_CODE entries found")
  return "\n# NV_STATUS value -> (name, message), from nvstatuscodes.h\nNV_STATUS_NAMES = {\n" + "".join(
    f"  {n}: ({n!r}, {msg!r}),\n" for n, msg in entries) + "}\n"


# ---- one module ----
def _header_line(src: NVSource, sp: BindingSpec) -> str:
  return f"# generated by `python -m hcq.autogen` from {src.describe(sp.headers)} -- do not edit\n"


def build(name: str) -> tuple[str, str]:
  """(text of hcq.autogen.nv.<name>, text of hcq.autogen.nv.gcc.<name>) from the NV sources given."""
  return _build(name, nv_source())


@functools.cache  # the module and its gcc table are asked for separately; make them once per source tree
def _build(name: str, src: NVSource) -> tuple[str, str]:
  sp = spec(name, src)
  text = generate_bindings(sp, _header_line(src, sp))
  text += f"\nNV_SOURCE_VERSION = {src.version!r}  # the open-gpu-kernel-modules tag this module's RM ABI is from\n"
  if name == "nvstatus": text += status_table(sp)
  data, skipped = field_table(sp)
  if data:
    text += ("\n# DRF fields by method (or QMD version): register(NAME) -> hcq.autogen.support.Register; registers() lists them.\n"
             "from hcq.autogen.support import FieldTable as _FieldTable\n"
             f'_FIELDS = _FieldTable("""\n{data}\n""")\nregister, registers = _FIELDS.register, _FIELDS.names\n')
  if skipped: text += "\n# field macros left out:\n" + "".join(f"#   {s}\n" for s in skipped)
  mod = types.ModuleType(f"hcq.autogen.nv.{name}")
  exec(compile(text, f"<hcq.autogen.nv.{name}>", "exec"), mod.__dict__)
  facts = gcc_judge.measure(sp, mod)
  gcc_text = (f"# generated by `python -m hcq.autogen` from {src.describe(sp.headers)} -- do not edit\n"
              f'"""gcc\'s layout, constant and field facts for hcq.autogen.nv.{name}, measured at generation time '
              '(see hcq.autogen.generator.nv)."""\n'
              "FACTS = {\n" + "".join(f"  {k!r}: {v!r},\n" for k, v in facts.items()) + "}\n")
  return text, gcc_text


def module_names() -> list[str]:
  """Every generated NV module under hcq.autogen (the gcc fact tables included)."""
  return [f"nv.{n}" for n in MODULES] + [f"nv.gcc.{n}" for n in MODULES]


def generator(module: str):
  """The function that makes hcq.autogen.<module> (an entry of module_names())."""
  gcc = module.startswith("nv.gcc.")
  name = module.removeprefix("nv.gcc." if gcc else "nv.")
  return lambda: build(name)[1 if gcc else 0]
