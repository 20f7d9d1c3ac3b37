"""The human-readable view: one row per GPU, a details line under each, processes, then notes.

ASCII only, so it prints under any locale; "-" marks a value this machine does not expose.
"""
from __future__ import annotations
import time

from hcq.smi.model import Device, Process, Snapshot

GIB, MIB = 1024 ** 3, 1024 ** 2
COLUMNS = ("GPU", "NAME", "ARCH", "BUS ID", "VRAM GiB", "GTT GiB", "BUSY", "TEMP E/J/M C", "POWER/CAP W", "SCLK", "MCLK", "FAN RPM")


def num(value: float | int | None, digits: int = 0) -> str:
  """A number with `digits` decimals, or "-" when unknown."""
  return "-" if value is None else f"{value:.{digits}f}"


def pair(a: float | int | None, b: float | int | None, digits: int = 0, scale: float = 1) -> str:
  """ "used/total" with both scaled, "-" for a side that is unknown; "-" alone when both are."""
  if a is None and b is None: return "-"
  return f"{num(None if a is None else a / scale, digits)}/{num(None if b is None else b / scale, digits)}"


def size(n: int | None) -> str:
  """Bytes as MiB or GiB with one decimal."""
  if n is None: return "-"
  return f"{n / GIB:.1f} GiB" if n >= GIB else f"{n / MIB:.1f} MiB"


def device_row(d: Device) -> list[str]:
  temps = (d.temp_edge_c, d.temp_junction_c, d.temp_memory_c)
  emulated = " [emulated]" if d.emulated and "emulated" not in d.name.lower() else ""
  return [str(d.index), d.name + emulated, d.arch or "-", d.bus_id or "-",
          pair(d.vram_used_bytes, d.vram_total_bytes, 1, GIB), pair(d.gtt_used_bytes, d.gtt_total_bytes, 1, GIB),
          "-" if d.busy_percent is None else f"{d.busy_percent}%",
          "-" if all(t is None for t in temps) else "/".join(num(t) for t in temps),
          pair(d.power_w, d.power_cap_w), num(d.sclk_mhz), num(d.mclk_mhz), num(d.fan_rpm)]


def device_details(d: Device) -> str:
  """Driver, VBIOS, firmware and link of one GPU, on one line."""
  parts = []
  if d.driver: parts.append(f"driver {d.driver} {d.driver_version or ''}".rstrip())
  if d.vbios: parts.append(f"vbios {d.vbios}")
  if d.link: parts.append(f"PCIe {d.link.replace(' PCIe', '')}")
  if d.compute_units:
    parts.append(f"{d.compute_units} CUs" + (f" on {d.xcc} XCD{'s' * (d.xcc > 1)}" if d.xcc and (d.xcc > 1 or d.compute_partition) else ""))
  partition = "/".join(p for p in (d.compute_partition, d.memory_partition) if p)
  if partition: parts.append(f"{partition} partition {d.partition_index} of {d.partition_count}" if d.partition_count else f"partition {partition}")
  fw = [f"{k} {d.firmware[k]}" for k in ("mec", "sdma", "smc") if k in d.firmware]
  if fw: parts.append("fw " + " ".join(fw))
  if d.uuid: parts.append(f"id {d.uuid}")
  if d.emulated_state is not None:
    parts.append("emulated: " + " ".join(f"{k} {size(v) if k.startswith('bytes') else v}" for k, v in d.emulated_state.items()))
  return ", ".join(parts)


def grid(header: tuple[str, ...] | list[str], rows: list[list[str]]) -> list[str]:
  """Left-aligned columns two spaces apart."""
  widths = [max(len(r[i]) for r in [list(header)] + rows) for i in range(len(header))]
  return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [list(header)] + rows]


def process_rows(processes: list[Process]) -> list[list[str]]:
  return [[str(p.pid), p.name, ",".join(map(str, p.devices)) or "-", size(p.vram_bytes), size(p.gtt_bytes), " ".join(p.nodes)]
          for p in processes]


def render(snap: Snapshot, status: str | None = None) -> list[str]:
  """The table for one snapshot, as lines without newlines; `status` ends the first line (watch mode)."""
  stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(snap.time))
  drivers = ", ".join(f"{d.name} {d.version or ''}".rstrip() for d in snap.drivers if d.loaded) or "no GPU driver loaded"
  where = "" if snap.root == "/" else f"  [recorded tree {snap.root}]"
  lines = [f"hcq.smi  {stamp}  {drivers}{where}" + (f"  [{status}]" if status else "")]
  if snap.devices:
    rows = grid(COLUMNS, [device_row(d) for d in snap.devices])
    lines.append(rows[0])
    for d, row in zip(snap.devices, rows[1:]):
      lines.append(row)
      details = device_details(d)
      if details: lines.append("     " + details)
  if snap.processes is not None:
    lines.append("")
    if snap.processes:
      lines += ["PROCESSES"] + ["  " + r for r in grid(("PID", "NAME", "GPU", "VRAM", "GTT", "DEVICE FILES"), process_rows(snap.processes))]
    else:
      lines.append("PROCESSES  none holding GPU device files")
  for note in snap.notes:
    lines.append(("" if note.kind in ("no_gpu", "no_match") else "note: ") + note.message)
  return lines
