// device_path.cc -- which way coll/llrdma moves a CUDA device vector: the
// size rules of coll_llrdma_gpu_peer / gpu_peer_min / gpu_stage_max, shared
// by the component (each call) and llrdma-check (the plan it prints), so the
// two cannot drift.  What only run time knows (whether the GPUs reach each
// other, whether another rank uses this GPU) comes in as arguments.
#include "llrdma_allreduce.h"

extern "C" uint64_t llrdma_ar_dev_stage_max(const llrdma_ar_dev_rule_t *r)
{
    if (r == nullptr)
        return 0;
    if (!r->stage_auto)
        return r->stage_max;
    // With an arena the device path wins from 32K (2 H200s, one rank each:
    // 25 against 43 us); without one per-segment PML staging only from
    // about 2M (docs/benchmarks-h200.md).
    return r->arena ? uint64_t(16) << 10 : uint64_t(2) << 20;
}

extern "C" int llrdma_ar_dev_try_peer(uint64_t bytes, const llrdma_ar_dev_rule_t *r)
{
    return r != nullptr && !r->hier && r->shm_plan && r->gpu_peer != 0 && bytes >= r->peer_min;
}

extern "C" int llrdma_ar_dev_path(uint64_t bytes, const llrdma_ar_dev_rule_t *r, int peer_ok,
                                  int shared_gpu, const char **why)
{
    const char *w = "";
    int path = LLRDMA_AR_DEV_GPU;
    if (r == nullptr) {
        path = 0;
        w = "no rule";
    } else if (r->hier && r->direct) {
        path = LLRDMA_AR_DEV_DIRECT;
        w = "several nodes: the node phases through the pinned arena, the inter-node step by "
            "RDMA from and to GPU memory, reduced on the GPU";
    } else if (r->hier) {
        path = LLRDMA_AR_DEV_WHOLE;
        w = "several nodes: copied whole to host memory, hierarchical schedule";
    } else if (peer_ok && llrdma_ar_dev_try_peer(bytes, r)) {
        path = LLRDMA_AR_DEV_PEER;
        w = "CUDA IPC: each GPU reduces a slice, reading the others' buffers";
    } else if (bytes <= llrdma_ar_dev_stage_max(r)) {
        path = LLRDMA_AR_DEV_WHOLE;
        w = "small: copied whole to pinned host memory, host path (gpu_stage_max)";
    } else if (r->stage_auto && shared_gpu) {
        path = LLRDMA_AR_DEV_WHOLE;
        w = "another rank uses this GPU: copied whole, host path";
    } else if (r->shm_plan) {
        w = "reduced on the GPU, staged through the arena round by round";
    } else {
        w = "reduced on the GPU, staged through the PML segment by segment";
    }
    if (why != nullptr)
        *why = w;
    return path;
}

extern "C" const char *llrdma_ar_dev_path_name(int path)
{
    switch (path) {
    case LLRDMA_AR_DEV_WHOLE:
        return "host-copy";
    case LLRDMA_AR_DEV_PEER:
        return "gpu-peer";
    case LLRDMA_AR_DEV_GPU:
        return "gpu";
    case LLRDMA_AR_DEV_DIRECT:
        return "gpu-direct";
    default:
        return "?";
    }
}
