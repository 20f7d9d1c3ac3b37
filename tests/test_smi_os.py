"""hcq.drivers.os: the real OS layer and the recorded-tree variant behave like the kernel calls they stand for."""
from __future__ import annotations
import errno
import os
from pathlib import Path

import pytest

from hcq.drivers.os import FixtureOS, HostOS

FIXTURES = Path(__file__).parent / "fixtures" / "sysfs"


def test_host_os_reads_files_links_and_folders(tmp_path):
  (tmp_path / "attr").write_text("42\n")
  (tmp_path / "link").symlink_to("/dev/kfd")
  host = HostOS()
  assert host.read_text(str(tmp_path / "attr")) == "42\n"
  assert host.read_bytes(str(tmp_path / "attr")) == b"42\n"
  assert sorted(host.listdir(str(tmp_path))) == ["attr", "link"]
  assert host.readlink(str(tmp_path / "link")) == "/dev/kfd"
  assert host.exists(str(tmp_path / "attr")) and not host.exists(str(tmp_path / "nope"))
  assert host.access(str(tmp_path / "attr"), os.R_OK)
  fd = host.open(str(tmp_path / "attr"), os.O_RDONLY)
  try:
    with pytest.raises(OSError) as e:  # an ioctl on a file that is not a device node: ENOTTY, as from the kernel
      host.ioctl(fd, 0xC0084B01, bytearray(8))
    assert e.value.errno == errno.ENOTTY
  finally:
    host.close(fd)
  with pytest.raises(FileNotFoundError) as e:
    host.read_text(str(tmp_path / "nope"))
  assert e.value.errno == errno.ENOENT


def test_fixture_os_maps_machine_paths_under_its_root():
  fx = FixtureOS(str(FIXTURES / "rx7900xtx"))
  props = fx.read_text("/sys/devices/virtual/kfd/kfd/topology/nodes/1/properties")
  assert "gfx_target_version 110000" in props
  assert "properties" in fx.listdir("/sys/devices/virtual/kfd/kfd/topology/nodes/1")
  # Relative sysfs links resolve inside the tree, like /sys/class/drm/renderD128/device on a machine.
  assert fx.read_text("/sys/class/drm/renderD128/device/device").strip() == "0x744c"
  # Absolute links (fd -> device file) are read, never followed.
  assert fx.readlink("/proc/4242/fd/3") == "/dev/kfd"
  assert fx.exists("/dev/kfd") and not fx.exists("/dev/nvidiactl")
  assert fx.access("/dev/kfd", os.R_OK | os.W_OK)


def test_fixture_os_errors_are_the_real_errnos_naming_the_machine_path():
  fx = FixtureOS(str(FIXTURES / "rx7900xtx"), denied=["/dev/kfd", "/proc/999/fd"])
  with pytest.raises(FileNotFoundError) as e:
    fx.read_text("/sys/class/drm/renderD200/device/vendor")
  assert e.value.errno == errno.ENOENT and e.value.filename == "/sys/class/drm/renderD200/device/vendor"
  with pytest.raises(PermissionError) as e:
    fx.open("/dev/kfd", os.O_RDWR)
  assert e.value.errno == errno.EACCES and e.value.filename == "/dev/kfd"
  with pytest.raises(PermissionError):  # a denied folder denies what is below it
    fx.readlink("/proc/999/fd/20")
  assert not fx.access("/dev/kfd", os.R_OK | os.W_OK)
  assert fx.exists("/dev/kfd")  # a denied file is not absent ...
  assert not fx.exists("/proc/999/fd/20")  # ... but below a denied folder nothing can be looked up
  with pytest.raises(NotADirectoryError) as e:
    fx.listdir("/proc/4242/comm")
  assert e.value.errno == errno.ENOTDIR


def test_fixture_os_stays_inside_its_root():
  fx = FixtureOS(str(FIXTURES / "no-gpu"))
  # ".." cannot climb out of the root: /../../etc/passwd is /etc/passwd of the recorded machine.
  assert not fx.exists("/../../../../../../etc/passwd")
  with pytest.raises(ValueError):
    fx.read_text("relative/path")
  with pytest.raises(FileNotFoundError):
    FixtureOS(str(FIXTURES / "no-such-board"))
  with pytest.raises(ValueError):
    FixtureOS(str(FIXTURES / "no-gpu"), denied=["dev/kfd"])


def test_fixture_os_ioctl_on_a_recorded_node_is_enotty():
  fx = FixtureOS(str(FIXTURES / "rx7900xtx"))
  fd = fx.open("/dev/kfd", os.O_RDWR)
  try:
    with pytest.raises(OSError) as e:
      fx.ioctl(fd, 0xC0084B01, bytearray(8))
    assert e.value.errno == errno.ENOTTY
    with pytest.raises(OSError) as e:  # the recorded tree is read-only, whatever open was asked for
      os.write(fd, b"x")
    assert e.value.errno == errno.EBADF
  finally:
    fx.close(fd)
