"""Generated ISA tables, one module per arch (see hcq.asm.generator)."""
