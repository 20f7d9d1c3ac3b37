"""Mutation check: plant known one-line bugs, one at a time, and see whether the tests that should catch each do.

Not part of CI (each mutant runs its covering tests: about 40 minutes in all on a loaded two-core machine). Every mutation is applied to a scratch copy
of the repository, never to the working tree, so an interrupted run cannot leave a bug planted. The copy imports
its own hcq (a meta-path finder installed by the sitecustomize this tool writes next to it), so the editable install,
which maps hcq/hcq.asm/hcq.drivers/hcq.autogen to the working tree, does not shadow the mutant.

  python tools/mutants.py                 # every mutation, one at a time
  python tools/mutants.py --list          # the list, and whether each still applies
  python tools/mutants.py --only emu-xnor --only mock-nested-ib
  python tools/mutants.py --area emulator -j 2
  python tools/mutants.py --baseline      # the covering tests on the unmutated copy (they must pass)

A mutation whose original text is not found exactly once in its file is reported "stale" (the code moved on:
update the entry), never "caught". tests/test_mutants_list.py keeps the list applicable without running mutants.
"""
from __future__ import annotations
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AREAS = ("driver", "mock", "assembler", "emulator", "launch", "tensor")
# import name -> repository folder (setup.py's ROOTS): what the scratch copy's finder maps
PACKAGES = {"hcq": "hcq", "hcq.drivers": "drivers", "hcq.autogen": "autogen", "hcq.asm": "asm"}
COPY_IGNORE = (".git", ".venv", "__pycache__", ".pytest_cache", ".hypothesis", "build", "dist", "*.egg-info", ".cache")


@dataclass(frozen=True)
class Mutation:
  """One planted bug: `original` (found exactly once in `file`) becomes `replacement`; `tests` should fail. Code that
  other work is rewriting may give alternatives (tuples of the same length): exactly one of them must apply."""
  id: str
  area: str
  file: str
  original: str | tuple[str, ...]
  replacement: str | tuple[str, ...]
  bug: str
  tests: tuple[str, ...]    # pytest arguments: node ids / files, and "-k EXPR" entries
  flux: str = ""            # which work in progress is likely to rewrite the mutated code (the entry may go stale)


def M(id, area, file, original, replacement, bug, tests, flux=""):  # noqa: N802 - a table row
  return Mutation(id, area, file, original, replacement, bug, tuple(tests.split()) if isinstance(tests, str) else tuple(tests), flux)


PM4 = "tests/test_amd_queues.py tests/test_amd_dispatch.py tests/test_pm4_dialects.py"
DISPATCH = "tests/test_amd_dispatch.py tests/test_emu_dispatch.py tests/test_core.py"
EMU = "tests/test_emu.py"
# gfx1100 only, by node id: collecting the every-opcode self-agreement sweep (39,000 cases that compare our encoder with
# our decoder) alone takes minutes on a loaded machine
ASM = [f"tests/test_asm_dsl.py::test_{t}" for t in ("dsl_examples", "constants_inline_or_literal", "errors_have_line_column_and_reason",
       "assembly_error_order_and_labels", "assemble_labels_and_disassemble")] + \
      [f"tests/test_asm_fast.py::test_{t}[gfx1100]" for t in ("every_opcode_sample_fast_equals_generic", "assembly_to_bytes_equals_the_line_parser",
       "errors_are_the_generic_ones", "disassembly_from_words_equals_decode_then_render")]
# decoder and printer bugs: the fast paths against the generic ones, and 20,000 random words against llvm-mc (gfx1100)
ASM_LLVM = ["tests/test_asm_fast.py::test_decoding_random_words[gfx1100]", "tests/test_asm_fast.py::test_disassembly_from_words_equals_decode_then_render[gfx1100]",
            "tests/test_asm_llvm.py::test_random_words_match_llvm_mc[gfx1100]"]
# operand edges (VGPR ranges at v255, inline constants, SOPP immediates) against llvm-mc, both ways
EDGES = "tests/test_asm_operand_edges.py"
# the barrier test plants the missing barrier itself and first checks the unplanted kernel under interleaving
TENSOR_AMD = ["tests/test_tensor_amd.py", "-k", "(missing_tree_barrier or reduction or long) and MOCKKFD"]
TENSOR_WAVE = ["tests/test_tensor_amd.py", "-k", "(wave_size_reaches or straddling) and MOCKKFD"]
# without the compile-time guard: a timing test on a loaded machine fails with no mutant at all
GEMM = ["tests/test_tensor_matmul.py", "-k", "odd_shapes or cropped or blocks_chunks or packs_views or drawn"]
LAST_K = ["tests/test_tensor_matmul.py", "-k", "last_k_chunk"]
SYMBOLIC = ["tests/test_tensor_views.py", "tests/test_tensor_compiler.py", "tests/test_tensor_indexing.py", "-k", "not compile_time"]
# the newer targeted tests come first in each set (pytest runs its arguments in order and stops at the first failure),
# except test_launch_args.py: a kernel given misplaced arguments on the CPU engine can crash pytest (SIGSEGV, no verdict)
CACHES = "tests/test_mock_caches.py"
WAITS = "tests/test_mock_waits.py tests/test_amd_timeline64.py"  # the mock's compare; the driver's waits on every board
CP_RULES = "tests/test_mock_rules.py::test_cp_rule tests/test_mock_rules.py::test_what_the_rules_let_through"
LS = "tests/test_amd_launch_state.py::test_"
HIDDEN = f"{LS}hidden_arguments tests/test_launch_args.py::test_hidden_arguments_hold_every_grid_launch_dims_lets_through"
REF = "tests/test_emu_reference.py"

MUTATIONS: tuple[Mutation, ...] = (
  # ---- driver: PM4 and SDMA packets (drivers/amd) ----
  M("pm4-acquire-no-gl2-inv", "driver", "drivers/amd/pm4.py", "p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL2_INV(1)", "p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL2_INV(0)",
    "ACQUIRE_MEM does not invalidate GL2: a dispatch may read stale L2 lines", CACHES + " " + PM4, "mock cache model"),
  M("pm4-release-no-gl2-wb", "driver", "drivers/amd/pm4.py", "p.PACKET3_RELEASE_MEM_GCR_SEQ | p.PACKET3_RELEASE_MEM_GCR_GL2_WB |", "p.PACKET3_RELEASE_MEM_GCR_SEQ |",
    "RELEASE_MEM does not write GL2 back: the host may read stale results", CACHES + " " + PM4, "mock cache model"),
  M("pm4-wait-eq", "driver", "drivers/amd/pm4.py", "p.WAIT_REG_MEM_FUNCTION(WAIT_GEQ)", "p.WAIT_REG_MEM_FUNCTION(3)",
    "WAIT_REG_MEM compares with = instead of >=: a wait on a signal already past its value hangs", WAITS + " " + PM4 + " tests/test_core.py", "mock strict waits"),
  M("pm4-wait-mask", "driver", "drivers/amd/pm4.py", "lo32(value), hi32(value), 0xffffffff, 0xffffffff, 4)", "lo32(value), hi32(value), 0xffff, 0xffffffff, 4)",
    "WAIT_REG_MEM64 with mask 0xffff in its low word: bits 16..31 of the low word are not compared", WAITS + " " + PM4 + " tests/test_core.py tests/test_amd_rings.py", "mock strict waits"),
  M("pm4-wait-32-bits", "driver", "drivers/amd/pm4.py", "lo32(value), hi32(value), 0xffffffff, 0xffffffff, 4)", "lo32(value), hi32(value), 0xffffffff, 0, 4)",
    "WAIT_REG_MEM64 with a zero high mask word: a 32-bit compare of the 64-bit timeline passes early past 2^32",
    WAITS),
  M("pm4-gfx9-wait-low-only", "driver", "drivers/amd/signal_halves.py", "return (addr + 4, SplitWaitRef(signal, value, 32, earlier)),",
    "return (addr, SplitWaitRef(signal, value, 0, earlier)),",
    "the 32-bit waits (gfx9, SDMA) compare the low word only: past 2^32 they pass early", WAITS),
  M("split-wait-reached-unseen", "driver", "drivers/amd/signal_halves.py", "if self.signal.value >= v or any(", "if any(",
    "a split wait the signal already passed, across a 2^32 block end, is sent as it is: its low-word wait hangs",
    ["tests/test_amd_timeline64.py", "-k", "block_end or 64_bit_truth"]),
  M("split-wait-earlier-unseen", "driver", "drivers/amd/signal_halves.py", " or any(resolve(e, var_vals) >= v for e in self.earlier)", "",
    "a split wait behind a wait of its own queue for a larger value is sent as it is: past a block end its low-word wait hangs",
    "tests/test_amd_timeline64.py -k block_end"),
  M("split-wait-own-write-unseen", "driver", "drivers/amd/sdma.py", "    self.split_signal(signal, value)  #", "    pass  #",
    "an SDMA queue's split wait after its own write past a block end is sent as it is: its low-word wait hangs",
    ["tests/test_amd_timeline64.py", "-k", "own_queue"]),
  M("pm4-rsrc3-zero", "driver", "drivers/amd/pm4.py", "self.set_sh_reg(r.regCOMPUTE_PGM_RSRC3, program.rsrc3)", "self.set_sh_reg(r.regCOMPUTE_PGM_RSRC3, 0)",
    "COMPUTE_PGM_RSRC3 written as 0 instead of the descriptor's", f"{LS}rsrc3_trap_fields_reach_the_gpu {DISPATCH}", "emulator RSRC handling"),
  M("pm4-wave32-always", "driver", "drivers/amd/pm4.py", "cs_w32_en=int(wave32)", "cs_w32_en=1",
    "the DISPATCH_INITIATOR wave32 bit always set: a wave64 kernel runs as wave32", f"{LS}wave64_kernel_runs_in_wave64 {DISPATCH}", "wave64 tests"),
  M("pm4-signal-no-interrupt", "driver", "drivers/amd/pm4.py", "INT_SEL_AFTER_WRITE_CONFIRM if event else INT_SEL_NONE", "INT_SEL_NONE",
    "a signal with an event never raises its interrupt", PM4 + " tests/test_threads.py::test_amd_launches_and_copies_from_threads"),
  M("pm4-priv-steps", "driver", "drivers/amd/pm4.py", "step in (0, 1, 2, 5)", "step in (0, 1, 2)",
    "RSRC1.PRIV (the CWSR workaround) left out on GC 11.0.5", "tests/test_pm4_dialects.py"),
  M("pm4-ib-size", "driver", "drivers/amd/pm4.py", "ndwords | p.INDIRECT_BUFFER_VALID", "(ndwords - 1) | p.INDIRECT_BUFFER_VALID",
    "INDIRECT_BUFFER one dword short: the last packet of a bound queue is cut", PM4 + " tests/test_amd_rings.py " + CACHES),
  M("sdma-fence-order", "driver", "drivers/amd/signal_halves.py", "return (addr, lo32(value)), (addr + 4, hi32(value))",
    "return (addr + 4, hi32(value)), (addr, lo32(value))",
    "SDMA fence halves high first: a reader sees the new high word with the old low one, more than the value",
    "tests/test_mock_waits.py::test_a_signal_past_2_32_is_never_seen_above_its_value " + WAITS + " tests/test_amd_queues.py tests/test_amd_dispatch.py tests/test_core.py"),
  M("sdma-copy-count", "driver", "drivers/amd/sdma.py", "count=n - 1,", "count=n,",
    "COPY_LINEAR's count is bytes, not bytes - 1: one byte too many copied",
    "tests/test_amd_queues.py tests/test_core.py tests/test_amd_scratch.py::test_spilling_kernel_on_every_engine"),
  M("sdma-poll-mask", "driver", "drivers/amd/sdma.py", "value=ref, mask=0xffffffff", "value=ref, mask=0xffff",
    "SDMA POLL_REGMEM with mask 0xffff", WAITS + " tests/test_amd_queues.py tests/test_amd_dispatch.py tests/test_core.py", "mock strict waits"),
  # ---- mock: the kernel interface and the GPU model (drivers/mock) ----
  M("mock-wait64-low-word", "mock", "drivers/mock/amdgpu/cp.py", "self.poll(lambda: test(self.gpu.mem.read_u64(addr) & mask, ref & mask))",
    "self.poll(lambda: test(self.gpu.mem.read_u32(addr) & mask, ref & mask))",
    "the mock's WAIT_REG_MEM64 reads 32 bits: the high words never count", WAITS),
  M("mock-acquire-any-length", "mock", "drivers/mock/amdgpu/cp.py", "else ({7}, self._acquire_mem)", "else (None, self._acquire_mem)",
    "the CP accepts an ACQUIRE_MEM of any length", CP_RULES + " tests/test_amd_queues.py", "mock rule tests, cache model"),
  M("mock-sh-reg-window", "mock", "drivers/mock/amdgpu/cp.py", "first + len(body) - 1 <= end", "first + len(body) - 2 <= end",
    "SET_SH_REG one register past the window is accepted", CP_RULES + " tests/test_amd_queues.py", "mock rule tests"),
  M("mock-nested-ib", "mock", "drivers/mock/amdgpu/cp.py", ("if self.ib_depth: raise", "elif not chain: raise"), ("if self.ib_depth > 1: raise", "elif False: raise"),
    "an INDIRECT_BUFFER inside an indirect buffer is accepted", CP_RULES + " tests/test_amd_queues.py", "mock rule tests"),
  M("mock-wait-geq-gt", "mock", "drivers/mock/amdgpu/cp.py", "5: lambda v, r: v >= r", "5: lambda v, r: v > r",
    "WAIT_REG_MEM/POLL_REGMEM function 5 (>=) computes >", WAITS + " tests/test_amd_queues.py tests/test_core.py", "mock strict waits"),
  M("mock-wait-ignores-mask", "mock", "drivers/mock/amdgpu/cp.py", "test(self.gpu.mem.read_u32(addr) & mask, ref & mask)", "test(self.gpu.mem.read_u32(addr), ref)",
    "WAIT_REG_MEM ignores its mask", WAITS + " tests/test_amd_queues.py", "mock strict waits"),
  M("mock-wait-align", "mock", "drivers/mock/amdgpu/cp.py", "if lo & 3: raise QueueError(f\"WAIT_REG_MEM on", "if lo & 0: raise QueueError(f\"WAIT_REG_MEM on",
    "WAIT_REG_MEM polls an address with its reserved bits 1:0 set", CP_RULES),
  M("mock-release-align", "mock", "drivers/mock/amdgpu/cp.py", "if addr & (7 if data_sel in (2, 3, 4) else 3):", "if addr & 3:",
    "RELEASE_MEM accepts a 64-bit write to a 4-byte aligned address", CP_RULES + " tests/test_amd_queues.py"),
  M("mock-no-shader-en", "mock", "drivers/mock/amdgpu/cp.py", "if not initiator & 1: raise", "if not initiator & 0: raise",
    "DISPATCH_DIRECT without COMPUTE_SHADER_EN runs", CP_RULES + " tests/test_amd_queues.py"),
  M("mock-priv-board", "mock", "drivers/mock/amdgpu/cp.py", "gfxv // 100 == 1100 and", "gfxv // 100 == 1101 and",
    "the CWSR PRIV rule not applied to GC 11.0.x", CP_RULES + " tests/test_amd_queues.py"),
  M("mock-sdma-nop-count", "mock", "drivers/mock/amdgpu/sdma.py", "n = 1 + self.nop_count(header)", "n = self.nop_count(header)",
    "an SDMA NOP is one dword shorter than its header says", "tests/test_mock_rules.py::test_sdma_rule tests/test_amd_queues.py"),
  M("mock-sdma-fence-align", "mock", "drivers/mock/amdgpu/sdma.py", "if addr & 3: raise QueueError(f\"SDMA FENCE", "if addr & 0: raise QueueError(f\"SDMA FENCE",
    "SDMA FENCE to an unaligned address is accepted", "tests/test_mock_rules.py::test_sdma_rule tests/test_amd_queues.py"),
  M("mock-kfd-priority", "mock", "drivers/mock/kfd.py", "if a.queue_priority > 15:", "if a.queue_priority > 16:",
    "CREATE_QUEUE accepts queue priority 16", "tests/test_mock_rules.py::test_kfd_rule tests/test_mock_kfd.py", "mock rule tests"),
  M("mock-kfd-n-success", "mock", "drivers/mock/kfd.py", "if a.n_success > a.n_devices:", "if a.n_success >= a.n_devices:",
    "MAP_MEMORY_TO_GPU rejects a retry with n_success == n_devices", "tests/test_mock_kfd.py::test_a_map_batch_reports_how_many_devices_it_did tests/test_mock_rules.py::test_kfd_rule tests/test_mock_kfd.py", "mock rule tests"),
  # ---- assembler: encoder, decoder, parser, printer and their fast paths (asm/) ----
  M("asm-decode-vgpr-range", "assembler", "asm/fast_decode.py", "(count == \"l\" or v + count <= 256))", "(count == \"l\" or v <= 255))",
    "the decoder accepts a VGPR range past v255", ASM_LLVM, "assembler branch"),
  M("asm-source-vgpr-range", "assembler", "asm/operands.py", "value - 256 + count <= 256 else None", "value - 256 < 256 else None",
    "a VGPR source range past v255 gets a text", [EDGES, *ASM_LLVM], "assembler branch"),
  # (was operands.parse_vgpr's check: no code calls parse_vgpr, so that mutant could not change any behaviour)
  M("asm-parse-vgpr-range", "assembler", "asm/build.py", "if arg.value + arg.count > 256: raise", "if arg.value + arg.count > 257: raise",
    "the assembler accepts v[255:256]", [EDGES, *ASM]),
  M("asm-inline-64", "assembler", "asm/operands.py", "if -16 <= number <= 64: return", "if -16 <= number < 64: return",
    "64 becomes a literal instead of an inline constant", [EDGES, *ASM]),
  M("asm-inline-negative", "assembler", "asm/operands.py", "else 192 - number), None", "else 191 - number), None",
    "negative inline constants encoded one off (-1 as -2)", [EDGES, *ASM]),
  # (was the "sihex" format's -16 printed as hex: no table field has that format, so that mutant could not change any behaviour)
  M("asm-print-inline-range", "assembler", "asm/numbers.py", "return str(value) if value <= 64 else", "return str(value) if value < 64 else",
    "a SOPP immediate of 64 printed as 0x40 (llvm-mc prints 64)", [EDGES, *ASM_LLVM]),
  M("asm-literal-ssrc", "assembler", "asm/instruction.py", "kinds[f].kind in (\"src\", \"ssrc\"))", "kinds[f].kind in (\"src\",))",
    "a scalar source of 255 is not seen as a literal", [*ASM, "tests/test_emu.py"]),
  M("asm-branch-delta", "assembler", "asm/text.py", "delta = (dest - offsets[i] - 4) // 4", "delta = (dest - offsets[i]) // 4",
    "a branch to a label is one instruction too far", [*ASM, "tests/test_emu.py"]),
  M("asm-decode-literal", "assembler", "asm/fast_decode.py", "if word >> lo & m == 255: need = True; break", "if word >> lo & m == 254: need = True; break",
    "the fast decoder misses a literal operand", ASM_LLVM, "assembler branch"),
  M("asm-codeobject-kernarg-size", "assembler", "asm/codeobject.py", "self.metadata.get(\".kernarg_segment_size\", self.descriptor.kernarg_size)",
    "self.descriptor.kernarg_size", "the kernarg size from the descriptor only, ignoring the metadata", f"{LS}the_kernarg_segment_is_sized_by_the_metadata tests/test_codeobject.py tests/test_amd_dispatch.py"),
  # ---- emulator (asm/emu) ----
  M("emu-cmp-le-int", "emulator", "asm/emu/ops_valu.py", "\"le\": np.less_equal, \"gt\": np.greater, \"ne\"", "\"le\": np.less, \"gt\": np.greater, \"ne\"",
    "integer v_cmp_le computes lt", [REF, "-k", "v_cmp_le_i or v_cmp_le_u"], "emulator opcode tests"),
  M("emu-addc-carry", "emulator", "asm/emu/ops_salu.py", "def _addc(a, b, c): r = a + b + c; return r & M32, (r > M32)", "def _addc(a, b, c): r = a + b + c; return r & M32, (r >= M32)",
    "s_addc's carry set at 0xffffffff exactly", [REF, "-k", "s_addc_u32"], "emulator opcode tests"),
  M("emu-sub-borrow", "emulator", "asm/emu/ops_salu.py", "return (a - b) & M32, (b > a)", "return (a - b) & M32, (b >= a)",
    "s_sub_u32 borrows when equal", [REF, "-k", "salu_opcode and (s_sub_u32 or s_subb_u32)"], "emulator opcode tests"),
  M("emu-xnor", "emulator", "asm/emu/ops_valu.py", "\"v_xnor_b32\": (U, (U, U), lambda a, b: ~(a ^ b))", "\"v_xnor_b32\": (U, (U, U), lambda a, b: a ^ b)",
    "v_xnor_b32 computes xor", [REF, "-k", "v_xnor_b32"], "emulator opcode tests"),
  M("emu-lerp-round", "emulator", "asm/emu/ops_valu.py", " + ((c >> u32(8 * k)) & u32(1))", "",
    "v_lerp_u8 drops its rounding bit", [REF, "-k", "v_lerp_u8"], "emulator opcode tests"),
  M("emu-bfi", "emulator", "asm/emu/ops_valu.py", "lambda a, b, c: (a & b) | (~a & c))", "lambda a, b, c: (a & b) | (a & c))",
    "v_bfi_b32 drops the complement", [REF, "-k", "v_bfi_b32"], "emulator opcode tests"),
  M("emu-dpp8-fi", "emulator", "asm/emu/ops_vdpp.py", "fetch_inactive, bound_zero = fmt.endswith(\"FI\"), True", "fetch_inactive, bound_zero = False, True",
    "DPP8 fetch-inactive (DPP8FI) ignored", [REF, "-k", "DPP8FI and (v_mov_b32 or v_add_nc_u32 or v_xnor_b32)"], "emulator opcode tests"),
  M("emu-cselect", "emulator", "asm/emu/ops_salu.py", "\"s_cselect_b32\": (32, lambda a, b, c: (np.where(c != 0, a, b)", "\"s_cselect_b32\": (32, lambda a, b, c: (np.where(c == 0, a, b)",
    "s_cselect_b32 picks the wrong source", [REF, "-k", "s_cselect"]),
  M("emu-branch-target", "emulator", "asm/emu/ops_flow.py", "target = pc + 4 + 4 * (", "target = pc + 4 * (",
    "a branch lands one instruction early", EMU),
  M("emu-signed-offset", "emulator", "asm/emu/ops_mem.py", "return v[name] - (1 << bits) if v[name] >> (bits - 1) & 1 else v[name]",
    "return v[name] - (1 << bits) if v[name] >> bits & 1 else v[name]", "a negative global/flat offset read as positive", "tests/test_emu.py::test_global_negative_offsets " + EMU + " tests/test_emu_llvm.py"),
  M("emu-ds-offset1", "emulator", "asm/emu/ops_mem.py", "base_off = o0 | (o1 << 8)", "base_off = o0 | (o1 << 7)",
    "a DS offset above 255 misplaced", EMU + " tests/test_emu_llvm.py tests/test_emu_corpus.py::test_corpus"),
  M("emu-wg-id-z", "emulator", "asm/emu/dispatch.py", "(gid % gx, (gid // gx) % gy, gid // (gx * gy))", "(gid % gx, (gid // gx) % gy, gid // gx)",
    "workgroup id Z ignores the Y extent", "tests/test_emu_dispatch.py tests/test_amd_dispatch.py tests/test_emu_kernels.py " + HIDDEN, "emulator hidden args / interleaving"),
  M("emu-tid-y", "emulator", "asm/emu/dispatch.py", "(ty << 10 if tidig >= 1 else 0)", "(ty << 10 if tidig >= 2 else 0)",
    "workitem id Y not packed into v0 when TIDIG_COMP_CNT is 1", f"{LS}workitem_id_y_with_two_dims tests/test_emu_dispatch.py tests/test_amd_dispatch.py tests/test_emu_kernels.py " + HIDDEN, "emulator hidden args"),
  M("emu-tg-size", "emulator", "asm/emu/dispatch.py", "if what in (\"x\", \"y\", \"z\") else wpg", "if what in (\"x\", \"y\", \"z\") else 1",
    "the workgroup-info SGPR holds 1 instead of the waves per workgroup", f"{LS}workgroup_info_counts_the_waves_of_the_workgroup tests/test_emu_dispatch.py tests/test_emu.py {LS}every_user_sgpr", "emulator hidden args"),
  M("emu-initiator-w32", "emulator", "asm/emu/dispatch.py", "wave32 = bool(gc.regCOMPUTE_DISPATCH_INITIATOR.decode(state.initiator).get(\"cs_w32_en\", 0))", "wave32 = bool(state.initiator >> 14 & 1)",
    "the wave mode read from the wrong DISPATCH_INITIATOR bit", f"{LS}wave64_kernel_runs_in_wave64 {DISPATCH}", "wave64 tests"),
  # ---- launch path: kernargs, user SGPRs, queues (hcq/, drivers/amd/program.py) ----
  M("launch-block-count-y", "launch", "drivers/amd/program.py", "\"hidden_block_count_y\": gs[1]", "\"hidden_block_count_y\": gs[0]",
    "hidden_block_count_y given the x count", HIDDEN + " " + DISPATCH + " tests/test_emu_kernels.py", "emulator hidden args"),
  M("launch-grid-dims", "launch", "drivers/amd/program.py", "+ (gs[2] * ls[2] > 1)", "+ (gs[2] * ls[2] >= 1)",
    "hidden_grid_dims off by one", HIDDEN + " " + DISPATCH + " tests/test_emu_kernels.py", "emulator hidden args"),
  M("launch-group-size-y", "launch", "drivers/amd/program.py", "\"hidden_group_size_y\": ls[1]", "\"hidden_group_size_y\": ls[0]",
    "hidden_group_size_y given the x size", HIDDEN + " " + DISPATCH + " tests/test_emu_kernels.py", "emulator hidden args"),
  M("launch-packet-grid", "launch", "drivers/amd/program.py", "= gs[0] * ls[0], gs[1] * ls[1], gs[2] * ls[2]", "= gs[0], gs[1] * ls[1], gs[2] * ls[2]",
    "the dispatch packet's grid_size_x counts workgroups, not work-items", f"{LS}dispatch_packet_matches_the_launch {DISPATCH}"),
  M("launch-kernarg-ptr-order", "launch", "drivers/amd/program.py", "out += [lo32(kernargs_addr), hi32(kernargs_addr)]", "out += [hi32(kernargs_addr), lo32(kernargs_addr)]",
    "the kernarg pointer's user SGPR halves swapped", f"{LS}every_user_sgpr {DISPATCH}"),
  M("launch-queue-ptr", "launch", "drivers/amd/program.py", "KERNEL_CODE_PROPERTY_ENABLE_SGPR_QUEUE_PTR: out += [0, 0]", "KERNEL_CODE_PROPERTY_ENABLE_SGPR_QUEUE_PTR: out += [0]",
    "the queue pointer takes one user SGPR instead of two: the kernarg pointer lands one off", f"{LS}every_user_sgpr {DISPATCH}", "user-SGPR tests"),
  M("launch-lds-round", "launch", "drivers/amd/program.py", "lds = (d.group_segment_fixed_size + 511) // 512", "lds = d.group_segment_fixed_size // 512",
    "RSRC2.LDS_SIZE rounded down: the last partial granule of LDS is missing", DISPATCH + " tests/test_tensor_amd.py", "emulator RSRC handling"),
  M("launch-natural-align", "launch", "hcq/program.py", ("offset = (offset + size - 1) // size * size", "offset = (offset + align - 1) // align * align"),
    ("offset = (offset + size - 1) // 4 * 4", "offset = (offset + align - 1) // 4 * 4"),
    "natural layout aligns every argument to 4 bytes", "tests/test_core.py tests/test_emu_dispatch.py tests/test_launch_args.py"),
  M("launch-buffer-addr-32", "launch", "hcq/program.py", "out, arg.offset, b.addr)", "out, arg.offset, b.addr & 0xffffffff)",
    "a buffer's address truncated to 32 bits", "tests/test_core.py tests/test_amd_dispatch.py tests/test_launch_args.py"),
  M("launch-dims-pad", "launch", "hcq/program.py", "return (t + (1, 1))[:3]", "return (t + (0, 1))[:3]",
    "a 1-D launch gets a Y extent of 0", "tests/test_core.py tests/test_amd_dispatch.py tests/test_launch_args.py"),
  M("launch-patch-refreeze", "launch", "hcq/queue.py", "if c is self._q or c is old else c", "if c is self._q else c",
    "patch slots into the old frozen words are lost when a queue grows after its first submit", "tests/test_amd_queues.py::test_patch_slots_keep_their_values_when_a_submitted_queue_grows tests/test_amd_queues.py tests/test_core.py tests/test_amd_rings.py"),
  M("launch-bound-wait", "launch", "drivers/amd/pm4.py", "if n >= k: self._done.wait(n - k + 1)", "if n >= k: self._done.wait(n - k)",
    "a bound queue's copy is repatched before its previous run has finished", "tests/test_amd_rings.py tests/test_amd_queues.py " + CACHES),
  M("launch-timeline-wait", "launch", "hcq/device.py", ("vals = {\"wait\": value - 1,", "vals[\"wait\"] = v - 1"), ("vals = {\"wait\": value - 2,", "vals[\"wait\"] = v - 2"),
    "a launch waits for the launch before last, not the last", "tests/test_core.py tests/test_amd_dispatch.py tests/test_amd_rings.py"),
  M("launch-kernarg-reuse", "launch", "hcq/device.py", "self.device.timeline_signal.wait(wait_for)", "self.device.timeline_signal.wait(wait_for - 1)",
    "the kernarg ring reuses a region one launch too early", "tests/test_core.py::test_the_kernarg_ring_never_overwrites_the_arguments_of_a_launch_in_flight tests/test_core.py tests/test_amd_rings.py"),
  # ---- tensor compiler (hcq/tensor) ----
  M("tensor-tree-barrier", "tensor", "hcq/tensor/render_gpu.py", "    self.barrier()\n    part = ", "    part = ",
    "an AMD tensor reduction's lane tree without its barrier: runs read the other waves' parts before they are written",
    TENSOR_AMD, "emulator wave interleaving"),
  M("tensor-butterfly-skip", "tensor", "hcq/tensor/render_gpu.py", "      mask //= 2\n", "      mask //= 4\n",
    "the shuffle butterfly skips every other level: half of each run's lanes never meet", TENSOR_AMD),
  M("tensor-half", "tensor", "hcq/tensor/render_gpu.py", "v = self.butterfly(op, acc, min(self.group, width))",
    "v = self.butterfly(op, acc, min(self.group, width) // 2)",
    "each run of lanes combines only its first half: half of the lanes' partial results are dropped", TENSOR_AMD),
  M("tensor-group-below-wave", "tensor", "hcq/tensor/render_gpu.py", "return min(LOCAL, max(wave_size, 1 << ",
    "return min(LOCAL, max(32, 1 << ", "a grouped reduction of 32 lanes launched on wave64: a workgroup of half a wave", TENSOR_WAVE),
  M("tensor-wave-feature", "tensor", "hcq/tensor/render_amd.py", '"+wavefrontsize64,-wavefrontsize32" if self.wave_size == 64',
    '"+wavefrontsize32,-wavefrontsize64" if self.wave_size == 64', "the AMD renderer builds wave32 code whatever the arch's wave size (gfx942, wave64 mode)", TENSOR_WAVE),
  M("tensor-div-range", "tensor", "hcq/tensor/symbolic.py", "if a.vmin >= 0 and a.vmax < c: return Num(0)", "if a.vmin >= 0 and a.vmax <= c: return Num(0)",
    "x // c folded to 0 when x can equal c", SYMBOLIC),
  M("tensor-mod-of-mod", "tensor", "hcq/tensor/symbolic.py", "if isinstance(a, Mod) and a.c % c == 0: return mod(a.a, c)", "if isinstance(a, Mod) and a.c % c == 0: return a",
    "(x % 8) % 4 folded to x % 8", SYMBOLIC),
  M("tensor-div-of-div", "tensor", "hcq/tensor/symbolic.py", "if isinstance(a, Div): return div(a.a, a.c * c)", "if isinstance(a, Div): return div(a.a, a.c + c)",
    "(x // a) // b folded to x // (a + b)", SYMBOLIC),
  M("tensor-view-stride", "tensor", "hcq/tensor/view.py", "if st: off = off + idx * st", "if st > 1: off = off + idx * st",
    "a view drops its stride-1 dimensions from the index", SYMBOLIC),
  M("tensor-gemm-edge-rows", "tensor", "hcq/tensor/render_gemm.py", 'e(f"  %er.more = icmp slt i64 %er.n, {g.rows}")',
    'e(f"  %er.more = icmp slt i64 %er.n, {g.rows - 1}")', "a cropped matmul's edge tile never stores its last row", GEMM),
  M("tensor-gemm-b-panels", "tensor", "hcq/tensor/render_gemm.py", 'e(f"  %pb.pc = icmp slt i64 %pb.pn, {g.panels}")',
    'e(f"  %pb.pc = icmp slt i64 %pb.pn, {g.panels - 1}")', "b's pack leaves each column block's last panel unpacked", GEMM),
  M("cpu-buffers-shared", "driver", "drivers/cpu/device.py", "mmap.mmap(-1, length, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)",
    "mmap.mmap(-1, length)", "the CPU device's buffers shared anonymous mappings again (shmem: no huge pages)",
    ["tests/test_core.py", "-k", "huge_pages"]),
  M("cpu-buffers-own-length", "driver", "drivers/cpu/device.py",
    "length = -(-nbytes // HUGE_PAGE_BYTES) * HUGE_PAGE_BYTES + HUGE_PAGE_BYTES if huge else nbytes", "length = nbytes",
    "the CPU device's large buffers mapped at their own length: their last 2 MiB not covered whole (no huge page there)",
    ["tests/test_core.py", "-k", "huge_pages"]),
  M("tensor-cleanup-no-sroa", "tensor", "drivers/cpu/jit.py", "  mpm.add_sroa_pass()\n", "",
    "the generic CPU kernels' clean-up passes leave their allocas in memory", ["tests/test_tensor_compiler.py", "-k", "clean_up"]),
  M("tensor-gemm-a-tail", "tensor", "hcq/tensor/render_gemm.py", 'store_rows("pa.e", loads("pa.e", str(whole * N), tail)',
    'store_rows("pa.e", loads("pa.e", str(whole * N - N), tail)', "a's pack copies the vector before its k chunk's tail again in place of the tail", GEMM),
  M("tensor-gemm-lane-bound", "tensor", "hcq/tensor/render_gemm.py", 'e(f"  %{tag}.{name}d = sub i64 {b}, %{tag}.a{i}")',
    'e(f"  %{tag}.{name}d = sub i64 {b + 1}, %{tag}.a{i}")', "a lane mask's bounds one lane late: a pad's first lane read, a low pad's last one dropped", GEMM),
  M("tensor-gemm-narrow-guard", "tensor", "hcq/tensor/render_gemm.py", 'narrow_lanes = next((w for w in parts if top + col.coef["l"] * w >= end), 0)',
    'narrow_lanes = next((w for w in parts if top + col.coef["l"] * w >= end - 1), 0)',
    "the narrow k loop emitted a column too narrow for the last panel: no tile takes it (its compile paid for nothing)",
    ["tests/test_tensor_matmul.py", "-k", "narrow"]),
  M("tensor-gemm-last-k-floor", "tensor", "hcq/tensor/render_gemm.py", "steps = -(-valid // u) * u", "steps = valid // u * u",
    "the last k chunk's loop stops a step short where its valid rows are no whole number of steps", LAST_K),
  M("tensor-gemm-last-k-chunk", "tensor", "hcq/tensor/render_gemm.py", 'e(f"  %klast = icmp eq i64 %q{d}, {chunks - 1}")',
    'e(f"  %klast = icmp eq i64 %q{d}, {chunks - 2}")', "the chunk before the last one stops where the last one should", LAST_K),
  M("tensor-template-sharing", "tensor", "hcq/tensor/schedule.py", "if kept is not None and kept.sharing == _sharing(leaves) and _untouched(node, leaves):",
    "if kept is not None and _untouched(node, leaves):", "a templated product takes the kernel kept for leaves that shared one buffer "
    "with leaves that do not: one operand read for both", ["tests/test_tensor_matmul.py", "-k", "template"]),
  M("tensor-template-untouched", "tensor", "hcq/tensor/schedule.py", "if kept is not None and kept.sharing == _sharing(leaves) and _untouched(node, leaves):",
    "if kept is not None and kept.sharing == _sharing(leaves):", "a templated product whose reduction a consumer already computed is computed "
    "again", ["tests/test_tensor_matmul.py", "-k", "template"]),
  M("tensor-last-product-op", "tensor", "hcq/tensor/tensor.py", "and last.ops == (self.node.op, other.node.op) and last.settings",
    "and last.settings", "the last product's template is taken for an operand view realized in place since (read through the old view)",
    ["tests/test_tensor_matmul.py", "-k", "same_product"]),
  M("tensor-last-product-settings", "tensor", "hcq/tensor/tensor.py", "and last.settings == loops.matmul_settings()):", "):",
    "the last product's template is taken after the settings its plan read changed", ["tests/test_tensor_matmul.py", "-k", "same_product"]),
  M("launch-queues-unbounded", "launch", "hcq/device.py", 'program.__dict__["_launch_queues"] = Memo(LAUNCH_QUEUES_KEPT)',
    'program.__dict__["_launch_queues"] = Memo(1 << 30)',
    "a program's launch queues grow with every new grid", ["tests/test_core.py", "tests/test_nv_launch.py", "-k", "bounded"]),
  M("tensor-workspace-shared", "tensor", "hcq/tensor/render_llvm.py", 'lines += [f"  %ws.at = mul i64 %g, {workspace}"',
    'lines += [f"  %ws.at = mul i64 %g, 0"', "every workgroup of a packed matmul packs into the same part of the workspace",
    ["tests/test_tensor_matmul.py", "-k", "gemm_cropped or odd or workspace"]),
  M("cpu-workers-no-wake", "launch", "drivers/cpu/pool.py", "if self.parked: self.cond.notify_all()", "if self.parked: pass",
    "a grid posted while the CPU workers are parked does not wake them (the launching thread runs it alone)",
    ["tests/test_cpu_workers.py", "-k", "take_part"]),
  M("cpu-workers-no-join", "launch", "drivers/cpu/pool.py", "if not self._wait(done, part, now_ns() + self.spin_ns):", "if False:",
    "a grid ends when the launching thread runs out of workgroups, not when the workers' last one has ended",
    ["tests/test_cpu_workers.py", "-k", "take_part"]),
  M("cpu-wait-never-spins", "launch", "drivers/cpu/queue.py", "if (took := program.took.get(global_size)) is not None: self.device.expect_end(start, took)",
    "pass", "the CPU engine sets no spin window: a wait sleeps to the kernel's end and a thread is woken after it",
    ["tests/test_cpu_workers.py", "-k", "expected_end"]),
  M("cpu-wait-spins-past-window", "launch", "drivers/cpu/device.py", "spinner.wait_for(ctypes.addressof(word), value, min(window[1], end))",
    "spinner.wait_for(ctypes.addressof(word), value, end)", "a wait that reaches a kernel's spin window spins until the kernel ends, "
    "however late", ["tests/test_cpu_workers.py", "-k", "expected_end"]),
  M("amd-fault-not-drained", "driver", "drivers/amd/device.py", "    self.kfd.wait_events([self._memory_event, self._hw_event], 0)\n    raise GPUFault(",
    "    raise GPUFault(", "a fault the reset's stopped queues report is raised again by a later call",
    ["tests/test_amd_device.py", "-k", "one_fault"]),
  M("cpu-handover-skipped", "launch", "drivers/cpu/device.py", "if spinners and isinstance(workers, SpinningWorkers):",
    "if False:", "an engine that wrote a signal keeps the GIL: a thread spinning on it finds the GIL taken and sleeps",
    ["tests/test_cpu_workers.py", "-k", "runs_before"]),
  M("cpu-handover-unbounded", "launch", "drivers/cpu/device.py", "now_ns() + HANDOVER_NS)",
    "now_ns() + 10**12)", "an engine waits for a spinner to take the GIL back however long "
    "it takes", ["tests/test_cpu_workers.py", "-k", "never_takes"]),
  M("cpu-workers-part-base", "launch", "drivers/cpu/pool.py", "self._post(self.ctx, address, kernargs, gx, gy, part, base, *local_size)",
    "self._post(self.ctx, address, kernargs, gx, gy, part, 0, *local_size)", "every part of a grid past MAX_PART numbers its "
    "workgroups from 0", ["tests/test_cpu_workers.py", "-k", "parts"]),
  M("cpu-workers-no-posting-lock", "launch", "drivers/cpu/pool.py", "    with self._posting:\n", "    if True:\n",
    "two threads that run grids on the same CPU workers post over each other", ["tests/test_cpu_workers.py", "-k", "two_threads"]),
  M("cpu-workers-claim-unchecked", "launch", "drivers/cpu/pool.py", "br i1 %won, label %run, label %look", "br i1 true, label %run, label %look",
    "a workgroup is run by every thread that tried to take it, not only by the one whose compare-and-swap won",
    ["tests/test_cpu_workers.py", "-k", "rapid"]),
)


# ---- applying a mutation ------------------------------------------------------------------------------------

def edit(m: Mutation, text: str) -> tuple[str, str] | str:
  """(original, replacement) of the one alternative that occurs exactly once in `text`, or why there is none."""
  alts = list(zip(m.original, m.replacement)) if isinstance(m.original, tuple) else [(m.original, m.replacement)]
  counts = [text.count(o) for o, _ in alts]
  if counts.count(1) == 1 and sum(counts) == 1: return alts[counts.index(1)]
  return f"its original text occurs {sum(counts)} times in {m.file} (must be exactly once)"


def stale_reason(m: Mutation, root: Path = ROOT) -> str | None:
  """Why `m` does not apply to the tree at `root` (None when it does)."""
  path = root / m.file
  if not path.is_file(): return f"{m.file} does not exist"
  e = edit(m, path.read_text())
  return e if isinstance(e, str) else None


def covering_files(m: Mutation) -> list[str]:
  """The files the covering tests name (the arguments that are not options or -k expressions)."""
  out, skip = [], False
  for a in m.tests:
    if skip: skip = False; continue
    if a in ("-k", "-m"): skip = True; continue
    if not a.startswith("-"): out.append(a.split("::")[0])
  return out


def _drop_bytecode(path: Path) -> None:
  """Remove the cached bytecode of `path`: a mutant and its original can share a size and an mtime second."""
  for pyc in (path.parent / "__pycache__").glob(path.stem + ".*.pyc"): pyc.unlink()


BOOT = '''"""Written by tools/mutants.py: make the scratch copy at $HCQ_MUTANT_ROOT import its own hcq packages first."""
import importlib.util, os, sys
_root = os.environ.get("HCQ_MUTANT_ROOT")
_map = {PACKAGES!r}
class _MutantFinder:
  @classmethod
  def find_spec(cls, name, path=None, target=None):
    if name not in _map: return None
    folder = os.path.join(_root, _map[name])
    return importlib.util.spec_from_file_location(name, os.path.join(folder, "__init__.py"), submodule_search_locations=[folder])
if _root: sys.meta_path.insert(0, _MutantFinder)
'''


class Scratch:
  """A copy of the repository (no .git, .venv or caches) whose Python imports its own hcq."""

  def __init__(self, base: Path):
    self.dir = Path(tempfile.mkdtemp(prefix="hcq-mutant-", dir=base))
    self.root = self.dir / "repo"
    try:
      shutil.copytree(ROOT, self.root, symlinks=True, ignore=shutil.ignore_patterns(*COPY_IGNORE))
    except BaseException:
      shutil.rmtree(self.dir, ignore_errors=True)
      raise
    self.proc: subprocess.Popen | None = None
    (self.dir / "boot").mkdir()
    (self.dir / "boot" / "sitecustomize.py").write_text(BOOT.replace("{PACKAGES!r}", repr(PACKAGES)))
    self.env = dict(os.environ, HCQ_MUTANT_ROOT=str(self.root),
                    PYTHONPATH=os.pathsep.join([str(self.dir / "boot")] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))

  def stop(self) -> None:
    """Kill the running tests (their whole session: pytest and anything it started)."""
    if self.proc is not None and self.proc.poll() is None: os.killpg(self.proc.pid, signal.SIGKILL)

  def check_imports(self) -> None:
    """Every hcq package must come from the copy, or a mutant would run against the working tree."""
    code = "import hcq, hcq.asm, hcq.drivers, hcq.autogen, hcq.drivers.amd.pm4, hcq.asm.emu, hcq.tensor; " \
           "print('\\n'.join(m.__file__ for m in (hcq, hcq.asm, hcq.drivers, hcq.autogen, hcq.drivers.amd.pm4, hcq.asm.emu, hcq.tensor)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=self.root, env=self.env, capture_output=True, text=True, timeout=120)
    files = out.stdout.split()
    if out.returncode or len(files) != 7 or not all(Path(f).resolve().is_relative_to(self.root.resolve()) for f in files):
      raise RuntimeError(f"the scratch copy does not import its own hcq:\n{out.stdout}{out.stderr}")

  def run(self, m: Mutation, timeout: float) -> tuple[str, float, str]:
    """(verdict, seconds, last output lines): apply `m`, run its covering tests, restore the file."""
    path = self.root / m.file
    original = path.read_text()
    e = edit(m, original)
    if isinstance(e, str): return "stale", 0.0, e
    path.write_text(original.replace(*e))
    _drop_bytecode(path)
    t0 = time.monotonic()
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "--no-header", *m.tests]
    self.proc = proc = subprocess.Popen(cmd, cwd=self.root, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True, start_new_session=True)
    try:
      out, _ = proc.communicate(timeout=timeout)
      rc = proc.returncode
    except subprocess.TimeoutExpired:
      self.stop()
      out, _ = proc.communicate()
      rc = None
    finally:
      path.write_text(original)
      _drop_bytecode(path)
      self.proc = None
    secs = time.monotonic() - t0
    lines = out.strip().splitlines()
    failed = [ln for ln in lines if ln.startswith(("FAILED ", "ERROR "))]   # which test caught it
    tail = "\n".join(failed[:1] or lines[-3:])
    if rc is None: return "timeout", secs, tail
    if rc == 0: return "survived", secs, tail
    if rc in (1, 2): return "caught", secs, tail   # 1: a test failed; 2: collection/import broke (also a catch)
    return "error", secs, f"pytest exit {rc}: {tail}"      # 4 usage, 5 no tests: the entry's test list is wrong


def run_all(selected: list[Mutation], jobs: int, timeout: float, baseline: bool) -> list[tuple[Mutation, str, float, str]]:
  base = Path(tempfile.gettempdir())
  scratches: list[Scratch] = []
  try:
    for _ in range(jobs): scratches.append(Scratch(base))
    scratches[0].check_imports()
    free = list(scratches)

    def one(m: Mutation):
      s = free.pop()
      try:
        target = Mutation(m.id, m.area, m.file, m.original, m.original, m.bug, m.tests) if baseline else m
        verdict, secs, tail = s.run(target, timeout)
        if baseline and verdict in ("survived", "caught"): verdict = "passes" if verdict == "survived" else "FAILS"
      finally:
        free.append(s)
      detail = tail.replace("\n", "\n    ")[:300]
      print(f"{m.id:32s} {verdict:9s} {secs:6.1f}s  {m.bug}" + (f"\n    {detail}" if verdict != "passes" else ""), flush=True)
      return m, verdict, secs, tail

    ex = ThreadPoolExecutor(len(scratches))
    try:
      return list(ex.map(one, selected))
    except BaseException:   # Ctrl-C or SIGTERM: stop the running tests, start no more
      ex.shutdown(wait=False, cancel_futures=True)
      for s in scratches: s.stop()
      raise
    finally:
      ex.shutdown(wait=True)
  finally:
    for s in scratches: shutil.rmtree(s.dir, ignore_errors=True)


def report(results) -> None:
  print("\nscore by area (caught / applicable):")
  total_c = total_n = 0
  for area in AREAS:
    rs = [r for r in results if r[0].area == area]
    if not rs: continue
    n = sum(1 for r in rs if r[1] != "stale")
    c = sum(1 for r in rs if r[1] == "caught")
    total_c, total_n = total_c + c, total_n + n
    survivors = [r[0].id for r in rs if r[1] not in ("caught", "stale")]
    print(f"  {area:10s} {c:3d} / {n:3d}" + (f"   not caught: {', '.join(survivors)}" if survivors else ""))
  stale = [r[0].id for r in results if r[1] == "stale"]
  print(f"  {'total':10s} {total_c:3d} / {total_n:3d}" + (f"   ({len(stale)} stale: {', '.join(stale)})" if stale else ""))


def _interrupt(signum, frame):
  raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--only", action="append", default=[], metavar="ID", help="run only this mutation (repeatable)")
  ap.add_argument("--area", action="append", default=[], choices=AREAS, help="run only this area's mutations (repeatable)")
  ap.add_argument("-j", "--jobs", type=int, default=1, help="mutants run at once, each in its own scratch copy (default 1)")
  ap.add_argument("--timeout", type=float, default=600, help="seconds one mutant's tests may take (default 600)")
  ap.add_argument("--list", action="store_true", help="list the mutations and whether each applies; run nothing")
  ap.add_argument("--baseline", action="store_true", help="run the covering tests without the mutations (all must pass)")
  a = ap.parse_args(argv)
  ids = {m.id for m in MUTATIONS}
  unknown = [i for i in a.only if i not in ids]
  if unknown:
    print(f"mutants: no mutation {', '.join(map(repr, unknown))}; ids: {', '.join(sorted(ids))}", file=sys.stderr)
    return 2
  if a.jobs < 1: print("mutants: -j must be at least 1", file=sys.stderr); return 2
  selected = [m for m in MUTATIONS if (not a.only or m.id in a.only) and (not a.area or m.area in a.area)]
  if a.list:
    for m in selected:
      why = stale_reason(m)
      print(f"{m.id:32s} {m.area:10s} {'STALE: ' + why if why else 'applies':9s}  {m.file}: {m.bug}" + (f"  [in flux: {m.flux}]" if m.flux else ""))
    return 0
  if a.baseline: selected = list({m.tests: m for m in reversed(selected)}.values())[::-1]  # each distinct test set once
  signal.signal(signal.SIGTERM, _interrupt)   # a killed run still stops its tests and removes its scratch copies
  try:
    results = run_all(selected, a.jobs, a.timeout, a.baseline)
  except KeyboardInterrupt:
    print("mutants: interrupted; the working tree was never changed and the scratch copies are removed", file=sys.stderr)
    return 130
  if a.baseline:
    bad = [r[0].id for r in results if r[1] != "passes"]
    print(f"\nbaseline: {len(results) - len(bad)} / {len(results)} distinct test sets pass unmutated" + (f"; not those of: {', '.join(bad)}" if bad else ""))
    return 1 if bad else 0
  report(results)
  return 0


if __name__ == "__main__":
  sys.exit(main())
