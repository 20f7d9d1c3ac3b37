"""The implemented emulator opcodes without a test against the ISA reference are exactly the committed exceptions, each
with a reason: a handler losing its test, a new opcode without one, or a test added without shrinking the list all fail
here (regenerate the list with `python bench/emu_coverage.py --write-exceptions` and review the diff)."""
from __future__ import annotations

import pytest

from tests import emu_coverage as C


@pytest.mark.parametrize("arch", C.ARCHS)
def test_untested_opcodes_are_the_listed_exceptions(arch):
  listed = {(f, n) for (a, f, n) in C.exceptions() if a == arch}
  gaps = C.untested(arch)
  assert not gaps - listed, f"{arch}: implemented opcodes with neither a reference test nor a listed reason: {sorted(gaps - listed)[:20]}"
  assert not listed - gaps, f"{arch}: listed as exceptions but now tested (or no longer implemented): {sorted(listed - gaps)[:20]}"


def test_every_exception_has_a_reason():
  assert all(len(r.split()) >= 3 for r in C.exceptions().values())


def test_reference_tests_cover_the_planted_bug_opcodes():
  """The opcodes of the emulator bugs that once passed the whole suite are run against the reference on every arch that has them."""
  want = {"gfx1100": [("VOP3", "v_cmp_le_i32_e64"), ("VOPC", "v_cmp_le_u32_e32"), ("SOP2", "s_addc_u32"), ("VOP2", "v_xnor_b32_e32"),
                      ("VOP3", "v_lerp_u8"), ("VOP2_DPP8", "v_add_nc_u32_dpp8"), ("VOP2_DPP8FI", "v_add_nc_u32_dpp8_fi")],
          "gfx942": [("VOPC", "v_cmp_le_i32_e32"), ("SOP2", "s_addc_u32"), ("VOP3", "v_lerp_u8")]}
  for arch, ops in want.items():
    assert set(ops) <= C.reference_tested(arch), sorted(set(ops) - C.reference_tested(arch))
