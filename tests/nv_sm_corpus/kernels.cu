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
}
