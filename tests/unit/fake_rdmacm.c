/*
 * The rdma_cm half of the fake device (see fake_verbs.h): listeners found by
 * address and port, connection requests, accepts, rejects and disconnects
 * between the modules of one process, with their private data, and the CM
 * "network" that can hold messages in flight (fake.cm_hold).
 */
#include "fake_verbs.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL_POINT FAKE_FAIL_POINT

/* Private data an IB CM message carries to the user (rdma_cm reports the
 * whole field, zero-padded): request, reply (accept), reject. */
#define PDATA_REQ 56
#define PDATA_REP 196
#define PDATA_REJ 148

typedef struct fake_channel {
    struct rdma_event_channel ch; /* ch.fd: readable while events wait, as rdma_cm's */
    struct rdma_cm_event *ev[FAKE_MAX_EV];
    int head, count;
    int signalled; /* ch.fd holds a count */
} fake_channel_t;

/* Keep the fd readable exactly while events wait (a poll()ing thread wakes). */
static void chan_sync(fake_channel_t *c)
{
    uint64_t v = 1;
    if (c->count > 0 && !c->signalled) {
        c->signalled = sizeof(v) == write(c->ch.fd, &v, sizeof(v));
    } else if (0 == c->count && c->signalled) {
        c->signalled = !(sizeof(v) == read(c->ch.fd, &v, sizeof(v)));
    }
}

typedef struct fake_event {
    struct rdma_cm_event ev;
    unsigned char pdata[256];
} fake_event_t;

typedef struct fake_id {
    struct rdma_cm_id id;
    struct fake_id *peer; /* the other end of a connection (attempt) */
    struct fake_id *next; /* live ids */
    int listening;
    uint32_t ip;   /* bound address, network order */
    uint16_t port; /* listening port, host order */
    struct sockaddr_in dst;
    int passive, raw, answered, established, disconnected;
    uint8_t offer_init, offer_resp; /* passive: read depths the request allows this side */
    uint8_t ack_timeout;            /* RDMA_OPTION_ID_ACK_TIMEOUT; 0 = not set */
} fake_id_t;

static uint16_t next_port = 4242;
static struct rdma_cm_id *last_id;
static fake_id_t *ids;

static struct ibv_context **f_cm_get_devices(int *n)
{
    struct ibv_context **l;
    if (FAIL_POINT()) {
        return NULL;
    }
    l = calloc(2, sizeof(*l));
    l[0] = &fake_ctx;
    *n = 1;
    return l;
}

static void f_cm_free_devices(struct ibv_context **l)
{
    free(l);
}

static struct rdma_event_channel *f_cm_create_event_channel(void)
{
    fake_channel_t *c;
    if (FAIL_POINT()) {
        return NULL;
    }
    c = calloc(1, sizeof(*c));
    c->ch.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    ++fake.live_channel;
    return &c->ch;
}

static struct rdma_cm_event *new_event(struct rdma_cm_id *id, enum rdma_cm_event_type type,
                                       int status, const void *pdata, uint8_t len, int field)
{
    fake_event_t *e = calloc(1, sizeof(*e));
    e->ev.id = id;
    e->ev.event = type;
    e->ev.status = status;
    if (0 != field) {
        if (NULL != pdata) {
            memcpy(e->pdata, pdata, len);
        }
        e->ev.param.conn.private_data = e->pdata;
        e->ev.param.conn.private_data_len = (uint8_t)field;
    }
    ++fake.live_event;
    return &e->ev;
}

static void push(struct rdma_event_channel *ch, struct rdma_cm_event *ev)
{
    fake_channel_t *c = (fake_channel_t *)ch;
    if (c->count >= FAKE_MAX_EV) {
        fprintf(stderr, "fake_verbs: event channel full\n");
        abort();
    }
    c->ev[(c->head + c->count) % FAKE_MAX_EV] = ev;
    ++c->count;
    chan_sync(c);
}

static void push_pd(struct rdma_cm_id *id, enum rdma_cm_event_type type, int status,
                    const void *pdata, uint8_t len, int field)
{
    push(id->channel, new_event(id, type, status, pdata, len, field));
}

/* CM messages between processes: straight to the channel, or held in flight
 * (fake.cm_hold) until the test delivers them. */
#define FAKE_MAX_FLIGHT 1024
static struct flight {
    struct rdma_event_channel *ch;
    struct rdma_cm_event *ev;
} flights[FAKE_MAX_FLIGHT];
static int nflights;

static void net_ev(struct rdma_event_channel *ch, struct rdma_cm_event *ev)
{
    if (!fake.cm_hold) {
        push(ch, ev);
        return;
    }
    if (nflights >= FAKE_MAX_FLIGHT) {
        fprintf(stderr, "fake_verbs: too many CM messages in flight\n");
        abort();
    }
    flights[nflights].ch = ch;
    flights[nflights].ev = ev;
    ++nflights;
}

static void net_pd(struct rdma_cm_id *id, enum rdma_cm_event_type type, int status,
                   const void *pdata, uint8_t len, int field)
{
    net_ev(id->channel, new_event(id, type, status, pdata, len, field));
}

int fake_cm_in_flight(void)
{
    return nflights;
}

int fake_cm_deliver(int which)
{
    struct rdma_event_channel *dest[FAKE_MAX_FLIGHT];
    int ndest = 0, k;

    if (0 == nflights) {
        return 0;
    }
    if (which < 0) {
        int n = nflights;
        for (int i = 0; i < nflights; ++i) {
            push(flights[i].ch, flights[i].ev);
        }
        nflights = 0;
        return n;
    }
    /* In order per destination; `which` picks the destination. */
    for (int i = 0; i < nflights; ++i) {
        int seen = 0;
        for (int j = 0; j < ndest && !seen; ++j) {
            seen = dest[j] == flights[i].ch;
        }
        if (!seen) {
            dest[ndest++] = flights[i].ch;
        }
    }
    for (k = 0; flights[k].ch != dest[which % ndest]; ++k) {
    }
    push(flights[k].ch, flights[k].ev);
    memmove(&flights[k], &flights[k + 1], (size_t)(nflights - k - 1) * sizeof(flights[0]));
    --nflights;
    return 1;
}

/* Messages in flight to a destroyed id or channel are lost with it. */
static int flight_gone(int i, const struct rdma_cm_id *id, const struct rdma_event_channel *ch)
{
    const struct rdma_cm_event *ev = flights[i].ev;
    return (NULL != id && (ev->id == id || ev->listen_id == id)) ||
           (NULL != ch && flights[i].ch == ch);
}

void fake_push_event(struct rdma_cm_id *id, enum rdma_cm_event_type type, int status)
{
    push_pd(id, type, status, NULL, 0, 0);
}

static void id_destroy(fake_id_t *f);

/* Events of `id` die with it; so do connection requests a listener never
 * took (their ids are destroyed, which rejects the initiator). */
static void purge_events(fake_id_t *f)
{
    fake_channel_t *c = (fake_channel_t *)f->id.channel;
    int kept = 0, n;
    fake_id_t *orphans[FAKE_MAX_EV];
    int norphans = 0;

    if (NULL == c) {
        return;
    }
    n = c->count;
    for (int i = 0; i < n; ++i) {
        struct rdma_cm_event *ev = c->ev[(c->head + i) % FAKE_MAX_EV];
        if (ev->id == &f->id || (f->listening && ev->listen_id == &f->id)) {
            if (ev->id != &f->id) {
                orphans[norphans++] = (fake_id_t *)ev->id;
            }
            free(ev);
            --fake.live_event;
        } else {
            c->ev[(c->head + kept) % FAKE_MAX_EV] = ev;
            ++kept;
        }
    }
    c->count = kept;
    chan_sync(c);
    kept = 0;
    for (int i = 0; i < nflights; ++i) {
        struct rdma_cm_event *ev = flights[i].ev;
        if (flight_gone(i, &f->id, NULL)) {
            if (ev->id != &f->id && norphans < FAKE_MAX_EV) {
                orphans[norphans++] = (fake_id_t *)ev->id;
            }
            free(ev);
            --fake.live_event;
        } else {
            flights[kept++] = flights[i];
        }
    }
    nflights = kept;
    for (int i = 0; i < norphans; ++i) {
        id_destroy(orphans[i]);
    }
}

/* The other end learns that `f` is gone. */
static void peer_gone(fake_id_t *f)
{
    fake_id_t *p = f->peer;
    if (NULL == p) {
        return;
    }
    f->peer = NULL;
    p->peer = NULL;
    if (f->established) {
        if (!p->disconnected) {
            p->disconnected = 1;
            net_pd(&p->id, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0, 0);
        }
    } else if (f->passive && !f->answered) {
        /* The kernel rejects a request whose id is destroyed unanswered. */
        net_pd(&p->id, RDMA_CM_EVENT_REJECTED, 28, NULL, 0, PDATA_REJ);
    }
}

static void id_destroy(fake_id_t *f)
{
    if (NULL != f->id.qp) {
        fake_fault(&fake.misuse, "rdma_destroy_id with its QP alive");
    }
    purge_events(f);
    peer_gone(f);
    for (fake_id_t **pp = &ids; NULL != *pp; pp = &(*pp)->next) {
        if (*pp == f) {
            *pp = f->next;
            break;
        }
    }
    if (&f->id == last_id) {
        last_id = NULL;
    }
    free(f);
    --fake.live_id;
}

static void f_cm_destroy_event_channel(struct rdma_event_channel *ch)
{
    fake_channel_t *c = (fake_channel_t *)ch;
    for (fake_id_t *f = ids; NULL != f; f = f->next) {
        if (f->id.channel == ch) {
            fake_fault(&fake.misuse, "rdma_destroy_event_channel with ids on it");
            break;
        }
    }
    for (int i = 0, kept = 0, n = nflights; i < n; ++i) {
        if (flight_gone(i, NULL, ch)) {
            free(flights[i].ev);
            --fake.live_event;
            --nflights;
        } else {
            flights[kept++] = flights[i];
        }
    }
    while (c->count > 0) { /* undelivered events die with the channel */
        free(c->ev[c->head]);
        --fake.live_event;
        c->head = (c->head + 1) % FAKE_MAX_EV;
        --c->count;
    }
    close(c->ch.fd);
    free(c);
    --fake.live_channel;
}

static fake_id_t *id_new(struct rdma_event_channel *ch, void *ctx, enum rdma_port_space ps)
{
    fake_id_t *f = calloc(1, sizeof(*f));
    f->id.channel = ch;
    f->id.context = ctx;
    f->id.verbs = &fake_ctx;
    f->id.ps = ps;
    f->next = ids;
    ids = f;
    ++fake.live_id;
    return f;
}

static int f_cm_create_id(struct rdma_event_channel *ch, struct rdma_cm_id **id, void *ctx,
                          enum rdma_port_space ps)
{
    if (FAIL_POINT()) {
        errno = ENOMEM;
        return -1;
    }
    *id = &id_new(ch, ctx, ps)->id;
    last_id = *id;
    return 0;
}

static int f_cm_destroy_id(struct rdma_cm_id *id)
{
    id_destroy((fake_id_t *)id);
    return 0;
}

static int f_cm_bind_addr(struct rdma_cm_id *id, struct sockaddr *a)
{
    if (FAIL_POINT()) {
        errno = EADDRNOTAVAIL;
        return -1;
    }
    ((fake_id_t *)id)->ip = ((struct sockaddr_in *)a)->sin_addr.s_addr;
    return 0;
}

static int f_cm_listen(struct rdma_cm_id *id, int backlog)
{
    (void)backlog;
    if (FAIL_POINT()) {
        errno = ENOMEM;
        return -1;
    }
    ((fake_id_t *)id)->listening = 1;
    ((fake_id_t *)id)->port = next_port++;
    if (id == last_id) {
        last_id = NULL;
    }
    return 0;
}

static uint16_t f_cm_get_src_port(struct rdma_cm_id *id)
{
    return htons(((fake_id_t *)id)->port);
}

static int f_cm_resolve_addr(struct rdma_cm_id *id, struct sockaddr *s, struct sockaddr *d, int ms)
{
    (void)s;
    (void)ms;
    if (FAIL_POINT()) {
        errno = ENOMEM;
        return -1;
    }
    memcpy(&((fake_id_t *)id)->dst, d, sizeof(struct sockaddr_in));
    fake_push_event(id, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
    return 0;
}

static int f_cm_resolve_route(struct rdma_cm_id *id, int ms)
{
    (void)ms;
    if (FAIL_POINT()) {
        errno = ENOMEM;
        return -1;
    }
    if (fake.route_unreachable) {
        fake_push_event(id, RDMA_CM_EVENT_UNREACHABLE, -110);
    } else {
        fake_push_event(id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
    }
    return 0;
}

static int f_cm_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
    if (FAIL_POINT()) {
        errno = ENOMEM;
        return -1;
    }
    id->qp = fake_new_qp(pd, a);
    return NULL == id->qp ? -1 : 0;
}

static int f_cm_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *a)
{
    if (FAIL_POINT()) {
        errno = ENOMEM;
        return -1;
    }
    id->qp = fake_new_qp_ex(a);
    return NULL == id->qp ? -1 : 0;
}

static void f_cm_destroy_qp(struct rdma_cm_id *id)
{
    (void)fake_destroy_qp(id->qp);
    id->qp = NULL;
}

static void take_param(struct rdma_cm_id *id, const struct rdma_conn_param *p)
{
    uint8_t t = ((fake_id_t *)id)->ack_timeout;
    if (NULL != p && NULL != id->qp) {
        fake_qp(id->qp)->rnr_retry = p->rnr_retry_count;
        fake_qp(id->qp)->retry_count = p->retry_count;
    }
    if (NULL != id->qp) {
        fake_qp(id->qp)->ack_timeout = 0 != t ? t : 18; /* rdma_cm's default for RoCE */
    }
}

/* As rdma_cm: the option is taken when the QP moves to RTS, so it must come
 * before connect / accept; the kernel takes 0..31. */
static int f_cm_set_ack_timeout(struct rdma_cm_id *id, uint8_t timeout)
{
    fake_id_t *f = (fake_id_t *)id;
    if (FAIL_POINT()) {
        errno = ENOSYS;
        return -1;
    }
    if (timeout > 31 || f->answered || f->established || f->listening) {
        fake_fault(&fake.misuse, "ACK timeout %u set on an id that is listening or connected",
                   timeout);
        errno = EINVAL;
        return -1;
    }
    f->ack_timeout = timeout;
    return 0;
}

static int f_cm_connect(struct rdma_cm_id *id, struct rdma_conn_param *p)
{
    fake_id_t *f = (fake_id_t *)id, *l = NULL, *pas;
    if (FAIL_POINT()) {
        errno = ENOMEM;
        return -1;
    }
    if (NULL == id->qp || (NULL != p && p->private_data_len > PDATA_REQ)) {
        fake_fault(&fake.bad_posts, "rdma_connect without a QP or with %u bytes of private data",
                   NULL != p ? p->private_data_len : 0);
        errno = EINVAL;
        return -1;
    }
    if (NULL != p &&
        (p->initiator_depth > fake.max_rd_atom || p->responder_resources > fake.max_rd_atom)) {
        fake_fault(&fake.bad_posts, "rdma_connect with read depths %u/%u above the device's %u",
                   p->initiator_depth, p->responder_resources, fake.max_rd_atom);
        errno = EINVAL;
        return -1;
    }
    ++fake.nconnects;
    take_param(id, p);
    for (fake_id_t *i = ids; NULL != i; i = i->next) {
        if (i->listening && i->ip == f->dst.sin_addr.s_addr && htons(i->port) == f->dst.sin_port) {
            l = i;
        }
    }
    if (NULL == l || fake.refuse_connects > 0) {
        if (fake.refuse_connects > 0) {
            --fake.refuse_connects;
        }
        /* No listener: the CM answers "invalid service id". */
        net_pd(id, RDMA_CM_EVENT_REJECTED, 8, NULL, 0, PDATA_REJ);
        return 0;
    }
    pas = id_new(l->id.channel, l->id.context, l->id.ps);
    pas->passive = 1;
    pas->peer = f;
    f->peer = pas;
    {
        struct rdma_cm_event *ev = new_event(&pas->id, RDMA_CM_EVENT_CONNECT_REQUEST, 0,
                                             NULL != p ? p->private_data : NULL,
                                             NULL != p ? p->private_data_len : 0, PDATA_REQ);
        ev->listen_id = &l->id;
        /* As the kernel reports them: from the passive side's point of view. */
        if (NULL != p) {
            pas->offer_init = p->responder_resources;
            pas->offer_resp = p->initiator_depth;
        }
        ev->param.conn.initiator_depth = pas->offer_init;
        ev->param.conn.responder_resources = pas->offer_resp;
        net_ev(l->id.channel, ev);
    }
    return 0;
}

static int f_cm_accept(struct rdma_cm_id *id, struct rdma_conn_param *p)
{
    fake_id_t *f = (fake_id_t *)id, *a = f->peer;
    if (FAIL_POINT()) {
        errno = ENOMEM;
        return -1;
    }
    if (!f->passive || f->answered || NULL == id->qp ||
        (NULL != p && p->private_data_len > PDATA_REP)) {
        fake_fault(&fake.misuse, "rdma_accept on an id that cannot accept");
        errno = EINVAL;
        return -1;
    }
    if (NULL != p &&
        (p->initiator_depth > fake.max_rd_atom || p->responder_resources > fake.max_rd_atom)) {
        fake_fault(&fake.bad_posts, "rdma_accept with read depths %u/%u above the device's %u",
                   p->initiator_depth, p->responder_resources, fake.max_rd_atom);
        errno = EINVAL;
        return -1;
    }
    if (NULL != p &&
        (p->initiator_depth > f->offer_init || p->responder_resources > f->offer_resp)) {
        fake_fault(&fake.misuse, "rdma_accept with read depths %u/%u, the request allowed %u/%u",
                   p->initiator_depth, p->responder_resources, f->offer_init, f->offer_resp);
    }
    ++fake.naccepts;
    f->answered = 1;
    take_param(id, p);
    if (NULL != p) {
        fake_qp(id->qp)->max_rd_atomic = p->initiator_depth;
        fake_qp(id->qp)->max_dest_rd_atomic = p->responder_resources;
        if (NULL != a && NULL != a->id.qp) {
            fake_qp(a->id.qp)->max_rd_atomic = p->responder_resources;
            fake_qp(a->id.qp)->max_dest_rd_atomic = p->initiator_depth;
        }
    }
    if (f->raw) {
        f->established = 1;
        fake_qp(id->qp)->rts = 1;
        id->qp->state = IBV_QPS_RTS;
        fake_push_event(id, RDMA_CM_EVENT_ESTABLISHED, 0);
        return 0;
    }
    if (NULL == a || NULL == a->id.qp) {
        net_pd(id, RDMA_CM_EVENT_CONNECT_ERROR, -110, NULL, 0, 0); /* the initiator is gone */
        return 0;
    }
    fake_connect_pair(id->qp, a->id.qp);
    f->established = a->established = 1;
    /* The reply reaches the initiator; its RTU then reaches this side. */
    net_pd(&a->id, RDMA_CM_EVENT_ESTABLISHED, 0, NULL != p ? p->private_data : NULL,
           NULL != p ? p->private_data_len : 0, PDATA_REP);
    net_pd(id, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, 0, 0);
    return 0;
}

static int f_cm_reject(struct rdma_cm_id *id, const void *d, uint8_t len)
{
    fake_id_t *f = (fake_id_t *)id, *a = f->peer;
    if (FAIL_POINT()) {
        return -1;
    }
    if (!f->passive || f->answered || len > PDATA_REJ) {
        fake_fault(&fake.misuse, "rdma_reject on an id that cannot reject");
        return -1;
    }
    ++fake.nrejects;
    f->answered = 1;
    if (NULL != a) {
        f->peer = a->peer = NULL;
        net_pd(&a->id, RDMA_CM_EVENT_REJECTED, 28, d, len, PDATA_REJ);
    }
    return 0;
}

static int f_cm_disconnect(struct rdma_cm_id *id)
{
    fake_id_t *f = (fake_id_t *)id, *p = f->peer;
    if (!f->established || f->disconnected) {
        return 0;
    }
    /* This side's QP enters the error state; the peer's finds nobody. */
    if (NULL != id->qp) {
        fake_qp_enter_error(fake_qp(id->qp));
        fake_unwire(fake_qp(id->qp));
    }
    f->disconnected = 1;
    fake_push_event(id, RDMA_CM_EVENT_DISCONNECTED, 0);
    if (NULL != p && !p->disconnected) {
        p->disconnected = 1;
        net_pd(&p->id, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0, 0);
    }
    return 0;
}

static int f_cm_get_event(struct rdma_event_channel *ch, struct rdma_cm_event **ev)
{
    fake_channel_t *c = (fake_channel_t *)ch;
    if (0 == c->count) {
        errno = EAGAIN;
        return -1;
    }
    if (FAIL_POINT()) {
        errno = EIO;
        return -1;
    }
    *ev = c->ev[c->head];
    c->head = (c->head + 1) % FAKE_MAX_EV;
    --c->count;
    chan_sync(c);
    return 0;
}

static int f_cm_ack_event(struct rdma_cm_event *ev)
{
    free(ev);
    --fake.live_event;
    return 0;
}

static const char *f_cm_event_str(enum rdma_cm_event_type t)
{
    return rdma_event_str(t);
}

struct rdma_cm_id *fake_last_id(void)
{
    return last_id;
}

struct rdma_cm_id *fake_connect_request(struct rdma_cm_id *listen_id, const void *pdata,
                                        uint8_t len)
{
    fake_id_t *f = id_new(listen_id->channel, listen_id->context, listen_id->ps);
    struct rdma_cm_event *ev;
    f->passive = f->raw = 1;
    ev = new_event(&f->id, RDMA_CM_EVENT_CONNECT_REQUEST, 0, pdata, len, PDATA_REQ);
    ev->listen_id = listen_id;
    push(listen_id->channel, ev);
    return &f->id;
}

void fake_cm_install(mca_btl_llrdma_verbs_ops_t *ops)
{
    if (NULL != ids) {
        fprintf(stderr, "fake_verbs: cm ids of a previous test are still alive\n");
        ids = NULL;
    }
    last_id = NULL;
    nflights = 0;
    ops->cm_get_devices = f_cm_get_devices;
    ops->cm_free_devices = f_cm_free_devices;
    ops->cm_create_event_channel = f_cm_create_event_channel;
    ops->cm_destroy_event_channel = f_cm_destroy_event_channel;
    ops->cm_create_id = f_cm_create_id;
    ops->cm_destroy_id = f_cm_destroy_id;
    ops->cm_bind_addr = f_cm_bind_addr;
    ops->cm_listen = f_cm_listen;
    ops->cm_get_src_port = f_cm_get_src_port;
    ops->cm_resolve_addr = f_cm_resolve_addr;
    ops->cm_resolve_route = f_cm_resolve_route;
    ops->cm_create_qp = f_cm_create_qp;
    ops->cm_create_qp_ex = f_cm_create_qp_ex;
    ops->cm_destroy_qp = f_cm_destroy_qp;
    ops->cm_connect = f_cm_connect;
    ops->cm_accept = f_cm_accept;
    ops->cm_set_ack_timeout = f_cm_set_ack_timeout;
    ops->cm_reject = f_cm_reject;
    ops->cm_disconnect = f_cm_disconnect;
    ops->cm_get_event = f_cm_get_event;
    ops->cm_ack_event = f_cm_ack_event;
    ops->cm_event_str = f_cm_event_str;
}
