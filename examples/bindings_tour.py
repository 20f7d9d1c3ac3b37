"""A tour of hcq's generated bindings: ioctl numbers, kernel structs, AQL packets, PM4 headers and registers."""
import ctypes

from hcq.autogen import hsa, kfd
from hcq.autogen.am import gc_11_0_0 as gc
from hcq.autogen.am import nvd


def main() -> None:
  print(f"AMDKFD_IOC_CREATE_QUEUE = {kfd.AMDKFD_IOC_CREATE_QUEUE:#x}")
  args = kfd.struct_kfd_ioctl_create_queue_args(ring_size=1 << 16, queue_type=kfd.KFD_IOC_QUEUE_TYPE_COMPUTE_AQL)
  print(f"struct kfd_ioctl_create_queue_args: {ctypes.sizeof(args)} bytes, ring_size={args.ring_size}, queue_type={args.queue_type}")
  print(f"hsa_kernel_dispatch_packet_t: {ctypes.sizeof(hsa.hsa_kernel_dispatch_packet_t)} bytes; amd_queue_t: {ctypes.sizeof(hsa.amd_queue_t)} bytes")
  print(f"PACKET3(PACKET3_SET_SH_REG, 2) = {nvd.PACKET3(nvd.PACKET3_SET_SH_REG, 2):#010x}")
  rsrc1 = gc.regCOMPUTE_PGM_RSRC1
  print(rsrc1)
  value = rsrc1.encode(vgprs=3, sgprs=2)
  print(f"encode(vgprs=3, sgprs=2) = {value:#x}; decode -> {dict((k, v) for k, v in rsrc1.decode(value).items() if v)}")


if __name__ == "__main__":
  main()
