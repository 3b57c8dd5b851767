/*
 * coll/llrdma component: variables, and the hint as coll sees it.
 *
 * One value drives both components: when btl/llrdma initialised in this
 * process (it runs before coll selection), coll takes the hint it fixed.
 * When the BTL is excluded, coll resolves the hint itself from the
 * environment (OMPI_MCA_btl_llrdma_size_hint, RDMA_LOW_LATENCY_HINT; MCA
 * parameter files are read only for registered variables).  The
 * coll_llrdma_size_hint knob overrides both for coll alone.
 */
#include "ompi_config.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opal/mca/base/mca_base_var.h"
#include "opal/util/output.h"
#include "opal/util/proc.h"
#include "ompi/communicator/communicator.h"
#include "ompi/constants.h"

#include "coll_llrdma.h"
#include "llrdma_allreduce.h"
#include "llrdma_mca_common.h"

static int llrdma_register(void);
static int llrdma_open(void);
static int llrdma_close(void);

mca_coll_llrdma_component_t mca_coll_llrdma_component = {
    .super =
        {
            .collm_version =
                {
                    LLRDMA_COLL_BASE_VERSION,
                    .mca_component_name = "llrdma",
                    MCA_BASE_MAKE_VERSION(component, OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION,
                                          OMPI_RELEASE_VERSION),
                    .mca_open_component = llrdma_open,
                    .mca_close_component = llrdma_close,
                    .mca_register_component_params = llrdma_register,
                },
            .collm_data = {MCA_BASE_METADATA_PARAM_CHECKPOINT},
            .collm_init_query = mca_coll_llrdma_init_query,
            .collm_comm_query = mca_coll_llrdma_comm_query,
        },
    .size_hint_index = -1,
    .output = -1,
};

static int reg(const char *name, const char *help, mca_base_var_type_t type, int level,
               void *storage)
{
    return mca_base_component_var_register(&mca_coll_llrdma_component.super.collm_version, name,
                                           help, type, NULL, 0, 0, level,
                                           MCA_BASE_VAR_SCOPE_READONLY, storage);
}

/* An integer knob with named values (ompi_info and MPI_T list them).  Open
 * MPI refuses a value outside them at registration (and says so); the
 * negative index is turned into a fatal error at init_query. */
static int reg_enum(const char *name, const char *help, const mca_base_var_enum_value_t *values,
                    int level, int *storage)
{
    mca_base_var_enum_t *e = NULL;
    char ename[64];
    int rc;
    snprintf(ename, sizeof(ename), "coll_llrdma_%s", name);
    if (OPAL_SUCCESS != mca_base_var_enum_create(ename, values, &e)) {
        return OPAL_ERROR;
    }
    rc = mca_base_component_var_register(&mca_coll_llrdma_component.super.collm_version, name, help,
                                         MCA_BASE_VAR_TYPE_INT, e, 0, 0, level,
                                         MCA_BASE_VAR_SCOPE_READONLY, storage);
    OBJ_RELEASE(e);
    return rc;
}

static int llrdma_register(void)
{
    mca_coll_llrdma_component_t *c = &mca_coll_llrdma_component;

    /* Above coll/tuned (30) and han (35 when enabled): llrdma handles the
     * Allreduces it is good at and hands the rest to them. */
    c->priority = 40;
    (void)reg("priority", "Priority of coll/llrdma", MCA_BASE_VAR_TYPE_INT, OPAL_INFO_LVL_6,
              &c->priority);
    c->verbose = 0;
    (void)reg("verbose",
              "Verbosity of coll/llrdma (5: once per communicator: how it is served "
              "(flat, hierarchical, stepping aside), the inter-node transport, a hand-over "
              "to the module below, and per arena the NUMA node of each rank and of its "
              "pages; 10: also the algorithm choice or fallback of every call)",
              MCA_BASE_VAR_TYPE_INT, OPAL_INFO_LVL_5, &c->verbose);
    c->size_hint = "";
    c->size_hint_index =
        reg("size_hint",
            "Size hint for coll/llrdma only, overriding btl_llrdma_size_hint (empty = use "
            "btl_llrdma_size_hint); same syntax",
            MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_4, &c->size_hint);
    {
        mca_base_var_enum_value_t algs[LLRDMA_AR_NKNOB + 1];
        for (int i = 0; i < LLRDMA_AR_NKNOB; ++i) {
            algs[i].value = i;
            algs[i].string = llrdma_ar_alg_name(i);
        }
        algs[LLRDMA_AR_NKNOB].value = 0;
        algs[LLRDMA_AR_NKNOB].string = NULL;
        c->algorithm = LLRDMA_AR_AUTO;
        c->algorithm_index =
            reg_enum("allreduce_algorithm",
                     "Allreduce algorithm: auto (planner, from size and hint) or one of the "
                     "others (the shm_* ones only where the arena exists, see coll_llrdma_shm; "
                     "auto elsewhere). On communicators spanning nodes a message algorithm "
                     "forces the inter-node step of the hierarchical schedule",
                     algs, OPAL_INFO_LVL_5, &c->algorithm);
    }
    c->segment_text = "0";
    (void)reg("allreduce_segment_size",
              "Allreduce pipeline segment in bytes (same size syntax as the hint; 0 = from "
              "the hint)",
              MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_5, &c->segment_text);
    c->gpu_stage_text = "auto";
    (void)reg("gpu_stage_max",
              "Device-buffer Allreduces up to this many bytes copy the whole vector to the "
              "host, reduce there with coll/llrdma's host algorithm and copy the result back "
              "(ranks sharing a GPU pay a context switch per GPU operation, so few large "
              "copies beat per-segment staging at small sizes); larger ones reduce on the GPU "
              "segment by segment. 0 = always reduce on the GPU; auto = 16K where the "
              "communicator has a shared-memory arena (and every size on a GPU another rank of "
              "the communicator uses too), 2M where it has none. Same size syntax as the hint",
              MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_5, &c->gpu_stage_text);
    c->shm_enable = 1;
    {
        static const mca_base_var_enum_value_t onoff[] = {{0, "0"}, {1, "1"}, {0, NULL}};
        c->shm_index = reg_enum("shm",
                                "Allreduce through a shared-memory arena (no messages) on "
                                "communicators whose ranks all run on this node, and one arena "
                                "per node for the hierarchical schedule on communicators "
                                "spanning nodes: 1 = when possible, 0 = never (point-to-point "
                                "algorithms over the PML; across nodes coll/llrdma then steps "
                                "aside when coll/han is below it)",
                                onoff, OPAL_INFO_LVL_5, &c->shm_enable);
    }
    c->shm_chunk_text = "0";
    (void)reg("shm_chunk_size",
              "Bytes per rank and round of the shared-memory Allreduce (larger vectors take "
              "several rounds); a multiple of 64. The arena holds 4 x ranks + 2 chunks. 0 = "
              "one core's L2 cache as a power of two (64K to 4M), halved while the arena would "
              "pass 160 MB or /dev/shm has no room. "
              "Same size syntax as the hint",
              MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_5, &c->shm_chunk_text);
    c->shm_lines_text = "2K";
    (void)reg("shm_lines_max",
              "Shared-memory Allreduces of vectors up to this many bytes (shm_direct) "
              "send them in the arena's lines, 56 bytes of data and the round number in "
              "each 64-byte line, so one cache-line transfer carries data and flag; larger "
              "ones go through the slots with a separate flag. Default 2K; on more than 2 "
              "ranks at most 280 bytes (five lines, whose words a reader polls together; "
              "longer ones were slower than the slots on 8 ranks, while 2 ranks won up to "
              "2K, docs/allreduce.md); 0 = never, at most 2K; "
              "rank 0's value counts. Same size syntax as the hint",
              MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_6, &c->shm_lines_text);
    c->shm_share_text = "64K";
    (void)reg("shm_share_min",
              "Shared-memory Allreduces on host buffers whose rounds hold at least this many "
              "bytes share the fold (on arenas of at least coll_llrdma_shm_share_ranks "
              "ranks): each rank copies its input in slice by slice, and the slices' 16 KB "
              "tiles go to whichever rank claims them (its owner first), so a rank on a "
              "slower or busy CPU folds less and the others fold what every rank has already "
              "copied in. 0 = never (each rank folds its own slice). Rank 0's value counts. "
              "Same size syntax as the hint",
              MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_6, &c->shm_share_text);
    c->shm_stream_text = "auto";
    (void)reg("shm_stream_min",
              "Shared-memory Allreduces of at least this many bytes on host buffers copy the "
              "result out of the arena with non-temporal (streamed) stores: the output is "
              "written without being read first and does not push the fold's inputs out of "
              "the cache, but lands in memory rather than in this core's cache. auto = twice "
              "one core's L2 on Intel CPUs (where it paid: docs/allreduce.md), never on "
              "others; 0 = never. Each rank's own choice. Same size syntax as the hint",
              MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_6, &c->shm_stream_text);
    c->shm_share_ranks = 8;
    (void)reg("shm_share_ranks",
              "The shared fold (coll_llrdma_shm_share_min) only on arenas of at least this "
              "many ranks: it copies each rank's own block through the arena, 1/ranks of the "
              "vector, which 2 and 4 ranks did not win back (docs/benchmarks-h200.md). "
              "Rank 0's value counts; at least 2",
              MCA_BASE_VAR_TYPE_INT, OPAL_INFO_LVL_6, &c->shm_share_ranks);
    c->gpu_fold_text = "64K";
    (void)reg("gpu_fold_min",
              "GPU buffers through the shared-memory arena: slices of at least this many bytes "
              "are reduced by GPU kernels reading the pinned arena, smaller ones by the CPU "
              "(a GPU reduction costs one more stream synchronisation). Same size syntax as "
              "the hint",
              MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_5, &c->gpu_fold_text);
    c->gpu_peer = LLRDMA_GPU_PEER_AUTO;
    {
        static const mca_base_var_enum_value_t modes[] = {{LLRDMA_GPU_PEER_OFF, "off"},
                                                          {LLRDMA_GPU_PEER_AUTO, "auto"},
                                                          {LLRDMA_GPU_PEER_FORCE, "force"},
                                                          {0, NULL}};
        c->gpu_peer_index = reg_enum(
            "gpu_peer",
            "Device-buffer Allreduces among ranks of one node (with the shared-memory arena) "
            "GPU to GPU through CUDA IPC, no host copies: auto = when every rank's buffers "
            "are cudaMalloc'ed device memory on GPUs of its own that can access each other "
            "(otherwise the arena path, said once at verbose 1 or 10); off = never; force = "
            "also ranks sharing a GPU (tests; slow without MPS)",
            modes, OPAL_INFO_LVL_5, &c->gpu_peer);
    }
    c->gpu_peer_min_text = "64K";
    (void)reg("gpu_peer_min",
              "Allreduces of at least this many bytes try the GPU peer path "
              "(coll_llrdma_gpu_peer; host buffers only stamp a placement word, no round); "
              "smaller device vectors take the arena path (or are copied whole, "
              "coll_llrdma_gpu_stage_max). Same size syntax as the hint",
              MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_5, &c->gpu_peer_min_text);
    c->internode_transport = LLRDMA_NET_AUTO;
    {
        static const mca_base_var_enum_value_t nets[] = {
            {LLRDMA_NET_AUTO, "auto"}, {LLRDMA_NET_PML, "pml"}, {LLRDMA_NET_BTL, "btl"}, {0, NULL}};
        c->internode_transport_index = reg_enum(
            "internode_transport",
            "Transport of the hierarchical Allreduce's inter-node messages: btl = RDMA "
            "writes (btl_put) of btl/llrdma straight into the receiver's registered buffer, "
            "with small READY / DONE messages over the PML; pml = point-to-point messages "
            "through the PML (ob1 picks the BTL); auto = btl when every rank reaches each of "
            "its inter-node peers through btl/llrdma RDMA (calls whose inter-node messages all "
            "fit btl/llrdma's eager limit still take pml), else pml. A forced btl that some "
            "rank cannot meet is said (naming the peer) and the communicator uses pml",
            nets, OPAL_INFO_LVL_5, &c->internode_transport);
    }
    c->shm_liveness_ms = 100;
    (void)reg("shm_liveness_ms",
              "Milliseconds between checks, while a rank waits in the shared-memory arena or "
              "for a message, that the ranks it may wait for on its node still run (their "
              "processes exist); a dead rank ends every rank's Allreduce with an error naming "
              "it. 0 = no check (a dead rank leaves the others waiting until the launcher ends "
              "the job)",
              MCA_BASE_VAR_TYPE_INT, OPAL_INFO_LVL_6, &c->shm_liveness_ms);
    c->wait_spin_us = -1;
    (void)reg("wait_spin_us",
              "Microseconds a rank waiting for others (in the shared-memory arena or for a "
              "message) spins before it yields the CPU between polls; -1 = auto: 0 when more "
              "ranks share this node than the process may run on (online CPUs, its affinity "
              "mask, a cgroup CPU quota: containers and batch systems that cap CPUs, which "
              "mpirun's mpi_yield_when_idle does not see), else 10000",
              MCA_BASE_VAR_TYPE_INT, OPAL_INFO_LVL_5, &c->wait_spin_us);
    c->wait_sleep_ms = 100;
    (void)reg("wait_sleep_ms",
              "Milliseconds of waiting after which a waiting rank sleeps between polls (50 us, "
              "doubling to 1 ms: long waits give the CPU away, at most 1 ms late); 0 = never",
              MCA_BASE_VAR_TYPE_INT, OPAL_INFO_LVL_5, &c->wait_sleep_ms);
    c->scratch_cache_text = "64M";
    (void)reg("scratch_cache_max",
              "Host scratch and whole-vector GPU staging buffers up to this many bytes are kept "
              "per communicator between Allreduces; larger ones are freed when the call "
              "returns. Same size syntax as the hint",
              MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_5, &c->scratch_cache_text);
    c->node_split_text = "";
    (void)reg("node_split",
              "TESTS ONLY: treat groups of MPI_COMM_WORLD ranks as separate nodes, to run "
              "the hierarchical Allreduce on one host: N = every N consecutive ranks, "
              "A,B,... = groups of A, B, ... ranks covering the world exactly (e.g. 3,1 or "
              "2,2,1). Ranks on different real nodes stay apart. Empty = Open MPI's "
              "locality only",
              MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_9, &c->node_split_text);
    c->mismatch = LLRDMA_MISMATCH_ABORT;
    {
        static const mca_base_var_enum_value_t actions[] = {
            {LLRDMA_MISMATCH_ABORT, "abort"}, {LLRDMA_MISMATCH_WARN, "warn"}, {0, NULL}};
        c->mismatch_index = reg_enum("mismatch_action",
                                     "What to do when ranks disagree on the size hint (checked "
                                     "once in MPI_Init through the modex)",
                                     actions, OPAL_INFO_LVL_4, &c->mismatch);
    }
    return OMPI_SUCCESS;
}

static int llrdma_open(void)
{
    mca_coll_llrdma_component.output = opal_output_open(NULL);
    opal_output_set_verbosity(mca_coll_llrdma_component.output, mca_coll_llrdma_component.verbose);
    mca_coll_llrdma_publish_pid(); /* before MPI_Init's modex exchange */
    return OMPI_SUCCESS;
}

static int llrdma_close(void)
{
    mca_coll_llrdma_gpu_finalize(); /* pinned and device caches, if CUDA was used */
    if (mca_coll_llrdma_component.output >= 0) {
        opal_output_close(mca_coll_llrdma_component.output);
        mca_coll_llrdma_component.output = -1;
    }
    return OMPI_SUCCESS;
}

/* An enumerated knob Open MPI refused at registration: its text is gone by
 * now, so name it from the environment (mpirun --mca, -x) when it came from
 * there, else from a parameter file. */
static void bad_enum(const char *name, const char *why)
{
    char env[128];
    const char *text;
    snprintf(env, sizeof(env), "OMPI_MCA_%s", name);
    text = getenv(env);
    if (NULL == text) {
        char detail[512];
        snprintf(detail, sizeof(detail), "%s (from an MCA parameter file): %s", name, why);
        llrdma_mca_fatal("invalid coll knob", detail);
        return;
    }
    mca_coll_llrdma_bad_knob(name, text, why);
}

/* The hint when btl/llrdma did not run in this process. */
static void resolve_without_btl(llrdma_rank_config_t *cfg)
{
    llrdma_hint_inputs_t in;
    char err[1024];

    memset(&in, 0, sizeof(in));
    in.mca_name = "btl_llrdma_size_hint";
    in.mca_text = getenv("OMPI_MCA_btl_llrdma_size_hint");
    in.mca_source = (NULL != in.mca_text) ? LLRDMA_SRC_ENV : LLRDMA_SRC_DEFAULT;
    in.alias_text = getenv("RDMA_LOW_LATENCY_HINT");
    if (LLRDMA_OK != llrdma_hint_resolve(&in, &cfg->hint, err, sizeof(err))) {
        llrdma_mca_fatal("invalid size hint", err);
    }
    if (LLRDMA_OK != llrdma_profile_derive(cfg->hint.bytes, NULL, &cfg->profile)) {
        llrdma_mca_fatal("invalid size hint", "profile derivation failed");
    }
    snprintf(cfg->btl_status, sizeof(cfg->btl_status), "not loaded (excluded or not found)");
    llrdma_mca_fill_identity(cfg);
}

/* CPUs of a cgroup CPU quota (v2 cpu.max, v1 cfs_quota_us / cfs_period_us)
 * of this process's cgroup; 0 when there is none or it cannot be read. */
static double cgroup_cpus(void)
{
    char line[512], path[600], *rel = NULL;
    long long quota = 0, period = 0;
    double cpus = 0;
    FILE *f = fopen("/proc/self/cgroup", "r");

    if (NULL == f) {
        return 0;
    }
    while (NULL != fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        if (0 == strncmp(line, "0::", 3)) {
            snprintf(path, sizeof(path), "/sys/fs/cgroup%s/cpu.max", line + 3);
            FILE *q = fopen(path, "r");
            char max[32];
            if (NULL != q) {
                if (2 == fscanf(q, "%31s %lld", max, &period) && 0 != strcmp(max, "max") &&
                    period > 0) {
                    cpus = (double)atoll(max) / (double)period;
                }
                fclose(q);
            }
        } else if (NULL != (rel = strstr(line, ":cpu,cpuacct:")) ||
                   NULL != (rel = strstr(line, ":cpu:"))) {
            rel = strchr(rel + 1, ':') + 1;
            snprintf(path, sizeof(path), "/sys/fs/cgroup/cpu,cpuacct%s/cpu.cfs_quota_us", rel);
            FILE *q = fopen(path, "r");
            if (NULL != q) {
                if (1 != fscanf(q, "%lld", &quota)) {
                    quota = 0;
                }
                fclose(q);
            }
            snprintf(path, sizeof(path), "/sys/fs/cgroup/cpu,cpuacct%s/cpu.cfs_period_us", rel);
            q = fopen(path, "r");
            if (NULL != q) {
                if (1 != fscanf(q, "%lld", &period)) {
                    period = 0;
                }
                fclose(q);
            }
            if (quota > 0 && period > 0 && 0 == cpus) {
                cpus = (double)quota / (double)period;
            }
        }
    }
    fclose(f);
    return cpus;
}

/* The waits' policy from the knobs and what this process may run on. */
static void wait_policy(mca_coll_llrdma_component_t *c)
{
    cpu_set_t set;
    int here = (int)opal_process_info.num_local_peers + 1;
    int online = (int)sysconf(_SC_NPROCESSORS_ONLN);
    int affinity = 0 == sched_getaffinity(0, sizeof(set), &set) ? CPU_COUNT(&set) : 0;
    double quota = cgroup_cpus();

    c->wait_oversubscribed = llrdma_ar_oversubscribed(here, online, affinity, quota);
    snprintf(c->wait_why, sizeof(c->wait_why),
             "%d ranks here, %d online CPUs, affinity %d, quota %s%.2f", here, online, affinity,
             quota > 0 ? "" : "none ", quota);
    c->wait = llrdma_ar_wait_policy_for(c->wait_oversubscribed, c->wait_spin_us, c->wait_sleep_ms);
    opal_output_verbose(
        5, c->output, "coll:llrdma: waits spin %llu us, then yield%s (%s: %s)",
        (unsigned long long)(c->wait.spin_ns / 1000), c->wait.sleep_ns > 0 ? ", then sleep" : "",
        c->wait_oversubscribed ? "oversubscribed" : "not oversubscribed", c->wait_why);
}

int mca_coll_llrdma_init_query(bool enable_progress_threads, bool enable_mpi_threads)
{
    mca_coll_llrdma_component_t *c = &mca_coll_llrdma_component;
    llrdma_rank_config_t cfg;
    uint64_t seg = 0;
    char err[512];

    (void)enable_progress_threads;
    (void)enable_mpi_threads;

    if (c->algorithm_index < 0) {
        bad_enum("coll_llrdma_allreduce_algorithm",
                 "not one of auto, recursive_doubling, rabenseifner, ring, shm_direct, "
                 "shm_split");
    }
    if (LLRDMA_OK != llrdma_parse_size(c->segment_text, LLRDMA_HINT_MAX, &seg, err, sizeof(err))) {
        mca_coll_llrdma_bad_knob("coll_llrdma_allreduce_segment_size", c->segment_text, err);
    }
    c->segment_bytes = (size_t)seg;
    if (LLRDMA_OK != llrdma_parse_size(c->gpu_fold_text, UINT64_MAX, &seg, err, sizeof(err))) {
        mca_coll_llrdma_bad_knob("coll_llrdma_gpu_fold_min", c->gpu_fold_text, err);
    }
    c->gpu_fold_min = (size_t)seg;
    if (NULL != c->gpu_stage_text && 0 == strcmp(c->gpu_stage_text, "auto")) {
        c->gpu_stage_auto = 1;
        seg = 0;
    } else if (LLRDMA_OK !=
               llrdma_parse_size(c->gpu_stage_text, UINT64_MAX, &seg, err, sizeof(err))) {
        mca_coll_llrdma_bad_knob("coll_llrdma_gpu_stage_max", c->gpu_stage_text, err);
    }
    c->gpu_stage_max = (size_t)seg;
    if (LLRDMA_OK !=
        llrdma_parse_size(c->shm_chunk_text, (uint64_t)1 << 30, &seg, err, sizeof(err))) {
        mca_coll_llrdma_bad_knob("coll_llrdma_shm_chunk_size", c->shm_chunk_text, err);
    }
    if (0 != seg % 64) {
        mca_coll_llrdma_bad_knob("coll_llrdma_shm_chunk_size", c->shm_chunk_text,
                                 "must be a multiple of 64 bytes (or 0 for the default)");
    }
    c->shm_chunk = (size_t)seg;
    if (LLRDMA_OK !=
        llrdma_parse_size(c->shm_lines_text, LLRDMA_AR_SHM_LINES_MAX, &seg, err, sizeof(err))) {
        mca_coll_llrdma_bad_knob("coll_llrdma_shm_lines_max", c->shm_lines_text, err);
    }
    c->shm_lines_max = (size_t)seg;
    if (LLRDMA_OK !=
        llrdma_parse_size(c->shm_share_text, (uint64_t)1 << 40, &seg, err, sizeof(err))) {
        mca_coll_llrdma_bad_knob("coll_llrdma_shm_share_min", c->shm_share_text, err);
    }
    c->shm_share_min = (size_t)seg;
    c->shm_stream_auto = NULL != c->shm_stream_text && 0 == strcmp(c->shm_stream_text, "auto");
    if (c->shm_stream_auto) {
        seg = llrdma_ar_shm_default_stream_min(mca_coll_llrdma_shm_l2_bytes(),
                                               mca_coll_llrdma_cpu_intel());
    } else if (LLRDMA_OK !=
               llrdma_parse_size(c->shm_stream_text, (uint64_t)1 << 40, &seg, err, sizeof(err))) {
        mca_coll_llrdma_bad_knob("coll_llrdma_shm_stream_min", c->shm_stream_text, err);
    }
    c->shm_stream_min = (size_t)seg;
    if (c->shm_index < 0) {
        bad_enum("coll_llrdma_shm", "not 0 or 1");
    }
    if (c->gpu_peer_index < 0) {
        bad_enum("coll_llrdma_gpu_peer", "not one of off, auto, force");
    }
    if (c->internode_transport_index < 0) {
        bad_enum("coll_llrdma_internode_transport", "not one of auto, pml, btl");
    }
    if (LLRDMA_OK !=
        llrdma_parse_size(c->gpu_peer_min_text, (uint64_t)1 << 40, &seg, err, sizeof(err))) {
        mca_coll_llrdma_bad_knob("coll_llrdma_gpu_peer_min", c->gpu_peer_min_text, err);
    }
    c->gpu_peer_min = (size_t)seg;
    if (c->shm_share_ranks < 2) {
        char v[32];
        snprintf(v, sizeof(v), "%d", c->shm_share_ranks);
        mca_coll_llrdma_bad_knob("coll_llrdma_shm_share_ranks", v, "below 2");
    }
    if (c->shm_liveness_ms < 0) {
        char v[32];
        snprintf(v, sizeof(v), "%d", c->shm_liveness_ms);
        mca_coll_llrdma_bad_knob("coll_llrdma_shm_liveness_ms", v,
                                 "negative (0 turns the check off)");
    }
    if (c->wait_spin_us < -1) {
        char v[32];
        snprintf(v, sizeof(v), "%d", c->wait_spin_us);
        mca_coll_llrdma_bad_knob("coll_llrdma_wait_spin_us", v,
                                 "below -1 (-1 = auto, 0 = yield at once)");
    }
    if (c->wait_sleep_ms < 0) {
        char v[32];
        snprintf(v, sizeof(v), "%d", c->wait_sleep_ms);
        mca_coll_llrdma_bad_knob("coll_llrdma_wait_sleep_ms", v, "negative (0 = never sleep)");
    }
    wait_policy(c);
    if (LLRDMA_OK != llrdma_parse_size(c->scratch_cache_text, UINT64_MAX, &seg, err, sizeof(err))) {
        mca_coll_llrdma_bad_knob("coll_llrdma_scratch_cache_max", c->scratch_cache_text, err);
    }
    c->scratch_cache_max = (size_t)seg;
    {
        const char *t = getenv("LLRDMA_TEST_ALLOC_FAIL");
        unsigned long long call = 0;
        c->test_alloc_rank = -1;
        if (NULL != t && 2 == sscanf(t, "%d:%llu", &c->test_alloc_rank, &call)) {
            c->test_alloc_call = call;
        } else {
            c->test_alloc_rank = -1;
        }
    }
    {
        /* World rank: init_query runs before MPI_COMM_WORLD has one, so the
         * launcher's variable decides (mpirun 4.1 and 5.0 set it). */
        const char *t = getenv("LLRDMA_TEST_DIE_AT_SEND"), *me = getenv("OMPI_COMM_WORLD_RANK");
        int r = -1;
        long n = 0;
        c->test_die_send = 0;
        if (NULL != t && NULL != me && 2 == sscanf(t, "%d:%ld", &r, &n) && r == atoi(me) && n > 0) {
            c->test_die_send = n;
        }
    }
    if (LLRDMA_AR_OK != llrdma_ar_node_split_parse(c->node_split_text, c->split_sizes,
                                                   MCA_COLL_LLRDMA_SPLIT_MAX, &c->split_n,
                                                   &c->split_repeat, err, sizeof(err))) {
        mca_coll_llrdma_bad_knob("coll_llrdma_node_split", c->node_split_text, err);
    }
    if (c->mismatch_index < 0) {
        bad_enum("coll_llrdma_mismatch_action", "not one of abort, warn");
    }

    if (LLRDMA_OK != llrdma_state_get(&cfg)) {
        memset(&cfg, 0, sizeof(cfg));
        resolve_without_btl(&cfg);
    }
    if (NULL != c->size_hint && '\0' != c->size_hint[0]) {
        /* This knob outranks even llrdma_set_size_hint(), for coll only. */
        if (LLRDMA_OK != llrdma_parse_size(c->size_hint, LLRDMA_HINT_MAX, &seg, err, sizeof(err))) {
            mca_coll_llrdma_bad_knob("coll_llrdma_size_hint", c->size_hint, err);
        }
        c->hint = seg;
    } else {
        c->hint = cfg.hint.bytes;
    }
    /* Publish the segment the planner will use (knob, else the coll hint's profile). */
    {
        llrdma_ar_plan_t plan;
        if (LLRDMA_AR_OK == llrdma_ar_plan((size_t)1 << 26, 1, 2, c->hint, LLRDMA_AR_RING,
                                           c->segment_bytes, &plan)) {
            cfg.profile.coll_segment_bytes = plan.segment_bytes;
        }
    }
    cfg.coll_hint = c->hint;
    cfg.coll_algorithm = c->algorithm;
    cfg.coll_segment_knob = c->segment_bytes;
    cfg.coll_shm = c->shm_enable;
    cfg.coll_shm_chunk_knob = c->shm_chunk;
    cfg.coll_shm_lines_max = c->shm_lines_max;
    cfg.coll_shm_share_min = c->shm_share_min;
    cfg.coll_shm_share_ranks = c->shm_share_ranks;
    cfg.coll_shm_stream_auto = c->shm_stream_auto;
    cfg.coll_shm_stream_min = c->shm_stream_min;
    cfg.coll_gpu_peer = c->gpu_peer;
    cfg.coll_gpu_peer_min = c->gpu_peer_min;
    cfg.coll_gpu_stage_auto = c->gpu_stage_auto;
    cfg.coll_gpu_stage_max = c->gpu_stage_max;
    cfg.coll_wait_spin_ns = c->wait.spin_ns;
    cfg.coll_wait_sleep_ns = c->wait.sleep_ns;
    cfg.coll_wait_oversubscribed = c->wait_oversubscribed;
    memcpy(cfg.coll_wait_why, c->wait_why, sizeof(cfg.coll_wait_why)); /* both 96, terminated */
    cfg.coll_wait_why[sizeof(cfg.coll_wait_why) - 1] = '\0';
    llrdma_state_freeze();
    llrdma_state_publish(&cfg);
    return OMPI_SUCCESS;
}
