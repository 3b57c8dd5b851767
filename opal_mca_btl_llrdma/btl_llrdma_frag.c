/*
 * btl/llrdma fragment pools (see btl_llrdma_frag.h).
 */
#include "opal_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opal/constants.h"

#include "btl_llrdma.h"

static void frag_construct(mca_btl_llrdma_frag_t *frag)
{
    frag->base.des_segments = &frag->segment;
    frag->base.des_segment_count = 1;
    frag->endpoint = NULL;
}

OBJ_CLASS_INSTANCE(mca_btl_llrdma_frag_t, mca_btl_base_descriptor_t, frag_construct, NULL);

void mca_btl_llrdma_pool_construct(mca_btl_llrdma_pool_t *pool, struct mca_btl_llrdma_module_t *m,
                                   int path, uint32_t buf_bytes, uint32_t slab_frags,
                                   uint32_t max_frags)
{
    memset(pool, 0, sizeof(*pool));
    pool->module = m;
    pool->path = path;
    /* 64-byte slots: a payload never shares a cache line with its neighbour's. */
    pool->buf_bytes = (buf_bytes + 63u) & ~63u;
    pool->slab_frags = slab_frags > 0 ? slab_frags : 1;
    pool->max_frags = max_frags;
    OBJ_CONSTRUCT(&pool->free, opal_list_t);
}

int mca_btl_llrdma_pool_grow(mca_btl_llrdma_pool_t *pool)
{
    mca_btl_llrdma_slab_t *slab;
    uint32_t n = pool->slab_frags;
    size_t bytes;

    if (0 != pool->max_frags) {
        if (pool->nfrags >= pool->max_frags) {
            return OPAL_ERR_OUT_OF_RESOURCE;
        }
        if (n > pool->max_frags - pool->nfrags) {
            n = pool->max_frags - pool->nfrags;
        }
    }
    bytes = (size_t)n * pool->buf_bytes;

    slab = calloc(1, sizeof(*slab));
    if (NULL == slab) {
        goto fail;
    }
    slab->frags = calloc(n, sizeof(*slab->frags));
    if (NULL == slab->frags) {
        goto fail_free_slab;
    }
    if (0 != posix_memalign(&slab->mem, 4096, bytes)) {
        goto fail_free_frags;
    }
    slab->mr =
        mca_btl_llrdma_verbs.reg_mr(pool->module->pd, slab->mem, bytes, IBV_ACCESS_LOCAL_WRITE);
    if (NULL == slab->mr) {
        /* Once the module runs, ob1 would retry a NULL alloc forever: a
         * registration that fails is an error it must hear about. */
        if (pool->module->running) {
            char detail[256];
            snprintf(detail, sizeof(detail),
                     "btl/llrdma: registering %zu bytes of send buffers on %s:%d failed (%s)",
                     bytes, pool->module->port.dev, pool->module->port.port, strerror(errno));
            mca_btl_llrdma_module_fatal(pool->module, NULL, detail);
        }
        goto fail_free_mem;
    }
    slab->nfrags = n;
    for (uint32_t i = 0; i < n; ++i) {
        mca_btl_llrdma_frag_t *f = &slab->frags[i];
        OBJ_CONSTRUCT(f, mca_btl_llrdma_frag_t);
        f->pool = pool;
        f->hdr = (mca_btl_llrdma_hdr_t *)((char *)slab->mem + (size_t)i * pool->buf_bytes);
        f->lkey = slab->mr->lkey;
        opal_list_append(&pool->free, &f->base.super.super);
    }
    slab->next = pool->slabs;
    pool->slabs = slab;
    pool->nfrags += n;
    return OPAL_SUCCESS;

fail_free_mem:
    free(slab->mem);
fail_free_frags:
    free(slab->frags);
fail_free_slab:
    free(slab);
fail:
    return OPAL_ERR_OUT_OF_RESOURCE;
}

mca_btl_llrdma_frag_t *mca_btl_llrdma_pool_get(mca_btl_llrdma_pool_t *pool)
{
    opal_list_item_t *item = opal_list_remove_first(&pool->free);
    if (NULL == item) {
        if (OPAL_SUCCESS != mca_btl_llrdma_pool_grow(pool)) {
            return NULL;
        }
        item = opal_list_remove_first(&pool->free);
    }
    ((mca_btl_llrdma_frag_t *)item)->wire = 0;
    return (mca_btl_llrdma_frag_t *)item;
}

void mca_btl_llrdma_pool_put(mca_btl_llrdma_frag_t *frag)
{
    frag->endpoint = NULL;
    opal_list_prepend(&frag->pool->free, &frag->base.super.super);
}

void mca_btl_llrdma_pool_destruct(mca_btl_llrdma_pool_t *pool)
{
    mca_btl_llrdma_slab_t *slab = pool->slabs;

    /* Unlink the fragments while their memory still exists. */
    while (NULL != opal_list_remove_first(&pool->free)) {
    }
    OBJ_DESTRUCT(&pool->free);
    while (NULL != slab) {
        mca_btl_llrdma_slab_t *next = slab->next;
        (void)mca_btl_llrdma_verbs.dereg_mr(slab->mr);
        for (uint32_t i = 0; i < slab->nfrags; ++i) {
            OBJ_DESTRUCT(&slab->frags[i]);
        }
        free(slab->mem);
        free(slab->frags);
        free(slab);
        slab = next;
    }
    pool->slabs = NULL;
    pool->nfrags = 0;
}
