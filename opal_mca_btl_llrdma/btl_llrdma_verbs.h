/*
 * The one seam between btl/llrdma and rdma-core.  Every verbs and librdmacm
 * call of the BTL, on the control path and on the data path, goes through
 * mca_btl_llrdma_verbs, so unit tests can install a fake device and make the
 * Nth call of any entry fail (as NCCL's ibvwrap and libfabric's EFA provider
 * do).  Nothing else in the BTL calls an ibv_* or rdma_* function directly.
 *
 * The data-path entries (post_send, post_srq_recv, poll_cq) cost one indirect
 * call each; rdma-core's own ibv_post_send is already an indirect call through
 * the provider's ops table, so the seam adds one predictable branch.
 */
#ifndef MCA_BTL_LLRDMA_VERBS_H
#define MCA_BTL_LLRDMA_VERBS_H

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

typedef struct mca_btl_llrdma_verbs_ops_t {
    /* discovery */
    struct ibv_device **(*get_device_list)(int *num_devices);
    void (*free_device_list)(struct ibv_device **list);
    const char *(*get_device_name)(struct ibv_device *device);
    struct ibv_context *(*open_device)(struct ibv_device *device);
    int (*close_device)(struct ibv_context *context);
    int (*query_device)(struct ibv_context *context, struct ibv_device_attr *attr);
    int (*query_port)(struct ibv_context *context, uint8_t port, struct ibv_port_attr *attr);
    int (*query_gid)(struct ibv_context *context, uint8_t port, int index, union ibv_gid *gid);
    /* gid_type: IBV_GID_TYPE_IB / ROCE_V1 / ROCE_V2; returns 0 or an errno */
    int (*query_gid_type)(struct ibv_context *context, uint8_t port, int index, unsigned *gid_type);

    /* resources */
    struct ibv_pd *(*alloc_pd)(struct ibv_context *context);
    int (*dealloc_pd)(struct ibv_pd *pd);
    struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t length, int access);
    int (*dereg_mr)(struct ibv_mr *mr);
    struct ibv_cq *(*create_cq)(struct ibv_context *context, int cqe, void *cq_context,
                                struct ibv_comp_channel *channel, int comp_vector);
    int (*destroy_cq)(struct ibv_cq *cq);
    int (*modify_cq)(struct ibv_cq *cq, struct ibv_modify_cq_attr *attr);
    int (*resize_cq)(struct ibv_cq *cq, int cqe);
    /* completion events: a CQ created on a channel reports its next
     * completion there once armed (req_notify_cq), then must be re-armed;
     * every event taken must be acknowledged before the CQ is destroyed.
     * The channel's fd is made non-blocking: get_cq_event then returns -1
     * with errno EAGAIN when no event waits. */
    struct ibv_comp_channel *(*create_comp_channel)(struct ibv_context *context);
    int (*destroy_comp_channel)(struct ibv_comp_channel *channel);
    int (*req_notify_cq)(struct ibv_cq *cq, int solicited_only);
    int (*get_cq_event)(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context);
    void (*ack_cq_events)(struct ibv_cq *cq, unsigned int nevents);
    struct ibv_srq *(*create_srq)(struct ibv_pd *pd, struct ibv_srq_init_attr *attr);
    int (*query_srq)(struct ibv_srq *srq, struct ibv_srq_attr *attr);
    /* arms the SRQ limit (IBV_SRQ_LIMIT): IBV_EVENT_SRQ_LIMIT_REACHED once
     * fewer than srq_limit buffers remain posted, then disarmed */
    int (*modify_srq)(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask);
    int (*destroy_srq)(struct ibv_srq *srq);
    struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
    int (*query_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
                    struct ibv_qp_init_attr *init);
    int (*destroy_qp)(struct ibv_qp *qp);
    int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);

    /* data path */
    int (*post_send)(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
    int (*post_srq_recv)(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
    int (*poll_cq)(struct ibv_cq *cq, int num, struct ibv_wc *wc);
    const char *(*wc_status_str)(enum ibv_wc_status status);
    /* rdma-core's work-request API (ibv_wr_*) for sendi's inline SEND, on a
     * QP created with IBV_QP_EX_WITH_SEND in its send_ops_flags: the
     * provider fills its queue entry from the arguments instead of parsing
     * an ibv_send_wr (docs/btl-design.md, "The small-message send").
     * create_qp_ex / cm_create_qp_ex create such a QP (NULL or -1 with errno
     * set; ENOSYS when the rdma-core built against has no such API);
     * qp_to_qp_ex gives its handle, NULL for a QP created without.  The
     * ibv_wr_start / wr_send / wr_set_inline_data / wr_complete calls
     * themselves go through that handle's own function table, as rdma-core
     * dispatches them (a second table here would cost a call per send): the
     * fake device hands out handles whose functions are its own.  Other posts
     * on such a QP still use post_send (rdma-core allows both outside a
     * wr_start / wr_complete section). */
    struct ibv_qp *(*create_qp_ex)(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr);
    struct ibv_qp_ex *(*qp_to_qp_ex)(struct ibv_qp *qp);

    /* asynchronous events of a device (port state, QP, CQ and SRQ errors):
     * never blocks, -1 with errno EAGAIN when none waits; every event taken
     * must be acknowledged (a real device's destroy of the object it names
     * waits for that) */
    int (*get_async_event)(struct ibv_context *context, struct ibv_async_event *event);
    void (*ack_async_event)(struct ibv_async_event *event);
    const char *(*event_type_str)(enum ibv_event_type type);

    /* librdmacm: connection set-up */
    struct ibv_context **(*cm_get_devices)(int *num_devices);
    void (*cm_free_devices)(struct ibv_context **list);
    struct rdma_event_channel *(*cm_create_event_channel)(void);
    void (*cm_destroy_event_channel)(struct rdma_event_channel *channel);
    int (*cm_create_id)(struct rdma_event_channel *channel, struct rdma_cm_id **id, void *ctx,
                        enum rdma_port_space ps);
    int (*cm_destroy_id)(struct rdma_cm_id *id);
    int (*cm_bind_addr)(struct rdma_cm_id *id, struct sockaddr *addr);
    int (*cm_listen)(struct rdma_cm_id *id, int backlog);
    uint16_t (*cm_get_src_port)(struct rdma_cm_id *id); /* network byte order */
    int (*cm_resolve_addr)(struct rdma_cm_id *id, struct sockaddr *src, struct sockaddr *dst,
                           int timeout_ms);
    int (*cm_resolve_route)(struct rdma_cm_id *id, int timeout_ms);
    int (*cm_create_qp)(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
    /* rdma_create_qp_ex: as cm_create_qp with the extended attributes (pd
     * and send_ops_flags in them), for the work-request API above */
    int (*cm_create_qp_ex)(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *attr);
    void (*cm_destroy_qp)(struct rdma_cm_id *id);
    int (*cm_connect)(struct rdma_cm_id *id, struct rdma_conn_param *param);
    int (*cm_accept)(struct rdma_cm_id *id, struct rdma_conn_param *param);
    /* rdma_set_option(RDMA_OPTION_ID_ACK_TIMEOUT) before connect/accept: the
     * QP's ACK timeout (IB encoding) as rdma_cm moves it to RTS */
    int (*cm_set_ack_timeout)(struct rdma_cm_id *id, uint8_t timeout);
    int (*cm_reject)(struct rdma_cm_id *id, const void *private_data, uint8_t len);
    int (*cm_disconnect)(struct rdma_cm_id *id);
    /* the channel's fd is non-blocking: -1 with errno EAGAIN when no event */
    int (*cm_get_event)(struct rdma_event_channel *channel, struct rdma_cm_event **event);
    int (*cm_ack_event)(struct rdma_cm_event *event);
    const char *(*cm_event_str)(enum rdma_cm_event_type event);

    /* GPU memory (btl_llrdma_gpu.c) */
    /* ibv_reg_dmabuf_mr (rdma-core 34+); NULL with errno ENOSYS when the
     * rdma-core built against has none */
    struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *pd, uint64_t offset, size_t length,
                                    uint64_t iova, int fd, int access);
    int (*peermem_loaded)(void); /* 1: nvidia_peermem or nv_peer_mem is loaded */

    /* fork safety (btl_llrdma_fork.c), called before any other entry */
    int (*fork_init)(void); /* 0 or an errno */
    /* IBV_FORK_DISABLED / _ENABLED / _UNNEEDED as an int; -1 when rdma-core
     * has no ibv_is_fork_initialized (before rdma-core 35) */
    int (*is_fork_initialized)(void);
} mca_btl_llrdma_verbs_ops_t;

/* Initialised to rdma-core; a test may overwrite any entry. */
extern mca_btl_llrdma_verbs_ops_t mca_btl_llrdma_verbs;

/* The rdma-core table, to restore after a test. */
extern const mca_btl_llrdma_verbs_ops_t mca_btl_llrdma_verbs_real;

#endif
