"""The NVIDIA fields smi reads through RM controls on /dev/nvidiactl (the open 580 headers' controls; no NVML).

The UUID comes from NV2080_CTRL_CMD_GPU_GET_GID_INFO, as nvidia-smi shows it (procfs's copy stays where the RM
refuses the control).
Memory (NV2080_CTRL_CMD_FB_GET_INFO_V2), utilisation (NV2080_CTRL_CMD_PERF_GET_GPUMON_PERFMON_UTIL_SAMPLES_V2) and the
GPU temperature (NV2080_CTRL_CMD_THERMAL_SYSTEM_EXECUTE_V2, sensor 0) have controls there. Power draw and cap and fans
do not: ctrl2080fan.h is empty in the open headers and ctrl2080pmgr.h has only module info. Clocks have one,
NV2080_CTRL_CMD_PERF_GET_LEVEL_INFO_V2, but it reports the clock domains the caller names by NV2080_CTRL_CLK_DOMAIN_*
ids, which live in ctrl2080clk.h, empty in the open headers. The driver publishes none of the three in procfs or sysfs
(no hwmon). smi shows those as unavailable and says why.
"""
from __future__ import annotations
import ctypes

from hcq.smi.model import Device

NO_OPEN_CONTROL = "no RM control for it in NVIDIA's open 580 headers, and the driver publishes it in no procfs/sysfs file"
NO_CONTROL_FIELDS = ("power", "clocks", "fan")  # `unavailable` keys, as smi's other readers name field groups
READ_FIELDS = ("memory", "busy_percent", "temperature")


def read_rm_fields(os_, d: Device, device_instance: int) -> None:
  """Fill `d`'s memory, utilisation and temperature from the RM; a refused call or a missing node becomes `unavailable`
  naming the control and its NV_STATUS (gVisor's nvproxy passes only the controls it knows)."""
  for name in NO_CONTROL_FIELDS: d.unavailable[name] = NO_OPEN_CONTROL
  try:
    from hcq.autogen.nv import classes as C
    from hcq.drivers.nv.rm import RMInterface
    minor = int(d.nodes[0].removeprefix("/dev/nvidia")) if d.nodes else 0
    rm = RMInterface(os_, minor)
  except Exception as e:  # noqa: BLE001 -- smi shows what it could not read, never a traceback
    for name in READ_FIELDS: d.unavailable[name] = f"RM not reachable: {e}"
    return
  try:
    device = rm.alloc(rm.client, C.NV01_DEVICE_0, C.struct_NV0080_ALLOC_PARAMETERS(deviceId=device_instance))
    subdevice = rm.alloc(device, C.NV20_SUBDEVICE_0, C.struct_NV2080_ALLOC_PARAMETERS(subDeviceId=0))
    try:
      d.uuid = rm.gpu_uuid(subdevice)
    except Exception:  # noqa: BLE001 -- procfs's UUID, the same GID, stays
      pass
    for name, read in zip(READ_FIELDS, (_memory, _utilisation, _temperature)):
      try:
        read(rm, subdevice, d)
      except Exception as e:  # noqa: BLE001 -- RMCallError names the control and the NV_STATUS
        d.unavailable[name] = str(e)
  except Exception as e:  # noqa: BLE001
    for name in READ_FIELDS: d.unavailable[name] = str(e)
  finally:
    _close(rm)


def _memory(rm, subdevice: int, d: Device) -> None:
  from hcq.autogen.nv import ctrl2080 as X
  p = X.NV2080_CTRL_FB_GET_INFO_V2_PARAMS(fbInfoListSize=2)
  p.fbInfoList[0].index, p.fbInfoList[1].index = X.NV2080_CTRL_FB_INFO_INDEX_TOTAL_RAM_SIZE, X.NV2080_CTRL_FB_INFO_INDEX_HEAP_FREE
  rm.control(subdevice, X.NV2080_CTRL_CMD_FB_GET_INFO_V2, p)
  total, free = p.fbInfoList[0].data << 10, p.fbInfoList[1].data << 10  # KiB
  d.vram_total_bytes, d.vram_used_bytes = total, max(0, total - free)


def _utilisation(rm, subdevice: int, d: Device) -> None:
  """The graphics engine's busy share in the newest sample of the RM's ring (pct*100)."""
  from hcq.autogen.nv import ctrl2080 as X
  p = X.NV2080_CTRL_PERF_GET_GPUMON_PERFMON_UTIL_SAMPLES_V2_PARAMS(type=X.NV2080_CTRL_GPUMON_SAMPLE_TYPE_PERFMON_UTIL)
  p.bufSize = ctypes.sizeof(p.samples)
  rm.control(subdevice, X.NV2080_CTRL_CMD_PERF_GET_GPUMON_PERFMON_UTIL_SAMPLES_V2, p)
  samples = [s for s in p.samples if s.base.timeStamp]
  if samples: d.busy_percent = round(max(samples, key=lambda s: s.base.timeStamp).gr.util / 100)
  else: d.unavailable["busy_percent"] = "the RM's utilisation ring holds no sample yet"


def _temperature(rm, subdevice: int, d: Device) -> None:
  from hcq.autogen.nv import ctrl2080 as X
  p = X.NV2080_CTRL_THERMAL_SYSTEM_EXECUTE_V2_PARAMS(clientAPIVersion=X.THERMAL_SYSTEM_API_VER, clientAPIRevision=X.THERMAL_SYSTEM_API_REV,
                                                     clientInstructionSizeOf=ctypes.sizeof(X.NV2080_CTRL_THERMAL_SYSTEM_INSTRUCTION),
                                                     instructionListSize=1)
  p.instructionList[0].opcode = X.NV2080_CTRL_THERMAL_SYSTEM_GET_STATUS_SENSOR_READING_OPCODE
  p.instructionList[0].operands.getStatusSensorReading.sensorIndex = 0  # sensor 0 is the GPU's own on single-GPU boards (unverified on hardware)
  rm.control(subdevice, X.NV2080_CTRL_CMD_THERMAL_SYSTEM_EXECUTE_V2, p)
  d.temp_edge_c = float(p.instructionList[0].operands.getStatusSensorReading.value)


def _close(rm) -> None:
  try:
    rm.free(rm.client)
  except Exception:  # noqa: BLE001 -- closing the files frees the client anyway
    pass
  for fd in (rm.gpu, rm.ctl):
    try:
      rm.os.close(fd)
    except OSError:
      pass
