"""hcq.tensor's one runtime path: every device is an HCQ core device (hcq.Device) — its memory, programs, compute queue
and timeline — chosen by a DEV string (`DEV` in the environment, or device=...)."""
import numpy as np
import pytest
import hcq
from hcq.tensor import Tensor
from hcq.tensor import device as tdev


def test_kernels_run_on_the_core_devices_queue():
  dev = tdev.get_device("CPU")
  assert isinstance(dev.core, hcq.Device) and dev.core.spec.device == "CPU"
  x = np.arange(40, dtype=np.float32)
  before = dev.core.timeline_value
  out = (Tensor(x, device="CPU").exp() * 2).sum().numpy()
  assert dev.core.timeline_value > before  # the kernel was a queue submission that signalled the timeline
  np.testing.assert_allclose(out, (np.exp(x) * 2).astype(np.float64).sum(), rtol=1e-6)
  assert Tensor(x).node.buffer.buf.device is dev.core  # memory from the core's allocator


def test_tensor_is_hcq_api():
  assert hcq.Tensor is Tensor and "Tensor" in dir(hcq)
  np.testing.assert_array_equal((hcq.Tensor([1, 2, 3]) * 2).numpy(), [2, 4, 6])


def test_dev_strings_name_devices():
  assert tdev.get_device("CPU:LLVM") is tdev.get_device("CPU")  # LLVM is the CPU's only renderer: one device
  assert tdev.get_device("cpu").name == "CPU"
  with pytest.raises(hcq.DevStringError, match="valid devices: AMD, NV, CPU"): tdev.get_device("TPU")
  with pytest.raises(hcq.DevStringError, match="valid interfaces: KFD, MOCKKFD"): tdev.get_device("PCI+AMD")
  with pytest.raises(hcq.DevStringError, match="through LLVM only"): tdev.get_device("AMD:ASM")
  with pytest.raises(hcq.DevStringError, match=r"tensor devices: CPU, AMD, KFD\+AMD, MOCKKFD\+AMD, NV, NV\+NV, MOCKNV\+NV"):
    tdev.get_device("PCI+NV")
  assert tdev.get_device("MOCKNV+NV").renderer.target == "nvptx"
  with pytest.raises(ValueError, match="valid devices"): Tensor([1.0], device="GPU")


def test_default_device_is_dev_then_a_real_amd_gpu_then_a_real_nv_gpu_then_the_cpu(monkeypatch):
  import hcq.drivers.amd.device  # noqa: F401  (bound to the real probe before the probe is patched below)
  import hcq.drivers.amd.kfd as kfd
  monkeypatch.delenv("DEV", raising=False)
  real_exists = tdev.os.path.exists
  monkeypatch.setattr(tdev.os.path, "exists", lambda p: False if p == "/dev/kfd" else real_exists(p))
  assert tdev.default_device() == "CPU"
  assert Tensor([1.0]).device == "CPU"
  # with /dev/kfd and a GPU node in the topology (probed from sysfs only: nothing is opened here)
  monkeypatch.setattr(tdev.os.path, "exists", lambda p: True if p == "/dev/kfd" else real_exists(p))
  monkeypatch.setattr(kfd, "gpu_nodes", lambda osl: ["a GPU node"])
  assert tdev.default_device() == "KFD+AMD"
  monkeypatch.setattr(kfd, "gpu_nodes", lambda osl: [])
  assert tdev.default_device() == "CPU"
  # /dev/nvidiactl (the NV driver's probe); with a KFD GPU node too, AMD comes first (as hcq.Device's default)
  monkeypatch.setattr(tdev.os.path, "exists", lambda p: True if p in ("/dev/kfd", "/dev/nvidiactl") else real_exists(p))
  assert tdev.default_device() == "NV+NV"
  monkeypatch.setattr(kfd, "gpu_nodes", lambda osl: ["a GPU node"])
  assert tdev.default_device() == "KFD+AMD"
  monkeypatch.setattr(kfd, "gpu_nodes", lambda osl: [])
  monkeypatch.setattr(tdev.os.path, "exists", lambda p: True if p == "/dev/kfd" else False if p == "/dev/nvidiactl" else real_exists(p))
  monkeypatch.setenv("DEV", "MOCKKFD+AMD")
  assert tdev.default_device() == "MOCKKFD+AMD"
  t = Tensor(np.arange(5, dtype=np.float32))
  assert t.device == "MOCKKFD+AMD" and Tensor.zeros(3).device == "MOCKKFD+AMD"
  np.testing.assert_array_equal((t * 3 + 1).numpy(), np.arange(5, dtype=np.float32) * 3 + 1)


def test_amd_by_any_dev_string():
  x = np.linspace(-2, 2, 24, dtype=np.float32).reshape(4, 6)
  for name in ("AMD", "MOCKKFD+AMD::gfx1100"):
    t = Tensor(x, device=name)
    assert t.device == name and tdev.get_device(name).core.arch == "gfx1100"
    np.testing.assert_allclose(t.softmax(-1).numpy(), Tensor(x, device="CPU").softmax(-1).numpy(), rtol=2e-6, atol=1e-7)
  moved = Tensor(x).to("MOCKKFD+AMD")
  assert moved.device == "MOCKKFD+AMD"
  np.testing.assert_array_equal((moved + 1).to("CPU").numpy(), x + 1)
