/*
 * btl/llrdma endpoints (one per peer process and module) and connections
 * (one RC queue pair each, set up over librdmacm on first use).
 *
 * An endpoint has at most one connection per path (LL, BW), used in both
 * directions.  When both processes connect at the same moment the attempt of
 * the process with the smaller name wins (llrdma_cm_on_request in the core);
 * the loser's attempt is rejected and dropped.  Every send takes a credit: a
 * receive buffer the peer allotted to this connection (llrdma_credit_t).
 */
#ifndef MCA_BTL_LLRDMA_ENDPOINT_H
#define MCA_BTL_LLRDMA_ENDPOINT_H

#include "opal_config.h"

#include <time.h>

#include "opal/class/opal_list.h"
#include "opal/util/proc.h"

#include "btl_llrdma_frag.h"
#include "btl_llrdma_hdr.h"
#include "btl_llrdma_verbs.h"
#include "llrdma_btl_plan.h"

struct mca_btl_llrdma_module_t;

typedef enum {
    LLRDMA_CONN_RESOLVING, /* active: address, then route */
    LLRDMA_CONN_CONNECTING,
    LLRDMA_CONN_ESTABLISHED,
    LLRDMA_CONN_CLOSED, /* disconnected or failed: nothing more is posted */
} mca_btl_llrdma_conn_state_t;

struct mca_btl_llrdma_conn_t;
struct mca_btl_llrdma_rdma_op_t;

/* The largest message sendi builds on the stack for an inline post
 * (devices grant a few hundred bytes inline; larger messages go through a
 * fragment). */
#define LLRDMA_SENDI_STACK 1024

/* One posted send WR; wr_id points here, so a completion finds its QP. */
typedef struct mca_btl_llrdma_wr_t {
    struct mca_btl_llrdma_conn_t *conn;
    mca_btl_llrdma_frag_t *frag;           /* NULL: nothing waits for this WR (inline) */
    struct mca_btl_llrdma_rdma_op_t *rdma; /* a put or get waiting for this WR */
    int send;                              /* a SEND: it takes a receive buffer (may meet RNR) */
} mca_btl_llrdma_wr_t;

typedef struct mca_btl_llrdma_conn_t {
    opal_list_item_t super; /* in module->conns */
    struct mca_btl_base_endpoint_t *endpoint;
    struct rdma_cm_id *id;
    struct ibv_qp *qp;
    int path;
    int active;     /* this process initiated it */
    int superseded; /* an active attempt that lost the tie-break: dropped at its next event */
    mca_btl_llrdma_conn_state_t state;
    llrdma_sq_t sq;
    uint32_t inline_max;       /* wire bytes sent inline on this QP */
    uint32_t sendi_max;        /* of those, what sendi builds on its stack (LLRDMA_SENDI_STACK) */
    mca_btl_llrdma_wr_t *ring; /* sq.depth entries, in post order */
    /* The inline SEND of sendi, prepared once (conn_construct): a post
     * patches its address, length and flags (no work request built and
     * zeroed per message). */
    struct ibv_send_wr inl_wr;
    struct ibv_sge inl_sge;
    /* The QP's work-request handle when it was created for ibv_wr_* (the
     * module's wr_api): sendi then posts through it; NULL: inl_wr. */
    struct ibv_qp_ex *qpx;
    uint32_t ring_head, ring_tail;
    /* flow control */
    llrdma_credit_t credit;
    uint32_t allot;       /* receive buffers this side allotted to the connection */
    uint64_t *credit_buf; /* [0] the peer writes returned credits here; [1] our source */
    struct ibv_mr *credit_mr;
    uint64_t peer_credit_addr;
    uint32_t peer_credit_rkey;
    int credit_owed;      /* a credit write is due but could not be posted yet */
    uint64_t stall_since; /* ms: sends wait for credits since then (0: not waiting) */
    int stall_reported;
    /* RDMA reads this QP may have outstanding / answers at once (granted) */
    uint32_t rd_atomic, dest_rd_atomic;
    /* completion watchdog (btl_llrdma_stuck.c) */
    uint64_t sends_done;          /* send completions polled */
    uint64_t wd_seen;             /* sends_done at the watchdog's last look */
    uint64_t wd_since;            /* ms: work waited without a completion since then (0: none) */
    uint64_t wd_limit_ms;         /* 0: not watched (btl_llrdma_completion_timeout -1) */
    uint64_t wd_nudge_ms;         /* when one more WR is posted to restart it */
    int wd_nudged;                /* since wd_since */
    uint8_t qp_timeout, qp_retry; /* as the QP went to RTS, for the report */
    uint8_t qp_rnr_retry;         /* 7: a SEND the peer has no buffer for waits for ever */
    int last_wqe;                 /* IBV_EVENT_QP_LAST_WQE_REACHED seen (in ERR, SRQ done) */
    /* A split fragment being joined (pieces of a peer with larger buffers);
     * touched by the progress token's holder only, unlocked. */
    llrdma_reasm_t reasm;
} mca_btl_llrdma_conn_t;
OBJ_CLASS_DECLARATION(mca_btl_llrdma_conn_t);

typedef enum {
    LLRDMA_EP_IDLE,       /* no connection attempt of ours yet */
    LLRDMA_EP_CONNECTING, /* our attempt is under way */
    LLRDMA_EP_READY,      /* every path has a connection to send on */
    LLRDMA_EP_FAILED,     /* an error was reported; sends are refused */
} mca_btl_llrdma_ep_state_t;

typedef struct mca_btl_base_endpoint_t {
    opal_list_item_t super; /* in module->endpoints */
    struct mca_btl_llrdma_module_t *module;
    opal_proc_t *proc;
    mca_btl_llrdma_addr_t addr; /* the peer module we talk to */
    mca_btl_llrdma_ep_state_t state;
    mca_btl_llrdma_conn_t *conn[LLRDMA_NPATHS]; /* the connection per path, any state */
    opal_list_t pending[LLRDMA_NPATHS];         /* fragments waiting, in order */
    opal_list_t rdma_pending;                   /* puts and gets waiting for the BW QP */
    uint64_t peer_hint;                         /* from the peer's modex record */
    /* Per-peer limits: the smaller of ours and the peer's receive limits. */
    int use_path[LLRDMA_NPATHS];      /* both sides have the path */
    uint32_t frag_max[LLRDMA_NPATHS]; /* largest fragment sent on it */
    /* connection retries (a peer busy outside MPI answers late) */
    uint64_t first_try_ms[LLRDMA_NPATHS]; /* 0: no attempt under way */
    uint64_t retry_at_ms[LLRDMA_NPATHS];  /* 0: none scheduled */
    uint32_t attempts[LLRDMA_NPATHS];
    uint32_t peer_waits[LLRDMA_NPATHS]; /* rejected attempts since the last connection */
} mca_btl_llrdma_endpoint_t;
OBJ_CLASS_DECLARATION(mca_btl_llrdma_endpoint_t);

/* Queue or post a fragment (its hdr filled).  OPAL_SUCCESS when queued or
 * posted with a callback to come, 1 when the caller completes it now
 * (inline, or a copy of it queued), 2 when it was posted and is done for
 * ob1 (the BTL's own fragment, data copied in: its completion only returns
 * it to its pool), an error when the endpoint has failed. */
int mca_btl_llrdma_endpoint_send(mca_btl_llrdma_endpoint_t *ep, mca_btl_llrdma_frag_t *frag);
/* Coalescing: a message that has to wait is copied behind the last fragment
 * queued on its path, as one more record in that fragment's buffer, and is
 * complete at once.  The peer then takes many messages per receive buffer
 * and credit (an incast drains in a few buffers) while a message that can go
 * at once never pays for it.  reserve returns where `bytes` of payload go
 * (NULL: nothing queued on path p, no room, or btl_llrdma_coalesce=0);
 * commit, right after filling it, appends the record. */
void *mca_btl_llrdma_endpoint_pack_reserve(mca_btl_llrdma_endpoint_t *ep, int p, size_t bytes);
void mca_btl_llrdma_endpoint_pack_commit(mca_btl_llrdma_endpoint_t *ep, int p, uint8_t tag,
                                         size_t bytes);
/* Start connecting path p if no connection or retry exists (RDMA needs the
 * BW path before any fragment may have taken it). */
int mca_btl_llrdma_endpoint_connect(mca_btl_llrdma_endpoint_t *ep, int p);
/* Post `op` as one RDMA WRITE or READ on conn (selective signalling as
 * for sends; a slot but no credit).  OPAL_SUCCESS, or an error after
 * failing the endpoint. */
int mca_btl_llrdma_conn_post_rdma(mca_btl_llrdma_endpoint_t *ep, struct mca_btl_llrdma_conn_t *conn,
                                  struct mca_btl_llrdma_rdma_op_t *op, int more_queued);
/* Post queued fragments of every path while slots are free. */
void mca_btl_llrdma_endpoint_drain(mca_btl_llrdma_endpoint_t *ep);
/* The same for path p only. */
void mca_btl_llrdma_endpoint_drain_path(mca_btl_llrdma_endpoint_t *ep, int p);
/* Fragments, or on the BW path puts and gets, wait for path p. */
int mca_btl_llrdma_endpoint_has_waiting(mca_btl_llrdma_endpoint_t *ep, int p);
/* btl_llrdma_conn.c: start this side's rdma_cm attempt for path p. */
int mca_btl_llrdma_conn_start_active(mca_btl_llrdma_endpoint_t *ep, int p);
/* Create the QP (and its ring and credit word) on conn->id with the path's
 * attributes, after reserving receive buffers for it; on failure nothing
 * is left and `why` says what failed. */
int mca_btl_llrdma_conn_setup_qp(struct mca_btl_llrdma_conn_t *conn, char *why, size_t whylen);
/* Drop the QP number's entry (the number may be handed out again). */
void mca_btl_llrdma_conn_forget_qp(struct mca_btl_llrdma_conn_t *conn);
/* Post one more work request on a connection whose work stopped completing
 * (the completion watchdog): the credit write, idempotent (the count only
 * grows).  On rxe a QP whose retransmit timer was lost sends nothing until
 * something is posted; the post restarts its requester.  0, or -1 when no
 * send slot is free or the connection is not up. */
int mca_btl_llrdma_conn_nudge(struct mca_btl_llrdma_conn_t *conn);

static inline int mca_btl_llrdma_conn_up(const struct mca_btl_llrdma_conn_t *conn)
{
    return NULL != conn && LLRDMA_CONN_ESTABLISHED == conn->state;
}
/* Before reporting a work completion error: a local QP error on a port
 * still ACTIVE waits up to 200 ms for the port to say it went down. */
void mca_btl_llrdma_port_settle(struct mca_btl_llrdma_module_t *m, enum ibv_wc_status status);
/* Report a fatal error with this peer once, fail every queued and posted
 * fragment, and mark the endpoint FAILED. */
void mca_btl_llrdma_endpoint_fail(mca_btl_llrdma_endpoint_t *ep, const char *what,
                                  const char *status);

/* A send completion (success or error) for the WR at `wr`. */
void mca_btl_llrdma_conn_send_done(mca_btl_llrdma_wr_t *wr, enum ibv_wc_status status);
/* Tear down one connection's QP and id (module->conns membership stays). */
void mca_btl_llrdma_conn_destroy(mca_btl_llrdma_conn_t *conn);

/* Run the CM events that are waiting; returns how many. */
int mca_btl_llrdma_cm_progress(struct mca_btl_llrdma_module_t *m);
/* Start connection retries that are due; returns how many were started. */
int mca_btl_llrdma_endpoint_retries(struct mca_btl_llrdma_module_t *m);
/* Post what credits now allow on endpoints that were waiting for them, and
 * report peers that have kept senders waiting too long. */
int mca_btl_llrdma_endpoint_unstall(struct mca_btl_llrdma_module_t *m);
/* n receives on `conn` were consumed and their buffers reposted: return
 * credits when enough have accumulated. */
void mca_btl_llrdma_conn_recv_done(mca_btl_llrdma_conn_t *conn, uint32_t n);
/* The path a fragment of `bytes` takes to this peer; -1 when none can carry
 * it (frag_max is 0 on a path the two do not share). */
static inline int mca_btl_llrdma_endpoint_path_for(const mca_btl_llrdma_endpoint_t *ep,
                                                   uint64_t bytes)
{
    return llrdma_btl_path_for(ep->frag_max, bytes);
}
/* Most pieces of one split fragment: fragments are at most 1 MiB, and a
 * peer's BW fragments at least 64K (docs/profile.md). */
#define LLRDMA_SPLIT_MAX 16
/* How a fragment of `bytes` (at most this side's own limits, which ob1
 * reads) goes to this peer: on one path, whole or in pieces. */
void mca_btl_llrdma_endpoint_route(const mca_btl_llrdma_endpoint_t *ep, uint64_t bytes,
                                   llrdma_btl_route_t *r);
/* Sends the peer's credits allow now.  The peer writes the returned count
 * by RDMA: it is read as memory that changes under us. */
static inline uint32_t mca_btl_llrdma_conn_credits(mca_btl_llrdma_conn_t *conn)
{
    return llrdma_credit_avail(&conn->credit,
                               __atomic_load_n(&conn->credit_buf[0], __ATOMIC_ACQUIRE));
}

/* Whether a message of `bytes` is packed with others when it waits: with
 * coalescing on, one of which at least four share the peer's buffer (for
 * larger ones copying buys little, and ob1 keeps them as its own). */
static inline int mca_btl_llrdma_packs(int coalesce, uint32_t frag_max, size_t bytes)
{
    return coalesce && bytes <= frag_max / 4;
}

/* Credits a message of `bytes` leaves untouched: one that packs is posted
 * alone only while less than half the peer's window is in use; beyond that
 * it waits in the pending list and later ones pack behind it, so a burst
 * into a busy receiver takes a receive buffer per several messages instead
 * of one each (docs/btl-design.md, "Coalescing"). */
static inline uint32_t mca_btl_llrdma_conn_pack_floor(const mca_btl_llrdma_conn_t *conn,
                                                      int coalesce, uint32_t frag_max, size_t bytes)
{
    return mca_btl_llrdma_packs(coalesce, frag_max, bytes) ? conn->credit.granted / 2 : 0;
}

/* Posted WRs from which a send waits for the queue's next completion and
 * goes with what waits, in one chain, packed where it can
 * (llrdma_sq_batch_at); the depth with batching off (btl_llrdma_sq_batch). */
static inline uint32_t mca_btl_llrdma_conn_batch_at(const mca_btl_llrdma_conn_t *conn, int batch)
{
    return batch ? llrdma_sq_batch_at(&conn->sq) : conn->sq.depth;
}

/* Milliseconds of a monotonic clock. */
static inline uint64_t mca_btl_llrdma_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Complete a send fragment towards ob1 (callback and ownership as its flags
 * say); the callback is queued and runs after the module lock is released. */
void mca_btl_llrdma_frag_complete(mca_btl_llrdma_frag_t *frag, int status);

#endif
