// CUDA C++ corpus for the emulated SM (clang-19 --cuda-device-only, cuda_prelude.h); references in test_nv_sm_corpus.py.
extern "C" {
__global__ void reduce_shared(float* out, const float* in) {
  __shared__ float s[256]; int l = threadIdx_x;
  s[l] = in[blockIdx_x * 256 + l];
  for (int k = 128; k > 0; k >>= 1) { __syncthreads(); if (l < k) s[l] += s[l + k]; }
  if (l == 0) out[blockIdx_x] = s[0];
}
__global__ void reduce_warp_shfl(int* out, const int* in) {
  int v = in[GID];
  for (int o = 16; o > 0; o >>= 1) v += __nvvm_shfl_sync_bfly_i32(0xffffffff, v, o, 31);
  if ((threadIdx_x & 31) == 0) __nvvm_atom_add_gen_i(out, v);
}
__global__ void atomic_add_int(int* out, const int* in) { __nvvm_atom_add_gen_i(out, in[GID]); }
__global__ void atomic_ops(int* out, const int* in) {
  int v = in[GID];
  __nvvm_atom_min_gen_i(out + 1, v); __nvvm_atom_max_gen_i(out + 2, v); __nvvm_atom_xor_gen_i(out + 3, v);
  __nvvm_atom_or_gen_i(out + 4, v); __nvvm_atom_inc_gen_ui((unsigned*)out + 5, 0xffffffffu);
  if (GID == 0) out[6] = 0xffff;
  __syncthreads();
  if (blockIdx_x == 0 && threadIdx_x == 0) {}
}
__global__ void atomic_old_values(unsigned* slots, unsigned* counter) {
  unsigned old = __nvvm_atom_add_gen_i((int*)counter, 1); slots[GID] = old;
}
__device__ float atomic_max_float(float* addr, float v) {
  int* p = (int*)addr; int old = *p, assumed;
  do { assumed = old; float cur = __int_as_float(assumed); if (cur >= v) break;
       old = __nvvm_atom_cas_gen_i(p, assumed, __float_as_int(v)); } while (assumed != old);
  return __int_as_float(old);
}
__global__ void atomic_cas_max_float(float* out, const float* in) { atomic_max_float(out, in[GID]); }
__global__ void atomic_add_float_shared(float* out, const float* in) {
  __shared__ float acc; if (threadIdx_x == 0) acc = 0; __syncthreads();
  __nvvm_atom_add_gen_f(&acc, in[GID]); __syncthreads();
  if (threadIdx_x == 0) out[blockIdx_x] = acc;
}
__global__ void histogram_shared(int* out, const int* in) {
  __shared__ int h[64]; if (threadIdx_x < 64) h[threadIdx_x] = 0; __syncthreads();
  __nvvm_atom_add_gen_i(&h[in[GID]], 1); __syncthreads();
  if (threadIdx_x < 64) __nvvm_atom_add_gen_i(&out[threadIdx_x], h[threadIdx_x]);
}
__global__ void vote_ballot(unsigned* out, const int* in) {
  unsigned b = __nvvm_vote_ballot_sync(0xffffffff, in[GID] > 0);
  if ((threadIdx_x & 31) == 0) out[GID / 32] = b;
}
__global__ void vote_all_any(int* out, const int* in) {
  int v = in[GID];
  out[GID] = __nvvm_vote_all_sync(0xffffffff, v > -990) * 2 + __nvvm_vote_any_sync(0xffffffff, v > 990);
}
__global__ void shfl_modes(int* out, const int* in) {
  int v = in[GID], n = 4096;
  out[GID] = __nvvm_shfl_sync_bfly_i32(0xffffffff, v, 5, 31);
  out[n + GID] = __nvvm_shfl_sync_up_i32(0xffffffff, v, 3, 0);
  out[2 * n + GID] = __nvvm_shfl_sync_down_i32(0xffffffff, v, 3, 31);
  out[3 * n + GID] = __nvvm_shfl_sync_idx_i32(0xffffffff, v, 7, 31);
}
__global__ void match_any(unsigned* out, const int* in) { out[GID] = __nvvm_match_any_sync_i32(0xffffffff, in[GID]); }
__global__ void divergent_loop(int* out, const int* in) {
  unsigned x = (in[GID] & 0xffff) | 1; int n = 0;
  while (x != 1 && n < 1000) { x = (x % 2 == 0) ? x / 2 : 3 * x + 1; n++; }
  out[GID] = n;
}
__global__ void nested_divergence(int* out, const int* in) {
  int v = in[GID], r;
  if (v > 0) { if (v % 3 == 0) r = v * 2; else r = v + 7; }
  else { if (v & 1) r = -v; else r = v >> 1; }
  out[GID] = r;
}
__global__ void early_exit_barrier(int* out, const int* in) {
  __shared__ int s[256]; int l = threadIdx_x;
  if (l >= 128) return;                      // the upper half exits before the barrier
  s[l] = in[GID]; __syncthreads();
  out[GID] = s[l] + s[127 - l];
}
__global__ void matmul_tiled(float* c, const float* a, const float* b, int n) {
  __shared__ float ta[16][16], tb[16][16];
  int tx = threadIdx_x, ty = threadIdx_y, x = blockIdx_x * 16 + tx, y = blockIdx_y * 16 + ty;
  float acc = 0;
  for (int t = 0; t < n; t += 16) {
    ta[ty][tx] = a[y * n + t + tx]; tb[ty][tx] = b[(t + ty) * n + x]; __syncthreads();
    for (int k = 0; k < 16; k++) acc += ta[ty][k] * tb[k][tx];
    __syncthreads();
  }
  c[y * n + x] = acc;
}
__global__ void transpose_shared(float* out, const float* in, int n) {
  __shared__ float t[16][17];
  int x = blockIdx_x * 16 + threadIdx_x, y = blockIdx_y * 16 + threadIdx_y;
  t[threadIdx_y][threadIdx_x] = in[y * n + x]; __syncthreads();
  out[(blockIdx_x * 16 + threadIdx_y) * n + blockIdx_y * 16 + threadIdx_x] = t[threadIdx_x][threadIdx_y];
}
__global__ void scan_shared(int* out, const int* in) {   // Hillis-Steele inclusive scan per block
  __shared__ int s[2][256]; int l = threadIdx_x, p = 0;
  s[0][l] = in[GID]; __syncthreads();
  for (int o = 1; o < 256; o <<= 1) { s[1 - p][l] = s[p][l] + (l >= o ? s[p][l - o] : 0); p = 1 - p; __syncthreads(); }
  out[GID] = s[p][l];
}
__global__ void int64_mix(long long* out, const unsigned* in) {
  unsigned long long v = in[GID];
  out[GID] = (long long)((v * 2654435761ull) ^ (v << 17)) / 7;
}
__global__ void double_ops(double* out, const double* in) {
  double v = in[GID]; out[GID] = __builtin_sqrt(__builtin_fabs(v)) * v + 1.0 / (1.0 + v * v);
}
__global__ void byte_short_ops(unsigned char* o8, short* o16, const int* in) {
  int v = in[GID]; o8[GID] = (unsigned char)((unsigned char)v * 3 + 1); o16[GID] = (short)((short)v * -5) >> 1;
}
__global__ void dynamic_shared_reverse(int* out, const int* in) {
  extern __shared__ int dyn[]; int l = threadIdx_x;
  dyn[l] = in[GID]; __syncthreads(); out[GID] = dyn[blockDim_x - 1 - l];
}
__global__ void grid_stride_2d(int* out, int w, int h) {
  for (int y = blockIdx_y * blockDim_y + threadIdx_y; y < h; y += blockDim_y * __nvvm_read_ptx_sreg_nctaid_y())
    for (int x = blockIdx_x * blockDim_x + threadIdx_x; x < w; x += blockDim_x * gridDim_x) out[y * w + x] = y * 1000 + x;
}
__global__ void local_array(int* out, const int* in) {
  volatile int a[16]; int v = in[GID];
  for (int k = 0; k < 16; k++) a[k] = v * (k + 1);
  int s = 0; for (int k = 0; k < 16; k += 3) s += a[(k * 7 + v) & 15];
  out[GID] = s;
}

// --- device-function calls (noinline: a real call in the PTX) ---
__device__ __attribute__((noinline)) int poly(int x, int y) { return x * x - 3 * y + 7; }
__device__ __attribute__((noinline)) long long collatz_steps(unsigned x, int limit) {
  long long n = 0; x = x | 1; while (x != 1 && n < limit) { x = (x & 1) ? 3 * x + 1 : x >> 1; n++; } return n; }
__device__ __attribute__((noinline)) int outer_fn(int x) { return poly(x, x + 1) + poly(x >> 2, 5); }
__device__ __attribute__((noinline)) float mix3(float a, double b, short c) { return a * (float)b + c; }
__global__ void call_simple(int* out, const int* in) { out[GID] = poly(in[GID], GID); }
__global__ void call_divergent(long long* out, const int* in) {
  int v = in[GID]; out[GID] = v > 0 ? collatz_steps(v & 0xffff, 500) : poly(v, 1); }
__global__ void call_nested(int* out, const int* in) { out[GID] = outer_fn(in[GID]) + outer_fn(GID); }
__global__ void call_mixed_types(float* out, const int* in) { int v = in[GID]; out[GID] = mix3((float)v * 0.5f, (double)GID, (short)v); }
// --- barriers with a thread count, and bar.arrive: warps 0-1 produce, warps 2-3 consume, warps 4-7 never take part ---
__global__ void barrier_count(int* out, const int* in) {
  __shared__ int s[64]; int l = threadIdx_x;
  if (l < 64) { s[l] = in[GID] * 3; __nvvm_barrier_sync_cnt(1, 128); }
  else if (l < 128) { __nvvm_barrier_sync_cnt(1, 128); out[GID] = s[l - 64] + 1; }
  else out[GID] = -1;
}
__global__ void barrier_arrive(int* out, const int* in) {
  __shared__ int s[64]; int l = threadIdx_x;
  if (l < 64) { s[l] = in[GID] ^ 0x55; asm volatile("bar.arrive 2, 128;" ::: "memory"); }
  else if (l < 128) { asm volatile("bar.sync 2, 128;" ::: "memory"); out[GID] = s[127 - l]; }
  else out[GID] = -2;
}
// --- extended precision: a 64x64 -> 128-bit product with mad.lo.cc / madc.hi.cc / madc.hi (32-bit limbs) ---
__global__ void mad_carry_chain(unsigned long long* out, const unsigned long long* in) {
  unsigned long long x = in[2 * GID], y = in[2 * GID + 1];
  unsigned a0 = (unsigned)x, a1 = (unsigned)(x >> 32), b0 = (unsigned)y, b1 = (unsigned)(y >> 32), r0, r1, r2, r3;
  asm("{\n\t.reg .u32 t1, t2;\n\t"
      "mul.lo.u32 %0, %4, %6;\n\tmul.hi.u32 %1, %4, %6;\n\t"
      "mad.lo.cc.u32 %1, %4, %7, %1;\n\tmadc.hi.u32 %2, %4, %7, 0;\n\t"
      "mad.lo.cc.u32 %1, %5, %6, %1;\n\tmadc.hi.cc.u32 %2, %5, %6, %2;\n\taddc.u32 %3, 0, 0;\n\t"
      "mad.lo.cc.u32 %2, %5, %7, %2;\n\tmadc.hi.u32 %3, %5, %7, %3;\n\t}"
      : "=&r"(r0), "=&r"(r1), "=&r"(r2), "=&r"(r3) : "r"(a0), "r"(a1), "r"(b0), "r"(b1));
  out[2 * GID] = r0 | (unsigned long long)r1 << 32; out[2 * GID + 1] = r2 | (unsigned long long)r3 << 32;
}
// --- mma.sync: one warp per block; fragments loaded and D stored by the ISA's layouts (PTX ISA 9.7.14.5.7-8) ---
#define MMA_C float rc[4], rd[4]; for (int i = 0; i < 4; i++) rc[i] = c[(g + 8 * (i >> 1)) * 8 + t * 2 + (i & 1)];
#define MMA_D for (int i = 0; i < 4; i++) d[(g + 8 * (i >> 1)) * 8 + t * 2 + (i & 1)] = rd[i];
#define PAIR(p, i, j) ((unsigned)(p)[i] | (unsigned)(p)[j] << 16)
#define MMA_OUT "=f"(rd[0]), "=f"(rd[1]), "=f"(rd[2]), "=f"(rd[3])
#define MMA_CIN "f"(rc[0]), "f"(rc[1]), "f"(rc[2]), "f"(rc[3])
#define MMA_K16(NAME, T) __global__ void NAME(float* d, const unsigned short* a, const unsigned short* b, const float* c) { \
  int l = threadIdx_x, g = l >> 2, t = l & 3; unsigned ra[4], rb[2]; MMA_C \
  for (int r = 0; r < 4; r++) { int row = g + 8 * (r & 1), col = t * 2 + 8 * (r >> 1); ra[r] = PAIR(a, row * 16 + col, row * 16 + col + 1); } \
  for (int r = 0; r < 2; r++) { int k = t * 2 + 8 * r; rb[r] = PAIR(b, k * 8 + g, (k + 1) * 8 + g); } \
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." T "." T ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};" \
    : MMA_OUT : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]), MMA_CIN); MMA_D }
#define MMA_K8(NAME, T) __global__ void NAME(float* d, const unsigned short* a, const unsigned short* b, const float* c) { \
  int l = threadIdx_x, g = l >> 2, t = l & 3; unsigned ra[2], rb; MMA_C \
  for (int r = 0; r < 2; r++) { int row = g + 8 * r; ra[r] = PAIR(a, row * 8 + t * 2, row * 8 + t * 2 + 1); } \
  rb = PAIR(b, t * 2 * 8 + g, (t * 2 + 1) * 8 + g); \
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32." T "." T ".f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%8,%9,%10};" \
    : MMA_OUT : "r"(ra[0]), "r"(ra[1]), "r"(rb), MMA_CIN); MMA_D }
MMA_K16(mma_f16_m16n8k16, "f16")
MMA_K16(mma_bf16_m16n8k16, "bf16")
MMA_K8(mma_f16_m16n8k8, "f16")
MMA_K8(mma_bf16_m16n8k8, "bf16")
__global__ void mma_tf32_m16n8k8(float* d, const unsigned* a, const unsigned* b, const float* c) {
  int l = threadIdx_x, g = l >> 2, t = l & 3; unsigned ra[4], rb[2]; MMA_C
  for (int i = 0; i < 4; i++) ra[i] = a[(g + 8 * (i & 1)) * 8 + t + 4 * (i >> 1)];
  for (int i = 0; i < 2; i++) rb[i] = b[(t + 4 * i) * 8 + g];
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
    : MMA_OUT : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]), MMA_CIN); MMA_D
}
// --- module-scope variables: a __device__ table and counter, __constant__ coefficients (where the loader put them) ---
__device__ int dev_table[8] = {3, -1, 4, -1, 5, -9, 2, 6};
__device__ unsigned dev_count;   // zero-initialised
__constant__ int const_coef[4] = {7, -3, 11, 2};
__global__ void module_variables(int* out, unsigned* olds, const int* in) {
  int v = in[GID]; out[GID] = v * const_coef[v & 3] + dev_table[GID & 7];
  olds[GID] = __nvvm_atom_add_gen_i((int*)&dev_count, 1);
}
// --- recursion: a divide-and-conquer sum (depth log2 n, not a tail call) on a per-thread stack ---
__device__ __attribute__((noinline)) int rsum(const int* a, int n) { return n == 1 ? a[0] : rsum(a, n / 2) * 3 + rsum(a + n / 2, n - n / 2); }
__global__ void recursive_sum(int* out, const int* in) { int n = (in[GID] & 31) + 1; out[GID] = rsum(in + (GID & ~63), n); }
// --- f16 and bf16: conversions round to nearest even, arithmetic rounded once per operation ---
__global__ void half_bf16_convert(unsigned short* h, unsigned short* bf, float* back, const float* in) {
  float x = in[GID]; _Float16 a = (_Float16)x; __bf16 b = (__bf16)x;
  h[GID] = __builtin_bit_cast(unsigned short, (_Float16)(a * a + a));
  bf[GID] = __builtin_bit_cast(unsigned short, b);
  back[GID] = (float)a + (float)b;
}
// --- f64: exp by range reduction and a degree-12 polynomial (fma, div.rn, exponent bits) and sqrt.rn ---
__global__ void f64_exp_sqrt(double* out, const double* in) {
  double x = in[GID], k = __builtin_rint(x * 1.4426950408889634), r = __builtin_fma(-k, 0.6931471805599453, x);
  r = __builtin_fma(-k, 2.3190468138462996e-17, r);
  double p = 1.0 / 479001600.0;
  for (int i = 11; i >= 0; i--) { double f = 1.0; for (int j = 2; j <= i; j++) f *= j; p = __builtin_fma(p, r, 1.0 / f); }
  long long bits = __builtin_bit_cast(long long, p) + ((long long)k << 52);
  out[2 * GID] = __builtin_bit_cast(double, bits);
  out[2 * GID + 1] = __builtin_sqrt(__builtin_fabs(x) + 1.0 / 3.0);
}
// --- warp vote.uni and match.all (with its predicate), per warp ---
__global__ void vote_uni_match_all(unsigned* out, const int* in) {
  int v = in[GID] & 1, w = in[GID] >> 8; int pred;
  unsigned m = __nvvm_match_all_sync_i32p(0xffffffff, w, &pred);
  out[GID] = (unsigned)__nvvm_vote_uni_sync(0xffffffff, v) | (unsigned)pred << 1 | (m == 0xffffffff) << 2 | (m != 0) << 3;
}
// --- atomics: exchange and compare-and-swap on shared memory, 64-bit min/max and f64 add on global ---
__global__ void atomics_mixed(unsigned long long* out, double* dsum, const int* in) {
  __shared__ int owner; __shared__ int slot[4];
  int l = threadIdx_x, v = in[GID];
  if (l == 0) { owner = -1; for (int i = 0; i < 4; i++) slot[i] = 0; } __syncthreads();
  __nvvm_atom_cas_gen_i(&owner, -1, l);                  // exactly one thread claims the block
  __nvvm_atom_xchg_gen_i(&slot[l & 3], 1);
  __syncthreads();
  if (l == owner) out[4 + blockIdx_x] = slot[0] + slot[1] + slot[2] + slot[3];
  __nvvm_atom_min_gen_ull(out, (unsigned long long)(long long)v * 977);
  __nvvm_atom_max_gen_ull(out + 1, (unsigned long long)(long long)v * 977);
  __nvvm_atom_add_gen_d(dsum, (double)v);                // integers: the sum is exact in any order
}
}
