"""hcq.drivers.cpu: the CPU as an HCQ device (queues run on engine threads, kernels are native code)."""
