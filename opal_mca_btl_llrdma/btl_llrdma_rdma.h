/*
 * btl/llrdma RDMA: memory registration through Open MPI's grdma cache and
 * one-sided put/get on the bandwidth-path queue pair (docs/btl-design.md,
 * "RDMA").
 *
 * A registration handle carries what a peer needs to name the memory: the
 * rkey (and the lkey for local use).  Put and get are RDMA write and read
 * work requests on the peer's BW connection: they take a send slot but no
 * credit (they consume no receive buffer), and wait in the endpoint's
 * rdma_pending list while the connection is being set up or the send queue
 * is full.
 */
#ifndef MCA_BTL_LLRDMA_RDMA_H
#define MCA_BTL_LLRDMA_RDMA_H

#include "opal_config.h"

#include "opal/class/opal_list.h"
#include "opal/mca/btl/btl.h"
#include "opal/mca/rcache/rcache.h"

#include "btl_llrdma_verbs.h"

struct mca_btl_base_registration_handle_t {
    uint32_t lkey;
    uint32_t rkey;
};

typedef struct mca_btl_llrdma_reg_t {
    mca_rcache_base_registration_t base;
    struct ibv_mr *mr;
    uint64_t buffer_id; /* device memory: CU_POINTER_ATTRIBUTE_BUFFER_ID when registered */
    mca_btl_base_registration_handle_t handle;
} mca_btl_llrdma_reg_t;

/* One put or get, from btl_put/btl_get to its callback. */
typedef struct mca_btl_llrdma_rdma_op_t {
    opal_list_item_t super; /* in ep->rdma_pending or module->rdma_free */
    struct mca_btl_base_endpoint_t *endpoint;
    enum ibv_wr_opcode opcode; /* IBV_WR_RDMA_WRITE (put) or IBV_WR_RDMA_READ (get) */
    void *local;
    uint64_t remote;
    uint32_t lkey, rkey;
    uint32_t size;
    mca_btl_base_registration_handle_t *local_handle;
    mca_btl_base_rdma_completion_fn_t cbfunc;
    void *cbcontext, *cbdata;
    int status; /* queued for the callback (btl_llrdma_done.c): the result */
} mca_btl_llrdma_rdma_op_t;
OBJ_CLASS_DECLARATION(mca_btl_llrdma_rdma_op_t);

/* Module functions (installed by mca_btl_llrdma_rdma_init). */
mca_btl_base_registration_handle_t *mca_btl_llrdma_register_mem(struct mca_btl_base_module_t *btl,
                                                                struct mca_btl_base_endpoint_t *ep,
                                                                void *base, size_t size,
                                                                uint32_t flags);
int mca_btl_llrdma_deregister_mem(struct mca_btl_base_module_t *btl,
                                  mca_btl_base_registration_handle_t *handle);

#endif
