/*
 * btl/llrdma send path, the part its callers inline: sendi's post (see
 * btl_llrdma_post.c for the rest of the post ring, credits and packing).
 */
#ifndef MCA_BTL_LLRDMA_POST_H
#define MCA_BTL_LLRDMA_POST_H

#include "btl_llrdma.h"

BEGIN_C_DECLS

/* A post (`what` failed, with errno rc) that failed at the ring slot
 * ring_head, with `unsignalled` WRs before it waiting for its signal: the
 * endpoint fails, and those WRs' fragments and operations complete now
 * (btl_llrdma_post.c). */
void mca_btl_llrdma_conn_post_failed(mca_btl_llrdma_endpoint_t *ep,
                                     struct mca_btl_llrdma_conn_t *conn, const char *what, int rc,
                                     uint32_t unsignalled);

/* sendi's common case: one message of `len` wire bytes at `w` (on the
 * caller's stack, header first) as one inline SEND on an established
 * connection with a free slot and a credit (the caller checked), under the
 * module lock.  By the work-request API where the QP has it (the provider
 * fills its entry from the arguments), else the connection's prepared work
 * request is patched, not built.  `fast` (a constant at each call): the
 * post is one of the connection's fast-lane budget (llrdma_sq_fast_ok
 * held), unsignalled, its ring entry already holding the connection and no
 * fragment or operation (conn_setup_qp and every retirement leave it so);
 * else the full decision, after which the budget is counted anew.  Inline
 * in the caller, as the whole post (docs/btl-design.md, "The
 * small-message send"): OPAL_SUCCESS, or an error after failing the
 * endpoint. */
static inline __attribute__((always_inline)) int
mca_btl_llrdma_conn_post_inline(mca_btl_llrdma_endpoint_t *ep, struct mca_btl_llrdma_conn_t *conn,
                                mca_btl_llrdma_hdr_t *w, uint32_t len, const int fast)
{
    mca_btl_llrdma_wr_t *e = &conn->ring[conn->ring_head];
    const uint64_t stamp = llrdma_credit_stamp(&conn->credit);
    /* The fast lane's post only adds one: read back when it fails. */
    const uint32_t unsignalled = fast ? 0 : conn->sq.unsignalled;
    unsigned flags = IBV_SEND_INLINE;
    int rc;

    if (0 != stamp) {
        w->flags |= MCA_BTL_LLRDMA_HDR_CREDIT;
        w->credit = (uint16_t)stamp;
    }
    if (fast) {
        llrdma_sq_post_fast(&conn->sq);
    } else {
        if (llrdma_sq_post(&conn->sq, 0, 0)) {
            flags |= IBV_SEND_SIGNALED;
        }
        e->conn = conn;
        e->frag = NULL;
        e->rdma = NULL;
    }
    e->send = 1;
#ifdef LLRDMA_HAVE_WR_API /* configure: rdma-core has ibv_wr_* */
    if (OPAL_LIKELY(NULL != conn->qpx)) {
        /* wr_id and wr_flags are read by the builder (ibv_wr_send), inside
         * the provider's critical section.  IBV_SEND_INLINE stays in the
         * flags: rxe's wr_set_inline_data does not set it, and rxe's kernel
         * takes the payload from the queue entry only when it is there. */
        struct ibv_qp_ex *x = conn->qpx;
        ibv_wr_start(x);
        x->wr_id = (uintptr_t)e;
        x->wr_flags = flags;
        ibv_wr_send(x);
        ibv_wr_set_inline_data(x, w, len);
        rc = ibv_wr_complete(x);
    } else
#endif
    {
        struct ibv_send_wr *bad = NULL;
        conn->inl_sge.addr = (uintptr_t)w;
        conn->inl_sge.length = len;
        conn->inl_wr.wr_id = (uintptr_t)e;
        conn->inl_wr.send_flags = flags;
        rc = mca_btl_llrdma_verbs.post_send(conn->qp, &conn->inl_wr, &bad);
    }
    if (OPAL_UNLIKELY(0 != rc)) {
        llrdma_sq_retire(&conn->sq, 1);
        conn->sq.fast = 0;
        mca_btl_llrdma_conn_post_failed(
            ep, conn, NULL != conn->qpx ? "ibv_wr_send failed" : "ibv_post_send failed", rc,
            fast ? conn->sq.unsignalled - 1 : unsignalled);
        return OPAL_ERR_UNREACH;
    }
    conn->ring_head = conn->ring_head + 1 == conn->sq.depth ? 0 : conn->ring_head + 1;
    llrdma_credit_take(&conn->credit);
    llrdma_credit_stamped(&conn->credit, stamp);
    return OPAL_SUCCESS;
}

END_C_DECLS
#endif
