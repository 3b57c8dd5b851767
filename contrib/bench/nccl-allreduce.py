# NCCL's all_reduce through torch.distributed, one rank per GPU: P50/P99 per size
# (float32 sum, 8 B..256 MB; per iteration the maximum over ranks, each
# iteration synchronised), CSV on rank 0's stdout.  The side-by-side peer of
# `llrdma-bench allreduce --device` in docs/benchmarks-h200.md.
#   torchrun --nproc_per_node 2 contrib/bench/nccl-allreduce.py > nccl.csv
import os, sys, time, torch, torch.distributed as dist
dist.init_process_group("nccl")
r = dist.get_rank(); torch.cuda.set_device(r % torch.cuda.device_count())
sizes = [8 << i for i in range(0, 26)]  # 8 B .. 256 MB
if r == 0: print("size_bytes,p50_us,p99_us,iters")
for b in sizes:
    n = max(1, b // 4); x = torch.ones(n, dtype=torch.float32, device="cuda")
    iters = max(10, min(100, (256 << 20) // b))
    for _ in range(5): dist.all_reduce(x)
    torch.cuda.synchronize(); ts = []
    for _ in range(iters):
        t0 = time.perf_counter(); dist.all_reduce(x); torch.cuda.synchronize(); ts.append((time.perf_counter() - t0) * 1e6)
    t = torch.tensor(ts, device="cuda"); dist.all_reduce(t, op=dist.ReduceOp.MAX); ts = sorted(t.tolist())
    if r == 0: print(f"{n*4},{ts[len(ts)//2]:.2f},{ts[min(len(ts)-1, int(len(ts)*0.99))]:.2f},{iters}", flush=True)
dist.destroy_process_group()
