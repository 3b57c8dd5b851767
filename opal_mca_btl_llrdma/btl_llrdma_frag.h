/*
 * btl/llrdma fragments and their registered pools.
 *
 * A fragment is an ob1 descriptor plus a slot in a registered slab: the BTL
 * header, then up to the path's fragment size of payload.  Pools grow by
 * whole slabs (one memory registration each) and never shrink before
 * finalize; receive pools are posted to the shared receive queue in full.
 */
#ifndef MCA_BTL_LLRDMA_FRAG_H
#define MCA_BTL_LLRDMA_FRAG_H

#include "opal_config.h"

#include <infiniband/verbs.h>

#include "opal/class/opal_list.h"
#include "opal/mca/btl/btl.h"

#include "btl_llrdma_hdr.h"

struct mca_btl_llrdma_module_t;
struct mca_btl_llrdma_pool_t;

typedef struct mca_btl_llrdma_frag_t {
    mca_btl_base_descriptor_t base;
    mca_btl_base_segment_t segment;
    struct mca_btl_base_endpoint_t *endpoint;
    struct mca_btl_llrdma_pool_t *pool;
    mca_btl_llrdma_hdr_t *hdr; /* registered buffer: header, then payload */
    uint32_t lkey;
    uint32_t wire; /* queued send holding packed records: their bytes (0: one message) */
    uint8_t tag;
    uint8_t piece; /* MCA_BTL_LLRDMA_HDR_MORE or _LAST: a piece of a split fragment */
    int status;    /* queued for ob1's callback (btl_llrdma_done.c): the result */
    /* A receive pool's fragment: its receive work request, filled once
     * (pool growth), so a repost only chains them (the provider copies what
     * it posts).  Zero in a send pool's. */
    struct ibv_recv_wr rwr;
    struct ibv_sge rsge;
} mca_btl_llrdma_frag_t;
OBJ_CLASS_DECLARATION(mca_btl_llrdma_frag_t);

typedef struct mca_btl_llrdma_slab_t {
    struct mca_btl_llrdma_slab_t *next;
    struct ibv_mr *mr;
    void *mem; /* whole pages (fork safety) */
    mca_btl_llrdma_frag_t *frags;
    uint32_t nfrags;
} mca_btl_llrdma_slab_t;

typedef struct mca_btl_llrdma_pool_t {
    struct mca_btl_llrdma_module_t *module;
    int path;
    uint32_t buf_bytes;  /* header + largest payload */
    uint32_t slab_frags; /* fragments added per growth */
    uint32_t max_frags;  /* 0 = unbounded */
    uint32_t nfrags;
    opal_list_t free;
    mca_btl_llrdma_slab_t *slabs;
} mca_btl_llrdma_pool_t;

void mca_btl_llrdma_pool_construct(mca_btl_llrdma_pool_t *pool, struct mca_btl_llrdma_module_t *m,
                                   int path, uint32_t buf_bytes, uint32_t slab_frags,
                                   uint32_t max_frags);
/* Add one slab.  OPAL_ERR_OUT_OF_RESOURCE at max_frags or when memory or the
 * registration fails (pool unchanged). */
int mca_btl_llrdma_pool_grow(mca_btl_llrdma_pool_t *pool);
/* A free fragment, growing the pool if needed; NULL when none can be had. */
mca_btl_llrdma_frag_t *mca_btl_llrdma_pool_get(mca_btl_llrdma_pool_t *pool);
void mca_btl_llrdma_pool_put(mca_btl_llrdma_frag_t *frag);
/* Deregister and free every slab (fragments must not be in use by the NIC). */
void mca_btl_llrdma_pool_destruct(mca_btl_llrdma_pool_t *pool);

/* A page of credit words (btl_llrdma_frag.c). */
typedef struct mca_btl_llrdma_cword_page_t {
    struct mca_btl_llrdma_cword_page_t *next;
    void *mem;
} mca_btl_llrdma_cword_page_t;

/* A connection's credit words ([0] the peer writes, [1] our source), zeroed,
 * from the module's pages of credit words (nothing else shares those pages:
 * fork safety marks registered pages MADV_DONTFORK); NULL without memory.
 * Module lock held. */
uint64_t *mca_btl_llrdma_cword_get(struct mca_btl_llrdma_module_t *m);
void mca_btl_llrdma_cword_put(struct mca_btl_llrdma_module_t *m, uint64_t *w);
/* Finalize, after every connection is gone. */
void mca_btl_llrdma_cword_fini(struct mca_btl_llrdma_module_t *m);

#include <unistd.h>
static inline size_t llrdma_page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096u;
}

static inline size_t llrdma_page_round(size_t bytes)
{
    size_t p = llrdma_page_size();
    return (bytes + p - 1) / p * p;
}

static inline void *mca_btl_llrdma_frag_payload(mca_btl_llrdma_frag_t *frag)
{
    return (void *)(frag->hdr + 1);
}

/* A send descriptor of `size` payload bytes in frag's own buffer, no callback. */
static inline void mca_btl_llrdma_frag_init_send(mca_btl_llrdma_frag_t *frag,
                                                 struct mca_btl_base_endpoint_t *ep, size_t size,
                                                 uint32_t flags)
{
    frag->endpoint = ep;
    frag->segment.seg_addr.pval = mca_btl_llrdma_frag_payload(frag);
    frag->segment.seg_len = size;
    frag->base.des_segments = &frag->segment;
    frag->base.des_segment_count = 1;
    frag->base.des_flags = flags;
    frag->base.des_cbfunc = NULL;
    frag->base.des_cbdata = NULL;
    frag->base.order = MCA_BTL_NO_ORDER;
}

#endif
