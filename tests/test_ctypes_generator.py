"""The ctypes generator on a header written to exercise every layout rule, judged by gcc (not by expected values)."""
from __future__ import annotations
import types

import pytest

from tests.test_bindings_gcc import compare_constants, compare_functions, compare_layouts
from tests.tools import require

HEADER = r"""
#include <stdint.h>
#include <linux/ioctl.h>
#define T_CONST 0x40
#define T_EXPR ((T_CONST << 4) | 3)
#define T_CAST ((uint8_t)0x1ff)
#define T_SIGNED (-5)
#define T_BIG (1ULL << 63)
#define T_NEG_INT (1 << 31)
#define T_IOCTL _IOWR('T', 0x01, struct t_plain)
#define T_FIELD(x) (((x) & 0xf) << T_SHIFT)
#define T_SHIFT 12
#define T_TWO(a, b) (T_FIELD(a) | ((uint16_t)(b) << 2))
#define T_DIV(a) ((a) / 3 + (a) % 3)
enum t_color { T_RED, T_GREEN = 7, T_BLUE };
enum { T_ANON_ENUM = -2 };
struct t_plain { uint8_t a; uint32_t b; uint64_t c; int16_t d[3]; };
struct t_bits { uint32_t x : 3; uint32_t y : 13; uint8_t z : 2; uint64_t w : 40; int32_t s : 5; char c; unsigned char uc : 1; };
struct t_packed { uint8_t a; uint32_t b; uint16_t c; } __attribute__((packed));
#pragma pack(push, 2)
struct t_pragma { uint8_t a; uint64_t b; uint8_t c; };
#pragma pack(pop)
struct t_aligned { uint8_t a; } __attribute__((aligned(32)));
struct t_holds_aligned { uint8_t head; struct t_aligned inner; uint32_t tail; };
struct t_member_aligned { uint8_t a; uint64_t b __attribute__((aligned(16))); };
struct t_anon {
  uint32_t kind;
  union { uint32_t as_u32; float as_f32; struct { uint16_t lo, hi; }; };
  struct { uint8_t p, q; } named;
  struct { uint32_t e; } table[2];
};
union t_union { uint64_t q; uint8_t b[3]; struct t_plain p; };
typedef struct { uint32_t v; enum t_color col; } t_typedefd_t;
struct t_flex { uint32_t n; uint64_t items[]; };
struct t_nested_tag { union t_inner_tag { uint32_t all; struct { uint32_t lo4 : 4, rest : 28; } bits; } inner; };
"""


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
  from hcq.autogen.generator.clangtools import CLANG_BUILTIN_HEADERS
  from hcq.autogen.generator.ctypes_gen import BindingSpec, generate_bindings
  require((CLANG_BUILTIN_HEADERS / "stddef.h").is_file(), f"clang's builtin headers ({CLANG_BUILTIN_HEADERS}, Debian libclang-common-19-dev)")
  path = tmp_path_factory.mktemp("hdr") / "t_layout.h"
  path.write_text(HEADER)
  spec = BindingSpec("t_layout", "test", [path])
  text = generate_bindings(spec, "# generated for a test\n")
  mod = types.ModuleType("t_layout")
  exec(compile(text, "t_layout.py", "exec"), mod.__dict__)
  return spec, mod, text


def test_every_record_matches_gcc(generated):
  spec, mod, _ = generated
  assert compare_layouts(spec, mod) > 60


def test_every_constant_matches_gcc(generated):
  spec, mod, _ = generated
  assert compare_constants(spec, mod) >= 12


def test_macro_functions_match_gcc(generated):
  spec, mod, text = generated
  assert {"T_FIELD", "T_TWO", "T_DIV"} <= set(vars(mod))
  compare_functions(spec, mod)


def test_names_follow_c(generated):
  _, mod, _ = generated
  assert mod.struct_t_plain._c_name_ == "struct t_plain" and mod.union_t_union._c_name_ == "union t_union"
  assert mod.t_typedefd_t._c_name_ == "t_typedefd_t"
  assert mod.T_GREEN == 7 and mod.T_BLUE == 8 and mod.T_ANON_ENUM == -2
  assert mod.T_NEG_INT == -(1 << 31) and mod.T_BIG == 1 << 63 and mod.T_CAST == 0xff
  assert mod.struct_t_aligned._c_align_ == 32  # over-aligned: ctypes before 3.13 cannot say so itself
  anon = mod.struct_t_anon(kind=1, as_u32=0x00020001)
  assert (anon.lo, anon.hi) == (1, 2)  # anonymous members reach through, as in C
