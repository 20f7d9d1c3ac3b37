"""The differential corpus's OpenCL C source (test_emu_corpus.py compiles it with clang-19 for gfx1100); no tests here."""

SOURCE = r"""// Differential corpus for the wavefront emulator (tests/test_emu_corpus.py): OpenCL C compiled by clang-19 for gfx1100.
// There is no device library: ids come from the amdgcn builtins, barriers from s_barrier plus workgroup fences.
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#define LID() ((int)__builtin_amdgcn_workitem_id_x())
#define GRP() ((int)__builtin_amdgcn_workgroup_id_x())
#define GID() (GRP() * (int)__builtin_amdgcn_workgroup_size_x() + LID())
#define BARRIER() do { __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); __builtin_amdgcn_s_barrier(); __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup"); } while (0)

// ---- f32
__kernel void f32_saxpy(__global float* y, __global const float* x, float a, int n) { int i = GID(); if (i < n) y[i] = a * x[i] + y[i]; }
__kernel void f32_ops(__global float* o, __global const float* a, __global const float* b) {
  int i = GID(); float x = a[i], y = b[i];
  o[8*i+0] = x + y; o[8*i+1] = x - y; o[8*i+2] = x * y; o[8*i+3] = fmin(x, y); o[8*i+4] = fmax(x, y);
  o[8*i+5] = x < y ? x : -y; o[8*i+6] = fabs(x) * 2.0f; o[8*i+7] = copysign(x, y); }
__kernel void f32_div(__global float* o, __global const float* a, __global const float* b) { int i = GID(); o[i] = a[i] / b[i]; }
__kernel void f32_sqrt(__global float* o, __global const float* a) { int i = GID(); o[i] = __builtin_sqrtf(a[i]); }
__kernel void f32_round(__global float* o, __global const float* a) {
  int i = GID(); float x = a[i];
  o[4*i+0] = __builtin_floorf(x); o[4*i+1] = __builtin_ceilf(x); o[4*i+2] = __builtin_truncf(x); o[4*i+3] = __builtin_rintf(x); }
__kernel void f32_math(__global float* o, __global const float* a) {
  int i = GID(); float x = a[i];
  o[4*i+0] = __builtin_expf(x); o[4*i+1] = __builtin_logf(x + 5.0f); o[4*i+2] = __builtin_exp2f(x); o[4*i+3] = __builtin_log2f(x + 5.0f); }
__kernel void f32_trig(__global float* o, __global const float* a) { int i = GID(); o[2*i] = __builtin_sinf(a[i]); o[2*i+1] = __builtin_cosf(a[i]); }
__kernel void f32_fma(__global float* o, __global const float* a, __global const float* b, __global const float* c) { int i = GID(); o[i] = __builtin_fmaf(a[i], b[i], c[i]); }
__kernel void f32_cvt(__global int* o, __global float* f, __global const float* a, __global const int* b) {
  int i = GID(); o[2*i] = (int)a[i]; o[2*i+1] = (int)(unsigned)(a[i] < 0 ? -a[i] : a[i]); f[2*i] = (float)b[i]; f[2*i+1] = (float)(unsigned)b[i]; }
__kernel void f32_relu_clamp(__global float* o, __global const float* a) { int i = GID(); float x = a[i]; o[i] = x > 0 ? (x < 1.5f ? x : 1.5f) : 0.01f * x; }
__kernel void f32_poly(__global float* o, __global const float* a) { int i = GID(); float x = a[i]; float r = 0; for (int k = 0; k < 8; k++) r = r * x + (float)(k + 1); o[i] = r; }
// ---- f16
__kernel void f16_ops(__global half* o, __global const half* a, __global const half* b) {
  int i = GID(); half x = a[i], y = b[i]; o[4*i+0] = x + y; o[4*i+1] = x * y; o[4*i+2] = x - y; o[4*i+3] = x > y ? x : y; }
__kernel void f16_cvt(__global float* o, __global half* h, __global const half* a, __global const float* b) { int i = GID(); o[i] = (float)a[i] * 3.0f; h[i] = (half)b[i]; }
__kernel void f16_vec2(__global half2* o, __global const half2* a, __global const half2* b) { int i = GID(); o[i] = a[i] * b[i] + a[i]; }
// ---- f64
__kernel void f64_ops(__global double* o, __global const double* a, __global const double* b) {
  int i = GID(); double x = a[i], y = b[i]; o[4*i+0] = x + y; o[4*i+1] = x * y; o[4*i+2] = x - y * 0.5; o[4*i+3] = x < y ? x : y; }
__kernel void f64_div_sqrt(__global double* o, __global const double* a, __global const double* b) {
  int i = GID(); o[2*i] = a[i] / b[i]; o[2*i+1] = __builtin_sqrt(a[i]); }
__kernel void f64_cvt(__global double* o, __global float* f, __global const float* a, __global const long* b) {
  int i = GID(); o[2*i] = (double)a[i]; o[2*i+1] = (double)b[i]; f[i] = (float)((double)a[i] * 1.0000001); }
// ---- i32
__kernel void i32_arith(__global int* o, __global const int* a, __global const int* b) {
  int i = GID(); int x = a[i], y = b[i];
  o[8*i+0] = x + y; o[8*i+1] = x * y; o[8*i+2] = x ^ (y << 3); o[8*i+3] = x >> (y & 31); o[8*i+4] = (int)((unsigned)x >> (y & 31));
  o[8*i+5] = (x < y ? x : y) + (x > y ? x : y); o[8*i+6] = x < 0 ? -x : x; o[8*i+7] = (int)(((long)x * (long)y) >> 32); }
__kernel void i32_div(__global int* o, __global const int* a, __global const int* b) { int i = GID(); o[2*i] = a[i] / b[i]; o[2*i+1] = a[i] % b[i]; }
__kernel void u32_div(__global uint* o, __global const uint* a, __global const uint* b) { int i = GID(); o[2*i] = a[i] / b[i]; o[2*i+1] = a[i] % b[i]; }
__kernel void i32_bits(__global int* o, __global const uint* a) {
  int i = GID(); uint x = a[i];
  o[4*i+0] = __builtin_popcount(x); o[4*i+1] = x ? __builtin_clz(x) : 32; o[4*i+2] = x ? __builtin_ctz(x) : 32; o[4*i+3] = (x >> 5 & 0x3ff) | (x << 27); }
__kernel void i32_small(__global uchar* o8, __global ushort* o16, __global const uchar* a, __global const short* b) {
  int i = GID(); o8[i] = a[i] * 3 + 1; o16[i] = (ushort)(b[i] * 2 - a[i]); }
// ---- i64
__kernel void i64_arith(__global long* o, __global const long* a, __global const long* b) {
  int i = GID(); long x = a[i], y = b[i];
  o[6*i+0] = x + y; o[6*i+1] = x * y; o[6*i+2] = x - y; o[6*i+3] = x >> (y & 63); o[6*i+4] = x < y ? x : y; o[6*i+5] = (long)((ulong)x >> 3) ^ y; }
__kernel void i64_div(__global ulong* o, __global const ulong* a, __global const ulong* b) { int i = GID(); o[2*i] = a[i] / b[i]; o[2*i+1] = a[i] % b[i]; }
__kernel void i64_sdiv(__global long* o, __global const long* a, __global const long* b) { int i = GID(); o[i] = a[i] / b[i]; }
// ---- control flow
__kernel void cf_ifelse(__global int* o, __global const int* a) {
  int i = GID(); int x = a[i];
  if (i & 1) { x = x * 3 + 1; if (x & 4) x -= 100; } else { x = x / 2; }
  o[i] = x; }
__kernel void cf_collatz(__global int* o, __global const int* a) {
  int i = GID(); uint x = (uint)a[i]; int steps = 0; while (x > 1 && steps < 1000) { x = (x & 1) ? 3 * x + 1 : x / 2; steps++; } o[i] = steps; }
__kernel void cf_nested(__global int* o, __global const int* a) {
  int i = GID(); int acc = 0;
  for (int j = 0; j < (a[i] & 15); j++) { if (j == 7) break; for (int k = 0; k < j; k++) { if ((k ^ i) & 1) continue; acc += k * j; } }
  o[i] = acc; }
__kernel void cf_switch(__global int* o, __global const int* a) {
  int i = GID(); int r;
  switch (a[i] & 7) { case 0: r = 10; break; case 1: r = a[i] * 2; break; case 2: case 3: r = -a[i]; break; case 5: r = a[i] >> 2; break; default: r = 7; }
  o[i] = r; }
__kernel void cf_early_return(__global int* o, __global const int* a) { int i = GID(); if (a[i] < 0) return; o[i] = a[i] + 1; }
// ---- LDS and barriers
__kernel void lds_reduce(__global float* out, __global const float* in) {
  __local float s[256]; int l = LID();
  s[l] = in[GID()];
  for (int k = 128; k > 0; k >>= 1) { BARRIER(); if (l < k) s[l] += s[l + k]; }
  if (l == 0) out[GRP()] = s[0]; }
__kernel void lds_reverse(__global int* out, __global const int* in) {
  __local int s[128]; int l = LID(); s[l] = in[GID()]; BARRIER(); out[GID()] = s[127 - l]; }
__kernel void lds_scan(__global int* out, __global const int* in) {
  __local int s[2][64]; int l = LID(); int p = 0;
  s[0][l] = in[GID()];
  for (int off = 1; off < 64; off <<= 1) { BARRIER(); int v = s[p][l]; if (l >= off) v += s[p][l - off]; s[1 - p][l] = v; p = 1 - p; }
  BARRIER(); out[GID()] = s[p][l]; }
__kernel void lds_matmul(__global float* c, __global const float* a, __global const float* b, int n) {
  __local float ta[16][16], tb[16][16];
  int tx = __builtin_amdgcn_workitem_id_x(), ty = __builtin_amdgcn_workitem_id_y();
  int x = __builtin_amdgcn_workgroup_id_x() * 16 + tx, y = __builtin_amdgcn_workgroup_id_y() * 16 + ty;
  float acc = 0;
  for (int t = 0; t < n; t += 16) {
    ta[ty][tx] = a[y * n + t + tx]; tb[ty][tx] = b[(t + ty) * n + x]; BARRIER();
    for (int k = 0; k < 16; k++) acc += ta[ty][k] * tb[k][tx];
    BARRIER(); }
  c[y * n + x] = acc; }
// ---- atomics
__kernel void atom_hist(__global uint* bins, __global const uint* in) { int i = GID(); __atomic_fetch_add(&bins[in[i] & 15], 1u, __ATOMIC_RELAXED); }
__kernel void atom_minmax(__global int* o, __global const int* in) {
  int i = GID(); __atomic_fetch_max(&o[0], in[i], __ATOMIC_RELAXED); __atomic_fetch_min(&o[1], in[i], __ATOMIC_RELAXED);
  __atomic_fetch_or(&o[2], 1 << (in[i] & 31), __ATOMIC_RELAXED); __atomic_fetch_xor(&o[3], in[i], __ATOMIC_RELAXED); }
__kernel void atom_ret(__global uint* o, __global uint* counter) { int i = GID(); uint old = __atomic_fetch_add(counter, 1u, __ATOMIC_RELAXED); o[old] = i; }
__kernel void atom_cas_float(__global float* acc, __global const float* in) {
  int i = GID(); __global uint* p = (__global uint*)acc; uint old = *p, assumed;
  do { assumed = old; float nv = as_float(assumed) + in[i]; old = __sync_val_compare_and_swap(p, assumed, as_uint(nv)); } while (old != assumed); }
__kernel void atom_lds_hist(__global uint* bins, __global const uint* in) {
  __local uint h[16]; int l = LID(); if (l < 16) h[l] = 0; BARRIER();
  __atomic_fetch_add(&h[in[GID()] & 15], 1u, __ATOMIC_RELAXED); BARRIER();
  if (l < 16) __atomic_fetch_add(&bins[l], h[l], __ATOMIC_RELAXED); }
__kernel void atom_lds_cas(__global uint* out, __global const uint* in) {
  __local uint acc; int l = LID(); if (l == 0) acc = 0; BARRIER();
  uint old = acc, seen;
  do { seen = old; old = __sync_val_compare_and_swap(&acc, seen, seen + in[GID()]); } while (old != seen);
  BARRIER(); if (l == 0) out[GRP()] = acc; }
// ---- memory shapes
__kernel void mem_private(__global int* o, __global const int* in) {
  int p[32]; int l = GID(); for (int i = 0; i < 32; i++) p[i] = in[i] * (l + 1); o[l] = p[in[l] & 31] + p[(in[l] >> 5) & 31]; }
__kernel void mem_float4(__global float4* o, __global const float4* a) { int i = GID(); float4 v = a[i]; o[i] = (float4)(v.w, v.z * 2.0f, v.y + v.x, v.x); }
__kernel void mem_2d(__global int* o) {
  __constant int* dummy = 0; (void)dummy;
  __constant char* dp = (__constant char*)__builtin_amdgcn_dispatch_ptr();
  uint gsx = *(__constant uint*)(dp + 12);   // hsa_kernel_dispatch_packet_t.grid_size_x
  int x = __builtin_amdgcn_workgroup_id_x() * 8 + __builtin_amdgcn_workitem_id_x();
  int y = __builtin_amdgcn_workgroup_id_y() * 4 + __builtin_amdgcn_workitem_id_y();
  o[y * gsx + x] = y * 1000 + x; }
__kernel void mem_gather(__global float* o, __global const float* a, __global const int* idx) { int i = GID(); o[i] = a[idx[i]]; }
#if __AMDGCN_WAVEFRONT_SIZE == 32 && defined(__GFX11__)
// ---- WMMA (wave32, gfx11's layout): lane l holds row l%16 of A and column l%16 of B; C/D register i holds row 2i + l/16
typedef half half16v __attribute__((ext_vector_type(16)));
typedef float float8v __attribute__((ext_vector_type(8)));
typedef int int4v __attribute__((ext_vector_type(4)));
typedef int int8v __attribute__((ext_vector_type(8)));
__kernel void wmma_f16(__global float* d, __global const half* a, __global const half* b, __global const float* c) {
  int l = LID(); half16v av, bv; float8v cv;
  for (int k = 0; k < 16; k++) { av[k] = a[(l % 16) * 16 + k]; bv[k] = b[k * 16 + (l % 16)]; }
  for (int i = 0; i < 8; i++) cv[i] = c[(2 * i + l / 16) * 16 + (l % 16)];
  float8v r = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(av, bv, cv);
  for (int i = 0; i < 8; i++) d[(2 * i + l / 16) * 16 + (l % 16)] = r[i]; }
__kernel void wmma_iu8(__global int* d, __global const char* a, __global const char* b, __global const int* c) {
  int l = LID(); int4v av, bv; int8v cv;
  for (int k = 0; k < 4; k++) {
    uint x = 0, y = 0;
    for (int j = 0; j < 4; j++) { x |= (uint)(uchar)a[(l % 16) * 16 + 4 * k + j] << (8 * j); y |= (uint)(uchar)b[(4 * k + j) * 16 + (l % 16)] << (8 * j); }
    av[k] = x; bv[k] = y; }
  for (int i = 0; i < 8; i++) cv[i] = c[(2 * i + l / 16) * 16 + (l % 16)];
  int8v r = __builtin_amdgcn_wmma_i32_16x16x16_iu8_w32(true, av, true, bv, cv, false);
  for (int i = 0; i < 8; i++) d[(2 * i + l / 16) * 16 + (l % 16)] = r[i]; }
#elif __AMDGCN_WAVEFRONT_SIZE == 64 && defined(__GFX11__)
// ---- WMMA (gfx11 wave64): A/B as in wave32 (lanes 16-63 repeat lanes 0-15); C/D register i holds row 4i + l/16
typedef half half16v __attribute__((ext_vector_type(16)));
typedef float float4v __attribute__((ext_vector_type(4)));
typedef int int4v __attribute__((ext_vector_type(4)));
__kernel void wmma_f16(__global float* d, __global const half* a, __global const half* b, __global const float* c) {
  int l = LID(); half16v av, bv; float4v cv;
  for (int k = 0; k < 16; k++) { av[k] = a[(l % 16) * 16 + k]; bv[k] = b[k * 16 + (l % 16)]; }
  for (int i = 0; i < 4; i++) cv[i] = c[(4 * i + l / 16) * 16 + (l % 16)];
  float4v r = __builtin_amdgcn_wmma_f32_16x16x16_f16_w64(av, bv, cv);
  for (int i = 0; i < 4; i++) d[(4 * i + l / 16) * 16 + (l % 16)] = r[i]; }
__kernel void wmma_iu8(__global int* d, __global const char* a, __global const char* b, __global const int* c) {
  int l = LID(); int4v av, bv, cv;
  for (int k = 0; k < 4; k++) {
    uint x = 0, y = 0;
    for (int j = 0; j < 4; j++) { x |= (uint)(uchar)a[(l % 16) * 16 + 4 * k + j] << (8 * j); y |= (uint)(uchar)b[(4 * k + j) * 16 + (l % 16)] << (8 * j); }
    av[k] = x; bv[k] = y; }
  for (int i = 0; i < 4; i++) cv[i] = c[(4 * i + l / 16) * 16 + (l % 16)];
  int4v r = __builtin_amdgcn_wmma_i32_16x16x16_iu8_w64(true, av, true, bv, cv, false);
  for (int i = 0; i < 4; i++) d[(4 * i + l / 16) * 16 + (l % 16)] = r[i]; }
#elif defined(__GFX12__)
// ---- WMMA (gfx12): lane group g = l/16 of a wave32 holds K in 64-bit blocks of B elements (K = (j/B)*2B + g*B + j%B);
// a wave64 group g is wave32's group g&1 with the second half of its elements when g >= 2; C/D element e of lane l
// is row e + 8*(g&1) + 4*(g>>1) (AMD's matrix instruction calculator, RDNA4)
#define W __AMDGCN_WAVEFRONT_SIZE
#define KOF(j, l, J, B) ({ int g_ = (l) / 16, j32_ = (g_ >> 1) * (J) + (j); (j32_ / (B)) * 2 * (B) + (g_ & 1) * (B) + j32_ % (B); })
#define CROW(e, l) ((e) + 8 * (((l) / 16) & 1) + 4 * ((l) / 32))
typedef half halfJv __attribute__((ext_vector_type(256 / W)));
typedef float floatEv __attribute__((ext_vector_type(256 / W)));
typedef int intEv __attribute__((ext_vector_type(256 / W)));
__kernel void wmma_f16(__global float* d, __global const half* a, __global const half* b, __global const float* c) {
  int l = LID(); halfJv av, bv; floatEv cv;
  for (int j = 0; j < 256 / W; j++) { int k = KOF(j, l, 256 / W, 4); av[j] = a[(l % 16) * 16 + k]; bv[j] = b[k * 16 + (l % 16)]; }
  for (int e = 0; e < 256 / W; e++) cv[e] = c[CROW(e, l) * 16 + (l % 16)];
#if W == 32
  floatEv r = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12(av, bv, cv);
#else
  floatEv r = __builtin_amdgcn_wmma_f32_16x16x16_f16_w64_gfx12(av, bv, cv);
#endif
  for (int e = 0; e < 256 / W; e++) d[CROW(e, l) * 16 + (l % 16)] = r[e]; }
__kernel void wmma_iu8(__global int* d, __global const char* a, __global const char* b, __global const int* c) {
  int l = LID(); uint av[2] = {0, 0}, bv[2] = {0, 0}; intEv cv;
  for (int j = 0; j < 256 / W; j++) {
    int k = KOF(j, l, 256 / W, 8);
    av[j / 4] |= (uint)(uchar)a[(l % 16) * 16 + k] << (8 * (j % 4)); bv[j / 4] |= (uint)(uchar)b[k * 16 + (l % 16)] << (8 * (j % 4)); }
  for (int e = 0; e < 256 / W; e++) cv[e] = c[CROW(e, l) * 16 + (l % 16)];
#if W == 32
  intEv r = __builtin_amdgcn_wmma_i32_16x16x16_iu8_w32_gfx12(true, (int2)(av[0], av[1]), true, (int2)(bv[0], bv[1]), cv, false);
#else
  intEv r = __builtin_amdgcn_wmma_i32_16x16x16_iu8_w64_gfx12(true, (int)av[0], true, (int)bv[0], cv, false);
#endif
  for (int e = 0; e < 256 / W; e++) d[CROW(e, l) * 16 + (l % 16)] = r[e]; }
#endif
"""
