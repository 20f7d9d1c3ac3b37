"""The emulated AMD GPU: memory map, compute command processors (PM4), SDMA engines, clock and interrupts."""
