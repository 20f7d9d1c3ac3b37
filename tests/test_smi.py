"""hcq.smi read through recorded sysfs trees (tests/fixtures/sysfs): the values, the views, and the
no-GPU and no-permission paths, all in-process through the same OS layer the drivers use."""
from __future__ import annotations
import json
import shutil
from pathlib import Path

import pytest

from hcq.drivers.mock.amdgpu.gpu import BOARDS
from hcq.drivers.os import FixtureOS
from hcq.smi import amd, amdgpu_ids, cli, errors, jsonout, nvidia, processes, snapshot, source, table
from hcq.smi.errors import SmiError
from hcq.smi.watch import CLEAR_SCREEN_END, HOME, watch

FIXTURES = Path(__file__).parent / "fixtures" / "sysfs"
GIB = 1024 ** 3


def board(name: str, *denied: str) -> FixtureOS:
  return FixtureOS(str(FIXTURES / name), denied)


# --- pieces ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("version,name", [(110000, "gfx1100"), (90402, "gfx942"), (90010, "gfx90a"), (100300, "gfx1030"),
                                          (110501, "gfx1151"), (90400, "gfx940")])
def test_gfx_target_names(version, name):
  assert amd.gfx_target(version) == name


def test_bus_id_from_kfd_location():
  assert amd.bus_id(0, 0x0300) == "0000:03:00.0"
  assert amd.bus_id(1, (0xc1 << 8) | (0x1f << 3) | 7) == "0001:c1:1f.7"


def test_current_dpm_level():
  assert amd.current_dpm_level("0: 500Mhz \n1: 1966Mhz *\n2: 2526Mhz \n") == 1966
  assert amd.current_dpm_level("S: 19Mhz *\n0: 500Mhz\n") == 19
  assert amd.current_dpm_level("0: 500Mhz \n") is None and amd.current_dpm_level(None) is None


def test_amdgpu_ids_lookup_exact_revision_then_revision_00():
  fx = board("rx7900xtx")
  assert amdgpu_ids.lookup(fx, 0x744C, 0xC8) == "AMD Radeon RX 7900 XTX"
  assert amdgpu_ids.lookup(fx, 0x744C, 0xCC) == "AMD Radeon RX 7900 XT"
  assert amdgpu_ids.lookup(fx, 0x744C, 0x01) is None  # no revision-00 line for Navi31
  assert amdgpu_ids.lookup(fx, 0x74A1, 0x03) == "AMD Instinct MI300X"
  assert amdgpu_ids.lookup(board("no-gpu"), 0x744C, 0xC8) is None  # no libdrm installed


def test_nvidia_version_line_formats():
  assert nvidia.parse_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.120  Fri Sep 13 10:10:01 UTC 2024\n") == "550.120"
  assert nvidia.parse_version("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  535.104.05  Release Build  "
                              "(dvs-builder@U16-I3-B03-4-3)  Tue Aug 22 2023\n") == "535.104.05"


def test_fdinfo_memory_legacy_and_resident_keys():
  legacy = "drm-driver:\tamdgpu\ndrm-pdev:\t0000:03:00.0\ndrm-client-id:\t17\ndrm-memory-vram:\t1024 KiB\ndrm-memory-gtt: \t2 MiB\n"
  assert processes.fdinfo_memory(legacy) == ("0000:03:00.0", "17", {"vram": 1 << 20, "gtt": 2 << 20})
  modern = "drm-pdev:\t0000:03:00.0\ndrm-client-id:\t3\ndrm-total-vram:\t8 KiB\ndrm-resident-vram:\t4 KiB\n"
  assert processes.fdinfo_memory(modern)[2] == {"vram": 4096}


# --- boards ---------------------------------------------------------------------------------------

def test_rx7900xtx_reads_every_field():
  snap = snapshot.take(board("rx7900xtx"))
  assert snapshot.exit_code(snap) == errors.OK and not snap.notes
  (d,) = snap.devices
  assert (d.name, d.name_source, d.arch, d.bus_id) == ("AMD Radeon RX 7900 XTX", "amdgpu.ids", "gfx1100", "0000:03:00.0")
  assert (d.vendor_id, d.device_id, d.revision) == (0x1002, 0x744C, 0xC8)
  assert (d.kfd_node, d.gpu_id, d.compute_units, d.xcc) == (1, 45700, 96, 1)
  assert d.nodes == ["/dev/dri/card1", "/dev/dri/renderD128"]
  assert (d.vram_used_bytes, d.vram_total_bytes) == (1592786944, 25753026560)
  assert (d.gtt_used_bytes, d.gtt_total_bytes) == (52477952, 33658998784)
  assert d.busy_percent == 7
  assert (d.temp_edge_c, d.temp_junction_c, d.temp_memory_c) == (41.0, 48.0, 56.0)
  assert (d.power_w, d.power_kind, d.power_cap_w) == (29.0, "average", 339.0)
  assert (d.sclk_mhz, d.mclk_mhz, d.fan_rpm) == (1966, 1249, 1046)
  assert d.link == "16.0 GT/s PCIe x16" and d.vbios == "113-D7020100-102"
  assert d.firmware["mec"] == "0x00000226" and d.firmware["smc"] == "0x004e6f00"
  assert (d.driver, d.driver_version) == ("amdgpu", "in-kernel (6.8.0-49-generic)")
  assert not d.emulated and not d.unavailable


def test_mi300x_two_boards_without_edge_sensor_or_fan():
  snap = snapshot.take(board("mi300x"))
  busy, idle = snap.devices
  assert [d.index for d in snap.devices] == [0, 1]
  assert (busy.name, busy.name_source, busy.arch) == ("AMD Instinct MI300X OAM", "product_name", "gfx942")
  assert (busy.bus_id, idle.bus_id) == ("0000:05:00.0", "0000:26:00.0")
  assert (busy.compute_units, busy.xcc, busy.kfd_node, idle.kfd_node) == (304, 8, 2, 3)
  assert (busy.compute_partition, busy.memory_partition) == ("SPX", "NPS1")   # one KFD node of all 8 XCCs
  assert busy.vram_total_bytes == 206141652992 and busy.vram_used_bytes == 150 * GIB
  assert busy.temp_edge_c is None and busy.temp_junction_c == 53.0 and busy.temp_memory_c == 47.0  # GC 9.4.3 hides temp1
  assert (busy.power_w, busy.power_kind, busy.power_cap_w) == (163.0, "input", 750.0)
  assert busy.fan_rpm is None  # passively cooled OAM
  assert (busy.sclk_mhz, idle.sclk_mhz, busy.mclk_mhz) == (2100, 500, 1300)  # from pp_dpm_* (no freq*_input)
  assert busy.uuid == "1d82c5a0e3b3f4a1" and busy.driver_version == "6.8.5"
  assert idle.nodes == ["/dev/dri/card2", "/dev/dri/renderD136"]


def test_vram_falls_back_to_the_kfd_memory_bank(tmp_path):
  root = tmp_path / "board"
  shutil.copytree(FIXTURES / "rx7900xtx", root, symlinks=True)
  (root / "sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/0000:02:00.0/0000:03:00.0/mem_info_vram_total").unlink()
  (d,) = snapshot.take(FixtureOS(str(root))).devices
  assert d.vram_total_bytes == 25753026560


def test_unknown_board_is_named_honestly(tmp_path):
  root = tmp_path / "board"
  shutil.copytree(FIXTURES / "rx7900xtx", root, symlinks=True)
  (root / "usr/share/libdrm/amdgpu.ids").unlink()
  (d,) = snapshot.take(FixtureOS(str(root))).devices
  assert (d.name, d.name_source) == ("unknown AMD GPU (device 0x744c)", "unknown")


def test_nvidia_shows_procfs_facts_and_says_why_rm_fields_are_missing():
  snap = snapshot.take(board("rtx4090"))  # a recorded 550 driver: the RM's ABI is another branch's, so no control is made
  (d,) = snap.devices
  assert (d.vendor, d.name, d.bus_id, d.driver_version) == ("nvidia", "NVIDIA GeForce RTX 4090", "0000:01:00.0", "550.120")
  assert d.uuid.startswith("GPU-") and d.vbios == "95.02.3c.40.b2" and d.nodes == ["/dev/nvidia0"]
  assert d.vram_total_bytes is None and "RM not reachable" in d.unavailable["memory"] and "550.120" in d.unavailable["memory"]
  assert "open 580 headers" in d.unavailable["power"] and d.power_w is None and d.sclk_mhz is None and d.fan_rpm is None
  assert any(n.kind == "limitation" and "power, clocks and fans" in n.message for n in snap.notes)
  assert snapshot.exit_code(snap) == errors.OK


# --- processes ------------------------------------------------------------------------------------

def test_processes_with_memory_from_fdinfo():
  snap = snapshot.take(board("rx7900xtx"), with_processes=True)
  by_pid = {p.pid: p for p in snap.processes}
  assert sorted(by_pid) == [999, 2718, 4242]  # pid 1 holds no GPU file
  py = by_pid[4242]
  assert (py.name, py.devices, py.nodes) == ("python3", [0], ["/dev/dri/renderD128", "/dev/kfd"])
  assert (py.vram_bytes, py.gtt_bytes) == (1 * GIB, 16 * 1024 ** 2)  # two fds of one DRM client counted once
  assert by_pid[999].vram_bytes is None  # no fdinfo recorded: unknown, not zero


def test_processes_of_other_users_are_counted_not_hidden_silently():
  snap = snapshot.take(board("rx7900xtx", "/proc/999/fd"), with_processes=True)
  assert 999 not in {p.pid for p in snap.processes} and snap.processes_hidden == 1
  assert any("1 process could not be inspected" in n.message for n in snap.notes)
  assert snapshot.exit_code(snap) == errors.OK  # normal for a non-root user


def test_processes_on_two_boards_and_driver_wide_holders():
  snap = snapshot.take(board("mi300x"), with_processes=True)
  by_pid = {p.pid: p for p in snap.processes}
  assert by_pid[31337].devices == [0, 1] and by_pid[31337].vram_bytes == 150 * GIB
  assert by_pid[5150].devices == [] and by_pid[5150].nodes == ["/dev/kfd"]
  only_1 = snapshot.select(snapshot.take(board("mi300x"), with_processes=True), "1")
  assert {p.pid for p in only_1.processes} == {31337, 5150}


def test_nvidia_processes():
  (p,) = snapshot.take(board("rtx4090"), with_processes=True).processes
  assert (p.pid, p.name, p.devices, p.vram_bytes) == (777, "python3", [0], None)
  assert p.nodes == ["/dev/nvidia-uvm", "/dev/nvidia0", "/dev/nvidiactl"]


# --- selection ------------------------------------------------------------------------------------

@pytest.mark.parametrize("sel,indices", [("1", [1]), ("0,1", [0, 1]), ("0000:26:00.0", [1]), ("26:00.0", [1]), ("gfx942", [0, 1]),
                                         ("amd", [0, 1]), ("mi300x", [0, 1]), ("nvidia", [])])
def test_select_by_index_bus_arch_vendor_or_name(sel, indices):
  snap = snapshot.select(snapshot.take(board("mi300x")), sel)
  assert [d.index for d in snap.devices] == indices
  assert snapshot.exit_code(snap) == (errors.OK if indices else errors.NO_MATCH)


def test_select_nothing_lists_what_was_found():
  snap = snapshot.select(snapshot.take(board("mi300x")), "7")
  assert snap.notes[0].kind == "no_match" and "0 AMD Instinct MI300X OAM, 1 AMD Instinct MI300X OAM" in snap.notes[0].message


# --- no GPU, no permission ------------------------------------------------------------------------

def test_no_gpu_says_what_was_looked_for():
  snap = snapshot.take(board("no-gpu"))
  assert snap.devices == [] and snapshot.exit_code(snap) == errors.NO_GPU
  assert snap.notes[0].message == "no GPU found (/dev/kfd absent, no NVIDIA driver)"
  assert table.render(snap)[-1] == "no GPU found (/dev/kfd absent, no NVIDIA driver)"


def test_kfd_denied_shows_the_gpu_and_the_fix():
  snap = snapshot.take(board("rx7900xtx", "/dev/kfd"))
  assert len(snap.devices) == 1  # sysfs needs no group: still shown
  assert [n.message for n in snap.notes if n.kind == "permission"] == [
    "permission denied on /dev/kfd: add your user to the render group"]
  assert snapshot.exit_code(snap) == errors.PERMISSION


def test_kfd_node_denied_by_device_cgroup():
  node = "/sys/devices/virtual/kfd/kfd/topology/nodes/2"
  snap = snapshot.take(board("mi300x", node))
  assert [d.bus_id for d in snap.devices] == ["0000:26:00.0"]
  assert any(n.path == node + "/properties" and "device cgroup" in n.message for n in snap.notes)
  assert snapshot.exit_code(snap) == errors.PERMISSION


def test_nothing_visible_because_denied_is_a_permission_error_not_no_gpu():
  snap = snapshot.take(board("mi300x", "/sys/devices/virtual/kfd/kfd/topology/nodes"))
  assert snap.devices == [] and snapshot.exit_code(snap) == errors.PERMISSION
  assert snap.notes[0].message.startswith("no GPU visible (permission denied on /sys/devices/virtual/kfd/kfd/topology/nodes")


def test_unreadable_sensor_is_missing_with_its_reason():
  hwmon = "/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/0000:02:00.0/0000:03:00.0/hwmon/hwmon2/power1_average"
  (d,) = snapshot.take(board("rx7900xtx", hwmon)).devices  # denied where the file is; read through /sys/class/drm
  assert d.power_w is None
  assert d.unavailable == {"/sys/class/drm/renderD128/device/hwmon/hwmon2/power1_average": "read failed: EACCES"}


# --- views ----------------------------------------------------------------------------------------

def test_table_one_shot():
  lines = table.render(snapshot.take(board("mi300x"), with_processes=True))
  text = "\n".join(lines)
  assert lines[0].startswith("hcq.smi ") and "amdgpu 6.8.5" in lines[0]
  assert lines[1].split()[:3] == ["GPU", "NAME", "ARCH"]
  row = next(line for line in lines if line.startswith("0 "))
  for cell in ("AMD Instinct MI300X OAM", "gfx942", "0000:05:00.0", "150.0/192.0", "100%", "-/53/47", "163/750", "2100", "1300"):
    assert cell in row, cell
  assert "304 CUs on 8 XCDs" in text and "vbios 113-M3000100-102" in text
  assert "PROCESSES" in text and "pt_main_thread" in text
  assert text.isascii()


def test_json_schema_is_stable():
  snap = snapshot.take(board("rx7900xtx"), with_processes=True)
  doc = json.loads(jsonout.render(snap, snapshot.exit_code(snap)))
  assert doc["schema_version"] == 1 and doc["exit_code"] == 0
  assert set(doc) == {"schema_version", "tool", "timestamp", "root", "selection", "exit_code", "drivers", "devices", "processes",
                      "processes_hidden", "notes"}
  (dev,) = doc["devices"]
  assert set(dev) == {"index", "vendor", "name", "name_source", "emulated", "arch", "bus_id", "uuid", "pci", "nodes", "kfd",
                      "memory_bytes", "busy_percent", "temperature_c", "power_w", "clocks_mhz", "fan_rpm", "driver", "vbios",
                      "firmware", "unavailable", "emulated_state"}
  assert dev["pci"] == {"vendor_id": "0x1002", "device_id": "0x744c", "revision": "0xc8", "link": "16.0 GT/s PCIe x16"}
  assert dev["memory_bytes"]["vram_total"] == 25753026560 and dev["temperature_c"]["junction"] == 48.0
  assert dev["power_w"] == {"current": 29.0, "kind": "average", "cap": 339.0} and dev["emulated"] is False
  assert set(doc["drivers"]) == {"amdgpu", "nvidia"} and doc["drivers"]["amdgpu"]["control_access"] is True
  assert {p["pid"] for p in doc["processes"]} == {999, 2718, 4242}
  # The same keys on a board that lacks sensors: nulls, never missing keys.
  idle = json.loads(jsonout.render(snapshot.take(board("rtx4090")), 0))["devices"][0]
  assert set(idle) == set(dev) and idle["temperature_c"] == {"edge": None, "junction": None, "memory": None}


def test_watch_refreshes_in_place_and_rereads(tmp_path):
  root = tmp_path / "board"
  shutil.copytree(FIXTURES / "rx7900xtx", root, symlinks=True)
  busy = root / "sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/0000:02:00.0/0000:03:00.0/gpu_busy_percent"
  fx = FixtureOS(str(root))

  class Screen:
    def __init__(self): self.text = ""
    def write(self, s): self.text += s
    def flush(self): pass
    def isatty(self): return False

  out = Screen()
  naps = []
  def sleep(seconds):  # between refreshes the GPU gets busy
    naps.append(seconds)
    busy.write_text("93\n")

  code = watch(lambda n: (table.render(snapshot.take(fx)), 0), 0.5, 2, out=out, sleep=sleep)
  assert code == 0 and len(naps) == 1 and 0 <= naps[0] <= 0.5
  frames = out.text.split(HOME)[1:]
  assert len(frames) == 2 and all(f.endswith(CLEAR_SCREEN_END) for f in frames)
  assert " 7% " in frames[0] and " 93% " in frames[1]
  assert all(line.endswith("\x1b[K") for line in frames[0].split("\n")[:-1])  # each line clears its old tail


# --- DEV and the emulated GPU --------------------------------------------------------------------

def test_dev_selects_vendor_and_arch_and_reports_bad_parts():
  src = source.choose({"DEV": "NV", "HCQ_SYSROOT": str(FIXTURES / "mi300x")})
  assert src.vendors == ("nvidia",) and src.arch is None
  snap = snapshot.take(src.os, vendors=src.vendors)
  assert snap.devices == [] and snap.notes[0].message == "no GPU found (no NVIDIA driver)"
  assert source.choose({"DEV": "KFD+AMD::gfx942"}).arch == "gfx942"
  with pytest.raises(SmiError, match="valid devices: AMD, NV, CPU") as e:
    source.choose({"DEV": "INTEL"})
  assert e.value.code == errors.USAGE
  with pytest.raises(SmiError, match="valid interfaces: KFD, MOCKKFD"):
    source.choose({"DEV": "CUDA+AMD"})
  with pytest.raises(SmiError, match="both choose the machine") as e:
    source.choose({"DEV": "MOCKKFD+AMD", "HCQ_SYSROOT": str(FIXTURES / "mi300x")})
  assert e.value.code == errors.USAGE


def test_emulated_flag_comes_from_the_os_object():
  class EmulatedTree(FixtureOS):  # any OS object that says its devices are emulated
    emulated = True
  snap = snapshot.take(EmulatedTree(str(FIXTURES / "rx7900xtx")))
  assert snap.devices[0].emulated and "[emulated]" in "\n".join(table.render(snap))
  assert snap.devices[0].driver_version == "emulated (hcq.drivers.mock)"


@pytest.mark.parametrize("arch", list(BOARDS))   # each arch's own board: one device
def test_emulated_gpu_in_use_shows_its_live_state(arch):
  import hcq
  dev = hcq.Device(f"MOCKKFD+AMD::{arch}")
  dev.alloc(1 << 20, "device")
  snap = snapshot.take(dev.os)  # the same OS object the driver uses: what a program sees of its own GPU
  (d,) = snap.devices
  assert d.emulated and d.arch == arch and d.vendor == "amd"
  assert d.emulated_state["queues"] >= 1 and d.emulated_state["buffers"] >= 1 and d.vram_used_bytes >= 1 << 20
  assert any("other processes do not publish" in n.message for n in snap.notes)
  doc = json.loads(jsonout.render(snap, snapshot.exit_code(snap)))
  assert doc["devices"][0]["emulated"] is True and doc["devices"][0]["emulated_state"]["queues"] >= 1
  assert "emulated: queues" in "\n".join(table.render(snap))


def test_garbage_in_every_file_is_survived(tmp_path):
  """Kernels differ and files change under us: whatever a file holds, smi reads on and never crashes."""
  for board_name in ("rx7900xtx", "mi300x", "rtx4090"):
    for keep_topology in (False, True):  # with the topology kept, the GPUs are found and their attributes are garbage
      root = tmp_path / f"{board_name}-{keep_topology}"
      shutil.copytree(FIXTURES / board_name, root, symlinks=True)
      for path in root.rglob("*"):
        if keep_topology and path.name == "properties": continue
        if path.is_file() and not path.is_symlink(): path.write_text("garbage: \x00 0xZZ 12abc\n*\n: ,,\n")
      snap = snapshot.take(FixtureOS(str(root)), with_processes=True)
      # NVIDIA GPUs are the folders of /proc/driver/nvidia/gpus, AMD GPUs the topology nodes with SIMDs.
      expected = len(snapshot.take(board(board_name)).devices) if keep_topology or board_name == "rtx4090" else 0
      assert len(snap.devices) == expected
      json.loads(jsonout.render(snap, snapshot.exit_code(snap)))
      table.render(snap)


# --- top level ------------------------------------------------------------------------------------

def test_internal_error_is_one_line_without_traceback(monkeypatch, capsys):
  def broken(*a, **k): raise RuntimeError("sensor exploded")
  monkeypatch.setattr(snapshot, "take", broken)
  monkeypatch.delenv("HCQ_DEBUG", raising=False)
  assert cli.main([]) == errors.INTERNAL
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and "internal error: RuntimeError: sensor exploded" in err and "Traceback" not in err


def test_bad_sysroot_is_a_usage_error(monkeypatch, capsys):
  monkeypatch.setenv("HCQ_SYSROOT", str(FIXTURES / "no-such-board"))
  assert cli.main([]) == errors.USAGE
  assert "HCQ_SYSROOT=" in capsys.readouterr().err
