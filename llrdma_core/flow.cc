// flow.cc -- credits, receive allotments and the connection tie-break of btl/llrdma (see
// llrdma_btl_plan.h and docs/btl-design.md).  Pure state machines: the BTL drives them from
// verbs events, the unit tests drive every transition without a device.
#include "llrdma_btl_plan.h"

#include <algorithm>

// ------------------------------------------------------------------ credits

extern "C" void llrdma_credit_init(llrdma_credit_t *c, uint32_t peer_granted, uint32_t my_allotment)
{
    *c = llrdma_credit_t{};
    c->granted = peer_granted;
    // A quarter of the allotment: the sender never waits for a whole window to drain, and
    // the receiver writes once per several messages, not per message.
    c->threshold = std::max<uint32_t>(1, my_allotment / 4);
    c->piggy = my_allotment <= LLRDMA_CREDIT_PIGGY_ALLOT_MAX ? 1 : 0;
}

extern "C" void llrdma_credit_connect(llrdma_credit_t *c, uint32_t peer_granted,
                                      uint32_t my_allotment)
{
    const uint64_t consumed = c->consumed, returned = c->returned;
    llrdma_credit_init(c, peer_granted, my_allotment);
    c->consumed = consumed;
    c->returned = returned;
}

extern "C" int llrdma_credit_owed(const llrdma_credit_t *c)
{
    return c->consumed > c->returned ? 1 : 0;
}

extern "C" uint64_t llrdma_credit_return(llrdma_credit_t *c)
{
    c->returned = c->consumed;
    return c->returned;
}

// ------------------------------------------------------- receive allotments

extern "C" void llrdma_rq_pool_init(llrdma_rq_pool_t *p, uint32_t cap, uint32_t want,
                                    uint64_t buf_bytes, uint64_t mem_max, int overcommit)
{
    *p = llrdma_rq_pool_t{};
    p->cap = cap;
    p->min = std::min(LLRDMA_RQ_MIN_ALLOT, std::max<uint32_t>(want, 1));
    p->want = std::max(want, p->min);
    p->buf_bytes = buf_bytes;
    p->mem_max = mem_max;
    p->overcommit = overcommit ? 1 : 0;
    // The most buffers the budget pays for, never less than one window: a budget below
    // one window would leave even the first peer unable to send its window at once.
    uint64_t by_mem = buf_bytes > 0 ? mem_max / buf_bytes : cap;
    p->budget = static_cast<uint32_t>(std::min<uint64_t>(cap, std::max<uint64_t>(by_mem, p->want)));
}

extern "C" uint32_t llrdma_rq_window(uint32_t profile_window, uint64_t buf_bytes, uint64_t mem_max,
                                     uint32_t cap, int overcommit)
{
    if (!overcommit || 0 == buf_bytes)
        return profile_window;
    // Half the budget at most: that much is posted before any growth, so a burst of the
    // window from one peer never waits in RNR on an otherwise idle receiver.
    const uint64_t burst =
        std::min<uint64_t>({LLRDMA_RQ_BURST_MSGS, LLRDMA_RQ_BURST_BYTES / buf_bytes,
                            mem_max / buf_bytes / 2, cap / 2});
    return std::max<uint32_t>(profile_window, static_cast<uint32_t>(burst));
}

// Overcommitted pool: every connection gets the whole window; buffers back the windows
// one for one up to half the budget (a few peers never meet RNR), beyond that the windows
// share what is posted, and SRQ-limit events grow it up to the budget.
static int allot_overcommit(llrdma_rq_pool_t *p, uint32_t *allot, uint32_t *post)
{
    if (p->budget < p->min)
        return LLRDMA_ERR_RANGE;
    const uint32_t grant = p->want;
    const uint32_t backed = std::max(p->budget / 2, std::min(p->want, p->budget));
    const uint64_t wish = static_cast<uint64_t>(p->reserved) + grant;
    const uint32_t target = static_cast<uint32_t>(std::min<uint64_t>(wish, backed));
    const uint32_t need = target > p->posted ? target - p->posted : 0;
    p->posted += need;
    p->reserved += grant;
    *allot = grant;
    *post = need;
    return LLRDMA_OK;
}

extern "C" int llrdma_rq_allot(llrdma_rq_pool_t *p, uint32_t *allot, uint32_t *post)
{
    if (p->overcommit)
        return allot_overcommit(p, allot, post);
    uint32_t free_bufs = p->posted > p->reserved ? p->posted - p->reserved : 0;
    uint32_t room = p->cap - p->posted; // buffers the SRQ can still take
    uint32_t grant = p->want;
    // Growing past the memory budget: later peers get the minimum.
    if (grant > free_bufs) {
        uint64_t after = static_cast<uint64_t>(p->posted + (grant - free_bufs)) * p->buf_bytes;
        if (after > p->mem_max)
            grant = std::max(p->min, std::min(grant, free_bufs));
    }
    if (grant > free_bufs + room)
        grant = free_bufs + room;
    if (grant < p->min)
        return LLRDMA_ERR_RANGE;
    uint32_t need = grant > free_bufs ? grant - free_bufs : 0;
    p->posted += need;
    p->reserved += grant;
    *allot = grant;
    *post = need;
    return LLRDMA_OK;
}

extern "C" void llrdma_rq_unpost(llrdma_rq_pool_t *p, uint32_t n)
{
    p->posted -= std::min(n, p->posted);
}

extern "C" void llrdma_rq_release(llrdma_rq_pool_t *p, uint32_t allot)
{
    p->reserved -= std::min(allot, p->reserved);
}

extern "C" uint32_t llrdma_rq_limit(const llrdma_rq_pool_t *p)
{
    // Only a pool whose windows outnumber its buffers can run dry, and only one below
    // the budget can do anything about it.
    if (!p->overcommit || p->reserved <= p->posted || p->posted >= p->budget)
        return 0;
    return std::max<uint32_t>(1, p->posted / 8);
}

extern "C" uint32_t llrdma_rq_grow(llrdma_rq_pool_t *p)
{
    if (!p->overcommit || p->posted >= p->budget)
        return 0;
    // A quarter more each time (at least a window): a burst that drained the queue once
    // is likely to come again, but memory stays near what the traffic used.
    const uint32_t step = std::max(p->want, p->posted / 4);
    const uint32_t n = std::min(step, p->budget - p->posted);
    p->posted += n;
    ++p->grows;
    return n;
}

// ----------------------------------------------------- connection set-up

extern "C" llrdma_cm_request_t llrdma_cm_on_request(llrdma_conn_have_t have, uint64_t my_name,
                                                    uint64_t peer_name)
{
    switch (have) {
    case LLRDMA_CONN_NONE:
        return LLRDMA_CM_ACCEPT;
    case LLRDMA_CONN_ACTIVE_PENDING:
        // Both sides apply the same rule, so exactly one attempt survives.
        return my_name < peer_name ? LLRDMA_CM_REJECT_TIE : LLRDMA_CM_ACCEPT_SUPERSEDE;
    case LLRDMA_CONN_PASSIVE_PENDING:
        // The peer runs one attempt at a time: a new request means it gave up the one we
        // are accepting (our accept or its RTU was lost or late).  Refusing it would leave
        // both sides waiting until our stale attempt times out in the CM (minutes).
        return LLRDMA_CM_ACCEPT_REPLACE;
    case LLRDMA_CONN_UP:
    default:
        return LLRDMA_CM_REJECT_DUP;
    }
}

extern "C" llrdma_cm_next_t llrdma_cm_on_active_error(llrdma_cm_err_t err, uint64_t elapsed_ms,
                                                      uint64_t timeout_ms)
{
    switch (err) {
    case LLRDMA_CM_ERR_TIE:
    case LLRDMA_CM_ERR_DUP:
        return LLRDMA_CM_DROP;
    case LLRDMA_CM_ERR_NORES:
    case LLRDMA_CM_ERR_LOCAL:
        return LLRDMA_CM_FAIL; // retrying cannot change either
    case LLRDMA_CM_ERR_REJECTED:
    case LLRDMA_CM_ERR_TIMEOUT:
    case LLRDMA_CM_ERR_RESOLVE:
    default:
        // A peer busy outside MPI answers late or not at all for a while; a peer that is
        // gone never does.  Only time tells them apart.
        return elapsed_ms < timeout_ms ? LLRDMA_CM_RETRY : LLRDMA_CM_FAIL;
    }
}

extern "C" uint32_t llrdma_cm_peer_wait_ms(uint32_t waits)
{
    uint32_t shift = std::min<uint32_t>(waits > 0 ? waits - 1 : 0, 4);
    return 1000u << shift;
}

extern "C" uint32_t llrdma_cm_retry_delay_ms(uint32_t attempt)
{
    // 10, 20, 40, ... ms, at most 1 s: quick when the peer was just slow to listen.
    uint32_t shift = std::min<uint32_t>(attempt > 0 ? attempt - 1 : 0, 7);
    return std::min<uint32_t>(10u << shift, 1000);
}
