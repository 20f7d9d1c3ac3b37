"""Races show: the emulator runs a workgroup's waves interleaved in a seeded random order (HCQ_EMU_INTERLEAVE, on in
tests), so a missing barrier or an unsynchronised LDS / global access gives a wrong result, while barriers stay exact
(a wave passes s_barrier, or gfx12's s_barrier_signal + s_barrier_wait, only when every wave of its workgroup signalled)."""
import numpy as np
import pytest

from hcq.asm.emu import run
from hcq.asm.emu.snippet import run_snippet
from tests.tools import compile_opencl

SEEDS = range(1, 9)
WAVES = 4


def neighbour_exchange(barrier: str, wait: str) -> str:
  """Each wave writes its 32 LDS slots (value = address + 1), passes `barrier`, then reads its partner's (wave ^ 1)."""
  return f"""
    v_lshlrev_b32 v1, 2, v0
    s_lshl_b32 s1, s0, 7
    v_add_nc_u32 v1, s1, v1
    v_add_nc_u32 v2, 1, v1
    ds_store_b32 v1, v2
    {wait}
    {barrier}
    s_xor_b32 s2, s1, 128
    v_lshlrev_b32 v3, 2, v0
    v_add_nc_u32 v3, s2, v3
    ds_load_b32 v4, v3
    {wait}"""


def exchange(code: str, seed, arch: str = "gfx1100") -> np.ndarray:
  st = run_snippet(code, s={0: list(range(WAVES))}, v={0: np.arange(32)}, waves=WAVES, lds_bytes=512, arch=arch, interleave=seed)
  return st.v[4]


EXPECTED = (np.arange(WAVES * 32) ^ 32).reshape(WAVES, 32) * 4 + 1
GFX11 = ("s_barrier", "s_waitcnt lgkmcnt(0)", "gfx1100")
GFX12 = ("s_barrier_signal -1\n    s_barrier_wait -1", "s_wait_dscnt 0", "gfx1201")


@pytest.mark.parametrize("barrier,wait,arch", [GFX11, GFX12], ids=["s_barrier", "gfx12_signal_wait"])
def test_a_barrier_orders_lds_in_every_interleaving(barrier, wait, arch):
  for seed in SEEDS:
    np.testing.assert_array_equal(exchange(neighbour_exchange(barrier, wait), seed, arch), EXPECTED, err_msg=f"seed {seed}")


@pytest.mark.parametrize("barrier,wait,arch", [GFX11, GFX12], ids=["s_barrier", "gfx12_signal_wait"])
def test_a_missing_barrier_shows_interleaved_not_in_lockstep(barrier, wait, arch):
  code = neighbour_exchange("", wait)
  np.testing.assert_array_equal(exchange(code, None, arch), EXPECTED)   # lockstep hides the bug
  wrong = [seed for seed in SEEDS if not np.array_equal(exchange(code, seed, arch), EXPECTED)]
  assert len(wrong) >= len(SEEDS) // 2, f"the missing barrier showed only under seeds {wrong}"


def test_gfx12_split_barrier_waits_for_every_signal():
  """Work between s_barrier_signal and s_barrier_wait is allowed; the wait holds until all waves signalled, and a
  wave whose workgroup already signalled does not block."""
  code = neighbour_exchange("s_barrier_signal -1\n    s_mov_b32 s5, 7\n    s_barrier_wait -1", "s_wait_dscnt 0")
  for seed in SEEDS:
    np.testing.assert_array_equal(exchange(code, seed, "gfx1201"), EXPECTED, err_msg=f"seed {seed}")


def test_gfx12_signal_isfirst_is_one_wave_per_barrier():
  code = """
    s_barrier_signal_isfirst -1
    s_cselect_b32 s3, 1, 0
    s_barrier_wait -1
    s_barrier_signal_isfirst -1
    s_cselect_b32 s4, 1, 0
    s_barrier_wait -1"""
  for seed in (None, *SEEDS):
    st = run_snippet(code, waves=WAVES, arch="gfx1201", interleave=seed)
    assert st.s[3].sum() == 1 and st.s[4].sum() == 1, f"seed {seed}: {st.s[3]} {st.s[4]}"


def test_a_wave_that_ended_no_longer_holds_the_barrier():
  """Wave 3 ends before the barrier (the hardware drops it from the count): the others pass and finish."""
  code = """
    s_cmp_eq_u32 s0, 3
    s_cbranch_scc1 end
    s_barrier
    s_mov_b32 s6, 1
  end:
    s_nop 0"""
  for seed in (None, *SEEDS):
    st = run_snippet(code, s={0: list(range(WAVES))}, waves=WAVES, interleave=seed)
    assert st.done.all() and st.s[6].tolist() == [1, 1, 1, 0]


def test_one_seed_gives_one_interleaving():
  code = neighbour_exchange("", "s_waitcnt lgkmcnt(0)")
  for seed in SEEDS: np.testing.assert_array_equal(exchange(code, seed), exchange(code, seed))


OPENCL = r"""
#define BARRIER() do { __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); __builtin_amdgcn_s_barrier(); __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup"); } while (0)
__kernel void lds_rotate(__global int *out) {
  __local int s[128]; int l = __builtin_amdgcn_workitem_id_x(), g = __builtin_amdgcn_workgroup_id_x();
  s[l] = g * 1000 + l;
  SYNC();
  out[g * 128 + l] = s[(l + 32) & 127];
}
__kernel void global_rotate(__global int *buf, __global int *out) {
  int l = __builtin_amdgcn_workitem_id_x(), g = __builtin_amdgcn_workgroup_id_x();
  buf[g * 128 + l] = g * 1000 + l;
  SYNC();
  out[g * 128 + l] = __builtin_nontemporal_load(&buf[g * 128 + ((l + 32) & 127)]);
}
"""


@pytest.mark.parametrize("kernel", ["lds_rotate", "global_rotate"])
def test_clang_kernel_without_barrier_races(kernel, tmp_path):
  """clang-19's code for a workgroup that exchanges values through LDS or global memory: right with the barrier in
  every interleaving, wrong without it under interleaving (and right in lockstep, which is why tests interleave)."""
  groups = 6
  expect = (np.arange(groups)[:, None] * 1000 + (np.arange(128) + 32) % 128).reshape(-1)
  code = {sync: compile_opencl(OPENCL.replace("SYNC()", sync), tmp_path) for sync in ("BARRIER()", "")}
  def go(sync: str, seed):
    co = code[sync]
    args = [np.zeros(groups * 128, np.int32)] * (kernel == "global_rotate") + [np.zeros(groups * 128, np.int32)]
    run(co, args, (groups,), (128,), kernel=kernel, interleave=seed)
    return args[-1]
  for seed in SEEDS[:3]: np.testing.assert_array_equal(go("BARRIER()", seed), expect)
  np.testing.assert_array_equal(go("", None), expect)
  assert any(not np.array_equal(go("", seed), expect) for seed in SEEDS[:3])
