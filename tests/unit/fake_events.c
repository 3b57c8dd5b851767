/*
 * Completion channels and events of the fake verbs device (see
 * fake_verbs.h), and a lock that lets threads share the fake.
 */
#include "fake_verbs.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FAIL_POINT FAKE_FAIL_POINT
#define FAKE_MAX_CQ_EVENTS 1024

typedef struct fake_channel {
    struct ibv_comp_channel ch; /* ch.fd: the read end of `pipe` */
    int pipe[2];
    fake_cq_t *q[FAKE_MAX_CQ_EVENTS]; /* events in order */
    uint32_t head, count;
    int ncq; /* CQs created on it, not destroyed */
} fake_channel_t;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Live CQs on a channel, for the period check: few in any test. */
#define FAKE_MAX_EVENT_CQS 64
static fake_cq_t *event_cqs[FAKE_MAX_EVENT_CQS];

static void fire(fake_cq_t *f)
{
    fake_channel_t *c = f->channel;
    char b = 1;
    if (c->count >= FAKE_MAX_CQ_EVENTS) {
        fake_fault(&fake.misuse, "completion channel overflow (events never taken)");
        return;
    }
    c->q[(c->head + c->count) % FAKE_MAX_CQ_EVENTS] = f;
    ++c->count;
    f->armed = 0;
    f->since_arm = 0;
    ++f->events;
    ++fake.nevents;
    if (1 != write(c->pipe[1], &b, 1)) {
        fake_fault(&fake.misuse, "completion channel pipe full");
    }
}

void fake_cq_completion_added(fake_cq_t *f)
{
    if (NULL == f->channel || !f->armed) {
        return; /* no event unless armed */
    }
    if (0 == f->since_arm++) {
        f->first_ns = now_ns();
    }
    /* Without moderation every completion of an armed CQ is an event; with
     * it, mod_count completions are (mod_count 0: only the period counts). */
    if (!f->moderated || (0 != f->mod_count && f->since_arm >= f->mod_count)) {
        fire(f);
    }
}

void fake_events_tick(void)
{
    uint64_t t = 0;
    for (int i = 0; i < FAKE_MAX_EVENT_CQS; ++i) {
        fake_cq_t *f = event_cqs[i];
        if (NULL == f || !f->armed || !f->moderated || 0 == f->since_arm) {
            continue;
        }
        if (0 == t) {
            t = now_ns();
        }
        if (t - f->first_ns >= (uint64_t)f->mod_period * 1000u) {
            fire(f);
        }
    }
}

int fake_cq_destroy_check(fake_cq_t *f)
{
    if (NULL == f->channel) {
        return 0;
    }
    if (0 != f->unacked) {
        fake_fault(&fake.misuse, "ibv_destroy_cq with %u events not acknowledged", f->unacked);
        return -1;
    }
    /* Events of it still queued in the channel are dropped with it. */
    for (uint32_t k = 0; k < f->channel->count; ++k) {
        uint32_t at = (f->channel->head + k) % FAKE_MAX_CQ_EVENTS;
        if (f->channel->q[at] == f) {
            f->channel->q[at] = NULL;
        }
    }
    --f->channel->ncq;
    for (int i = 0; i < FAKE_MAX_EVENT_CQS; ++i) {
        if (event_cqs[i] == f) {
            event_cqs[i] = NULL;
        }
    }
    return 0;
}

void fake_cq_channel_attach(fake_cq_t *f)
{
    if (NULL != f->channel) {
        ++f->channel->ncq;
    }
}

uint64_t fake_cq_events(struct ibv_cq *cq)
{
    return ((fake_cq_t *)cq)->events;
}

int fake_cq_armed(struct ibv_cq *cq)
{
    return ((fake_cq_t *)cq)->armed;
}

static struct ibv_comp_channel *f_create_comp_channel(struct ibv_context *ctx)
{
    fake_channel_t *c;
    if (FAIL_POINT() || (fake.comp_channel_fails > 0 && fake.comp_channel_fails--)) {
        errno = ENOMEM;
        return NULL;
    }
    c = calloc(1, sizeof(*c));
    if (NULL == c || 0 != pipe(c->pipe)) {
        free(c);
        errno = EMFILE;
        return NULL;
    }
    (void)fcntl(c->pipe[0], F_SETFL, O_NONBLOCK);
    (void)fcntl(c->pipe[1], F_SETFL, O_NONBLOCK);
    c->ch.context = ctx;
    c->ch.fd = c->pipe[0];
    ++fake.live_comp_channel;
    return &c->ch;
}

static int f_destroy_comp_channel(struct ibv_comp_channel *ch)
{
    fake_channel_t *c = (fake_channel_t *)ch;
    if (0 != c->ncq) {
        fake_fault(&fake.misuse, "ibv_destroy_comp_channel while %d CQs use it (EBUSY)", c->ncq);
        return EBUSY;
    }
    close(c->pipe[0]);
    close(c->pipe[1]);
    free(c);
    --fake.live_comp_channel;
    return 0;
}

static int f_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
    fake_cq_t *f = (fake_cq_t *)cq;
    if (FAIL_POINT()) {
        return ENOMEM;
    }
    if (solicited_only) {
        fake_fault(&fake.misuse, "solicited-only events: the BTL never sends solicited WRs");
        return EINVAL;
    }
    if (NULL == f->channel) {
        fake_fault(&fake.misuse, "ibv_req_notify_cq on a CQ without a completion channel");
        return EINVAL;
    }
    if (!f->armed) {
        f->armed = 1;
        f->since_arm = 0;
        /* Register for the moderation-period check. */
        for (int i = 0, free_at = -1; i < FAKE_MAX_EVENT_CQS; ++i) {
            if (event_cqs[i] == f) {
                break;
            }
            if (NULL == event_cqs[i] && free_at < 0) {
                free_at = i;
            }
            if (FAKE_MAX_EVENT_CQS - 1 == i && free_at >= 0) {
                event_cqs[free_at] = f;
            }
        }
    }
    ++fake.narms;
    /* Completions already waiting do not make an event (as on real CQs,
     * where only completions after arming do): the BTL polls after arming. */
    return 0;
}

static int f_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **ctx)
{
    fake_channel_t *c = (fake_channel_t *)ch;
    char b;
    fake_cq_t *f = NULL;

    for (;;) {
        if (1 != read(c->pipe[0], &b, 1)) {
            errno = EAGAIN;
            return -1;
        }
        if (0 == c->count) {
            fake_fault(&fake.misuse, "channel byte without an event");
            errno = EAGAIN;
            return -1;
        }
        f = c->q[c->head];
        c->head = (c->head + 1) % FAKE_MAX_CQ_EVENTS;
        --c->count;
        if (NULL != f) {
            break; /* else: its CQ was destroyed */
        }
    }
    ++f->unacked;
    *cq = &f->cq;
    *ctx = f->cq.cq_context;
    return 0;
}

static void f_ack_cq_events(struct ibv_cq *cq, unsigned int n)
{
    fake_cq_t *f = (fake_cq_t *)cq;
    if (n > f->unacked) {
        fake_fault(&fake.misuse, "ibv_ack_cq_events(%u) with %u events taken", n, f->unacked);
        f->unacked = 0;
        return;
    }
    f->unacked -= n;
}

void fake_events_install(mca_btl_llrdma_verbs_ops_t *ops)
{
    memset(event_cqs, 0, sizeof(event_cqs));
    ops->create_comp_channel = f_create_comp_channel;
    ops->destroy_comp_channel = f_destroy_comp_channel;
    ops->req_notify_cq = f_req_notify_cq;
    ops->get_cq_event = f_get_cq_event;
    ops->ack_cq_events = f_ack_cq_events;
}

/* ------------------------------------------------------------ the lock */

static pthread_mutex_t fake_mutex;
static mca_btl_llrdma_verbs_ops_t inner;

#define LOCKED(ret, name, params, args)                                                            \
    static ret l_##name params                                                                     \
    {                                                                                              \
        ret r;                                                                                     \
        pthread_mutex_lock(&fake_mutex);                                                           \
        r = inner.name args;                                                                       \
        pthread_mutex_unlock(&fake_mutex);                                                         \
        return r;                                                                                  \
    }

LOCKED(struct ibv_mr *, reg_mr, (struct ibv_pd * pd, void *a, size_t n, int acc), (pd, a, n, acc))
LOCKED(int, dereg_mr, (struct ibv_mr * mr), (mr))
LOCKED(struct ibv_cq *, create_cq,
       (struct ibv_context * c, int n, void *ctx, struct ibv_comp_channel *ch, int v),
       (c, n, ctx, ch, v))
LOCKED(int, destroy_cq, (struct ibv_cq * cq), (cq))
LOCKED(struct ibv_pd *, alloc_pd, (struct ibv_context * c), (c))
LOCKED(int, dealloc_pd, (struct ibv_pd * pd), (pd))
LOCKED(struct ibv_srq *, create_srq, (struct ibv_pd * pd, struct ibv_srq_init_attr *a), (pd, a))
LOCKED(int, query_srq, (struct ibv_srq * s, struct ibv_srq_attr *a), (s, a))
LOCKED(int, destroy_srq, (struct ibv_srq * s), (s))
LOCKED(int, modify_cq, (struct ibv_cq * cq, struct ibv_modify_cq_attr *a), (cq, a))
LOCKED(int, query_qp,
       (struct ibv_qp * qp, struct ibv_qp_attr *a, int mask, struct ibv_qp_init_attr *i),
       (qp, a, mask, i))
LOCKED(int, modify_qp, (struct ibv_qp * qp, struct ibv_qp_attr *a, int mask), (qp, a, mask))
LOCKED(int, post_send, (struct ibv_qp * qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad),
       (qp, wr, bad))
LOCKED(int, post_srq_recv, (struct ibv_srq * s, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad),
       (s, wr, bad))
LOCKED(int, poll_cq, (struct ibv_cq * cq, int n, struct ibv_wc *wc), (cq, n, wc))
LOCKED(int, req_notify_cq, (struct ibv_cq * cq, int s), (cq, s))
LOCKED(int, get_cq_event, (struct ibv_comp_channel * ch, struct ibv_cq **cq, void **ctx),
       (ch, cq, ctx))
LOCKED(int, cm_create_id,
       (struct rdma_event_channel * ch, struct rdma_cm_id **id, void *ctx, enum rdma_port_space ps),
       (ch, id, ctx, ps))
LOCKED(int, cm_destroy_id, (struct rdma_cm_id * id), (id))
LOCKED(int, cm_resolve_addr,
       (struct rdma_cm_id * id, struct sockaddr *s, struct sockaddr *d, int ms), (id, s, d, ms))
LOCKED(int, cm_resolve_route, (struct rdma_cm_id * id, int ms), (id, ms))
LOCKED(int, cm_create_qp, (struct rdma_cm_id * id, struct ibv_pd *pd, struct ibv_qp_init_attr *a),
       (id, pd, a))
LOCKED(int, cm_connect, (struct rdma_cm_id * id, struct rdma_conn_param *p), (id, p))
LOCKED(int, cm_accept, (struct rdma_cm_id * id, struct rdma_conn_param *p), (id, p))
LOCKED(int, cm_create_qp_ex, (struct rdma_cm_id * id, struct ibv_qp_init_attr_ex *a), (id, a))
LOCKED(struct ibv_qp *, create_qp_ex, (struct ibv_context * c, struct ibv_qp_init_attr_ex *a),
       (c, a))
static void wr_lock(void)
{
    pthread_mutex_lock(&fake_mutex);
}

static void wr_unlock(void)
{
    pthread_mutex_unlock(&fake_mutex);
}
LOCKED(int, cm_set_ack_timeout, (struct rdma_cm_id * id, uint8_t t), (id, t))
LOCKED(int, cm_reject, (struct rdma_cm_id * id, const void *d, uint8_t n), (id, d, n))
LOCKED(int, cm_disconnect, (struct rdma_cm_id * id), (id))
LOCKED(int, cm_get_event, (struct rdma_event_channel * ch, struct rdma_cm_event **ev), (ch, ev))
LOCKED(int, cm_ack_event, (struct rdma_cm_event * ev), (ev))
LOCKED(int, get_async_event, (struct ibv_context * c, struct ibv_async_event *ev), (c, ev))

static void l_ack_async_event(struct ibv_async_event *ev)
{
    pthread_mutex_lock(&fake_mutex);
    inner.ack_async_event(ev);
    pthread_mutex_unlock(&fake_mutex);
}

static void l_ack_cq_events(struct ibv_cq *cq, unsigned int n)
{
    pthread_mutex_lock(&fake_mutex);
    inner.ack_cq_events(cq, n);
    pthread_mutex_unlock(&fake_mutex);
}

static void l_cm_destroy_qp(struct rdma_cm_id *id)
{
    pthread_mutex_lock(&fake_mutex);
    inner.cm_destroy_qp(id);
    pthread_mutex_unlock(&fake_mutex);
}

void fake_lock_install(void)
{
    mca_btl_llrdma_verbs_ops_t *o = &mca_btl_llrdma_verbs;
    pthread_mutexattr_t a;

    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&fake_mutex, &a);
    pthread_mutexattr_destroy(&a);
    inner = *o;
#define SWAP(name) o->name = l_##name
    SWAP(reg_mr);
    SWAP(dereg_mr);
    SWAP(create_cq);
    SWAP(destroy_cq);
    SWAP(alloc_pd);
    SWAP(dealloc_pd);
    SWAP(create_srq);
    SWAP(query_srq);
    SWAP(destroy_srq);
    SWAP(modify_cq);
    SWAP(query_qp);
    SWAP(modify_qp);
    SWAP(post_send);
    fake_wr_lock = wr_lock; /* ibv_wr_start .. wr_complete, as post_send */
    fake_wr_unlock = wr_unlock;
    SWAP(create_qp_ex);
    SWAP(cm_create_qp_ex);
    SWAP(post_srq_recv);
    SWAP(poll_cq);
    SWAP(req_notify_cq);
    SWAP(get_cq_event);
    SWAP(ack_cq_events);
    SWAP(cm_create_id);
    SWAP(cm_destroy_id);
    SWAP(cm_resolve_addr);
    SWAP(cm_resolve_route);
    SWAP(cm_create_qp);
    SWAP(cm_destroy_qp);
    SWAP(cm_connect);
    SWAP(cm_accept);
    SWAP(cm_set_ack_timeout);
    SWAP(cm_reject);
    SWAP(cm_disconnect);
    SWAP(cm_get_event);
    SWAP(cm_ack_event);
    SWAP(get_async_event);
    SWAP(ack_async_event);
#undef SWAP
}
