"""The emulated AMD boards the driver tests run on: ONE suite, with the board as a module-scoped fixture parameter.

A test module takes the `arch` fixture (imported from here) and opens `MOCKKFD+AMD::<arch>`; expectations that differ
per board come from its BoardSpec (`board(arch)`), not from copies of the test. A key may name a partition mode too
(`gfx942:cpx`); `arch_of` gives its gfx arch where a compiler wants one. The heaviest tests run on gfx1100
alone in the normal run (`@heavy`); HCQ_TEST_ALL_BOARDS=1 runs them on every board. Hand-written code comes in two
spellings, RDNA's (gfx11 and gfx12 take it) and GCN's for gfx942 (`asm_for`).
"""
from __future__ import annotations
import os

import pytest

from hcq.drivers.mock.amdgpu.gpu import BOARDS, BoardSpec, boards_for

# an arch, or ARCH:PARTITION for a board in a partition mode (the DEV string's tail; the tests open its node 0):
# gfx942:cpx is one XCC of the MI300X in CPX mode, one of 8 KFD nodes
ARCHS = (*BOARDS, "gfx942:cpx")
RDNA_ARCHS = tuple(a for a in BOARDS if BOARDS[a].family != "gfx9")  # the boards whose scratch ring counts WAVES per shader engine (gfx942: per XCC)
ALL_BOARDS = os.environ.get("HCQ_TEST_ALL_BOARDS") == "1"


def arch_of(key: str) -> str:
  """The gfx arch of a board key (gfx942:cpx -> gfx942)."""
  return key.partition(":")[0]


def board(key: str) -> BoardSpec:
  """The BoardSpec of the KFD node the tests open: a partitioned board's node 0."""
  return boards_for(arch_of(key), key.partition(":")[2] or None)[0]


@pytest.fixture(scope="module", params=ARCHS)
def arch(request) -> str:
  """Each emulated board's key in turn (gfx1100, gfx1201, gfx942, gfx942:cpx)."""
  return request.param


def only(*archs: str):
  """A test of one family's own registers or ISA (hand-written gfx11 code, gfx11 RSRC3 fields): on these boards alone."""
  return pytest.mark.parametrize("arch", archs, indirect=True, scope="module")


# a test too long to run on every board in CI: the first board only, unless HCQ_TEST_ALL_BOARDS=1
heavy = only(*(ARCHS if ALL_BOARDS else ARCHS[:1]))


def asm_for(arch: str, rdna: str, gfx9: str) -> str:
  """Hand-written code for the board's ISA: `gfx9` (GCN spellings: s_load_dwordx2, global_store_dword) on gfx942,
  `rdna` (gfx11's, which gfx12 takes for the instructions these tests use) on the others."""
  return gfx9 if board(arch).family == "gfx9" else rdna


def lanes(arch: str) -> int:
  """The board's wave size where a test picks one: 64 on gfx942 (wave64 only), 32 on the RDNA boards."""
  return board(arch).wave_front_size


# x[g * 64 + t] += t + 1, g the workgroup id (s2, after the kernarg pointer), t the lane; GCN spellings (`spelled_for`
# gives the RDNA boards theirs)
ADD_WG = """s_load_dwordx2 s[6:7], s[0:1], 0x0
s_waitcnt lgkmcnt(0)
s_lshl_b32 s4, s2, 8
v_lshlrev_b32 v1, 2, v0
v_add_u32 v1, s4, v1
global_load_dword v2, v1, s[6:7]
s_waitcnt vmcnt(0)
v_add_u32 v2, v2, v0
v_add_u32 v2, 1, v2
global_store_dword v1, v2, s[6:7]
s_endpgm"""
# x[i] += i over one workgroup of two waves, GCN-spelled (spelled_for gives each board's ISA)
ADD_ID = """s_load_dwordx2 s[2:3], s[0:1], 0x0
s_waitcnt lgkmcnt(0)
v_lshlrev_b32 v1, 2, v0
global_load_dword v2, v1, s[2:3]
s_waitcnt vmcnt(0)
v_add_u32 v2, v2, v0
global_store_dword v1, v2, s[2:3]
s_endpgm
"""
_RDNA = {"s_load_dwordx2": "s_load_b64", "global_load_dword": "global_load_b32", "global_store_dword": "global_store_b32",
         "v_add_u32": "v_add_nc_u32"}
_GFX12_WAITS = {"s_waitcnt lgkmcnt(0)": "s_wait_kmcnt 0x0", "s_waitcnt vmcnt(0)": "s_wait_loadcnt 0x0"}


def spelled_for(arch: str, gcn: str) -> str:
  """GCN-spelled code (the few instructions ADD_WG and ADD_ID use) in the board's spellings: as is on gfx942, RDNA's names on
  gfx11, and gfx12's split wait counters too."""
  family = board(arch).family
  if family == "gfx9": return gcn
  for old, new in {**_RDNA, **(_GFX12_WAITS if family == "gfx12" else {})}.items(): gcn = gcn.replace(old, new)
  return gcn
