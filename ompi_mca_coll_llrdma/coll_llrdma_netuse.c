/*
 * What Open MPI chose for this rank's point-to-point traffic, for
 * llrdma_netuse_decide (llrdma_core/netuse.cc): the PML, which BTLs reach a
 * sample of the peers, which btl_llrdma_* knobs the user set.  Compiled into
 * coll/llrdma (its one line per job, at MPI_Init) and into llrdma-check (its
 * per-rank report), so both say the same.
 */
#include "ompi_config.h"

#include <stdio.h>
#include <string.h>

#include "ompi/communicator/communicator.h"
#include "ompi/mca/bml/base/base.h"
#include "ompi/mca/bml/bml.h"
#include "ompi/mca/pml/base/base.h"
#include "ompi/proc/proc.h"
#include "opal/mca/base/mca_base_var.h"

#include "coll_llrdma_netuse.h"
#include "llrdma_core.h"

extern char **environ;

static const char *source_name(mca_base_var_source_t s)
{
    switch (s) {
    case MCA_BASE_VAR_SOURCE_COMMAND_LINE:
        return "command line";
    case MCA_BASE_VAR_SOURCE_ENV:
        return "environment";
    case MCA_BASE_VAR_SOURCE_FILE:
        return "parameter file";
    case MCA_BASE_VAR_SOURCE_SET:
        return "set by the program";
    case MCA_BASE_VAR_SOURCE_OVERRIDE:
        return "override";
    default:
        return "default";
    }
}

/* btl_llrdma_* variables not at their default (synonyms not counted twice).
 * A BTL that disqualified itself was unloaded and its variables with it:
 * then the OMPI_MCA_btl_llrdma_* environment (mpirun --mca sets it) is what
 * is left to read. */
static int count_knobs(const llrdma_rank_config_t *cfg, int have_cfg, char *first, size_t len)
{
    static const char prefix[] = "btl_llrdma_", env_prefix[] = "OMPI_MCA_btl_llrdma_";
    int n = 0, count = mca_base_var_get_count();

    first[0] = '\0';
    for (int i = 0; i < count; ++i) {
        const mca_base_var_t *v = NULL;
        if (OPAL_SUCCESS != mca_base_var_get(i, &v) || NULL == v || NULL == v->mbv_full_name ||
            0 != strncmp(v->mbv_full_name, prefix, sizeof(prefix) - 1) ||
            MCA_BASE_VAR_SOURCE_DEFAULT == v->mbv_source || v->mbv_synonym_for >= 0) {
            continue;
        }
        if (0 == n++) {
            if (have_cfg && 0 == strcmp(v->mbv_full_name, "btl_llrdma_size_hint") &&
                '\0' != cfg->hint.text[0]) {
                snprintf(first, len, "%s=%s (%s)", v->mbv_full_name, cfg->hint.text,
                         source_name(v->mbv_source));
            } else {
                snprintf(first, len, "%s (%s)", v->mbv_full_name, source_name(v->mbv_source));
            }
        }
    }
    if (0 == n) {
        for (char **e = environ; NULL != e && NULL != *e; ++e) {
            if (0 == strncmp(*e, env_prefix, sizeof(env_prefix) - 1) && 0 == n++) {
                snprintf(first, len, "%.*s (environment)", (int)strcspn(*e, "="),
                         *e + strlen("OMPI_MCA_"));
            }
        }
    }
    /* A hint that no btl_llrdma variable carries (llrdma_set_size_hint, the
     * RDMA_LOW_LATENCY_HINT alias) was asked of btl/llrdma all the same. */
    if (have_cfg && (LLRDMA_SRC_API == cfg->hint.source || LLRDMA_SRC_ALIAS == cfg->hint.source) &&
        0 == n++) {
        snprintf(first, len, "size hint %s from %.96s", cfg->hint.text, cfg->hint.origin);
    }
    return n;
}

static int uses_llrdma(mca_bml_base_btl_array_t *arr)
{
    size_t n = mca_bml_base_btl_array_get_size(arr);
    for (size_t i = 0; i < n; ++i) {
        mca_bml_base_btl_t *b = mca_bml_base_btl_array_get_index(arr, i);
        if (NULL != b && NULL != b->btl && NULL != b->btl->btl_component &&
            0 == strcmp(b->btl->btl_component->btl_version.mca_component_name, "llrdma")) {
            return 1;
        }
    }
    return 0;
}

static void send_btls(mca_bml_base_btl_array_t *arr, char *buf, size_t len)
{
    size_t n = mca_bml_base_btl_array_get_size(arr), used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && used < len; ++i) {
        mca_bml_base_btl_t *b = mca_bml_base_btl_array_get_index(arr, i);
        if (NULL != b && NULL != b->btl && NULL != b->btl->btl_component) {
            used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? "," : "",
                                     b->btl->btl_component->btl_version.mca_component_name);
        }
    }
}

void mca_coll_llrdma_netuse_gather(struct ompi_communicator_t *comm, int max_peers,
                                   mca_coll_llrdma_netuse_facts_t *f)
{
    llrdma_rank_config_t cfg;
    int have_cfg = LLRDMA_OK == llrdma_state_get(&cfg);
    int n = ompi_comm_size(comm), me = ompi_comm_rank(comm), step, looked = 0;

    memset(f, 0, sizeof(*f));
    snprintf(f->pml, sizeof(f->pml), "%s",
             mca_pml_base_selected_component.pmlm_version.mca_component_name);
    f->in.pml = f->pml;
    f->in.knobs = count_knobs(&cfg, have_cfg, f->knob, sizeof(f->knob));
    f->in.knob = f->knob;
    if (have_cfg) {
        snprintf(f->status, sizeof(f->status), "%s", cfg.btl_status);
        f->in.btl_status = f->status;
    }
    f->in.instead = f->instead;
    if (0 != strcmp(f->pml, "ob1") || max_peers <= 0) {
        return; /* another PML has no BML: it drives the network itself */
    }
    /* A sample spread over the ranks (mpirun fills a node before the next),
     * so a large job does not make every endpoint here. */
    step = max_peers > 0 && n - 1 > max_peers ? (n - 1 + max_peers - 1) / max_peers : 1;
    for (int k = 1; k < n && looked < max_peers; k += step, ++looked) {
        int peer = (me + k) % n, local, reached;
        ompi_proc_t *proc = ompi_comm_peer_lookup(comm, peer);
        mca_bml_base_endpoint_t *ep = NULL != proc ? mca_bml_base_get_endpoint(proc) : NULL;
        if (NULL == proc) {
            continue;
        }
        local = OPAL_PROC_ON_LOCAL_NODE(proc->super.proc_flags) ? 1 : 0;
        reached = NULL != ep && (uses_llrdma(&ep->btl_eager) || uses_llrdma(&ep->btl_send) ||
                                 uses_llrdma(&ep->btl_rdma));
        if (local) {
            f->in.local_peers++;
            f->in.local_llrdma += reached;
        } else {
            f->in.remote_peers++;
            f->in.remote_llrdma += reached;
            if (!reached && '\0' == f->instead[0] && NULL != ep) {
                send_btls(&ep->btl_send, f->instead, sizeof(f->instead));
            }
        }
    }
}
