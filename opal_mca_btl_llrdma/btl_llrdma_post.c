/*
 * btl/llrdma's post path: work requests onto a connection's queue pair in
 * ring order, credits (stamped into headers, or sent alone when owed),
 * the ordered pending lists and their chained drains, packing small
 * messages behind queued ones, and the completions that retire what was
 * posted (see btl_llrdma_endpoint.h and docs/btl-design.md).
 */
#include "opal_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "opal/util/output.h"
#include "opal/util/proc.h"

#include "btl_llrdma.h"
#include "btl_llrdma_post.h"
#include "btl_llrdma_rdma.h"

/* ---------------------------------------------------------- post path */

#define conn_credits mca_btl_llrdma_conn_credits

/* Most queued fragments a drain posts as one chain of WRs. */
#define LLRDMA_DRAIN_CHAIN 16

/* A post failed at the WR that was to take the ring slot at ring_head, with
 * `unsignalled` WRs before it waiting for its signal: the endpoint fails,
 * and those WRs' fragments and operations complete now, since no
 * completion will retire them. */
void mca_btl_llrdma_conn_post_failed(mca_btl_llrdma_endpoint_t *ep, mca_btl_llrdma_conn_t *conn,
                                     const char *what, int rc, uint32_t unsignalled)
{
    mca_btl_llrdma_endpoint_fail(ep, what, strerror(rc));
    for (uint32_t k = 1; k <= unsignalled && k < conn->sq.depth; ++k) {
        mca_btl_llrdma_wr_t *o =
            &conn->ring[(conn->ring_head + conn->sq.depth - k) % conn->sq.depth];
        mca_btl_llrdma_frag_t *orphan = o->frag;
        struct mca_btl_llrdma_rdma_op_t *orphan_op = o->rdma;
        o->frag = NULL;
        o->rdma = NULL;
        if (NULL != orphan) {
            mca_btl_llrdma_frag_complete(orphan, OPAL_ERR_UNREACH);
        }
        if (NULL != orphan_op) {
            mca_btl_llrdma_done_rdma(ep->module, orphan_op, OPAL_ERR_UNREACH);
        }
    }
}

/* Post one work request in the ring slot at ring_head; `frag` or `rdma`
 * (at most one) waits for its completion. */
static int post_wr_for(mca_btl_llrdma_endpoint_t *ep, mca_btl_llrdma_conn_t *conn,
                       struct ibv_send_wr *wr, mca_btl_llrdma_frag_t *frag,
                       struct mca_btl_llrdma_rdma_op_t *rdma, int inl, int more_queued)
{
    mca_btl_llrdma_wr_t *e = &conn->ring[conn->ring_head];
    struct ibv_send_wr *bad = NULL;
    uint32_t unsignalled = conn->sq.unsignalled; /* posted since the last signalled WR */
    int rc;

    wr->wr_id = (uintptr_t)e;
    if (llrdma_sq_post(&conn->sq, !inl, more_queued)) {
        wr->send_flags |= IBV_SEND_SIGNALED;
    }
    e->conn = conn;
    e->frag = inl ? NULL : frag;
    e->rdma = rdma;
    e->send = IBV_WR_SEND == wr->opcode;
    rc = mca_btl_llrdma_verbs.post_send(conn->qp, wr, &bad);
    if (0 != rc) {
        e->frag = NULL;
        e->rdma = NULL;
        llrdma_sq_retire(&conn->sq, 1);
        mca_btl_llrdma_conn_post_failed(ep, conn, "ibv_post_send failed", rc, unsignalled);
        return OPAL_ERR_UNREACH;
    }
    /* No division on the hot path. */
    conn->ring_head = conn->ring_head + 1 == conn->sq.depth ? 0 : conn->ring_head + 1;
    return OPAL_SUCCESS;
}

static int post_wr(mca_btl_llrdma_endpoint_t *ep, mca_btl_llrdma_conn_t *conn,
                   struct ibv_send_wr *wr, mca_btl_llrdma_frag_t *frag, int inl, int more_queued)
{
    return post_wr_for(ep, conn, wr, frag, NULL, inl, more_queued);
}

/* One put or get as an RDMA WRITE or READ work request. */
int mca_btl_llrdma_conn_post_rdma(mca_btl_llrdma_endpoint_t *ep, mca_btl_llrdma_conn_t *conn,
                                  struct mca_btl_llrdma_rdma_op_t *op, int more_queued)
{
    struct ibv_sge sge = {.addr = (uintptr_t)op->local, .length = op->size, .lkey = op->lkey};
    struct ibv_send_wr wr;

    memset(&wr, 0, sizeof(wr));
    wr.opcode = op->opcode;
    wr.sg_list = &sge;
    wr.num_sge = 0 == op->size ? 0 : 1;
    wr.wr.rdma.remote_addr = op->remote;
    wr.wr.rdma.rkey = op->rkey;
    return post_wr_for(ep, conn, &wr, NULL, op, 0, more_queued);
}

/* Post the puts and gets waiting on `ep` while its BW connection has send
 * slots (they take no credit: they consume no receive buffer). */
static void rdma_drain(mca_btl_llrdma_endpoint_t *ep, mca_btl_llrdma_conn_t *conn)
{
    while (mca_btl_llrdma_conn_up(conn) && LLRDMA_EP_FAILED != ep->state &&
           !opal_list_is_empty(&ep->rdma_pending)) {
        uint32_t slots = mca_btl_llrdma_conn_slots(conn);
        mca_btl_llrdma_rdma_op_t *op;
        int more;
        if (0 == slots) {
            return; /* slots come back with completions, which drain again */
        }
        op = (mca_btl_llrdma_rdma_op_t *)opal_list_remove_first(&ep->rdma_pending);
        more = !opal_list_is_empty(&ep->rdma_pending) && slots > 1;
        if (OPAL_SUCCESS != mca_btl_llrdma_conn_post_rdma(ep, conn, op, more)) {
            /* The endpoint has failed (and its other operations with it). */
            mca_btl_llrdma_done_rdma(ep->module, op, OPAL_ERR_UNREACH);
            return;
        }
        conn = ep->conn[LLRDMA_PATH_BW];
    }
}

/* Write the count of consumed-and-reposted buffers back to the peer.  It
 * takes a send slot but no peer receive buffer (and so no credit). */
static int post_credit(mca_btl_llrdma_endpoint_t *ep, mca_btl_llrdma_conn_t *conn)
{
    struct ibv_sge sge = {.addr = (uintptr_t)&conn->credit_buf[1],
                          .length = sizeof(uint64_t),
                          .lkey = conn->credit_mr->lkey};
    struct ibv_send_wr wr;
    int inl = conn->inline_max >= sizeof(uint64_t);

    conn->credit_buf[1] = llrdma_credit_return(&conn->credit);
    conn->credit_owed = 0;
    memset(&wr, 0, sizeof(wr));
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = inl ? IBV_SEND_INLINE : 0;
    wr.wr.rdma.remote_addr = conn->peer_credit_addr;
    wr.wr.rdma.rkey = conn->peer_credit_rkey;
    /* The source word is only ever overwritten with a larger count, which is
     * as true as the one it replaces: no completion needed either way. */
    return post_wr(ep, conn, &wr, NULL, 1, 0);
}

/* Returned credits into a header about to be posted (the first record of a
 * buffer); the stamp to confirm once the post went through. */
static inline uint64_t stamp_credit(mca_btl_llrdma_conn_t *conn, mca_btl_llrdma_hdr_t *h)
{
    uint64_t stamp = llrdma_credit_stamp(&conn->credit);
    if (0 != stamp) {
        h->flags |= MCA_BTL_LLRDMA_HDR_CREDIT;
        h->credit = (uint16_t)stamp;
    }
    return stamp;
}

int mca_btl_llrdma_conn_nudge(mca_btl_llrdma_conn_t *conn)
{
    mca_btl_llrdma_endpoint_t *ep = conn->endpoint;

    if (!mca_btl_llrdma_conn_up(conn) || LLRDMA_EP_FAILED == ep->state ||
        0 == mca_btl_llrdma_conn_slots(conn)) {
        return -1;
    }
    return post_credit(ep, conn) < 0 ? -1 : 0;
}

/* What post_frag did with a fragment (errors are negative). */
enum {
    POSTED = 0,        /* ob1 hears at its completion (SEND_ALWAYS_CALLBACK) */
    POSTED_INLINE = 1, /* the data went with the work request: done now */
    POSTED_COPIED = 2  /* ours, data in our buffer: done for ob1 now, the
                        * completion returns it to its pool (btl/uct's way) */
};

/* The work request of one fragment (its header filled in); *inl: sent
 * inline, *copied: ob1 is done with it at the post (btl/uct's way). */
static void frag_wr(mca_btl_llrdma_conn_t *conn, mca_btl_llrdma_frag_t *frag,
                    struct ibv_send_wr *wr, struct ibv_sge *sge, int *inl, int *copied,
                    uint64_t *stamp)
{
    uint32_t wire = 0 != frag->wire
                        ? frag->wire
                        : (uint32_t)(sizeof(mca_btl_llrdma_hdr_t) + frag->segment.seg_len);
    /* Every payload was copied into the fragment's own buffer (prepare_src,
     * alloc, sendi), so a fragment the BTL owns needs no callback unless
     * ob1 asked for one: the send is complete for ob1 at post, and the
     * completion only returns the buffer (done_frag).  Others wait. */
    const uint32_t owned = MCA_BTL_DES_FLAGS_BTL_OWNERSHIP | MCA_BTL_DES_SEND_ALWAYS_CALLBACK;

    *inl = wire <= conn->inline_max;
    *copied = !*inl && MCA_BTL_DES_FLAGS_BTL_OWNERSHIP == (frag->base.des_flags & owned);
    if (!*inl && !*copied) {
        frag->base.des_flags |= MCA_BTL_DES_SEND_ALWAYS_CALLBACK;
    }
    frag->hdr->tag = frag->tag;
    frag->hdr->flags = 0 != frag->wire ? MCA_BTL_LLRDMA_HDR_PACKED : frag->piece;
    frag->hdr->credit = 0;
    frag->hdr->len = MCA_BTL_LLRDMA_HDR_WORD(frag->segment.seg_len);
    *stamp = stamp_credit(conn, frag->hdr);
    sge->addr = (uintptr_t)frag->hdr;
    sge->length = wire;
    sge->lkey = frag->lkey;
    /* Every field a SEND without immediate data reads; the rest (RDMA,
     * atomic, UD, bind and TSO unions) only other opcodes read. */
    wr->next = NULL;
    wr->sg_list = sge;
    wr->num_sge = 1;
    wr->opcode = IBV_WR_SEND;
    wr->send_flags = *inl ? IBV_SEND_INLINE : 0;
    wr->imm_data = 0;
}

/* What a posted fragment costs: a credit, and the done-at-post count; what
 * it carried: the returns in its header. */
static int frag_posted(mca_btl_llrdma_endpoint_t *ep, mca_btl_llrdma_conn_t *conn, int inl,
                       int copied, uint64_t stamp)
{
    llrdma_credit_take(&conn->credit);
    llrdma_credit_stamped(&conn->credit, stamp);
    if (!inl) {
        ++ep->module->sends_done_at_post[copied];
    }
    return inl ? POSTED_INLINE : copied ? POSTED_COPIED : POSTED;
}

/* Post one fragment: one of the above, or an error after failing the
 * endpoint. */
static int post_frag(mca_btl_llrdma_endpoint_t *ep, mca_btl_llrdma_conn_t *conn,
                     mca_btl_llrdma_frag_t *frag, int more_queued)
{
    struct ibv_sge sge;
    struct ibv_send_wr wr;
    uint64_t stamp;
    int inl, copied, rc;

    frag_wr(conn, frag, &wr, &sge, &inl, &copied, &stamp);
    rc = post_wr(ep, conn, &wr, frag, inl, more_queued);
    if (OPAL_SUCCESS != rc) {
        return rc;
    }
    return frag_posted(ep, conn, inl, copied, stamp);
}

/* The first `n` (2..LLRDMA_DRAIN_CHAIN) fragments of path p's pending list
 * as one chain of WRs: one doorbell (on Soft-RoCE one system call) for all.
 * Each fragment completes towards ob1 as post_frag's caller would complete
 * it.  A post that fails at WR k leaves the accounting as if WRs 0..k-1 had
 * been posted alone and WR k had failed alone (post_wr_for), and fails the
 * fragments from k on. */
static void post_chain(mca_btl_llrdma_endpoint_t *ep, mca_btl_llrdma_conn_t *conn, int p,
                       uint32_t n, int more_after)
{
    struct ibv_send_wr wr[LLRDMA_DRAIN_CHAIN], *bad = NULL;
    struct ibv_sge sge[LLRDMA_DRAIN_CHAIN];
    mca_btl_llrdma_frag_t *f[LLRDMA_DRAIN_CHAIN];
    int inl[LLRDMA_DRAIN_CHAIN], copied[LLRDMA_DRAIN_CHAIN];
    uint64_t stamp[LLRDMA_DRAIN_CHAIN];
    const llrdma_sq_t sq0 = conn->sq;
    const uint32_t room0 = NULL != conn->sq.room ? *conn->sq.room : 0, head0 = conn->ring_head;
    uint32_t k;
    int rc;

    for (uint32_t i = 0; i < n; ++i) {
        mca_btl_llrdma_wr_t *e = &conn->ring[conn->ring_head];
        f[i] = (mca_btl_llrdma_frag_t *)opal_list_remove_first(&ep->pending[p]);
        frag_wr(conn, f[i], &wr[i], &sge[i], &inl[i], &copied[i], &stamp[i]);
        wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
        wr[i].wr_id = (uintptr_t)e;
        if (llrdma_sq_post(&conn->sq, !inl[i], i + 1 < n || more_after)) {
            wr[i].send_flags |= IBV_SEND_SIGNALED;
        }
        e->conn = conn;
        e->frag = inl[i] ? NULL : f[i];
        e->rdma = NULL;
        e->send = 1;
        conn->ring_head = (conn->ring_head + 1) % conn->sq.depth;
    }
    rc = mca_btl_llrdma_verbs.post_send(conn->qp, wr, &bad);
    k = 0 == rc ? n : (NULL != bad && bad >= wr && bad < wr + n ? (uint32_t)(bad - wr) : 0);
    if (0 != rc) {
        /* Back to before the chain, then WRs 0..k-1 again: the same
         * decisions, as each was followed by another. */
        for (uint32_t i = k; i < n; ++i) {
            conn->ring[(head0 + i) % conn->sq.depth].frag = NULL;
        }
        conn->sq = sq0;
        if (NULL != conn->sq.room) {
            *conn->sq.room = room0;
        }
        conn->ring_head = head0;
        for (uint32_t i = 0; i < k; ++i) {
            (void)llrdma_sq_post(&conn->sq, !inl[i], 1);
            conn->ring_head = (conn->ring_head + 1) % conn->sq.depth;
        }
        mca_btl_llrdma_conn_post_failed(ep, conn, "ibv_post_send failed", rc, conn->sq.unsignalled);
    }
    for (uint32_t i = 0; i < n; ++i) {
        if (i < k) {
            if (POSTED_INLINE == frag_posted(ep, conn, inl[i], copied[i], stamp[i])) {
                mca_btl_llrdma_frag_complete(f[i], OPAL_SUCCESS);
            }
        } else {
            mca_btl_llrdma_frag_complete(f[i], OPAL_ERR_UNREACH);
        }
    }
}

int mca_btl_llrdma_endpoint_has_waiting(mca_btl_llrdma_endpoint_t *ep, int p)
{
    return !opal_list_is_empty(&ep->pending[p]) ||
           (LLRDMA_PATH_BW == p && !opal_list_is_empty(&ep->rdma_pending));
}

/* Fragments wait on this endpoint: it is looked at from progress until they
 * can go (connection up and credits). */
static void set_waiting(mca_btl_llrdma_endpoint_t *ep, int p, int waiting)
{
    mca_btl_llrdma_conn_t *conn = ep->conn[p];
    if (NULL == conn) {
        return;
    }
    if (waiting && 0 == conn->stall_since) {
        conn->stall_since = mca_btl_llrdma_now_ms();
        if (0 == ep->module->waiting++) {
            mca_btl_llrdma_thread_kick(ep->module); /* credits come without an event */
        }
    } else if (!waiting && 0 != conn->stall_since) {
        if (conn->stall_reported) {
            opal_output_verbose(1, mca_btl_llrdma_component.output,
                                "btl:llrdma: %s returned credits after %llu ms; sends resume",
                                OPAL_NAME_PRINT(ep->proc->proc_name),
                                (unsigned long long)(mca_btl_llrdma_now_ms() - conn->stall_since));
        }
        conn->stall_since = 0;
        conn->stall_reported = 0;
        --ep->module->waiting;
    }
}

void mca_btl_llrdma_endpoint_drain_path(mca_btl_llrdma_endpoint_t *ep, int p)
{
    mca_btl_llrdma_conn_t *conn = ep->conn[p];

    if (!mca_btl_llrdma_conn_up(conn) || LLRDMA_EP_FAILED == ep->state) {
        return;
    }
    /* A credit write that found the send queue full goes first: the peer may
     * be waiting for it. */
    if (conn->credit_owed && !llrdma_credit_owed(&conn->credit)) {
        conn->credit_owed = 0; /* returned in a header meanwhile */
    }
    if (conn->credit_owed && mca_btl_llrdma_conn_slots(conn) > 0) {
        if (OPAL_SUCCESS != post_credit(ep, conn)) {
            return;
        }
    }
    /* Puts and gets need a send slot but no credit. */
    if (LLRDMA_PATH_BW == p && !opal_list_is_empty(&ep->rdma_pending)) {
        rdma_drain(ep, conn);
        conn = ep->conn[p];
        if (!mca_btl_llrdma_conn_up(conn) || LLRDMA_EP_FAILED == ep->state) {
            return;
        }
    }
    while (mca_btl_llrdma_conn_up(conn) && LLRDMA_EP_FAILED != ep->state &&
           !opal_list_is_empty(&ep->pending[p])) {
        uint32_t slots = mca_btl_llrdma_conn_slots(conn), credits = conn_credits(conn), n;
        mca_btl_llrdma_frag_t *frag;
        int more, rc;
        if (0 == slots || 0 == credits) {
            /* Slots come back with completions; credits may need the peer to
             * progress: watch for them from progress. */
            set_waiting(ep, p, 0 == credits);
            return;
        }
        /* Several at once as one chain of WRs. */
        n = slots < credits ? slots : credits;
        if (n > LLRDMA_DRAIN_CHAIN) {
            n = LLRDMA_DRAIN_CHAIN;
        }
        if (n > opal_list_get_size(&ep->pending[p])) {
            n = (uint32_t)opal_list_get_size(&ep->pending[p]);
        }
        if (n > 1) {
            more = opal_list_get_size(&ep->pending[p]) > n && slots > n && credits > n;
            post_chain(ep, conn, p, n, more);
            conn = ep->conn[p];
            continue;
        }
        frag = (mca_btl_llrdma_frag_t *)opal_list_remove_first(&ep->pending[p]);
        more = !opal_list_is_empty(&ep->pending[p]) && slots > 1 && credits > 1;
        rc = post_frag(ep, conn, frag, more);
        if (POSTED_INLINE == rc || rc < 0) {
            /* Inline (done) or failed: either way ob1 hears about it now. */
            mca_btl_llrdma_frag_complete(frag, POSTED_INLINE == rc ? OPAL_SUCCESS : rc);
        }
        conn = ep->conn[p]; /* a callback may have changed the endpoint */
    }
    if (NULL != ep->conn[p]) {
        set_waiting(ep, p, 0);
    }
}

void mca_btl_llrdma_endpoint_drain(mca_btl_llrdma_endpoint_t *ep)
{
    /* Low latency first: small messages never wait behind bulk ones. */
    for (int p = 0; p < LLRDMA_NPATHS; ++p) {
        mca_btl_llrdma_endpoint_drain_path(ep, p);
    }
}

/* Offset of a record of `bytes` behind the records of `tail`, or 0 when it
 * does not fit the tail's buffer or the peer's receive buffer. */
static uint32_t pack_offset(const mca_btl_llrdma_endpoint_t *ep, int p,
                            const mca_btl_llrdma_frag_t *tail, size_t bytes)
{
    const uint32_t hdr = sizeof(mca_btl_llrdma_hdr_t);
    uint32_t used = 0 != tail->wire ? tail->wire : (uint32_t)(hdr + tail->segment.seg_len);
    uint32_t off = MCA_BTL_LLRDMA_REC_ALIGN(used);
    uint64_t cap = tail->pool->buf_bytes;

    if (0 != tail->piece) {
        return 0; /* the receiver joins a piece's buffer to the next piece's */
    }
    if ((uint64_t)hdr + ep->frag_max[p] < cap) {
        cap = (uint64_t)hdr + ep->frag_max[p];
    }
    return (uint64_t)off + hdr + bytes <= cap ? off : 0;
}

void *mca_btl_llrdma_endpoint_pack_reserve(mca_btl_llrdma_endpoint_t *ep, int p, size_t bytes)
{
    mca_btl_llrdma_frag_t *tail;
    uint32_t off;

    if (!mca_btl_llrdma_component.coalesce || p < 0 || LLRDMA_EP_FAILED == ep->state ||
        !mca_btl_llrdma_conn_up(ep->conn[p]) || opal_list_is_empty(&ep->pending[p])) {
        return NULL;
    }
    tail = (mca_btl_llrdma_frag_t *)opal_list_get_last(&ep->pending[p]);
    off = pack_offset(ep, p, tail, bytes);
    return 0 == off ? NULL : (char *)tail->hdr + off + sizeof(mca_btl_llrdma_hdr_t);
}

void mca_btl_llrdma_endpoint_pack_commit(mca_btl_llrdma_endpoint_t *ep, int p, uint8_t tag,
                                         size_t bytes)
{
    mca_btl_llrdma_frag_t *tail = (mca_btl_llrdma_frag_t *)opal_list_get_last(&ep->pending[p]);
    uint32_t off = pack_offset(ep, p, tail, bytes);
    mca_btl_llrdma_hdr_t *rec = (mca_btl_llrdma_hdr_t *)((char *)tail->hdr + off);

    rec->tag = tag;
    rec->flags = 0;
    rec->credit = 0;
    rec->len = MCA_BTL_LLRDMA_HDR_WORD(bytes);
    tail->wire = off + (uint32_t)sizeof(*rec) + (uint32_t)bytes;
}

/* The first small message to wait on a connected path (for credits or a
 * send slot) goes into a fragment of the BTL's own: ob1's completes at once,
 * and later ones pack behind it, as long as the send pool, which bounds what
 * waits, has one; NULL otherwise.  Before a connection is up messages wait
 * as they are, so a connection that cannot be made fails them to ob1. */
static mca_btl_llrdma_frag_t *queue_copy(mca_btl_llrdma_endpoint_t *ep, mca_btl_llrdma_frag_t *frag,
                                         int p)
{
    mca_btl_llrdma_frag_t *c;

    if (!mca_btl_llrdma_conn_up(ep->conn[p]) ||
        !mca_btl_llrdma_packs(mca_btl_llrdma_component.coalesce, ep->frag_max[p],
                              frag->segment.seg_len)) {
        return NULL;
    }
    c = mca_btl_llrdma_pool_get(frag->pool);
    if (NULL == c) {
        return NULL;
    }
    mca_btl_llrdma_frag_init_send(c, ep, frag->segment.seg_len, MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
    c->tag = frag->tag;
    memcpy(mca_btl_llrdma_frag_payload(c), mca_btl_llrdma_frag_payload(frag),
           frag->segment.seg_len);
    return c;
}

void mca_btl_llrdma_endpoint_route(const mca_btl_llrdma_endpoint_t *ep, uint64_t bytes,
                                   llrdma_btl_route_t *r)
{
    r->path = llrdma_btl_path_for(ep->frag_max, bytes);
    r->pieces = 1;
    r->piece = (uint32_t)bytes;
    if (r->path < 0) {
        /* Rare (a peer with a smaller hint): the pure rule, out of line. */
        (void)llrdma_btl_route(ep->module->lim.frag_max, ep->frag_max, bytes, r);
    }
}

/* One wire fragment onto path p: posted, packed behind the last waiting
 * one, or queued (endpoint_send's return values). */
static int send_on(mca_btl_llrdma_endpoint_t *ep, mca_btl_llrdma_frag_t *frag, int p)
{
    mca_btl_llrdma_frag_t *queued;
    mca_btl_llrdma_conn_t *conn = ep->conn[p];
    uint32_t credits = 0, floor = 0;

    frag->endpoint = ep;
    if (mca_btl_llrdma_conn_up(conn)) {
        /* Read once: the peer's write may land at any moment, and a second
         * read could skip set_waiting below for a fragment queued on a first
         * read of 0 (queued, credits back, nothing to post it: a hang). */
        credits = conn_credits(conn);
        floor = mca_btl_llrdma_conn_pack_floor(conn, mca_btl_llrdma_component.coalesce,
                                               ep->frag_max[p], frag->segment.seg_len);
        if (opal_list_is_empty(&ep->pending[p]) && mca_btl_llrdma_conn_slots(conn) > 0 &&
            credits > floor) {
            if (!mca_btl_llrdma_conn_batching(conn)) {
                return post_frag(ep, conn, frag, 0);
            }
            /* A busy queue alone: a completion due on it (llrdma_sq_batch_at)
             * drains the path. */
            ++ep->module->sq_batched;
        }
        llrdma_hist_wait_sw(&ep->module->hist, p); /* no slot or credit, or behind one */
    }
    /* Queue full, no credit, not connected yet, or older fragments waiting:
     * keep the order, by packing behind the last one when it has room. */
    if (!opal_list_is_empty(&ep->pending[p]) && 0 == frag->piece) {
        void *dst = mca_btl_llrdma_endpoint_pack_reserve(ep, p, frag->segment.seg_len);
        if (NULL != dst) {
            memcpy(dst, mca_btl_llrdma_frag_payload(frag), frag->segment.seg_len);
            mca_btl_llrdma_endpoint_pack_commit(ep, p, frag->tag, frag->segment.seg_len);
            return 1; /* copied: complete, like an inline send */
        }
    }
    queued = queue_copy(ep, frag, p);
    if (NULL == queued) {
        queued = frag;
        frag->base.des_flags |= MCA_BTL_DES_SEND_ALWAYS_CALLBACK;
    }
    opal_list_append(&ep->pending[p], &queued->base.super.super);
    if (NULL != conn) {
        conn->sq.fast = 0; /* sendi's fast lane must not pass what waits */
    }
    if (mca_btl_llrdma_conn_up(conn)) {
        if (credits <= floor) {
            set_waiting(ep, p, 1); /* progress posts it (once credits are back) */
        }
    } else if (NULL == conn && 0 == ep->retry_at_ms[p]) {
        int rc = mca_btl_llrdma_conn_start_active(ep, p);
        if (OPAL_SUCCESS != rc) {
            opal_list_remove_item(&ep->pending[p], &queued->base.super.super);
            if (queued != frag) {
                mca_btl_llrdma_pool_put(queued);
            }
            mca_btl_llrdma_endpoint_fail(ep, "starting a connection failed", "out of resources");
            return rc;
        }
    }
    return queued != frag ? 1 : OPAL_SUCCESS;
}

/* A fragment larger than the peer receives, as pieces of our own that fit
 * (llrdma_btl_route), sent back to back on path p, so nothing can come
 * between them on the queue pair.  All pieces are taken before any is sent:
 * without them ob1 retries the whole fragment later.  The data is copied,
 * so the fragment is complete for ob1 (1) once the pieces are on their way. */
static int send_split(mca_btl_llrdma_endpoint_t *ep, mca_btl_llrdma_frag_t *frag,
                      const llrdma_btl_route_t *r)
{
    mca_btl_llrdma_frag_t *piece[LLRDMA_SPLIT_MAX];
    const char *src = (const char *)mca_btl_llrdma_frag_payload(frag);
    uint64_t off = 0;
    uint32_t k;

    if (r->pieces > LLRDMA_SPLIT_MAX) {
        return OPAL_ERR_BAD_PARAM; /* fragments are at most 1 MiB, pieces at least 64K */
    }
    for (k = 0; k < r->pieces; ++k) {
        const uint64_t n = k + 1 < r->pieces ? r->piece : frag->segment.seg_len - off;
        piece[k] = mca_btl_llrdma_pool_get(&ep->module->path[r->path].send_pool);
        if (NULL == piece[k]) {
            goto put_pieces;
        }
        mca_btl_llrdma_frag_init_send(piece[k], ep, n, MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
        piece[k]->tag = frag->tag;
        piece[k]->piece = k + 1 < r->pieces ? MCA_BTL_LLRDMA_HDR_MORE : MCA_BTL_LLRDMA_HDR_LAST;
        memcpy(mca_btl_llrdma_frag_payload(piece[k]), src + off, n);
        off += n;
    }
    ++ep->module->split_frags;
    for (k = 0; k < r->pieces; ++k) {
        int prc = send_on(ep, piece[k], r->path);
        if (1 == prc) {
            mca_btl_llrdma_frag_complete(piece[k], OPAL_SUCCESS); /* inline: done */
        } else if (prc < 0) {
            /* The endpoint failed: what is queued fails with it. */
            mca_btl_llrdma_pool_put(piece[k]);
            for (++k; k < r->pieces; ++k) {
                mca_btl_llrdma_pool_put(piece[k]);
            }
            return prc;
        }
    }
    return 1;

put_pieces:
    while (k-- > 0) {
        mca_btl_llrdma_pool_put(piece[k]);
    }
    return OPAL_ERR_OUT_OF_RESOURCE;
}

int mca_btl_llrdma_endpoint_send(mca_btl_llrdma_endpoint_t *ep, mca_btl_llrdma_frag_t *frag)
{
    llrdma_btl_route_t r;

    if (LLRDMA_EP_FAILED == ep->state) {
        return OPAL_ERR_UNREACH;
    }
    if (ep->module->port_down) {
        mca_btl_llrdma_endpoint_fail(ep, "the local port failed",
                                     "the port went down (IBV_EVENT_PORT_ERR)");
        return OPAL_ERR_UNREACH;
    }
    mca_btl_llrdma_endpoint_route(ep, frag->segment.seg_len, &r);
    if (r.path < 0) {
        return OPAL_ERR_BAD_PARAM; /* larger than this side sends: ob1 never asks this */
    }
    llrdma_hist_add_sw(&ep->module->hist, r.path,
                       sizeof(mca_btl_llrdma_hdr_t) + frag->segment.seg_len,
                       sizeof(mca_btl_llrdma_hdr_t) + frag->segment.seg_len);
    if (r.pieces > 1) {
        return send_split(ep, frag, &r);
    }
    return send_on(ep, frag, r.path);
}

void mca_btl_llrdma_conn_send_done(mca_btl_llrdma_wr_t *wr, enum ibv_wc_status status)
{
    mca_btl_llrdma_conn_t *conn = wr->conn;
    mca_btl_llrdma_endpoint_t *ep = conn->endpoint;
    uint32_t idx = (uint32_t)(wr - conn->ring), n = 0;
    int ostatus = IBV_WC_SUCCESS == status ? OPAL_SUCCESS : OPAL_ERROR;

    if (IBV_WC_SUCCESS != status) {
        mca_btl_llrdma_port_settle(ep->module, status);
        mca_btl_llrdma_endpoint_fail(ep, "a send failed",
                                     mca_btl_llrdma_verbs.wc_status_str(status));
    }
    ++conn->sends_done; /* the watchdog's sign of life */
    /* A completion retires its WR and every unsignalled one before it. */
    for (;;) {
        mca_btl_llrdma_wr_t *e = &conn->ring[conn->ring_tail];
        mca_btl_llrdma_frag_t *frag = e->frag;
        struct mca_btl_llrdma_rdma_op_t *op = e->rdma;
        int last = conn->ring_tail == idx;
        e->frag = NULL;
        e->rdma = NULL;
        conn->ring_tail = (conn->ring_tail + 1) % conn->sq.depth;
        ++n;
        if (NULL != frag) {
            mca_btl_llrdma_frag_complete(frag, ostatus);
        }
        if (NULL != op) {
            mca_btl_llrdma_done_rdma(conn->endpoint->module, op, ostatus);
        }
        if (last || n >= conn->sq.depth) {
            break;
        }
    }
    llrdma_sq_retire(&conn->sq, n);
    if (ep->conn[conn->path] == conn) {
        mca_btl_llrdma_endpoint_drain_path(ep, conn->path);
    }
}

void mca_btl_llrdma_conn_recv_done(mca_btl_llrdma_conn_t *conn, uint32_t n)
{
    mca_btl_llrdma_endpoint_t *ep = conn->endpoint;

    if (!llrdma_credit_consume_n(&conn->credit, n)) {
        return;
    }
    if (mca_btl_llrdma_conn_up(conn) && LLRDMA_EP_FAILED != ep->state &&
        mca_btl_llrdma_conn_slots(conn) > 0) {
        (void)post_credit(ep, conn);
    } else {
        conn->credit_owed = 1; /* posted by the next drain of this path */
    }
}

int mca_btl_llrdma_endpoint_unstall(mca_btl_llrdma_module_t *m)
{
    mca_btl_llrdma_endpoint_t *ep = NULL;
    uint64_t now = 0;
    int count = 0;

    while (NULL != (ep = mca_btl_llrdma_endpoint_next(m, ep))) {
        for (int p = 0; p < LLRDMA_NPATHS; ++p) {
            mca_btl_llrdma_conn_t *conn = ep->conn[p];
            if (NULL == conn || 0 == conn->stall_since) {
                continue;
            }
            if (conn_credits(conn) > 0) {
                mca_btl_llrdma_endpoint_drain_path(ep, p);
                ++count;
                continue;
            }
            if (0 == now) {
                now = mca_btl_llrdma_now_ms();
            }
            if (!conn->stall_reported &&
                now - conn->stall_since >= (uint64_t)mca_btl_llrdma_component.stall_warn_ms) {
                char host[256];
                conn->stall_reported = 1;
                opal_output_verbose(
                    1, mca_btl_llrdma_component.output,
                    "btl:llrdma: no credits from %s (rank %u on %s) for %llu ms: it has not "
                    "consumed this rank's %s messages (busy outside MPI?); %zu fragments wait "
                    "and go when it progresses",
                    OPAL_NAME_PRINT(ep->proc->proc_name), (unsigned)ep->proc->proc_name.vpid,
                    llrdma_proc_hostname(ep->proc, host, sizeof(host)),
                    (unsigned long long)(now - conn->stall_since), mca_btl_llrdma_path_name(p),
                    opal_list_get_size(&ep->pending[p]));
            }
        }
    }
    return count;
}
