/*
 * The fake verbs device of the btl/llrdma unit tests (see fake_verbs.h).
 * Teardown entries (destroy, dealloc, dereg, free) are never failed: the BTL
 * has no recovery for them, and a failed destroy would only leak.
 */
#include "fake_verbs.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

fake_state_t fake;

/* The Nth counted call fails. */
#define FAIL_POINT()                                                                               \
    (++fake.calls == fake.fail_at ? (fake.failed_fn = __func__, fake.failed = 1) : 0)

typedef struct fake_channel {
    struct rdma_event_channel ch;
    struct rdma_cm_event *ev[FAKE_MAX_EV];
    int head, tail;
} fake_channel_t;

typedef struct fake_event {
    struct rdma_cm_event ev;
    unsigned char pdata[64];
} fake_event_t;

static struct ibv_device fake_dev;
static struct ibv_context fake_ctx = {.device = &fake_dev};
static uint32_t next_qp_num = 100;
static struct rdma_cm_id *last_id;

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
    a->max_cqe = 4096;
    a->max_srq_wr = 4096;
    a->max_qp_wr = 4096;
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
    a->state = IBV_PORT_ACTIVE;
    a->link_layer = IBV_LINK_LAYER_ETHERNET;
    a->gid_tbl_len = 2;
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
    free(pd);
    --fake.live_pd;
    return 0;
}

static struct ibv_mr *f_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
    struct ibv_mr *mr;
    (void)access;
    if (FAIL_POINT()) {
        return NULL;
    }
    mr = calloc(1, sizeof(*mr));
    mr->pd = pd;
    mr->addr = addr;
    mr->length = len;
    mr->lkey = 0x1234;
    ++fake.live_mr;
    return mr;
}

static int f_dereg_mr(struct ibv_mr *mr)
{
    free(mr);
    --fake.live_mr;
    return 0;
}

static struct ibv_cq *f_create_cq(struct ibv_context *c, int cqe, void *ctx,
                                  struct ibv_comp_channel *ch, int vec)
{
    fake_cq_t *f;
    (void)ctx;
    (void)ch;
    (void)vec;
    if (FAIL_POINT()) {
        return NULL;
    }
    f = calloc(1, sizeof(*f));
    f->cq.context = c;
    f->cq.cqe = cqe;
    ++fake.live_cq;
    return &f->cq;
}

static int f_destroy_cq(struct ibv_cq *cq)
{
    free(cq);
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
    if (FAIL_POINT()) {
        return ENOMEM;
    }
    cq->cqe = cqe;
    return 0;
}

static struct ibv_srq *f_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *a)
{
    struct ibv_srq *s;
    (void)a;
    if (FAIL_POINT()) {
        return NULL;
    }
    s = calloc(1, sizeof(*s));
    s->pd = pd;
    ++fake.live_srq;
    return s;
}

static int f_query_srq(struct ibv_srq *s, struct ibv_srq_attr *a)
{
    (void)s;
    if (FAIL_POINT()) {
        return ENOMEM;
    }
    memset(a, 0, sizeof(*a));
    a->max_wr = 4096;
    a->max_sge = 1;
    return 0;
}

static int f_destroy_srq(struct ibv_srq *s)
{
    free(s);
    --fake.live_srq;
    return 0;
}

static struct ibv_qp *new_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
    struct ibv_qp *qp;
    if (a->cap.max_inline_data > fake.max_inline) {
        errno = EINVAL;
        return NULL;
    }
    qp = calloc(1, sizeof(*qp));
    qp->pd = pd;
    qp->send_cq = a->send_cq;
    qp->recv_cq = a->recv_cq;
    qp->srq = a->srq;
    qp->qp_num = next_qp_num++;
    qp->qp_type = a->qp_type;
    if (0 != fake.inline_grant) {
        a->cap.max_inline_data = fake.inline_grant;
    }
    /* The QP remembers its caps in its context pointer's place: keep a copy. */
    qp->qp_context = malloc(sizeof(*a));
    memcpy(qp->qp_context, a, sizeof(*a));
    fake.last_qp_attr = *a;
    ++fake.nqp_created;
    ++fake.live_qp;
    return qp;
}

static struct ibv_qp *f_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
    return FAIL_POINT() ? NULL : new_qp(pd, a);
}

static int f_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask,
                      struct ibv_qp_init_attr *init)
{
    (void)mask;
    if (FAIL_POINT()) {
        return ENOMEM;
    }
    memset(a, 0, sizeof(*a));
    memcpy(init, qp->qp_context, sizeof(*init));
    a->cap = init->cap;
    return 0;
}

static int f_destroy_qp(struct ibv_qp *qp)
{
    free(qp->qp_context);
    free(qp);
    --fake.live_qp;
    return 0;
}

/* ------------------------------------------------------------- data path */

static int f_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
    (void)qp;
    (void)a;
    (void)mask;
    return FAIL_POINT() ? EINVAL : 0;
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
    for (; NULL != wr; wr = wr->next) {
        fake_wr_t *r = &fake.sends[fake.nsends++ % FAKE_MAX_WR];
        r->qp = qp;
        r->wr_id = wr->wr_id;
        r->length = wr->sg_list[0].length;
        r->flags = wr->send_flags;
        r->addr = (void *)(uintptr_t)wr->sg_list[0].addr;
    }
    return 0;
}

static int f_post_srq_recv(struct ibv_srq *s, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
    (void)s;
    if (FAIL_POINT()) {
        *bad = wr;
        return ENOMEM;
    }
    for (; NULL != wr; wr = wr->next) {
        fake.recvs[fake.nrecvs++ % FAKE_MAX_WR] = wr->wr_id;
    }
    return 0;
}

static int f_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
    fake_cq_t *f = (fake_cq_t *)cq;
    int got = 0;
    if (FAIL_POINT()) {
        return -1;
    }
    while (got < n && f->head != f->tail) {
        wc[got++] = f->wc[f->head];
        f->head = (f->head + 1) % FAKE_MAX_WC;
    }
    return got;
}

static const char *f_wc_status_str(enum ibv_wc_status s)
{
    return ibv_wc_status_str(s);
}

void fake_push_wc(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status status, uint32_t byte_len,
                  uint32_t qp_num, enum ibv_wc_opcode opcode)
{
    fake_cq_t *f = (fake_cq_t *)cq;
    struct ibv_wc *w = &f->wc[f->tail];
    memset(w, 0, sizeof(*w));
    w->wr_id = wr_id;
    w->status = status;
    w->byte_len = byte_len;
    w->qp_num = qp_num;
    w->opcode = opcode;
    f->tail = (f->tail + 1) % FAKE_MAX_WC;
}

/* ---------------------------------------------------------------- rdma_cm */

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
    c->ch.fd = -1;
    ++fake.live_channel;
    return &c->ch;
}

static void f_cm_destroy_event_channel(struct rdma_event_channel *ch)
{
    fake_channel_t *c = (fake_channel_t *)ch;
    while (c->head != c->tail) { /* undelivered events die with the channel */
        free(c->ev[c->head]);
        --fake.live_event;
        c->head = (c->head + 1) % FAKE_MAX_EV;
    }
    free(c);
    --fake.live_channel;
}

static int f_cm_create_id(struct rdma_event_channel *ch, struct rdma_cm_id **id, void *ctx,
                          enum rdma_port_space ps)
{
    struct rdma_cm_id *i;
    if (FAIL_POINT()) {
        errno = ENOMEM;
        return -1;
    }
    i = calloc(1, sizeof(*i));
    i->channel = ch;
    i->context = ctx;
    i->verbs = &fake_ctx;
    i->ps = ps;
    *id = i;
    last_id = i;
    ++fake.live_id;
    return 0;
}

static int f_cm_destroy_id(struct rdma_cm_id *id)
{
    if (id == last_id) {
        last_id = NULL;
    }
    free(id);
    --fake.live_id;
    return 0;
}

static int f_cm_bind_addr(struct rdma_cm_id *id, struct sockaddr *a)
{
    (void)id;
    (void)a;
    return FAIL_POINT() ? (errno = EADDRNOTAVAIL, -1) : 0;
}

static int f_cm_listen(struct rdma_cm_id *id, int backlog)
{
    (void)id;
    (void)backlog;
    return FAIL_POINT() ? (errno = ENOMEM, -1) : 0;
}

static uint16_t f_cm_get_src_port(struct rdma_cm_id *id)
{
    (void)id;
    return htons(4242);
}

static int f_cm_resolve_addr(struct rdma_cm_id *id, struct sockaddr *s, struct sockaddr *d, int ms)
{
    (void)s;
    (void)d;
    (void)ms;
    if (FAIL_POINT()) {
        errno = ENOMEM;
        return -1;
    }
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
    id->qp = new_qp(pd, a);
    return NULL == id->qp ? -1 : 0;
}

static void f_cm_destroy_qp(struct rdma_cm_id *id)
{
    f_destroy_qp(id->qp);
    id->qp = NULL;
}

static int f_cm_connect(struct rdma_cm_id *id, struct rdma_conn_param *p)
{
    (void)p;
    if (FAIL_POINT()) {
        errno = ENOMEM;
        return -1;
    }
    fake_push_event(id, RDMA_CM_EVENT_ESTABLISHED, 0);
    return 0;
}

static int f_cm_accept(struct rdma_cm_id *id, struct rdma_conn_param *p)
{
    (void)p;
    if (FAIL_POINT()) {
        errno = ENOMEM;
        return -1;
    }
    fake_push_event(id, RDMA_CM_EVENT_ESTABLISHED, 0);
    return 0;
}

static int f_cm_reject(struct rdma_cm_id *id, const void *d, uint8_t len)
{
    (void)id;
    (void)d;
    (void)len;
    return FAIL_POINT() ? -1 : 0;
}

static int f_cm_disconnect(struct rdma_cm_id *id)
{
    (void)id;
    return 0;
}

static int f_cm_get_event(struct rdma_event_channel *ch, struct rdma_cm_event **ev)
{
    fake_channel_t *c = (fake_channel_t *)ch;
    if (c->head == c->tail) {
        errno = EAGAIN;
        return -1;
    }
    if (FAIL_POINT()) {
        errno = EIO;
        return -1;
    }
    *ev = c->ev[c->head];
    c->head = (c->head + 1) % FAKE_MAX_EV;
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

static struct rdma_cm_event *new_event(struct rdma_cm_id *id, enum rdma_cm_event_type type,
                                       int status)
{
    fake_event_t *e = calloc(1, sizeof(*e));
    e->ev.id = id;
    e->ev.event = type;
    e->ev.status = status;
    ++fake.live_event;
    return &e->ev;
}

static void push(struct rdma_event_channel *ch, struct rdma_cm_event *ev)
{
    fake_channel_t *c = (fake_channel_t *)ch;
    c->ev[c->tail] = ev;
    c->tail = (c->tail + 1) % FAKE_MAX_EV;
}

void fake_push_event(struct rdma_cm_id *id, enum rdma_cm_event_type type, int status)
{
    push(id->channel, new_event(id, type, status));
}

struct rdma_cm_id *fake_last_id(void)
{
    return last_id;
}

struct rdma_cm_id *fake_connect_request(struct rdma_cm_id *listen_id, const void *pdata,
                                        uint8_t len)
{
    struct rdma_cm_id *id = calloc(1, sizeof(*id));
    struct rdma_cm_event *ev;
    fake_event_t *fe;
    id->channel = listen_id->channel;
    id->context = listen_id->context;
    id->verbs = &fake_ctx;
    ++fake.live_id;
    ev = new_event(id, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
    fe = (fake_event_t *)ev;
    ev->listen_id = listen_id;
    memcpy(fe->pdata, pdata, len);
    ev->param.conn.private_data = fe->pdata;
    ev->param.conn.private_data_len = len;
    push(listen_id->channel, ev);
    return id;
}

/* ------------------------------------------------------------------ table */

static const mca_btl_llrdma_verbs_ops_t fake_ops = {
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
    .destroy_srq = f_destroy_srq,
    .create_qp = f_create_qp,
    .query_qp = f_query_qp,
    .destroy_qp = f_destroy_qp,
    .modify_qp = f_modify_qp,
    .post_send = f_post_send,
    .post_srq_recv = f_post_srq_recv,
    .poll_cq = f_poll_cq,
    .wc_status_str = f_wc_status_str,
    .cm_get_devices = f_cm_get_devices,
    .cm_free_devices = f_cm_free_devices,
    .cm_create_event_channel = f_cm_create_event_channel,
    .cm_destroy_event_channel = f_cm_destroy_event_channel,
    .cm_create_id = f_cm_create_id,
    .cm_destroy_id = f_cm_destroy_id,
    .cm_bind_addr = f_cm_bind_addr,
    .cm_listen = f_cm_listen,
    .cm_get_src_port = f_cm_get_src_port,
    .cm_resolve_addr = f_cm_resolve_addr,
    .cm_resolve_route = f_cm_resolve_route,
    .cm_create_qp = f_cm_create_qp,
    .cm_destroy_qp = f_cm_destroy_qp,
    .cm_connect = f_cm_connect,
    .cm_accept = f_cm_accept,
    .cm_reject = f_cm_reject,
    .cm_disconnect = f_cm_disconnect,
    .cm_get_event = f_cm_get_event,
    .cm_ack_event = f_cm_ack_event,
    .cm_event_str = f_cm_event_str,
};

void fake_install(void)
{
    memset(&fake, 0, sizeof(fake));
    fake.max_inline = 1024;
    fake.modify_cq_supported = 1;
    last_id = NULL;
    mca_btl_llrdma_verbs = fake_ops;
}

void fake_uninstall(void)
{
    mca_btl_llrdma_verbs = mca_btl_llrdma_verbs_real;
}

int fake_live_objects(void)
{
    return fake.live_pd + fake.live_mr + fake.live_cq + fake.live_srq + fake.live_qp +
           fake.live_id + fake.live_channel + fake.live_event;
}
