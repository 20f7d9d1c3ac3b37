"""hcq: a user-space GPU driver and kernel-launch toolkit in Python."""
import os
from setuptools import setup

# Each import name maps to its own top-level folder (see DESIGN.md: layers as folders).
ROOTS = {"hcq": "hcq", "hcq.drivers": "drivers", "hcq.autogen": "autogen", "hcq.asm": "asm"}

def packages_under(name: str, folder: str) -> dict[str, str]:
  """Every folder with an __init__.py below `folder`, named as a subpackage of `name`."""
  here = os.path.dirname(os.path.abspath(__file__))
  found = {}
  for dirpath, dirnames, filenames in os.walk(os.path.join(here, folder)):
    dirnames[:] = [d for d in dirnames if not d.startswith((".", "__"))]
    if "__init__.py" in filenames:
      rel = os.path.relpath(dirpath, os.path.join(here, folder))
      found[name if rel == "." else name + "." + rel.replace(os.sep, ".")] = os.path.relpath(dirpath, here)
  return found

package_dir = {}
for name, folder in ROOTS.items(): package_dir.update(packages_under(name, folder))

setup(
  name="hcq",
  version="0.1.0",
  description="User-space GPU driver and kernel-launch toolkit: PM4/SDMA and GPFIFO queues from Python",
  long_description=open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "README.md")).read(),
  long_description_content_type="text/markdown",
  python_requires=">=3.10",
  packages=sorted(package_dir),
  package_dir=package_dir,
  install_requires=["numpy"],
  extras_require={
    "autogen": ["libclang>=16"],
    "compile": ["llvmlite"],
    # NVIDIA: ptxas (PTX -> cubin), NVRTC (CUDA C++ -> PTX); cuobjdump and nvdisasm: the tests read cubins and SASS with them
    "nv": ["nvidia-cuda-nvcc", "nvidia-cuda-nvrtc", "nvidia-cuda-cuobjdump", "nvidia-cuda-nvdisasm"],
    "test": ["pytest", "pytest-xdist", "hypothesis", "libclang>=16", "llvmlite", "nvidia-cuda-nvcc", "nvidia-cuda-nvrtc", "nvidia-cuda-cuobjdump",
             "nvidia-cuda-nvdisasm"],
  },
)
