"""What is particular to having several emulated AMD boards (the driver suites run on each board through
tests/amd_boards.py, `python -m hcq.asm run` in test_asm_cli): smi on the RX 9070 XT (gfx1201) and the MI300X, the
boards' sysfs as amdgpu 6.12 presents them, and clear errors for an arch no board emulates or a GC/SDMA version the
driver does not speak."""
from __future__ import annotations
import dataclasses
import os
import re
import subprocess
import sys

import pytest

import hcq
from hcq.devstring import parse_dev
from hcq.drivers.amd.device import AMDDevice
from hcq.drivers.mock.amdgpu.gpu import BOARDS, boards_for
from hcq.drivers.mock.kfd import MockKFD, crc16, generate_gpu_id
from hcq.drivers.mock.os import MockKFDOS, mock_kfd_os
from hcq.errors import DevStringError, HCQError

from tests.amd_boards import ADD_ID as ADD_ID_GFX9  # x[i] += i, GCN-spelled: gfx9's runs on a partition of the MI300X here too


def run(*args: str, env: dict | None = None):
  return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})})


def test_smi_shows_the_rx9070xt():
  out = run("-m", "hcq.smi", env={"DEV": "MOCKKFD+AMD::gfx1201"})
  assert out.returncode == 0, out.stderr
  row = next(line for line in out.stdout.splitlines() if "gfx1201" in line)
  assert "AMD Radeon RX 9070 XT (emulated by hcq)" in row and "/16.0" in row
  assert "64 CUs" in out.stdout


@pytest.mark.parametrize("mode,nodes,cus,xccs", [("", 1, 304, 8), (":qpx", 4, 76, 2), (":cpx/nps4", 8, 38, 1)])
def test_smi_shows_the_mi300x_and_each_partition(mode, nodes, cus, xccs):
  """The emulated MI300X as smi sees it: a row per KFD node, each with its partition's mode, XCCs, CUs and memory
  partition; the partitions' amdgpu attributes come from the PCI device (partitions 1.. render through amdgpu_xcp
  platform devices), their VRAM from their own memory bank (192 GiB / partitions), their used VRAM unknown."""
  import json
  env = {"DEV": f"MOCKKFD+AMD::gfx942{mode}"}
  out = run("-m", "hcq.smi", env=env)
  assert out.returncode == 0, out.stderr
  rows = [line for line in out.stdout.splitlines() if "gfx942" in line]
  assert len(rows) == nodes and all("AMD Instinct MI300X (emulated by hcq)" in r and "0000:03:00.0" in r for r in rows)
  assert all(f"/{192 / nodes:.1f}" in r for r in rows)
  devices = json.loads(run("-m", "hcq.smi", "--json", env=env).stdout)["devices"]
  compute, memory = (mode[1:].upper().split("/") + ["NPS1"])[:2] if mode else ("SPX", "NPS1")
  for i, d in enumerate(devices):
    part = {"compute": compute, "memory": memory, "index": i if nodes > 1 else None, "count": nodes if nodes > 1 else None}
    assert (d["kfd"]["xcc"], d["kfd"]["compute_units"], d["kfd"]["partition"]) == (xccs, cus, part)
    assert d["memory_bytes"]["vram_total"] == (192 << 30) // nodes and (d["memory_bytes"]["vram_used"] is None) == (nodes > 1)
    assert d["nodes"] == [f"/dev/dri/card{i}", f"/dev/dri/renderD{128 + i}"] and d["bus_id"] == "0000:03:00.0"
    line = f"{cus} CUs on {xccs} XCD{'s' * (xccs > 1)}, " + (f"{compute}/{memory} partition {i} of {nodes}" if nodes > 1 else "partition SPX/NPS1")
    assert line in out.stdout


def test_mi300x_sysfs_as_amdgpu_presents_it():
  """amdgpu_gfx.c (Linux 6.12): available_compute_partition for 8 XCCs; kfd_topology.c: num_xcc and array_count x num_xcc
  in one node's properties (SPX: one node for the whole GPU)."""
  osl = MockKFDOS(MockKFD((BOARDS["gfx942"],)))
  dev = "/sys/class/drm/renderD128/device"
  assert [osl.read_text(f"{dev}/{f}") for f in ("current_compute_partition", "available_compute_partition", "current_memory_partition")] == \
    ["SPX\n", "SPX, DPX, QPX, CPX\n", "NPS1\n"]
  props = osl.read_text("/sys/devices/virtual/kfd/kfd/topology/nodes/1/properties")
  for line in ("num_xcc 8", "array_count 32", "simd_count 1216", "cu_per_simd_array 10", "wave_front_size 64", "gfx_target_version 90402",
               "location_id 768", "hive_id 0", "num_sdma_engines 2", "num_sdma_xgmi_engines 14"):
    assert f"{line}\n" in props, line
  assert len([n for n in osl.listdir("/sys/devices/virtual/kfd/kfd/topology/nodes") if n != "0"]) == 1
  assert not MockKFDOS(MockKFD((BOARDS["gfx1100"],))).exists(f"{dev}/current_compute_partition")   # a Radeon has no partitions


@pytest.mark.parametrize("arch,sdma_queues,cp_queues", [("gfx1100", 6, 8), ("gfx1201", 6, 4), ("gfx942", 8, 24)])
def test_queue_counts_as_amdkfd_reports_them(arch, sdma_queues, cp_queues):
  """kfd_topology.c (Linux 6.12) prints num_sdma_queues_per_engine as 8 less the 2 SDMA 6.x/7.x reserve
  (kfd_device.c kfd_device_info_set_sdma_info) and num_cp_queues as MEC 0's queues less amdgpu's kernel compute queues
  (amdgpu_amdkfd.c cp_queue_bitmap): 4 x 4 - 8 on GC 11.0.0, 2 x 4 - 4 on GC 12.0.1 (gfx_v12_0.c keeps half), 4 x 8 - 8
  on GC 9.4.3, for every partition of it."""
  for mode in (("SPX", "CPX") if arch == "gfx942" else (None,)):
    osl = mock_kfd_os(arch, mode)
    props = dict(line.split() for line in osl.read_text("/sys/devices/virtual/kfd/kfd/topology/nodes/1/properties").splitlines())
    assert (int(props["num_sdma_queues_per_engine"]), int(props["num_cp_queues"])) == (sdma_queues, cp_queues)


@pytest.mark.parametrize("mode,parts", [("DPX", 2), ("QPX/NPS4", 4), ("CPX", 8)])
def test_mi300x_partitions_as_amdgpu_and_amdkfd_present_them(mode, parts):
  """One KFD node per partition (kfd_device.c kgd2kfd_device_init), each with its XCCs (aqua_vanjaram.c
  __aqua_vanjaram_get_xcc_per_xcp: 8 / 2 / 4 / 8 per mode), its CUs (kfd_crat.c: CUs / num_nodes), array_count x its
  num_xcc, its share of VRAM (amdgpu_amdkfd_xcp_memory_size), location_id | node id and the PCI id as hive_id
  (kfd_topology.c, kfd_device.c), the 16 SDMA engines split (kfd_get_num_sdma_engines: at most 2 PCIe, the rest XGMI) and
  a distinct non-zero 16-bit gpu_id. Partition 0 renders through the PCI device, the others through amdgpu_xcp.N platform
  devices without amdgpu's attributes; the PCI device shows the mode and the whole GPU's VRAM."""
  osl = mock_kfd_os("gfx942", mode)
  topo = "/sys/devices/virtual/kfd/kfd/topology/nodes"
  assert sorted(osl.listdir(topo), key=int) == [str(i) for i in range(parts + 1)]
  xccs, gpu_ids = 8 // parts, set()
  for i in range(parts):
    props = dict(line.split() for line in osl.read_text(f"{topo}/{i + 1}/properties").splitlines())
    expect = {"num_xcc": xccs, "simd_count": 4 * 38 * xccs, "array_count": 4 * xccs, "location_id": 0x300 | i, "hive_id": 0x300,
              "drm_render_minor": 128 + i, "num_sdma_engines": 2, "num_sdma_xgmi_engines": 16 // parts - 2}
    assert {k: int(props[k]) for k in expect} == expect
    assert f"size_in_bytes {(192 << 30) // parts}\n" in osl.read_text(f"{topo}/{i + 1}/mem_banks/0/properties")
    gpu_ids.add(int(osl.read_text(f"{topo}/{i + 1}/gpu_id")))
    render = f"/sys/class/drm/renderD{128 + i}"
    assert ("/devices/platform/amdgpu_xcp." in osl.readlink(render)) == (i > 0)
    assert osl.exists(f"{render}/device/ip_discovery") == (i == 0)
  assert len(gpu_ids) == parts and all(0 < g < 1 << 16 for g in gpu_ids)
  # kfd_generate_gpu_id: lib/crc16.c's CRC (its check value: 0xBB3D for "123456789") over the node's PCI place, memory and XCCs
  assert crc16(b"123456789") == 0xBB3D
  assert gpu_ids == {generate_gpu_id(b, 3, set()) for b in boards_for("gfx942", mode)}
  pci = "/sys/bus/pci/devices/0000:03:00.0"
  compute, _, memory = mode.partition("/")
  assert (osl.read_text(f"{pci}/current_compute_partition"), osl.read_text(f"{pci}/current_memory_partition")) == (f"{compute}\n", f"{memory or 'NPS1'}\n")
  assert osl.read_text(f"{pci}/mem_info_vram_total") == f"{192 << 30}\n"


@pytest.mark.parametrize("dev,says", [
  ("MOCKKFD+AMD::gfx942:dpx/nps4", "partition mode 'DPX/NPS4' is not one gfx942 takes; valid: SPX/NPS1, DPX/NPS1, QPX/NPS1, QPX/NPS4, CPX/NPS1, CPX/NPS4"),
  ("MOCKKFD+AMD::gfx942:tpx", "partition mode 'TPX' is not one gfx942 takes; valid: SPX/NPS1, DPX/NPS1"),
  ("MOCKKFD+AMD::gfx942:spx/nps4", "partition mode 'SPX/NPS4' is not one gfx942 takes"),
  ("MOCKKFD+AMD::gfx1100:cpx", "gfx1100 (AMD Radeon RX 7900 XTX) has no partition modes; only MI300-class boards (gfx942) do"),
  ("MOCKKFD+AMD:8::gfx942:cpx", "device index 8, but the KFD topology has 8 AMD GPU nodes with arch gfx942 (indices 0-7)"),
  ("MOCKKFD+AMD:1::gfx942", "device index 1, but the KFD topology has 1 AMD GPU node with arch gfx942 (indices 0-0)"),
])
def test_a_partition_mode_or_index_the_board_lacks_fails_clearly(dev, says):
  with pytest.raises(HCQError, match=re.escape(says)):
    hcq.Device(dev)


def test_a_wrong_partition_spelling_lists_the_modes_and_no_cli_prints_a_traceback(tmp_path):
  with pytest.raises(DevStringError, match="unknown partition 'xpx'.*valid partitions: SPX, DPX, TPX, QPX, CPX"):
    parse_dev("MOCKKFD+AMD::gfx942:xpx")
  out = run("-m", "hcq.smi", env={"DEV": "MOCKKFD+AMD::gfx942:dpx/nps4"})
  assert out.returncode != 0 and "valid: SPX/NPS1, DPX/NPS1" in out.stderr and "Traceback" not in out.stderr
  (tmp_path / "add.s").write_text(ADD_ID_GFX9)
  out = run("-m", "hcq.asm", "run", str(tmp_path / "add.s"), "--arch", "gfx942", "--dev", "MOCKKFD+AMD:9::gfx942:cpx")
  assert out.returncode == 2 and "device index 9" in out.stderr and "Traceback" not in out.stderr


def test_spellings_of_one_partition_open_one_device():
  """The index 0 and the board's own mode (SPX/NPS1) may be left out; the mode's spelling does not matter."""
  assert hcq.Device("MOCKKFD+AMD:0::gfx942:spx/nps1") is hcq.Device("MOCKKFD+AMD::gfx942")
  cpx = hcq.Device("mockkfd+amd:2::gfx942:Cpx")
  assert cpx is hcq.Device("MOCKKFD+AMD:2:LLVM:gfx942:CPX/NPS1") and str(cpx) == "MOCKKFD+AMD:2::gfx942:CPX"
  assert cpx.node.index == 3 and cpx.partition == "CPX/NPS1" and cpx is not hcq.Device("MOCKKFD+AMD:2::gfx942:cpx/nps4")
  # the partitions of one emulated GPU are nodes of one machine, as on real hardware
  assert hcq.Device("MOCKKFD+AMD:6::gfx942:cpx").os is hcq.Device("MOCKKFD+AMD:7::gfx942:cpx").os


def test_on_a_real_kfd_the_mode_the_gpu_is_in_need_not_be_named(monkeypatch):
  """canonical_spec on a KFD topology (the emulated machine standing in for the host's sysfs): a GPU in CPX mode is the
  same node whether a DEV string names CPX or not, so every spelling opens one Device; a mode it is not in stays named
  (and opening it is refused)."""
  import hcq.drivers.os as host_os
  machine = mock_kfd_os("gfx942", "CPX")
  monkeypatch.setattr(host_os, "HostOS", lambda: machine)
  canon = lambda text: str(AMDDevice.canonical_spec(parse_dev(text)))
  assert canon("AMD") == canon("KFD+AMD::gfx942") == canon("KFD+AMD::gfx942:cpx") == canon("KFD+AMD:0::gfx942:CPX/NPS1") == "KFD+AMD::gfx942"
  assert canon("KFD+AMD:2::gfx942:cpx") == canon("AMD:2") == "KFD+AMD:2::gfx942"
  assert canon("KFD+AMD::gfx942:spx") == "KFD+AMD::gfx942:SPX" and canon("KFD+AMD::gfx942:cpx/nps4") == "KFD+AMD::gfx942:CPX/NPS4"


def test_a_partition_mode_the_gpu_is_not_in_is_refused_with_how_to_switch():
  """On a real GPU the mode is root's to set: a DEV string naming another mode than sysfs shows is an error, not a switch."""
  with pytest.raises(HCQError, match=r"in partition mode SPX/NPS1, not CPX; root switches it \(echo MODE > .*/current_compute_partition\)"):
    AMDDevice(parse_dev("MOCKKFD+AMD::gfx942:cpx"), os_layer=mock_kfd_os("gfx942"))


def test_asm_run_on_a_cpx_partition(tmp_path):
  """hcq.asm run on partition 5 of the emulated MI300X in CPX mode: one XCC's node, wave64, the exact result."""
  (tmp_path / "add.s").write_text(ADD_ID_GFX9)
  out = run("-m", "hcq.asm", "run", str(tmp_path / "add.s"), "--arch", "gfx942", "--dev", "MOCKKFD+AMD:5::gfx942:cpx",
            "--arg", "x=buffer:u32:128:arange", "--block", "128", "--show", "128")
  assert out.returncode == 0, out.stderr
  assert "code object for gfx942 on MOCKKFD+AMD:5::gfx942:CPX (emulated)" in out.stdout
  assert "x: [" + ", ".join(str(2 * i) for i in range(128)) + "]" in out.stdout


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
