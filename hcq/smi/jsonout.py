"""The --json view: a stable, versioned document (schema in docs/smi.md).

Every key is always present; a value this machine does not expose is null. Adding keys keeps
SCHEMA_VERSION; renaming, removing or changing the meaning of one bumps it.
"""
from __future__ import annotations
import json

from hcq.smi.model import Device, DriverInfo, Process, Snapshot

SCHEMA_VERSION = 1


def hex_id(value: int | None, digits: int = 4) -> str | None:
  return None if value is None else f"0x{value:0{digits}x}"


def device(d: Device) -> dict:
  return {
    "index": d.index, "vendor": d.vendor, "name": d.name, "name_source": d.name_source, "emulated": d.emulated,
    "arch": d.arch, "bus_id": d.bus_id, "uuid": d.uuid,
    "pci": {"vendor_id": hex_id(d.vendor_id), "device_id": hex_id(d.device_id), "revision": hex_id(d.revision, 2), "link": d.link},
    "nodes": list(d.nodes),
    "kfd": None if d.kfd_node is None else {"node": d.kfd_node, "gpu_id": d.gpu_id, "compute_units": d.compute_units, "xcc": d.xcc,
                                            "partition": {"compute": d.compute_partition, "memory": d.memory_partition,
                                                          "index": d.partition_index, "count": d.partition_count}},
    "memory_bytes": {"vram_used": d.vram_used_bytes, "vram_total": d.vram_total_bytes, "gtt_used": d.gtt_used_bytes, "gtt_total": d.gtt_total_bytes},
    "busy_percent": d.busy_percent,
    "temperature_c": {"edge": d.temp_edge_c, "junction": d.temp_junction_c, "memory": d.temp_memory_c},
    "power_w": {"current": d.power_w, "kind": d.power_kind, "cap": d.power_cap_w},
    "clocks_mhz": {"sclk": d.sclk_mhz, "mclk": d.mclk_mhz},
    "fan_rpm": d.fan_rpm,
    "driver": {"name": d.driver, "version": d.driver_version},
    "vbios": d.vbios,
    "firmware": dict(d.firmware),
    "unavailable": dict(d.unavailable),
    "emulated_state": None if d.emulated_state is None else dict(d.emulated_state),
  }


def driver(d: DriverInfo) -> dict:
  return {"loaded": d.loaded, "version": d.version, "control_node": d.control_node, "control_present": d.control_present,
          "control_access": d.control_access}


def process(p: Process) -> dict:
  return {"pid": p.pid, "name": p.name, "devices": list(p.devices), "nodes": list(p.nodes), "vram_bytes": p.vram_bytes, "gtt_bytes": p.gtt_bytes}


def document(snap: Snapshot, exit_code: int) -> dict:
  """The JSON document for one snapshot, as Python objects."""
  return {
    "schema_version": SCHEMA_VERSION,
    "tool": "hcq.smi",
    "timestamp": round(snap.time, 3),
    "root": snap.root,
    "selection": snap.selection,
    "exit_code": exit_code,
    "drivers": {d.name: driver(d) for d in snap.drivers},
    "devices": [device(d) for d in snap.devices],
    "processes": None if snap.processes is None else [process(p) for p in snap.processes],
    "processes_hidden": snap.processes_hidden,
    "notes": [{"kind": n.kind, "message": n.message, "path": n.path} for n in snap.notes],
  }


def render(snap: Snapshot, exit_code: int, compact: bool = False) -> str:
  """The document as text: indented, or one line per snapshot for --watch (JSON Lines)."""
  doc = document(snap, exit_code)
  return json.dumps(doc, separators=(",", ":")) if compact else json.dumps(doc, indent=2)
