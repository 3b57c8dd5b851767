/*
 * btl/llrdma progress: completion queues (LL first, then BW), receive
 * dispatch to ob1, and the rdma_cm channel.  Called from opal_progress.
 * No lock is held while ob1 is called (docs/btl-design.md "Threads").
 */
#include "opal_config.h"

#include <stdio.h>

#include "opal/util/output.h"

#include "btl_llrdma.h"
#include "llrdma_mca_common.h"

/* Completions taken per CQ per call: bounded so one busy path cannot starve
 * the other or the rest of opal_progress. */
#define LLRDMA_POLL_BATCH 16

/* The connection of a receive completion.  Consecutive receives mostly
 * come from one queue pair: the last answer is kept (module lock held;
 * forgotten with its QP, btl_llrdma_cm.c). */
static mca_btl_llrdma_conn_t *conn_by_qp_num(mca_btl_llrdma_module_t *m, uint32_t qp_num)
{
    void *conn = NULL;
    if (NULL != m->rx_conn && m->rx_qp_num == qp_num) {
        return m->rx_conn;
    }
    if (OPAL_SUCCESS != opal_hash_table_get_value_uint32(&m->by_qp, qp_num, &conn)) {
        return NULL;
    }
    m->rx_qp_num = qp_num;
    m->rx_conn = (mca_btl_llrdma_conn_t *)conn;
    return m->rx_conn;
}

/* A received buffer is one record, or records packed by the sender
 * (MCA_BTL_LLRDMA_HDR_PACKED): all of them must be whole and end exactly at
 * byte_len before any is delivered. */
static int records_ok(const char *buf, uint32_t byte_len)
{
    const uint32_t hdr = sizeof(mca_btl_llrdma_hdr_t);
    const mca_btl_llrdma_hdr_t *h = (const mca_btl_llrdma_hdr_t *)buf;
    uint32_t off = 0;

    if (byte_len < hdr) {
        return 0;
    }
    if (!(h->flags & MCA_BTL_LLRDMA_HDR_PACKED)) {
        /* Magic and length in one compare (most buffers). */
        return h->len == MCA_BTL_LLRDMA_HDR_WORD(byte_len - hdr) &&
               byte_len - hdr <= MCA_BTL_LLRDMA_HDR_LEN_MAX;
    }
    while (byte_len - off >= hdr) {
        h = (const mca_btl_llrdma_hdr_t *)(buf + off);
        if (!MCA_BTL_LLRDMA_HDR_MAGIC_OK(h) || MCA_BTL_LLRDMA_HDR_LEN(h) > byte_len - off - hdr) {
            return 0;
        }
        if (off + hdr + MCA_BTL_LLRDMA_HDR_LEN(h) == byte_len) {
            return 1;
        }
        off = MCA_BTL_LLRDMA_REC_ALIGN(off + hdr + MCA_BTL_LLRDMA_HDR_LEN(h));
        if (off >= byte_len) {
            return 0;
        }
    }
    return 0;
}

/* A received buffer that goes to nobody back into the queue.  Module lock
 * held. */
static void repost_one(mca_btl_llrdma_module_t *m, int p, mca_btl_llrdma_frag_t *frag)
{
    char detail[160];
    int posted;

    if (0 != mca_btl_llrdma_path_repost(m, p, &frag, 1, &posted)) {
        mca_btl_llrdma_pool_put(frag);
        snprintf(detail, sizeof(detail),
                 "btl/llrdma: reposting a receive buffer on %s:%d failed (ibv_post_srq_recv)",
                 m->port.dev, m->port.port);
        mca_btl_llrdma_module_fatal(m, NULL, detail);
    }
}

/* A receive completion that hands nothing to ob1: an error, or a malformed
 * buffer.  The buffer goes back at once.  Module lock held. */
static void recv_failed(mca_btl_llrdma_module_t *m, int p, const struct ibv_wc *wc)
{
    mca_btl_llrdma_frag_t *frag = (mca_btl_llrdma_frag_t *)(uintptr_t)(wc->wr_id & ~(uint64_t)1);
    mca_btl_llrdma_conn_t *conn;
    char detail[256];

    if (IBV_WC_SUCCESS != wc->status) {
        conn = conn_by_qp_num(m, wc->qp_num);
        if (NULL != conn && LLRDMA_CONN_CLOSED != conn->state) {
            mca_btl_llrdma_port_settle(m, wc->status);
            mca_btl_llrdma_endpoint_fail(conn->endpoint, "a receive failed",
                                         mca_btl_llrdma_verbs.wc_status_str(wc->status));
        } else if (NULL == conn) {
            snprintf(detail, sizeof(detail), "btl/llrdma: a receive on %s:%d failed: %s",
                     m->port.dev, m->port.port, mca_btl_llrdma_verbs.wc_status_str(wc->status));
            mca_btl_llrdma_module_fatal(m, NULL, detail);
        }
    } else {
        snprintf(detail, sizeof(detail),
                 "btl/llrdma: malformed fragment of %u bytes received on %s:%d (qp %u)",
                 wc->byte_len, m->port.dev, m->port.port, wc->qp_num);
        mca_btl_llrdma_module_fatal(m, NULL, detail);
    }
    repost_one(m, p, frag);
}

/* A piece of a fragment larger than our buffers: joined in the
 * connection's buffer; the last one goes to ob1 as one fragment.  Pieces
 * of one fragment arrive back to back on their queue pair (send_split).
 * Progress token held, no lock. */
static void deliver_piece(mca_btl_llrdma_module_t *m, mca_btl_llrdma_conn_t *conn,
                          mca_btl_llrdma_frag_t *frag)
{
    const mca_btl_llrdma_hdr_t *rec = frag->hdr;
    const mca_btl_active_message_callback_t *reg = mca_btl_base_active_message_trigger + rec->tag;
    int rc;

    if (0 == conn->reasm.max) {
        /* The peer sends up to its own BW limit, which its record tells. */
        uint64_t peer = conn->endpoint->addr.frag_max[LLRDMA_PATH_BW];
        conn->reasm.max = 0 != peer ? peer : MCA_BTL_LLRDMA_HDR_LEN_MAX;
    }
    rc = llrdma_reasm_piece(&conn->reasm, rec + 1, MCA_BTL_LLRDMA_HDR_LEN(rec),
                            0 != (rec->flags & MCA_BTL_LLRDMA_HDR_LAST));
    if (rc < 0) {
        /* A corrupt or foreign stream (or no memory to join it): the peer
         * fails, said once; its later pieces are refused too. */
        char why[160];
        snprintf(why, sizeof(why),
                 LLRDMA_ERR_INTERNAL == rc
                     ? "out of memory joining the pieces of a fragment (up to %llu bytes)"
                     : "the pieces of a fragment exceed the %llu bytes the peer sends at most",
                 (unsigned long long)conn->reasm.max);
        MCA_BTL_LLRDMA_LOCK(m);
        mca_btl_llrdma_endpoint_fail(conn->endpoint, "a split fragment was refused", why);
        MCA_BTL_LLRDMA_UNLOCK(m);
        return;
    }
    if (1 == rc) {
        frag->segment.seg_addr.pval = conn->reasm.buf;
        frag->segment.seg_len = conn->reasm.len;
        ++m->joined_frags;
        if (NULL != reg->cbfunc) {
            llrdma_btl_upcall(&m->super, reg, rec->tag, NULL, &frag->base);
        }
        llrdma_reasm_done(&conn->reasm);
    }
}

/* One record of a received buffer to ob1 (the fragment's segment list is
 * its one segment, set when it was made).  Endpoint unknown here (a shared
 * receive queue): NULL is allowed. */
static inline void deliver_record(mca_btl_llrdma_module_t *m, mca_btl_llrdma_frag_t *frag,
                                  mca_btl_llrdma_hdr_t *rec)
{
    const mca_btl_active_message_callback_t *reg = mca_btl_base_active_message_trigger + rec->tag;
    frag->segment.seg_addr.pval = rec + 1;
    frag->segment.seg_len = MCA_BTL_LLRDMA_HDR_LEN(rec);
    if (NULL != reg->cbfunc) {
        llrdma_btl_upcall(&m->super, reg, rec->tag, NULL, &frag->base);
    }
}

/* Hand every record of a packed buffer to ob1 (poll_cq hands a buffer of
 * one record over itself).  No lock held: ob1's callback may send, put or
 * get on this module or any other. */
static void deliver_packed(mca_btl_llrdma_module_t *m, mca_btl_llrdma_frag_t *frag,
                           uint32_t byte_len)
{
    mca_btl_llrdma_hdr_t *rec = frag->hdr;
    uint32_t off = 0;

    for (;;) {
        deliver_record(m, frag, rec);
        off += (uint32_t)sizeof(*rec) + MCA_BTL_LLRDMA_HDR_LEN(rec);
        if (off >= byte_len) {
            break;
        }
        off = MCA_BTL_LLRDMA_REC_ALIGN(off);
        rec = (mca_btl_llrdma_hdr_t *)((char *)frag->hdr + off);
    }
}

static mca_btl_llrdma_frag_t *recv_frag(const struct ibv_wc *wc)
{
    return (mca_btl_llrdma_frag_t *)(uintptr_t)(wc->wr_id & ~(uint64_t)1);
}

/* The path's send-CQ room ran out with a connection that had slots of its
 * own (mca_btl_llrdma_conn_slots): its own completions may never come, so
 * once room is back every endpoint with work on the path is drained.  Rare
 * (the CQ is shared by every connection of the path), hence the walk. */
static void drain_starved(mca_btl_llrdma_module_t *m, int p)
{
    mca_btl_llrdma_endpoint_t *ep = NULL;

    m->path[p].scq_starved = 0;
    while (NULL != (ep = mca_btl_llrdma_endpoint_next(m, ep)) && m->path[p].scq_room > 0) {
        mca_btl_llrdma_endpoint_drain_path(ep, p);
    }
}

/* One batch of one CQ.  Under the lock: poll, retire sends, set failed
 * receives aside.  Unlocked: hand the received buffers to ob1.  Under the
 * lock again: repost them in one chained post and count them towards their
 * senders' credits.  Then deliver the upcalls queued meanwhile.  The
 * caller holds the progress token. */
static int poll_cq(mca_btl_llrdma_module_t *m, int p, struct ibv_cq *cq)
{
    struct ibv_wc wc[LLRDMA_POLL_BATCH];
    mca_btl_llrdma_frag_t *rx[LLRDMA_POLL_BATCH];
    mca_btl_llrdma_conn_t *rx_piece[LLRDMA_POLL_BATCH];
    uint32_t rx_len[LLRDMA_POLL_BATCH];
    /* Received buffers by queue pair, runs in arrival order (mostly one);
     * the current run in cur_qp, cur_len. */
    uint32_t run_qp[LLRDMA_POLL_BATCH], run_len[LLRDMA_POLL_BATCH], cur_qp = 0, cur_len = 0;
    int n, nrx = 0, nrun = 0, posted = 0;

    MCA_BTL_LLRDMA_LOCK(m);
    n = mca_btl_llrdma_verbs.poll_cq(cq, LLRDMA_POLL_BATCH, wc);
    if (n < 0) {
        char detail[160];
        snprintf(detail, sizeof(detail), "btl/llrdma: ibv_poll_cq failed on %s:%d (%d)",
                 m->port.dev, m->port.port, n);
        mca_btl_llrdma_module_fatal(m, NULL, detail);
        n = 0;
    }
    m->completions[p] += (uint64_t)n;
    for (int i = 0; i < n; ++i) {
        mca_btl_llrdma_frag_t *frag;
        const mca_btl_llrdma_hdr_t *h;

        if (!(wc[i].wr_id & 1u)) {
            mca_btl_llrdma_conn_send_done((mca_btl_llrdma_wr_t *)(uintptr_t)wc[i].wr_id,
                                          wc[i].status);
            continue;
        }
        frag = recv_frag(&wc[i]);
        h = frag->hdr;
        if (IBV_WC_SUCCESS != wc[i].status || !records_ok((const char *)h, wc[i].byte_len)) {
            recv_failed(m, p, &wc[i]);
            continue;
        }
        rx_piece[nrx] = NULL;
        if (h->flags & (MCA_BTL_LLRDMA_HDR_CREDIT | MCA_BTL_LLRDMA_HDR_PIECE)) {
            mca_btl_llrdma_conn_t *conn = conn_by_qp_num(m, wc[i].qp_num);
            if ((h->flags & MCA_BTL_LLRDMA_HDR_CREDIT) && NULL != conn) {
                /* Our credits, returned in the peer's header. */
                llrdma_credit_piggyback(&conn->credit, h->credit);
            }
            if (h->flags & MCA_BTL_LLRDMA_HDR_PIECE) {
                if (NULL == conn) {
                    /* Its connection is gone (failed): the rest never comes. */
                    repost_one(m, p, frag);
                    continue;
                }
                rx_piece[nrx] = conn;
            }
        }
        rx[nrx] = frag;
        rx_len[nrx++] = wc[i].byte_len;
        if (cur_qp != wc[i].qp_num && 0 != cur_len) {
            run_qp[nrun] = cur_qp;
            run_len[nrun++] = cur_len;
            cur_len = 0;
        }
        cur_qp = wc[i].qp_num;
        ++cur_len;
    }
    if (0 != cur_len) {
        run_qp[nrun] = cur_qp;
        run_len[nrun++] = cur_len;
    }
    if (m->path[p].scq_starved && m->path[p].scq_room > 0) {
        drain_starved(m, p);
    }
    MCA_BTL_LLRDMA_UNLOCK(m);

    if (nrx > 0) {
        for (int k = 0; k < nrx; ++k) {
            mca_btl_llrdma_hdr_t *rec = rx[k]->hdr;
            if (NULL != rx_piece[k]) {
                deliver_piece(m, rx_piece[k], rx[k]);
            } else if (!(rec->flags & MCA_BTL_LLRDMA_HDR_PACKED)) {
                /* One record, whose length records_ok checked: most buffers. */
                deliver_record(m, rx[k], rec);
            } else {
                deliver_packed(m, rx[k], rx_len[k]);
            }
        }
        /* ob1 copied what it needs inside the callbacks: the buffers go back. */
        MCA_BTL_LLRDMA_LOCK(m);
        if (0 != mca_btl_llrdma_path_repost(m, p, rx, nrx, &posted)) {
            char detail[160];
            snprintf(detail, sizeof(detail),
                     "btl/llrdma: reposting a receive buffer on %s:%d failed (ibv_post_srq_recv)",
                     m->port.dev, m->port.port);
            for (int k = posted; k < nrx; ++k) {
                mca_btl_llrdma_pool_put(rx[k]);
            }
            mca_btl_llrdma_module_fatal(m, NULL, detail);
        }
        /* Buffers back in the queue count towards their senders' credits,
         * a run from one queue pair at a time (only those posted). */
        for (int r = 0; r < nrun && posted > 0; ++r) {
            uint32_t count = run_len[r] < (uint32_t)posted ? run_len[r] : (uint32_t)posted;
            mca_btl_llrdma_conn_t *conn = conn_by_qp_num(m, run_qp[r]);
            posted -= (int)count;
            if (NULL != conn) {
                mca_btl_llrdma_conn_recv_done(conn, count);
            }
        }
        MCA_BTL_LLRDMA_UNLOCK(m);
    }
    (void)mca_btl_llrdma_done_run(m);
    return n;
}

static int poll_path(mca_btl_llrdma_module_t *m, int p)
{
    return poll_cq(m, p, m->path[p].rcq) + poll_cq(m, p, m->path[p].scq);
}

int mca_btl_llrdma_module_poll_path(mca_btl_llrdma_module_t *m, int p, int rounds)
{
    int count = 0, n;
    do {
        n = poll_path(m, p);
        count += n;
    } while (n > 0 && --rounds > 0);
    return count;
}

int mca_btl_llrdma_module_progress_control(mca_btl_llrdma_module_t *m)
{
    int count = 0;

    /* The CM channel costs a system call: every call while connections are
     * being set up, otherwise every cm_poll_every calls (a peer's first
     * connection request waits at most that long). */
    if (m->connecting > 0 || m->retrying > 0 ||
        ++m->cm_tick >= mca_btl_llrdma_component.cm_poll_every) {
        m->cm_tick = 0;
        count += mca_btl_llrdma_cm_progress(m);
    }
    if (m->retrying > 0) {
        count += mca_btl_llrdma_endpoint_retries(m);
    }
    /* Credits arrive by RDMA write, without a completion: look for them
     * while sends wait. */
    if (m->waiting > 0) {
        count += mca_btl_llrdma_endpoint_unstall(m);
    }
    return count;
}

/* Any thread may progress; one at a time per module (the token, which is
 * only ever tried, never waited for).  A thread that finds another one
 * progressing this module leaves: what it waits for is being polled
 * (btl/uct does the same). */
int mca_btl_llrdma_module_progress(mca_btl_llrdma_module_t *m)
{
    int count = 0;

    /* The application is in Open MPI: the progress thread leaves the LL
     * path to it (btl_llrdma_thread.c).  Only then: without the look this
     * hot path pays no atomic. */
    if (m->ll_idle_look) {
        __atomic_fetch_add(&m->app_progress, 1, __ATOMIC_RELAXED);
    }
    if (!mca_btl_llrdma_token_try(m)) {
        return 0;
    }
    for (int p = 0; p < LLRDMA_NPATHS; ++p) {
        /* A path without a connection yet has nothing to poll: at hint 8K
         * a job of small messages never makes a BW one (two empty polls per
         * call, 15 instructions per received 8 B message in
         * contrib/bench/send-cost.sh). */
        if (m->path_used[p] && __atomic_load_n(&m->path[p].qp_made, __ATOMIC_RELAXED)) {
            count += poll_path(m, p);
        }
    }
    MCA_BTL_LLRDMA_LOCK(m);
    count += mca_btl_llrdma_module_progress_control(m);
    mca_btl_llrdma_stuck_check(m, count > 0);
    mca_btl_llrdma_wd_check(m);
    MCA_BTL_LLRDMA_UNLOCK(m);
    count += mca_btl_llrdma_async_poll(m);
    count += mca_btl_llrdma_done_run(m);
    mca_btl_llrdma_token_release(m);
    /* What another thread queued while the token was taken. */
    mca_btl_llrdma_done_kick(m);
    return count;
}
