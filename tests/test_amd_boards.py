"""What is particular to having several emulated AMD boards (the driver suites run on each board through
tests/amd_boards.py, `python -m hcq.asm run` in test_asm_cli): smi on the RX 9070 XT (gfx1201) and the MI300X, the
boards' sysfs as amdgpu 6.12 presents them, and clear errors for an arch no board emulates or a GC/SDMA version the
driver does not speak."""
from __future__ import annotations
import dataclasses
import os
import subprocess
import sys

import pytest

import hcq
from hcq.devstring import parse_dev
from hcq.drivers.amd.device import AMDDevice
from hcq.drivers.mock.amdgpu.gpu import BOARDS
from hcq.drivers.mock.kfd import MockKFD
from hcq.drivers.mock.os import MockKFDOS
from hcq.errors import HCQError

from tests.test_asm_cli import ADD_ID  # x[i] += i in each ISA; gfx9's runs on a partition of the MI300X here too
ADD_ID_GFX9 = ADD_ID["gfx9"]


def run(*args: str, env: dict | None = None):
  return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})})


def test_smi_shows_the_rx9070xt():
  out = run("-m", "hcq.smi", env={"DEV": "MOCKKFD+AMD::gfx1201"})
  assert out.returncode == 0, out.stderr
  row = next(line for line in out.stdout.splitlines() if "gfx1201" in line)
  assert "AMD Radeon RX 9070 XT (emulated by hcq)" in row and "/16.0" in row
  assert "64 CUs" in out.stdout


def test_smi_shows_the_mi300x_and_its_partition():
  """The emulated MI300X as smi sees it: 304 CUs on 8 XCDs, the SPX/NPS1 partition amdgpu's sysfs reports, one KFD node."""
  import json
  out = run("-m", "hcq.smi", env={"DEV": "MOCKKFD+AMD::gfx942"})
  assert out.returncode == 0, out.stderr
  row = next(line for line in out.stdout.splitlines() if "gfx942" in line)
  assert "AMD Instinct MI300X (emulated by hcq)" in row and "/192.0" in row
  assert "304 CUs on 8 XCDs, partition SPX/NPS1" in out.stdout
  (d,) = json.loads(run("-m", "hcq.smi", "--json", env={"DEV": "MOCKKFD+AMD::gfx942"}).stdout)["devices"]
  assert d["kfd"]["xcc"] == 8 and d["kfd"]["partition"] == {"compute": "SPX", "memory": "NPS1"}


def test_mi300x_sysfs_as_amdgpu_presents_it():
  """amdgpu_gfx.c (Linux 6.12): available_compute_partition for 8 XCCs; kfd_topology.c: num_xcc and array_count x num_xcc
  in one node's properties (SPX: one node for the whole GPU)."""
  b, osl = BOARDS["gfx942"], MockKFDOS(MockKFD((BOARDS["gfx942"],)))
  dev = "/sys/class/drm/renderD128/device"
  assert [osl.read_text(f"{dev}/{f}") for f in ("current_compute_partition", "available_compute_partition", "current_memory_partition")] == \
    ["SPX\n", "SPX, DPX, QPX, CPX\n", "NPS1\n"]
  props = osl.read_text("/sys/devices/virtual/kfd/kfd/topology/nodes/1/properties")
  for line in ("num_xcc 8", "array_count 32", "simd_count 1216", "cu_per_simd_array 10", "wave_front_size 64", "gfx_target_version 90402"):
    assert f"{line}\n" in props, line
  assert len([n for n in osl.listdir("/sys/devices/virtual/kfd/kfd/topology/nodes") if n != "0"]) == 1
  assert not MockKFDOS(MockKFD((BOARDS["gfx1100"],))).exists(f"{dev}/current_compute_partition")   # a Radeon has no partitions


def test_an_arch_without_a_board_is_named_with_the_boards():
  from hcq.drivers.mock.amdgpu.gpu import board_for
  with pytest.raises(HCQError, match="no emulated AMD board for gfx90a; MOCKKFD\\+AMD emulates gfx1100, gfx1201, gfx942"):
    board_for("gfx90a")
  out = run("-m", "hcq.smi", env={"DEV": "MOCKKFD+AMD::gfx90a"})
  assert out.returncode != 0 and "unknown arch 'gfx90a'" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("arch", list(BOARDS))
def test_ip_discovery_and_topology_as_amdgpu_presents_them(arch):
  """GC and SDMA0 versions under ip_discovery (amdgpu_discovery.c sysfs), the topology's gfx_target_version, the
  memory bank: what the driver picks its dialects from, from the board spec."""
  b, osl = BOARDS[arch], MockKFDOS(MockKFD((BOARDS[arch],)))
  root = "/sys/class/drm/renderD128/device/ip_discovery/die/0"
  for block, version in (("GC", b.gc_version), ("SDMA0", b.sdma_version)):
    assert tuple(int(osl.read_text(f"{root}/{block}/0/{n}")) for n in ("major", "minor", "revision")) == version
  props = osl.read_text("/sys/devices/virtual/kfd/kfd/topology/nodes/1/properties")
  assert f"gfx_target_version {b.gfx_target_version}\n" in props and f"max_engine_clk_fcompute {b.max_engine_clk_mhz}\n" in props
  assert f"size_in_bytes {b.vram_bytes}\n" in osl.read_text("/sys/devices/virtual/kfd/kfd/topology/nodes/1/mem_banks/0/properties")


def test_rx9070xt_facts():
  """The gfx1201 board: GC 12.0.1 -> gfx_target_version 120001 (kfd_device.c), SDMA 7.0.1, Navi48's 64 CUs in 4 engines."""
  b = BOARDS["gfx1201"]
  assert (b.gfx_target_version, b.gc_version, b.sdma_version, b.family) == (120001, (12, 0, 1), (7, 0, 1), "gfx12")
  assert (b.compute_units, b.shader_engines, b.shader_arrays_per_engine, b.vram_bytes, b.device_id) == (64, 4, 2, 16 << 30, 0x7550)


def test_mi300x_facts():
  """The gfx942 board: GC 9.4.3 -> gfx_target_version 90402 with SDMA 4.4.2 (kfd_device.c), 304 CUs over 8 XCCs, 192
  GiB, wave64; a 100 MHz timestamp (soc15_get_xclk for MP1 13.0.6); CWSR as kfd_queue_ctx_save_restore_size sizes it per
  XCC: 38 CUs x 0x95000 bytes, min(38 x 40, 4 x 512) = 1520 waves of 8-byte control stack entries + 48 (one page), 32
  debugger bytes per wave; the buffer holds 8 of them."""
  b = BOARDS["gfx942"]
  assert (b.gfx_target_version, b.gc_version, b.sdma_version, b.family, b.num_xcc) == (90402, (9, 4, 3), (4, 4, 2), "gfx9", 8)
  assert (b.compute_units, b.vram_bytes, b.device_id, b.wave_front_size, b.timestamp_hz) == (304, 192 << 30, 0x74a1, 64, 100_000_000)
  dev = hcq.Device("MOCKKFD+AMD::gfx942")
  wg_data, ctl_stack, debug = 38 * 0x95000, 4096 * 3, 1520 * 32
  assert dev._cwsr_sizes() == (wg_data + ctl_stack, ctl_stack, ((wg_data + ctl_stack + debug) * 8 + 4095) // 4096 * 4096)
  assert dev.timestamp_frequency == 100_000_000 and dev.dialect.name == "gfx9" and dev.sdma_major == 4


@pytest.mark.parametrize("base,change,says", [
  ("gfx1201", dict(gfx_target="gfx1030", gfx_target_version=100300, gc_version=(10, 3, 0)), "gfx1030: no PM4 dialect for gfx10; this driver has gfx12, gfx11, gfx9"),
  ("gfx1201", dict(sdma_version=(5, 2, 0)), "SDMA 5.x; this driver builds SDMA 4.4, 6.0 and 7.0 packets"),
  ("gfx1201", dict(gc_version=(13, 0, 0)), "GC 13.0.0; the gfx12 dialect is written for GC 12.x"),
  ("gfx942", dict(gc_version=(9, 4, 2)), "GC 9.4.2; the gfx9 dialect is written for GC 9.4.3, 9.4.4"),   # MI200: not checked against its sources
])
def test_a_gc_or_sdma_version_the_driver_does_not_speak_fails_clearly(base, change, says):
  board = dataclasses.replace(BOARDS[base], **change)
  with pytest.raises(HCQError, match=says.replace(".", "\\.")):
    AMDDevice(parse_dev("MOCKKFD+AMD"), os_layer=MockKFDOS(MockKFD((board,))))
