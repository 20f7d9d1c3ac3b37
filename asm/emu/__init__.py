"""hcq.asm.emu: the emulated AMD GPU shader core (wavefront emulator) and its memory map.

`run(code_object, args, global_size, local_size)` runs a kernel standalone; `dispatch(mem, state)` is the shader core
of the mock GPU (drivers/mock/amdgpu); `launch(mem, Dispatch(...))` is what both use.
"""
from hcq.asm.emu.memory import PageFault, VirtualMemory
from hcq.asm.emu.errors import IllegalInstruction, InstructionLimit, LDSFault, ScratchFault, TrapError, WaveError
from hcq.asm.emu.dispatch import Dispatch, dispatch, launch
from hcq.asm.emu.run import RunResult, run

__all__ = ["PageFault", "VirtualMemory", "WaveError", "IllegalInstruction", "TrapError", "InstructionLimit", "LDSFault", "ScratchFault",
           "Dispatch", "dispatch", "launch", "run", "RunResult"]
