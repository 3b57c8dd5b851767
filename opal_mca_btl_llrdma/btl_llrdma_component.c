/*
 * btl/llrdma component: register, open, init, close.
 *
 * init is where the hint takes effect: it is resolved (API > MCA variable >
 * RDMA_LOW_LATENCY_HINT > 0), validated, turned into the transport profile,
 * frozen, published in the modex for the cross-rank check and dumped.  This
 * happens even when no device is found, because a BTL that returns no
 * modules is unloaded and its variables with it.  Then one module is created
 * per usable port and the modules' rdma_cm addresses go to the modex.
 */
#include "opal_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opal/constants.h"
#include "llrdma_ompi_compat.h" /* the PMIx interface of this series */
#include "opal/util/output.h"

#include "btl_llrdma.h"
#include "llrdma_mca_common.h"

static int llrdma_component_register(void);
static int llrdma_component_open(void);
static int llrdma_component_close(void);
/* GPU registration per device (btl_llrdma_gpu.c): a forced mode a device
 * lacks, or forced without any device, stops MPI_Init; otherwise the dump
 * says what each device does ("none (no RDMA device)" without one). */
static void gpu_report(mca_btl_llrdma_component_t *c, llrdma_rank_config_t *cfg)
{
    llrdma_gpu_knob_t knob = LLRDMA_GPU_KNOB_AUTO;
    llrdma_gpu_probe_t none = {.have_device = 0, .dmabuf_errno = -1, .peermem = 0};
    llrdma_gpu_mode_t mode;
    char why[256];

    for (int i = 0; i < c->nmodules; ++i) {
        if (c->modules[i]->gpu_error) {
            snprintf(why, sizeof(why), "%s:%d cannot: %s", c->modules[i]->port.dev,
                     c->modules[i]->port.port, c->modules[i]->gpu_report);
            mca_btl_llrdma_bad_knob("gpu_rdma", c->gpu_rdma, why);
        }
    }
    if (c->nmodules > 0) {
        /* module_granted filled cfg->device.gpu_rdma; coll/llrdma's GPU-direct
         * step needs every module (any may carry an inter-node peer). */
        cfg->gpu_rdma_every = 1;
        for (int i = 0; i < c->nmodules; ++i) {
            if (LLRDMA_GPU_NONE == c->modules[i]->gpu_mode || NULL == c->modules[i]->rcache) {
                cfg->gpu_rdma_every = 0;
            }
        }
        return;
    }
    (void)llrdma_gpu_knob_parse(c->gpu_rdma, &knob); /* validated in check_params */
    if (LLRDMA_OK != llrdma_gpu_rdma_choose(knob, &none, &mode, cfg->device.gpu_rdma,
                                            sizeof(cfg->device.gpu_rdma))) {
        mca_btl_llrdma_bad_knob("gpu_rdma", c->gpu_rdma, cfg->device.gpu_rdma);
    }
}

static mca_btl_base_module_t **llrdma_component_init(int *num_btls, bool enable_progress_threads,
                                                     bool enable_mpi_threads);
static int llrdma_component_progress(void);

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
            .btl_progress = llrdma_component_progress,
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

/* btl_llrdma_dump as it was at init: by close the variable's storage has
 * been released (it reads NULL there). */
static char *dump_at_close;

static int llrdma_component_close(void)
{
    /* The modules are finalized: the counts are final.  A second record
     * joins the one written at MPI_Init (llrdma-hint recommend reads it). */
    if (NULL != dump_at_close) {
        (void)llrdma_mca_dump_stats(dump_at_close, &mca_btl_llrdma_component.config,
                                    &mca_btl_llrdma_component.hist);
        free(dump_at_close);
        dump_at_close = NULL;
    }
    free(mca_btl_llrdma_component.modules);
    mca_btl_llrdma_component.modules = NULL;
    mca_btl_llrdma_component.nmodules = 0;
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
    OPAL_MODEX_SEND_STRING(rc, LLRDMA_PMIX_GLOBAL, LLRDMA_MODEX_KEY, wire, strlen(wire) + 1);
    if (OPAL_SUCCESS != rc) {
        opal_output(0, "btl:llrdma: modex publish failed (%d); cross-rank check disabled", rc);
    }
}

static int llrdma_component_progress(void)
{
    mca_btl_llrdma_component_t *c = &mca_btl_llrdma_component;
    int count = 0;
    for (int i = 0; i < c->nmodules; ++i) {
        if (NULL != c->modules[i]) {
            count += mca_btl_llrdma_module_progress(c->modules[i]);
        }
    }
    return count;
}

static int publish_addresses(mca_btl_llrdma_component_t *c)
{
    mca_btl_llrdma_addr_t addrs[MCA_BTL_LLRDMA_MAX_PORTS];
    int rc;

    for (int i = 0; i < c->nmodules; ++i) {
        addrs[i] = c->modules[i]->addr;
    }
    OPAL_MODEX_SEND(rc, LLRDMA_PMIX_GLOBAL, &c->super.btl_version, addrs,
                    (size_t)c->nmodules * sizeof(addrs[0]));
    return rc;
}

/* What failed, from mca_btl_llrdma_module_create's return code (it reports
 * neither the call nor errno).  No memory is registered there, so none of
 * these is the locked-memory limit. */
static const char *create_failure(int rc)
{
    switch (rc) {
    case OPAL_ERR_NOT_AVAILABLE:
        return "librdmacm has no context for the device (is rdma_ucm loaded?), or "
               "ibv_create_qp (probe queue pair) or the rdma_cm listener (rdma_create_id, "
               "rdma_bind_addr, rdma_listen) failed";
    case OPAL_ERR_BAD_PARAM:
        return "the profile gives this device no usable fragment size";
    default:
        return "ibv_alloc_pd, ibv_create_cq or ibv_create_srq failed";
    }
}

/* One module per usable port; a port whose resources cannot be created is
 * skipped with its reason in `why`. */
static void create_modules(mca_btl_llrdma_component_t *c, llrdma_rank_config_t *cfg, char *why,
                           size_t whylen)
{
    c->nmodules = 0;
    c->modules = calloc((size_t)(c->nports > 0 ? c->nports : 1), sizeof(*c->modules));
    if (NULL == c->modules) {
        snprintf(why, whylen, "out of memory");
        return;
    }
    for (int i = 0; i < c->nports; ++i) {
        mca_btl_llrdma_module_t *m = NULL;
        int rc = mca_btl_llrdma_module_create(&c->ports[i], &cfg->profile, &m);
        if (OPAL_SUCCESS != rc) {
            snprintf(why, whylen, "%s:%d: %s", c->ports[i].dev, c->ports[i].port,
                     create_failure(rc));
            opal_output_verbose(10, c->output, "btl:llrdma: skipping %s", why);
            continue;
        }
        c->modules[c->nmodules++] = m;
    }
}

static mca_btl_base_module_t **llrdma_component_init(int *num_btls, bool enable_progress_threads,
                                                     bool enable_mpi_threads)
{
    mca_btl_llrdma_component_t *c = &mca_btl_llrdma_component;
    llrdma_rank_config_t *cfg = &c->config;
    llrdma_profile_overrides_t ovr;
    llrdma_hint_inputs_t in;
    mca_btl_base_module_t **out;
    char err[1024];
    int rc;

    /* Any thread level: the module lock is taken when opal_using_threads()
     * (MPI_THREAD_MULTIPLE), docs/btl-design.md "Threads". */
    (void)enable_progress_threads;
    (void)enable_mpi_threads;
    *num_btls = 0;
    memset(cfg, 0, sizeof(*cfg));
    llrdma_mca_fill_identity(cfg);
    mca_btl_llrdma_check_params();
    mca_btl_llrdma_fork_setup(cfg); /* before any other verbs call */

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
    if (cfg->ndevices > 0) {
        char why[512] = "";
        create_modules(c, cfg, why, sizeof(why));
        if (0 == c->nmodules) {
            snprintf(cfg->btl_status, sizeof(cfg->btl_status), "disqualified: %s", why);
        } else if (OPAL_SUCCESS != publish_addresses(c)) {
            snprintf(cfg->btl_status, sizeof(cfg->btl_status),
                     "disqualified: modex publish of the addresses failed");
            for (int i = 0; i < c->nmodules; ++i) {
                c->modules[i]->super.btl_finalize(&c->modules[i]->super);
            }
            c->nmodules = 0;
        } else {
            snprintf(cfg->btl_status, sizeof(cfg->btl_status), "active");
            cfg->ndevices = c->nmodules;
            if (mca_btl_llrdma_module_granted(c->modules[0], &cfg->device, why, sizeof(why)) > 0) {
                char detail[768], key[sizeof(cfg->device.name) + 16];
                size_t len = strlen(why);
                while (len > 0 && (' ' == why[len - 1] || ';' == why[len - 1])) {
                    why[--len] = '\0';
                }
                /* Every rank of a node gets the same grant from the same
                 * device: one message per node and device, not per rank. */
                snprintf(detail, sizeof(detail), "device %s:%d granted less than asked: %s",
                         cfg->device.name, cfg->device.port, why);
                snprintf(key, sizeof(key), "%s:%d", cfg->device.name, cfg->device.port);
                if (!llrdma_mca_warn_once("profile not applied", key, detail)) {
                    opal_output_verbose(1, c->output, "btl:llrdma: %s", detail);
                }
            }
        }
    }
    gpu_report(c, cfg);
    publish_modex(cfg);
    llrdma_state_publish(cfg);
    (void)llrdma_mca_dump(c->dump, cfg);
    if (c->nmodules > 0 && NULL != c->dump) {
        dump_at_close = strdup(c->dump); /* NULL (no record) when out of memory */
    }
    opal_output_verbose(10, c->output, "btl:llrdma: size hint %llu from %s; %s",
                        (unsigned long long)cfg->hint.bytes, cfg->hint.origin, cfg->btl_status);
    if (0 == c->nmodules) {
        return NULL; /* Open MPI carries on with its other BTLs */
    }
    /* The BTL base frees the returned array; the component keeps its own. */
    out = malloc((size_t)c->nmodules * sizeof(*out));
    if (NULL == out) {
        return NULL;
    }
    for (int i = 0; i < c->nmodules; ++i) {
        out[i] = &c->modules[i]->super;
    }
    *num_btls = c->nmodules;
    return out;
}
