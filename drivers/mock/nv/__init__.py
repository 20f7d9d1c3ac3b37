"""The mock NVIDIA kernel interface (RM escapes on /dev/nvidiactl and /dev/nvidia0) and the emulated GPU behind it."""
