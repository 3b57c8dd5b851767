/*
 * llrdma_btl_plan.h -- pure decisions of the btl/llrdma data path (C API of
 * llrdma_core/btl_plan.cc): where the low-latency/bandwidth boundary lies for ob1,
 * and when a send work request asks for a completion.  No Open MPI or verbs
 * header, so the rules are unit-tested on their own (tests/unit/test_btl_plan).
 */
#ifndef LLRDMA_BTL_PLAN_H
#define LLRDMA_BTL_PLAN_H

#include <stdint.h>

#include "llrdma_core.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { LLRDMA_PATH_LL = 0, LLRDMA_PATH_BW = 1, LLRDMA_NPATHS = 2 };

/* What ob1 and the post path see.  A "fragment" is one BTL descriptor: ob1's
 * header plus payload, without the BTL's own wire header. */
typedef struct {
    uint32_t frag_max[LLRDMA_NPATHS];   /* largest fragment per path; 0 = path unused */
    uint32_t inline_max[LLRDMA_NPATHS]; /* inline threshold (wire bytes) = min(requested,
                                           granted) */
    uint32_t sq_depth[LLRDMA_NPATHS];   /* send WRs the BTL keeps posted = min(req, granted) */
    uint64_t eager_limit;               /* btl_eager_limit: one fragment, no rendezvous */
    uint64_t rndv_eager_limit;          /* data carried by ob1's rendezvous header */
    uint64_t max_send_size;             /* fragments of ob1's send pipeline */
} llrdma_btl_limits_t;

/* Granted device values per path, read back after creating a QP. */
typedef struct {
    uint32_t inline_bytes[LLRDMA_NPATHS];
    uint32_t sq_depth[LLRDMA_NPATHS];
} llrdma_btl_granted_t;

/* Limits for a profile whose receive buffers carry `hdr_bytes` of BTL header.
 * The boundary: a fragment goes to the LL queue pair when it fits an LL
 * receive buffer (so every message <= hint is one LL work request); anything
 * larger goes to the BW queue pair, still as ONE eager fragment up to the BW
 * fragment size (>= 2x hint), so a message just above the hint costs one send
 * on an already connected QP, not a rendezvous.  LLRDMA_ERR_INVALID when a
 * receive buffer cannot even hold the header. */
int llrdma_btl_plan_limits(const llrdma_profile_t *p, uint32_t hdr_bytes,
                           const llrdma_btl_granted_t *granted, llrdma_btl_limits_t *out);

/* The path chooser: LLRDMA_PATH_LL or LLRDMA_PATH_BW for a fragment of
 * `bytes` under the largest fragment per path (0: path unused), -1 if none
 * carries it.  The BTL calls it with each peer's limits (the smaller of the
 * two sides'), for the route and for the pool a fragment comes from.
 * Inline: every send asks. */
static inline int llrdma_btl_path_for(const uint32_t frag_max[LLRDMA_NPATHS], uint64_t bytes)
{
    if (0 != frag_max[LLRDMA_PATH_LL] && bytes <= frag_max[LLRDMA_PATH_LL])
        return LLRDMA_PATH_LL;
    if (0 != frag_max[LLRDMA_PATH_BW] && bytes <= frag_max[LLRDMA_PATH_BW])
        return LLRDMA_PATH_BW;
    return -1;
}

/* ----------------------------------------------------- per-peer limits
 * ob1 reads one eager limit and one fragment size per module, and they stay
 * this rank's own (its profile's) for every peer.  A fragment larger than a
 * peer receives (a peer with a smaller hint: smaller BW buffers) is cut by
 * the BTL into pieces that fit, sent back to back on the BW queue pair and
 * joined by the receiver before ob1 sees it (docs/btl-design.md,
 * "Per-connection limits"). */
typedef struct {
    int path;        /* LLRDMA_PATH_*, or -1: larger than this side sends */
    uint32_t pieces; /* wire messages: 1, or more for a split fragment */
    uint32_t piece;  /* bytes of every piece but the last (the last: the rest) */
} llrdma_btl_route_t;

/* own: this side's largest fragment per path (what ob1 may hand it);
 * peer: the smaller of the two sides' per path (what the peer receives).
 * Pieces are of equal size (rounded up to 8 bytes while that still fits), so
 * no piece is much smaller than the rest. */
int llrdma_btl_route(const uint32_t own[LLRDMA_NPATHS], const uint32_t peer[LLRDMA_NPATHS],
                     uint64_t bytes, llrdma_btl_route_t *out);

/* The receiving end of split fragments, one per connection.  Pieces arrive
 * in order (one RC queue pair, posted back to back): each is appended, and
 * the last one completes the fragment. */
typedef struct {
    unsigned char *buf;
    uint64_t len; /* bytes joined so far (0: none open) */
    uint64_t cap; /* allocated */
    uint64_t max; /* the largest fragment the peer sends (its own limit) */
    int broken;   /* a piece was refused: the stream cannot be trusted again */
} llrdma_reasm_t;

/* Append one piece.  1: `last` completed the fragment (buf, len; call
 * llrdma_reasm_done once it was handed on); 0: more to come;
 * LLRDMA_ERR_INVALID: the pieces exceed `max` (a corrupt or foreign
 * stream), or an earlier piece was refused; LLRDMA_ERR_INTERNAL: out of
 * memory.  After an error nothing is kept and every later piece is
 * refused: the rest of a broken fragment must not pass as a whole one. */
int llrdma_reasm_piece(llrdma_reasm_t *r, const void *data, uint64_t bytes, int last);
static inline void llrdma_reasm_done(llrdma_reasm_t *r)
{
    r->len = 0;
}
/* Whether a piece is open: a whole fragment arriving now is out of order. */
static inline int llrdma_reasm_open(const llrdma_reasm_t *r)
{
    return 0 != r->len;
}
void llrdma_reasm_free(llrdma_reasm_t *r);

/* Selective signalling of one send queue.  WRs retire in order: a signalled
 * completion retires it and every unsignalled WR before it. */
typedef struct {
    uint32_t depth;       /* WRs that may be posted and not yet retired */
    uint32_t interval;    /* at least one signalled WR in every `interval` posts */
    uint32_t posted;      /* posted, not retired */
    uint32_t unsignalled; /* posted since the last signalled one */
    int owed;             /* one of those needs a completion */
    uint32_t *room;       /* entries left in the send CQ that this queue shares with
                             others (every posted WR may come back with a completion,
                             flushed if not otherwise); NULL: not shared */
    uint32_t fast;        /* posts the fast lane may still make (llrdma_sq_fast_budget) */
} llrdma_sq_t;

/* Below this much CQ room every WR is signalled: a WR that is not pins its
 * room until a later signalled one on its queue completes, so room that ran
 * out with nothing signalled outstanding would never come back. */
#define LLRDMA_SQ_ROOM_RESERVE 64u

void llrdma_sq_init(llrdma_sq_t *sq, uint32_t depth, uint32_t interval);

/* The per-message accounting is inline here, not in libllrdma: one post costs
 * a few instructions, not a call across libraries (docs/btl-design.md,
 * "Threads", cost). */
static inline uint32_t llrdma_sq_free_slots(const llrdma_sq_t *sq)
{
    uint32_t own = sq->posted >= sq->depth ? 0 : sq->depth - sq->posted;
    return NULL != sq->room && *sq->room < own ? *sq->room : own;
}

/* Account one post and say whether it must be signalled (1) or not (0).
 * needs_completion: the WR's buffer or callback waits for it (not inline);
 * more_queued: another WR will be posted right after this one.  The last WR
 * of a burst is signalled when it or any unsignalled WR before it needs a
 * completion, so no callback waits for traffic that may never come;
 * otherwise the cadence decides. */
static inline int llrdma_sq_post(llrdma_sq_t *sq, int needs_completion, int more_queued)
{
    int owed = sq->owed || needs_completion;
    sq->fast = 0; /* the budget was counted for posts of the fast lane alone */
    int sig = sq->unsignalled + 1 >= sq->interval || (owed && !more_queued);
    ++sq->posted;
    if (NULL != sq->room) {
        --*sq->room;
        sig = sig || *sq->room < LLRDMA_SQ_ROOM_RESERVE;
    }
    sq->unsignalled = sig ? 0 : sq->unsignalled + 1;
    sq->owed = sig ? 0 : owed;
    return sig;
}

/* Posted WRs from which a send no longer goes alone (btl_llrdma_sq_batch):
 * it waits for the queue's next completion, which posts what waits in one
 * chain, small messages packed.  Half the queue, where a signalled WR is
 * then surely among the posted ones (at least one in every `interval`), so
 * that completion comes; else the whole queue.  Why: a burst beyond half
 * the queue is one the wire cannot take at once, and batching it costs
 * the NIC (Soft-RoCE: the kernel) a work request and a doorbell per batch
 * instead of per message (docs/btl-design.md, "Batching a busy queue"). */
static inline uint32_t llrdma_sq_batch_at(const llrdma_sq_t *sq)
{
    const uint32_t half = sq->depth / 2;
    return half >= sq->interval ? half : sq->depth;
}

/* The fast lane of small sends (btl/llrdma's sendi): right after a post,
 * how many more unsignalled posts may follow without deciding anything
 * per post: the least of the queue's own slots below `at` (the posted
 * count from which sends wait: llrdma_sq_batch_at, or the depth with
 * batching off), `credits` (what the caller may spend: credits above its
 * pack floor) and the posts the signalling cadence leaves unsignalled.
 * 0 when a WR before is owed a signal, or no CQ room is shared (the lane
 * checks that room per post).  Stored in sq->fast.  It stays a lower
 * bound: completions and returned credits only add, and every post by
 * llrdma_sq_post (every other kind of send) zeroes it; what else can take
 * the lane away (a queued message, a connection leaving ESTABLISHED) is
 * checked or zeroed by the caller.
 * A post of the lane, llrdma_sq_post_fast, leaves the queue exactly as
 * llrdma_sq_post(sq, 0, 0) would, which returned 0 (tests/unit). */
static inline uint32_t llrdma_sq_fast_budget(const llrdma_sq_t *sq, uint32_t credits, uint32_t at)
{
    uint32_t n, own;
    if (sq->owed || NULL == sq->room || sq->unsignalled + 1 >= sq->interval) {
        return 0;
    }
    n = sq->interval - 1 - sq->unsignalled;
    at = at < sq->depth ? at : sq->depth;
    own = sq->posted >= at ? 0 : at - sq->posted;
    n = own < n ? own : n;
    return credits < n ? credits : n;
}

/* Whether the fast lane may post now: budget left, and CQ room that stays
 * above the reserve after the post (else the post must be signalled). */
static inline int llrdma_sq_fast_ok(const llrdma_sq_t *sq)
{
    return 0 != sq->fast && *sq->room > LLRDMA_SQ_ROOM_RESERVE;
}

/* One post of the fast lane (llrdma_sq_fast_ok held): unsignalled. */
static inline void llrdma_sq_post_fast(llrdma_sq_t *sq)
{
    --sq->fast;
    ++sq->posted;
    --*sq->room;
    ++sq->unsignalled;
}

/* `n` WRs retired (a signalled completion covering them). */
static inline void llrdma_sq_retire(llrdma_sq_t *sq, uint32_t n)
{
    const uint32_t k = n > sq->posted ? sq->posted : n;
    sq->posted -= k;
    if (NULL != sq->room) {
        *sq->room += k;
    }
}

/* ------------------------------------------------------------------ credits
 * Flow control of one connection (llrdma_core/flow.cc; docs/btl-design.md).
 * Each side posts an allotment of receive buffers for the connection before
 * it is set up and tells the peer (connection private data): that many sends
 * may be in flight.  The receiver counts the peer's sends it has consumed and
 * reposted, and writes the cumulative count back into the sender's memory
 * (an RDMA write, which consumes no receive buffer) once `threshold` have
 * accumulated.  A sender never posts a send without a credit, so a receive
 * queue cannot run dry and RNR is never the flow control. */
typedef struct {
    uint32_t granted;   /* the peer's allotment for us */
    uint32_t threshold; /* reposted buffers that trigger a credit write */
    uint64_t sent;      /* sends posted that took a peer buffer */
    uint64_t seen;      /* the peer's latest valid cumulative return */
    uint64_t consumed;  /* the peer's sends we received and reposted */
    uint64_t returned;  /* the cumulative count last written to the peer */
    uint32_t piggy;     /* 1: returns may ride in our sends' headers */
} llrdma_credit_t;

/* Credits also return in the headers of reverse traffic, as UCX's RC
 * transport and openib return them: a send to the peer carries the low 16
 * bits of `consumed` when some are unreturned, so a pair that talks both
 * ways needs no credit writes at all.  The peer rebuilds the full count from
 * what it has seen, which is exact while fewer than 65536 of its sends can
 * be unreturned, that is, while our allotment for it is below that
 * (llrdma_credit_init sets `piggy`). */
#define LLRDMA_CREDIT_PIGGY_ALLOT_MAX 65535u

/* The count a header posted now should carry, or 0 for none. */
static inline uint64_t llrdma_credit_stamp(const llrdma_credit_t *c)
{
    return c->piggy && c->consumed > c->returned ? c->consumed : 0;
}

/* A send carrying `stamp` (llrdma_credit_stamp) was posted: those returns
 * are on their way, and no write is owed for them. */
static inline void llrdma_credit_stamped(llrdma_credit_t *c, uint64_t stamp)
{
    if (stamp > c->returned && stamp <= c->consumed) {
        c->returned = stamp;
    }
}

/* A header of the peer carried `low`, the low 16 bits of its cumulative
 * return count: rebuilt from `seen`, taken when it is one that can be true
 * (more than seen, no more than was sent). */
static inline void llrdma_credit_piggyback(llrdma_credit_t *c, uint16_t low)
{
    uint64_t full = c->seen + (uint16_t)(low - (uint16_t)c->seen);
    if (full > c->seen && full <= c->sent) {
        c->seen = full;
    }
}

/* my_allotment: buffers this side posted for the peer (sets the threshold). */
void llrdma_credit_init(llrdma_credit_t *c, uint32_t peer_granted, uint32_t my_allotment);
/* The same once the connection's peer parameters arrive, on a counter that
 * may already have counted receives: on the active side the peer's first
 * sends can be received before its parameters (in the ESTABLISHED event)
 * are read.  Those stay consumed and owed; forgetting them would keep their
 * credits from the peer for good. */
void llrdma_credit_connect(llrdma_credit_t *c, uint32_t peer_granted, uint32_t my_allotment);
/* Sends that may be posted now, given the cumulative count the peer last
 * wrote.  A value that cannot be true (decreasing, or more than was sent: a
 * torn read) is ignored. */
static inline uint32_t llrdma_credit_avail(llrdma_credit_t *c, uint64_t peer_returned)
{
    uint64_t in_flight;
    /* The peer returns at most what we sent, and counts only up. */
    if (peer_returned > c->seen && peer_returned <= c->sent) {
        c->seen = peer_returned;
    }
    in_flight = c->sent - c->seen;
    return in_flight >= c->granted ? 0 : (uint32_t)(c->granted - in_flight);
}

static inline void llrdma_credit_take(llrdma_credit_t *c)
{
    ++c->sent;
}

/* One of our buffers taken by the peer was reposted.  Returns 1 when the
 * count should be written back now. */
static inline int llrdma_credit_consume_n(llrdma_credit_t *c, uint32_t n);
static inline int llrdma_credit_consume(llrdma_credit_t *c)
{
    return llrdma_credit_consume_n(c, 1);
}
/* n of them at once (a batch of receives from one connection): 1 when the
 * count should be written back now, as the last of n single calls says. */
static inline int llrdma_credit_consume_n(llrdma_credit_t *c, uint32_t n)
{
    c->consumed += n;
    return c->consumed - c->returned >= c->threshold ? 1 : 0;
}
/* 1 when consumed buffers are waiting to be returned at all (a write that
 * could not be posted stays owed). */
int llrdma_credit_owed(const llrdma_credit_t *c);
/* The count to write now, and the bookkeeping that it was posted. */
uint64_t llrdma_credit_return(llrdma_credit_t *c);

/* ------------------------------------------------------- receive allotments
 * A path's shared receive queue holds the buffers every connection's sends
 * land in (docs/btl-design.md, "Receive side").  Two modes:
 *
 * - guaranteed (rnr_retry below 7): each connection is allotted buffers of
 *   its own; the window its peer gets is what was posted for it, so a
 *   receive queue never runs dry.  Past mem_max new peers get `min`.
 * - overcommitted (rnr_retry 7, the default): every connection gets the
 *   whole window `want`; buffers back the windows one for one up to half of
 *   `budget`, then stop growing with peers: the windows share them and a
 *   send that finds the queue empty waits in the NIC (RNR NAK, retried for
 *   ever) until a buffer is reposted, as UCX's RC transport does.  The SRQ
 *   limit is armed while windows outnumber buffers; its event grows the
 *   pool up to `budget`.  Memory is bounded by `budget` whatever the number
 *   of peers.
 *
 * Buffers stay posted when a connection closes; its allotment becomes free
 * and is reused before new buffers are posted. */
typedef struct {
    uint32_t cap;       /* SRQ capacity granted by the device */
    uint32_t posted;    /* buffers posted (or owned by the SRQ) */
    uint32_t reserved;  /* windows of live connections, summed */
    uint32_t want;      /* the window per connection (llrdma_rq_window) */
    uint32_t min;       /* the least a connection is given (guaranteed mode) */
    uint32_t budget;    /* most buffers ever posted: min(cap, mem_max / buf_bytes), >= want */
    uint32_t grows;     /* SRQ-limit growths so far */
    int overcommit;     /* 1: windows may outnumber buffers (RNR retried for ever) */
    uint64_t buf_bytes; /* one buffer */
    uint64_t mem_max;   /* posted bytes beyond which allotments shrink (guaranteed) or
                           buffers stop being added (overcommitted) */
} llrdma_rq_pool_t;

#define LLRDMA_RQ_MIN_ALLOT 4u
/* An overcommitted pool's window is what one peer may send while this process
 * does not progress: a burst then waits in posted buffers, not in the sender
 * behind credits that only the receiver's next progress returns.  Posted
 * buffers bound the memory and RNR holds what exceeds them, so the window is
 * sized by the burst (up to 512 messages, UCX's fc_wnd_size, and 8 MiB of
 * buffers), never above the memory budget. */
#define LLRDMA_RQ_BURST_MSGS 512u
#define LLRDMA_RQ_BURST_BYTES (8ull << 20)

/* The window a connection gets: the profile's in the guaranteed mode, in an
 * overcommitted pool the burst window where that is larger (at most half of
 * `mem_max / buf_bytes` and of the SRQ's `cap`). */
uint32_t llrdma_rq_window(uint32_t profile_window, uint64_t buf_bytes, uint64_t mem_max,
                          uint32_t cap, int overcommit);
void llrdma_rq_pool_init(llrdma_rq_pool_t *p, uint32_t cap, uint32_t want, uint64_t buf_bytes,
                         uint64_t mem_max, int overcommit);
/* Allot buffers to one new connection: *allot the credits it gets, *post how
 * many buffers must be posted first.  LLRDMA_ERR_RANGE when not even `min`
 * fit the queue (the caller rejects the connection and says why). */
int llrdma_rq_allot(llrdma_rq_pool_t *p, uint32_t *allot, uint32_t *post);
/* `n` of those buffers could not be posted after all; the caller then
 * releases the whole allotment. */
void llrdma_rq_unpost(llrdma_rq_pool_t *p, uint32_t n);
void llrdma_rq_release(llrdma_rq_pool_t *p, uint32_t allot);
/* The SRQ limit to arm now (ibv_modify_srq IBV_SRQ_LIMIT), 0 for none. */
uint32_t llrdma_rq_limit(const llrdma_rq_pool_t *p);
/* The SRQ limit was reached: buffers to post now (counted as posted), 0 when
 * the budget is spent. */
uint32_t llrdma_rq_grow(llrdma_rq_pool_t *p);

/* ----------------------------------------------------- connection set-up
 * One queue pair per peer and path.  When both processes connect at once the
 * attempt of the process with the smaller name wins (as btl/tcp's and
 * openib's tie-breaks): the other side accepts it and drops its own. */
typedef enum {
    LLRDMA_CONN_NONE = 0,        /* no connection for this path */
    LLRDMA_CONN_ACTIVE_PENDING,  /* our attempt, not yet established */
    LLRDMA_CONN_PASSIVE_PENDING, /* an accepted attempt of the peer, not yet established */
    LLRDMA_CONN_UP,              /* established */
} llrdma_conn_have_t;

typedef enum {
    LLRDMA_CM_ACCEPT = 0,
    LLRDMA_CM_ACCEPT_SUPERSEDE, /* accept; our own pending attempt is dropped */
    LLRDMA_CM_REJECT_TIE,       /* ours wins the tie-break */
    LLRDMA_CM_REJECT_DUP,       /* we already have this path */
    LLRDMA_CM_ACCEPT_REPLACE,   /* accept; the peer's earlier attempt we were accepting is
                                   stale (it has one attempt at a time) and is dropped */
} llrdma_cm_request_t;

/* Names are (jobid << 32 | vpid). */
llrdma_cm_request_t llrdma_cm_on_request(llrdma_conn_have_t have, uint64_t my_name,
                                         uint64_t peer_name);

/* Why an active attempt ended without a connection. */
typedef enum {
    LLRDMA_CM_ERR_TIE = 0,  /* peer rejected: its attempt wins */
    LLRDMA_CM_ERR_DUP,      /* peer rejected: it already has the path */
    LLRDMA_CM_ERR_NORES,    /* peer rejected: no receive buffers for us */
    LLRDMA_CM_ERR_REJECTED, /* rejected without an llrdma reason (no listener yet, ...) */
    LLRDMA_CM_ERR_TIMEOUT,  /* unreachable / connect error / no answer */
    LLRDMA_CM_ERR_RESOLVE,  /* address or route resolution */
    LLRDMA_CM_ERR_LOCAL,    /* a local call failed (QP, memory) */
} llrdma_cm_err_t;

typedef enum {
    LLRDMA_CM_DROP = 0, /* drop this attempt quietly: the peer's connection will serve */
    LLRDMA_CM_RETRY,    /* try again after llrdma_cm_retry_delay_ms */
    LLRDMA_CM_FAIL,     /* report the peer unreachable */
} llrdma_cm_next_t;

llrdma_cm_next_t llrdma_cm_on_active_error(llrdma_cm_err_t err, uint64_t elapsed_ms,
                                           uint64_t timeout_ms);
/* Back-off before attempt number `attempt` (1 = first retry). */
uint32_t llrdma_cm_retry_delay_ms(uint32_t attempt);
/* How long a side whose attempt was rejected (tie-break lost, or the peer
 * still held a connection) waits for the peer's own attempt before trying
 * again itself, for its `waits`-th such wait (1 = first): 1, 2, 4, ... s, at
 * most 16 s.  Bounded because the peer's attempt can die on the way (a lost
 * CM message) and leave both sides waiting. */
uint32_t llrdma_cm_peer_wait_ms(uint32_t waits);

/* ------------------------------------------------------- GPU registration
 * How btl/llrdma registers GPU memory (llrdma_core/gpu_rdma.cc;
 * docs/btl-design.md "GPU memory"): dma-buf first, then peermem, else none
 * (callers stage through host memory).  btl_llrdma_gpu_rdma forces one;
 * forcing a mode the device does not have is an error, not a downgrade. */
typedef enum {
    LLRDMA_GPU_KNOB_AUTO = 0,
    LLRDMA_GPU_KNOB_DMABUF,
    LLRDMA_GPU_KNOB_PEERMEM,
    LLRDMA_GPU_KNOB_OFF,
} llrdma_gpu_knob_t;

typedef enum {
    LLRDMA_GPU_NONE = 0,
    LLRDMA_GPU_DMABUF,
    LLRDMA_GPU_PEERMEM,
} llrdma_gpu_mode_t;

/* What a device was found to support.  dmabuf_errno: errno of the probe
 * ibv_reg_dmabuf_mr(pd, 0, 0, 0, fd -1, 0) as NCCL and UCX do it (EBADF: the
 * provider has dma-buf MRs; EOPNOTSUPP / EPROTONOSUPPORT: it has none; 0:
 * the probe unexpectedly registered; -1: not probed, rdma-core without the
 * call).  peermem: nvidia_peermem / nv_peer_mem is loaded. */
typedef struct {
    int have_device;
    int dmabuf_errno;
    int peermem;
} llrdma_gpu_probe_t;

/* "auto", "dmabuf", "peermem", "off"; LLRDMA_ERR_INVALID for anything else. */
int llrdma_gpu_knob_parse(const char *text, llrdma_gpu_knob_t *out);
/* The mode, and in `report` what the dump and llrdma-check show:
 * "dmabuf", "peermem" or "none (why)".  A forced mode that is unavailable:
 * LLRDMA_ERR_NOT_FOUND, mode NONE and `report` says why. */
int llrdma_gpu_rdma_choose(llrdma_gpu_knob_t knob, const llrdma_gpu_probe_t *p,
                           llrdma_gpu_mode_t *mode, char *report, size_t len);

#ifdef __cplusplus
}
#endif
#endif
