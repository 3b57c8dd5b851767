/*
 * rdma-core and librdmacm behind the verbs seam (see btl_llrdma_verbs.h).
 * Several verbs are static inline functions or macros in
 * <infiniband/verbs.h>, so each gets a real function here that a table can
 * point to.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>

#include "btl_llrdma_verbs.h"
#include "llrdma_build_config.h" /* HAVE_DECL_IBV_IS_FORK_INITIALIZED, ..._REG_DMABUF_MR */
#include "btl_llrdma_gpu.h"

static struct ibv_device **real_get_device_list(int *n)
{
    return ibv_get_device_list(n);
}
static void real_free_device_list(struct ibv_device **l)
{
    ibv_free_device_list(l);
}
static const char *real_get_device_name(struct ibv_device *d)
{
    return ibv_get_device_name(d);
}
static struct ibv_context *real_open_device(struct ibv_device *d)
{
    return ibv_open_device(d);
}
static int real_close_device(struct ibv_context *c)
{
    return ibv_close_device(c);
}

static int real_query_device(struct ibv_context *c, struct ibv_device_attr *a)
{
    return ibv_query_device(c, a);
}

static int real_query_port(struct ibv_context *c, uint8_t p, struct ibv_port_attr *a)
{
    return ibv_query_port(c, p, a);
}

static int real_query_gid(struct ibv_context *c, uint8_t p, int i, union ibv_gid *g)
{
    return ibv_query_gid(c, p, i, g);
}

static int real_query_gid_type(struct ibv_context *c, uint8_t p, int i, unsigned *type)
{
    struct ibv_gid_entry e;
    int rc = ibv_query_gid_ex(c, p, (uint32_t)i, &e, 0);
    if (0 == rc) {
        *type = e.gid_type;
    }
    return rc;
}

static struct ibv_pd *real_alloc_pd(struct ibv_context *c)
{
    return ibv_alloc_pd(c);
}
static int real_dealloc_pd(struct ibv_pd *pd)
{
    return ibv_dealloc_pd(pd);
}

static struct ibv_mr *real_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
    return ibv_reg_mr(pd, addr, len, access);
}

static int real_dereg_mr(struct ibv_mr *mr)
{
    return ibv_dereg_mr(mr);
}

static struct ibv_cq *real_create_cq(struct ibv_context *c, int cqe, void *ctx,
                                     struct ibv_comp_channel *ch, int vec)
{
    return ibv_create_cq(c, cqe, ctx, ch, vec);
}

static int real_destroy_cq(struct ibv_cq *cq)
{
    return ibv_destroy_cq(cq);
}
static int real_modify_cq(struct ibv_cq *cq, struct ibv_modify_cq_attr *a)
{
    return ibv_modify_cq(cq, a);
}

/* Completion events (the progress thread, btl_llrdma_thread.c). */
static struct ibv_comp_channel *real_create_comp_channel(struct ibv_context *c)
{
    return ibv_create_comp_channel(c);
}

static int real_destroy_comp_channel(struct ibv_comp_channel *ch)
{
    return ibv_destroy_comp_channel(ch);
}

static int real_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
    return ibv_req_notify_cq(cq, solicited_only);
}

static int real_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **ctx)
{
    return ibv_get_cq_event(ch, cq, ctx);
}

static void real_ack_cq_events(struct ibv_cq *cq, unsigned int n)
{
    ibv_ack_cq_events(cq, n);
}

/* The context is librdmacm's, shared with anything else of the process that
 * uses the device: its fd's flags stay as they are, a zero-timeout poll
 * says whether ibv_get_async_event would block. */
static int real_get_async_event(struct ibv_context *ctx, struct ibv_async_event *ev)
{
    struct pollfd p = {.fd = ctx->async_fd, .events = POLLIN};
    if (poll(&p, 1, 0) <= 0 || !(p.revents & POLLIN)) {
        errno = EAGAIN;
        return -1;
    }
    return ibv_get_async_event(ctx, ev);
}

static void real_ack_async_event(struct ibv_async_event *ev)
{
    ibv_ack_async_event(ev);
}

static const char *real_event_type_str(enum ibv_event_type t)
{
    return ibv_event_type_str(t);
}

static int real_resize_cq(struct ibv_cq *cq, int cqe)
{
    return ibv_resize_cq(cq, cqe);
}

static struct ibv_srq *real_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *a)
{
    return ibv_create_srq(pd, a);
}

static int real_query_srq(struct ibv_srq *s, struct ibv_srq_attr *a)
{
    return ibv_query_srq(s, a);
}
static int real_modify_srq(struct ibv_srq *s, struct ibv_srq_attr *a, int mask)
{
    return ibv_modify_srq(s, a, mask);
}
static int real_destroy_srq(struct ibv_srq *s)
{
    return ibv_destroy_srq(s);
}

static struct ibv_qp *real_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
    return ibv_create_qp(pd, a);
}

static int real_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask,
                         struct ibv_qp_init_attr *init)
{
    return ibv_query_qp(qp, a, mask, init);
}

static int real_destroy_qp(struct ibv_qp *qp)
{
    return ibv_destroy_qp(qp);
}

static int real_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
    return ibv_modify_qp(qp, attr, mask);
}

static int real_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    return ibv_post_send(qp, wr, bad);
}

#ifdef LLRDMA_HAVE_WR_API /* configure: rdma-core has ibv_wr_* and rdma_create_qp_ex */
static struct ibv_qp *real_create_qp_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *a)
{
    return ibv_create_qp_ex(c, a);
}

static struct ibv_qp_ex *real_qp_to_qp_ex(struct ibv_qp *qp)
{
    return ibv_qp_to_qp_ex(qp);
}

static int real_cm_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *a)
{
    return rdma_create_qp_ex(id, a);
}
#else
/* rdma-core without the work-request API: every post is ibv_post_send. */
static struct ibv_qp *real_create_qp_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *a)
{
    (void)c, (void)a;
    errno = ENOSYS;
    return NULL;
}

static struct ibv_qp_ex *real_qp_to_qp_ex(struct ibv_qp *qp)
{
    (void)qp;
    return NULL;
}

static int real_cm_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *a)
{
    (void)id, (void)a;
    errno = ENOSYS;
    return -1;
}
#endif

static int real_post_srq_recv(struct ibv_srq *s, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
    return ibv_post_srq_recv(s, wr, bad);
}

static int real_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
    return ibv_poll_cq(cq, n, wc);
}
static const char *real_wc_status_str(enum ibv_wc_status s)
{
    return ibv_wc_status_str(s);
}

static struct ibv_context **real_cm_get_devices(int *n)
{
    return rdma_get_devices(n);
}
static void real_cm_free_devices(struct ibv_context **l)
{
    rdma_free_devices(l);
}

/* The BTL polls the channel from opal_progress: its fd must never block. */
static struct rdma_event_channel *real_cm_create_event_channel(void)
{
    struct rdma_event_channel *ch = rdma_create_event_channel();
    int flags;
    if (NULL == ch) {
        return NULL;
    }
    flags = fcntl(ch->fd, F_GETFL);
    if (flags < 0 || fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        rdma_destroy_event_channel(ch);
        return NULL;
    }
    return ch;
}

static void real_cm_destroy_event_channel(struct rdma_event_channel *ch)
{
    rdma_destroy_event_channel(ch);
}

static int real_cm_create_id(struct rdma_event_channel *ch, struct rdma_cm_id **id, void *ctx,
                             enum rdma_port_space ps)
{
    return rdma_create_id(ch, id, ctx, ps);
}

static int real_cm_destroy_id(struct rdma_cm_id *id)
{
    return rdma_destroy_id(id);
}
static int real_cm_bind_addr(struct rdma_cm_id *id, struct sockaddr *a)
{
    return rdma_bind_addr(id, a);
}
static int real_cm_listen(struct rdma_cm_id *id, int backlog)
{
    return rdma_listen(id, backlog);
}
static uint16_t real_cm_get_src_port(struct rdma_cm_id *id)
{
    return rdma_get_src_port(id);
}

static int real_cm_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src, struct sockaddr *dst,
                                int ms)
{
    return rdma_resolve_addr(id, src, dst, ms);
}

static int real_cm_resolve_route(struct rdma_cm_id *id, int ms)
{
    return rdma_resolve_route(id, ms);
}

static int real_cm_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
    return rdma_create_qp(id, pd, a);
}

static void real_cm_destroy_qp(struct rdma_cm_id *id)
{
    rdma_destroy_qp(id);
}

static int real_cm_connect(struct rdma_cm_id *id, struct rdma_conn_param *p)
{
    return rdma_connect(id, p);
}

static int real_cm_accept(struct rdma_cm_id *id, struct rdma_conn_param *p)
{
    return rdma_accept(id, p);
}

static int real_cm_set_ack_timeout(struct rdma_cm_id *id, uint8_t timeout)
{
    return rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &timeout,
                           sizeof(timeout));
}

static int real_cm_reject(struct rdma_cm_id *id, const void *d, uint8_t len)
{
    return rdma_reject(id, d, len);
}

static int real_cm_disconnect(struct rdma_cm_id *id)
{
    return rdma_disconnect(id);
}

static int real_cm_get_event(struct rdma_event_channel *ch, struct rdma_cm_event **ev)
{
    return rdma_get_cm_event(ch, ev);
}

static int real_cm_ack_event(struct rdma_cm_event *ev)
{
    return rdma_ack_cm_event(ev);
}
static const char *real_cm_event_str(enum rdma_cm_event_type t)
{
    return rdma_event_str(t);
}

static int real_fork_init(void)
{
    return ibv_fork_init();
}

static int real_is_fork_initialized(void)
{
#if HAVE_DECL_IBV_IS_FORK_INITIALIZED
    return (int)ibv_is_fork_initialized();
#else
    return -1; /* rdma-core before 35 cannot tell */
#endif
}

static struct ibv_mr *real_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
                                         uint64_t iova, int fd, int access)
{
#if HAVE_DECL_IBV_REG_DMABUF_MR
    return ibv_reg_dmabuf_mr(pd, offset, length, iova, fd, access);
#else
    (void)pd, (void)offset, (void)length, (void)iova, (void)fd, (void)access;
    errno = ENOSYS; /* rdma-core before 34 */
    return NULL;
#endif
}

#define LLRDMA_REAL_OPS                                                                            \
    {                                                                                              \
        .get_device_list = real_get_device_list, .free_device_list = real_free_device_list,        \
        .get_device_name = real_get_device_name, .open_device = real_open_device,                  \
        .close_device = real_close_device, .query_device = real_query_device,                      \
        .query_port = real_query_port, .query_gid = real_query_gid,                                \
        .query_gid_type = real_query_gid_type, .alloc_pd = real_alloc_pd,                          \
        .dealloc_pd = real_dealloc_pd, .reg_mr = real_reg_mr, .dereg_mr = real_dereg_mr,           \
        .create_cq = real_create_cq, .destroy_cq = real_destroy_cq, .modify_cq = real_modify_cq,   \
        .create_comp_channel = real_create_comp_channel,                                           \
        .destroy_comp_channel = real_destroy_comp_channel, .req_notify_cq = real_req_notify_cq,    \
        .get_cq_event = real_get_cq_event, .ack_cq_events = real_ack_cq_events,                    \
        .resize_cq = real_resize_cq, .create_srq = real_create_srq, .query_srq = real_query_srq,   \
        .modify_srq = real_modify_srq, .destroy_srq = real_destroy_srq,                            \
        .create_qp = real_create_qp, .query_qp = real_query_qp, .destroy_qp = real_destroy_qp,     \
        .modify_qp = real_modify_qp, .post_send = real_post_send,                                  \
        .create_qp_ex = real_create_qp_ex, .qp_to_qp_ex = real_qp_to_qp_ex,                        \
        .cm_create_qp_ex = real_cm_create_qp_ex, .post_srq_recv = real_post_srq_recv,              \
        .poll_cq = real_poll_cq, .wc_status_str = real_wc_status_str,                              \
        .cm_get_devices = real_cm_get_devices, .get_async_event = real_get_async_event,            \
        .ack_async_event = real_ack_async_event, .event_type_str = real_event_type_str,            \
        .cm_free_devices = real_cm_free_devices,                                                   \
        .cm_create_event_channel = real_cm_create_event_channel,                                   \
        .cm_destroy_event_channel = real_cm_destroy_event_channel,                                 \
        .cm_create_id = real_cm_create_id, .cm_destroy_id = real_cm_destroy_id,                    \
        .cm_bind_addr = real_cm_bind_addr, .cm_listen = real_cm_listen,                            \
        .cm_get_src_port = real_cm_get_src_port, .cm_resolve_addr = real_cm_resolve_addr,          \
        .cm_resolve_route = real_cm_resolve_route, .cm_create_qp = real_cm_create_qp,              \
        .cm_destroy_qp = real_cm_destroy_qp, .cm_connect = real_cm_connect,                        \
        .cm_accept = real_cm_accept, .cm_set_ack_timeout = real_cm_set_ack_timeout,                \
        .cm_reject = real_cm_reject, .cm_disconnect = real_cm_disconnect,                          \
        .cm_get_event = real_cm_get_event, .cm_ack_event = real_cm_ack_event,                      \
        .cm_event_str = real_cm_event_str, .fork_init = real_fork_init,                            \
        .is_fork_initialized = real_is_fork_initialized, .reg_dmabuf_mr = real_reg_dmabuf_mr,      \
        .peermem_loaded = mca_btl_llrdma_peermem_loaded_real,                                      \
    }

const mca_btl_llrdma_verbs_ops_t mca_btl_llrdma_verbs_real = LLRDMA_REAL_OPS;
mca_btl_llrdma_verbs_ops_t mca_btl_llrdma_verbs = LLRDMA_REAL_OPS;
