"""gcc as an independent judge of generated bindings: the C facts (layouts, constants, fields) a module claims.

The generator used libclang; this module writes a C program that prints, with gcc's own layout and
constant evaluation, one line per fact, next to what the Python module says for the same fact. The
tests run it against the headers (tests/test_bindings_gcc.py), and the NV generator runs it once at
generation time to store gcc's answers beside modules whose headers CI cannot get (hcq.autogen.nv.gcc).
"""
from __future__ import annotations
import ctypes
import os
import shutil
import subprocess
import tempfile

from hcq.autogen.generator.clangtools import GeneratorError


def run_c(spec, body: str, compiler: str | None = None, prologue: str = "") -> list[str]:
  """Compile `body` (statements in main) after the spec's headers with gcc/g++ and return its output lines."""
  name = "g++" if spec.cplusplus else "gcc"
  compiler = compiler or shutil.which(name)
  if compiler is None: raise GeneratorError(f"{name} is not installed: apt-get install -y {name}")
  includes = spec.prelude + "".join(f'#include "{h}"\n' for h in spec.headers)
  std = "".join(f"using namespace {ns};\n" for ns in spec.namespaces)
  src = f"#include <stdio.h>\n#include <stddef.h>\n#include <string.h>\n{includes}{std}{prologue}\nint main(void) {{\n{body}\nreturn 0;\n}}\n"
  with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "probe.cpp" if spec.cplusplus else "probe.c")
    with open(path, "w") as f: f.write(src)
    exe = os.path.join(d, "probe")
    args = [a for a in spec.args if a.startswith(("-I", "-D"))]
    cc = subprocess.run([compiler, "-w", *args, path, "-o", exe], capture_output=True, text=True)
    if cc.returncode != 0: raise GeneratorError(f"{compiler} failed:\n{cc.stderr[:3000]}")
    return subprocess.run([exe], capture_output=True, text=True, check=True).stdout.splitlines()


def records(mod) -> list[type]:
  return [v for v in vars(mod).values() if isinstance(v, type) and issubclass(v, (ctypes.Structure, ctypes.Union))
          and v.__module__ == mod.__name__ and getattr(v, "__dict__", {}).get("_c_name_")]


def leaves(cls: type, path: str = ""):
  """(C member path, ctypes field type, bit width or None) for every member, through nested records and anonymous members."""
  anon = set(getattr(cls, "_anonymous_", ()))
  for f in cls._fields_:
    name, t, bits = f[0], f[1], (f[2] if len(f) > 2 else None)
    if name.startswith("_hcq_pad"): continue
    if name in anon:
      yield from leaves(t, path)
      continue
    p = f"{path}{name}"
    yield p, t, bits
    if bits is None and isinstance(t, type) and issubclass(t, (ctypes.Structure, ctypes.Union)): yield from leaves(t, p + ".")
    elif bits is None and issubclass(t, ctypes.Array) and t._length_ and issubclass(t._type_, (ctypes.Structure, ctypes.Union)):
      yield from leaves(t._type_, f"{p}[0].")


def python_offset(cls: type, path: str) -> int:
  obj, off = cls, 0
  for part in path.replace("[0]", "").split("."):
    d = getattr(obj, part)
    off += d.offset
    obj = next(f[1] for f in _all_fields(obj) if f[0] == part)
    if issubclass(obj, ctypes.Array): obj = obj._type_
  return off


def _all_fields(cls):
  for f in cls._fields_:
    if f[0] in getattr(cls, "_anonymous_", ()): yield from _all_fields(f[1])
    else: yield f


def bitfield_bytes(cls: type, path: str) -> str:
  """The struct's bytes after setting one bitfield to all ones in a zeroed instance."""
  obj = cls()
  parts = path.split(".")
  target = obj
  for p in parts[:-1]: target = getattr(target, p.replace("[0]", ""))[0] if "[0]" in p else getattr(target, p)
  setattr(target, parts[-1], -1)
  return bytes(obj).hex()


def layout_facts(cls: type, cplusplus: bool) -> tuple[list[str], list[tuple[str, object]]]:
  """C statements printing one layout fact a line for record `cls`, and what ctypes says for each."""
  c = cls._c_name_
  body = [f'printf("%zu %zu\\n", sizeof({c}), {"alignof" if cplusplus else "_Alignof"}({c}));']
  expected = [(f"sizeof/alignof({c})", f"{ctypes.sizeof(cls)} {cls.__dict__.get('_c_align_', ctypes.alignment(cls))}")]
  for path, t, bits in leaves(cls):
    if bits is None and issubclass(t, ctypes.Array) and t._length_ == 0:  # flexible array member: C has no sizeof for it
      body.append(f'printf("%zu 0\\n", offsetof({c}, {path}));')
      expected.append((f"offsetof({c}, {path}[])", f"{python_offset(cls, path)} 0"))
    elif bits is None:
      body.append(f'printf("%zu %zu\\n", offsetof({c}, {path}), sizeof((({c}*)0)->{path}));')
      expected.append((f"offsetof/sizeof({c}, {path})", f"{python_offset(cls, path)} {ctypes.sizeof(t)}"))
    else:  # offsetof is not defined on bitfields: compare the bytes of an all-ones field instead
      body.append(f'{{ {c} v; memset(&v, 0, sizeof v); v.{path} = -1; for (size_t i = 0; i < sizeof v; i++) printf("%02x", ((unsigned char*)&v)[i]); printf("\\n"); }}')
      expected.append((f"bitfield {c}.{path}", bitfield_bytes(cls, path)))
  return body, expected


def module_constants(mod) -> dict[str, int]:
  return {k: v for k, v in vars(mod).items() if not k.startswith("__") and type(v) is int}


def constant_facts(mod) -> tuple[list[str], list[tuple[str, object]]]:
  """C statements printing each integer constant of `mod` (signed or unsigned as C types it), and the Python values."""
  consts = module_constants(mod)
  body = [f'if (({k}) < 0) printf("%lld\\n", (long long)({k})); else printf("%llu\\n", (unsigned long long)({k}));' for k in consts]
  return body, [(f"constant {k}", str(v)) for k, v in consts.items()]


def field_facts(mod) -> tuple[list[str], list[tuple[str, object]]]:
  """For a module with DRF fields (a `_FIELDS` table): each field macro's high and low bit as C's `(1?F)`/`(0?F)` read
  them (the headers' own DRF idiom), against the Register's shift and mask."""
  table = getattr(mod, "_FIELDS", None)
  if table is None: return [], []
  body, expected = [], []
  for c_expr, reg, key in table.c_fields():
    shift, mask = mod.register(reg).fields[key]
    body.append(f'printf("%d %d\\n", (int)(1?{c_expr}), (int)(0?{c_expr}));')
    expected.append((f"field {c_expr}", f"{shift + (mask >> shift).bit_length() - 1} {shift}"))
  return body, expected


def module_facts(mod, cplusplus: bool = False) -> tuple[list[str], list[tuple[str, object]]]:
  """Every fact of `mod` gcc can judge: record layouts, integer constants and DRF fields."""
  body, expected = [], []
  for b, e in [layout_facts(cls, cplusplus) for cls in records(mod)] + [constant_facts(mod), field_facts(mod)]:
    body += b
    expected += e
  return body, expected


def measure(spec, mod, compiler: str | None = None) -> dict[str, str]:
  """gcc's answer for every fact of `mod`, by fact name."""
  body, expected = module_facts(mod, spec.cplusplus)
  got = run_c(spec, "\n".join(body), compiler)
  if len(got) != len(expected): raise GeneratorError(f"{mod.__name__}: gcc printed {len(got)} lines for {len(expected)} facts")
  return {what: g for (what, _), g in zip(expected, got)}


def differences(mod, measured: dict[str, str], cplusplus: bool = False) -> list[str]:
  """Where `mod` disagrees with gcc's `measured` facts (a fact missing on either side counts)."""
  _, expected = module_facts(mod, cplusplus)
  bad = [f"{what}: python {want}, gcc {measured[what]}" for what, want in expected if what in measured and str(want) != measured[what]]
  bad += [f"{what}: not measured by gcc" for what, _ in expected if what not in measured]
  bad += [f"{what}: measured by gcc, not in the module" for what in set(measured) - {w for w, _ in expected}]
  return bad
