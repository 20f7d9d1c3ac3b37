"""Recursive device functions on MOCKNV+NV: ptxas cannot bound their stack (EIATTR_MIN_STACK_SIZE 0xffffffff), so the
launch gives each thread the stack the program chose (1 KiB by default, as cudaLimitStackSize), and the emulated SM runs
real call/ret with a per-thread stack in that local memory: results against the host, and a stack overflow as a fault
naming the kernel, the PTX line and the address."""
import math

import numpy as np
import pytest

import hcq
from hcq.drivers.nv.program import DEFAULT_STACK_SIZE, MAX_STACK_SIZE, STACK_RESERVED
from hcq.errors import GPUFault, ProgramArgumentError
from tests.nv_sm_tools import cuda_to_ptx

CUDA = r"""
__device__ __attribute__((noinline)) int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
// a binary tree in arrays (child -1: none): the sum of a subtree's values and its depth, recursively
__device__ __attribute__((noinline)) long long tree_sum(const int* left, const int* right, const int* value, int node, int* depth) {
  if (node < 0) { *depth = 0; return 0; }
  int dl, dr;
  long long s = value[node] + tree_sum(left, right, value, left[node], &dl) + tree_sum(left, right, value, right[node], &dr);
  *depth = 1 + (dl > dr ? dl : dr);
  return s;
}
extern "C" __global__ void recurse(long long* out, const int* n, const int* left, const int* right, const int* value, int nodes) {
  int i = GID, d;
  out[2 * i] = fib(n[i]) + tree_sum(left, right, value, i % nodes, &d);
  out[2 * i + 1] = d;
}
"""


@pytest.fixture(scope="module")
def dev():
  return hcq.Device("MOCKNV+NV")


@pytest.fixture(scope="module")
def ptx():
  return cuda_to_ptx(CUDA, "sm_90")


def _tree(nodes: int, rng):
  """A random binary search tree of `nodes` keys (children by index, -1 for none): depths up to about 2 log n."""
  left, right, keys = np.full(nodes, -1, np.int32), np.full(nodes, -1, np.int32), rng.permutation(nodes)
  for i in range(1, nodes):
    at = 0
    while True:
      side = left if keys[i] < keys[at] else right
      if side[at] < 0: side[at] = i; break
      at = side[at]
  return left, right, rng.integers(-1000, 1000, nodes).astype(np.int32)


def _walk(left, right, value, node):
  if node < 0: return 0, 0
  (sl, dl), (sr, dr) = _walk(left, right, value, left[node]), _walk(left, right, value, right[node])
  return int(value[node]) + sl + sr, 1 + max(dl, dr)


def _run(dev, prg, n, tree, threads=128):
  left, right, value = tree
  bufs = [dev.alloc(4 * len(a), "device").copyin(a) for a in (n, left, right, value)]
  out = dev.alloc(16 * threads, "device")
  prg(out, *bufs, vals=(len(left),), global_size=threads // 64, local_size=64, wait=True)
  return out.copyout(np.empty(2 * threads, np.int64)).reshape(-1, 2)


def test_recursion_matches_the_host(dev, ptx):
  rng = np.random.default_rng(5)
  prg = dev.program(ptx)
  assert prg.kernel.stack_unbounded and prg.stack_size == DEFAULT_STACK_SIZE and prg.local_per_thread == DEFAULT_STACK_SIZE + STACK_RESERVED
  n, tree = rng.integers(0, 11, 128).astype(np.int32), _tree(30, rng)
  got = _run(dev, prg, n, tree)
  walks = [_walk(*tree, i % 30) for i in range(128)]
  assert max(d for _, d in walks) >= 6   # deep enough that the threads return from different depths
  np.testing.assert_array_equal(got, [[math.floor(((1 + 5 ** .5) ** k - (1 - 5 ** .5) ** k) / (2 ** k * 5 ** .5) + .5) + s, d]
                                      for k, (s, d) in zip(n.tolist(), walks)])


def test_a_stack_overflow_faults_naming_kernel_line_and_address(dev, ptx):
  """fib(9)'s 9 frames do not fit 256 bytes: the call that overflows faults (a local access past the thread's stack,
  as the GPU reports it), the device stays usable, and the same kernel with the default stack runs."""
  prg = dev.program(ptx, stack_size=256)
  assert prg.local_per_thread == 256 + STACK_RESERVED
  with pytest.raises(GPUFault, match=r"kernel recurse, PTX line \d+ at 0x[0-9a-f]+: stack overflow: the call of _Z3fibi needs a \d+-byte frame"):
    _run(dev, prg, np.full(128, 9, np.int32), _tree(4, np.random.default_rng(1)))
  tree = _tree(4, np.random.default_rng(1))
  got = _run(dev, dev.program(ptx), np.full(128, 9, np.int32), tree)
  np.testing.assert_array_equal(got, [[34 + s, d] for s, d in (_walk(*tree, i % 4) for i in range(128))])


def test_stack_size_is_checked(dev, ptx):
  for bad in (-1, MAX_STACK_SIZE + 1):
    with pytest.raises(ProgramArgumentError, match=rf"recurse: stack_size={bad}; valid 0\.\.16776624 \(the QMD's 24-bit local size"):
      dev.program(ptx, stack_size=bad)
  assert dev.program(ptx, stack_size=MAX_STACK_SIZE).local_per_thread == 0xFFFFF0
  for bad in (True, 1024.5, "64"):   # not an int: named with what is valid, at load rather than at the first launch
    with pytest.raises(ProgramArgumentError, match=rf"recurse: stack_size={bad!r} \({type(bad).__name__}\); valid: an int 0\.\.16776624"):
      dev.program(ptx, stack_size=bad)
  assert dev.program(ptx, stack_size=np.int64(1024)).stack_size == 1024
