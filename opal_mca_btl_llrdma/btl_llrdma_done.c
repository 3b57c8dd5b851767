/*
 * btl/llrdma upcalls: everything ob1 must hear leaves through this queue,
 * after the module lock is released (docs/btl-design.md "Threads").
 *
 * ob1 calls other modules from inside its callbacks (its ACK handler
 * schedules over every BTL of the peer; PROGRESS_PENDING retries puts and
 * gets on any module).  A callback made with this module's lock held could
 * then wait for a second module's lock while another thread holding that
 * one waits for ours.  So completions, failed fragments and errors are
 * queued under the lock and delivered by whoever holds the progress token,
 * with no lock held, in the order they were queued (btl/uct does the same).
 */
#include "opal_config.h"

#include <stdlib.h>
#include <string.h>

#include "opal/util/output.h"

#include "btl_llrdma.h"
#include "btl_llrdma_rdma.h"

int mca_btl_llrdma_token_try(mca_btl_llrdma_module_t *m)
{
    int expect = 0;
    if (!opal_using_threads()) {
        if (m->progressing) {
            return 0; /* a callback's own progress: the outer pass delivers */
        }
        m->progressing = 1;
        return 1;
    }
    return __atomic_compare_exchange_n(&m->progressing, &expect, 1, 0, __ATOMIC_ACQUIRE,
                                       __ATOMIC_RELAXED);
}

void mca_btl_llrdma_token_release(mca_btl_llrdma_module_t *m)
{
    __atomic_store_n(&m->progressing, 0, __ATOMIC_RELEASE);
}

void mca_btl_llrdma_done_frag(mca_btl_llrdma_module_t *m, mca_btl_llrdma_frag_t *frag, int status)
{
    mca_btl_base_descriptor_t *des = &frag->base;

    if ((des->des_flags & MCA_BTL_DES_SEND_ALWAYS_CALLBACK) && NULL != des->des_cbfunc) {
        frag->status = status;
        mca_btl_llrdma_done_queue(m, &des->super.super);
    } else if (des->des_flags & MCA_BTL_DES_FLAGS_BTL_OWNERSHIP) {
        mca_btl_llrdma_pool_put(frag);
    }
}

void mca_btl_llrdma_done_rdma(mca_btl_llrdma_module_t *m, mca_btl_llrdma_rdma_op_t *op, int status)
{
    op->status = status;
    mca_btl_llrdma_done_queue(m, &op->super);
}

int mca_btl_llrdma_done_run(mca_btl_llrdma_module_t *m)
{
    opal_list_t batch, back;
    opal_list_item_t *item;
    int n = 0;

    if (!mca_btl_llrdma_done_pending(m)) {
        return 0;
    }
    OBJ_CONSTRUCT(&batch, opal_list_t);
    OBJ_CONSTRUCT(&back, opal_list_t);
    MCA_BTL_LLRDMA_LOCK(m);
    opal_list_join(&batch, opal_list_get_end(&batch), &m->done);
    __atomic_store_n(&m->ndone, 0, __ATOMIC_RELEASE);
    MCA_BTL_LLRDMA_UNLOCK(m);

    while (NULL != (item = opal_list_remove_first(&batch))) {
        ++n;
        if (item->super.obj_class == OBJ_CLASS(mca_btl_llrdma_frag_t)) {
            mca_btl_llrdma_frag_t *frag = (mca_btl_llrdma_frag_t *)item;
            mca_btl_base_descriptor_t *des = &frag->base;
            int own = des->des_flags & MCA_BTL_DES_FLAGS_BTL_OWNERSHIP;
            des->des_cbfunc(&m->super, frag->endpoint, des, frag->status);
            if (own) {
                opal_list_append(&back, item); /* to its pool, under the lock */
            }
        } else if (item->super.obj_class == OBJ_CLASS(mca_btl_llrdma_rdma_op_t)) {
            mca_btl_llrdma_rdma_op_t *op = (mca_btl_llrdma_rdma_op_t *)item;
            if (NULL != op->cbfunc) {
                op->cbfunc(&m->super, op->endpoint, op->local, op->local_handle, op->cbcontext,
                           op->cbdata, op->status);
            }
            opal_list_append(&back, item);
        } else {
            mca_btl_llrdma_err_t *e = (mca_btl_llrdma_err_t *)item;
            /* Registered by the PML from another thread (llrdma_register_error). */
            mca_btl_base_module_error_cb_fn_t cb = __atomic_load_n(&m->error_cb, __ATOMIC_ACQUIRE);
            if (NULL == cb) {
                /* Not yet: kept for the PML (its text is already on
                 * stderr), unless it registered meanwhile. */
                MCA_BTL_LLRDMA_LOCK(m);
                cb = __atomic_load_n(&m->error_cb, __ATOMIC_ACQUIRE);
                if (NULL == cb) {
                    opal_list_append(&m->held, item);
                }
                MCA_BTL_LLRDMA_UNLOCK(m);
                if (NULL == cb) {
                    continue;
                }
            }
            cb(&m->super, MCA_BTL_ERROR_FLAGS_FATAL, e->proc, e->detail);
            OBJ_RELEASE(e);
        }
    }
    if (!opal_list_is_empty(&back)) {
        MCA_BTL_LLRDMA_LOCK(m);
        while (NULL != (item = opal_list_remove_first(&back))) {
            if (item->super.obj_class == OBJ_CLASS(mca_btl_llrdma_frag_t)) {
                mca_btl_llrdma_pool_put((mca_btl_llrdma_frag_t *)item);
            } else {
                /* Counted out after its callback: btl_flush returns once
                 * every callback has run. */
                --m->rdma_outstanding;
                opal_list_append(&m->rdma_free, item);
            }
        }
        MCA_BTL_LLRDMA_UNLOCK(m);
    }
    OBJ_DESTRUCT(&back);
    OBJ_DESTRUCT(&batch);
    return n;
}

void mca_btl_llrdma_done_kick(mca_btl_llrdma_module_t *m)
{
    /* A thread that finds the token taken leaves: its holder looks at the
     * queue again before it lets go (mca_btl_llrdma_module_progress). */
    while (mca_btl_llrdma_done_pending(m) && mca_btl_llrdma_token_try(m)) {
        (void)mca_btl_llrdma_done_run(m);
        mca_btl_llrdma_token_release(m);
    }
}

void mca_btl_llrdma_done_drop(mca_btl_llrdma_module_t *m)
{
    opal_list_item_t *item;

    while (NULL != (item = opal_list_remove_first(&m->held))) {
        OBJ_RELEASE(item); /* said on stderr when found; no PML took it */
    }
    while (NULL != (item = opal_list_remove_first(&m->done))) {
        if (item->super.obj_class == OBJ_CLASS(mca_btl_llrdma_frag_t)) {
            mca_btl_llrdma_frag_t *frag = (mca_btl_llrdma_frag_t *)item;
            if (frag->base.des_flags & MCA_BTL_DES_FLAGS_BTL_OWNERSHIP) {
                mca_btl_llrdma_pool_put(frag);
            }
        } else if (item->super.obj_class == OBJ_CLASS(mca_btl_llrdma_rdma_op_t)) {
            --m->rdma_outstanding;
            OBJ_RELEASE(item);
        } else {
            OBJ_RELEASE(item);
        }
    }
    m->ndone = 0;
}
