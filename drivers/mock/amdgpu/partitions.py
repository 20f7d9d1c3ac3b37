"""MI300's compute and memory partition modes, as amdgpu and amdkfd (Linux 6.12) turn one GPU into KFD nodes.

A GPU whose `available_compute_partition` lists modes is split by the chosen compute mode into partitions (XCPs) of
equal XCC counts; amdkfd makes one topology node per partition (kfd_device.c kgd2kfd_device_init: num_nodes =
amdgpu_xcp_get_num_xcp), each with its own XCCs, CUs, memory and render node. `partition_boards` gives the BoardSpec of
each node; the sysfs tree that presents them is hcq.drivers.mock.os's.
"""
from __future__ import annotations
from dataclasses import replace

from hcq.drivers.mock.amdgpu.gpu import BoardSpec
from hcq.errors import HCQError

# aqua_vanjaram.c __aqua_vanjaram_get_xcc_per_xcp: XCCs per partition of a GPU with `n` XCCs (TPX needs n % 3 == 0,
# which no emulated board has; amdgpu_gfx.c lists it for 6 XCCs only)
XCCS_PER_PARTITION = {"SPX": lambda n: n, "DPX": lambda n: n // 2, "QPX": lambda n: n // 4, "CPX": lambda n: 1}
# gmc_v9_0.c gmc_v9_0_init_mem_ranges: NPS1 is one memory range, NPS4 four (MI300X's modes: NPS1 and NPS4)
MEMORY_RANGES = {"NPS1": 1, "NPS4": 4}


def mode_allowed(compute: str, memory: str, num_xcc: int) -> bool:
  """aqua_vanjaram.c __aqua_vanjaram_is_valid_mode (dGPU): which compute mode the kernel switches to under a memory mode."""
  ranges = MEMORY_RANGES[memory]
  if compute == "SPX": return ranges == 1
  if compute == "DPX": return ranges <= 2 and num_xcc % 4 == 0
  if compute == "QPX": return ranges in (1, 4) and num_xcc // 4 >= 2
  if compute == "CPX": return num_xcc > 1 and ranges in (1, 4) and num_xcc % ranges == 0
  return False


def parse_mode(text: str) -> tuple[str, str]:
  """`cpx`, `CPX/NPS4`, ... as (compute mode, memory mode); the memory mode defaults to NPS1."""
  compute, _, memory = text.upper().partition("/")
  return compute, memory or "NPS1"


def partition_boards(board: BoardSpec, mode: str) -> tuple[BoardSpec, ...]:
  """The KFD nodes of `board` (given in SPX: the whole GPU) in partition mode `mode` (`CPX`, `QPX/NPS4`, ...); HCQError
  naming the valid modes for one the board lacks or one its memory mode does not allow."""
  compute, memory = parse_mode(mode)
  modes = [m.strip() for m in board.available_partitions.split(",") if m.strip()]
  if not modes: raise HCQError(f"{board.gfx_target} ({board.name}) has no partition modes; only MI300-class boards (gfx942) do")
  valid = [f"{c}/{m}" for c in modes for m in MEMORY_RANGES if mode_allowed(c, m, board.num_xcc)]
  if compute not in modes or memory not in MEMORY_RANGES or not mode_allowed(compute, memory, board.num_xcc):
    raise HCQError(f"partition mode {mode!r} is not one {board.gfx_target} takes; valid: {', '.join(valid)} "
                   "(compute modes: aqua_vanjaram.c __aqua_vanjaram_is_valid_mode; /NPS1 may be left out)")
  xccs = XCCS_PER_PARTITION[compute](board.num_xcc)
  parts = board.num_xcc // xccs
  # kfd_device.c kfd_get_num_sdma_engines: the GPU's SDMA instances split over its nodes, two of them PCIe when the
  # GPU has XGMI (gmc_v9_0.c: GC 9.4.3 always does), the rest XGMI
  per_node = (board.num_sdma_engines + board.num_sdma_xgmi_engines) // parts
  return tuple(replace(board, compute_units=board.compute_units // parts, shader_engines=board.shader_engines // parts,
                       num_xcc=xccs, vram_bytes=board.vram_bytes // parts // 4096 * 4096,  # amdgpu_amdkfd_xcp_memory_size
                       num_sdma_engines=min(per_node, 2), num_sdma_xgmi_engines=per_node - min(per_node, 2),
                       compute_partition=compute, memory_partition=memory, xcp_id=i, num_xcps=parts)
               for i in range(parts))
