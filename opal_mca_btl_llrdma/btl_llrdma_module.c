/*
 * btl/llrdma module: creating and destroying a port's module (its PD, its
 * paths through btl_llrdma_path.c, the rdma_cm listener) and the
 * ob1-facing functions (add_procs, alloc, free, prepare_src, send, sendi,
 * finalize).
 *
 * The device is asked for the profile's values and what it granted is read
 * back right away with a probe QP, before any peer exists, so the per-rank
 * dump shows requested vs granted from MPI_Init on (background.md's failure
 * case 2: a setting that never reached the device).
 */
#include "opal_config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "opal/datatype/opal_convertor.h"
#include "llrdma_ompi_compat.h" /* the PMIx interface of this series */
#include "opal/util/output.h"

#include "btl_llrdma.h"
#include "btl_llrdma_post.h"
#include "btl_llrdma_gpu.h"
#include "btl_llrdma_rdma.h"
#include "llrdma_reach.h"
#include "llrdma_mca_common.h"

static int find_cm_context(mca_btl_llrdma_module_t *m)
{
    int n = 0;
    struct ibv_context **list = mca_btl_llrdma_verbs.cm_get_devices(&n);

    m->ctx = NULL;
    if (NULL == list) {
        return OPAL_ERR_NOT_AVAILABLE;
    }
    for (int i = 0; i < n && NULL == m->ctx; ++i) {
        const char *name = mca_btl_llrdma_verbs.get_device_name(list[i]->device);
        if (NULL != name && 0 == strcmp(name, m->port.dev)) {
            m->ctx = list[i];
        }
    }
    mca_btl_llrdma_verbs.cm_free_devices(list);
    return NULL == m->ctx ? OPAL_ERR_NOT_AVAILABLE : OPAL_SUCCESS;
}

/* A listener's secret (docs/btl-design.md, "Who may connect"): 64 random
 * bits, never 0 (a request without one carries 0).  Without the kernel's
 * randomness (getrandom and /dev/urandom both failing, which no supported
 * system does) the clock and addresses stand in, said at verbose 1: such a
 * secret keeps out strays, not an attacker. */
static uint64_t new_secret(void)
{
    uint64_t v = 0;
    struct timespec ts;

    for (int tries = 0; 0 == v && tries < 4; ++tries) {
        if (sizeof(v) != getrandom(&v, sizeof(v), GRND_NONBLOCK)) {
            FILE *f = fopen("/dev/urandom", "rb");
            if (NULL == f || 1 != fread(&v, sizeof(v), 1, f)) {
                v = 0;
            }
            if (NULL != f) {
                fclose(f);
            }
        }
    }
    if (0 == v) {
        clock_gettime(CLOCK_REALTIME, &ts);
        v = ((uint64_t)ts.tv_nsec << 32 ^ (uint64_t)ts.tv_sec ^ (uint64_t)getpid() << 16 ^
             (uint64_t)(uintptr_t)&ts) |
            1;
        opal_output_verbose(1, mca_btl_llrdma_component.output,
                            "btl:llrdma: no kernel randomness for the listener's secret; "
                            "using the clock");
    }
    return v;
}

static int listen_create(mca_btl_llrdma_module_t *m)
{
    struct sockaddr_in sin;

    m->cm_channel = mca_btl_llrdma_verbs.cm_create_event_channel();
    if (NULL == m->cm_channel) {
        goto fail;
    }
    if (0 != mca_btl_llrdma_verbs.cm_create_id(m->cm_channel, &m->listen_id, m, RDMA_PS_TCP)) {
        goto fail_channel;
    }
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr = m->port.ipv4;
    if (0 != mca_btl_llrdma_verbs.cm_bind_addr(m->listen_id, (struct sockaddr *)&sin) ||
        0 != mca_btl_llrdma_verbs.cm_listen(m->listen_id, 128)) {
        goto fail_id;
    }
    memset(&m->addr, 0, sizeof(m->addr));
    m->addr.ipv4 = m->port.ipv4.s_addr;
    m->addr.cm_port = mca_btl_llrdma_verbs.cm_get_src_port(m->listen_id);
    m->addr.ib_port = (uint8_t)m->port.port;
    m->addr.link_layer = (uint8_t)m->port.link_layer;
    m->addr.prefix_len = (uint8_t)m->port.prefix_len;
    snprintf(m->addr.dev, sizeof(m->addr.dev), "%.23s", m->port.dev);
    m->addr.hint = m->profile->hint;
    m->addr.secret = new_secret();
    opal_output_verbose(10, mca_btl_llrdma_component.output, "btl:llrdma: %s:%d listens on %s:%u",
                        m->port.dev, m->port.port, inet_ntoa(m->port.ipv4),
                        (unsigned)ntohs(m->addr.cm_port));
    for (int p = 0; p < LLRDMA_NPATHS; ++p) {
        m->addr.frag_max[p] = m->path_used[p] ? m->lim.frag_max[p] : 0;
    }
    return OPAL_SUCCESS;

fail_id:
    (void)mca_btl_llrdma_verbs.cm_destroy_id(m->listen_id);
    m->listen_id = NULL;
fail_channel:
    mca_btl_llrdma_verbs.cm_destroy_event_channel(m->cm_channel);
    m->cm_channel = NULL;
fail:
    return OPAL_ERR_NOT_AVAILABLE;
}

/* ----------------------------------------------------- ob1 functions */

static int llrdma_add_procs(struct mca_btl_base_module_t *btl, size_t nprocs,
                            struct opal_proc_t **procs, struct mca_btl_base_endpoint_t **peers,
                            opal_bitmap_t *reachable)
{
    mca_btl_llrdma_module_t *m = (mca_btl_llrdma_module_t *)btl;

    /* Only the endpoint list's lock (in lookup): ob1 holds its proc lock
     * around this call, and a thread in one of our callbacks, holding the
     * module lock, may be waiting for it.  The module's limits (ob1's) stay
     * this rank's own for every peer: a peer that receives smaller fragments
     * gets larger ones in pieces (mca_btl_llrdma_endpoint_route). */
    for (size_t i = 0; i < nprocs; ++i) {
        mca_btl_llrdma_endpoint_t *ep;
        if (procs[i]->proc_name.jobid == m->self.jobid &&
            procs[i]->proc_name.vpid == m->self.vpid) {
            continue; /* btl/self */
        }
        ep = mca_btl_llrdma_endpoint_lookup(m, &procs[i]->proc_name, 1);
        if (NULL == ep) {
            continue; /* the peer published no llrdma address we can reach */
        }
        if (ep->frag_max[LLRDMA_PATH_BW] < m->lim.frag_max[LLRDMA_PATH_BW]) {
            opal_output_verbose(
                5, mca_btl_llrdma_component.output,
                "btl:llrdma: %s receives fragments up to %llu bytes (size hint %llu); larger "
                "ones of this rank (up to %llu) go to it in pieces",
                OPAL_NAME_PRINT(ep->proc->proc_name),
                (unsigned long long)ep->frag_max[LLRDMA_PATH_BW], (unsigned long long)ep->peer_hint,
                (unsigned long long)m->lim.frag_max[LLRDMA_PATH_BW]);
        }
        peers[i] = ep;
        if (NULL != reachable) {
            opal_bitmap_set_bit(reachable, (int)i);
        }
        opal_output_verbose(
            50, mca_btl_llrdma_component.output, "btl:llrdma: %s reachable at %s:%u",
            OPAL_NAME_PRINT(procs[i]->proc_name), ep->addr.dev, (unsigned)ntohs(ep->addr.cm_port));
    }
    return OPAL_SUCCESS;
}

/* Endpoints stay until finalize: a peer may still be connected to us. */
static int llrdma_del_procs(struct mca_btl_base_module_t *btl, size_t nprocs,
                            struct opal_proc_t **procs, struct mca_btl_base_endpoint_t **peers)
{
    (void)btl;
    (void)nprocs;
    (void)procs;
    (void)peers;
    return OPAL_SUCCESS;
}

static mca_btl_llrdma_frag_t *frag_alloc(mca_btl_llrdma_module_t *m,
                                         struct mca_btl_base_endpoint_t *ep, size_t size,
                                         uint32_t flags)
{
    /* The path the fragment will take to this peer (the one chooser): its
     * pool's buffers hold this side's largest fragment on that path, which
     * is at least the peer's (a larger one goes in pieces: route). */
    llrdma_btl_route_t r = {.path = -1};
    mca_btl_llrdma_frag_t *frag;
    int p;

    if (NULL != ep) {
        mca_btl_llrdma_endpoint_route(ep, size, &r);
    }
    p = r.path;
    if (p < 0 || !m->path_used[p]) {
        return NULL;
    }
    frag = mca_btl_llrdma_pool_get(&m->path[p].send_pool);
    if (NULL == frag) {
        return NULL; /* ob1 queues the request and retries from progress */
    }
    mca_btl_llrdma_frag_init_send(frag, ep, size, flags);
    return frag;
}

static mca_btl_base_descriptor_t *llrdma_alloc(struct mca_btl_base_module_t *btl,
                                               struct mca_btl_base_endpoint_t *ep, uint8_t order,
                                               size_t size, uint32_t flags)
{
    mca_btl_llrdma_module_t *m = (mca_btl_llrdma_module_t *)btl;
    mca_btl_llrdma_frag_t *frag;
    (void)order;
    MCA_BTL_LLRDMA_LOCK(m);
    frag = frag_alloc(m, ep, size, flags);
    MCA_BTL_LLRDMA_UNLOCK(m);
    return NULL == frag ? NULL : &frag->base;
}

static int llrdma_free(struct mca_btl_base_module_t *btl, mca_btl_base_descriptor_t *des)
{
    mca_btl_llrdma_module_t *m = (mca_btl_llrdma_module_t *)btl;
    MCA_BTL_LLRDMA_LOCK(m);
    mca_btl_llrdma_pool_put((mca_btl_llrdma_frag_t *)des);
    MCA_BTL_LLRDMA_UNLOCK(m);
    return OPAL_SUCCESS;
}

/* Always a copy into a registered fragment: large contiguous messages go by
 * RDMA (ob1's rendezvous with btl_get/btl_put), never through here. */
static mca_btl_base_descriptor_t *llrdma_prepare_src(struct mca_btl_base_module_t *btl,
                                                     struct mca_btl_base_endpoint_t *ep,
                                                     struct opal_convertor_t *conv, uint8_t order,
                                                     size_t reserve, size_t *size, uint32_t flags)
{
    mca_btl_llrdma_module_t *m = (mca_btl_llrdma_module_t *)btl;
    size_t max = m->super.btl_max_send_size;
    mca_btl_llrdma_frag_t *frag;
    struct iovec iov;
    uint32_t count = 1;
    size_t max_data;

    (void)order;
    if (reserve >= max) {
        return NULL;
    }
    if (reserve + *size > max) {
        *size = max - reserve;
    }
    MCA_BTL_LLRDMA_LOCK(m);
    frag = frag_alloc(m, ep, reserve + *size, flags);
    MCA_BTL_LLRDMA_UNLOCK(m);
    if (NULL == frag) {
        return NULL;
    }
    /* The fragment is this thread's until it is sent: pack unlocked. */
    iov.iov_base = (char *)mca_btl_llrdma_frag_payload(frag) + reserve;
    iov.iov_len = max_data = *size;
    if (opal_convertor_pack(conv, &iov, &count, &max_data) < 0) {
        MCA_BTL_LLRDMA_LOCK(m);
        mca_btl_llrdma_pool_put(frag);
        MCA_BTL_LLRDMA_UNLOCK(m);
        return NULL;
    }
    *size = max_data;
    frag->segment.seg_len = reserve + max_data;
    return &frag->base;
}

static int send_locked(struct mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                       struct mca_btl_base_descriptor_t *des, mca_btl_base_tag_t tag);

/* ob1 calls these from any thread, from its callbacks too: each takes the
 * module lock (a branch only, without threads) and, once it is released,
 * delivers what the call queued for ob1 (a failed endpoint's fragments). */
static int llrdma_send(struct mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                       struct mca_btl_base_descriptor_t *des, mca_btl_base_tag_t tag)
{
    mca_btl_llrdma_module_t *m = (mca_btl_llrdma_module_t *)btl;
    int rc;

    MCA_BTL_LLRDMA_LOCK(m);
    rc = send_locked(btl, ep, des, tag);
    MCA_BTL_LLRDMA_UNLOCK(m);
    mca_btl_llrdma_done_kick(m);
    return rc;
}

/* Out of line: inlined, its registers cost the fast lane a longer entry
 * and exit on every call. */
static int llrdma_sendi_locked(struct mca_btl_base_module_t *btl,
                               struct mca_btl_base_endpoint_t *ep, struct opal_convertor_t *conv,
                               void *header, size_t header_size, size_t payload_size, uint8_t order,
                               uint32_t flags, mca_btl_base_tag_t tag,
                               mca_btl_base_descriptor_t **descriptor) __attribute__((noinline));

/* memcpy for the few bytes of a small send (ob1's header, a short payload):
 * overlapping word moves in line instead of a call into libc, whose entry
 * and size dispatch cost more than the copy (docs/btl-design.md, "Threads",
 * the small-message send). */
static inline __attribute__((always_inline)) void copy_small(void *dst, const void *src, size_t n)
{
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    uint64_t a, b;

    if (n >= 8 && n <= 16) {
        memcpy(&a, s, 8);
        memcpy(&b, s + n - 8, 8);
        memcpy(d, &a, 8);
        memcpy(d + n - 8, &b, 8);
    } else if (n > 16 && n <= 32) {
        uint64_t c, e;
        memcpy(&a, s, 8);
        memcpy(&b, s + 8, 8);
        memcpy(&c, s + n - 16, 8);
        memcpy(&e, s + n - 8, 8);
        memcpy(d, &a, 8);
        memcpy(d + 8, &b, 8);
        memcpy(d + n - 16, &c, 8);
        memcpy(d + n - 8, &e, 8);
    } else if (n >= 4 && n < 8) {
        uint32_t x, y;
        memcpy(&x, s, 4);
        memcpy(&y, s + n - 4, 4);
        memcpy(d, &x, 4);
        memcpy(d + n - 4, &y, 4);
    } else if (n < 4) {
        for (size_t i = 0; i < n; ++i) {
            d[i] = s[i];
        }
    } else {
        memcpy(d, s, n);
    }
}

/* Each size sendi posts has its own counter. */
_Static_assert(LLRDMA_SENDI_STACK <= LLRDMA_HIST_SMALL_MAX, "sendi sizes outside hist_small");

/* Our header, ob1's and the data of a small send, copied into one buffer
 * on the caller's stack: one SGE for the device to copy at the post
 * (gathering three instead cost rxe's post more than the copies, counted
 * in docs/benchmarks-softroce.md). */
typedef union {
    mca_btl_llrdma_hdr_t h;
    unsigned char b[LLRDMA_SENDI_STACK];
} llrdma_sendi_buf_t;

static inline __attribute__((always_inline)) int
sendi_build(llrdma_sendi_buf_t *w, struct opal_convertor_t *conv, const void *header,
            size_t header_size, size_t payload_size, mca_btl_base_tag_t tag)
{
    w->h.tag = tag;
    w->h.flags = 0;
    w->h.credit = 0;
    w->h.len = MCA_BTL_LLRDMA_HDR_WORD(header_size + payload_size);
    copy_small(&w->h + 1, header, header_size);
    if (0 != payload_size && !opal_convertor_need_buffers(conv)) {
        /* Contiguous (the usual small message): a copy, not the
         * convertor's pack, as vader's sendi. */
        void *src = NULL;
        opal_convertor_get_current_pointer(conv, &src);
        copy_small((char *)(&w->h + 1) + header_size, src, payload_size);
    } else if (0 != payload_size) {
        struct iovec iov = {.iov_base = (char *)(&w->h + 1) + header_size, .iov_len = payload_size};
        uint32_t count = 1;
        size_t max_data = payload_size;
        if (opal_convertor_pack(conv, &iov, &count, &max_data) < 0) {
            return OPAL_ERROR;
        }
    }
    return OPAL_SUCCESS;
}

/* ob1's small messages.  The common one (connected, nothing queued, a slot
 * and a credit, within the inline size) is posted here in one function, as
 * UCX's am_short: no fragment, no call but the device's post
 * (docs/benchmarks-softroce.md, "Instructions per 8 B send").  Two lanes
 * (docs/btl-design.md, "The small-message send"): the fast one spends the
 * connection's budget (llrdma_sq_fast_budget: sends known to need no slot,
 * credit, queue or signalling decision) and checks only the state, the
 * size and the shared CQ room; the full one decides all of it, posts, and
 * counts the budget anew.  Anything else (to pack behind queued messages,
 * to wait, larger) takes llrdma_sendi_locked.  ob1 reads the descriptor
 * only when sendi fails. */
static int llrdma_sendi(struct mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                        struct opal_convertor_t *conv, void *header, size_t header_size,
                        size_t payload_size, uint8_t order, uint32_t flags, mca_btl_base_tag_t tag,
                        mca_btl_base_descriptor_t **descriptor)
{
    mca_btl_llrdma_module_t *m = (mca_btl_llrdma_module_t *)btl;
    const size_t total = header_size + payload_size;
    const uint32_t wire = (uint32_t)(sizeof(mca_btl_llrdma_hdr_t) + total);
    /* The fast lane's path: LL where the message fits its fragments, else
     * BW.  A path the two sides do not share has no connection, so the
     * lane never takes one; the full lane chooses by the rule. */
    int p = total <= ep->frag_max[LLRDMA_PATH_LL] ? LLRDMA_PATH_LL : LLRDMA_PATH_BW;
    mca_btl_llrdma_conn_t *conn;
    llrdma_sendi_buf_t w;
    int rc;

    MCA_BTL_LLRDMA_LOCK(m);
    conn = ep->conn[p];
    if (OPAL_LIKELY(NULL != conn && llrdma_sq_fast_ok(&conn->sq) &&
                    LLRDMA_CONN_ESTABLISHED == conn->state && wire <= conn->sendi_max)) {
        rc = sendi_build(&w, conv, header, header_size, payload_size, tag);
        if (OPAL_LIKELY(OPAL_SUCCESS == rc)) {
            llrdma_hist_small_add_sw(&m->hist_small, p, wire);
            rc = mca_btl_llrdma_conn_post_inline(ep, conn, &w.h, wire, 1);
        }
        if (OPAL_UNLIKELY(OPAL_SUCCESS != rc) && NULL != descriptor) {
            *descriptor = NULL;
        }
        MCA_BTL_LLRDMA_UNLOCK(m);
        /* The fast lane's post queues callbacks only when it fails. */
        if (OPAL_UNLIKELY(OPAL_SUCCESS != rc) && mca_btl_llrdma_done_pending(m)) {
            mca_btl_llrdma_done_kick(m);
        }
        return rc;
    }
    p = mca_btl_llrdma_endpoint_path_for(ep, total);
    conn = p >= 0 ? ep->conn[p] : NULL;
    if (NULL != conn && wire <= conn->sendi_max &&
        mca_btl_llrdma_endpoint_post_now(ep, p, conn, total)) {
        /* The full lane. */
        rc = sendi_build(&w, conv, header, header_size, payload_size, tag);
        if (OPAL_SUCCESS == rc) {
            llrdma_hist_small_add_sw(&m->hist_small, p, wire);
            rc = mca_btl_llrdma_conn_post_inline(ep, conn, &w.h, wire, 0);
        }
        if (OPAL_SUCCESS == rc) {
            /* What any small send may spend: the credits above the higher
             * pack floor (that of a message that packs, as one of 0 bytes). */
            const uint32_t credits = mca_btl_llrdma_conn_credits(conn);
            const uint32_t floor = mca_btl_llrdma_conn_pack_floor(
                conn, mca_btl_llrdma_component.coalesce, ep->frag_max[p], 0);
            conn->sq.fast = llrdma_sq_fast_budget(
                &conn->sq, credits > floor ? credits - floor : 0,
                mca_btl_llrdma_conn_batch_at(conn, mca_btl_llrdma_component.sq_batch));
        } else if (NULL != descriptor) {
            *descriptor = NULL;
        }
    } else {
        rc = llrdma_sendi_locked(btl, ep, conv, header, header_size, payload_size, order, flags,
                                 tag, descriptor);
    }
    MCA_BTL_LLRDMA_UNLOCK(m);
    if (mca_btl_llrdma_done_pending(m)) {
        mca_btl_llrdma_done_kick(m);
    }
    return rc;
}

static int send_locked(struct mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                       struct mca_btl_base_descriptor_t *des, mca_btl_base_tag_t tag)
{
    mca_btl_llrdma_frag_t *frag = (mca_btl_llrdma_frag_t *)des;
    int rc;

    frag->tag = tag;
    rc = mca_btl_llrdma_endpoint_send(ep, frag);
    if (1 == rc) {
        /* Inline: the data left with the post; nothing will complete later.
         * A callback ob1 asked for anyway runs once the lock is released. */
        mca_btl_llrdma_frag_complete(frag, OPAL_SUCCESS);
    } else if (2 == rc) {
        rc = 1; /* posted from our own copy: done for ob1, ours until its completion */
    }
    return rc;
}

static int llrdma_sendi_locked(struct mca_btl_base_module_t *btl,
                               struct mca_btl_base_endpoint_t *ep, struct opal_convertor_t *conv,
                               void *header, size_t header_size, size_t payload_size, uint8_t order,
                               uint32_t flags, mca_btl_base_tag_t tag,
                               mca_btl_base_descriptor_t **descriptor)
{
    mca_btl_llrdma_module_t *m = (mca_btl_llrdma_module_t *)btl;
    size_t total = header_size + payload_size;
    int p = mca_btl_llrdma_endpoint_path_for(ep, total);
    mca_btl_llrdma_conn_t *conn = (p >= 0) ? ep->conn[p] : NULL;
    mca_btl_llrdma_frag_t *frag;
    int rc;

    (void)order;
    if (NULL != descriptor) {
        *descriptor = NULL;
    }
    /* Immediate only: connected, nothing queued ahead, a free slot and a
     * credit.  Else hand ob1 a descriptor for its regular path (it gives up
     * on the message without one), which queues in order behind the rest. */
    if (p >= 0 && !opal_list_is_empty(&ep->pending[p]) && total <= m->super.btl_eager_limit) {
        /* Fragments wait on this path: pack behind the last one. */
        char *dst = mca_btl_llrdma_endpoint_pack_reserve(ep, p, total);
        if (NULL != dst) {
            memcpy(dst, header, header_size);
            if (0 != payload_size) {
                struct iovec iov = {.iov_base = dst + header_size, .iov_len = payload_size};
                uint32_t count = 1;
                size_t max_data = payload_size;
                if (opal_convertor_pack(conv, &iov, &count, &max_data) < 0) {
                    return OPAL_ERROR;
                }
            }
            mca_btl_llrdma_endpoint_pack_commit(ep, p, tag, total);
            /* Bypasses endpoint_send, which counts every other message. */
            llrdma_hist_add_sw(&m->hist, p, sizeof(mca_btl_llrdma_hdr_t) + total,
                               sizeof(mca_btl_llrdma_hdr_t) + total);
            llrdma_hist_wait_sw(&m->hist, p);
            return OPAL_SUCCESS;
        }
    }
    if (total > m->super.btl_eager_limit || !mca_btl_llrdma_endpoint_post_now(ep, p, conn, total)) {
        if (NULL != descriptor && total <= m->super.btl_eager_limit) {
            frag = frag_alloc(m, ep, total, flags);
            *descriptor = NULL == frag ? NULL : &frag->base;
        }
        return OPAL_ERR_RESOURCE_BUSY;
    }
    frag = frag_alloc(m, ep, total, flags | MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
    if (NULL == frag) {
        return OPAL_ERR_RESOURCE_BUSY;
    }
    memcpy(mca_btl_llrdma_frag_payload(frag), header, header_size);
    if (0 != payload_size) {
        struct iovec iov = {.iov_base = (char *)mca_btl_llrdma_frag_payload(frag) + header_size,
                            .iov_len = payload_size};
        uint32_t count = 1;
        size_t max_data = payload_size;
        if (opal_convertor_pack(conv, &iov, &count, &max_data) < 0) {
            mca_btl_llrdma_pool_put(frag);
            return OPAL_ERROR;
        }
    }
    frag->tag = tag;
    rc = mca_btl_llrdma_endpoint_send(ep, frag);
    if (1 == rc) {
        mca_btl_llrdma_pool_put(frag);
        return OPAL_SUCCESS;
    }
    /* Posted (0, or 2: done at post): it returns to its pool on completion. */
    return rc < 0 ? rc : OPAL_SUCCESS;
}

static int llrdma_register_error(struct mca_btl_base_module_t *btl,
                                 mca_btl_base_module_error_cb_fn_t cbfunc)
{
    mca_btl_llrdma_module_t *m = (mca_btl_llrdma_module_t *)btl;
    opal_list_item_t *item;

    /* Release: the progress thread, already running, may read it (done_run)
     * and must then also see what the caller set up before registering.
     * Under the lock: done_run holds an error back only after looking again
     * under it, so none is held after this. */
    MCA_BTL_LLRDMA_LOCK(m);
    __atomic_store_n(&m->error_cb, cbfunc, __ATOMIC_RELEASE);
    while (NULL != cbfunc && NULL != (item = opal_list_remove_first(&m->held))) {
        mca_btl_llrdma_done_queue(m, item); /* delivered by the next progress */
    }
    MCA_BTL_LLRDMA_UNLOCK(m);
    return OPAL_SUCCESS;
}

static void module_destroy(mca_btl_llrdma_module_t *m)
{
    opal_list_item_t *item;
    llrdma_hist_t *h = &mca_btl_llrdma_component.hist;

    /* The thread first: it takes the module lock and polls the CQs. */
    mca_btl_llrdma_thread_stop(m);
    for (int p = 0; p < LLRDMA_NPATHS; ++p) {
        h->cq_completions[p] += m->completions[p];
        h->cq_events[p] += m->events[p];
        h->thread_completions[p] += m->thread_completions[p];
    }
    h->thread_cpu_us += m->thread_cpu_us;
    llrdma_hist_merge(h, &m->hist);
    llrdma_hist_small_fold(h, &m->hist_small);
    memset(&m->hist, 0, sizeof(m->hist));
    memset(&m->hist_small, 0, sizeof(m->hist_small));

    /* ob1 is finalizing: what it was never told stays untold. */
    mca_btl_llrdma_done_drop(m);
    /* QPs before the CQs and SRQs they use; ids after their QPs. */
    while (NULL != (item = opal_list_remove_first(&m->conns))) {
        mca_btl_llrdma_conn_destroy((mca_btl_llrdma_conn_t *)item);
        OBJ_RELEASE(item);
    }
    while (NULL != (item = opal_list_remove_first(&m->endpoints))) {
        OBJ_RELEASE(item);
    }
    mca_btl_llrdma_cword_fini(m); /* after the connections that used them */
    if (NULL != m->listen_id) {
        (void)mca_btl_llrdma_verbs.cm_destroy_id(m->listen_id);
    }
    if (NULL != m->cm_channel) {
        mca_btl_llrdma_verbs.cm_destroy_event_channel(m->cm_channel);
    }
    mca_btl_llrdma_rdma_fini(m);
    for (int p = LLRDMA_NPATHS - 1; p >= 0; --p) {
        if (m->path_used[p]) {
            mca_btl_llrdma_path_destroy(m, p);
        }
    }
    mca_btl_llrdma_thread_channel_destroy(m); /* after its CQs */
    (void)mca_btl_llrdma_verbs.dealloc_pd(m->pd);
    OBJ_DESTRUCT(&m->done);
    OBJ_DESTRUCT(&m->held);
    OBJ_DESTRUCT(&m->by_name);
    OBJ_DESTRUCT(&m->by_qp);
    OBJ_DESTRUCT(&m->conns);
    OBJ_DESTRUCT(&m->endpoints);
    OBJ_DESTRUCT(&m->ep_lock);
    OBJ_DESTRUCT(&m->lock);
    free(m);
}

static int llrdma_finalize(struct mca_btl_base_module_t *btl)
{
    mca_btl_llrdma_component_t *c = &mca_btl_llrdma_component;
    for (int i = 0; i < c->nmodules; ++i) {
        if (c->modules[i] == (mca_btl_llrdma_module_t *)btl) {
            c->modules[i] = NULL;
        }
    }
    /* The progress thread first (module_destroy stops it again, a no-op):
     * it may still post, and so write the counters reported below. */
    mca_btl_llrdma_thread_stop((mca_btl_llrdma_module_t *)btl);
    if (((mca_btl_llrdma_module_t *)btl)->gpu_regs > 0) {
        const mca_btl_llrdma_module_t *m = (const mca_btl_llrdma_module_t *)btl;
        opal_output_verbose(5, c->output, "btl:llrdma: %s:%d: %llu GPU memory registration(s) (%s)",
                            m->port.dev, m->port.port, (unsigned long long)m->gpu_regs,
                            m->gpu_report);
    }
    if (((mca_btl_llrdma_module_t *)btl)->split_frags +
            ((mca_btl_llrdma_module_t *)btl)->joined_frags >
        0) {
        const mca_btl_llrdma_module_t *m = (const mca_btl_llrdma_module_t *)btl;
        opal_output_verbose(5, c->output,
                            "btl:llrdma: %s:%d: %llu fragment(s) sent in pieces, %llu joined from "
                            "pieces (peers with smaller receive buffers)",
                            m->port.dev, m->port.port, (unsigned long long)m->split_frags,
                            (unsigned long long)m->joined_frags);
    }
    if (((mca_btl_llrdma_module_t *)btl)->foreign_rejects > 0) {
        const mca_btl_llrdma_module_t *m = (const mca_btl_llrdma_module_t *)btl;
        opal_output_verbose(1, c->output,
                            "btl:llrdma: %s:%d rejected %llu connection request(s) from outside "
                            "this job",
                            m->port.dev, m->port.port, (unsigned long long)m->foreign_rejects);
    }
    {
        const mca_btl_llrdma_module_t *m = (const mca_btl_llrdma_module_t *)btl;
        opal_output_verbose(5, c->output,
                            "btl:llrdma: %s:%d: %llu sends done for ob1 at post (copied), %llu "
                            "at their completion; %llu waited for a busy send queue (batched)",
                            m->port.dev, m->port.port, (unsigned long long)m->sends_done_at_post[1],
                            (unsigned long long)m->sends_done_at_post[0],
                            (unsigned long long)m->sq_batched);
    }
    module_destroy((mca_btl_llrdma_module_t *)btl);
    return OPAL_SUCCESS;
}

/* ------------------------------------------------------------- create */

int mca_btl_llrdma_module_create(const mca_btl_llrdma_port_t *port, const llrdma_profile_t *prof,
                                 mca_btl_llrdma_module_t **out)
{
    mca_btl_llrdma_module_t *m;
    int rc = OPAL_ERR_OUT_OF_RESOURCE, created = 0;

    *out = NULL;
    m = calloc(1, sizeof(*m));
    if (NULL == m) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    m->super = mca_btl_llrdma_module_template;
    m->super.btl_component = &mca_btl_llrdma_component.super;
    m->port = *port;
    m->profile = prof;
    m->path_used[LLRDMA_PATH_LL] = !prof->generic;
    m->path_used[LLRDMA_PATH_BW] = 1;
    OBJ_CONSTRUCT(&m->lock, opal_mutex_t);
    OBJ_CONSTRUCT(&m->ep_lock, opal_mutex_t);
    OBJ_CONSTRUCT(&m->done, opal_list_t);
    OBJ_CONSTRUCT(&m->held, opal_list_t);
    m->self = opal_proc_local_get()->proc_name;
    OBJ_CONSTRUCT(&m->endpoints, opal_list_t);
    OBJ_CONSTRUCT(&m->conns, opal_list_t);
    OBJ_CONSTRUCT(&m->by_qp, opal_hash_table_t);
    OBJ_CONSTRUCT(&m->by_name, opal_hash_table_t);
    if (OPAL_SUCCESS != opal_hash_table_init(&m->by_qp, 256) ||
        OPAL_SUCCESS != opal_hash_table_init(&m->by_name, 256)) {
        rc = OPAL_ERR_OUT_OF_RESOURCE;
        goto fail_free_module;
    }

    rc = find_cm_context(m);
    if (OPAL_SUCCESS != rc) {
        goto fail_free_module;
    }
    m->pd = mca_btl_llrdma_verbs.alloc_pd(m->ctx);
    if (NULL == m->pd) {
        rc = OPAL_ERR_OUT_OF_RESOURCE;
        goto fail_free_module;
    }
    (void)mca_btl_llrdma_gpu_probe(m); /* the component reports m->gpu_error */
    mca_btl_llrdma_thread_channel(m);  /* before the BW CQs, which report to it */
    for (created = 0; created < LLRDMA_NPATHS; ++created) {
        if (!m->path_used[created]) {
            continue;
        }
        rc = mca_btl_llrdma_path_create(m, created);
        if (OPAL_SUCCESS != rc) {
            goto fail_destroy_paths;
        }
        rc = mca_btl_llrdma_path_probe(m, created);
        if (OPAL_SUCCESS != rc) {
            ++created; /* this path's CQ and SRQ exist */
            goto fail_destroy_paths;
        }
    }
    if (LLRDMA_OK !=
        llrdma_btl_plan_limits(prof, sizeof(mca_btl_llrdma_hdr_t), &m->granted, &m->lim)) {
        rc = OPAL_ERR_BAD_PARAM;
        goto fail_destroy_paths;
    }
    rc = listen_create(m);
    if (OPAL_SUCCESS != rc) {
        goto fail_destroy_paths;
    }

    m->super.btl_eager_limit = m->lim.eager_limit;
    m->super.btl_rndv_eager_limit = m->lim.rndv_eager_limit;
    m->super.btl_max_send_size = m->lim.max_send_size;
    m->super.btl_flags = MCA_BTL_FLAGS_SEND;
    m->super.btl_registration_handle_size = 0;
    m->super.btl_add_procs = llrdma_add_procs;
    m->super.btl_del_procs = llrdma_del_procs;
    m->super.btl_register = NULL;
    m->super.btl_finalize = llrdma_finalize;
    m->super.btl_alloc = llrdma_alloc;
    m->super.btl_free = llrdma_free;
    m->super.btl_prepare_src = llrdma_prepare_src;
    m->super.btl_send = llrdma_send;
    m->super.btl_sendi = llrdma_sendi;
    m->super.btl_register_error = llrdma_register_error;
    mca_btl_llrdma_rdma_init(m); /* cannot fail: without grdma, send/receive only */
    m->running = 1;
    mca_btl_llrdma_thread_start(m); /* without it, the BW path is polled as the LL path */
    *out = m;
    return OPAL_SUCCESS;

fail_destroy_paths:
    while (created-- > 0) {
        if (m->path_used[created]) {
            mca_btl_llrdma_path_destroy(m, created);
        }
    }
    mca_btl_llrdma_thread_channel_destroy(m);
    (void)mca_btl_llrdma_verbs.dealloc_pd(m->pd);
fail_free_module:
    mca_btl_llrdma_done_drop(m); /* errors said while creating */
    OBJ_DESTRUCT(&m->done);
    OBJ_DESTRUCT(&m->held);
    OBJ_DESTRUCT(&m->by_name);
    OBJ_DESTRUCT(&m->by_qp);
    OBJ_DESTRUCT(&m->conns);
    OBJ_DESTRUCT(&m->endpoints);
    OBJ_DESTRUCT(&m->ep_lock);
    OBJ_DESTRUCT(&m->lock);
    free(m);
    return rc;
}

int mca_btl_llrdma_module_granted(const mca_btl_llrdma_module_t *m, llrdma_device_info_t *dev,
                                  char *why, size_t whylen)
{
    int misses = 0;
    size_t used = 0;

    why[0] = '\0';
    snprintf(dev->name, sizeof(dev->name), "%s", m->port.dev);
    dev->port = m->port.port;
    dev->max_inline_granted_ll = m->granted.inline_bytes[LLRDMA_PATH_LL];
    dev->max_inline_granted_bw = m->granted.inline_bytes[LLRDMA_PATH_BW];
    dev->sq_depth_granted_ll = m->granted.sq_depth[LLRDMA_PATH_LL];
    dev->sq_depth_granted_bw = m->granted.sq_depth[LLRDMA_PATH_BW];
    dev->cq_moderation_supported = m->path[LLRDMA_PATH_BW].cq_moderation;
    /* How each path's completions are found (docs/btl-design.md "Threads"). */
    snprintf(dev->progress_ll, sizeof(dev->progress_ll), "%s",
             m->path_used[LLRDMA_PATH_LL] ? "poll" : "");
    snprintf(dev->progress_bw, sizeof(dev->progress_bw), "%s",
             m->thread_running ? "event" : "poll");
    if (1 == m->path[LLRDMA_PATH_BW].cq_moderation) {
        dev->cq_mod_count_granted = m->profile->bw.cq_mod_count;
        dev->cq_mod_usec_granted = m->profile->bw.cq_mod_usec;
    }
    if (!m->thread_running) {
        snprintf(dev->progress_note, sizeof(dev->progress_note), "no progress thread (%s)",
                 m->thread_why);
    } else if (1 != m->path[LLRDMA_PATH_BW].cq_moderation) {
        snprintf(dev->progress_note, sizeof(dev->progress_note), "one event per completion (%s)",
                 0 == m->path[LLRDMA_PATH_BW].cq_moderation ? "the device has no CQ moderation"
                                                            : "no moderation requested");
    } else {
        snprintf(dev->progress_note, sizeof(dev->progress_note),
                 "one event per %u completions or %u us", dev->cq_mod_count_granted,
                 dev->cq_mod_usec_granted);
    }
    {
        /* What sendi posts with (btl_llrdma_wr_api), per path in use. */
        char one[LLRDMA_NPATHS][96];
        for (int p = 0; p < LLRDMA_NPATHS; ++p) {
            one[p][0] = '\0';
            if (m->path_used[p]) {
                snprintf(one[p], sizeof(one[p]), "%s: %s%s%s%s", mca_btl_llrdma_path_name(p),
                         m->wr_api[p] ? "ibv_wr_send" : "ibv_post_send", m->wr_api[p] ? "" : " (",
                         m->wr_api_why[p], m->wr_api[p] ? "" : ")");
            }
        }
        snprintf(dev->post_api, sizeof(dev->post_api), "%s%s%s", one[LLRDMA_PATH_LL],
                 '\0' != one[LLRDMA_PATH_LL][0] && '\0' != one[LLRDMA_PATH_BW][0] ? ", " : "",
                 one[LLRDMA_PATH_BW]);
    }
    dev->gid_index = m->port.gid_index;
    dev->min_rnr_timer = mca_btl_llrdma_component.min_rnr_timer;
    dev->rnr_retry = mca_btl_llrdma_component.rnr_retry;
    dev->retry_count = mca_btl_llrdma_component.retry_count;
    dev->ack_timeout = mca_btl_llrdma_component.ack_timeout;
    dev->completion_timeout_ms = mca_btl_llrdma_component.completion_timeout_ms;
    snprintf(dev->gid_type, sizeof(dev->gid_type), "%s",
             llrdma_gid_type_name((int)m->port.gid_type));
    dev->rq_depth_granted_ll = m->path_used[LLRDMA_PATH_LL] ? m->path[LLRDMA_PATH_LL].srq_depth : 0;
    dev->rq_depth_granted_bw = m->path[LLRDMA_PATH_BW].srq_depth;
    dev->rd_atomic_granted = NULL != m->rcache ? m->rd_atomic_granted : 0;
    dev->dest_rd_atomic_granted = NULL != m->rcache ? m->dest_rd_atomic_granted : 0;
    /* put and get share one limit: the profile's fragment, capped by max_msg_sz */
    dev->rdma_limit_granted = NULL != m->rcache ? m->super.btl_put_limit : 0;
    if (NULL == m->rcache && LLRDMA_GPU_NONE != m->gpu_mode) {
        snprintf(dev->gpu_rdma, sizeof(dev->gpu_rdma), "none (btl_llrdma_rdma=off)");
    } else {
        snprintf(dev->gpu_rdma, sizeof(dev->gpu_rdma), "%s", m->gpu_report);
    }
    if (NULL != m->rcache && m->rd_atomic_granted < m->profile->bw.rdma_rd_atomic) {
        used += (size_t)snprintf(why + used, used < whylen ? whylen - used : 0,
                                 "bw RDMA reads outstanding %u of %u; ", m->rd_atomic_granted,
                                 m->profile->bw.rdma_rd_atomic);
        ++misses;
    }
    if (NULL != m->rcache && dev->rdma_limit_granted < m->profile->bw.rdma_frag_bytes) {
        used += (size_t)snprintf(why + used, used < whylen ? whylen - used : 0,
                                 "bw RDMA fragment %llu of %llu bytes (max_msg_sz); ",
                                 (unsigned long long)dev->rdma_limit_granted,
                                 (unsigned long long)m->profile->bw.rdma_frag_bytes);
        ++misses;
    }

    for (int p = 0; p < LLRDMA_NPATHS; ++p) {
        const llrdma_path_profile_t *pp = mca_btl_llrdma_path_profile(m, p);
        const mca_btl_llrdma_path_t *path = &m->path[p];
        if (!m->path_used[p]) {
            continue;
        }
        /* More than requested is fine (the BTL uses what it asked for). */
        if (m->granted.inline_bytes[p] < pp->inline_bytes) {
            used += (size_t)snprintf(why + used, used < whylen ? whylen - used : 0,
                                     "%s inline %u of %u bytes; ", mca_btl_llrdma_path_name(p),
                                     m->granted.inline_bytes[p], pp->inline_bytes);
            ++misses;
        }
        if (m->granted.sq_depth[p] < pp->sq_depth) {
            used += (size_t)snprintf(why + used, used < whylen ? whylen - used : 0,
                                     "%s send queue %u of %u WRs; ", mca_btl_llrdma_path_name(p),
                                     m->granted.sq_depth[p], pp->sq_depth);
            ++misses;
        }
        if (path->srq_depth < pp->rq_depth) {
            used += (size_t)snprintf(why + used, used < whylen ? whylen - used : 0,
                                     "%s receive queue holds %u buffers, less than one "
                                     "connection's %u; ",
                                     mca_btl_llrdma_path_name(p), path->srq_depth, pp->rq_depth);
            ++misses;
        }
        /* Moderation acts on completion events, which only the progress
         * thread asks for: without it a device that lacks moderation
         * changes nothing (the dump still says cq_moderation_supported). */
        if (0 == path->cq_moderation && m->thread_running) {
            used +=
                (size_t)snprintf(why + used, used < whylen ? whylen - used : 0,
                                 "%s CQ moderation (%u completions / %u us) not supported "
                                 "by the device; ",
                                 mca_btl_llrdma_path_name(p), pp->cq_mod_count, pp->cq_mod_usec);
            ++misses;
        }
    }
    return misses;
}
