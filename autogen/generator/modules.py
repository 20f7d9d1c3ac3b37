"""The generated binding modules: which Debian package and headers each comes from, and how to parse them."""
from __future__ import annotations
from pathlib import Path

from hcq.autogen.generator.ctypes_gen import BindingSpec
from hcq.autogen.generator.sources import cache_dir, linux_source, system_header


def drm_include_shim() -> Path:
  """An include folder where <drm/drm.h> resolves: Debian ships the DRM uapi headers in libdrm-dev's /usr/include/libdrm."""
  shim = cache_dir() / "include-shim"
  link = shim / "drm"
  if not link.is_symlink():
    shim.mkdir(parents=True, exist_ok=True)
    link.symlink_to(system_header("libdrm-dev", "/usr/include/libdrm/drm.h").parent)
  return shim


LLVM_INCLUDE = "/usr/lib/llvm-19/include"


def binding_specs() -> dict[str, BindingSpec]:
  """Every ctypes binding module by its name under hcq.autogen; resolving a spec checks its inputs exist."""
  kernel = "linux-source-6.1"
  return {
    "kfd": lambda: BindingSpec("kfd", "linux-libc-dev", [system_header("linux-libc-dev", "/usr/include/linux/kfd_ioctl.h")],
                               args=[f"-I{drm_include_shim()}"]),
    "amdgpu_drm": lambda: BindingSpec("amdgpu_drm", "libdrm-dev", [system_header("libdrm-dev", "/usr/include/libdrm/drm.h"),
                                                                  system_header("libdrm-dev", "/usr/include/libdrm/amdgpu_drm.h")]),
    "pci": lambda: BindingSpec("pci", "linux-libc-dev", [system_header("linux-libc-dev", "/usr/include/linux/pci_regs.h")]),
    "vfio": lambda: BindingSpec("vfio", "linux-libc-dev", [system_header("linux-libc-dev", "/usr/include/linux/vfio.h")]),
    "hsa": lambda: BindingSpec("hsa", "libhsa-runtime-dev", [system_header("libhsa-runtime-dev", f"/usr/include/hsa/{h}") for h in
                               ("hsa.h", "amd_hsa_common.h", "amd_hsa_queue.h", "amd_hsa_signal.h", "amd_hsa_kernel_code.h")]),
    "amdgpu_kd": lambda: BindingSpec("amdgpu_kd", "llvm-19-dev", [system_header("llvm-19-dev", f"{LLVM_INCLUDE}/llvm/Support/AMDHSAKernelDescriptor.h")],
                                     args=[f"-I{LLVM_INCLUDE}"], cplusplus=True, namespaces=("llvm::amdhsa",)),
    "amdgpu_elf": lambda: BindingSpec("amdgpu_elf", "llvm-19-dev", [system_header("llvm-19-dev", f"{LLVM_INCLUDE}/llvm/BinaryFormat/ELF.h")],
                                      args=[f"-I{LLVM_INCLUDE}"], cplusplus=True, namespaces=("llvm::ELF",)),
    "am.nvd": lambda: BindingSpec("am.nvd", kernel, [linux_source("amdgpu/nvd.h")]),
    "am.soc15d": lambda: BindingSpec("am.soc15d", kernel, [linux_source("amdgpu/soc15d.h")]),
    "am.sdma_v6_0_0_pkt_open": lambda: BindingSpec("am.sdma_v6_0_0_pkt_open", kernel, [linux_source("amdgpu/sdma_v6_0_0_pkt_open.h")]),
    "am.v11_structs": lambda: BindingSpec("am.v11_structs", kernel, [linux_source("include/v11_structs.h")], prelude="#include <stdint.h>\n"),
    "am.v9_structs": lambda: BindingSpec("am.v9_structs", kernel, [linux_source("include/v9_structs.h")], prelude="#include <stdint.h>\n"),
    "am.soc21_enum": lambda: BindingSpec("am.soc21_enum", kernel, [linux_source("include/soc21_enum.h")]),
    "am.soc24_enum": lambda: BindingSpec("am.soc24_enum", "linux-source-6.12", [linux_source("include/soc24_enum.h", "linux-source-6.12")]),
    "am.vega10_enum": lambda: BindingSpec("am.vega10_enum", kernel, [linux_source("include/vega10_enum.h")]),
    "am.discovery": lambda: BindingSpec("am.discovery", kernel, [linux_source("include/discovery.h")], prelude="#include <stdint.h>\n"),
  }
