"""The NVIDIA driver: the RM interface (/dev/nvidiactl, /dev/nvidiaN, /dev/nvidia-uvm), memory, channels, queues."""
