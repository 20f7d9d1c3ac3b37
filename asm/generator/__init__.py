"""Generator of hcq.asm's ISA tables: probes llvm-mc 19 for the opcodes and operand shapes of each encoding format."""
