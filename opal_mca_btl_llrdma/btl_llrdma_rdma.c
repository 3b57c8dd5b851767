/*
 * btl/llrdma RDMA: registrations through Open MPI's grdma cache, btl_put /
 * btl_get / btl_flush on the BW queue pair (see btl_llrdma_rdma.h and
 * docs/btl-design.md "RDMA").
 */
#include "opal_config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "opal/mca/rcache/base/base.h"
#include "opal/util/output.h"

#include "btl_llrdma.h"
#include "btl_llrdma_gpu.h"
#include "btl_llrdma_rdma.h"

OBJ_CLASS_INSTANCE(mca_btl_llrdma_rdma_op_t, opal_list_item_t, NULL, NULL);

/* ------------------------------------------------------- registration */

static int access_of(int32_t rcache_flags)
{
    /* Reads land in local memory: local write always (verbs also requires
     * it with remote write). */
    int access = IBV_ACCESS_LOCAL_WRITE;
    if (rcache_flags & MCA_RCACHE_ACCESS_REMOTE_READ) {
        access |= IBV_ACCESS_REMOTE_READ;
    }
    if (rcache_flags & MCA_RCACHE_ACCESS_REMOTE_WRITE) {
        access |= IBV_ACCESS_REMOTE_WRITE;
    }
    return access;
}

/* grdma's callbacks: the cache decides when; these only talk to the device. */
static int reg_mem_cb(void *reg_data, void *base, size_t size, mca_rcache_base_registration_t *reg)
{
    mca_btl_llrdma_module_t *m = (mca_btl_llrdma_module_t *)reg_data;
    mca_btl_llrdma_reg_t *r = (mca_btl_llrdma_reg_t *)reg;

    if (reg->flags & LLRDMA_RCACHE_FLAGS_GPU_MEM) {
        r->buffer_id = m->gpu_buffer_id;
        r->mr = mca_btl_llrdma_gpu_reg(m, base, size, access_of(reg->access_flags));
        m->gpu_regs += NULL != r->mr; /* under the module lock (register_mem) */
    } else {
        r->buffer_id = 0;
        r->mr = mca_btl_llrdma_verbs.reg_mr(m->pd, base, size, access_of(reg->access_flags));
    }
    if (NULL == r->mr) {
        opal_output_verbose(10, mca_btl_llrdma_component.output,
                            "btl:llrdma: ibv_reg_mr(%p, %zu) on %s failed: %s", base, size,
                            m->port.dev, strerror(errno));
        /* grdma evicts an unused registration and tries again. */
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    r->handle.lkey = r->mr->lkey;
    r->handle.rkey = r->mr->rkey;
    return OPAL_SUCCESS;
}

static int dereg_mem_cb(void *reg_data, mca_rcache_base_registration_t *reg)
{
    mca_btl_llrdma_reg_t *r = (mca_btl_llrdma_reg_t *)reg;
    (void)reg_data;
    if (NULL != r->mr) {
        (void)mca_btl_llrdma_verbs.dereg_mr(r->mr);
        r->mr = NULL;
    }
    return OPAL_SUCCESS;
}

static mca_rcache_base_registration_t *register_locked(mca_btl_llrdma_module_t *m, void *base,
                                                       size_t size, int32_t access);

mca_btl_base_registration_handle_t *mca_btl_llrdma_register_mem(struct mca_btl_base_module_t *btl,
                                                                struct mca_btl_base_endpoint_t *ep,
                                                                void *base, size_t size,
                                                                uint32_t flags)
{
    mca_btl_llrdma_module_t *m = (mca_btl_llrdma_module_t *)btl;
    mca_rcache_base_registration_t *reg;
    int32_t access = (int32_t)(flags & MCA_BTL_REG_FLAG_ACCESS_ANY);

    (void)ep;
    /* The module lock: gpu_buffer_id hands the buffer id to reg_mem_cb. */
    MCA_BTL_LLRDMA_LOCK(m);
    reg = register_locked(m, base, size, access);
    MCA_BTL_LLRDMA_UNLOCK(m);
    return NULL == reg ? NULL : &((mca_btl_llrdma_reg_t *)reg)->handle;
}

static mca_rcache_base_registration_t *register_locked(mca_btl_llrdma_module_t *m, void *base,
                                                       size_t size, int32_t access)
{
    mca_rcache_base_registration_t *reg = NULL;
    uint32_t rflags = 0;
    uint64_t id = 0;

    /* Only a module with a GPU mode looks at where memory lives (and loads
     * libcuda for it): host-only jobs never do. */
    if (LLRDMA_GPU_NONE != m->gpu_mode && mca_btl_llrdma_gpu_classify(base, &id)) {
        rflags = LLRDMA_RCACHE_FLAGS_GPU_MEM;
        m->gpu_buffer_id = id;
    }
    if (OPAL_SUCCESS != m->rcache->rcache_register(m->rcache, base, size, rflags, access, &reg)) {
        return NULL;
    }
    if (0 != rflags && ((mca_btl_llrdma_reg_t *)reg)->buffer_id != id) {
        /* A cached registration of a freed allocation that a new one now
         * occupies (the memory hooks do not see cudaFree): drop it. */
        unsigned char *b = reg->base;
        size_t n = (size_t)(reg->bound - reg->base) + 1;
        (void)m->rcache->rcache_deregister(m->rcache, reg);
        (void)m->rcache->rcache_invalidate_range(m->rcache, b, n);
        reg = NULL;
        if (OPAL_SUCCESS !=
            m->rcache->rcache_register(m->rcache, base, size, rflags, access, &reg)) {
            return NULL;
        }
    }
    return reg;
}

int mca_btl_llrdma_deregister_mem(struct mca_btl_base_module_t *btl,
                                  mca_btl_base_registration_handle_t *handle)
{
    mca_btl_llrdma_module_t *m = (mca_btl_llrdma_module_t *)btl;
    mca_btl_llrdma_reg_t *r =
        (mca_btl_llrdma_reg_t *)((char *)handle - offsetof(mca_btl_llrdma_reg_t, handle));
    return m->rcache->rcache_deregister(m->rcache, &r->base);
}

/* ----------------------------------------------------------- put / get */

static int rdma_start(mca_btl_llrdma_module_t *m, mca_btl_llrdma_endpoint_t *ep,
                      enum ibv_wr_opcode opcode, void *local, uint64_t remote,
                      mca_btl_base_registration_handle_t *lh,
                      mca_btl_base_registration_handle_t *rh, size_t size,
                      mca_btl_base_rdma_completion_fn_t cb, void *ctx, void *data)
{
    size_t limit = IBV_WR_RDMA_READ == opcode ? m->super.btl_get_limit : m->super.btl_put_limit;
    mca_btl_llrdma_conn_t *conn = ep->conn[LLRDMA_PATH_BW];
    mca_btl_llrdma_rdma_op_t *op;

    if (LLRDMA_EP_FAILED == ep->state) {
        return OPAL_ERR_UNREACH;
    }
    if (size > limit || (0 != size && (NULL == lh || NULL == rh))) {
        return OPAL_ERR_BAD_PARAM;
    }
    /* A connection granted no outstanding reads: ob1 falls back to put. */
    if (IBV_WR_RDMA_READ == opcode && mca_btl_llrdma_conn_up(conn) && 0 == conn->rd_atomic) {
        return OPAL_ERR_NOT_AVAILABLE;
    }
    op = (mca_btl_llrdma_rdma_op_t *)opal_list_remove_first(&m->rdma_free);
    if (NULL == op && NULL == (op = OBJ_NEW(mca_btl_llrdma_rdma_op_t))) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    op->endpoint = ep;
    op->opcode = opcode;
    op->local = local;
    op->remote = remote;
    op->lkey = NULL != lh ? lh->lkey : 0;
    op->rkey = NULL != rh ? rh->rkey : 0;
    op->size = (uint32_t)size;
    op->local_handle = lh;
    op->cbfunc = cb;
    op->cbcontext = ctx;
    op->cbdata = data;
    ++m->rdma_outstanding;
    {
        /* Counted by payload: no BTL header travels with a put or get. */
        llrdma_hist_add_sw(&m->hist, LLRDMA_HIST_RDMA, size + LLRDMA_HIST_HDR_ALLOWANCE, size);
    }

    if (mca_btl_llrdma_conn_up(conn) && opal_list_is_empty(&ep->rdma_pending) &&
        mca_btl_llrdma_conn_slots(conn) > 0) {
        if (OPAL_SUCCESS != mca_btl_llrdma_conn_post_rdma(ep, conn, op, 0)) {
            --m->rdma_outstanding;
            opal_list_append(&m->rdma_free, &op->super);
            return OPAL_ERR_UNREACH; /* the endpoint failed and said why */
        }
        return OPAL_SUCCESS;
    }
    /* Not connected yet, send queue full, or older operations waiting. */
    opal_list_append(&ep->rdma_pending, &op->super);
    if (OPAL_SUCCESS != mca_btl_llrdma_endpoint_connect(ep, LLRDMA_PATH_BW)) {
        opal_list_remove_item(&ep->rdma_pending, &op->super);
        --m->rdma_outstanding;
        opal_list_append(&m->rdma_free, &op->super);
        mca_btl_llrdma_endpoint_fail(ep, "starting a connection failed", "out of resources");
        return OPAL_ERR_UNREACH;
    }
    return OPAL_SUCCESS;
}

static int llrdma_put(struct mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                      void *local, uint64_t remote, mca_btl_base_registration_handle_t *lh,
                      mca_btl_base_registration_handle_t *rh, size_t size, int flags, int order,
                      mca_btl_base_rdma_completion_fn_t cb, void *ctx, void *data)
{
    mca_btl_llrdma_module_t *m = (mca_btl_llrdma_module_t *)btl;
    int rc;
    (void)flags;
    (void)order;
    MCA_BTL_LLRDMA_LOCK(m);
    rc = rdma_start(m, ep, IBV_WR_RDMA_WRITE, local, remote, lh, rh, size, cb, ctx, data);
    MCA_BTL_LLRDMA_UNLOCK(m);
    mca_btl_llrdma_done_kick(m); /* a failed endpoint's other operations */
    return rc;
}

static int llrdma_get(struct mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                      void *local, uint64_t remote, mca_btl_base_registration_handle_t *lh,
                      mca_btl_base_registration_handle_t *rh, size_t size, int flags, int order,
                      mca_btl_base_rdma_completion_fn_t cb, void *ctx, void *data)
{
    mca_btl_llrdma_module_t *m = (mca_btl_llrdma_module_t *)btl;
    int rc;
    (void)flags;
    (void)order;
    MCA_BTL_LLRDMA_LOCK(m);
    rc = rdma_start(m, ep, IBV_WR_RDMA_READ, local, remote, lh, rh, size, cb, ctx, data);
    MCA_BTL_LLRDMA_UNLOCK(m);
    mca_btl_llrdma_done_kick(m); /* a failed endpoint's other operations */
    return rc;
}

/* Every put and get started before returns complete (for any endpoint: the
 * count is per module, which is at least as strong as asked). */
static int llrdma_flush(struct mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep)
{
    mca_btl_llrdma_module_t *m = (mca_btl_llrdma_module_t *)btl;

    for (;;) {
        uint64_t left;
        int failed;
        MCA_BTL_LLRDMA_LOCK(m);
        left = m->rdma_outstanding;
        failed = m->failed || (NULL != ep && LLRDMA_EP_FAILED == ep->state);
        MCA_BTL_LLRDMA_UNLOCK(m);
        if (0 == left) {
            return OPAL_SUCCESS;
        }
        if (failed) {
            return OPAL_ERROR;
        }
        (void)mca_btl_llrdma_module_progress(m);
    }
}

/* ------------------------------------------------------------ set-up */

static uint32_t cap_u32(uint32_t want, uint32_t device_max)
{
    uint32_t v = device_max < want ? device_max : want;
    return v > 255 ? 255 : v; /* rdma_cm carries 8 bits */
}

void mca_btl_llrdma_rdma_init(mca_btl_llrdma_module_t *m)
{
    const llrdma_path_profile_t *bw = &m->profile->bw;
    mca_rcache_base_resources_t res;
    const char *mode = mca_btl_llrdma_component.rdma;
    uint64_t limit = bw->rdma_frag_bytes;
    char name[96];

    OBJ_CONSTRUCT(&m->rdma_free, opal_list_t);
    m->rdma_outstanding = 0;
    m->rd_atomic_req = cap_u32(bw->rdma_rd_atomic, m->port.max_init_rd_atom);
    m->dest_rd_atomic_req = cap_u32(bw->rdma_rd_atomic, m->port.max_rd_atom);
    m->rd_atomic_granted = m->rd_atomic_req;
    m->dest_rd_atomic_granted = m->dest_rd_atomic_req;
    if (m->port.max_msg_sz < limit) {
        limit = m->port.max_msg_sz;
    }
    if (NULL == mode || 0 == strcmp(mode, "off") || 0 == limit) {
        m->rcache = NULL;
        return; /* send/receive only */
    }

    snprintf(name, sizeof(name), "llrdma.%s:%d", m->port.dev, m->port.port);
    memset(&res, 0, sizeof(res));
    res.cache_name = name;
    res.reg_data = m;
    res.sizeof_reg = sizeof(mca_btl_llrdma_reg_t);
    res.register_mem = reg_mem_cb;
    res.deregister_mem = dereg_mem_cb;
    m->rcache = mca_rcache_base_module_create("grdma", m, &res);
    if (NULL == m->rcache) {
        opal_output_verbose(1, mca_btl_llrdma_component.output,
                            "btl:llrdma: no grdma registration cache for %s:%d; RDMA put/get off",
                            m->port.dev, m->port.port);
        return;
    }

    m->super.btl_put_limit = m->super.btl_get_limit = (size_t)limit;
    m->super.btl_put_alignment = m->super.btl_get_alignment = 0;
    m->super.btl_registration_handle_size = sizeof(mca_btl_base_registration_handle_t);
    m->super.btl_rdma_pipeline_send_length = m->super.btl_eager_limit;
    m->super.btl_rdma_pipeline_frag_size = (size_t)limit;
    m->super.btl_min_rdma_pipeline_size = bw->rdma_pipeline_bytes;
    m->super.btl_register_mem = mca_btl_llrdma_register_mem;
    m->super.btl_deregister_mem = mca_btl_llrdma_deregister_mem;
    m->super.btl_put = llrdma_put;
    m->super.btl_flush = llrdma_flush;
    m->super.btl_flags |= MCA_BTL_FLAGS_PUT | MCA_BTL_FLAGS_RDMA_FLUSH;
    /* get: ob1 reads at the receiver (RGET); put: the receiver asks the
     * sender to write (docs/btl-design.md, "RGET or RPUT"). */
    if (0 == strcmp(mode, "get") && 0 != m->rd_atomic_req) {
        m->super.btl_get = llrdma_get;
        m->super.btl_flags |= MCA_BTL_FLAGS_GET;
    }
}

void mca_btl_llrdma_rdma_fini(mca_btl_llrdma_module_t *m)
{
    opal_list_item_t *item;

    /* After the QPs: cached registrations may still back posted WRs until then. */
    if (NULL != m->rcache) {
        (void)mca_rcache_base_module_destroy(m->rcache);
        m->rcache = NULL;
    }
    while (NULL != (item = opal_list_remove_first(&m->rdma_free))) {
        OBJ_RELEASE(item);
    }
    OBJ_DESTRUCT(&m->rdma_free);
}
