"""The compute queue's PM4 per GPU family: one builder, a table entry per family (gfx12, gfx11, gfx9)."""
from __future__ import annotations

import pytest

from hcq.drivers.amd.pm4 import DIALECTS, AMDComputeQueue


class FakeProgram:
  def __init__(self, wave32: bool):
    self.code_addr, self.rsrc1, self.rsrc2, self.rsrc3, self.wave32 = 0x7f0000001000, 1, 2, 3, wave32
    self.device = type("D", (), {"tmpring_size": 0, "scratch_base": 0})()

  def user_sgprs(self, kernargs):
    return [kernargs & 0xffffffff, kernargs >> 32]


class FakeSignal:
  value_addr, timestamp_addr = 0x1000, 0x1008


def packets(words: list[int]) -> list[tuple[int, list[int]]]:
  out, i = [], 0
  while i < len(words):
    h = words[i]
    assert h >> 30 == 3, f"not a type-3 header: {h:#x}"
    n = ((h >> 16) & 0x3fff) + 1
    out.append(((h >> 8) & 0xff, words[i + 1:i + 1 + n]))
    i += 1 + n
  return out


@pytest.mark.parametrize("family,bases,wave32,acquire_len", [("gfx12", (0x1260, 0xA000), True, 7), ("gfx11", (0x1260, 0xA000), True, 7),
                                                             ("gfx9", (0x2000, 0xA000), False, 6)])
def test_same_builder_each_family(family, bases, wave32, acquire_len):
  d = DIALECTS[family](bases)
  q = AMDComputeQueue(d).wait(FakeSignal(), 5).exec(FakeProgram(wave32), 0x7f0000200000, (4, 2, 1), (64, 1, 1)).signal(FakeSignal(), 9)
  pk = packets(list(q.words()))
  ops = [op for op, _ in pk]
  assert ops[-1] == d.pkt.PACKET3_RELEASE_MEM and d.pkt.PACKET3_DISPATCH_DIRECT in ops
  # the wait for 5 compares 64 bits: WAIT_REG_MEM64 (gfx10+), or on gfx9 the high word (0) then the low word (5)
  waits = [(op, b) for op, b in pk[:2] if op in (0x3C, 0x93)]
  addr = FakeSignal().value_addr
  if d.wait64: assert waits == [(0x93, [0x15, addr & 0xffffffff, addr >> 32, 5, 0, 0xffffffff, 0xffffffff, 4])]
  else: assert waits == [(0x3C, [0x15, (addr + 4) & 0xffffffff, (addr + 4) >> 32, 0, 0xffffffff, 4]), (0x3C, [0x15, addr & 0xffffffff, addr >> 32, 5, 0xffffffff, 4])]
  assert [len(b) for op, b in pk if op == d.pkt.PACKET3_ACQUIRE_MEM] == [acquire_len]
  for op, body in pk:
    if op == d.pkt.PACKET3_SET_SH_REG:  # every register lands in the SH window of this family's register map
      assert 0 <= body[0] and d.pkt.PACKET3_SET_SH_REG_START + body[0] + len(body) - 1 <= d.pkt.PACKET3_SET_SH_REG_END
  pgm = d.sh_reg(d.regs.regCOMPUTE_PGM_LO)
  assert [b[1:3] for op, b in pk if op == d.pkt.PACKET3_SET_SH_REG and b[0] == pgm] == [[(0x7f0000001000 >> 8) & 0xffffffff, 0x7f0000001000 >> 40]]
  dispatch = next(b for op, b in pk if op == d.pkt.PACKET3_DISPATCH_DIRECT)
  assert dispatch[:3] == [4, 2, 1] and d.regs.regCOMPUTE_DISPATCH_INITIATOR.decode(dispatch[3])["compute_shader_en"] == 1
  release = pk[-1][1]
  assert release[0] & 0x3f == d.events.CACHE_FLUSH_AND_INV_TS_EVENT and (release[0] >> 8) & 0xf == 5
  assert (release[1] >> 29) & 7 == 2 and release[4:6] == [9, 0]


def test_gfx12_differs_from_gfx11_where_the_kernel_does():
  """gfx_v12_0_ring_emit_fence drops gfx11's GLM actions from RELEASE_MEM; ACQUIRE_MEM (emit_mem_sync) and every
  COMPUTE_* register offset the queue writes are gfx11's; RSRC2 bit 6 and TMPRING_SIZE.WAVESIZE changed meaning/width."""
  from hcq.autogen.am import nvd
  g11, g12 = DIALECTS["gfx11"]((0x1260, 0xA000)), DIALECTS["gfx12"]((0x1260, 0xA000))
  glm = nvd.PACKET3_RELEASE_MEM_GCR_GLM_INV | nvd.PACKET3_RELEASE_MEM_GCR_GLM_WB
  assert g11.release_event & glm == glm and g12.release_event & glm == 0 and g11.release_event & ~glm == g12.release_event
  assert g11.acquire_mem() == g12.acquire_mem()
  for name in ("PGM_LO", "PGM_RSRC1", "PGM_RSRC2", "PGM_RSRC3", "TMPRING_SIZE", "DISPATCH_SCRATCH_BASE_LO", "RESTART_X", "USER_DATA_0",
               "START_X", "RESOURCE_LIMITS", "DISPATCH_INITIATOR"):
    assert g11.sh_reg(getattr(g11.regs, f"regCOMPUTE_{name}")) == g12.sh_reg(getattr(g12.regs, f"regCOMPUTE_{name}")), name
  assert "trap_present" not in g12.regs.regCOMPUTE_PGM_RSRC2.fields and g12.regs.regCOMPUTE_PGM_RSRC2.encode(dynamic_vgpr=1) == 1 << 6
  assert g12.regs.regCOMPUTE_TMPRING_SIZE.fields["wavesize"][1] >> 12 == (1 << 18) - 1
  assert g11.initiator(True) == g12.initiator(True)


def test_gfx9_is_what_gfx_v9_4_3_sends():
  """The gfx9 dialect against Linux 6.12's gfx_v9_4_3.c: ACQUIRE_MEM's CP_COHER_CNTL is gfx_v9_4_3_emit_mem_sync's five
  actions over the whole address space (6 dwords, no GCR_CNTL); RELEASE_MEM's cache actions are
  gfx_v9_4_3_ring_emit_fence's full flush; registers are GC 9.4.3's, whose COMPUTE_* absolute offsets are gfx11's but
  RSRC3's (0x2e2d against 0x2e28); TMPRING_SIZE counts 1 KiB units in 13 bits and WAVES per XCC; only GC 9.4.3 and 9.4.4 (gfx942)."""
  from hcq.autogen.am import soc15d as p
  g9, g11 = DIALECTS["gfx9"]((0x2000, 0xA000, 0x2402C00)), DIALECTS["gfx11"]((0x1260, 0xA000))
  coher = {name for name in dir(p) if name.startswith("PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_") and g9.acquire_mem()[0] & getattr(p, name)(1)}
  assert {n.removeprefix("PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_") for n in coher} == {"SH_ICACHE_ACTION_ENA", "SH_KCACHE_ACTION_ENA", "TC_ACTION_ENA",
                                                                                   "TCL1_ACTION_ENA", "TC_WB_ACTION_ENA"}
  assert g9.acquire_mem()[1:] == [0xffffffff, 0xffffff, 0, 0, 0xA]
  eop = {n for n in dir(p) if n.startswith("EOP_") and g9.release_event & getattr(p, n)}
  assert eop == {"EOP_TCL1_ACTION_EN", "EOP_TC_ACTION_EN", "EOP_TC_WB_ACTION_EN", "EOP_TC_MD_ACTION_EN"}
  assert g9.regs.__name__.endswith("gc_9_4_3") and g9.gc_versions == ((9, 4, 3), (9, 4, 4))
  for name in ("PGM_LO", "PGM_RSRC1", "PGM_RSRC2", "TMPRING_SIZE", "DISPATCH_SCRATCH_BASE_LO", "RESTART_X", "USER_DATA_0",
               "START_X", "RESOURCE_LIMITS", "DISPATCH_INITIATOR"):
    assert g9.sh_reg(getattr(g9.regs, f"regCOMPUTE_{name}")) == g11.sh_reg(getattr(g11.regs, f"regCOMPUTE_{name}")), name
  assert (g9.sh_reg(g9.regs.regCOMPUTE_PGM_RSRC3), g11.sh_reg(g11.regs.regCOMPUTE_PGM_RSRC3)) == (0x2e2d - 0x2c00, 0x2e28 - 0x2c00)
  assert g9.regs.regCOMPUTE_TMPRING_SIZE.fields["wavesize"] == (12, 0x1fff << 12) and (g9.scratch_unit, g9.waves_per_engine) == (1024, False)
  assert "cs_w32_en" not in g9.regs.regCOMPUTE_DISPATCH_INITIATOR.fields


def test_gfx9_has_no_wave32():
  with pytest.raises(ValueError, match="gfx9 runs wave64 only"):
    AMDComputeQueue(DIALECTS["gfx9"]((0x2000, 0xA000))).exec(FakeProgram(True), 0, (1, 1, 1), (64, 1, 1))


@pytest.mark.parametrize("gfxv,arrays,priv", [(110000, 12, 1), (110001, 8, 1), (110002, 4, 1), (110005, 2, 1), (110003, 2, 1),
                                              (110003, 1, 0), (110501, 2, 0), (100300, 4, 0), (90402, 32, 0)])
def test_preemption_bits(gfxv, arrays, priv):
  """TRAP_PRESENT below gfx12; PRIV on the GC 11 parts kfdtest applies its DEGFX11_12113 workaround to."""
  from hcq.autogen.am import gc_9_4_3, gc_11_0_0
  from hcq.drivers.amd.pm4 import preemption_bits
  regs = gc_9_4_3 if gfxv < 100000 else gc_11_0_0
  r1, r2 = preemption_bits(regs, gfxv, arrays)
  assert regs.regCOMPUTE_PGM_RSRC2.decode(r2) == {**regs.regCOMPUTE_PGM_RSRC2.decode(0), "trap_present": 1}
  assert regs.regCOMPUTE_PGM_RSRC1.decode(r1) == {**regs.regCOMPUTE_PGM_RSRC1.decode(0), "priv": priv}
  assert preemption_bits(gc_11_0_0, 120001, 4) == (0, 0)
