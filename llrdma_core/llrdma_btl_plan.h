/*
 * llrdma_btl_plan.h -- pure decisions of the btl/llrdma data path (C API of
 * llrdma_core/btl_plan.cc): where the low-latency/bandwidth boundary lies for ob1,
 * and when a send work request asks for a completion.  No Open MPI or verbs
 * header, so the rules are unit-tested on their own (tests/unit/test_btl_plan).
 */
#ifndef LLRDMA_BTL_PLAN_H
#define LLRDMA_BTL_PLAN_H

#include <stdint.h>

#include "llrdma_core.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { LLRDMA_PATH_LL = 0, LLRDMA_PATH_BW = 1, LLRDMA_NPATHS = 2 };

/* What ob1 and the post path see.  A "fragment" is one BTL descriptor: ob1's
 * header plus payload, without the BTL's own wire header. */
typedef struct {
    uint32_t frag_max[LLRDMA_NPATHS];   /* largest fragment per path; 0 = path unused */
    uint32_t inline_max[LLRDMA_NPATHS]; /* inline threshold (wire bytes) = min(requested,
                                           granted) */
    uint32_t sq_depth[LLRDMA_NPATHS];   /* send WRs the BTL keeps posted = min(req, granted) */
    uint64_t eager_limit;               /* btl_eager_limit: one fragment, no rendezvous */
    uint64_t rndv_eager_limit;          /* data carried by ob1's rendezvous header */
    uint64_t max_send_size;             /* fragments of ob1's send pipeline */
} llrdma_btl_limits_t;

/* Granted device values per path, read back after creating a QP. */
typedef struct {
    uint32_t inline_bytes[LLRDMA_NPATHS];
    uint32_t sq_depth[LLRDMA_NPATHS];
} llrdma_btl_granted_t;

/* Limits for a profile whose receive buffers carry `hdr_bytes` of BTL header.
 * The boundary: a fragment goes to the LL queue pair when it fits an LL
 * receive buffer (so every message <= hint is one LL work request); anything
 * larger goes to the BW queue pair, still as ONE eager fragment up to the BW
 * fragment size (>= 2x hint), so a message just above the hint costs one send
 * on an already connected QP, not a rendezvous.  LLRDMA_ERR_INVALID when a
 * receive buffer cannot even hold the header. */
int llrdma_btl_plan_limits(const llrdma_profile_t *p, uint32_t hdr_bytes,
                           const llrdma_btl_granted_t *granted, llrdma_btl_limits_t *out);

/* LLRDMA_PATH_LL or LLRDMA_PATH_BW for a fragment of `bytes`; -1 if too large. */
int llrdma_btl_path_for(const llrdma_btl_limits_t *l, uint64_t bytes);

/* Selective signalling of one send queue.  WRs retire in order: a signalled
 * completion retires it and every unsignalled WR before it. */
typedef struct {
    uint32_t depth;       /* WRs that may be posted and not yet retired */
    uint32_t interval;    /* at least one signalled WR in every `interval` posts */
    uint32_t posted;      /* posted, not retired */
    uint32_t unsignalled; /* posted since the last signalled one */
    int owed;             /* one of those needs a completion */
} llrdma_sq_t;

void llrdma_sq_init(llrdma_sq_t *sq, uint32_t depth, uint32_t interval);
uint32_t llrdma_sq_free_slots(const llrdma_sq_t *sq);
/* Account one post and say whether it must be signalled (1) or not (0).
 * needs_completion: the WR's buffer or callback waits for it (not inline);
 * more_queued: another WR will be posted right after this one.  The last WR
 * of a burst is signalled when it or any unsignalled WR before it needs a
 * completion, so no callback waits for traffic that may never come;
 * otherwise the cadence decides. */
int llrdma_sq_post(llrdma_sq_t *sq, int needs_completion, int more_queued);
/* `n` WRs retired (a signalled completion covering them). */
void llrdma_sq_retire(llrdma_sq_t *sq, uint32_t n);

#ifdef __cplusplus
}
#endif
#endif
