/*
 * btl/llrdma: RDMA BTL over rdma-core whose transport profile is fixed at
 * start-up from the low-latency RDMA size hint (see docs/design.md).
 *
 * This stage reads, validates and publishes the hint, discovers verbs
 * devices and reports what it found; it has no data path yet, so it always
 * disqualifies itself (returns no modules) and Open MPI uses its other BTLs.
 */
#ifndef MCA_BTL_LLRDMA_H
#define MCA_BTL_LLRDMA_H

#include "opal_config.h"

#include "opal/mca/btl/btl.h"
#include "opal/mca/btl/base/base.h"

#include "llrdma_core.h"

BEGIN_C_DECLS

typedef struct mca_btl_llrdma_component_t {
    mca_btl_base_component_3_0_0_t super;

    /* MCA variables (registered in btl_llrdma_mca.c) */
    char *size_hint;     /* text; validated by the core, never by Open MPI */
    int size_hint_index; /* variable index, for source/file lookups */
    char *dump;          /* off | stderr | stdout | path pattern */
    int verbose;
    char *if_include; /* device[:port] list */
    char *if_exclude;
    unsigned ovr_ll_sq_depth, ovr_bw_sq_depth, ovr_ll_inline, ovr_bw_signal;
    unsigned ovr_bw_cq_count, ovr_bw_cq_usec;

    int output;                  /* opal_output stream for verbose messages */
    llrdma_rank_config_t config; /* what took effect on this rank */
} mca_btl_llrdma_component_t;

OPAL_MODULE_DECLSPEC extern mca_btl_llrdma_component_t mca_btl_llrdma_component;

/* Template for every module; its limits are registered as btl_llrdma_* too. */
extern mca_btl_base_module_t mca_btl_llrdma_module_template;

/* btl_llrdma_mca.c */
int mca_btl_llrdma_register_params(void);

/* btl_llrdma_device.c: fill cfg->device / ndevices / btl_status from the
 * verbs devices this rank may use.  Returns the number of usable ports. */
int mca_btl_llrdma_discover(llrdma_rank_config_t *cfg);

END_C_DECLS
#endif
