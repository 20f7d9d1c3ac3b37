"""hcq.asm: AMD GPU instruction tables, DSL, text assembler/disassembler and code objects."""
