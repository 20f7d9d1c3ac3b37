"""hcq.asm.emu: the emulated AMD GPU shader core (wavefront emulator) and its memory map."""
