// gpu_rdma.cc -- which way btl/llrdma registers GPU memory (llrdma_btl_plan.h): the
// order NCCL and UCX use (dma-buf, then peermem), the knob that forces one, and the text
// the dump shows.  Pure: the BTL probes, this decides.
#include "llrdma_btl_plan.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace
{

// dma-buf MRs: the probe's answer means "supported" (EBADF: the provider looked at the
// fd) or the registration went through.
bool dmabuf_ok(int e)
{
    return e == EBADF || e == 0;
}

std::string dmabuf_why(int e)
{
    if (e < 0)
        return "rdma-core has no ibv_reg_dmabuf_mr";
    if (e == EOPNOTSUPP || e == EPROTONOSUPPORT)
        return "the device has no dma-buf MRs";
    return std::string("the dma-buf probe failed: ") + std::strerror(e);
}

int put(const std::string &s, char *out, size_t len)
{
    if (out == nullptr || len == 0)
        return LLRDMA_ERR_TRUNCATED;
    std::snprintf(out, len, "%s", s.c_str());
    return s.size() < len ? LLRDMA_OK : LLRDMA_ERR_TRUNCATED;
}

} // namespace

extern "C" int llrdma_gpu_knob_parse(const char *text, llrdma_gpu_knob_t *out)
{
    static const struct {
        const char *name;
        llrdma_gpu_knob_t knob;
    } k[] = {{"auto", LLRDMA_GPU_KNOB_AUTO},
             {"dmabuf", LLRDMA_GPU_KNOB_DMABUF},
             {"peermem", LLRDMA_GPU_KNOB_PEERMEM},
             {"off", LLRDMA_GPU_KNOB_OFF}};
    if (text == nullptr || out == nullptr)
        return LLRDMA_ERR_INVALID;
    for (const auto &e : k) {
        if (std::strcmp(text, e.name) == 0) {
            *out = e.knob;
            return LLRDMA_OK;
        }
    }
    return LLRDMA_ERR_INVALID;
}

extern "C" int llrdma_gpu_rdma_choose(llrdma_gpu_knob_t knob, const llrdma_gpu_probe_t *p,
                                      llrdma_gpu_mode_t *mode, char *report, size_t len)
{
    if (p == nullptr || mode == nullptr)
        return LLRDMA_ERR_INVALID;
    *mode = LLRDMA_GPU_NONE;
    if (knob == LLRDMA_GPU_KNOB_OFF)
        return put("none (btl_llrdma_gpu_rdma=off)", report, len);
    if (!p->have_device) {
        std::string why = "none (no RDMA device)";
        if (knob != LLRDMA_GPU_KNOB_AUTO) {
            put("no RDMA device to register GPU memory with", report, len);
            return LLRDMA_ERR_NOT_FOUND;
        }
        return put(why, report, len);
    }
    const bool db = dmabuf_ok(p->dmabuf_errno), pm = p->peermem != 0;
    const std::string no_pm = "neither nvidia_peermem nor nv_peer_mem is loaded";
    switch (knob) {
    case LLRDMA_GPU_KNOB_DMABUF:
        if (!db) {
            put(dmabuf_why(p->dmabuf_errno), report, len);
            return LLRDMA_ERR_NOT_FOUND;
        }
        *mode = LLRDMA_GPU_DMABUF;
        return put("dmabuf", report, len);
    case LLRDMA_GPU_KNOB_PEERMEM:
        if (!pm) {
            put(no_pm, report, len);
            return LLRDMA_ERR_NOT_FOUND;
        }
        *mode = LLRDMA_GPU_PEERMEM;
        return put("peermem", report, len);
    default:
        break;
    }
    if (db) {
        *mode = LLRDMA_GPU_DMABUF;
        return put("dmabuf", report, len);
    }
    if (pm) {
        *mode = LLRDMA_GPU_PEERMEM;
        return put("peermem", report, len);
    }
    return put("none (" + dmabuf_why(p->dmabuf_errno) + "; " + no_pm + ")", report, len);
}
