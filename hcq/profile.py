"""Profiling: the start and end timestamps of launches and copies, exported as Chrome/Perfetto trace JSON."""
from __future__ import annotations
import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
  from hcq.device import Device


def trace_events(device: "Device") -> list[dict]:
  """Complete ("X") events in microseconds, one per profiled launch or copy, with its queue as the thread."""
  out = []
  for kind, name, start, end in device.profile_events:
    ts, te = start.timestamp_ns / 1e3, end.timestamp_ns / 1e3
    out.append({"name": name, "cat": kind, "ph": "X", "ts": ts, "dur": max(te - ts, 0.0), "pid": str(device),
                "tid": "compute" if kind == "exec" else "copy"})
  return out


def write_trace(device: "Device", path: str) -> int:
  """Write the device's profiled events to `path` (open it in ui.perfetto.dev or chrome://tracing); returns the count.
  The signals that held the timestamps go back to the device's pool."""
  events = trace_events(device)
  with open(path, "w") as f: json.dump({"traceEvents": events, "displayTimeUnit": "ns"}, f)
  for _, _, start, end in device.profile_events:
    device.release_signal(start)
    device.release_signal(end)
  device.profile_events.clear()
  return len(events)
