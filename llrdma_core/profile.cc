// profile.cc -- derive the transport profile from the size hint.
//
// The hint splits traffic into two size classes, each with a fixed profile chosen once,
// before any connection exists (switching later means draining queues: see background.md).
// Every number below is a named constant so docs/profile.md can be generated from this file.
#include "llrdma_internal.hpp"

#include <algorithm>

namespace llrdma
{
namespace
{

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;

// Every pre-posted receive buffer carries the BTL's match header in front of the payload,
// and buffers are cache-line aligned so that payloads never share a line with a neighbour.
constexpr uint64_t kHeaderBytes = 64;
constexpr uint64_t kRecvAlign = 64;

// ---- hint == 0: one generic profile (bw covers [1, inf), ll is empty).  These mirror a
// classic verbs BTL's defaults so that "no hint" behaves like the transport users know.
constexpr uint32_t kGenSqDepth = 256;
// A receive buffer holds a whole fragment (send/receive fragments land in pre-posted
// buffers), so its payload equals kGenMaxSendSize.  The buffers allotted to each connection
// (its credits) follow the bandwidth path's per-connection budget below: 32 x 64K.
constexpr uint64_t kGenRecvPayload = 64 * kKiB; // recv buffer = this + header, aligned
constexpr uint32_t kGenInline = 64;
constexpr uint32_t kGenSignalInterval = 16;
constexpr uint32_t kGenCqModCount = 8;
constexpr uint32_t kGenCqModUsec = 16;
constexpr uint64_t kGenEagerLimit = 12 * kKiB;
constexpr uint64_t kGenMaxSendSize = 64 * kKiB;
constexpr uint64_t kGenRdmaPipeline = 1 * kMiB;
constexpr uint64_t kGenCollSegment = 64 * kKiB;

// ---- hint > 0, low-latency path [1, hint]: no moderation, busy polling, shallow SQ.
// Inline data saves the NIC a DMA read of the payload, but large inline WQEs cost more
// than they save; 256 B is where common NICs stop granting it cheaply.
constexpr uint64_t kLlInlineCap = 256;
// Largest low-latency fragment.  Hints above it still get the low-latency profile up to
// the hint, but messages are cut into 64K fragments: pre-posting hint-sized buffers would
// cost rq_depth x hint per connection (16 x 1G at the maximum hint).
constexpr uint64_t kLlFragMax = 64 * kKiB;
// Receive buffers allotted to each connection (the credits its peer gets; they sit in the
// path's shared receive queue) are bounded by ~1 MiB: a large hint gets fewer buffers, so a
// burst of small messages waits for credits sooner (background.md's failure case 1).
constexpr uint64_t kLlRecvBudget = 1 * kMiB;
constexpr uint32_t kLlRqMin = 16;
constexpr uint32_t kLlRqMax = 256;
// Shallow on purpose: bursts beyond it wait in the BTL's ordered pending list, not in the
// NIC, so a burst cannot put a small message behind hundreds of queued WQEs.
constexpr uint32_t kLlSqDepth = 64;
// Selective signalling: one signalled WQE per quarter queue keeps the SQ from filling with
// unreaped WQEs while still avoiding a completion per message.
constexpr uint32_t kSignalDivisor = 4;

// ---- hint > 0, bandwidth path (hint, inf): deep queues, moderation, big fragments.
constexpr uint32_t kBwSqDepth = 512;
// Receive buffers per connection: ~4 MiB of fragments, 4 to 64 of them.  Enough to keep a
// pipeline of bandwidth-path sends in flight; memory grows with connected peers only.
constexpr uint64_t kBwRecvBudget = 4 * kMiB;
constexpr uint32_t kBwRqMin = 4;
constexpr uint32_t kBwRqMax = 64;
constexpr uint64_t kBwFragMin = 64 * kKiB;
constexpr uint64_t kBwFragMax = 1 * kMiB;
constexpr uint32_t kBwInline = 0; // payloads here are too large for inline to help
constexpr uint32_t kBwSignalInterval = 64;
constexpr uint32_t kBwCqModCount = 16;
constexpr uint32_t kBwCqModUsec = 8;
constexpr uint64_t kBwRdmaPipelineMin = 1 * kMiB;
constexpr uint64_t kBwRdmaPipelineFrags = 4; // pipeline >= 4 fragments in flight
// RDMA (put/get) on the bandwidth QP: each work request moves at most kRdmaFrag, and up to
// kRdmaRdAtomic reads are outstanding per connection.  16 x 1 MiB in flight covers the
// bandwidth-delay product of a 200 Gb/s link with 100 us round trips (2.5 MB) six times over,
// and 16 is what common NICs grant (mlx5 max_qp_rd_atom); a device granting fewer queues the
// rest in its send queue.  ob1 cuts a rendezvous read into pieces of kRdmaFrag, so a large
// message keeps several reads in flight rather than one.
constexpr uint32_t kRdmaRdAtomic = 16;
constexpr uint64_t kRdmaFrag = 1 * kMiB;

// ---- collectives: the Allreduce ring's segment is the hint (each segment travels the
// low-latency path), capped at 1M.  Below 4K per-message overhead dominates, so small hints
// (like no hint) get 64K segments.  The planner (llrdma_core/allreduce/planner.cc) uses this value.
constexpr uint64_t kCollSegMinHint = 4 * kKiB;
constexpr uint64_t kCollSegMax = 1 * kMiB;

// ---- override validation (ibv_modify_cq takes 16-bit count and period).
constexpr uint32_t kOvrSqDepthMax = 32768;
constexpr uint32_t kOvrInlineMax = 4096;
constexpr uint32_t kOvrCqMax = 65535;

constexpr uint64_t round_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

constexpr uint64_t pow2_floor(uint64_t v)
{
    if (v == 0)
        return 0;
    uint64_t p = 1;
    while (p <= v / 2)
        p <<= 1;
    return p;
}

constexpr uint64_t pow2_ceil(uint64_t v)
{
    uint64_t p = 1;
    while (p < v)
        p <<= 1;
    return p;
}

template <typename T> constexpr T clamp(T v, T lo, T hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

constexpr uint32_t signal_for(uint32_t sq_depth)
{
    return sq_depth / kSignalDivisor > 0 ? sq_depth / kSignalDivisor : 1;
}

uint32_t bw_rq_for(uint64_t buf)
{
    return static_cast<uint32_t>(
        clamp<uint64_t>(pow2_floor(kBwRecvBudget / buf), kBwRqMin, kBwRqMax));
}

void derive_generic(llrdma_profile_t &p)
{
    p.generic = 1;
    // ll stays all zero: max_bytes 0 means there is no low-latency path.
    llrdma_path_profile_t &bw = p.bw;
    bw.min_bytes = 1;
    bw.max_bytes = UINT64_MAX;
    bw.sq_depth = kGenSqDepth;
    bw.recv_buf_bytes = static_cast<uint32_t>(round_up(kGenRecvPayload + kHeaderBytes, kRecvAlign));
    bw.rq_depth = bw_rq_for(bw.recv_buf_bytes);
    bw.inline_bytes = kGenInline;
    bw.signal_interval = kGenSignalInterval;
    bw.cq_mod_count = kGenCqModCount;
    bw.cq_mod_usec = kGenCqModUsec;
    bw.poll = LLRDMA_POLL_EVENT;
    bw.eager_limit = kGenEagerLimit;
    bw.max_send_size = kGenMaxSendSize;
    bw.rdma_pipeline_bytes = kGenRdmaPipeline;
    bw.rdma_rd_atomic = kRdmaRdAtomic;
    bw.rdma_frag_bytes = kRdmaFrag;
    p.coll_segment_bytes = kGenCollSegment;
}

void derive_hinted(uint64_t hint, llrdma_profile_t &p)
{
    p.generic = 0;

    // Low latency: every message up to the hint (or up to kLlFragMax) is one eager send into
    // one receive buffer.
    llrdma_path_profile_t &ll = p.ll;
    ll.min_bytes = 1;
    ll.max_bytes = hint;
    const uint64_t ll_frag = std::min(hint, kLlFragMax);
    uint64_t ll_buf = round_up(ll_frag + kHeaderBytes, kRecvAlign);
    ll.recv_buf_bytes = static_cast<uint32_t>(ll_buf);
    ll.inline_bytes = static_cast<uint32_t>(std::min(hint + kHeaderBytes, kLlInlineCap));
    ll.rq_depth = static_cast<uint32_t>(
        clamp<uint64_t>(pow2_floor(kLlRecvBudget / ll_buf), kLlRqMin, kLlRqMax));
    ll.sq_depth = kLlSqDepth;
    ll.signal_interval = signal_for(kLlSqDepth);
    ll.cq_mod_count = 0; // every completion reported at once
    ll.cq_mod_usec = 0;
    ll.poll = LLRDMA_POLL_BUSY;
    ll.eager_limit = ll_frag;
    ll.max_send_size = ll_frag;
    ll.rdma_pipeline_bytes = 0; // never RDMA on this path

    // Bandwidth: fragments of at least 2x the hint (a message just above the hint fits in
    // one fragment, softening the "cliff" right above it), a power of two in [64K, 1M].
    llrdma_path_profile_t &bw = p.bw;
    uint64_t frag = clamp<uint64_t>(pow2_ceil(hint * 2), kBwFragMin, kBwFragMax);
    bw.min_bytes = hint + 1;
    bw.max_bytes = UINT64_MAX;
    bw.sq_depth = kBwSqDepth;
    bw.recv_buf_bytes = static_cast<uint32_t>(round_up(frag + kHeaderBytes, kRecvAlign));
    bw.rq_depth = bw_rq_for(bw.recv_buf_bytes);
    bw.inline_bytes = kBwInline;
    bw.signal_interval = kBwSignalInterval;
    bw.cq_mod_count = kBwCqModCount;
    bw.cq_mod_usec = kBwCqModUsec;
    bw.poll = LLRDMA_POLL_EVENT;
    bw.eager_limit = frag;
    bw.max_send_size = frag;
    bw.rdma_pipeline_bytes = std::max(kBwRdmaPipelineMin, kBwRdmaPipelineFrags * frag);
    // The hint sizes only the send/receive path: RDMA depth and fragments are the same for
    // every hint, so a small hint cannot cap bandwidth.
    bw.rdma_rd_atomic = kRdmaRdAtomic;
    bw.rdma_frag_bytes = kRdmaFrag;

    p.coll_segment_bytes = llrdma_coll_segment_for_hint(hint);
}

// Overrides replace single derived values.  A depth override also re-derives the dependent
// signal interval (unless that is overridden too): an interval above the SQ depth would let
// the SQ fill with unsignalled WQEs that nothing ever reaps, and the QP would stall.
int apply_overrides(const llrdma_profile_overrides_t &o, llrdma_profile_t &p)
{
    if (o.ll_sq_depth > kOvrSqDepthMax || o.bw_sq_depth > kOvrSqDepthMax ||
        o.ll_inline_bytes > kOvrInlineMax || o.bw_cq_mod_count > kOvrCqMax ||
        o.bw_cq_mod_usec > kOvrCqMax || o.coll_segment_bytes > LLRDMA_HINT_MAX)
        return LLRDMA_ERR_INVALID;

    // In generic mode there is no ll path; ll overrides are validated but have nothing to
    // change (applying them would invent a path that does not exist).
    if (!p.generic) {
        if (o.ll_sq_depth != 0) {
            p.ll.sq_depth = o.ll_sq_depth;
            p.ll.signal_interval = std::min(p.ll.signal_interval, signal_for(o.ll_sq_depth));
        }
        if (o.ll_inline_bytes != 0)
            p.ll.inline_bytes = o.ll_inline_bytes;
    }
    if (o.bw_sq_depth != 0) {
        p.bw.sq_depth = o.bw_sq_depth;
        p.bw.signal_interval = std::min(p.bw.signal_interval, signal_for(o.bw_sq_depth));
    }
    if (o.bw_signal_interval != 0) {
        if (o.bw_signal_interval > p.bw.sq_depth)
            return LLRDMA_ERR_INVALID;
        p.bw.signal_interval = o.bw_signal_interval;
    }
    if (o.bw_cq_mod_count != 0)
        p.bw.cq_mod_count = o.bw_cq_mod_count;
    if (o.bw_cq_mod_usec != 0)
        p.bw.cq_mod_usec = o.bw_cq_mod_usec;
    if (o.coll_segment_bytes != 0)
        p.coll_segment_bytes = o.coll_segment_bytes;
    return LLRDMA_OK;
}

} // namespace
} // namespace llrdma

extern "C" int llrdma_profile_derive(uint64_t hint, const llrdma_profile_overrides_t *ovr,
                                     llrdma_profile_t *out)
{
    if (out == nullptr)
        return LLRDMA_ERR_INVALID;
    if (hint > LLRDMA_HINT_MAX)
        return LLRDMA_ERR_RANGE;
    llrdma_profile_t p{};
    p.hint = hint;
    if (hint == 0)
        llrdma::derive_generic(p);
    else
        llrdma::derive_hinted(hint, p);
    if (ovr != nullptr) {
        int rc = llrdma::apply_overrides(*ovr, p);
        if (rc != LLRDMA_OK)
            return rc; // *out untouched: never hand out a half-overridden profile
    }
    *out = p;
    return LLRDMA_OK;
}

extern "C" uint64_t llrdma_coll_segment_for_hint(uint64_t hint)
{
    return hint >= llrdma::kCollSegMinHint ? std::min(hint, llrdma::kCollSegMax)
                                           : llrdma::kGenCollSegment;
}
