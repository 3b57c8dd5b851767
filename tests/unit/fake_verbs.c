/*
 * The fake verbs device of the btl/llrdma unit tests (see fake_verbs.h).
 * Teardown entries (destroy, dealloc, dereg, free, disconnect) are never
 * failed: the BTL has no recovery for them, and a failed destroy would only
 * leak.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* process_vm_readv */
#endif
#include "fake_verbs.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

fake_state_t fake;

/* The Nth counted call fails. */
#define FAIL_POINT FAKE_FAIL_POINT

#define HOLD (-1) /* a SEND waits for a receive buffer (RNR retry) */

typedef struct fake_mr {
    struct ibv_mr mr;
    int access;
    struct fake_mr *next;
} fake_mr_t;

static struct ibv_device fake_dev;
struct ibv_context fake_ctx = {.device = &fake_dev};
static uint32_t next_qp_num = 100;
static uint32_t next_key = 0x100;
static fake_qp_t *qps;
static fake_mr_t *mrs;

void fake_fault(int *counter, const char *fmt, ...)
{
    va_list ap;
    ++*counter;
    va_start(ap, fmt);
    vsnprintf(fake.last_fault, sizeof(fake.last_fault), fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------- discovery */

static struct ibv_device **f_get_device_list(int *n)
{
    struct ibv_device **l;
    if (FAIL_POINT()) {
        *n = 0;
        return NULL;
    }
    l = calloc(2, sizeof(*l));
    l[0] = &fake_dev;
    *n = 1;
    return l;
}

static void f_free_device_list(struct ibv_device **l)
{
    free(l);
}

static const char *f_get_device_name(struct ibv_device *d)
{
    (void)d;
    return FAIL_POINT() ? NULL : "fake0";
}

static struct ibv_context *f_open_device(struct ibv_device *d)
{
    (void)d;
    return FAIL_POINT() ? NULL : &fake_ctx;
}

static int f_close_device(struct ibv_context *c)
{
    (void)c;
    return 0;
}

static int f_query_device(struct ibv_context *c, struct ibv_device_attr *a)
{
    (void)c;
    if (FAIL_POINT()) {
        return ENOMEM;
    }
    memset(a, 0, sizeof(*a));
    a->phys_port_cnt = 1;
    a->max_cqe = (int)fake.max_cqe;
    a->max_srq_wr = (int)fake.max_srq_wr;
    a->max_qp_wr = (int)fake.max_qp_wr;
    a->max_qp_rd_atom = (int)fake.max_rd_atom;
    a->max_qp_init_rd_atom = (int)fake.max_rd_atom;
    return 0;
}

static int f_query_port(struct ibv_context *c, uint8_t p, struct ibv_port_attr *a)
{
    (void)c;
    (void)p;
    if (FAIL_POINT()) {
        return ENOMEM;
    }
    memset(a, 0, sizeof(*a));
    a->state = 0 != fake.port_state ? (enum ibv_port_state)fake.port_state : IBV_PORT_ACTIVE;
    if (0 != fake.port_down_after && 0 == --fake.port_down_after) {
        fake.port_state = IBV_PORT_DOWN; /* this query and later ones see it */
        a->state = IBV_PORT_DOWN;
    }
    a->link_layer = IBV_LINK_LAYER_ETHERNET;
    a->gid_tbl_len = 2;
    a->max_msg_sz = fake.max_msg_sz;
    return 0;
}

static int f_query_gid(struct ibv_context *c, uint8_t p, int i, union ibv_gid *g)
{
    (void)c;
    (void)p;
    if (FAIL_POINT()) {
        return ENOMEM;
    }
    memset(g, 0, sizeof(*g));
    if (1 == i) { /* ::ffff:10.0.0.1 */
        g->raw[10] = g->raw[11] = 0xff;
        g->raw[12] = 10;
        g->raw[15] = 1;
    } else {
        g->raw[0] = 0xfe;
        g->raw[1] = 0x80;
    }
    return 0;
}

static int f_query_gid_type(struct ibv_context *c, uint8_t p, int i, unsigned *t)
{
    (void)c;
    (void)p;
    (void)i;
    if (FAIL_POINT()) {
        return ENOMEM;
    }
    *t = IBV_GID_TYPE_ROCE_V2;
    return 0;
}

/* ------------------------------------------------------------- resources */

static struct ibv_pd *f_alloc_pd(struct ibv_context *c)
{
    struct ibv_pd *pd;
    if (FAIL_POINT()) {
        return NULL;
    }
    pd = calloc(1, sizeof(*pd));
    pd->context = c;
    ++fake.live_pd;
    return pd;
}

static int f_dealloc_pd(struct ibv_pd *pd)
{
    for (fake_mr_t *m = mrs; NULL != m; m = m->next) {
        if (m->mr.pd == pd) {
            fake_fault(&fake.misuse, "ibv_dealloc_pd with a registered MR (EBUSY)");
            break;
        }
    }
    for (fake_qp_t *q = qps; NULL != q; q = q->next) {
        if (q->qp.pd == pd) {
            fake_fault(&fake.misuse, "ibv_dealloc_pd with qp %u alive (EBUSY)", q->qp.qp_num);
            break;
        }
    }
    free(pd);
    --fake.live_pd;
    return 0;
}

static struct ibv_mr *mr_new(struct ibv_pd *pd, void *addr, size_t len, int access)
{
    fake_mr_t *m = calloc(1, sizeof(*m));
    m->mr.pd = pd;
    m->mr.context = pd->context;
    m->mr.addr = addr;
    m->mr.length = len;
    /* Distinct keys, lkey != rkey: using one for the other is caught. */
    m->mr.lkey = next_key;
    m->mr.rkey = next_key | 0x800000u;
    ++next_key;
    m->access = access;
    m->next = mrs;
    mrs = m;
    ++fake.live_mr;
    return &m->mr;
}

/* A real ibv_reg_mr pins the pages behind addr (get_user_pages): memory the
 * CPU cannot reach, such as a CUDA device address, is refused with EFAULT
 * unless nvidia_peermem takes it.  The first byte, read through the kernel,
 * tells the two apart without touching the address in this process. */
static int host_reachable(const void *addr)
{
    char c;
    struct iovec local = {&c, 1}, remote = {(void *)addr, 1};
    return 1 == process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
}

static struct ibv_mr *f_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
    if (FAIL_POINT()) {
        errno = ENOMEM;
        return NULL;
    }
    if (len > 0 && !fake.peermem && !host_reachable(addr)) {
        errno = EFAULT;
        return NULL;
    }
    return mr_new(pd, addr, len, access);
}

static struct ibv_mr *f_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t len, uint64_t iova,
                                      int fd, int access)
{
    struct ibv_mr *mr;
    if (FAIL_POINT()) {
        errno = ENOMEM;
        return NULL;
    }
    if (1 != fake.dmabuf) {
        errno = 2 == fake.dmabuf ? EPROTONOSUPPORT : EOPNOTSUPP;
        return NULL;
    }
    if (fd < 0) {
        errno = EBADF;
        return NULL;
    }
    /* As the kernel (ib_umem_dmabuf_get): the MR must lie inside the
     * dma-buf, whose size is what lseek(SEEK_END) says. */
    {
        off_t end = lseek(fd, 0, SEEK_END);
        char path[64];
        ssize_t k;
        if (end < 0 || offset + len > (uint64_t)end || 0 == len) {
            errno = end < 0 ? EBADF : EINVAL;
            return NULL;
        }
        fake.last_dmabuf_size = (uint64_t)end;
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        k = readlink(path, fake.last_dmabuf_link, sizeof(fake.last_dmabuf_link) - 1);
        fake.last_dmabuf_link[k > 0 ? k : 0] = '\0';
    }
    /* The device reaches the memory by iova: register that range. */
    mr = mr_new(pd, (void *)(uintptr_t)iova, len, access);
    ++fake.ndmabuf_mrs;
    fake.last_iova = iova;
    return mr;
}

static int f_peermem_loaded(void)
{
    return fake.peermem;
}

static int f_dereg_mr(struct ibv_mr *mr)
{
    for (fake_mr_t **pp = &mrs; NULL != *pp; pp = &(*pp)->next) {
        if (&(*pp)->mr == mr) {
            fake_mr_t *m = *pp;
            *pp = m->next;
            free(m);
            --fake.live_mr;
            return 0;
        }
    }
    fake_fault(&fake.misuse, "ibv_dereg_mr of an unknown MR");
    return EINVAL;
}

/* The MR that `key` names (lkey or rkey) covering [addr, addr + len). */
static fake_mr_t *mr_find(int remote, uint32_t key, uint64_t addr, uint64_t len, struct ibv_pd *pd)
{
    for (fake_mr_t *m = mrs; NULL != m; m = m->next) {
        uint64_t lo = (uint64_t)(uintptr_t)m->mr.addr, hi = lo + m->mr.length;
        if ((remote ? m->mr.rkey : m->mr.lkey) == key && m->mr.pd == pd && addr >= lo &&
            addr + len <= hi) {
            return m;
        }
    }
    return NULL;
}

static struct ibv_cq *f_create_cq(struct ibv_context *c, int cqe, void *ctx,
                                  struct ibv_comp_channel *ch, int vec)
{
    fake_cq_t *f;
    (void)vec;
    if (FAIL_POINT()) {
        errno = ENOMEM;
        return NULL;
    }
    if (cqe < 1 || (uint32_t)cqe > fake.max_cqe) {
        errno = EINVAL;
        return NULL;
    }
    f = calloc(1, sizeof(*f));
    f->cq.context = c;
    f->cq.cqe = cqe;
    f->cq.cq_context = ctx;
    f->cq.channel = ch;
    f->channel = (struct fake_channel *)ch;
    fake_cq_channel_attach(f);
    f->cap = (uint32_t)cqe;
    f->e = calloc(f->cap, sizeof(*f->e));
    ++fake.live_cq;
    return &f->cq;
}

static void purge_async(const void *element);

static int f_destroy_cq(struct ibv_cq *cq)
{
    fake_cq_t *f = (fake_cq_t *)cq;
    purge_async(cq);
    if (0 != fake_cq_destroy_check(f)) {
        return EBUSY; /* a real ibv_destroy_cq would wait for the acknowledgements forever */
    }
    for (fake_qp_t *q = qps; NULL != q; q = q->next) {
        if (q->qp.send_cq == cq || q->qp.recv_cq == cq) {
            fake_fault(&fake.misuse, "ibv_destroy_cq while qp %u uses it (EBUSY)", q->qp.qp_num);
            break;
        }
    }
    free(f->e);
    free(f);
    --fake.live_cq;
    return 0;
}

static int f_modify_cq(struct ibv_cq *cq, struct ibv_modify_cq_attr *a)
{
    fake_cq_t *f = (fake_cq_t *)cq;
    if (FAIL_POINT()) {
        return ENOMEM;
    }
    if (!fake.modify_cq_supported) {
        return EOPNOTSUPP;
    }
    f->moderated = 1;
    f->mod_count = a->moderate.cq_count;
    f->mod_period = a->moderate.cq_period;
    return 0;
}

static int f_resize_cq(struct ibv_cq *cq, int cqe)
{
    (void)cq;
    (void)cqe;
    /* Optional in verbs; this device has none (the BTL must not need it). */
    fake_fault(&fake.misuse, "ibv_resize_cq called");
    return EOPNOTSUPP;
}

/* A completion into `f`; one that finds it full is an overrun. */
static void cq_push(fake_cq_t *f, const fake_cqe_t *e)
{
    if (f->count >= f->cap) {
        fake_fault(&fake.cq_overruns, "CQ overrun: %u entries waiting, completion for qp %u lost",
                   f->count, e->wc.qp_num);
        return;
    }
    f->e[(f->head + f->count) % f->cap] = *e;
    ++f->count;
    if (f->count > f->high) {
        f->high = f->count;
    }
    fake_cq_completion_added(f);
}

/* Drop the completions of a destroyed QP (as mlx5 cleans its CQs). */
static void cq_clean(fake_cq_t *f, const fake_qp_t *q)
{
    uint32_t kept = 0;
    if (NULL == f) {
        return;
    }
    for (uint32_t i = 0; i < f->count; ++i) {
        fake_cqe_t e = f->e[(f->head + i) % f->cap];
        if (e.qp != q) {
            f->e[(f->head + kept) % f->cap] = e;
            ++kept;
        }
    }
    f->count = kept;
}

static struct ibv_srq *f_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *a)
{
    fake_srq_t *s;
    if (FAIL_POINT()) {
        errno = ENOMEM;
        return NULL;
    }
    if (0 == a->attr.max_wr) {
        errno = EINVAL;
        return NULL;
    }
    s = calloc(1, sizeof(*s));
    s->srq.pd = pd;
    s->srq.context = pd->context;
    s->max_wr = a->attr.max_wr < fake.max_srq_wr ? a->attr.max_wr : fake.max_srq_wr;
    a->attr.max_wr = s->max_wr;
    s->q = calloc(s->max_wr, sizeof(*s->q));
    ++fake.live_srq;
    return &s->srq;
}

static int f_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *a)
{
    if (FAIL_POINT()) {
        return ENOMEM;
    }
    memset(a, 0, sizeof(*a));
    a->max_wr = ((fake_srq_t *)srq)->max_wr;
    a->max_sge = 1;
    return 0;
}

static int f_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *a, int mask)
{
    fake_srq_t *s = (fake_srq_t *)srq;
    if (FAIL_POINT()) {
        return ENOMEM;
    }
    /* Resizing is a capability few devices have (IBV_DEVICE_SRQ_RESIZE): refused. */
    if (mask & ~IBV_SRQ_LIMIT) {
        return EINVAL;
    }
    if (a->srq_limit > s->max_wr) {
        return EINVAL;
    }
    s->limit = a->srq_limit;
    return 0;
}

static int f_destroy_srq(struct ibv_srq *srq)
{
    fake_srq_t *s = (fake_srq_t *)srq;
    purge_async(srq);
    for (fake_qp_t *q = qps; NULL != q; q = q->next) {
        if (q->qp.srq == srq) {
            fake_fault(&fake.misuse, "ibv_destroy_srq while qp %u uses it (EBUSY)", q->qp.qp_num);
            break;
        }
    }
    free(s->q);
    free(s);
    --fake.live_srq;
    return 0;
}

struct ibv_qp *fake_new_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
    fake_qp_t *q;
    if (a->cap.max_inline_data > fake.max_inline || 0 == a->cap.max_send_wr ||
        a->cap.max_send_wr > fake.max_qp_wr || NULL == a->send_cq || NULL == a->recv_cq ||
        a->cap.max_send_sge > FAKE_MAX_SGE) {
        errno = EINVAL;
        return NULL;
    }
    q = calloc(1, sizeof(*q));
    q->qp.context = pd->context;
    q->qp.pd = pd;
    q->qp.send_cq = a->send_cq;
    q->qp.recv_cq = a->recv_cq;
    q->qp.srq = a->srq;
    q->qp.qp_num = next_qp_num++;
    q->qp.qp_type = a->qp_type;
    q->qp.state = IBV_QPS_INIT;
    if (0 != fake.inline_grant) {
        a->cap.max_inline_data = fake.inline_grant;
    }
    if (0 == a->cap.max_send_sge) {
        a->cap.max_send_sge = 1;
    }
    q->attr = *a;
    q->rnr_retry = 7;
    q->retry_count = 7;
    q->min_rnr_timer = -1;
    q->sq = calloc(a->cap.max_send_wr, sizeof(*q->sq));
    q->next = qps;
    qps = q;
    fake.last_qp_attr = *a;
    ++fake.nqp_created;
    ++fake.live_qp;
    return &q->qp;
}

static struct ibv_qp *f_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
    ++fake.nqp_calls;
    if (0 != fake.qp_errno) {
        errno = fake.qp_errno;
        return NULL;
    }
    if (FAIL_POINT()) {
        errno = ENOMEM;
        return NULL;
    }
    return fake_new_qp(pd, a);
}

/* The send operations a QP may be created for (as rxe's RC QPs); the BTL
 * asks for SEND only. */
#define FAKE_SEND_OPS (IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ)

static void fx_start(struct ibv_qp_ex *x);
static void fx_send(struct ibv_qp_ex *x);
static void fx_set_inline_data(struct ibv_qp_ex *x, void *addr, size_t len);
static int fx_complete(struct ibv_qp_ex *x);
static void fx_abort(struct ibv_qp_ex *x);

struct ibv_qp *fake_new_qp_ex(struct ibv_qp_init_attr_ex *ax)
{
    struct ibv_qp_init_attr a;
    struct ibv_qp *qp;

    if (fake.no_wr_api) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    if (0 == (ax->comp_mask & IBV_QP_INIT_ATTR_PD) || NULL == ax->pd ||
        0 != (ax->comp_mask & ~(uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) ||
        0 != (ax->send_ops_flags & ~(uint64_t)FAKE_SEND_OPS)) {
        errno = EINVAL;
        return NULL;
    }
    memset(&a, 0, sizeof(a));
    a.qp_context = ax->qp_context;
    a.send_cq = ax->send_cq;
    a.recv_cq = ax->recv_cq;
    a.srq = ax->srq;
    a.cap = ax->cap;
    a.qp_type = ax->qp_type;
    a.sq_sig_all = ax->sq_sig_all;
    qp = fake_new_qp(ax->pd, &a);
    if (NULL != qp) {
        ax->cap = a.cap; /* as granted */
        fake_qp_t *q = fake_qp(qp);
        q->ex = 0 != (ax->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
                0 != (ax->send_ops_flags & IBV_QP_EX_WITH_SEND);
        /* Only the operations the BTL uses; the others stay NULL. */
        q->qpx.wr_start = fx_start;
        q->qpx.wr_send = fx_send;
        q->qpx.wr_set_inline_data = fx_set_inline_data;
        q->qpx.wr_complete = fx_complete;
        q->qpx.wr_abort = fx_abort;
    }
    return qp;
}

static struct ibv_qp *f_create_qp_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *ax)
{
    (void)c;
    ++fake.nqp_ex_calls;
    if (0 != fake.qp_ex_errno) {
        errno = fake.qp_ex_errno;
        return NULL;
    }
    if (FAIL_POINT()) {
        errno = ENOMEM;
        return NULL;
    }
    return fake_new_qp_ex(ax);
}

static struct ibv_qp_ex *f_qp_to_qp_ex(struct ibv_qp *qp)
{
    return fake_qp(qp)->ex ? &fake_qp(qp)->qpx : NULL;
}

static int f_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask,
                      struct ibv_qp_init_attr *init)
{
    (void)mask;
    if (FAIL_POINT()) {
        return ENOMEM;
    }
    memset(a, 0, sizeof(*a));
    *init = fake_qp(qp)->attr;
    a->cap = init->cap;
    a->min_rnr_timer = (uint8_t)(fake_qp(qp)->min_rnr_timer < 0 ? 0 : fake_qp(qp)->min_rnr_timer);
    a->max_rd_atomic = (uint8_t)fake_qp(qp)->max_rd_atomic;
    a->max_dest_rd_atomic = (uint8_t)fake_qp(qp)->max_dest_rd_atomic;
    a->timeout = (uint8_t)fake_qp(qp)->ack_timeout;
    a->retry_cnt = (uint8_t)fake_qp(qp)->retry_count;
    a->rnr_retry = (uint8_t)fake_qp(qp)->rnr_retry;
    return 0;
}

void fake_unwire(fake_qp_t *q)
{
    if (NULL != q->peer) {
        q->peer->peer = NULL;
        q->peer = NULL;
    }
}

static int f_destroy_qp(struct ibv_qp *qp)
{
    fake_qp_t *q = fake_qp(qp);
    purge_async(qp);
    for (fake_qp_t **pp = &qps; NULL != *pp; pp = &(*pp)->next) {
        if (*pp == q) {
            *pp = q->next;
            break;
        }
    }
    fake_unwire(q);
    cq_clean((fake_cq_t *)q->qp.send_cq, q);
    cq_clean((fake_cq_t *)q->qp.recv_cq, q);
    for (uint64_t i = q->exec; i < q->tail; ++i) {
        free(q->sq[i % q->attr.cap.max_send_wr].inl);
    }
    free(q->sq);
    free(q);
    --fake.live_qp;
    return 0;
}

int fake_destroy_qp(struct ibv_qp *qp)
{
    return f_destroy_qp(qp);
}

static int run_qp(fake_qp_t *q);

void fake_qp_enter_error(fake_qp_t *q)
{
    /* A QP on an SRQ reports its last receive once in ERR (the receives it
     * took have completed, flushed or not). */
    if (!q->error && NULL != q->qp.srq) {
        fake_push_async_qp(IBV_EVENT_QP_LAST_WQE_REACHED, &q->qp);
    }
    q->error = 1;
}

static int f_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
    fake_qp_t *q = fake_qp(qp);
    if (FAIL_POINT()) {
        return EINVAL;
    }
    ++fake.nmodify_qp;
    /* Any state -> ERR: every WR not completed yet flushes at once, wire
     * held or not (the device drops them; the CQ gets their completions). */
    if (IBV_QP_STATE == mask && IBV_QPS_ERR == a->qp_state) {
        fake_qp_enter_error(q);
        qp->state = IBV_QPS_ERR;
        ++fake.nerr_qp;
        (void)run_qp(q);
        return 0;
    }
    /* RTS -> RTS may change the RNR timer (and a few others, unused here). */
    if (!q->rts || 0 != (mask & ~(IBV_QP_MIN_RNR_TIMER | IBV_QP_CUR_STATE))) {
        fake_fault(&fake.bad_posts, "ibv_modify_qp mask 0x%x on qp %u in state %s", mask,
                   qp->qp_num, q->rts ? "RTS" : "not RTS");
        return EINVAL;
    }
    if (mask & IBV_QP_MIN_RNR_TIMER) {
        q->min_rnr_timer = a->min_rnr_timer;
    }
    return 0;
}

/* ------------------------------------------------------------- data path */

void fake_connect_pair(struct ibv_qp *a, struct ibv_qp *b)
{
    fake_qp_t *qa = fake_qp(a), *qb = fake_qp(b);
    fake_unwire(qa);
    fake_unwire(qb);
    qa->peer = qb;
    qb->peer = qa;
    qa->rts = qb->rts = 1;
    a->state = b->state = IBV_QPS_RTS;
}

static int enqueue(fake_qp_t *q, const struct ibv_send_wr *wr)
{
    fake_swr_t *w;
    uint32_t len = 0;

    if (!q->rts) {
        fake_fault(&fake.bad_posts, "ibv_post_send on qp %u, which is not connected", q->qp.qp_num);
        return EINVAL;
    }
    if (wr->num_sge < 0 || (uint32_t)wr->num_sge > q->attr.cap.max_send_sge ||
        (IBV_WR_SEND != wr->opcode && IBV_WR_RDMA_WRITE != wr->opcode &&
         IBV_WR_RDMA_READ != wr->opcode) ||
        (IBV_WR_RDMA_READ == wr->opcode && (wr->send_flags & IBV_SEND_INLINE))) {
        fake_fault(&fake.bad_posts, "ibv_post_send on qp %u: %d SGEs, opcode %d", q->qp.qp_num,
                   wr->num_sge, (int)wr->opcode);
        return EINVAL;
    }
    for (int i = 0; i < wr->num_sge; ++i) {
        len += wr->sg_list[i].length;
    }
    if (q->tail - q->head >= q->attr.cap.max_send_wr) {
        fake_fault(&fake.sq_overflows, "send queue overflow on qp %u: %u WRs not retired",
                   q->qp.qp_num, (unsigned)(q->tail - q->head));
        return ENOMEM;
    }
    if ((wr->send_flags & IBV_SEND_INLINE) && len > q->attr.cap.max_inline_data) {
        fake_fault(&fake.inline_overflows, "%u bytes inline on qp %u, which was granted %u", len,
                   q->qp.qp_num, q->attr.cap.max_inline_data);
        return EINVAL;
    }
    w = &q->sq[q->tail % q->attr.cap.max_send_wr];
    memset(w, 0, sizeof(*w));
    w->wr_id = wr->wr_id;
    w->opcode = wr->opcode;
    w->flags = wr->send_flags;
    w->length = len;
    w->num_sge = wr->num_sge;
    memcpy(w->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(*w->sge));
    w->remote_addr = wr->wr.rdma.remote_addr;
    w->rkey = wr->wr.rdma.rkey;
    if (wr->send_flags & IBV_SEND_INLINE) {
        /* The data leaves with the post: the buffer may be reused at once. */
        uint32_t off = 0;
        w->inl = malloc(len > 0 ? len : 1);
        for (int i = 0; i < wr->num_sge; ++i) {
            memcpy(w->inl + off, (void *)(uintptr_t)wr->sg_list[i].addr, wr->sg_list[i].length);
            off += wr->sg_list[i].length;
        }
    }
    ++q->tail;
    return 0;
}

/* What the BTL posted, for the tests to read. */
static void record_send(struct ibv_qp *qp, const struct ibv_send_wr *wr)
{
    fake_wr_t *r = &fake.sends[fake.nsends++ % FAKE_MAX_WR];
    r->qp = qp;
    r->wr_id = wr->wr_id;
    r->length = 0;
    for (int i = 0; i < wr->num_sge; ++i) {
        r->length += wr->sg_list[i].length;
    }
    r->flags = wr->send_flags;
    r->opcode = wr->opcode;
    r->addr = wr->num_sge > 0 ? (void *)(uintptr_t)wr->sg_list[0].addr : NULL;
    r->remote_addr = wr->wr.rdma.remote_addr;
    r->rkey = wr->wr.rdma.rkey;
}

/* The work-request API of a QP created for it, as far as the BTL uses it
 * (one SEND per section, its data inline): wr_start opens the QP's section
 * (taking the fake's lock when the lock layer is on, as rxe takes its send
 * queue's spinlock), wr_send starts a SEND from qpx->wr_id and wr_flags,
 * wr_set_inline_data gives its data (at most the inline size granted, and
 * IBV_SEND_INLINE must be in wr_flags, which rxe's kernel reads),
 * wr_complete posts it with the checks of a post (connected, room) and
 * closes the section; a failure posts nothing.  Calls out of order are
 * misuse. */
void (*fake_wr_lock)(void), (*fake_wr_unlock)(void);

static fake_qp_t *fake_qpx(struct ibv_qp_ex *x)
{
    return (fake_qp_t *)((char *)x - offsetof(fake_qp_t, qpx));
}

static void fx_start(struct ibv_qp_ex *x)
{
    fake_qp_t *q = fake_qpx(x);
    if (NULL != fake_wr_lock) {
        fake_wr_lock();
    }
    if (q->wr_open) {
        fake_fault(&fake.misuse, "ibv_wr_start on qp %u inside a section", q->qp.qp_num);
    }
    q->wr_open = 1;
    q->wr_built = 0;
    q->wr_err = 0;
}

static void fx_send(struct ibv_qp_ex *x)
{
    fake_qp_t *q = fake_qpx(x);
    if (!q->wr_open || q->wr_built) {
        fake_fault(&fake.misuse, "ibv_wr_send on qp %u %s", q->qp.qp_num,
                   q->wr_open ? "twice in a section" : "outside a section");
        q->wr_err = EINVAL;
        return;
    }
    memset(&q->wr_pend, 0, sizeof(q->wr_pend));
    q->wr_pend.wr_id = x->wr_id;
    q->wr_pend.send_flags = x->wr_flags;
    q->wr_pend.opcode = IBV_WR_SEND;
    q->wr_built = 1;
}

static void fx_set_inline_data(struct ibv_qp_ex *x, void *addr, size_t len)
{
    fake_qp_t *q = fake_qpx(x);
    if (!q->wr_open || 1 != q->wr_built) {
        fake_fault(&fake.misuse, "ibv_wr_set_inline_data on qp %u without a WR", q->qp.qp_num);
        q->wr_err = EINVAL;
        return;
    }
    if (len > q->attr.cap.max_inline_data) {
        fake_fault(&fake.inline_overflows, "%zu bytes inline on qp %u, which was granted %u", len,
                   q->qp.qp_num, q->attr.cap.max_inline_data);
        q->wr_err = ENOSPC;
        return;
    }
    if (!(q->wr_pend.send_flags & IBV_SEND_INLINE)) {
        /* rxe's kernel would read the inline bytes as a list of SGEs. */
        fake_fault(&fake.bad_posts, "inline data on qp %u without IBV_SEND_INLINE in wr_flags",
                   q->qp.qp_num);
        q->wr_err = EINVAL;
        return;
    }
    q->wr_sge.addr = (uintptr_t)addr;
    q->wr_sge.length = (uint32_t)len;
    q->wr_pend.sg_list = &q->wr_sge;
    q->wr_pend.num_sge = 1;
    q->wr_built = 2;
}

static void fx_close(fake_qp_t *q)
{
    q->wr_open = 0;
    q->wr_built = 0;
    if (NULL != fake_wr_unlock) {
        fake_wr_unlock();
    }
}

static int fx_complete(struct ibv_qp_ex *x)
{
    fake_qp_t *q = fake_qpx(x);
    int rc = 0;

    if (!q->wr_open) {
        fake_fault(&fake.misuse, "ibv_wr_complete on qp %u outside a section", q->qp.qp_num);
        return EINVAL;
    }
    if (FAIL_POINT()) {
        rc = ENOMEM;
    } else if (0 != q->wr_err) {
        rc = q->wr_err;
    } else if (0 != fake.post_send_errno) {
        rc = fake.post_send_errno;
    } else if (0 != q->wr_built) {
        rc = enqueue(q, &q->wr_pend);
        if (0 == rc) {
            ++fake.nsend_posts;
            ++fake.nwr_posts;
            record_send(&q->qp, &q->wr_pend);
        }
    }
    fx_close(q);
    return rc;
}

static void fx_abort(struct ibv_qp_ex *x)
{
    fx_close(fake_qpx(x));
}

static int f_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    if (FAIL_POINT()) {
        *bad = wr;
        return ENOMEM;
    }
    if (0 != fake.post_send_errno) {
        *bad = wr;
        return fake.post_send_errno;
    }
    ++fake.nsend_posts;
    for (; NULL != wr; wr = wr->next) {
        int rc = enqueue(fake_qp(qp), wr);
        if (0 != rc) {
            *bad = wr;
            return rc;
        }
        record_send(qp, wr);
    }
    return 0;
}

static int f_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
    fake_srq_t *s = (fake_srq_t *)srq;
    int fail_wr = fake.srq_fail_wr;
    if (FAIL_POINT()) {
        *bad = wr;
        return ENOMEM;
    }
    fake.srq_fail_wr = 0;
    for (int i = 1; NULL != wr; wr = wr->next, ++i) {
        if (i == fail_wr) {
            *bad = wr;
            return ENOMEM;
        }
        if (s->count >= s->max_wr) {
            fake_fault(&fake.srq_overflows, "SRQ overflow: %u buffers posted, capacity %u",
                       s->count, s->max_wr);
            *bad = wr;
            return ENOMEM;
        }
        if (1 != wr->num_sge) {
            fake_fault(&fake.bad_posts, "ibv_post_srq_recv with %d SGEs", wr->num_sge);
            *bad = wr;
            return EINVAL;
        }
        s->q[(s->head + s->count) % s->max_wr].wr_id = wr->wr_id;
        s->q[(s->head + s->count) % s->max_wr].sge = wr->sg_list[0];
        ++s->count;
        fake.recvs[fake.nrecvs++ % FAKE_MAX_WR] = wr->wr_id;
    }
    return 0;
}

static void push_wc(struct ibv_cq *cq, fake_qp_t *q, uint64_t wr_id, enum ibv_wc_status st,
                    enum ibv_wc_opcode op, uint32_t len, uint32_t qp_num, uint32_t src_qp,
                    int is_send, uint64_t seq)
{
    fake_cqe_t e;
    memset(&e, 0, sizeof(e));
    e.wc.wr_id = wr_id;
    e.wc.status = st;
    e.wc.opcode = op;
    e.wc.byte_len = len;
    e.wc.qp_num = qp_num;
    e.wc.src_qp = src_qp;
    e.qp = q;
    e.is_send = is_send;
    e.seq = seq;
    cq_push((fake_cq_t *)cq, &e);
}

void fake_push_wc(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status status, uint32_t byte_len,
                  uint32_t qp_num, enum ibv_wc_opcode opcode)
{
    push_wc(cq, NULL, wr_id, status, opcode, byte_len, qp_num, 0, 0, 0);
}

static void gather(const fake_swr_t *w, unsigned char *dst)
{
    if (NULL != w->inl) {
        memcpy(dst, w->inl, w->length);
        return;
    }
    for (int i = 0; i < w->num_sge; ++i) {
        memcpy(dst, (void *)(uintptr_t)w->sge[i].addr, w->sge[i].length);
        dst += w->sge[i].length;
    }
}

/* A SEND arrives at `p` (from `q`, or a raw peer when q is NULL). */
static int deliver(fake_qp_t *q, fake_qp_t *p, fake_swr_t *w)
{
    fake_srq_t *s = (fake_srq_t *)p->qp.srq;
    fake_rwr_t r;

    if (NULL == s) {
        fake_fault(&fake.misuse, "qp %u has no SRQ", p->qp.qp_num);
        return IBV_WC_REM_OP_ERR;
    }
    if (p->error) {
        return IBV_WC_RETRY_EXC_ERR; /* a responder in error answers nothing */
    }
    if (0 == s->count) {
        if (0 == w->rnr_tries++) {
            fake_fault(&fake.rnr_events, "RNR: a SEND of %u bytes to qp %u found no receive buffer",
                       w->length, p->qp.qp_num);
        }
        ++fake.rnr_naks;
        if (NULL != q && q->rnr_retry < 7 && w->rnr_tries > q->rnr_retry) {
            return IBV_WC_RNR_RETRY_EXC_ERR;
        }
        return HOLD;
    }
    r = s->q[s->head];
    s->head = (s->head + 1) % s->max_wr;
    --s->count;
    if (!s->used || s->count < s->low) {
        s->low = s->count;
    }
    s->used = 1;
    if (0 != s->limit && s->count < s->limit) {
        s->limit = 0; /* as a device: reported once, then disarmed */
        fake_push_async_srq(IBV_EVENT_SRQ_LIMIT_REACHED, &s->srq);
    }
    if (NULL == mr_find(0, r.sge.lkey, r.sge.addr, r.sge.length, p->qp.pd)) {
        fake_fault(&fake.prot_errors, "receive buffer of qp %u outside a registered MR",
                   p->qp.qp_num);
        push_wc(p->qp.recv_cq, p, r.wr_id, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, 0, p->qp.qp_num,
                NULL != q ? q->qp.qp_num : 0, 0, 0);
        return IBV_WC_REM_OP_ERR;
    }
    if (w->length > r.sge.length) {
        fake_fault(&fake.len_errors, "a SEND of %u bytes into a %u-byte receive buffer of qp %u",
                   w->length, r.sge.length, p->qp.qp_num);
        push_wc(p->qp.recv_cq, p, r.wr_id, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, 0, p->qp.qp_num,
                NULL != q ? q->qp.qp_num : 0, 0, 0);
        return IBV_WC_REM_INV_REQ_ERR;
    }
    gather(w, (unsigned char *)(uintptr_t)r.sge.addr);
    ++p->recvs_done;
    push_wc(p->qp.recv_cq, p, r.wr_id, IBV_WC_SUCCESS, IBV_WC_RECV, w->length, p->qp.qp_num,
            NULL != q ? q->qp.qp_num : 0, 0, 0);
    return IBV_WC_SUCCESS;
}

static int rdma_write(fake_qp_t *q, fake_qp_t *p, fake_swr_t *w)
{
    fake_mr_t *m = mr_find(1, w->rkey, w->remote_addr, w->length, p->qp.pd);
    if (NULL == m || !(m->access & IBV_ACCESS_REMOTE_WRITE)) {
        fake_fault(&fake.access_errors, "RDMA write of %u bytes from qp %u to 0x%llx rkey 0x%x: %s",
                   w->length, q->qp.qp_num, (unsigned long long)w->remote_addr, w->rkey,
                   NULL == m ? "no MR covers it" : "MR not remote-writable");
        return IBV_WC_REM_ACCESS_ERR;
    }
    gather(w, (unsigned char *)(uintptr_t)w->remote_addr);
    ++q->writes_done;
    ++fake.nwrites;
    return IBV_WC_SUCCESS;
}

static int sges_ok(const fake_qp_t *q, const fake_swr_t *w)
{
    if (NULL != w->inl) {
        return 1; /* no key is looked at */
    }
    for (int i = 0; i < w->num_sge; ++i) {
        fake_mr_t *m = mr_find(0, w->sge[i].lkey, w->sge[i].addr, w->sge[i].length, q->qp.pd);
        if (NULL == m) {
            fake_fault(&fake.prot_errors, "send SGE of qp %u outside a registered MR (lkey 0x%x)",
                       q->qp.qp_num, w->sge[i].lkey);
            return 0;
        }
        if (IBV_WR_RDMA_READ == w->opcode && !(m->access & IBV_ACCESS_LOCAL_WRITE)) {
            fake_fault(&fake.prot_errors, "RDMA read on qp %u into an MR without local write",
                       q->qp.qp_num);
            return 0;
        }
    }
    return 1;
}

static int rdma_read(fake_qp_t *q, fake_qp_t *p, fake_swr_t *w)
{
    fake_mr_t *m;
    const unsigned char *src;

    if (0 == q->max_rd_atomic || 0 == p->max_dest_rd_atomic) {
        fake_fault(&fake.rd_atomic_errors,
                   "RDMA read on qp %u: max_rd_atomic %u, peer qp %u max_dest_rd_atomic %u",
                   q->qp.qp_num, q->max_rd_atomic, p->qp.qp_num, p->max_dest_rd_atomic);
        return IBV_WC_REM_INV_REQ_ERR;
    }
    m = mr_find(1, w->rkey, w->remote_addr, w->length, p->qp.pd);
    if (NULL == m || !(m->access & IBV_ACCESS_REMOTE_READ)) {
        fake_fault(&fake.access_errors, "RDMA read of %u bytes by qp %u from 0x%llx rkey 0x%x: %s",
                   w->length, q->qp.qp_num, (unsigned long long)w->remote_addr, w->rkey,
                   NULL == m ? "no MR covers it" : "MR not remote-readable");
        return IBV_WC_REM_ACCESS_ERR;
    }
    src = (const unsigned char *)(uintptr_t)w->remote_addr;
    for (int i = 0; i < w->num_sge; ++i) {
        memcpy((void *)(uintptr_t)w->sge[i].addr, src, w->sge[i].length);
        src += w->sge[i].length;
    }
    ++q->reads_done;
    ++fake.nreads;
    return IBV_WC_SUCCESS;
}

/* Execute the WRs of one QP that can run now, in order. */
static int run_qp(fake_qp_t *q)
{
    int ran = 0;
    while (q->exec < q->tail) {
        fake_swr_t *w = &q->sq[q->exec % q->attr.cap.max_send_wr];
        int st;
        if (q->error) {
            st = IBV_WC_WR_FLUSH_ERR;
        } else if (IBV_WC_SUCCESS != q->fail_next) {
            st = q->fail_next;
            q->fail_next = IBV_WC_SUCCESS;
        } else if (NULL == q->peer) {
            st = IBV_WC_RETRY_EXC_ERR; /* nobody answers */
        } else if (!sges_ok(q, w)) {
            st = IBV_WC_LOC_PROT_ERR;
        } else if (w->length > fake.max_msg_sz) {
            fake_fault(&fake.len_errors, "a work request of %u bytes on qp %u (max_msg_sz %u)",
                       w->length, q->qp.qp_num, fake.max_msg_sz);
            st = IBV_WC_LOC_LEN_ERR;
        } else if (IBV_WR_SEND == w->opcode) {
            st = deliver(q, q->peer, w);
            if (HOLD == st) {
                break; /* RC: the WRs behind it wait too */
            }
            if (IBV_WC_SUCCESS == st) {
                ++q->sends_done;
            }
        } else if (IBV_WR_RDMA_READ == w->opcode) {
            st = rdma_read(q, q->peer, w);
        } else {
            st = rdma_write(q, q->peer, w);
        }
        if (IBV_WC_SUCCESS != st) {
            fake_qp_enter_error(q);
        }
        /* An error completes every WR, signalled or not. */
        if (IBV_WC_SUCCESS != st || (w->flags & IBV_SEND_SIGNALED) || q->attr.sq_sig_all) {
            push_wc(q->qp.send_cq, q, w->wr_id, (enum ibv_wc_status)st,
                    IBV_WR_SEND == w->opcode
                        ? IBV_WC_SEND
                        : (IBV_WR_RDMA_READ == w->opcode ? IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE),
                    0, q->qp.qp_num, 0, 1, q->exec);
        }
        free(w->inl);
        w->inl = NULL;
        ++q->exec;
        ++ran;
    }
    return ran;
}

/* The wire is the device's DMA, not a CPU thread: under ThreadSanitizer its
 * copies into and out of registered memory are not reported as races with
 * the threads that own that memory (a real NIC writes a credit word while a
 * thread reads it; the BTL reads such words atomically). */
#if defined(__SANITIZE_THREAD__)
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
void AnnotateIgnoreWritesBegin(const char *file, int line);
void AnnotateIgnoreWritesEnd(const char *file, int line);
#define DMA_BEGIN()                                                                                \
    (AnnotateIgnoreReadsBegin(__FILE__, __LINE__), AnnotateIgnoreWritesBegin(__FILE__, __LINE__))
#define DMA_END()                                                                                  \
    (AnnotateIgnoreWritesEnd(__FILE__, __LINE__), AnnotateIgnoreReadsEnd(__FILE__, __LINE__))
#else
#define DMA_BEGIN() ((void)0)
#define DMA_END() ((void)0)
#endif

int fake_pump(void)
{
    int ran = 0;
    DMA_BEGIN();
    for (fake_qp_t *q = qps; NULL != q; q = q->next) {
        ran += run_qp(q);
    }
    DMA_END();
    fake_events_tick(); /* moderation periods that ran out */
    return ran;
}

static int f_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
    fake_cq_t *f = (fake_cq_t *)cq;
    int got = 0;
    if (FAIL_POINT()) {
        return -1;
    }
    if (!fake.wire_hold) {
        (void)fake_pump();
    }
    while (got < n && f->count > 0) {
        fake_cqe_t *e = &f->e[f->head];
        wc[got++] = e->wc;
        /* Polling a send completion frees its WR's slot and every earlier one. */
        if (e->is_send && NULL != e->qp && e->seq + 1 > e->qp->head) {
            e->qp->head = e->seq + 1;
        }
        f->head = (f->head + 1) % f->cap;
        --f->count;
    }
    return got;
}

/* ------------------------------------------------- asynchronous events */

#define FAKE_MAX_ASYNC 64
static struct ibv_async_event async_q[FAKE_MAX_ASYNC];
static int async_head, async_n;

static void push_async(const struct ibv_async_event *ev)
{
    if (async_n >= FAKE_MAX_ASYNC) {
        ++fake.async_overflow;
        return;
    }
    async_q[(async_head + async_n++) % FAKE_MAX_ASYNC] = *ev;
}

void fake_push_async_port(enum ibv_event_type type, int port)
{
    struct ibv_async_event ev = {.event_type = type, .element.port_num = port};
    push_async(&ev);
}

void fake_push_async_qp(enum ibv_event_type type, struct ibv_qp *qp)
{
    struct ibv_async_event ev = {.event_type = type, .element.qp = qp};
    push_async(&ev);
}

void fake_push_async_cq(enum ibv_event_type type, struct ibv_cq *cq)
{
    struct ibv_async_event ev = {.event_type = type, .element.cq = cq};
    push_async(&ev);
}

void fake_push_async_srq(enum ibv_event_type type, struct ibv_srq *srq)
{
    struct ibv_async_event ev = {.event_type = type, .element.srq = srq};
    push_async(&ev);
}

/* The kernel drops the events of an object destroyed before they were
 * read: none names freed memory. */
static void purge_async(const void *element)
{
    int kept = 0;
    for (int i = 0; i < async_n; ++i) {
        struct ibv_async_event *e = &async_q[(async_head + i) % FAKE_MAX_ASYNC];
        if (e->element.qp != element) { /* the union's pointers alias */
            async_q[(async_head + kept++) % FAKE_MAX_ASYNC] = *e;
        }
    }
    async_n = kept;
}

int fake_async_waiting(void)
{
    return async_n;
}

static int f_get_async_event(struct ibv_context *ctx, struct ibv_async_event *ev)
{
    (void)ctx;
    if (0 == async_n) {
        errno = EAGAIN;
        return -1;
    }
    *ev = async_q[async_head];
    async_head = (async_head + 1) % FAKE_MAX_ASYNC;
    --async_n;
    ++fake.live_async;
    ++fake.async_taken;
    return 0;
}

static void f_ack_async_event(struct ibv_async_event *ev)
{
    (void)ev;
    if (fake.live_async <= 0) {
        fake_fault(&fake.misuse, "ibv_ack_async_event of an event not taken");
        return;
    }
    --fake.live_async;
}

static const char *f_event_type_str(enum ibv_event_type t)
{
    return ibv_event_type_str(t);
}

static const char *f_wc_status_str(enum ibv_wc_status s)
{
    return ibv_wc_status_str(s);
}

void fake_qp_fail(struct ibv_qp *qp, enum ibv_wc_status status)
{
    fake_qp(qp)->fail_next = status;
}

int fake_inject_recv(struct ibv_qp *qp, const void *data, uint32_t len)
{
    fake_swr_t w;
    memset(&w, 0, sizeof(w));
    w.length = len;
    w.inl = (unsigned char *)(uintptr_t)data;
    return IBV_WC_SUCCESS == deliver(NULL, fake_qp(qp), &w) ? 0 : -1;
}

uint32_t fake_srq_posted(struct ibv_srq *srq)
{
    return ((fake_srq_t *)srq)->count;
}

uint32_t fake_cq_waiting(struct ibv_cq *cq)
{
    return ((fake_cq_t *)cq)->count;
}

uint32_t fake_qp_outstanding(struct ibv_qp *qp)
{
    return (uint32_t)(fake_qp(qp)->tail - fake_qp(qp)->head);
}

/* Fork safety: as on a kernel that copies registered pages on fork(). */
static int f_fork_init(void)
{
    return 0;
}

static int f_is_fork_initialized(void)
{
    return 2; /* IBV_FORK_UNNEEDED */
}

/* ------------------------------------------------------------------ table */

/* The rdma_cm entries are filled by fake_cm_install (fake_rdmacm.c). */
mca_btl_llrdma_verbs_ops_t fake_ops = {
    .get_device_list = f_get_device_list,
    .free_device_list = f_free_device_list,
    .get_device_name = f_get_device_name,
    .open_device = f_open_device,
    .close_device = f_close_device,
    .query_device = f_query_device,
    .query_port = f_query_port,
    .query_gid = f_query_gid,
    .query_gid_type = f_query_gid_type,
    .alloc_pd = f_alloc_pd,
    .dealloc_pd = f_dealloc_pd,
    .reg_mr = f_reg_mr,
    .dereg_mr = f_dereg_mr,
    .create_cq = f_create_cq,
    .destroy_cq = f_destroy_cq,
    .modify_cq = f_modify_cq,
    .resize_cq = f_resize_cq,
    .create_srq = f_create_srq,
    .query_srq = f_query_srq,
    .modify_srq = f_modify_srq,
    .destroy_srq = f_destroy_srq,
    .create_qp = f_create_qp,
    .query_qp = f_query_qp,
    .destroy_qp = f_destroy_qp,
    .modify_qp = f_modify_qp,
    .post_send = f_post_send,
    .create_qp_ex = f_create_qp_ex,
    .qp_to_qp_ex = f_qp_to_qp_ex,
    .post_srq_recv = f_post_srq_recv,
    .poll_cq = f_poll_cq,
    .wc_status_str = f_wc_status_str,
    .get_async_event = f_get_async_event,
    .ack_async_event = f_ack_async_event,
    .event_type_str = f_event_type_str,
    .reg_dmabuf_mr = f_reg_dmabuf_mr,
    .peermem_loaded = f_peermem_loaded,
    .fork_init = f_fork_init,
    .is_fork_initialized = f_is_fork_initialized,
};

void fake_install(void)
{
    if (NULL != qps || NULL != mrs) {
        /* Leaked by the previous test (which failed its leak check): forget them. */
        fprintf(stderr, "fake_verbs: objects of a previous test are still alive\n");
        qps = NULL;
        mrs = NULL;
    }
    memset(&fake, 0, sizeof(fake));
    fake_wr_lock = fake_wr_unlock = NULL; /* the lock layer sets them */
    async_head = async_n = 0;
    fake.max_inline = 1024;
    fake.max_qp_wr = 4096;
    fake.max_srq_wr = 4096;
    fake.max_cqe = 4096;
    fake.modify_cq_supported = 1;
    fake.max_rd_atom = 16;
    fake.max_msg_sz = 1u << 31;
    fake_cm_install(&fake_ops);
    fake_events_install(&fake_ops);
    mca_btl_llrdma_verbs = fake_ops;
}

void fake_uninstall(void)
{
    mca_btl_llrdma_verbs = mca_btl_llrdma_verbs_real;
}

int fake_live_objects(void)
{
    return fake.live_pd + fake.live_mr + fake.live_cq + fake.live_srq + fake.live_qp +
           fake.live_id + fake.live_channel + fake.live_event + fake.live_comp_channel +
           fake.live_async;
}

int fake_faults(void)
{
    return fake.sq_overflows + fake.srq_overflows + fake.inline_overflows + fake.bad_posts +
           fake.cq_overruns + fake.rnr_events + fake.access_errors + fake.len_errors +
           fake.prot_errors + fake.misuse + fake.rd_atomic_errors;
}
