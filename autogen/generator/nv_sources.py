"""Where the NVIDIA headers come from: a folder given by --nv-src or HCQ_NV_SRC (never committed, never fetched here).

The folder holds two extracted trees (only headers are read):

  <nv-src>/open-gpu-kernel-modules/  a tag of NVIDIA/open-gpu-kernel-modules (its version.mk names the version)
  <nv-src>/open-gpu-doc/             NVIDIA/open-gpu-doc's classes/, with a file REVISION holding the commit

Made from git mirrors without a work tree, e.g.:

  git --git-dir=KMOD.git archive 580.142 version.mk src/common/sdk/nvidia/inc kernel-open/common/inc \\
      kernel-open/nvidia-uvm/uvm_ioctl.h kernel-open/nvidia-uvm/uvm_linux_ioctl.h kernel-open/nvidia-uvm/uvm_types.h \\
      src/nvidia/arch/nvalloc/unix/include/nv_escape.h src/nvidia/arch/nvalloc/unix/include/nv-unix-nvos-params-wrappers.h \\
      | tar -x -C $HCQ_NV_SRC/open-gpu-kernel-modules
  git --git-dir=DOC.git archive HEAD classes | tar -x -C $HCQ_NV_SRC/open-gpu-doc
  git --git-dir=DOC.git rev-parse HEAD > $HCQ_NV_SRC/open-gpu-doc/REVISION
"""
from __future__ import annotations
import os
import re
from dataclasses import dataclass
from pathlib import Path

from hcq.autogen.generator.clangtools import GeneratorError

ENV = "HCQ_NV_SRC"
KMOD, DOC = "open-gpu-kernel-modules", "open-gpu-doc"
SDK = "src/common/sdk/nvidia/inc"
# The driver branch the committed modules are generated for (the H200 we reach runs 580.159).
BRANCH = "580"

_explicit: Path | None = None


def set_source(path: Path | None) -> None:
  """The folder from --nv-src; it wins over HCQ_NV_SRC."""
  global _explicit
  _explicit = None if path is None else Path(path)


def source_root() -> Path | None:
  """The NV source folder given (--nv-src, else HCQ_NV_SRC), or None when neither is set."""
  if _explicit is not None: return _explicit
  env = os.environ.get(ENV)
  return Path(env) if env else None


@dataclass(frozen=True)
class NVSource:
  root: Path
  version: str   # open-gpu-kernel-modules' NVIDIA_VERSION, e.g. "580.142"
  doc_rev: str   # open-gpu-doc commit

  @property
  def kmod(self) -> Path: return self.root / KMOD

  @property
  def doc(self) -> Path: return self.root / DOC

  def header(self, rel: str) -> Path:
    """A header below the source folder ("open-gpu-kernel-modules/..." or "open-gpu-doc/..."), checked to exist."""
    p = self.root / rel
    if not p.is_file(): raise GeneratorError(f"{rel} is missing under {self.root} ({KMOD} {self.version}); extract it (see hcq.autogen.generator.nv_sources)")
    return p

  def include_args(self) -> list[str]:
    return [f"-I{self.kmod / SDK}", f"-I{self.kmod / 'kernel-open/common/inc'}", f"-I{self.kmod / 'kernel-open/nvidia-uvm'}"]

  def describe(self, headers: list[Path]) -> str:
    """Which tree, tag and files a generated module came from (its first line)."""
    kmod = any(str(h).startswith(str(self.kmod)) for h in headers)
    doc = any(str(h).startswith(str(self.doc)) for h in headers)
    tags = ([f"NVIDIA/{KMOD} {self.version}"] if kmod else []) + ([f"NVIDIA/{DOC} {self.doc_rev[:12]}"] if doc else [])
    return f"{' + '.join(tags)}: {', '.join(display(h, self.root) for h in headers)}"


def display(path: Path, root: Path) -> str:
  s = str(path)
  return s[len(str(root)) + 1:] if s.startswith(str(root) + "/") else s


def nv_source() -> NVSource:
  """The NV source tree, checked: GeneratorError naming what is missing and how to provide it."""
  root = source_root()
  if root is None: raise GeneratorError(f"no NVIDIA sources given: pass --nv-src DIR or set {ENV} (see hcq.autogen.generator.nv_sources)")
  mk = root / KMOD / "version.mk"
  if not mk.is_file(): raise GeneratorError(f"{mk} is missing: {root} must hold {KMOD}/ (a tag's version.mk and headers) and {DOC}/")
  m = re.search(r"^NVIDIA_VERSION\s*=\s*(\S+)", mk.read_text(), re.M)
  if not m: raise GeneratorError(f"{mk} names no NVIDIA_VERSION")
  version = m.group(1)
  if version.split(".")[0] != BRANCH:
    raise GeneratorError(f"{KMOD} under {root} is {version}, not the {BRANCH} branch the bindings are for; extract a {BRANCH}.x tag")
  rev = root / DOC / "REVISION"
  if not rev.is_file(): raise GeneratorError(f"{rev} is missing: write open-gpu-doc's commit there (git rev-parse HEAD)")
  return NVSource(root, version, rev.read_text().strip())
