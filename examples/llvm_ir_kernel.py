"""Launch a kernel written in LLVM IR, compiled for gfx1100 by llvmlite (an ET_REL object, loaded as it is).

  python examples/llvm_ir_kernel.py
"""
import llvmlite.binding as llvm
import numpy as np

import hcq

IR = r"""
target triple = "amdgcn-amd-amdhsa"
define amdgpu_kernel void @saxpy(ptr addrspace(1) %y, ptr addrspace(1) %x, float %a) {
  %tid = call i32 @llvm.amdgcn.workitem.id.x()
  %gid = call i32 @llvm.amdgcn.workgroup.id.x()
  %base = mul i32 %gid, 256
  %i = add i32 %base, %tid
  %px = getelementptr float, ptr addrspace(1) %x, i32 %i
  %py = getelementptr float, ptr addrspace(1) %y, i32 %i
  %vx = load float, ptr addrspace(1) %px
  %vy = load float, ptr addrspace(1) %py
  %r = call float @llvm.fma.f32(float %a, float %vx, float %vy)
  store float %r, ptr addrspace(1) %py
  ret void
}
declare i32 @llvm.amdgcn.workitem.id.x()
declare i32 @llvm.amdgcn.workgroup.id.x()
declare float @llvm.fma.f32(float, float, float)
"""

llvm.initialize_all_targets()
llvm.initialize_all_asmprinters()
machine = llvm.Target.from_triple("amdgcn-amd-amdhsa").create_target_machine(cpu="gfx1100", opt=2)
module = llvm.parse_assembly(IR)
module.verify()
obj = machine.emit_object(module)

dev = hcq.Device("AMD")
prg = dev.program(obj, "saxpy")
n = 8192
x, y = np.random.default_rng(1).random((2, n), dtype=np.float32)
X, Y = dev.alloc(4 * n).copyin(x), dev.alloc(4 * n).copyin(y)
secs = prg(Y, X, global_size=n // 256, local_size=256, vals=(2.0,), wait=True)
out = Y.copyout(np.empty(n, np.float32))
print(f"{dev} ({dev.arch}): y = 2x + y over {n} floats from llvmlite's {len(obj)}-byte object, {secs * 1e6:.1f} us, "
      f"max error vs numpy {np.abs(out - (np.float32(2) * x + y)).max():.2e}")
