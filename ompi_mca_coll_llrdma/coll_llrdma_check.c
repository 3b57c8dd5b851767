/*
 * Cross-rank size-hint check.  Every btl/llrdma publishes its hint in the
 * modex during MPI_Init; here, once the exchange is done and MPI_COMM_WORLD
 * is being set up, each rank reads every record (local lookups, no MPI
 * communication) and runs the same pure consensus, so all ranks reach the
 * same verdict.  The lowest rank reports; on "abort" the job ends.
 */
#include "ompi_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "llrdma_ompi_compat.h" /* the PMIx interface of this series */
#include "opal/util/output.h"
#include "opal/util/proc.h"
#include "ompi/communicator/communicator.h"

#include "coll_llrdma.h"
#include "coll_llrdma_netuse.h"
#include "llrdma_mca_common.h"

/* Seconds a non-reporting rank waits for the reporter's abort to end the
 * job before aborting itself (so the report is printed first, and nothing
 * hangs if the reporter died). */
#define LLRDMA_MISMATCH_GRACE_S 5

static int fetch_peer(int rank, llrdma_peer_hint_t *peer)
{
    opal_process_name_t name = OPAL_PROC_MY_NAME;
    char *bytes = NULL;
    size_t size = 0;

    memset(peer, 0, sizeof(*peer));
    peer->rank = rank;
    name.vpid = (opal_vpid_t)rank;
    if (OPAL_SUCCESS != llrdma_modex_get_bytes(&name, LLRDMA_MODEX_KEY, (void **)&bytes, &size)) {
        return 0; /* btl/llrdma not loaded there: nothing to compare */
    }
    if (size > 0 && '\0' == bytes[size - 1] && LLRDMA_OK == llrdma_peer_decode(bytes, peer)) {
        peer->rank = rank;
        peer->present = 1;
    }
    free(bytes);
    return peer->present;
}

void mca_coll_llrdma_check_world(struct ompi_communicator_t *world)
{
    mca_coll_llrdma_component_t *c = &mca_coll_llrdma_component;
    int n = ompi_comm_size(world), me = ompi_comm_rank(world);
    llrdma_peer_hint_t *peers = NULL;
    int *deviants = NULL;
    llrdma_consensus_t cons;
    llrdma_rank_config_t cfg;
    char *report = NULL;
    const size_t report_len = 64 * 1024;
    int reporter = -1;

    /* Record the job size in the published configuration. */
    if (LLRDMA_OK == llrdma_state_get(&cfg)) {
        cfg.size = n;
        cfg.rank = me;
        llrdma_state_publish(&cfg);
    }

    peers = calloc((size_t)n, sizeof(*peers));
    deviants = calloc((size_t)n, sizeof(*deviants));
    if (NULL == peers || NULL == deviants) {
        opal_output(0, "coll:llrdma: out of memory; size-hint check skipped");
        goto out_free;
    }
    for (int r = 0; r < n; ++r) {
        (void)fetch_peer(r, &peers[r]);
        if (peers[r].present && reporter < 0) {
            reporter = r;
        }
    }
    if (LLRDMA_OK != llrdma_consensus(peers, n, &cons, deviants, n) || 0 == cons.ndeviants) {
        opal_output_verbose(10, c->output, "coll:llrdma: size hint agrees on %d of %d ranks",
                            cons.present, n);
        goto out_free;
    }

    report = malloc(report_len);
    if (NULL == report) {
        goto out_free;
    }
    (void)llrdma_consensus_report(peers, n, &cons, deviants, report, report_len);
    if (LLRDMA_MISMATCH_WARN == c->mismatch) {
        if (me == reporter) {
            llrdma_mca_warn("size hint mismatch", report);
        }
        goto out_free;
    }
    if (me == reporter) {
        llrdma_mca_fatal("size hint mismatch", report);
    }
    sleep(LLRDMA_MISMATCH_GRACE_S);
    llrdma_mca_abort("llrdma: size hint mismatch (reported by the lowest rank)");

out_free:
    free(report);
    free(deviants);
    free(peers);
}

/* Every rank whose coll/llrdma can be chosen published its pid in the modex
 * (mca_coll_llrdma_publish_pid).  A rank without the record has no
 * coll/llrdma (--mca coll, another component path, a component that failed
 * to load), and one Allreduce split between coll/llrdma and another
 * component computes garbage, hangs, or hands a device pointer to a module
 * that cannot read it.  Every rank with coll/llrdma reads the same records,
 * so all of them turn it off for the job, or the job ends.  Only after the
 * full modex of MPI_Init (its default): else a missing record proves
 * nothing. */
void mca_coll_llrdma_check_loaded(struct ompi_communicator_t *world)
{
    mca_coll_llrdma_component_t *c = &mca_coll_llrdma_component;
    int n = ompi_comm_size(world), me = ompi_comm_rank(world), lacking = 0, reporter = -1;
    char report[1024];
    size_t used = 0;

    if (!c->published || opal_pmix_base_async_modex || !opal_pmix_collect_all_data) {
        return;
    }
    for (int r = 0; r < n; ++r) {
        if (r != me && !mca_coll_llrdma_world_rank_has_coll(r)) {
            if (0 == lacking++) {
                used = (size_t)snprintf(report, sizeof(report),
                                        "  coll/llrdma is not loaded on rank(s) %d", r);
            } else if (lacking <= 8 && used < sizeof(report)) {
                used += (size_t)snprintf(report + used, sizeof(report) - used, ", %d", r);
            }
        } else if (reporter < 0) {
            reporter = r;
        }
    }
    if (0 == lacking) {
        return;
    }
    if (used < sizeof(report)) {
        (void)snprintf(report + used, sizeof(report) - used, "%s (%d of %d ranks)%s",
                       lacking > 8 ? ", ..." : "", lacking, n,
                       LLRDMA_MISMATCH_WARN == c->mismatch
                           ? "; coll/llrdma is off on every communicator of this job"
                           : "");
    }
    c->off_for_job = 1;
    if (LLRDMA_MISMATCH_WARN == c->mismatch) {
        if (me == reporter) {
            llrdma_mca_warn("coll not on every rank", report);
        }
        return;
    }
    if (me == reporter) {
        llrdma_mca_fatal("coll not on every rank", report);
    }
    sleep(LLRDMA_MISMATCH_GRACE_S);
    llrdma_mca_abort("llrdma: coll/llrdma is not loaded on every rank (reported by the lowest "
                     "rank that has it)");
}

/* btl/llrdma unused although the user set one of its knobs (another PML, or
 * no peer on another node reached): one line per job, from rank 0 of
 * MPI_COMM_WORLD, on what it sees towards a sample of the ranks (the other
 * ranks' views: llrdma-check).  Nothing is looked at when no knob is set. */
void mca_coll_llrdma_check_netuse(struct ompi_communicator_t *world)
{
    mca_coll_llrdma_netuse_facts_t f;
    char msg[1024];
    int v;

    if (0 != ompi_comm_rank(world)) {
        return;
    }
    mca_coll_llrdma_netuse_gather(world, 0, &f);
    if (0 == f.in.knobs) {
        return;
    }
    mca_coll_llrdma_netuse_gather(world, LLRDMA_NETUSE_SAMPLE, &f);
    v = llrdma_netuse_decide(&f.in, msg, sizeof(msg));
    if (0 != llrdma_netuse_warn(v, f.in.knobs)) {
        opal_output(0, "llrdma: %s (rank 0's view; llrdma-check shows every rank's)", msg);
    } else {
        opal_output_verbose(5, mca_coll_llrdma_component.output, "coll:llrdma: %s", msg);
    }
}

void mca_coll_llrdma_bad_knob(const char *name, const char *text, const char *why)
{
    char detail[1024];
    snprintf(detail, sizeof(detail), "%s = '%s': %s", name, text ? text : "(null)", why);
    llrdma_mca_fatal("invalid coll knob", detail);
}

/* coll_llrdma_node_split against this job: a grouping that does not fit
 * MPI_COMM_WORLD stops MPI_Init, naming the knob and its value. */
void mca_coll_llrdma_check_split(struct ompi_communicator_t *world)
{
    mca_coll_llrdma_component_t *c = &mca_coll_llrdma_component;
    char err[256];

    if (c->split_n > 0 && llrdma_ar_node_split_group(c->split_sizes, c->split_n, c->split_repeat,
                                                     ompi_comm_rank(world), ompi_comm_size(world),
                                                     err, sizeof(err)) < 0) {
        mca_coll_llrdma_bad_knob("coll_llrdma_node_split", c->node_split_text, err);
    }
}
