"""hcq.smi: a GPU monitor (`python -m hcq.smi`) for AMD and NVIDIA GPUs, with no vendor runtime.

It reads what the kernel drivers publish (the KFD topology, amdgpu sysfs/hwmon, /proc/driver/nvidia)
through the OS-call layer `hcq.drivers.os`, so a recorded tree or a mock kernel can stand in for the
machine. See docs/smi.md for the output, the JSON schema and the exit codes.

Nothing is imported here: `python -m hcq.smi` must start fast (see bench/smi_speed.py).
"""
