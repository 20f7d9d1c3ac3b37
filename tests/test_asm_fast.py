"""hcq.asm's per-opcode fast paths against the generic ones they stand in for: decoding (accept/reject, fields,
errors), printing, building (bytes, errors) and parsing (bytes, line:column errors), on random words and on the
every-opcode samples of each arch, without llvm-mc (tests/test_asm_llvm.py checks the paths against llvm-mc)."""
from __future__ import annotations
import random
import re

import pytest

from hcq.asm import assemble, printer
from hcq.asm.build import build_generic
from hcq.asm.fast_build import builder_of
from hcq.asm.fast_asm import assembler
from hcq.asm.fast_decode import FAST_ARCHS, FAST_FORMATS, decode_all_at, decoder
from hcq.asm.fast_disasm import disassembler
from hcq.asm.fast_parse import line_parser, split_tokens
from hcq.asm.fast_print import printer_of
from hcq.asm.instruction import decode_generic
from hcq.asm.isa import ARCHS, load
from hcq.asm.parser import parse_line_generic
from hcq.asm.registers import Reg
from hcq.asm.tokens import split_operands
from hcq.asm.verify import sample_instructions

COMMON_FORMATS = {"SOP1", "SOP2", "SOPC", "SOPK", "SOPP", "SMEM", "VOP1", "VOP2", "VOPC", "VOP3", "VOP3SD", "VOP3P", "DS", "GLOBAL", "FLAT", "SCRATCH"}
WORDS = 12000  # per arch: half uniformly random, half forced into a covered format's fixed bits


def _outcome(fn, *args):
  """(result, None) or (None, 'ExceptionType: message') -- what a path did, for comparing two paths."""
  try: return fn(*args), None
  except Exception as e: return None, f"{type(e).__name__}: {e}"  # any exception: the fast path must raise the same


def _words(arch: str) -> list[bytes]:
  isa = load(arch)
  rng = random.Random(f"fast-{arch}")
  fmts = [isa.formats[f] for f in sorted(isa.by_op)]
  out = []
  for i in range(WORDS):
    w = rng.getrandbits(64)
    if i % 2:
      f = fmts[i % len(fmts)]
      w = w & ~f.fixed_mask | f.fixed_value
    out.append(w.to_bytes(8, "little") + rng.getrandbits(32).to_bytes(4, "little"))
  return out


def _samples(arch: str) -> list:
  """Every opcode's samples (verify.sample_instructions). An opcode whose samples the generic path cannot make
  yet is left out here: that is the generic path's failure, which test_asm_dsl reports; this file compares paths."""
  isa = load(arch)
  out = []
  for ops in isa.by_op.values():
    for opc in ops.values():
      try: out += sample_instructions(isa, opc)
      except Exception: pass  # noqa: BLE001 - see the docstring
  return out


def _same_decoding(isa, data: bytes) -> str | None:
  """None when the fast decoder and printer do exactly what the generic ones do with `data`, else the difference."""
  g, ge = _outcome(decode_generic, isa, data)
  f, fe = _outcome(decoder(isa).decode_at, data)
  if ge != fe: return f"{data.hex()}: generic {ge or str(g)!r}, fast {fe or str(f)!r}"
  if g is None: return None
  gt = printer.render(g)
  from_word = printer_of(isa).render(f)  # before the fields are unpacked: the word printer, where there is one
  if (g.opcode, g.values, g.literal, g.size, g.encode()) != (f.opcode, f.values, f.literal, f.size, f.encode()):
    return f"{data.hex()}: fields differ: {g.values} {g.literal} / {f.values} {f.literal}"
  from_values = printer_of(isa).render(f)  # the fields unpacked: the per-operand printers
  return None if gt == from_word == from_values else f"{data.hex()}: text {gt!r} / fast {from_word!r}, {from_values!r}"


@pytest.mark.parametrize("arch", ARCHS)
def test_decoding_random_words(arch: str):
  """Every random word: the fast decoder accepts exactly what decode_generic accepts (same DecodeError text
  otherwise), with the same fields, size, bytes and text."""
  isa = load(arch)
  words = _words(arch)
  problems = [p for p in (_same_decoding(isa, w) for w in words) if p]
  assert not problems, "\n".join(problems[:20])
  accepted = sum(1 for w in words if _outcome(decode_generic, isa, w)[0] is not None)
  assert accepted > WORDS // 10  # the corpus exercises acceptance as well as rejection


@pytest.mark.parametrize("arch", ARCHS)
def test_every_opcode_sample_fast_equals_generic(arch: str):
  """Every opcode's samples: fast build == build_generic (bytes), fast print == render, fast decode of the bytes
  == decode_generic, fast parse of the text == parse_line_generic, and the fast paths cover most opcodes."""
  isa = load(arch)
  b, lp = builder_of(isa), line_parser(isa)
  problems = []
  for inst in _samples(arch):
    opc = inst.opcode
    from hcq.asm.dsl import operands_of
    args, mods = operands_of(inst)
    g, ge = _outcome(build_generic, isa, opc, list(args), mods)
    f, fe = _outcome(b.build, opc, args, mods)
    if ge != fe or g is not None and g.encode() != f.encode(): problems.append(f"build {opc.name} {args} {mods}: {ge or g} / {fe or f}")
    data = inst.encode()
    p = _same_decoding(isa, data)
    if p: problems.append(p)
    text = printer.render(inst)
    g, ge = _outcome(parse_line_generic, isa, text)
    f, fe = _outcome(lp.parse, text)
    if ge != fe or g is not None and g.encode() != f.encode(): problems.append(f"parse {text!r}: {ge or g.encode().hex()} / {fe or f.encode().hex()}")
  assert not problems, "\n".join(problems[:20])
  if arch in FAST_ARCHS:  # other archs take the generic paths throughout, until the plans are written against them
    plans = [p for (fmt, _), p in decoder(isa).plans.items() if fmt in FAST_FORMATS]
    assert sum(1 for p in plans if p) > 0.85 * len(plans), f"only {sum(1 for p in plans if p)} of {len(plans)} opcodes decode through a plan"


def _stream_outcome(isa, data: bytes):
  """What decoding `data` instruction by instruction and rendering each does: the lines, or the error."""
  return _outcome(lambda: [printer.render(i) for i in decode_all_at(isa, data)])


@pytest.mark.parametrize("arch", ARCHS)
def test_disassembly_from_words_equals_decode_then_render(arch: str):
  """The text-from-words disassembler (hcq.asm.fast_disasm) gives decode-then-render's lines, or its DecodeError
  word for word: each random word alone, cut short, and all the accepted ones in one stream; and every
  opcode's samples in one stream."""
  isa = load(arch)
  lines = disassembler(isa).lines
  accepted, problems = [], []
  for data in _words(arch):
    g = _outcome(decode_generic, isa, data)[0]
    cases = [data[:4], data[:7], data[:8], data[:11]]
    if g is not None:
      accepted.append(data[:g.size])
      cases += [data[:g.size], data[:g.size] + b"\xff\xff"]
    for case in cases:
      ref = _stream_outcome(isa, case)
      if _outcome(lines, case) != ref: problems.append(f"{case.hex()}: {ref} / {_outcome(lines, case)}")
  stream = b"".join(accepted)
  assert _outcome(lines, stream) == _stream_outcome(isa, stream)
  samples = b"".join(i.encode() for i in _samples(arch))
  assert _outcome(lines, samples) == _stream_outcome(isa, samples)
  assert not problems, "\n".join(problems[:20])
  assert len(accepted) > WORDS // 10


def _variants(text: str, rng: random.Random) -> list[str]:
  """Lines near a sample: registers and numbers changed, negated, |abs|-wrapped, literals, modifiers added or
  given twice -- valid or not, each spelled as llvm-mc prints."""
  head, _, rest = text.partition(" ")
  out = []
  for _ in range(6):
    r = re.sub(r"(?<![\w:])(v|s)(\d+)", lambda m: m.group(1) + str(rng.choice([0, 1, 2, 7, 101, 105, 106, 127, 255, 256])) if rng.random() < 0.5 else m.group(0), rest)
    r = re.sub(r"(?<![\w\[:x])(\d+)(?![\w\]:])", lambda m: str(rng.choice([0, 1, 64, 65, 4095, 0x12345, 0xffffffff])) if rng.random() < 0.5 else m.group(0), r)
    r = re.sub(r"(?<![\w:|\[-])(v\d+)", lambda m: rng.choice(["-", "|", "-|", ""]).join(["", m.group(1)]) + ("|" if rng.random() < 0.3 else "") if rng.random() < 0.3 else m.group(0), r)
    if rng.random() < 0.4: r += " " + rng.choice(["clamp", "offset:8", "glc", "mul:2", "offset:4 offset:8", "dlc slc", "0x1234", "clamp clamp"])
    if rng.random() < 0.2: r = r.replace(", ", ", 0x" + format(rng.getrandbits(32), "x") + ", ", 1)
    out.append(f"{head} {r}" if r else head)
  return out


@pytest.mark.parametrize("arch", ARCHS)
def test_assembly_to_bytes_equals_the_line_parser(arch: str):
  """The line-to-bytes assembler (hcq.asm.fast_asm) gives the line parser's bytes wherever it answers, on every
  opcode's samples and on lines near them; it answers for most samples; whole programs assemble alike."""
  isa = load(arch)
  fast, lp = assembler(isa), line_parser(isa)
  rng = random.Random(f"asm-{arch}")
  samples = _samples(arch)
  texts = [printer.render(i) for i in samples]
  common, answered, problems = 0, 0, []  # samples of the formats compute kernels are made of, and how many answered
  for i, (inst, text) in enumerate(zip(samples, texts)):
    is_common = inst.opcode.fmt.name in COMMON_FORMATS
    common += is_common
    for line in [text] + (_variants(text, rng) if i % 3 == 0 else []):
      got = fast.encode(line)
      if got is None: continue
      answered += line is text and is_common
      want = _outcome(lambda: lp.parse(line).encode())
      if want != (got, None): problems.append(f"{line!r}: line parser {want}, to bytes {got.hex()}")
  assert not problems, "\n".join(problems[:20])
  if arch in FAST_ARCHS: assert answered > 0.85 * common, f"only {answered} of {common} samples go straight to bytes"
  for text in BAD_LINES: assert fast.encode(text) is None, text
  program = "\n".join(texts[::7])
  assert assemble(program, arch) == b"".join(parse_line_generic(isa, t).encode() for t in texts[::7])


BAD_LINES = ["v_add_f32_e32 v0, v1", "v_add_f32_e32 v0, v1, s2", "s_load_b128 s[4:6], s[0:1], 0x10", "v_add_f32_e64 v0, v1, v2 clampx",
             "v_mov_b32_e32 v0, 0x123456789", "global_load_b32 v1, v2, s[1:2] offset:16", "v_addd_f32 v0, v1, v2",
             "s_waitcnt vmcnt(99)", "v_add_f32_e64 v0, |v1, v2", "v_add_f32_e32 v0, v1, v[2:3]", "ds_load_b32 v1, v2 offset:70000",
             "v_mul_f32_e64 v0, -|v1|, |v2| mul:3", "s_mov_b32 s0, s1, s2", "v_cndmask_b32_e32 v0, 1.5, v1, vcc_lo extra",
             "  v_add_f32_e32 v0, v1,", "v_fma_f32 v0, v1, 0x1234, 0x5678", "s_add_u32 s0, v1, s2", "v_fmamk_f32 v0, v1, 0x100000000, v2",
             "s_setreg_imm32_b32 hwreg(HW_REG_MODE), 0x100000000", "global_load_b32 v1, v[2:3], off offset:8388608", "s_load_b32 s0, s[0:1], 0x800000"]


@pytest.mark.parametrize("arch", ARCHS)
def test_errors_are_the_generic_ones(arch: str):
  """Bad lines and bad DSL operands raise the generic path's exception, word for word (line:column included)."""
  isa = load(arch)
  for text in BAD_LINES:
    assert _outcome(line_parser(isa).parse, text, 7, 3)[1] == _outcome(parse_line_generic, isa, text, 7, 3)[1], text
  opc = isa.by_mnemonic["v_add_f32_e32"]
  bad = [[Reg("v", 0), Reg("v", 1)], [Reg("v", 0), Reg("v", 1), Reg("s", 2)], [Reg("v", 0, 2), Reg("v", 1), Reg("v", 2)],
         [Reg("v", 0), 0x123456789, Reg("v", 2)], [Reg("v", 300), Reg("v", 1), Reg("v", 2)], ["v0", "v1", "x"]]
  for args in bad:
    assert _outcome(builder_of(isa).build, opc, args, {})[1] == _outcome(build_generic, isa, opc, list(args), {})[1], args
  assert _outcome(builder_of(isa).build, opc, [Reg("v", 0)] * 3, {"clamp": True})[1] is not None  # a VOP2 takes no clamp


def test_tokenizer_agrees_with_the_generic_scanner():
  """The regular-expression tokenizer splits exactly as hcq.asm.tokens does wherever it does not defer."""
  rng = random.Random(5)
  alphabet = " ,|[]()v1:-x\t"
  deferred = 0
  for _ in range(20000):
    t = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
    fast = split_tokens(t)
    if fast is None: deferred += 1; continue
    assert fast == split_operands(t), t
  assert deferred < 20000 * 0.9
