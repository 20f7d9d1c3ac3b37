"""hcq.drivers.amd: the AMD GPU driver over the KFD kernel interface: PM4 compute and SDMA copy queues."""
