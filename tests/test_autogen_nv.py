"""hcq.autogen.nv: the NVIDIA bindings against gcc's facts, their fields, status names and the driver-version check.

CI has no NVIDIA headers, so gcc measured every fact (record sizes, alignments, offsets, constants, DRF
field bits) when the modules were generated, into hcq.autogen.nv.gcc.<module>; these tests compare the
ctypes modules with those tables. With HCQ_NV_SRC set (the extracted headers), gcc is also run directly
and the committed modules are regenerated and compared.
"""
from __future__ import annotations
import ctypes
import importlib
import os
import subprocess
import sys
import types

import pytest

from hcq.autogen.generator import cli, gcc_judge, nv
from hcq.autogen.nvrm_version import DriverVersionError, check_driver_version, parse_version

MODULES = list(nv.MODULES)


def load(name: str):
  return importlib.import_module(f"hcq.autogen.nv.{name}"), importlib.import_module(f"hcq.autogen.nv.gcc.{name}").FACTS


@pytest.mark.parametrize("name", MODULES)
def test_module_matches_gcc_facts_recorded_at_generation(name):
  mod, facts = load(name)
  bad = gcc_judge.differences(mod, facts)
  assert not bad, f"{len(bad)} of {len(facts)} facts differ:\n" + "\n".join(bad[:30])
  assert len(facts) > 10


def test_fact_tables_cover_records_constants_and_fields():
  kinds = {"sizeof": 0, "offsetof": 0, "constant": 0, "field": 0, "bitfield": 0}
  for name in MODULES:
    for what in load(name)[1]:
      kinds[next(k for k in kinds if what.startswith(k))] += 1
  assert kinds["sizeof"] > 500 and kinds["offsetof"] > 3000 and kinds["constant"] > 5000 and kinds["field"] > 2000, kinds


def test_a_perturbed_offset_or_fact_fails():
  """The comparison can fail: one record laid out one byte off, and one recorded gcc fact changed, are both reported."""
  mod, facts = load("nvos")
  good = mod.NVOS21_PARAMETERS
  fields = list(good._fields_)
  fields.insert(1, ("_pad", ctypes.c_uint8 * 4))  # moves hObjectParent and everything after it
  bad_cls = type("NVOS21_PARAMETERS", (ctypes.Structure,), {"_c_name_": good._c_name_, "_fields_": fields})
  fake = types.ModuleType(mod.__name__)
  bad_cls.__module__ = fake.__name__
  fake.NVOS21_PARAMETERS = bad_cls
  sub = {k: v for k, v in facts.items() if "NVOS21_PARAMETERS" in k}
  diff = gcc_judge.differences(fake, sub)
  assert any("offsetof/sizeof(NVOS21_PARAMETERS, hObjectParent)" in d for d in diff), diff
  key = "offsetof/sizeof(NVOS21_PARAMETERS, hClass)"
  off, size = facts[key].split()
  diff = gcc_judge.differences(mod, {**facts, key: f"{int(off) + 4} {size}"})
  assert diff == [f"{key}: python {off} {size}, gcc {int(off) + 4} {size}"]
  assert any("not measured" in d for d in gcc_judge.differences(mod, {k: v for k, v in facts.items() if k != key}))
  methods, method_facts = load("clc56f")
  field = "field NVC56F_SEM_EXECUTE_RELEASE_WFI"
  assert method_facts[field] == "20 20"
  assert gcc_judge.differences(methods, {**method_facts, field: "21 21"}) == [f"{field}: python 20 20, gcc 21 21"]


def test_the_rm_abi_names_the_driver_needs():
  ioctl, nvos, classes, uvm, status = (load(n)[0] for n in ("nv_ioctl", "nvos", "classes", "uvm", "nvstatus"))
  ctrl0000, ctrl0080, ctrl2080, fifo = (load(n)[0] for n in ("ctrl0000", "ctrl0080", "ctrl2080", "ctrl_fifo"))
  assert (ioctl.NV_ESC_RM_ALLOC, ioctl.NV_ESC_RM_CONTROL, ioctl.NV_ESC_RM_FREE, ioctl.NV_ESC_RM_MAP_MEMORY) == (0x2b, 0x2a, 0x29, 0x4e)
  assert ioctl.NV_IOCTL_MAGIC == ord("F") and ctypes.sizeof(ioctl.nv_ioctl_xfer_t) == 16
  for s in ("NVOS21_PARAMETERS", "NVOS64_PARAMETERS", "NVOS54_PARAMETERS", "NVOS33_PARAMETERS", "NVOS34_PARAMETERS", "NVOS00_PARAMETERS",
            "NVOS02_PARAMETERS", "NVOS46_PARAMETERS", "NVOS47_PARAMETERS", "NV_CHANNEL_ALLOC_PARAMS", "NV_VASPACE_ALLOCATION_PARAMETERS"):
    assert issubclass(getattr(nvos, s), ctypes.Structure), s
  assert (classes.NV01_ROOT, classes.NV01_DEVICE_0, classes.NV20_SUBDEVICE_0, classes.FERMI_VASPACE_A, classes.KEPLER_CHANNEL_GROUP_A,
          classes.FERMI_CONTEXT_SHARE_A, classes.NV1_MEMORY_USER, classes.NV01_MEMORY_LOCAL_USER, classes.NV01_MEMORY_SYSTEM,
          classes.HOPPER_USERMODE_A) == (0, 0x80, 0x2080, 0x90f1, 0xa06c, 0x9067, 0x40, 0x40, 0x3e, 0xc661)
  assert ctypes.sizeof(classes.NV0080_ALLOC_PARAMETERS) > 0 and ctypes.sizeof(nvos.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS) > 0
  assert ctypes.sizeof(nvos.NV_CTXSHARE_ALLOCATION_PARAMETERS) > 0 and ctypes.sizeof(classes.NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS) > 0
  gpfifo = {n: load(n)[0] for n in ("clc56f", "clc86f", "clc96f", "clca6f")}
  assert (gpfifo["clc56f"].AMPERE_CHANNEL_GPFIFO_A, gpfifo["clc86f"].HOPPER_CHANNEL_GPFIFO_A, gpfifo["clc96f"].BLACKWELL_CHANNEL_GPFIFO_A,
          gpfifo["clca6f"].BLACKWELL_CHANNEL_GPFIFO_B) == (0xc56f, 0xc86f, 0xc96f, 0xca6f)
  compute = [load(n)[0] for n in ("clc6c0", "clc7c0", "clc9c0", "clcbc0", "clcdc0", "clcec0")]
  assert [m.__dict__[k] for m, k in zip(compute, ("AMPERE_COMPUTE_A", "AMPERE_COMPUTE_B", "ADA_COMPUTE_A", "HOPPER_COMPUTE_A",
                                                   "BLACKWELL_COMPUTE_A", "BLACKWELL_COMPUTE_B"))] == [0xc6c0, 0xc7c0, 0xc9c0, 0xcbc0, 0xcdc0, 0xcec0]
  copy = [load(n)[0] for n in ("clc6b5", "clc7b5", "clc8b5", "clc9b5", "clcab5")]
  assert [m.__dict__[k] for m, k in zip(copy, ("AMPERE_DMA_COPY_A", "AMPERE_DMA_COPY_B", "HOPPER_DMA_COPY_A", "BLACKWELL_DMA_COPY_A",
                                                "BLACKWELL_DMA_COPY_B"))] == [0xc6b5, 0xc7b5, 0xc8b5, 0xc9b5, 0xcab5]
  assert ctrl0000.NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2 and ctrl0000.NV0000_CTRL_CMD_GPU_ATTACH_IDS
  assert ctrl0080.NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2 and ctrl0080.NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS
  for c in ("NV2080_CTRL_CMD_GPU_GET_GID_INFO", "NV2080_CTRL_CMD_GPU_GET_INFO_V2", "NV2080_CTRL_CMD_FB_GET_INFO_V2",
            "NV2080_CTRL_CMD_PERF_GET_CURRENT_PSTATE", "NV2080_CTRL_CMD_THERMAL_SYSTEM_EXECUTE_V2",
            "NV2080_CTRL_CMD_PERF_GET_GPUMON_PERFMON_UTIL_SAMPLES_V2", "NV2080_CTRL_CMD_BUS_GET_PCI_INFO", "NV2080_CTRL_CMD_PMGR_GET_MODULE_INFO", "NV2080_CTRL_CMD_GPU_GET_ENGINES_V2"):
    assert isinstance(getattr(ctrl2080, c), int), c
  assert (fifo.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN, fifo.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE) == (0xc36f0108, 0xa06c0101)
  for c in ("UVM_INITIALIZE", "UVM_REGISTER_GPU", "UVM_REGISTER_GPU_VASPACE", "UVM_CREATE_EXTERNAL_RANGE", "UVM_MAP_EXTERNAL_ALLOCATION",
            "UVM_REGISTER_CHANNEL", "UVM_FREE"):
    assert isinstance(getattr(uvm, c), int), c
  assert issubclass(uvm.UVM_MAP_EXTERNAL_ALLOCATION_PARAMS, ctypes.Structure)
  assert status.NV_STATUS_NAMES[status.NV_ERR_INVALID_ARGUMENT] == ("NV_ERR_INVALID_ARGUMENT", "Invalid argument to call")


def test_every_status_code_has_its_name():
  status = load("nvstatus")[0]
  codes = {k: v for k, v in vars(status).items() if k.startswith(("NV_OK", "NV_ERR_", "NV_WARN_")) and type(v) is int}
  assert len(codes) >= 150 and len(status.NV_STATUS_NAMES) == len(codes)
  assert {v: k for k, v in codes.items()} == {v: n for v, (n, _) in status.NV_STATUS_NAMES.items()}
  assert all(msg for _, msg in status.NV_STATUS_NAMES.values())


def test_method_fields_encode_and_decode():
  h = load("clc56f")[0]
  sem = h.register("NVC56F_SEM_EXECUTE")
  assert sem.offset == h.NVC56F_SEM_EXECUTE == 0x6c
  word = sem.encode(operation=h.NVC56F_SEM_EXECUTE_OPERATION_RELEASE, release_wfi=1, payload_size=h.NVC56F_SEM_EXECUTE_PAYLOAD_SIZE_64BIT,
                    release_timestamp=1)
  assert word == 1 | 1 << 20 | 1 << 24 | 1 << 25
  assert sem.decode(word)["payload_size"] == 1 and sem.decode(word)["reduction"] == 0
  with pytest.raises(ValueError, match=r"operation.*does not fit.*3 bits"):
    sem.encode(operation=8)
  with pytest.raises(ValueError, match="has no field 'oper'"):
    sem.encode(oper=1)
  entry1 = h.register("NVC56F_GP_ENTRY1")
  assert entry1.encode(length=0x10, sync=1) == 0x10 << 10 | 1 << 31
  with pytest.raises(KeyError, match="did you mean NVC56F_SEM_EXECUTE"):
    h.register("NVC56F_SEM_EXECUT")
  copy = load("clc6b5")[0].register("NVC6B5_LAUNCH_DMA")
  assert copy.offset == 0x300 and "data_transfer_type" in copy.fields


def test_flag_words_keep_their_sub_prefixed_fields():
  """A method-less field whose name extends a flag word's (NVOS46_FLAGS_DMA_OFFSET_FIXED) is that word's field, at the bits
  gcc reads; a family inside another field (NVOS46_FLAGS_P2P_*) and GP entry words stay registers of their own."""
  nvos, facts = load("nvos")
  flags = nvos.register("NVOS46_FLAGS")
  hi, lo = map(int, facts["field NVOS46_FLAGS_DMA_OFFSET_FIXED"].split())
  assert (hi, lo) == (15, 15) and flags.encode(dma_offset_fixed=1) == 1 << 15
  assert {"dma_offset_fixed", "dma_offset_grows", "page_kind", "page_size", "access"} <= set(flags.fields)
  assert "NVOS46_FLAGS_DMA_OFFSET" not in nvos.registers() and "NVOS46_FLAGS_P2P" in nvos.registers()
  host = load("clc56f")[0]
  assert {"NVC56F_GP_ENTRY0", "NVC56F_GP_ENTRY1"} <= set(host.registers())


def test_qmd_fields_encode_across_words():
  q = load("clcbc0qmd")[0]
  qmd = q.register("NVCBC0_QMDV04_00")
  assert qmd.offset == 0 and "grid_width" in qmd.fields and "constant_buffer_addr_lower_shifted6_0" in qmd.fields
  value = qmd.encode(grid_width=1234, constant_buffer_valid_0=1)
  assert qmd.decode(value)["grid_width"] == 1234 and qmd.decode(value)["constant_buffer_valid_0"] == 1
  facts = load("clcbc0qmd")[1]
  hi, lo = map(int, facts["field NVCBC0_QMDV04_00_GRID_WIDTH"].split())
  assert value >> lo & ((1 << (hi - lo + 1)) - 1) == 1234 and lo >= 32  # a field beyond the first word


def test_generated_files_name_their_tag():
  for name in nv.module_names():
    first = cli.module_path(name).read_text().splitlines()[0]
    assert first.startswith("# generated by `python -m hcq.autogen` from NVIDIA/") and first.endswith("-- do not edit"), first
    assert "open-gpu-kernel-modules 580." in first or "open-gpu-doc " in first, first
  assert load("nvos")[0].NV_SOURCE_VERSION.startswith("580.")


SAMPLE = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {v}  Release Build  (dvs-builder@U22-I3-AE18-23-3)  "
          "Wed Oct  1 12:00:00 UTC 2025\nGCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n")


def test_driver_version_of_the_same_branch_is_accepted():
  assert check_driver_version(SAMPLE.format(v="580.159"), generated="580.142") == "580.159"
  assert check_driver_version(SAMPLE.format(v="580.95.05"), generated="580.142") == "580.95.05"
  proprietary = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159  Thu Sep 25 00:00:00 UTC 2025\n"
  assert parse_version(proprietary) == "580.159"
  assert check_driver_version(SAMPLE.format(v="580.159")) == "580.159"  # against the committed modules' tag


def test_driver_version_of_another_branch_is_refused_naming_both():
  with pytest.raises(DriverVersionError, match=r"driver is 590\.44\.01 \(branch 590\).*bindings are from 580\.142 \(branch 580\)"):
    check_driver_version(SAMPLE.format(v="590.44.01"), generated="580.142")
  with pytest.raises(DriverVersionError, match="no 'NVRM version"):
    check_driver_version("something else\n")
  with pytest.raises(DriverVersionError, match="cannot read /nonexistent.*kernel module loaded"):
    check_driver_version(path="/nonexistent/version")


def test_cli_without_nv_sources_says_it_skipped_them(monkeypatch, capsys):
  monkeypatch.delenv("HCQ_NV_SRC", raising=False)
  monkeypatch.setattr(cli, "generators", lambda: {})
  assert cli.main(["--check"]) == 0
  out = capsys.readouterr().out
  assert "skipped the NVIDIA modules (nv.*): no --nv-src or $HCQ_NV_SRC given, so they were not checked" in out
  assert cli.main(["nv.clc56f"]) == 2
  assert "no NVIDIA sources given: pass --nv-src DIR or set HCQ_NV_SRC" in capsys.readouterr().err
  assert cli.main(["--nv-src", "/nonexistent", "nv.clc56f"]) == 2
  assert "/nonexistent/open-gpu-kernel-modules/version.mk is missing" in capsys.readouterr().err


NV_SRC = os.environ.get("HCQ_NV_SRC")
needs_src = pytest.mark.skipif(not NV_SRC, reason="HCQ_NV_SRC (extracted NVIDIA headers) is not set; the recorded gcc facts are checked instead")


@needs_src
@pytest.mark.parametrize("name", ["nv_ioctl", "nvos", "uvm", "clc56f", "clcbc0qmd"])
def test_module_matches_gcc_directly(name):
  mod, _ = load(name)
  bad = gcc_judge.differences(mod, gcc_judge.measure(nv.spec(name), mod))
  assert not bad, "\n".join(bad[:30])


@needs_src
def test_committed_nv_modules_are_what_the_headers_generate():
  names = nv.module_names()
  out = subprocess.run([sys.executable, "-m", "hcq.autogen", "--check", *names], capture_output=True, text=True)
  assert out.returncode == 0 and f"ok: the {len(names)} generated modules match" in out.stdout, out.stdout[-4000:] + out.stderr[-2000:]
