"""hcq: user-space GPU driver and kernel-launch toolkit."""
