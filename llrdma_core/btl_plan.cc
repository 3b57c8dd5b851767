// btl_plan.cc -- the LL/BW boundary and the signalling cadence of btl/llrdma (see
// llrdma_btl_plan.h and docs/btl-design.md).  Pure functions: the BTL calls them, the unit
// tests check them without a device.
#include "llrdma_btl_plan.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace
{

uint32_t granted_or(uint32_t requested, uint32_t granted)
{
    return granted == 0 ? requested : std::min(requested, granted);
}

} // namespace

extern "C" int llrdma_btl_plan_limits(const llrdma_profile_t *p, uint32_t hdr_bytes,
                                      const llrdma_btl_granted_t *g, llrdma_btl_limits_t *out)
{
    if (p == nullptr || out == nullptr)
        return LLRDMA_ERR_INVALID;
    llrdma_btl_limits_t l{};
    const llrdma_path_profile_t *paths[LLRDMA_NPATHS] = {&p->ll, &p->bw};
    for (int i = 0; i < LLRDMA_NPATHS; ++i) {
        const llrdma_path_profile_t &pp = *paths[i];
        if (pp.max_bytes == 0 || pp.sq_depth == 0)
            continue; // generic profile: no LL path
        if (pp.recv_buf_bytes <= hdr_bytes)
            return LLRDMA_ERR_INVALID;
        // Until RDMA put/get exists every fragment is a send into a pre-posted receive
        // buffer, so the buffer bounds the fragment (the generic profile's 64K max_send_size
        // is meant for RDMA and is clamped here).
        uint64_t frag = pp.recv_buf_bytes - hdr_bytes;
        if (i == LLRDMA_PATH_BW)
            frag = std::min<uint64_t>(frag, std::max<uint64_t>(pp.max_send_size, 1));
        l.frag_max[i] = static_cast<uint32_t>(frag);
        uint32_t gi = g ? g->inline_bytes[i] : pp.inline_bytes;
        // Granted 0 means "no inline" (not "unknown") once a QP was read back.
        l.inline_max[i] = g ? std::min(pp.inline_bytes, gi) : pp.inline_bytes;
        l.sq_depth[i] = granted_or(pp.sq_depth, g ? g->sq_depth[i] : 0);
    }
    if (l.frag_max[LLRDMA_PATH_BW] == 0)
        return LLRDMA_ERR_INVALID;
    // One eager fragment covers the whole BW fragment: no rendezvous below it.  The
    // generic profile keeps its classic eager limit (12K) when that is smaller.
    uint64_t bw = l.frag_max[LLRDMA_PATH_BW];
    l.eager_limit = p->generic ? std::min<uint64_t>(p->bw.eager_limit, bw) : bw;
    l.rndv_eager_limit = l.eager_limit;
    l.max_send_size = bw;
    *out = l;
    return LLRDMA_OK;
}

extern "C" int llrdma_btl_route(const uint32_t own[LLRDMA_NPATHS],
                                const uint32_t peer[LLRDMA_NPATHS], uint64_t bytes,
                                llrdma_btl_route_t *out)
{
    if (own == nullptr || peer == nullptr || out == nullptr)
        return LLRDMA_ERR_INVALID;
    out->path = llrdma_btl_path_for(peer, bytes);
    out->pieces = 1;
    out->piece = static_cast<uint32_t>(std::min<uint64_t>(bytes, UINT32_MAX));
    if (out->path >= 0)
        return LLRDMA_OK;
    const uint64_t fit = peer[LLRDMA_PATH_BW];
    if (fit == 0 || own[LLRDMA_PATH_BW] == 0 || bytes > own[LLRDMA_PATH_BW])
        return LLRDMA_OK; // path -1: ob1 never hands this side more than its own limit
    const uint64_t n = (bytes + fit - 1) / fit;
    uint64_t piece = (bytes + n - 1) / n;
    if (((piece + 7) & ~uint64_t{7}) <= fit)
        piece = (piece + 7) & ~uint64_t{7};
    out->path = LLRDMA_PATH_BW;
    out->pieces = static_cast<uint32_t>(n);
    out->piece = static_cast<uint32_t>(piece);
    return LLRDMA_OK;
}

extern "C" int llrdma_reasm_piece(llrdma_reasm_t *r, const void *data, uint64_t bytes, int last)
{
    if (r == nullptr || (bytes != 0 && data == nullptr))
        return LLRDMA_ERR_INVALID;
    if (r->broken)
        return LLRDMA_ERR_INVALID;
    if (bytes > r->max || r->len > r->max - bytes) {
        r->len = 0;
        r->broken = 1;
        return LLRDMA_ERR_INVALID;
    }
    if (r->len + bytes > r->cap) {
        // The peer's whole limit at once: split fragments tend to be its largest.
        void *grown = std::realloc(r->buf, r->max);
        if (grown == nullptr) {
            r->len = 0;
            r->broken = 1;
            return LLRDMA_ERR_INTERNAL;
        }
        r->buf = static_cast<unsigned char *>(grown);
        r->cap = r->max;
    }
    if (bytes != 0)
        std::memcpy(r->buf + r->len, data, bytes);
    r->len += bytes;
    return last ? 1 : 0;
}

extern "C" void llrdma_reasm_free(llrdma_reasm_t *r)
{
    if (r == nullptr)
        return;
    std::free(r->buf);
    r->buf = nullptr;
    r->len = r->cap = 0;
}

extern "C" void llrdma_sq_init(llrdma_sq_t *sq, uint32_t depth, uint32_t interval)
{
    sq->depth = depth;
    // An interval above the depth would let the queue fill with WRs nothing retires.
    sq->interval = std::max<uint32_t>(1, std::min(interval, depth));
    sq->posted = 0;
    sq->unsignalled = 0;
    sq->owed = 0;
    sq->room = nullptr;
    sq->fast = 0;
}
