"""`python -m hcq.autogen`: regenerate (or check) every generated binding module from the installed headers (and NVIDIA's, when given)."""
from __future__ import annotations
import argparse
import difflib
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from hcq.autogen.generator import nv_sources
from hcq.autogen.generator.clangtools import GeneratorError
from hcq.autogen.generator.sources import generated_header_line

AUTOGEN_DIR = Path(__file__).resolve().parent.parent


def generators() -> dict[str, Callable[[], str]]:
  """Module name under hcq.autogen -> a function that returns its generated text (inputs resolved on call)."""
  from hcq.autogen.generator import registers
  from hcq.autogen.generator.ctypes_gen import generate_bindings
  from hcq.autogen.generator.modules import binding_specs

  out: dict[str, Callable[[], str]] = {}
  for name, make_spec in binding_specs().items():
    def bindings(make_spec=make_spec) -> str:
      spec = make_spec()
      return generate_bindings(spec, generated_header_line(spec.package, spec.headers))
    out[name] = bindings
  for module, *_ in registers.BLOCKS:
    out[f"am.{module}"] = lambda module=module: registers.build(module)
  return out


def nv_generators() -> dict[str, Callable[[], str]]:
  """The NVIDIA modules (hcq.autogen.nv.*, from --nv-src / HCQ_NV_SRC) and their gcc fact tables."""
  from hcq.autogen.generator import nv
  return {name: nv.generator(name) for name in nv.module_names()}


def module_path(name: str, root: Path = AUTOGEN_DIR) -> Path:
  return root.joinpath(*name.split(".")).with_suffix(".py")


def _body(text: str) -> list[str]:
  """A generated module without the package version in its first line (see check())."""
  lines = text.splitlines(keepends=True)
  return lines[1:] if lines and lines[0].startswith("# generated") else lines


def check(texts: dict[str, str], root: Path) -> int:
  """Compare freshly generated texts with the committed files; 1 on any difference in content.

  A difference in the package version alone (Debian's point releases move linux-libc-dev often) is
  reported but does not fail: the bindings are what that header generates.
  """
  failed = 0
  for name, text in texts.items():
    path = module_path(name, root)
    old = path.read_text() if path.exists() else ""
    if old == text: continue
    if _body(old) == _body(text):
      print(f"note: {name}: same content, from another package version: {text.splitlines()[0]!r}")
      continue
    failed = 1
    diff = list(difflib.unified_diff(old.splitlines(keepends=True), text.splitlines(keepends=True), str(path), "regenerated", n=1))
    print(f"STALE: {name} differs from what the headers generate ({len(diff)} diff lines):")
    sys.stdout.writelines(diff[:40])
  if not failed: print(f"ok: the {len(texts)} generated modules match what the headers generate")
  return failed


def write(texts: dict[str, str], root: Path) -> None:
  """Write each module atomically: a temp file in the same folder, then rename over the old one."""
  for name, text in texts.items():
    path = module_path(name, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
    with os.fdopen(fd, "w") as f: f.write(text)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a module is an ordinary file
    os.replace(tmp, path)


def _umask() -> int:
  mask = os.umask(0)
  os.umask(mask)
  return mask


def main(argv: list[str] | None = None) -> int:
  gens = {**generators(), **nv_generators()}
  ap = argparse.ArgumentParser(prog="python -m hcq.autogen", description=(
    "Regenerate hcq's ctypes bindings from the C headers of Debian packages, and the nv.* modules from NVIDIA's "
    "headers given by --nv-src (libclang parses them). "
    "All modules are generated in memory first; nothing is written unless every one succeeds."),
    epilog="modules: " + ", ".join(gens))
  ap.add_argument("modules", nargs="*", metavar="MODULE", help="only these modules (default: all)")
  ap.add_argument("--check", action="store_true", help="regenerate in memory and fail (exit 1) if any committed module differs")
  ap.add_argument("--out", type=Path, default=AUTOGEN_DIR, help=f"folder of the hcq.autogen package (default: {AUTOGEN_DIR})")
  ap.add_argument("--list", action="store_true", help="list the modules and exit")
  ap.add_argument("--nv-src", type=Path, default=None, metavar="DIR",
                  help=f"NVIDIA headers for the nv.* modules (default: ${nv_sources.ENV}; see hcq.autogen.generator.nv_sources); "
                       "without it the nv.* modules are skipped")
  args = ap.parse_args(argv)
  nv_sources.set_source(args.nv_src)
  try:
    return _run(ap, args, gens)
  finally:
    nv_sources.set_source(None)  # main() is also called in-process (tests): leave no source behind


def _run(ap: argparse.ArgumentParser, args: argparse.Namespace, gens: dict[str, Callable[[], str]]) -> int:
  if args.list:
    print("\n".join(gens))
    return 0
  unknown = [m for m in args.modules if m not in gens]
  if unknown:
    close = {m: difflib.get_close_matches(m, gens, n=3) for m in unknown}
    ap.error("unknown module(s): " + "; ".join(f"{m} (did you mean {', '.join(c)}?)" if c else m for m, c in close.items())
             + ". Valid: " + ", ".join(gens))
  wanted = args.modules or list(gens)
  if nv_sources.source_root() is None and not args.modules:
    wanted = [m for m in wanted if not m.startswith("nv.")]
    print(f"note: skipped the NVIDIA modules (nv.*): no --nv-src or ${nv_sources.ENV} given, so they were not "
          + ("checked" if args.check else "regenerated"))
  texts = {}
  for name in wanted:
    t0 = time.perf_counter()
    try:
      texts[name] = gens[name]()
    except GeneratorError as e:
      print(f"error: {name}: {e}\nnothing was written.", file=sys.stderr)
      return 2
    print(f"{name}: {texts[name].count(chr(10))} lines in {time.perf_counter() - t0:.2f}s", file=sys.stderr)
  if args.check: return check(texts, args.out)
  try:
    write(texts, args.out)
  except OSError as e:
    print(f"error: cannot write under {args.out}: {e.strerror} ({e.filename}); some modules may be written, the rest not", file=sys.stderr)
    return 2
  return 0
