"""A tour of hcq: a kernel on the CPU device, then the AMD driver on the emulated gfx1100 (copies, signals,
timestamps, graph replay, a fault it survives), and what hcq.smi sees of it.

  python examples/hcq_tour.py
"""
import numpy as np

import hcq
from hcq.sym import Variable

# c[i] = a[i] + b[i] for i < n: the CPU kernel signature is (kernargs, group id x/y/z, group size x/y/z)
VADD = r"""
define void @vadd(ptr %ka, i32 %gx, i32 %gy, i32 %gz, i32 %lx, i32 %ly, i32 %lz) {
entry:
  %pa = load ptr, ptr %ka
  %kb = getelementptr i8, ptr %ka, i64 8
  %pb = load ptr, ptr %kb
  %kc = getelementptr i8, ptr %ka, i64 16
  %pc = load ptr, ptr %kc
  %kn = getelementptr i8, ptr %ka, i64 24
  %n = load i32, ptr %kn
  %base = mul i32 %gx, %lx
  br label %loop
loop:
  %l = phi i32 [0, %entry], [%l1, %body]
  %i = add i32 %base, %l
  %inb = icmp ult i32 %i, %n
  %more = icmp ult i32 %l, %lx
  %ok = and i1 %inb, %more
  br i1 %ok, label %body, label %exit
body:
  %ii = zext i32 %i to i64
  %xa = getelementptr float, ptr %pa, i64 %ii
  %xb = getelementptr float, ptr %pb, i64 %ii
  %xc = getelementptr float, ptr %pc, i64 %ii
  %a = load float, ptr %xa
  %b = load float, ptr %xb
  %s = fadd float %a, %b
  store float %s, ptr %xc
  %l1 = add i32 %l, 1
  br label %loop
exit:
  ret void
}
"""


def cpu_part() -> None:
  dev = hcq.Device("CPU")
  prg = dev.program(VADD, "vadd", args=["buffer", "buffer", "buffer", "u32"], arg_names=["a", "b", "c", "n"])
  n = 1 << 20
  a, b = np.random.default_rng(0).random((2, n), dtype=np.float32)
  A, B, C = dev.alloc(4 * n).copyin(a), dev.alloc(4 * n).copyin(b), dev.alloc(4 * n)
  secs = prg(A, B, C, global_size=n // 1024, local_size=1024, vals=(n,), wait=True)
  ok = np.array_equal(C.copyout(np.empty(n, np.float32)), a + b)
  print(f"CPU: {prg}\n  vadd over {n} floats in {secs * 1e3:.2f} ms on {dev.cores} cores, matches numpy: {ok}")


def amd_part() -> None:
  dev = hcq.Device("MOCKKFD+AMD")
  print(f"AMD: {dev} ({dev.arch}, emulated: {dev.os.emulated}), GC register base {dev.dialect.gc_base[0]:#x}")
  data = np.arange(1 << 22, dtype=np.uint32)
  vram = dev.alloc(data.nbytes)  # device memory: copies go through SDMA and a staging buffer
  vram.copyin(data)
  print(f"  {data.nbytes >> 20} MiB through SDMA and back, equal: {np.array_equal(vram.copyout(np.empty_like(data)), data)}")
  stamp = dev.new_signal()
  dev.compute_queue().timestamp(stamp).signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
  dev.synchronize()
  print(f"  GPU clock from a RELEASE_MEM timestamp: {stamp.timestamp} ticks ({stamp.timestamp_ns / 1e6:.1f} ms since the GPU started)")
  q = dev.copy_queue().copy(Variable("dst"), vram.addr, 64).signal(dev.timeline_signal, Variable("t"))  # built once
  outs = [dev.alloc(64, "host") for _ in range(3)]
  for out in outs:
    q.submit(dev, {"dst": out.addr, "t": dev.next_timeline()})  # replayed with a new destination
  dev.synchronize()
  print(f"  one SDMA queue replayed into 3 buffers: {[int(o.view(np.uint32)[5]) for o in outs]}")
  dev.compute_queue().pkt3(0x99, 0).signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
  try:
    dev.synchronize()
  except hcq.GPUFault as e:
    print(f"  a bad PM4 packet: GPUFault: {e}")
  vram.copyin(data[:16])
  print(f"  after the queue reset the device works: {vram.copyout(np.empty(4, np.uint32)).tolist()}")
  from hcq.smi import snapshot, table
  print("hcq.smi on this process's emulated GPU:")
  print("\n".join("  " + line for line in table.render(snapshot.take(dev.os))))


if __name__ == "__main__":
  cpu_part()
  amd_part()
