"""VALU semantics (VOP1, VOP2, VOP3, VOP3SD, VOPC), keyed by mnemonic without its _e32/_e64 suffix.

OPS[name] = (dst type, source types, fn): fn takes typed numpy arrays (broadcasting over waves x lanes) and returns
the typed result; `build` reads the sources, applies VOP3 modifiers (abs, neg, opsel, omod, clamp) and writes
the active lanes. Ops that need lanes, masks or carries have their own builders (ops_vspecial.SPECIAL); packed math
is in ops_vpacked, VOPD and DPP in ops_vdpp.
"""
from __future__ import annotations

import numpy as np

from hcq.asm.emu import numerics as N
from hcq.asm.emu.numerics import FLOATS, width
from hcq.asm.emu.ops_vspecial import SPECIAL
from hcq.asm.emu.operands import write_vgpr
from hcq.asm.emu.valu_common import (base_name, dst_writer, is_hi16, output_modifiers, saturating, sources, true16_dst,
                                     true16_sources, typed_reader)
from hcq.asm.emu.valu_math import (I24, fmed3, U24, absdiff, bfe, cubeid, cubema, cubesc, cubetc, mullit, bitreverse, clz, cls, ctz, cvt_pk_rtz, div_fixup, float_to_int16, fmax, fmin,
                                   fmaximum, fminimum, med3, norm16, pack16, perm, popcount, rcp, rsq, sin_rev, shift_mask, trig_preop, via_f64)
from hcq.asm.emu.wave import EXEC, VCC, Waves

u16, u32, u64, i32, i64 = np.uint16, np.uint32, np.uint64, np.int32, np.int64
f16, f32, f64 = np.float16, np.float32, np.float64


F, I, U = "f32", "i32", "u32"
OPS: dict[str, tuple] = {
  # f32
  "v_add_f32": (F, (F, F), np.add), "v_sub_f32": (F, (F, F), np.subtract), "v_subrev_f32": (F, (F, F), lambda a, b: b - a),
  "v_mul_f32": (F, (F, F), np.multiply), "v_min_f32": (F, (F, F), fmin), "v_max_f32": (F, (F, F), fmax),
  "v_mul_dx9_zero_f32": (F, (F, F), lambda a, b: np.where((a == 0) | (b == 0), f32(0), a * b)),
  "v_fma_f32": (F, (F, F, F), N.fma32), "v_fmac_f32": (F, (F, F, F), N.fma32),
  # RDNA3 ISA V_FMA_DX9_ZERO_F32 / V_FMAC_DX9_ZERO_F32: a zero factor gives D = S2 itself (a -0 or signalling NaN addend kept)
  "v_fma_dx9_zero_f32": (F, (F, F, F), lambda a, b, c: np.where((a == 0) | (b == 0), c, N.fma32(a, b, c))),
  "v_fmac_dx9_zero_f32": (F, (F, F, F), lambda a, b, c: np.where((a == 0) | (b == 0), c, N.fma32(a, b, c))),
  "v_ldexp_f32": (F, (F, I), lambda a, e: N.ldexp(a, e, f32)),
  "v_min3_f32": (F, (F, F, F), lambda a, b, c: fmin(fmin(a, b), c)), "v_max3_f32": (F, (F, F, F), lambda a, b, c: fmax(fmax(a, b), c)),
  "v_med3_f32": (F, (F, F, F), fmed3),
  "v_minmax_f32": (F, (F, F, F), lambda a, b, c: fmax(fmin(a, b), c)), "v_maxmin_f32": (F, (F, F, F), lambda a, b, c: fmin(fmax(a, b), c)),
  "v_floor_f32": (F, (F,), np.floor), "v_ceil_f32": (F, (F,), np.ceil), "v_trunc_f32": (F, (F,), np.trunc), "v_rndne_f32": (F, (F,), np.rint),
  "v_fract_f32": (F, (F,), N.fract), "v_sqrt_f32": (F, (F,), np.sqrt), "v_rcp_f32": (F, (F,), rcp), "v_rcp_iflag_f32": (F, (F,), rcp),
  "v_rsq_f32": (F, (F,), rsq), "v_exp_f32": (F, (F,), via_f64(np.exp2, f32)), "v_log_f32": (F, (F,), via_f64(np.log2, f32)),
  "v_sin_f32": (F, (F,), sin_rev), "v_cos_f32": (F, (F,), lambda a: sin_rev(a, cos=True)),
  "v_frexp_mant_f32": (F, (F,), N.frexp_mant), "v_frexp_exp_i32_f32": (I, (F,), N.frexp_exp),
  "v_div_fixup_f32": (F, (F, F, F), div_fixup),
  "v_cubeid_f32": (F, (F, F, F), cubeid), "v_cubesc_f32": (F, (F, F, F), cubesc), "v_cubetc_f32": (F, (F, F, F), cubetc),
  "v_cubema_f32": (F, (F, F, F), cubema), "v_mullit_f32": (F, (F, F, F), mullit),
  # f16
  "v_add_f16": ("f16", ("f16", "f16"), np.add), "v_sub_f16": ("f16", ("f16", "f16"), np.subtract),
  "v_subrev_f16": ("f16", ("f16", "f16"), lambda a, b: b - a), "v_mul_f16": ("f16", ("f16", "f16"), np.multiply),
  "v_min_f16": ("f16", ("f16", "f16"), fmin), "v_max_f16": ("f16", ("f16", "f16"), fmax),
  "v_fma_f16": ("f16", ("f16",) * 3, N.fma16), "v_fmac_f16": ("f16", ("f16",) * 3, N.fma16),
  "v_ldexp_f16": ("f16", ("f16", I), lambda a, e: N.ldexp(a, e, f16)),
  "v_min3_f16": ("f16", ("f16",) * 3, lambda a, b, c: fmin(fmin(a, b), c)), "v_max3_f16": ("f16", ("f16",) * 3, lambda a, b, c: fmax(fmax(a, b), c)),
  "v_med3_f16": ("f16", ("f16",) * 3, fmed3),
  "v_minmax_f16": ("f16", ("f16",) * 3, lambda a, b, c: fmax(fmin(a, b), c)), "v_maxmin_f16": ("f16", ("f16",) * 3, lambda a, b, c: fmin(fmax(a, b), c)),
  "v_floor_f16": ("f16", ("f16",), np.floor), "v_ceil_f16": ("f16", ("f16",), np.ceil), "v_trunc_f16": ("f16", ("f16",), np.trunc),
  "v_rndne_f16": ("f16", ("f16",), np.rint), "v_fract_f16": ("f16", ("f16",), N.fract), "v_sqrt_f16": ("f16", ("f16",), via_f64(np.sqrt, f16)),
  "v_rcp_f16": ("f16", ("f16",), rcp), "v_rsq_f16": ("f16", ("f16",), rsq), "v_exp_f16": ("f16", ("f16",), via_f64(np.exp2, f16)),
  "v_log_f16": ("f16", ("f16",), via_f64(np.log2, f16)), "v_sin_f16": ("f16", ("f16",), sin_rev),
  "v_cos_f16": ("f16", ("f16",), lambda a: sin_rev(a, cos=True)),
  "v_frexp_mant_f16": ("f16", ("f16",), N.frexp_mant), "v_frexp_exp_i16_f16": ("i16", ("f16",), N.frexp_exp),
  "v_div_fixup_f16": ("f16", ("f16",) * 3, div_fixup),
  # f64
  "v_add_f64": ("f64", ("f64", "f64"), np.add), "v_mul_f64": ("f64", ("f64", "f64"), np.multiply),
  "v_min_f64": ("f64", ("f64", "f64"), fmin), "v_max_f64": ("f64", ("f64", "f64"), fmax), "v_fma_f64": ("f64", ("f64",) * 3, N.fma64),
  "v_ldexp_f64": ("f64", ("f64", I), lambda a, e: N.ldexp(a, e, f64)),
  "v_floor_f64": ("f64", ("f64",), np.floor), "v_ceil_f64": ("f64", ("f64",), np.ceil), "v_trunc_f64": ("f64", ("f64",), np.trunc),
  "v_rndne_f64": ("f64", ("f64",), np.rint), "v_fract_f64": ("f64", ("f64",), N.fract), "v_sqrt_f64": ("f64", ("f64",), np.sqrt),
  "v_rcp_f64": ("f64", ("f64",), rcp), "v_rsq_f64": ("f64", ("f64",), rsq),
  "v_frexp_mant_f64": ("f64", ("f64",), N.frexp_mant), "v_frexp_exp_i32_f64": (I, ("f64",), N.frexp_exp),
  "v_div_fixup_f64": ("f64", ("f64",) * 3, div_fixup), "v_trig_preop_f64": ("f64", ("f64", U), trig_preop),
  # conversions
  "v_cvt_f32_i32": (F, (I,), lambda a: a.astype(f32)), "v_cvt_f32_u32": (F, (U,), lambda a: a.astype(f32)),
  "v_cvt_i32_f32": (I, (F,), lambda a: N.f32_to_int(a, True)), "v_cvt_u32_f32": (U, (F,), lambda a: N.f32_to_int(a, False)),
  "v_cvt_i32_f64": (I, ("f64",), lambda a: N.f32_to_int(a, True)), "v_cvt_u32_f64": (U, ("f64",), lambda a: N.f32_to_int(a, False)),
  "v_cvt_f64_i32": ("f64", (I,), lambda a: a.astype(f64)), "v_cvt_f64_u32": ("f64", (U,), lambda a: a.astype(f64)),
  "v_cvt_f32_f64": (F, ("f64",), lambda a: a.astype(f32)), "v_cvt_f64_f32": ("f64", (F,), lambda a: a.astype(f64)),
  "v_cvt_f16_f32": ("f16", (F,), lambda a: a.astype(f16)), "v_cvt_f32_f16": (F, ("f16",), lambda a: a.astype(f32)),
  "v_cvt_f16_i16": ("f16", ("i16",), lambda a: a.astype(f16)), "v_cvt_f16_u16": ("f16", ("u16",), lambda a: a.astype(f16)),
  "v_cvt_i16_f16": ("i16", ("f16",), lambda a: float_to_int16(a, True)), "v_cvt_u16_f16": ("u16", ("f16",), lambda a: float_to_int16(a, False)),
  "v_cvt_i32_i16": (I, ("i16",), lambda a: a.astype(i32)), "v_cvt_u32_u16": (U, ("u16",), lambda a: a.astype(u32)),
  "v_cvt_floor_i32_f32": (I, (F,), lambda a: N.f32_to_int(np.floor(a), True)),
  "v_cvt_nearest_i32_f32": (I, (F,), lambda a: N.f32_to_int(np.floor(a + f32(0.5)), True)),
  "v_cvt_f32_ubyte0": (F, (U,), lambda a: (a & u32(0xff)).astype(f32)), "v_cvt_f32_ubyte1": (F, (U,), lambda a: ((a >> u32(8)) & u32(0xff)).astype(f32)),
  "v_cvt_f32_ubyte2": (F, (U,), lambda a: ((a >> u32(16)) & u32(0xff)).astype(f32)), "v_cvt_f32_ubyte3": (F, (U,), lambda a: (a >> u32(24)).astype(f32)),
  "v_cvt_off_f32_i4": (F, (U,), lambda a: ((((a & u32(15)).astype(i32) ^ 8) - 8).astype(f32) / f32(16))),
  "v_cvt_pk_rtz_f16_f32": (U, (F, F), cvt_pk_rtz),
  "v_cvt_pk_u16_u32": (U, (U, U), lambda a, b: np.minimum(a, u32(0xffff)) | (np.minimum(b, u32(0xffff)) << u32(16))),
  "v_cvt_pk_i16_i32": (U, (I, I), lambda a, b: (np.clip(a, -32768, 32767).astype(u32) & u32(0xffff)) | ((np.clip(b, -32768, 32767).astype(u32) & u32(0xffff)) << u32(16))),
  "v_cvt_pk_u8_f32": (U, (F, U, U), lambda a, b, c: (c & ~(u32(0xff) << ((b & u32(3)) * u32(8)))) | ((N.f32_to_int(np.rint(a), False).clip(0, 255).astype(u32)) << ((b & u32(3)) * u32(8)))),
  # f16 sources, so neg/abs modifiers apply (LLVM folds fneg/fabs into it); the bits are packed, no arithmetic
  "v_pack_b32_f16": (U, ("f16", "f16"), lambda a, b: a.view(u16).astype(u32) | (b.view(u16).astype(u32) << u32(16))),
  "v_cvt_pk_norm_i16_f32": (U, (F, F), lambda a, b: pack16(norm16(a, True), norm16(b, True))),
  "v_cvt_pk_norm_u16_f32": (U, (F, F), lambda a, b: pack16(norm16(a, False), norm16(b, False))),
  "v_cvt_pk_norm_i16_f16": (U, ("f16", "f16"), lambda a, b: pack16(norm16(a, True), norm16(b, True))),
  "v_cvt_pk_norm_u16_f16": (U, ("f16", "f16"), lambda a, b: pack16(norm16(a, False), norm16(b, False))),
  "v_cvt_norm_i16_f16": ("i16", ("f16",), lambda a: norm16(a, True).astype(np.int16)),
  "v_cvt_norm_u16_f16": ("u16", ("f16",), lambda a: norm16(a, False).astype(np.uint16)),
  "v_cvt_pk_u16_f32": (U, (F, F), lambda a, b: pack16(float_to_int16(a, False), float_to_int16(b, False))),
  "v_cvt_pk_i16_f32": (U, (F, F), lambda a, b: pack16(float_to_int16(a, True), float_to_int16(b, True))),
  "v_sad_u8": (U, (U, U, U), lambda a, b, c: sum(absdiff((a >> u32(8 * k)) & u32(255), (b >> u32(8 * k)) & u32(255)) for k in range(4)) + c),
  "v_sad_hi_u8": (U, (U, U, U), lambda a, b, c: (sum(absdiff((a >> u32(8 * k)) & u32(255), (b >> u32(8 * k)) & u32(255)) for k in range(4)) << u32(16)) + c),
  "v_sad_u16": (U, (U, U, U), lambda a, b, c: sum(absdiff((a >> u32(16 * k)) & u32(0xffff), (b >> u32(16 * k)) & u32(0xffff)) for k in range(2)) + c),
  "v_msad_u8": (U, (U, U, U), lambda a, b, c: sum(np.where(((b >> u32(8 * k)) & u32(255)) == 0, u32(0), absdiff((a >> u32(8 * k)) & u32(255), (b >> u32(8 * k)) & u32(255))) for k in range(4)) + c),
  "v_sat_pk_u8_i16": ("u16", (U,), lambda a: (np.clip((a & u32(0xffff)).astype(u16).view(np.int16), 0, 255).astype(u16) | (np.clip((a >> u32(16)).astype(u16).view(np.int16), 0, 255).astype(u16) << u16(8)))),
  # 32-bit integer
  "v_mov_b32": (U, (U,), lambda a: a), "v_not_b32": (U, (U,), np.invert), "v_bfrev_b32": (U, (U,), bitreverse),
  "v_clz_i32_u32": (I, (U,), clz), "v_ctz_i32_b32": (I, (U,), ctz), "v_cls_i32": (I, (I,), cls),
  "v_add_nc_u32": (U, (U, U), np.add), "v_sub_nc_u32": (U, (U, U), np.subtract), "v_subrev_nc_u32": (U, (U, U), lambda a, b: b - a),
  "v_add_nc_i32": (I, (I, I), np.add), "v_sub_nc_i32": (I, (I, I), np.subtract),
  "v_and_b32": (U, (U, U), np.bitwise_and), "v_or_b32": (U, (U, U), np.bitwise_or), "v_xor_b32": (U, (U, U), np.bitwise_xor),
  "v_xnor_b32": (U, (U, U), lambda a, b: ~(a ^ b)),
  "v_lshlrev_b32": (U, (U, U), lambda a, b: b << shift_mask(a, 32)), "v_lshrrev_b32": (U, (U, U), lambda a, b: b >> shift_mask(a, 32)),
  "v_ashrrev_i32": (I, (U, I), lambda a, b: b >> shift_mask(a, 32).astype(i32)),
  "v_min_i32": (I, (I, I), np.minimum), "v_max_i32": (I, (I, I), np.maximum), "v_min_u32": (U, (U, U), np.minimum), "v_max_u32": (U, (U, U), np.maximum),
  "v_min3_i32": (I, (I,) * 3, lambda a, b, c: np.minimum(np.minimum(a, b), c)), "v_max3_i32": (I, (I,) * 3, lambda a, b, c: np.maximum(np.maximum(a, b), c)),
  "v_min3_u32": (U, (U,) * 3, lambda a, b, c: np.minimum(np.minimum(a, b), c)), "v_max3_u32": (U, (U,) * 3, lambda a, b, c: np.maximum(np.maximum(a, b), c)),
  "v_med3_i32": (I, (I,) * 3, lambda a, b, c: med3(a, b, c, np.minimum, np.maximum)), "v_med3_u32": (U, (U,) * 3, lambda a, b, c: med3(a, b, c, np.minimum, np.maximum)),
  "v_minmax_i32": (I, (I,) * 3, lambda a, b, c: np.maximum(np.minimum(a, b), c)), "v_maxmin_i32": (I, (I,) * 3, lambda a, b, c: np.minimum(np.maximum(a, b), c)),
  "v_minmax_u32": (U, (U,) * 3, lambda a, b, c: np.maximum(np.minimum(a, b), c)), "v_maxmin_u32": (U, (U,) * 3, lambda a, b, c: np.minimum(np.maximum(a, b), c)),
  "v_mul_lo_u32": (U, (U, U), np.multiply), "v_mul_hi_u32": (U, (U, U), lambda a, b: ((a.astype(u64) * b.astype(u64)) >> u64(32)).astype(u32)),
  "v_mul_hi_i32": (I, (I, I), lambda a, b: ((a.astype(i64) * b.astype(i64)) >> 32).astype(i32)),
  "v_mul_u32_u24": (U, (U, U), lambda a, b: U24(a) * U24(b)), "v_mul_hi_u32_u24": (U, (U, U), lambda a, b: ((U24(a).astype(u64) * U24(b).astype(u64)) >> u64(32)).astype(u32)),
  "v_mul_i32_i24": (I, (U, U), lambda a, b: (I24(a) * I24(b)).astype(i32)), "v_mul_hi_i32_i24": (I, (U, U), lambda a, b: ((I24(a).astype(i64) * I24(b).astype(i64)) >> 32).astype(i32)),
  "v_mad_u32_u24": (U, (U, U, U), lambda a, b, c: U24(a) * U24(b) + c), "v_mad_i32_i24": (I, (U, U, I), lambda a, b, c: I24(a) * I24(b) + c),
  "v_mad_u32_u16": (U, ("u16", "u16", U), lambda a, b, c: a.astype(u32) * b.astype(u32) + c),
  "v_mad_i32_i16": (I, ("i16", "i16", I), lambda a, b, c: a.astype(i32) * b.astype(i32) + c),
  "v_bfe_u32": (U, (U, U, U), lambda a, o, n: bfe(a, o, n, False)), "v_bfe_i32": (I, (U, U, U), lambda a, o, n: bfe(a, o, n, True)),
  "v_bfi_b32": (U, (U, U, U), lambda a, b, c: (a & b) | (~a & c)),
  "v_bfm_b32": (U, (U, U), lambda a, b: (((u64(1) << (a & u32(31)).astype(u64)) - u64(1)).astype(u32)) << (b & u32(31))),
  "v_alignbit_b32": (U, (U, U, U), lambda a, b, c: (((a.astype(u64) << u64(32)) | b.astype(u64)) >> (c & u32(31)).astype(u64)).astype(u32)),
  "v_alignbyte_b32": (U, (U, U, U), lambda a, b, c: (((a.astype(u64) << u64(32)) | b.astype(u64)) >> ((c & u32(3)) * u32(8)).astype(u64)).astype(u32)),
  "v_lshl_or_b32": (U, (U, U, U), lambda a, b, c: (a << shift_mask(b, 32)) | c), "v_and_or_b32": (U, (U, U, U), lambda a, b, c: (a & b) | c),
  "v_or3_b32": (U, (U, U, U), lambda a, b, c: a | b | c), "v_xor3_b32": (U, (U, U, U), lambda a, b, c: a ^ b ^ c),
  "v_lshl_add_u32": (U, (U, U, U), lambda a, b, c: (a << shift_mask(b, 32)) + c), "v_add_lshl_u32": (U, (U, U, U), lambda a, b, c: (a + b) << shift_mask(c, 32)),
  "v_add3_u32": (U, (U, U, U), lambda a, b, c: a + b + c), "v_xad_u32": (U, (U, U, U), lambda a, b, c: (a ^ b) + c),
  "v_bcnt_u32_b32": (U, (U, U), lambda a, b: popcount(a) + b), "v_perm_b32": (U, (U, U, U), perm),
  "v_sad_u32": (U, (U, U, U), lambda a, b, c: np.where(a > b, a - b, b - a) + c),
  "v_lerp_u8": (U, (U, U, U), lambda a, b, c: sum(((((a >> u32(8 * k)) & u32(255)) + ((b >> u32(8 * k)) & u32(255)) + ((c >> u32(8 * k)) & u32(1))) >> u32(1)) << u32(8 * k) for k in range(4))),
  # 64-bit integer shifts
  "v_lshlrev_b64": ("u64", (U, "u64"), lambda a, b: b << (a & u32(63)).astype(u64)),
  "v_lshrrev_b64": ("u64", (U, "u64"), lambda a, b: b >> (a & u32(63)).astype(u64)),
  "v_ashrrev_i64": ("i64", (U, "i64"), lambda a, b: b >> (a & u32(63)).astype(i64)),
  # 16-bit integer
  "v_mov_b16": ("b16", ("b16",), lambda a: a), "v_not_b16": ("b16", ("b16",), np.invert),
  "v_add_nc_u16": ("u16", ("u16", "u16"), np.add), "v_sub_nc_u16": ("u16", ("u16", "u16"), np.subtract),
  "v_add_nc_i16": ("i16", ("i16", "i16"), np.add), "v_sub_nc_i16": ("i16", ("i16", "i16"), np.subtract),
  "v_mul_lo_u16": ("u16", ("u16", "u16"), np.multiply),
  "v_lshlrev_b16": ("u16", ("u16", "u16"), lambda a, b: b << shift_mask(a, 16)), "v_lshrrev_b16": ("u16", ("u16", "u16"), lambda a, b: b >> shift_mask(a, 16)),
  "v_ashrrev_i16": ("i16", ("u16", "i16"), lambda a, b: b >> shift_mask(a, 16).astype(np.int16)),
  "v_max_u16": ("u16", ("u16", "u16"), np.maximum), "v_min_u16": ("u16", ("u16", "u16"), np.minimum),
  "v_max_i16": ("i16", ("i16", "i16"), np.maximum), "v_min_i16": ("i16", ("i16", "i16"), np.minimum),
  "v_and_b16": ("b16", ("b16", "b16"), np.bitwise_and), "v_or_b16": ("b16", ("b16", "b16"), np.bitwise_or), "v_xor_b16": ("b16", ("b16", "b16"), np.bitwise_xor),
  "v_mad_u16": ("u16", ("u16",) * 3, lambda a, b, c: a * b + c), "v_mad_i16": ("i16", ("i16",) * 3, lambda a, b, c: a * b + c),
  "v_min3_i16": ("i16", ("i16",) * 3, lambda a, b, c: np.minimum(np.minimum(a, b), c)), "v_max3_i16": ("i16", ("i16",) * 3, lambda a, b, c: np.maximum(np.maximum(a, b), c)),
  "v_min3_u16": ("u16", ("u16",) * 3, lambda a, b, c: np.minimum(np.minimum(a, b), c)), "v_max3_u16": ("u16", ("u16",) * 3, lambda a, b, c: np.maximum(np.maximum(a, b), c)),
  "v_med3_i16": ("i16", ("i16",) * 3, lambda a, b, c: med3(a, b, c, np.minimum, np.maximum)), "v_med3_u16": ("u16", ("u16",) * 3, lambda a, b, c: med3(a, b, c, np.minimum, np.maximum)),
}

# gfx9 (GCN): the unfused multiply-adds (product rounded, then the sum), the f64 fmac, and gfx940's 64-bit shift-add
OPS.update({
  "v_mad_f32": (F, (F, F, F), lambda a, b, c: (a * b) + c), "v_mac_f32": (F, (F, F, F), lambda a, b, c: (a * b) + c),
  "v_mad_f16": ("f16", ("f16",) * 3, lambda a, b, c: (a * b) + c), "v_mac_f16": ("f16", ("f16",) * 3, lambda a, b, c: (a * b) + c),
  "v_fmac_f64": ("f64", ("f64",) * 3, N.fma64),
  "v_mov_b64": ("u64", ("u64",), lambda a: a), "v_subrev_u16": ("u16", ("u16", "u16"), lambda a, b: b - a),
  "v_lshl_add_u64": ("u64", ("u64", U, "u64"), lambda a, b, c: (a << (b & u32(7)).astype(u64)) + c),
})

# gfx12: min/max renamed _num (IEEE maximumNumber, as gfx11's IEEE-mode min/max), and NaN-propagating minimum/maximum
for _t in ("f16", "f32", "f64"):
  OPS[f"v_min_num_{_t}"], OPS[f"v_max_num_{_t}"] = OPS[f"v_min_{_t}"], OPS[f"v_max_{_t}"]
  OPS[f"v_minimum_{_t}"], OPS[f"v_maximum_{_t}"] = (_t, (_t, _t), fminimum), (_t, (_t, _t), fmaximum)
for _t in ("f16", "f32"):
  _3 = (_t,) * 3
  OPS.update({f"v_min3_num_{_t}": OPS[f"v_min3_{_t}"], f"v_max3_num_{_t}": OPS[f"v_max3_{_t}"], f"v_med3_num_{_t}": OPS[f"v_med3_{_t}"],
              f"v_minmax_num_{_t}": OPS[f"v_minmax_{_t}"], f"v_maxmin_num_{_t}": OPS[f"v_maxmin_{_t}"],
              f"v_minimum3_{_t}": (_t, _3, lambda a, b, c: fminimum(fminimum(a, b), c)),
              f"v_maximum3_{_t}": (_t, _3, lambda a, b, c: fmaximum(fmaximum(a, b), c)),
              f"v_minimummaximum_{_t}": (_t, _3, lambda a, b, c: fmaximum(fminimum(a, b), c)),
              f"v_maximumminimum_{_t}": (_t, _3, lambda a, b, c: fminimum(fmaximum(a, b), c))})

# compares: VOPC (to VCC), VOP3 (to an SGPR), v_cmpx (to EXEC)
_FCMP = {"f": lambda a, b: np.zeros(np.broadcast(a, b).shape, bool), "lt": np.less, "eq": np.equal, "le": np.less_equal, "gt": np.greater,
         "lg": lambda a, b: (a < b) | (a > b), "ge": np.greater_equal, "o": lambda a, b: ~np.isnan(a) & ~np.isnan(b),
         "u": lambda a, b: np.isnan(a) | np.isnan(b), "nge": lambda a, b: ~(a >= b), "nlg": lambda a, b: ~((a < b) | (a > b)),
         "ngt": lambda a, b: ~(a > b), "nle": lambda a, b: ~(a <= b), "neq": lambda a, b: ~(a == b), "nlt": lambda a, b: ~(a < b),
         "t": lambda a, b: np.ones(np.broadcast(a, b).shape, bool)}
_ICMP = {"f": _FCMP["f"], "lt": np.less, "eq": np.equal, "le": np.less_equal, "gt": np.greater, "ne": np.not_equal, "lg": np.not_equal,
         "ge": np.greater_equal, "t": _FCMP["t"]}
CMPS: dict[str, tuple] = {}
for _t in ("f16", "f32", "f64"):
  for _k, _f in _FCMP.items(): CMPS[f"v_cmp_{_k}_{_t}"] = ((_t, _t), _f)
  CMPS[f"v_cmp_class_{_t}"] = ((_t, U), N.float_class)
for _t in ("i16", "u16", "i32", "u32", "i64", "u64"):
  for _k, _f in _ICMP.items(): CMPS[f"v_cmp_{_k}_{_t}"] = ((_t, _t), _f)
CMPS.update({"v_cmpx" + k[5:]: v for k, v in list(CMPS.items())})

# ops MODE.FP_ROUND applies to (the f32 field for f32 results, the f16/f64 field for the others): name -> the exact
# result as an f64 pair (hi, err) from the typed sources; round_directed rounds it. Round to nearest even (mode 0)
# keeps the plain OPS path.
def _f64s(*xs): return [np.asarray(x).astype(f64) for x in xs]
def _x_add(a, b): return N.two_sum(*_f64s(a, b))
def _x_sub(a, b): return N.two_sum(*_f64s(a, -b))
def _x_mul(a, b):   # f32/f16: the f64 product is exact
  a, b = _f64s(a, b)
  p = a * b
  return p, np.zeros_like(p)
def _x_mul64(a, b): return N.two_prod(a, b)
def _x_fma(a, b, c): a, b, c = _f64s(a, b, c); return N.two_sum(a * b, c)   # f32/f16: the f64 product is exact
def _x_fma64(a, b, c):
  r = N.fma64(a, b, c)
  return r, N.fma64_residual_sign(a, b, c, r)
def _x_exact(a): return np.asarray(a).astype(f64), np.zeros(np.shape(a))
ROUNDED = {
  "v_add_f32": _x_add, "v_sub_f32": _x_sub, "v_subrev_f32": lambda a, b: _x_sub(b, a), "v_mul_f32": _x_mul,
  "v_fma_f32": _x_fma, "v_fmac_f32": _x_fma, "v_add_f16": _x_add, "v_sub_f16": _x_sub, "v_subrev_f16": lambda a, b: _x_sub(b, a),
  "v_mul_f16": _x_mul, "v_fma_f16": _x_fma, "v_fmac_f16": _x_fma,
  "v_add_f64": lambda a, b: N.two_sum(a, b), "v_mul_f64": _x_mul64, "v_fma_f64": _x_fma64,
  "v_cvt_f32_f64": _x_exact, "v_cvt_f32_i32": _x_exact, "v_cvt_f32_u32": _x_exact, "v_cvt_f16_f32": _x_exact,
  "v_cvt_f16_i16": _x_exact, "v_cvt_f16_u16": _x_exact,
}


# an exact zero sum is -0 when rounding toward -inf (IEEE 754 6.3) unless every addend is +0: -(RN(-x + -y)) gives that
_NEGATED = {"add": lambda a, b: (-a, -b), "sub": lambda a, b: (-a, -b), "subrev": lambda a, b: (-a, -b), "fma": lambda a, b, c: (-a, b, -c),
            "fmac": lambda a, b, c: (-a, b, -c)}


def round_shift(dt: str) -> int:
  """Where MODE.FP_ROUND keeps the mode for results of type dt: bits 1:0 for f32, 3:2 for f16 and f64."""
  return 0 if dt == "f32" else 2


def directed(name: str, dt: str, fn):
  """fn under a MODE.FP_ROUND other than nearest even: (mode, *typed sources) -> typed result."""
  exact, npt = ROUNDED[name], N.TYPES[dt][1]
  negated = _NEGATED.get(name.split("_")[1])
  def f(mode, *xs):
    hi, err = exact(*xs)
    r = N.round_directed(hi, err, npt, mode)
    if mode == 2 and negated is not None:
      zero = (hi == 0) & (err == 0)
      if zero.any(): r = np.where(zero, -fn(*negated(*xs)), r).astype(npt)
    return r
  return f


def build(ins, pc: int):
  """A closure running one VALU instruction on waves `w` of a Waves batch."""
  name, fmt, v = base_name(ins.opcode.mnemonic), ins.opcode.fmt.name, ins.values
  if name in SPECIAL: return SPECIAL[name](ins, name)
  if name in CMPS: return _build_cmp(ins, name)
  if name not in OPS: return None
  dt, sts, fn = OPS[name]
  srcs = sources(ins)
  lit = ins.literal
  absm, negm, opsel = v.get("abs", 0), v.get("neg", 0), v.get("opsel", 0)
  vdst, dst_hi = v["vdst"], bool(opsel >> 3 & 1)
  his = [bool(opsel >> i & 1) for i in range(3)]
  gfx9 = getattr(ins, "gfx9", False)
  if fmt in ("VOP1", "VOP2") and not gfx9:   # gfx9 has no true16: v128-v255 are whole registers
    srcs, his[:len(srcs)], (vdst, dst_hi) = true16_sources(srcs, sts), [is_hi16(e, t) for e, t in zip(srcs, sts)], true16_dst(vdst, dt)
  if name in ("v_fmac_f32", "v_fmac_f16", "v_fmac_dx9_zero_f32", "v_fmac_f64", "v_mac_f32", "v_mac_f16"):
    srcs, his = srcs[:2] + [vdst + 256], his[:2] + [dst_hi]
  readers = [typed_reader(srcs[i], t, lit, his[i], bool(absm >> i & 1), bool(negm >> i & 1)) for i, t in enumerate(sts)]
  post = output_modifiers(dt, bool(v.get("clamp", 0)), v.get("omod", 0))
  if v.get("clamp", 0) and dt not in FLOATS and width(dt) <= 32 and not any(t in FLOATS for t in sts):   # float->int conversions saturate already
    fn = saturating(fn, dt)
  write = dst_writer(dt, vdst, dst_hi)
  if gfx9 and width(dt) == 16 and not dst_hi: write = _zero_high(write, vdst)
  # MODE.FP_ROUND: one test per call (rmask is 0 for ops it does not apply to); the directed path is separate
  shift = round_shift(dt)
  rmask, rfn = (3 << shift, directed(name, dt, fn)) if name in ROUNDED else (0, None)
  if len(readers) == 1:
    r0, = readers
    def op1(st: Waves, w):
      a = r0(st, w)
      x = fn(a) if not st.round & rmask else rfn((st.round >> shift) & 3, a)
      write(st, w, post(x, st) if post else x, st.exec_lanes(w))
    return op1
  if len(readers) == 2:
    r0, r1 = readers
    def op2(st: Waves, w):
      a, b = r0(st, w), r1(st, w)
      x = fn(a, b) if not st.round & rmask else rfn((st.round >> shift) & 3, a, b)
      write(st, w, post(x, st) if post else x, st.exec_lanes(w))
    return op2
  r0, r1, r2 = readers
  def op3(st: Waves, w):
    a, b, c = r0(st, w), r1(st, w), r2(st, w)
    x = fn(a, b, c) if not st.round & rmask else rfn((st.round >> shift) & 3, a, b, c)
    write(st, w, post(x, st) if post else x, st.exec_lanes(w))
  return op3


def _zero_high(write, vdst: int):
  """gfx9: a 16-bit VALU result (no SDWA, no op_sel to the high half) zeroes bits 31:16 of its VGPR (gfx10+ keep
  them; LLVM's GCNSubtarget::zeroesHigh16BitsOfDest)."""
  def w(st, wv, x, ex):
    write(st, wv, x, ex)
    write_vgpr(st, vdst, wv, st.v[vdst][wv] & u32(0xffff), ex)
  return w


def _build_cmp(ins, name):
  (ta, tb), fn = CMPS[name]
  v, fmt = ins.values, ins.opcode.fmt.name
  srcs = sources(ins)
  absm, negm, opsel = v.get("abs", 0), v.get("neg", 0), v.get("opsel", 0)
  his = [bool(opsel & 1), bool(opsel & 2)]
  gfx9 = getattr(ins, "gfx9", False)
  if fmt == "VOPC" and not gfx9: srcs, his = true16_sources(srcs, (ta, tb)), [is_hi16(e, t) for e, t in zip(srcs, (ta, tb))]
  flush = "class" not in name   # v_cmp_class reports denormals whatever the mode
  ra = typed_reader(srcs[0], ta, ins.literal, his[0], bool(absm & 1), bool(negm & 1), flush)
  rb = typed_reader(srcs[1], tb, ins.literal, his[1], bool(absm & 2), bool(negm & 2), flush)
  cmpx = name.startswith("v_cmpx")
  sdst = EXEC if cmpx else (VCC if fmt == "VOPC" else v["vdst"])
  also = (VCC if fmt == "VOPC" else v["vdst"]) if cmpx and gfx9 else None   # gfx9's v_cmpx writes VCC/sdst and EXEC
  def op(st: Waves, w):
    ex = st.exec_lanes(w)
    res = st.mask_of(np.broadcast_to(fn(ra(st, w), rb(st, w)), ex.shape) & ex)
    if also is not None: st.set_mask(also, w, res)
    st.set_mask(sdst, w, res)
  return op
