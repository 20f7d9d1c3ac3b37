"""hcq.autogen.am: AMD register, packet and MQD tables generated from linux-source (drivers/gpu/drm/amd)."""
