"""Module-scope variables on MOCKNV+NV: .global (`__device__`) and .const (`__constant__`) variables, initialised and
zeroed, arrays, a pointer initialised with another's address, read and written by kernels and device functions and by
the host (`prg.variable(name)`), from PTX through ptxas and from CUDA C++ through clang-19, against numpy. The emulated
SM finds them where the driver put them (a .global's address in its relocated bank-4 word, .const data in the bank the
QMD binds), so a driver that skips a step fails here as on the GPU."""
import numpy as np
import pytest

import hcq
import hcq.drivers.nv.program as nv_program
from hcq.errors import GPUFault, HCQError
from tests.nv_sm_tools import cuda_to_ptx

PTX = """
.version 8.0
.target sm_90
.address_size 64
.global .align 4 .u32 base = 5;
.global .align 4 .u32 hits;
.global .align 4 .f32 weights[4] = {0f3F800000, 0f40000000, 0f40400000, 0f40800000};
.global .align 8 .u64 pbase = generic(base);
.global .align 4 .u32 trace[64];
.const .align 4 .u32 scale[4] = {1, 10, 100, 1000};
.func (.param .b32 rv) bump(.param .b64 p)
{
  .reg .b64 %rd<2>; .reg .b32 %r<3>;
  ld.param.u64 %rd1, [p]; atom.global.add.u32 %r1, [%rd1], 1; st.param.b32 [rv], %r1; ret;
}
.visible .entry mv(.param .u64 out)
{
  .reg .b32 %r<12>; .reg .b64 %rd<12>; .reg .f32 %f<4>;
  mov.u32 %r1, %tid.x; and.b32 %r2, %r1, 3; mul.wide.u32 %rd1, %r2, 4;
  ld.global.u64 %rd2, [pbase]; ld.u32 %r3, [%rd2];                        // base through the pointer initialiser
  mov.u64 %rd3, scale; add.u64 %rd3, %rd3, %rd1; ld.const.u32 %r4, [%rd3];  // scale[tid & 3]
  mad.lo.u32 %r5, %r1, %r4, %r3;
  mov.u64 %rd4, weights; add.u64 %rd4, %rd4, %rd1; ld.global.f32 %f1, [%rd4];
  cvt.rn.f32.u32 %f2, %r5; mul.rn.f32 %f3, %f2, %f1;
  mov.u64 %rd5, hits;
  { .param .b64 a; .param .b32 r; st.param.b64 [a], %rd5; call (r), bump, (a); ld.param.b32 %r6, [r]; }
  mov.u64 %rd6, trace; mul.wide.u32 %rd7, %r6, 4; add.u64 %rd6, %rd6, %rd7; st.global.u32 [%rd6], %r1;  // trace[old] = tid
  ld.param.u64 %rd8, [out]; mul.wide.u32 %rd9, %r1, 4; add.u64 %rd8, %rd8, %rd9; st.global.f32 [%rd8], %f3;
  ret;
}
"""

CUDA = r"""
__device__ int counter;
__device__ float table[8] = {1, 2, 3, 4, 5, 6, 7, 8};
__device__ int* where = &counter;
__constant__ float coef[4] = {0.5f, 1.5f, -2.0f, 3.0f};
__device__ __attribute__((noinline)) void bump(int* p, int v) { __nvvm_atom_add_gen_i(p, v); }
__device__ __attribute__((noinline)) float lookup(int i) { return coef[i & 3] * table[i & 7]; }
extern "C" __global__ void cuda_mv(float* out, const float* in) {
  int i = GID;
  out[i] = lookup(i) * in[i] + table[(i + 1) & 7];
  bump(where, i);
}
"""


@pytest.fixture(scope="module")
def dev():
  return hcq.Device("MOCKNV+NV")


def _ptx_want(n, base, scale, weights):
  t = np.arange(n)
  return ((t * scale[t & 3] + base) & 0xFFFFFFFF).astype(np.uint32).astype(np.float32) * weights[t & 3]


def test_ptx_globals_and_constants_match_numpy(dev):
  prg, n = dev.program(PTX), 64
  out = dev.alloc(4 * n, "device")
  prg(out, local_size=n, wait=True)
  scale, weights = np.array([1, 10, 100, 1000]), np.array([1, 2, 3, 4], np.float32)
  np.testing.assert_array_equal(out.copyout(np.empty(n, np.float32)), _ptx_want(n, 5, scale, weights))
  assert prg.variable("hits").copyout(np.empty(1, np.uint32))[0] == n
  assert sorted(prg.variable("trace").copyout(np.empty(n, np.uint32))) == list(range(n))  # each atomic's old value once
  # the host writes them as cudaMemcpyToSymbol does; the next launch sees the new values
  prg.variable("base").copyin(np.array([1000], np.uint32))
  prg.variable("scale").copyin(np.array([3, 0, 7, 2], np.uint32))
  prg.variable("weights").copyin(np.array([0.5, -1, 4, 0.25], np.float32))
  prg(out, local_size=n, wait=True)
  np.testing.assert_array_equal(out.copyout(np.empty(n, np.float32)), _ptx_want(n, 1000, np.array([3, 0, 7, 2]), np.array([0.5, -1, 4, 0.25], np.float32)))
  assert prg.variable("hits").copyout(np.empty(1, np.uint32))[0] == 2 * n
  assert prg.variable("pbase").copyout(np.empty(1, np.uint64))[0] == prg.variable("base").addr  # R_CUDA_G64 applied


def test_cuda_cpp_device_and_constant_variables_match_numpy(dev):
  prg, n = dev.program(cuda_to_ptx(CUDA, "sm_90"), "cuda_mv"), 256
  x = np.random.default_rng(3).standard_normal(n).astype(np.float32)
  xb, ob = dev.alloc(4 * n, "device"), dev.alloc(4 * n, "device")
  xb.copyin(x)
  def want(coef):
    i = np.arange(n)
    table = np.arange(1, 9, dtype=np.float32)
    a = coef[i & 3] * table[i & 7]   # clang contracts a * x + t into one fma: exact in f64, then rounded once to f32
    return (a.astype(np.float64) * x + table[(i + 1) & 7]).astype(np.float32)
  prg(ob, xb, global_size=2, local_size=128, wait=True)
  np.testing.assert_array_equal(ob.copyout(np.empty(n, np.float32)), want(np.array([0.5, 1.5, -2, 3], np.float32)))
  assert prg.variable("counter").copyout(np.empty(1, np.int32))[0] == n * (n - 1) // 2
  coef = np.array([2, -0.25, 8, 1], np.float32)
  prg.variable("coef").copyin(coef)
  prg(ob, xb, global_size=2, local_size=128, wait=True)
  np.testing.assert_array_equal(ob.copyout(np.empty(n, np.float32)), want(coef))


def test_variable_names_what_the_module_has(dev):
  prg = dev.program(PTX)
  with pytest.raises(HCQError, match=r"mv: no module variable 'nope'; the module has base, hits, pbase, scale, trace, weights"):
    prg.variable("nope")
  v = prg.variable("trace")
  assert v.nbytes == 256 and v.addr == prg.globals[".nv.global"].addr + prg.kernel.variables["trace"].offset


def test_the_sm_reads_the_data_the_driver_loaded(dev):
  """The initial values come from the .nv.global.init the driver uploaded, not from the PTX: zero it and the kernel
  reads zeros (base 0 through the relocated pointer, weights 0)."""
  prg, n = dev.program(PTX), 32
  init = prg.globals[".nv.global.init"]
  pbase = prg.variable("pbase").copyout(np.empty(1, np.uint64))
  init.copyin(np.zeros(init.nbytes, np.uint8))
  prg.variable("pbase").copyin(pbase)   # keep the pointer: base and weights are 0 now
  out = dev.alloc(4 * n, "device")
  prg(out, local_size=n, wait=True)
  assert not out.copyout(np.empty(n, np.float32)).any()


def test_a_driver_that_does_not_relocate_faults_as_on_the_gpu(dev, monkeypatch):
  """Without its relocations the bank-4 words that hold the globals' addresses stay 0: the first access is an MMU
  fault naming the kernel, the PTX line and the address, and the device stays usable."""
  monkeypatch.setattr(nv_program, "apply_relocations", lambda *a: None)
  prg = dev.program(PTX)
  out = dev.alloc(64, "device")
  with pytest.raises(GPUFault, match=r"kernel mv, PTX line 20 at 0x0: MMU fault: read of 8 bytes at 0x0"):
    prg(out, local_size=16, wait=True)
  monkeypatch.undo()
  good = dev.program(PTX)
  good(out, local_size=16, wait=True)
  np.testing.assert_array_equal(out.copyout(np.empty(16, np.float32)), _ptx_want(16, 5, np.array([1, 10, 100, 1000]), np.array([1, 2, 3, 4], np.float32)))
