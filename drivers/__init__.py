"""hcq.drivers: kernel-interface drivers (AMD KFD, NVIDIA RM, CPU) and their mocks."""
