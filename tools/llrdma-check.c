/*
 * llrdma-check: launched like the application (mpirun ... llrdma-check), it
 * shows every rank's effective llrdma configuration and whether the ranks
 * agree on the size hint.  `llrdma-check --stats DUMP...` (no mpirun) shows
 * the message-size histograms a finished job wrote into its dumps.
 *
 * Exit status: 0 all ranks agree, 1 the hint differs, 2 llrdma did not load
 * on some rank, 3 usage or internal error, 4 a btl_llrdma knob is set but
 * btl/llrdma carries no traffic to other nodes (another PML, or no peer
 * reached).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dump_read.h"
#include "llrdma.h"
#include "llrdma_allreduce.h"
#include "llrdma_core.h"
#include "llrdma_hist.h"
#include "bench_ompi.h"
#include "coll_llrdma_netuse.h"

#define CFG_MAX LLRDMA_CONFIG_JSON_MAX

static void usage(FILE *fp)
{
    fprintf(fp, "Usage: mpirun [mpirun options] llrdma-check [--json] [--quiet] [--threads]\n"
                "       llrdma-check --stats DUMP|DIR...\n"
                "\n"
                "Prints every rank's effective llrdma configuration (size hint, its source,\n"
                "the derived transport profile, the device found, the Allreduce segment) and\n"
                "checks that all ranks use the same size hint.  Launch it exactly like the\n"
                "application, with the same mpirun options, environment and parameter files.\n"
                "When they agree it also prints coll/llrdma's Allreduce plan for\n"
                "MPI_COMM_WORLD's node layout (Open MPI's locality, and the test knob\n"
                "coll_llrdma_node_split): the arena's algorithms on one node; across nodes\n"
                "the hierarchical schedule, with the slices and the inter-node algorithm\n"
                "and segment the hint gives, or whether coll/llrdma steps aside.\n"
                "\n"
                "  --json   one JSON object per rank per line (keys include rank, host,\n"
                "           size_hint, source, origin), rank order, then no table\n"
                "  --quiet  print only the verdict line\n"
                "  --threads  initialise with MPI_THREAD_MULTIPLE, as mpi4py and Horovod\n"
                "           do (the thread level is part of what a rank uses)\n"
                "  --help   this text\n"
                "\n"
                "--stats (a plain program, no mpirun): per rank of a finished job, the\n"
                "fragments btl/llrdma sent by payload size and path, and how often a send\n"
                "waited for a send-queue slot or credit, read from the dumps the job wrote\n"
                "with btl_llrdma_dump set to a file pattern (DIR: every *.json in it).\n"
                "Exit 0, or 2 with a message naming the file when a dump cannot be read.\n"
                "llrdma-hint recommend turns the same dumps into a hint.\n"
                "\n"
                "Each rank's \"network:\" line says whether btl/llrdma carries its traffic:\n"
                "another PML than ob1 (pml/ucx, say) drives the network itself and uses no\n"
                "BTL; under ob1 it looks at up to 256 peers, spread over the ranks.\n"
                "\n"
                "Exit status: 0 all ranks agree; 1 the size hint differs between ranks;\n"
                "2 llrdma's components did not load on some rank (is\n"
                "mca_base_component_path set?); 3 usage or internal error; 4 a btl_llrdma\n"
                "knob (the hint, say) is set but btl/llrdma carries no traffic to other\n"
                "nodes on some rank: another PML is selected (run with --mca pml ob1, as\n"
                "llrdma-run does) or btl/llrdma reaches none of the peers on other nodes.\n"
                "llrdma-check sets coll_llrdma_mismatch_action=warn for itself, so a mismatch\n"
                "is reported here instead of aborting MPI_Init.\n");
}

static void unloaded_json(int rank, char *buf, size_t len)
{
    char host[256] = "?";
    (void)gethostname(host, sizeof(host) - 1);
    snprintf(buf, len,
             "{\"rank\":%d,\"host\":\"%s\",\"pid\":%ld,\"size_hint\":null,\"source\":null,"
             "\"loaded\":false}",
             rank, host, (long)getpid());
}

static void print_row(const llrdma_rank_config_t *c)
{
    char hint[32], seg[32], llmax[32];
    llrdma_format_size(c->hint.bytes, hint, sizeof(hint));
    llrdma_format_size(c->profile.coll_segment_bytes, seg, sizeof(seg));
    llrdma_format_size(c->profile.ll.max_bytes, llmax, sizeof(llmax));
    printf("%4d  %-16.16s %7ld  %6s  %-9s  %5s %4u/%-4u %4u  %6s  %-10s %s\n", c->rank, c->host,
           c->pid, hint, llrdma_source_name(c->hint.source), c->profile.generic ? "-" : llmax,
           c->profile.ll.sq_depth, c->profile.bw.sq_depth, c->profile.ll.inline_bytes, seg,
           c->device.name[0] ? c->device.name : "-", c->btl_status);
    printf("      origin: %s\n", c->hint.origin);
    printf("      gpu_rdma: %s\n", c->device.gpu_rdma[0] ? c->device.gpu_rdma : "-");
    /* Which verbs devices this rank uses and why (btl_llrdma_device_policy). */
    if (c->nic_policy[0]) {
        printf("      devices (%s%s%s):%s\n", c->nic_policy, c->nic_near[0] ? ", near " : "",
               c->nic_near, c->nnics > 0 ? "" : " none found");
        for (int i = 0; i < c->nnics; ++i) {
            const llrdma_nic_report_t *n = &c->nics[i];
            char use[32];
            if (n->chosen) {
                snprintf(use, sizeof(use), "used, port %s", n->ports[0] ? n->ports : "-");
            } else {
                snprintf(use, sizeof(use), "not used");
            }
            printf("        %-10s %-7s %-16s %s\n", n->name, n->cls, use, n->reason);
        }
    }
    if (c->device.name[0] && 0 == strcmp(c->btl_status, "active")) {
        /* Requested (the profile) / granted (read back from the device). */
        const char *mod = c->device.cq_moderation_supported > 0    ? "applied"
                          : c->device.cq_moderation_supported == 0 ? "NOT SUPPORTED"
                                                                   : "not requested";
        if (!c->profile.generic) {
            printf("      ll requested/granted: inline %u/%u  sq %u/%u  rq %u/%u\n",
                   c->profile.ll.inline_bytes, c->device.max_inline_granted_ll,
                   c->profile.ll.sq_depth, c->device.sq_depth_granted_ll, c->profile.ll.rq_depth,
                   c->device.rq_depth_granted_ll);
        }
        printf("      bw requested/granted: inline %u/%u  sq %u/%u  rq %u/%u  "
               "cq moderation %u/%uus %s\n",
               c->profile.bw.inline_bytes, c->device.max_inline_granted_bw, c->profile.bw.sq_depth,
               c->device.sq_depth_granted_bw, c->profile.bw.rq_depth, c->device.rq_depth_granted_bw,
               c->profile.bw.cq_mod_count, c->profile.bw.cq_mod_usec, mod);
        /* Progress per path: who finds the completions, and what moderation
         * the event path got (docs/btl-design.md "Threads"). */
        if (!c->profile.generic) {
            printf("      ll progress: %s (no moderation: every completion at once)\n",
                   c->device.progress_ll[0] ? c->device.progress_ll : "poll");
        }
        printf("      bw progress: %s  moderation requested/granted %u/%uus %u/%uus  %s\n",
               c->device.progress_bw[0] ? c->device.progress_bw : "poll",
               c->profile.bw.cq_mod_count, c->profile.bw.cq_mod_usec,
               c->device.cq_mod_count_granted, c->device.cq_mod_usec_granted,
               c->device.progress_note);
        if ('\0' != c->device.post_api[0]) {
            printf("      small sends posted by %s\n", c->device.post_api);
        }
        if (0 != c->device.rdma_limit_granted) {
            char a[32], b[32];
            llrdma_format_size(c->profile.bw.rdma_frag_bytes, a, sizeof(a));
            llrdma_format_size(c->device.rdma_limit_granted, b, sizeof(b));
            printf("      bw RDMA requested/granted: reads outstanding %u/%u  answered %u/%u  "
                   "put/get fragment %s/%s\n",
                   c->profile.bw.rdma_rd_atomic, c->device.rd_atomic_granted,
                   c->profile.bw.rdma_rd_atomic, c->device.dest_rd_atomic_granted, a, b);
        } else {
            printf("      bw RDMA: off (send/receive only)\n");
        }
    }
}

/* A control variable (MPI_T) as text or int; 0 when read. */
static int cvar_read(const char *name, void *out, int cap)
{
    MPI_T_cvar_handle h;
    int idx, count = 0, rc;
    if (MPI_SUCCESS != MPI_T_cvar_get_index(name, &idx) ||
        MPI_SUCCESS != MPI_T_cvar_handle_alloc(idx, NULL, &h, &count)) {
        return -1;
    }
    rc = count <= cap ? MPI_T_cvar_read(h, out) : MPI_ERR_OTHER;
    MPI_T_cvar_handle_free(&h);
    return MPI_SUCCESS == rc ? 0 : -1;
}

/* This rank's node key as coll/llrdma computes it for MPI_COMM_WORLD: the
 * lowest world rank on its node (MPI_COMM_TYPE_SHARED, i.e. Open MPI's
 * locality), split further by the test knob coll_llrdma_node_split. */
static int node_key(int rank, int size)
{
    MPI_Comm node;
    int low = rank, sizes[1024], n = 0, rep = 0, group;
    char text[4096] = "";
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Allreduce(&rank, &low, 1, MPI_INT, MPI_MIN, node);
    MPI_Comm_free(&node);
    if (0 == cvar_read("coll_llrdma_node_split", text, (int)sizeof(text)) && '\0' != text[0] &&
        LLRDMA_AR_OK == llrdma_ar_node_split_parse(text, sizes, 1024, &n, &rep, NULL, 0) &&
        (group = llrdma_ar_node_split_group(sizes, n, rep, rank, size, NULL, 0)) >= 0) {
        return group * size + low;
    }
    return low;
}

/* 1 when coll/han would sit below coll/llrdma (enabled, lower priority). */
static int han_below(void)
{
    int han = 0, llrdma = 40;
    if (0 != cvar_read("coll_han_priority", &han, 1)) {
        return 0;
    }
    (void)cvar_read("coll_llrdma_priority", &llrdma, 1);
    return han > 0 && han < llrdma;
}

/* Which way a CUDA device vector of each size goes (llrdma_ar_dev_path, the
 * rule coll/llrdma applies per call); whether the GPUs reach each other is
 * only known at run time, so the peer path is shown with its fallback. */
static void print_device_plan(const llrdma_rank_config_t *c, int hier, size_t chunk, int nranks,
                              const size_t *sizes, size_t nsizes)
{
    static const char *peer_mode[] = {"off", "auto", "force"};
    llrdma_ar_dev_rule_t r = {.hier = hier,
                              .arena = chunk > 0,
                              .gpu_peer = c->coll_gpu_peer,
                              .peer_min = c->coll_gpu_peer_min,
                              .stage_auto = c->coll_gpu_stage_auto,
                              .stage_max = c->coll_gpu_stage_max};
    char sz[32], min[32], stage[32];

    llrdma_format_size(r.peer_min, min, sizeof(min));
    llrdma_format_size(llrdma_ar_dev_stage_max(&r), stage, sizeof(stage));
    if (hier) {
        /* Per rank: this rank's btl/llrdma registers GPU memory or not; the
         * put transport is chosen per call (coll_llrdma_internode_transport). */
        printf("  CUDA device vectors: %s where a call's inter-node step goes by btl/llrdma RDMA "
               "(this rank registers GPU memory: %s), else %s\n",
               llrdma_ar_dev_path_name(LLRDMA_AR_DEV_DIRECT),
               c->device.gpu_rdma[0] ? c->device.gpu_rdma : "-",
               llrdma_ar_dev_path_name(LLRDMA_AR_DEV_WHOLE));
        if (!c->gpu_rdma_every) {
            printf("  (not every btl/llrdma module of this rank registers GPU memory: %s at "
                   "every size)\n",
                   llrdma_ar_dev_path_name(LLRDMA_AR_DEV_WHOLE));
        }
        return;
    }
    printf("\n  CUDA device vectors (coll_llrdma_gpu_peer %s from %s, gpu_stage_max %s%s):\n",
           peer_mode[c->coll_gpu_peer >= 0 && c->coll_gpu_peer <= 2 ? c->coll_gpu_peer : 0], min,
           c->coll_gpu_stage_auto ? "auto = " : "", stage);
    printf("%10s  %-9s  %s\n", "bytes", "path", "rule");
    for (size_t i = 0; i < nsizes; ++i) {
        llrdma_ar_plan_t plan;
        const char *why, *why0;
        int path, path0;
        r.shm_plan = chunk > 0 &&
                     LLRDMA_AR_OK == llrdma_ar_plan_shm(sizes[i], 8, nranks, c->coll_hint, 0, chunk,
                                                        c->coll_algorithm,
                                                        (size_t)c->coll_segment_knob, &plan) &&
                     (LLRDMA_AR_SHM_DIRECT == plan.alg || LLRDMA_AR_SHM_SPLIT == plan.alg);
        path = llrdma_ar_dev_path(sizes[i], &r, 1, 0, &why);
        llrdma_format_size(sizes[i], sz, sizeof(sz));
        if (LLRDMA_AR_DEV_PEER != path) {
            printf("%10s  %-9s  %s\n", sz, llrdma_ar_dev_path_name(path), why);
            continue;
        }
        path0 = llrdma_ar_dev_path(sizes[i], &r, 0, 0, &why0);
        (void)why0;
        printf("%10s  %-9s  %s (without peer access: %s)\n", sz, llrdma_ar_dev_path_name(path), why,
               llrdma_ar_dev_path_name(path0));
    }
    if (r.stage_auto) {
        printf("  (ranks sharing a GPU copy whole at every size: gpu_stage_max auto)\n");
    }
}

/* The coll/llrdma planner's choice per message size for MPI_COMM_WORLD, from
 * rank 0's coll settings (all ranks agree when the hint check passed) and
 * the job's node layout (keys: every rank's node key).  On one node
 * coll/llrdma reduces through its shared-memory arena (unless coll_llrdma_shm
 * is 0), whose chunk this computes as coll does; across nodes it runs the
 * hierarchical schedule, whose inter-node step follows the hint. */
static void print_plan(const llrdma_rank_config_t *c, int nranks, const int *keys)
{
    static const size_t sizes[] = {8,          256,         4096,         32768,
                                   256 * 1024, 2 * 1048576, 16 * 1048576, 64 * 1048576};
    char hint[32], sz[32], seg[32], shape[256] = "";
    size_t chunk = 0, used = 0;
    llrdma_ar_topo_t topo;
    llrdma_ar_hier_t me;
    int *peers = calloc((size_t)nranks, sizeof(int)), *count = calloc((size_t)nranks, sizeof(int));
    const char *why = "";
    int mode;

    if (NULL == peers || NULL == count ||
        LLRDMA_AR_OK != llrdma_ar_layout(nranks, keys, 0, &topo, &me, peers, nranks)) {
        printf("\ncoll/llrdma Allreduce plan: (layout not available)\n");
        free(peers);
        free(count);
        return;
    }
    for (int r = 0; r < nranks; ++r) { /* ranks per node, nodes in order of their first rank */
        llrdma_ar_hier_t h;
        llrdma_ar_topo_t t;
        llrdma_ar_layout(nranks, keys, r, &t, &h, peers, nranks);
        count[h.node]++;
    }
    for (int k = 0; k < topo.nnodes && used + 16 < sizeof(shape); ++k) {
        used +=
            (size_t)snprintf(shape + used, sizeof(shape) - used, "%s%d", k ? "+" : "", count[k]);
    }
    /* coll/han steps aside itself on a communicator with no remote peers,
     * whatever its priority: below coll/llrdma only across real nodes (keys
     * are group * nranks + the lowest world rank of the real node). */
    int real_nodes = 0;
    for (int r = 0; r < nranks; ++r) {
        real_nodes += keys[r] % nranks == r;
    }
    topo.arenas = c->coll_shm;
    topo.below_hier = real_nodes > 1 && han_below();
    mode = llrdma_ar_mode(&topo, &why);
    if (1 == topo.nnodes && c->coll_shm && nranks > 1) {
        long l2 = -1;
#ifdef _SC_LEVEL2_CACHE_SIZE
        l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
        chunk = c->coll_shm_chunk_knob
                    ? (size_t)c->coll_shm_chunk_knob
                    : llrdma_ar_shm_default_chunk(nranks, l2 > 0 ? (size_t)l2 : 0);
    }
    llrdma_format_size(c->coll_hint, hint, sizeof(hint));
    printf("\ncoll/llrdma Allreduce plan for %d ranks on %d node%s (%s), MPI_DOUBLE, coll hint "
           "%s%s%s:\n",
           nranks, topo.nnodes, topo.nnodes > 1 ? "s" : "", shape, hint,
           c->coll_algorithm ? " (algorithm forced)" : "",
           chunk ? ", shared-memory arena (all ranks on one node)" : "");
    printf("  %s: %s\n",
           LLRDMA_AR_MODE_HIER == mode      ? "hierarchical"
           : LLRDMA_AR_MODE_DECLINE == mode ? "coll/llrdma steps aside (the module below serves "
                                              "the Allreduce)"
                                            : "flat",
           why);
    if (LLRDMA_AR_MODE_DECLINE == mode) {
        free(peers);
        free(count);
        return;
    }
    if (LLRDMA_AR_MODE_HIER == mode) {
        int net = 0; /* coll_llrdma_internode_transport: 0 auto, 1 pml, 2 btl */
        (void)cvar_read("coll_llrdma_internode_transport", &net, 1);
        printf("  inter-node messages (coll_llrdma_internode_transport %s): %s\n",
               1 == net   ? "pml"
               : 2 == net ? "btl"
                          : "auto",
               1 == net ? "through the PML"
                        : "btl/llrdma RDMA writes if every rank reaches its inter-node peers "
                          "through btl/llrdma RDMA, else the PML (coll_llrdma_verbose 10 says "
                          "which)");
        printf("%10s  %6s  %-19s %9s %9s  %s\n", "bytes", "slices", "inter-node", "segment",
               "in-flight", "rule of the inter-node step");
    } else {
        printf("%10s  %-19s %9s %9s  %s\n", "bytes", "algorithm", "segment", "in-flight", "rule");
    }
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
        llrdma_ar_plan_t plan;
        int shown, rc;
        llrdma_format_size(sizes[i], sz, sizeof(sz));
        rc = LLRDMA_AR_MODE_HIER == mode
                 ? llrdma_ar_plan_hier(sizes[i], 8, &topo, c->coll_hint, 0, c->coll_algorithm,
                                       (size_t)c->coll_segment_knob, &plan)
                 : llrdma_ar_plan_shm(sizes[i], 8, nranks, c->coll_hint, 0, chunk,
                                      c->coll_algorithm, (size_t)c->coll_segment_knob, &plan);
        if (LLRDMA_AR_OK != rc) {
            printf("%10s  (planner rejected)\n", sz);
            continue;
        }
        llrdma_format_size(plan.segment_bytes, seg, sizeof(seg));
        if (LLRDMA_AR_MODE_HIER == mode) {
            shown = LLRDMA_AR_RING == plan.inter_alg;
            printf("%10s  %6d  %-19s %9s %9d  %s\n", sz, plan.slices,
                   llrdma_ar_alg_name(plan.inter_alg), shown ? seg : "-",
                   shown ? plan.nsegments_in_flight : 1, plan.inter_why);
            continue;
        }
        /* The segment means something for the ring (message size) and the
         * arena (round size). */
        shown = LLRDMA_AR_RING == plan.alg || LLRDMA_AR_SHM_DIRECT == plan.alg ||
                LLRDMA_AR_SHM_SPLIT == plan.alg;
        printf("%10s  %-19s %9s %9d  %s\n", sz, llrdma_ar_alg_name(plan.alg), shown ? seg : "-",
               LLRDMA_AR_RING == plan.alg ? plan.nsegments_in_flight : 1, plan.why);
    }
    print_device_plan(c, LLRDMA_AR_MODE_HIER == mode, chunk, nranks, sizes,
                      sizeof(sizes) / sizeof(sizes[0]));
    free(peers);
    free(count);
}

static uint64_t path_sum(const uint64_t *v)
{
    uint64_t s = 0;
    for (unsigned b = 0; b < LLRDMA_HIST_BUCKETS; ++b) {
        s += v[b];
    }
    return s;
}

static int cmp_rank(const void *a, const void *b)
{
    int x = ((const llrdma_rank_stats_t *)a)->rank, y = ((const llrdma_rank_stats_t *)b)->rank;
    return (x > y) - (x < y);
}

/* Offline: the histograms of a finished job's dumps, rank by rank. */
static int show_stats(int argc, char **argv)
{
    static const char *const names[LLRDMA_HIST_NPATHS] = {"ll", "bw", "rdma"};
    llrdma_dumpset_t set;
    int rc = 0;

    memset(&set, 0, sizeof(set));
    if (0 == argc) {
        fprintf(stderr, "llrdma-check: --stats: give the dump files or their directory\n");
        return 3;
    }
    for (int i = 0; i < argc && 0 == rc; ++i) {
        rc = llrdma_dumpset_read("llrdma-check", argv[i], &set);
    }
    if (0 != rc || 0 != llrdma_dumpset_check("llrdma-check", &set)) {
        llrdma_dumpset_free(&set);
        return 2;
    }
    qsort(set.ranks, (size_t)set.n, sizeof(set.ranks[0]), cmp_rank);
    for (int i = 0; i < set.n; ++i) {
        const llrdma_rank_stats_t *r = &set.ranks[i];
        char hint[32];
        llrdma_format_size(r->hint, hint, sizeof(hint));
        printf("rank %d on %s (pid %ld, hint %s):", r->rank, r->host, r->pid, hint);
        for (int p = 0; p < LLRDMA_HIST_NPATHS; ++p) {
            printf(" %s %llu fragments %llu bytes %llu waits%s", names[p],
                   (unsigned long long)path_sum(r->hist.count[p]),
                   (unsigned long long)path_sum(r->hist.bytes[p]),
                   (unsigned long long)r->hist.waits[p], p + 1 < LLRDMA_HIST_NPATHS ? ";" : "\n");
        }
        for (int p = 0; p < 2; ++p) {
            uint64_t n = r->hist.cq_completions[p], e = r->hist.cq_events[p];
            printf("  %s cq: %llu completions, %llu events", names[p], (unsigned long long)n,
                   (unsigned long long)e);
            if (0 != n && 0 != e) {
                printf(" (%.3f events per completion)", (double)e / (double)n);
            }
            if (0 != r->hist.thread_completions[p]) {
                printf(", %llu of them by the progress thread",
                       (unsigned long long)r->hist.thread_completions[p]);
            }
            printf("%s", 0 == p ? ";" : "\n");
        }
        if (0 != r->hist.thread_cpu_us) {
            printf("  progress thread CPU time: %.3f s\n", 1e-6 * (double)r->hist.thread_cpu_us);
        }
        printf("  %-18s %12s %12s %12s\n", "payload", "ll", "bw", "rdma");
        for (unsigned b = 0; b < LLRDMA_HIST_BUCKETS; ++b) {
            char lo[32], hi[32], range[80];
            if (0 == r->hist.count[0][b] + r->hist.count[1][b] + r->hist.count[2][b]) {
                continue;
            }
            if (0 == b) {
                snprintf(range, sizeof(range), "0..1 B");
            } else {
                llrdma_format_size(llrdma_hist_bucket_max(b - 1), lo, sizeof(lo));
                llrdma_format_size(llrdma_hist_bucket_max(b), hi, sizeof(hi));
                snprintf(range, sizeof(range), b + 1 < LLRDMA_HIST_BUCKETS ? "(%s, %s]" : "> %s",
                         lo, hi);
            }
            printf("  %-18s %12llu %12llu %12llu\n", range, (unsigned long long)r->hist.count[0][b],
                   (unsigned long long)r->hist.count[1][b],
                   (unsigned long long)r->hist.count[2][b]);
        }
    }
    llrdma_dumpset_free(&set);
    return 0;
}

/* One line per rank: "pml=ob1 btl eager=llrdma send=llrdma rdma=llrdma". */
#define TRANSPORT_MAX 192
/* Per rank: whether btl/llrdma carries its traffic (llrdma_netuse_decide). */
#define NETUSE_MAX 512
#define NETUSE_PEERS 256

int main(int argc, char **argv)
{
    int json = 0, quiet = 0, threads = 0, rank, size, rc = 0, len, key, provided;
    char *mine, *all = NULL;
    int *lens = NULL, *displs = NULL, *keys = NULL;
    char tr[TRANSPORT_MAX], *trs = NULL, nu[NETUSE_MAX], *nus = NULL;
    int *nuv = NULL;

    if (argc >= 2 && 0 == strcmp(argv[1], "--stats")) {
        return show_stats(argc - 2, argv + 2);
    }
    for (int i = 1; i < argc; ++i) {
        if (0 == strcmp(argv[i], "--json")) {
            json = 1;
        } else if (0 == strcmp(argv[i], "--quiet")) {
            quiet = 1;
        } else if (0 == strcmp(argv[i], "--threads")) {
            threads = 1;
        } else if (0 == strcmp(argv[i], "--help") || 0 == strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "llrdma-check: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return 3;
        }
    }
    /* Report a mismatch here rather than abort in MPI_Init. */
    setenv("OMPI_MCA_coll_llrdma_mismatch_action", "warn", 1);

    if (threads) {
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    } else {
        MPI_Init(&argc, &argv);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (threads && 0 == rank) {
        printf("thread level: %s\n", MPI_THREAD_MULTIPLE == provided ? "MPI_THREAD_MULTIPLE"
                                                                     : "below MPI_THREAD_MULTIPLE");
    }
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* The node layout of MPI_COMM_WORLD, as coll/llrdma sees it. */
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    key = node_key(rank, size);
    if (0 == rank && NULL == (keys = malloc(sizeof(int) * (size_t)size))) {
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    MPI_Gather(&key, 1, MPI_INT, keys, 1, MPI_INT, 0, MPI_COMM_WORLD);

    {
        /* The transport ob1 picked towards the next rank, once a message
         * went there (which makes the BML endpoint). */
        int next = (rank + 1) % size, prev = (rank + size - 1) % size;
        char out = 1, in = 0;
        MPI_Sendrecv(&out, 1, MPI_CHAR, next, 7, &in, 1, MPI_CHAR, prev, 7, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        memset(tr, 0, sizeof(tr));
        bench_peer_transport(MPI_COMM_WORLD, next, tr, sizeof(tr));
        if (0 == rank && NULL == (trs = calloc((size_t)size, TRANSPORT_MAX))) {
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        MPI_Gather(tr, TRANSPORT_MAX, MPI_CHAR, trs, TRANSPORT_MAX, MPI_CHAR, 0, MPI_COMM_WORLD);
    }

    {
        /* After the Sendrecv above, as an application would be by then. */
        mca_coll_llrdma_netuse_facts_t f;
        int mine_v[2];
        mca_coll_llrdma_netuse_gather(MPI_COMM_WORLD, NETUSE_PEERS, &f);
        memset(nu, 0, sizeof(nu));
        mine_v[0] = llrdma_netuse_decide(&f.in, nu, sizeof(nu));
        mine_v[1] = llrdma_netuse_warn(mine_v[0], f.in.knobs);
        if (0 == rank && (NULL == (nus = calloc((size_t)size, NETUSE_MAX)) ||
                          NULL == (nuv = calloc((size_t)size, 2 * sizeof(int))))) {
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        MPI_Gather(mine_v, 2, MPI_INT, nuv, 2, MPI_INT, 0, MPI_COMM_WORLD);
        MPI_Gather(nu, NETUSE_MAX, MPI_CHAR, nus, NETUSE_MAX, MPI_CHAR, 0, MPI_COMM_WORLD);
    }

    mine = malloc(CFG_MAX);
    if (NULL == mine) {
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    if (LLRDMA_SUCCESS != llrdma_effective_config_json(mine, CFG_MAX)) {
        unloaded_json(rank, mine, CFG_MAX);
    }
    len = (int)strlen(mine) + 1;
    if (0 == rank) {
        lens = malloc(sizeof(int) * (size_t)size);
        displs = malloc(sizeof(int) * (size_t)size);
        if (NULL == lens || NULL == displs) {
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    }
    MPI_Gather(&len, 1, MPI_INT, lens, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (0 == rank) {
        int total = 0;
        for (int r = 0; r < size; ++r) {
            displs[r] = total;
            total += lens[r];
        }
        all = malloc((size_t)total);
        if (NULL == all) {
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    }
    MPI_Gatherv(mine, len, MPI_CHAR, all, lens, displs, MPI_CHAR, 0, MPI_COMM_WORLD);

    if (0 == rank) {
        llrdma_rank_config_t *cfgs = calloc((size_t)size, sizeof(*cfgs));
        llrdma_peer_hint_t *peers = calloc((size_t)size, sizeof(*peers));
        int *dev = calloc((size_t)size, sizeof(int));
        int unloaded = 0;
        llrdma_consensus_t cons;

        if (NULL == cfgs || NULL == peers || NULL == dev) {
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        if (!json && !quiet) {
            printf("rank  host                 pid    hint  source     ll<= sq ll/bw inl  "
                   "coll-seg device     btl\n");
        }
        for (int r = 0; r < size; ++r) {
            const char *s = all + displs[r];
            if (json) {
                printf("%s\n", s);
            }
            if (LLRDMA_OK != llrdma_config_from_json(s, &cfgs[r]) ||
                NULL != strstr(s, "\"loaded\":false")) {
                ++unloaded;
                if (!json) {
                    fprintf(stderr, "llrdma-check: rank %d: llrdma did not load (%s)\n", r, s);
                }
                continue;
            }
            peers[r].rank = r;
            peers[r].present = 1;
            peers[r].bytes = cfgs[r].hint.bytes;
            snprintf(peers[r].host, sizeof(peers[r].host), "%s", cfgs[r].host);
            snprintf(peers[r].origin, sizeof(peers[r].origin), "%s", cfgs[r].hint.origin);
            if (!json && !quiet) {
                print_row(&cfgs[r]);
                printf("      to rank %d: %.*s\n", (r + 1) % size, TRANSPORT_MAX - 1,
                       trs + (size_t)r * TRANSPORT_MAX);
                printf("      network: %.*s\n", NETUSE_MAX - 1, nus + (size_t)r * NETUSE_MAX);
            }
        }
        llrdma_consensus(peers, size, &cons, dev, size);
        if (unloaded > 0) {
            fprintf(stderr,
                    "llrdma-check: llrdma did not load on %d of %d ranks: set "
                    "mca_base_component_path (see README) or install into Open MPI's "
                    "component directory\n",
                    unloaded, size);
            rc = 2;
        } else if (cons.ndeviants > 0) {
            char *report = malloc(65536);
            if (NULL != report) {
                llrdma_consensus_report(peers, size, &cons, dev, report, 65536);
                fprintf(json ? stderr : stdout, "%s\n", report);
                free(report);
            }
            rc = 1;
        } else if (!json) {
            char hint[32];
            if (!quiet) {
                print_plan(&cfgs[0], size, keys);
            }
            llrdma_format_size(cons.majority_bytes, hint, sizeof(hint));
            printf("llrdma-check: all %d ranks agree: size hint %s (%llu bytes)\n", size, hint,
                   (unsigned long long)cons.majority_bytes);
        }
        if (0 == rc) {
            /* The hint agreed, but does btl/llrdma carry anything? */
            int unused = 0, partial = 0, first = -1, first_partial = -1;
            for (int r = 0; r < size; ++r) {
                if (1 == nuv[2 * r + 1] && unused++ == 0) {
                    first = r;
                } else if (2 == nuv[2 * r + 1] && partial++ == 0) {
                    first_partial = r;
                }
            }
            fflush(stdout);
            if (unused > 0) {
                fprintf(stderr,
                        "llrdma-check: btl/llrdma carries no traffic to other nodes on %d of %d "
                        "ranks although a btl_llrdma knob is set; rank %d: %.*s\n",
                        unused, size, first, NETUSE_MAX - 1, nus + (size_t)first * NETUSE_MAX);
                rc = 4;
            } else if (partial > 0) {
                fprintf(stderr, "llrdma-check: note: on %d of %d ranks %.*s (rank %d)\n", partial,
                        size, NETUSE_MAX - 1, nus + (size_t)first_partial * NETUSE_MAX,
                        first_partial);
            }
        }
        fflush(stdout);
        free(nus);
        free(nuv);
        free(dev);
        free(peers);
        free(cfgs);
        free(all);
        free(trs);
        free(displs);
        free(lens);
        free(keys);
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_T_finalize();
    free(mine);
    MPI_Finalize();
    return rc;
}
