// The few CUDA declarations the corpus kernels use, for clang-19 --cuda-device-only -nocudainc -nocudalib (no CUDA
// SDK here): thread indices and intrinsics map to clang's NVVM builtins.
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
#define __device__ __attribute__((device))
#define __constant__ __attribute__((constant))
#define threadIdx_x __nvvm_read_ptx_sreg_tid_x()
#define threadIdx_y __nvvm_read_ptx_sreg_tid_y()
#define blockIdx_x __nvvm_read_ptx_sreg_ctaid_x()
#define blockIdx_y __nvvm_read_ptx_sreg_ctaid_y()
#define blockDim_x __nvvm_read_ptx_sreg_ntid_x()
#define blockDim_y __nvvm_read_ptx_sreg_ntid_y()
#define gridDim_x __nvvm_read_ptx_sreg_nctaid_x()
#define __syncthreads() __nvvm_bar_sync(0)
#define GID (blockIdx_x * blockDim_x + threadIdx_x)
static __device__ inline float __int_as_float(int x) { return __builtin_bit_cast(float, x); }
static __device__ inline int __float_as_int(float x) { return __builtin_bit_cast(int, x); }
