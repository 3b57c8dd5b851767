/*
 * btl/llrdma component: register, open, init, close.
 *
 * init is where the hint takes effect: it is resolved (API > MCA variable >
 * RDMA_LOW_LATENCY_HINT > 0), validated, turned into the transport profile,
 * frozen, published in the modex for the cross-rank check and dumped.  This
 * happens even when no device is found, because a BTL that returns no
 * modules is unloaded and its variables with it.
 */
#include "opal_config.h"

#include <stdio.h>
#include <string.h>

#include "opal/constants.h"
#include "opal/mca/pmix/pmix.h"
#include "opal/util/output.h"

#include "btl_llrdma.h"
#include "llrdma_mca_common.h"

static int llrdma_component_register(void);
static int llrdma_component_open(void);
static int llrdma_component_close(void);
static mca_btl_base_module_t **llrdma_component_init(int *num_btls, bool enable_progress_threads,
                                                     bool enable_mpi_threads);

mca_btl_base_module_t mca_btl_llrdma_module_template;

mca_btl_llrdma_component_t mca_btl_llrdma_component = {
    .super =
        {
            .btl_version =
                {
                    MCA_BTL_DEFAULT_VERSION("llrdma"),
                    .mca_open_component = llrdma_component_open,
                    .mca_close_component = llrdma_component_close,
                    .mca_register_component_params = llrdma_component_register,
                },
            .btl_data = {.param_field = MCA_BASE_METADATA_PARAM_NONE},
            .btl_init = llrdma_component_init,
            .btl_progress = NULL,
        },
    .size_hint_index = -1,
    .output = -1,
};

static int llrdma_component_register(void)
{
    return mca_btl_llrdma_register_params();
}

static int llrdma_component_open(void)
{
    mca_btl_llrdma_component.output = opal_output_open(NULL);
    opal_output_set_verbosity(mca_btl_llrdma_component.output, mca_btl_llrdma_component.verbose);
    return OPAL_SUCCESS;
}

static int llrdma_component_close(void)
{
    if (mca_btl_llrdma_component.output >= 0) {
        opal_output_close(mca_btl_llrdma_component.output);
        mca_btl_llrdma_component.output = -1;
    }
    return OPAL_SUCCESS;
}

static void publish_modex(const llrdma_rank_config_t *cfg)
{
    llrdma_peer_hint_t me;
    char wire[LLRDMA_PEER_WIRE_MAX];
    int rc;

    memset(&me, 0, sizeof(me));
    me.rank = cfg->rank;
    me.present = 1;
    me.bytes = cfg->hint.bytes;
    snprintf(me.host, sizeof(me.host), "%s", cfg->host);
    snprintf(me.origin, sizeof(me.origin), "%s", cfg->hint.origin);
    if (LLRDMA_OK != llrdma_peer_encode(&me, wire, sizeof(wire))) {
        opal_output(0, "btl:llrdma: cannot encode the modex record; cross-rank check disabled");
        return;
    }
    OPAL_MODEX_SEND_STRING(rc, OPAL_PMIX_GLOBAL, LLRDMA_MODEX_KEY, wire, strlen(wire) + 1);
    if (OPAL_SUCCESS != rc) {
        opal_output(0, "btl:llrdma: modex publish failed (%d); cross-rank check disabled", rc);
    }
}

static mca_btl_base_module_t **llrdma_component_init(int *num_btls, bool enable_progress_threads,
                                                     bool enable_mpi_threads)
{
    mca_btl_llrdma_component_t *c = &mca_btl_llrdma_component;
    llrdma_rank_config_t *cfg = &c->config;
    llrdma_profile_overrides_t ovr;
    llrdma_hint_inputs_t in;
    char err[1024];
    int rc;

    (void)enable_progress_threads;
    (void)enable_mpi_threads;
    *num_btls = 0;
    memset(cfg, 0, sizeof(*cfg));
    llrdma_mca_fill_identity(cfg);

    llrdma_mca_hint_inputs(c->size_hint_index, "btl_llrdma_size_hint", &in);
    rc = llrdma_hint_resolve(&in, &cfg->hint, err, sizeof(err));
    if (LLRDMA_OK != rc) {
        llrdma_mca_fatal("invalid size hint", err);
    }

    memset(&ovr, 0, sizeof(ovr));
    ovr.ll_sq_depth = c->ovr_ll_sq_depth;
    ovr.bw_sq_depth = c->ovr_bw_sq_depth;
    ovr.ll_inline_bytes = c->ovr_ll_inline;
    ovr.bw_signal_interval = c->ovr_bw_signal;
    ovr.bw_cq_mod_count = c->ovr_bw_cq_count;
    ovr.bw_cq_mod_usec = c->ovr_bw_cq_usec;
    rc = llrdma_profile_derive(cfg->hint.bytes, &ovr, &cfg->profile);
    if (LLRDMA_OK != rc) {
        snprintf(err, sizeof(err),
                 "a btl_llrdma_* profile override is out of range (ll_sq_depth=%u "
                 "bw_sq_depth=%u ll_inline=%u bw_signal_interval=%u "
                 "bw_cq_moderation_count=%u bw_cq_moderation_usec=%u)",
                 ovr.ll_sq_depth, ovr.bw_sq_depth, ovr.ll_inline_bytes, ovr.bw_signal_interval,
                 ovr.bw_cq_mod_count, ovr.bw_cq_mod_usec);
        llrdma_mca_fatal("invalid profile override", err);
    }
    llrdma_state_freeze();

    (void)mca_btl_llrdma_discover(cfg);
    publish_modex(cfg);
    llrdma_state_publish(cfg);
    (void)llrdma_mca_dump(c->dump, cfg);
    opal_output_verbose(10, c->output, "btl:llrdma: size hint %llu from %s; %s",
                        (unsigned long long)cfg->hint.bytes, cfg->hint.origin, cfg->btl_status);
    /* No data path yet: no modules, Open MPI carries on with its other BTLs. */
    return NULL;
}
