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

/* Set once: ob1 and the receive path only read a fragment's segment list. */
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
    int recv;

    if (0 != pool->max_frags) {
        if (pool->nfrags >= pool->max_frags) {
            return OPAL_ERR_OUT_OF_RESOURCE;
        }
        if (n > pool->max_frags - pool->nfrags) {
            n = pool->max_frags - pool->nfrags;
        }
    }
    /* Whole pages: with fork safety (ibv_fork_init) the registration marks
     * its pages MADV_DONTFORK, and a page shared with another heap object
     * would take that object from a forked child. */
    bytes = llrdma_page_round((size_t)n * pool->buf_bytes);

    slab = calloc(1, sizeof(*slab));
    if (NULL == slab) {
        goto fail;
    }
    slab->frags = calloc(n, sizeof(*slab->frags));
    if (NULL == slab->frags) {
        goto fail_free_slab;
    }
    if (0 != posix_memalign(&slab->mem, llrdma_page_size(), bytes)) {
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
    recv = pool == &pool->module->path[pool->path].recv_pool;
    for (uint32_t i = 0; i < n; ++i) {
        mca_btl_llrdma_frag_t *f = &slab->frags[i];
        OBJ_CONSTRUCT(f, mca_btl_llrdma_frag_t);
        f->pool = pool;
        f->hdr = (mca_btl_llrdma_hdr_t *)((char *)slab->mem + (size_t)i * pool->buf_bytes);
        f->lkey = slab->mr->lkey;
        if (recv) {
            f->rsge = (struct ibv_sge){
                .addr = (uintptr_t)f->hdr, .length = pool->buf_bytes, .lkey = f->lkey};
            /* Bit 0 marks a receive: send wr_ids point to 8-byte aligned ring entries. */
            f->rwr =
                (struct ibv_recv_wr){.wr_id = (uintptr_t)f | 1u, .sg_list = &f->rsge, .num_sge = 1};
        }
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
    ((mca_btl_llrdma_frag_t *)item)->piece = 0;
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

/* ------------------------------------------------------- credit words */

/* 64-byte slots (a word the peer writes and our source word, each slot on a
 * cache line of its own) in pages that hold nothing else, for the same
 * MADV_DONTFORK reason as the slabs.  Each connection still registers its own
 * slot, so a peer's rkey reaches its own word only. */
#define CWORD_SLOT 64u

uint64_t *mca_btl_llrdma_cword_get(struct mca_btl_llrdma_module_t *m)
{
    uint64_t *w = m->cword_free;

    if (NULL == w) {
        mca_btl_llrdma_cword_page_t *pg = calloc(1, sizeof(*pg));
        size_t page = llrdma_page_size();
        if (NULL == pg) {
            return NULL;
        }
        if (0 != posix_memalign(&pg->mem, page, page)) {
            free(pg);
            return NULL;
        }
        memset(pg->mem, 0, page);
        /* Thread the slots onto the free list (the first word of a free slot
         * points to the next). */
        for (size_t off = page; off >= CWORD_SLOT; off -= CWORD_SLOT) {
            uint64_t *slot = (uint64_t *)((char *)pg->mem + off - CWORD_SLOT);
            *(uint64_t **)slot = m->cword_free;
            m->cword_free = slot;
        }
        pg->next = m->cword_pages;
        m->cword_pages = pg;
        w = m->cword_free;
    }
    m->cword_free = *(uint64_t **)w;
    w[0] = w[1] = 0;
    return w;
}

void mca_btl_llrdma_cword_put(struct mca_btl_llrdma_module_t *m, uint64_t *w)
{
    *(uint64_t **)w = m->cword_free;
    m->cword_free = w;
}

void mca_btl_llrdma_cword_fini(struct mca_btl_llrdma_module_t *m)
{
    while (NULL != m->cword_pages) {
        mca_btl_llrdma_cword_page_t *pg = m->cword_pages;
        m->cword_pages = pg->next;
        free(pg->mem);
        free(pg);
    }
    m->cword_free = NULL;
}
