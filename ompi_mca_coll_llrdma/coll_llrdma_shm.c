/*
 * coll/llrdma shared-memory arena: when every rank of a communicator runs on
 * this node, its Allreduces go through one POSIX shared-memory segment (the
 * core's shm_direct / shm_split algorithms) instead of point-to-point
 * messages.  Set up on the communicator's first Allreduce (a collective call,
 * so every rank is there), torn down with the module.
 *
 * Setup, through the module below us (no new communication channel):
 *   rank 0 creates the segment (O_EXCL, a name unique on the node), reserves
 *   its pages (posix_fallocate: a full /dev/shm is an error here, not a
 *   SIGBUS later) and maps it; it broadcasts the name, every other rank maps
 *   it; an Allreduce of the outcome tells every rank whether all succeeded;
 *   rank 0 then unlinks the name (the mappings stay), so nothing is left in
 *   /dev/shm even if the job is killed later.  Any failure anywhere: no
 *   arena on this communicator, on every rank, said once with the reason.
 *
 * NUMA: a page of POSIX shared memory lives on the node of the process that
 * first allocates it.  Rank 0's reservation of the whole arena checks that
 * /dev/shm has room; it then gives back the chunks other ranks write (their
 * input slots and private chunks: llrdma_ar_shm_rank_ranges), and each rank
 * reserves its own, so those pages come from its own node.
 *
 * Liveness: every rank publishes its pid in its info line (bytes 8-15; the
 * GPU path uses bytes 0-7); a rank waiting in the arena asks whether the
 * rank it waits for still exists (peer_alive) every coll_llrdma_shm_liveness_ms.
 *
 * Tests: LLRDMA_TEST_SHM_FAIL=RANK:STEP makes step STEP (1 open, 2 reserve or
 * check the size, 3 map) fail on communicator rank RANK, to run every
 * cleanup path; step 4 makes rank 0's first reservation find /dev/shm full
 * (the chunk is halved).  LLRDMA_TEST_SHM_RANK0_TOUCHES (set, any value)
 * skips the per-rank reservation above, so rank 0 first-touches the whole
 * arena, as before issue 12: tests/softroce/test-numa.sh's negative control.
 */
#include "ompi_config.h"

#include <errno.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <string.h>
#include <sys/mman.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/constants.h"
#include "ompi/proc/proc.h"
#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"

#include "coll_llrdma.h"

#define NAME_LEN 64

/* What rank 0 broadcasts: the segment's name (empty: none), its chunk and
 * its coll_llrdma_shm_lines_max and coll_llrdma_shm_share_min (a rank
 * taking the line path or the shared fold while another does not would wait
 * for good, so rank 0's values count). */
typedef struct {
    char name[NAME_LEN];
    uint64_t chunk;
    uint64_t lines_max;
    uint64_t share_min; /* 0 where the arena has fewer than coll_llrdma_shm_share_ranks */
} seg_info_t;

static void progress(void *ctx)
{
    (void)ctx;
    (void)opal_progress();
}

/* 0 once rank's process is gone: no such pid, or a zombie its launcher has
 * not reaped yet.  Unknown (no pid published, /proc unreadable): alive. */
static int peer_alive(void *ctx, int rank)
{
    mca_coll_llrdma_module_t *m = (mca_coll_llrdma_module_t *)ctx;
    const uint64_t *line = llrdma_ar_shm_rank_info(&m->shm, m->shm_ranks, rank);
    long pid = (NULL != line) ? (long)__atomic_load_n(&line[1], __ATOMIC_ACQUIRE) : 0;
    return mca_coll_llrdma_pid_alive(pid);
}

/* Rank `rank`'s own chunks: rank 0 gives them back (punch) after its
 * reservation, every other rank reserves them (first touch on its node).
 * Returns 0 or an errno; a tmpfs that cannot punch holes keeps them on rank
 * 0's node, which is only slower. */
static int own_chunks(int fd, int comm_size, size_t chunk, int rank, int punch)
{
    size_t off[4], len[4];
    int n = llrdma_ar_shm_rank_ranges(comm_size, chunk, rank, off, len, 4);
    if (NULL != getenv("LLRDMA_TEST_SHM_RANK0_TOUCHES")) {
        n = 0; /* the tests' negative control: rank 0's reservation places every page */
    }
    for (int i = 0; i < n; ++i) {
        if (punch) {
            (void)fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off[i],
                            (off_t)len[i]);
            continue;
        }
        int rc = posix_fallocate(fd, (off_t)off[i], (off_t)len[i]);
        if (0 != rc) {
            return rc;
        }
    }
    return 0;
}

/* Injected failure for the tests (see the top). */
static int test_fail(struct ompi_communicator_t *comm, int step)
{
    const char *v = getenv("LLRDMA_TEST_SHM_FAIL");
    int rank, s;
    if (NULL == v || 2 != sscanf(v, "%d:%d", &rank, &s)) {
        return 0;
    }
    if (rank == ompi_comm_rank(comm) && s == step) {
        errno = EIO;
        return 1;
    }
    return 0;
}

/* Maps fd (step 3 of the set-up); NULL with why. */
static void *map_segment(struct ompi_communicator_t *comm, int fd, const char *name, size_t bytes,
                         char *why, size_t whylen)
{
    void *base = test_fail(comm, 3) ? MAP_FAILED
                                    : mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (MAP_FAILED == base) {
        snprintf(why, whylen, "mmap of %s: %s", name, strerror(errno));
        return NULL;
    }
    return base;
}

/* The arena's creator (rank 0 of its `nranks` ranks): create, reserve and
 * map, halving the chunk while /dev/shm has no room for the arena (down to
 * `min_chunk`; with the chunk knob set, no shrinking).  Returns the mapping,
 * *chunk and *bytes, or NULL with why. */
static void *create_segment(struct ompi_communicator_t *comm, int nranks, const char *name,
                            size_t *chunk, size_t min_chunk, size_t *bytes, char *why,
                            size_t whylen)
{
    void *base;
    int fd, rc;

    fd = test_fail(comm, 1) ? -1 : shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
        snprintf(why, whylen, "shm_open(%s): %s", name, strerror(errno));
        return NULL;
    }
    for (int tries = 0;; ++tries) {
        *bytes = llrdma_ar_shm_bytes(nranks, *chunk);
        rc = test_fail(comm, 2)                 ? EIO
             : 0 == tries && test_fail(comm, 4) ? ENOSPC
                                                : posix_fallocate(fd, 0, (off_t)*bytes);
        if (ENOSPC != rc || *chunk / 2 < min_chunk) {
            break;
        }
        *chunk /= 2;
    }
    if (0 != rc) {
        snprintf(why, whylen, "reserving %lu bytes in /dev/shm for %s: %s", (unsigned long)*bytes,
                 name, strerror(rc));
        goto unlink_segment;
    }
    if (NULL == (base = map_segment(comm, fd, name, *bytes, why, whylen))) {
        goto unlink_segment;
    }
    for (int r = 1; r < nranks; ++r) {
        (void)own_chunks(fd, nranks, *chunk, r, 1);
    }
    close(fd);
    return base;

unlink_segment:
    shm_unlink(name);
    close(fd);
    return NULL;
}

/* The arena's other ranks (index `me` of `nranks`): open and map what its
 * creator made. */
static void *attach_segment(struct ompi_communicator_t *comm, int nranks, int me, const char *name,
                            size_t chunk, size_t bytes, char *why, size_t whylen)
{
    struct stat st;
    void *base;
    int fd, rc;

    fd = test_fail(comm, 1) ? -1 : shm_open(name, O_RDWR, 0600);
    if (fd < 0) {
        snprintf(why, whylen, "shm_open(%s): %s", name, strerror(errno));
        return NULL;
    }
    if (test_fail(comm, 2) || 0 != fstat(fd, &st) || (size_t)st.st_size != bytes) {
        snprintf(why, whylen, "%s does not hold the expected %lu bytes", name,
                 (unsigned long)bytes);
        goto close_fd;
    }
    if (0 != (rc = own_chunks(fd, nranks, chunk, me, 0))) {
        snprintf(why, whylen, "reserving this rank's %lu-byte chunks of %s in /dev/shm: %s",
                 (unsigned long)chunk, name, strerror(rc));
        goto close_fd;
    }
    if (NULL == (base = map_segment(comm, fd, name, bytes, why, whylen))) {
        goto close_fd;
    }
    close(fd);
    return base;

close_fd:
    close(fd);
    return NULL;
}

size_t mca_coll_llrdma_shm_l2_bytes(void)
{
#ifdef _SC_LEVEL2_CACHE_SIZE
    long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return v > 0 ? (size_t)v : 0;
#else
    return 0;
#endif
}

int mca_coll_llrdma_cpu_intel(void)
{
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (0 == __get_cpuid(0, &a, &b, &c, &d)) {
        return 0;
    }
    /* "GenuineIntel" in EBX, EDX, ECX */
    return 0x756e6547u == b && 0x49656e69u == d && 0x6c65746eu == c;
#else
    return 0;
#endif
}

/* The knob, or the core's default for this machine's L2 (docs/allreduce.md,
 * "Chunk").  Only rank 0's value counts: it is broadcast with the name. */
size_t mca_coll_llrdma_shm_chunk(int comm_size)
{
    size_t c = mca_coll_llrdma_component.shm_chunk;
    return 0 != c ? c : llrdma_ar_shm_default_chunk(comm_size, mca_coll_llrdma_shm_l2_bytes());
}

/* The arena's name, unique on the node while it exists: pid + context id +
 * a serial. */
static void segment_name(struct ompi_communicator_t *comm, char *name)
{
    static unsigned serial;
    snprintf(name, NAME_LEN, "/llrdma-coll-%ld-%u-%u", (long)getpid(),
             (unsigned)LLRDMA_COMM_CID(comm), serial++);
}

/* Collective over comm, after this rank mapped its arena (base) or not:
 * every rank learns whether all succeeded; creators then unlink the name.
 * On success m->shm describes the arena of `nranks` ranks (this rank's index
 * `me`); on failure the ranks that failed say why. */
static int finish_setup(mca_coll_llrdma_module_t *m, struct ompi_communicator_t *comm, void *base,
                        int creator, const char *name, int nranks, int me, size_t chunk,
                        size_t lines_max, size_t share_min, size_t bytes, const char *why)
{
    mca_coll_llrdma_component_t *c = &mca_coll_llrdma_component;
    int mine, all, rc;

    if (NULL != base) {
        llrdma_ar_shm_t view = {.base = base, .chunk_bytes = chunk};
        uint64_t *line = llrdma_ar_shm_rank_info(&view, nranks, me);
        __atomic_store_n(&line[1], (uint64_t)getpid(), __ATOMIC_RELEASE);
    }
    mine = (NULL != base || nranks == 1) ? 1 : 0;
    rc =
        m->previous_allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm, m->previous_allreduce_module);
    if (creator && NULL != base) {
        shm_unlink(name); /* every rank mapped it or gave up */
    }
    if (OMPI_SUCCESS != rc || 1 != all) {
        if (NULL != base) {
            munmap(base, bytes);
        }
        if ('\0' != why[0]) { /* only the ranks that failed say why */
            opal_output(0,
                        "coll:llrdma: no shared-memory arena on %s (rank %d: %s); its "
                        "Allreduces use point-to-point messages",
                        comm->c_name, ompi_comm_rank(comm), why);
        }
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    if (NULL == base) {
        return OMPI_SUCCESS; /* a node of one rank: nothing to share */
    }
    m->shm.base = base;
    m->shm.chunk_bytes = chunk;
    m->shm.lines_max = lines_max;
    m->shm.share_min = share_min;
    m->shm.share_rounds = 0;
    m->shm.share_stolen = 0;
    m->shm.stream_min = c->shm_stream_min;
    m->shm.stream_outs = 0;
    m->shm.gen = 0;
    m->shm.progress = progress;
    m->shm.progress_ctx = NULL;
    m->shm.alive = peer_alive;
    m->shm.alive_ctx = m;
    m->shm.liveness_ns = (uint64_t)c->shm_liveness_ms * 1000000u;
    m->shm.wait = c->wait;
    /* Phase times cost two clock reads per phase: only when they are said. */
    m->shm.time_phases = opal_output_get_verbosity(c->output) >= 5 ? 1 : 0;
    m->shm.phase_rounds = 0;
    memset(m->shm.phase_ns, 0, sizeof(m->shm.phase_ns));
    m->shm_ranks = nranks;
    m->shm_rank = me;
    m->shm_bytes = bytes;
    opal_output_verbose(5, c->output,
                        "coll:llrdma: %s: shared-memory arena of %lu bytes, chunk %lu (%s), "
                        "%d ranks, vectors up to %lu bytes in lines, folds shared from %lu "
                        "bytes per round (0: never)",
                        comm->c_name, (unsigned long)bytes, (unsigned long)chunk, name, nranks,
                        (unsigned long)llrdma_ar_lines_limit(lines_max, nranks),
                        (unsigned long)share_min);
    mca_coll_llrdma_numa_report(comm, base, nranks, me, chunk);
    return OMPI_SUCCESS;
}

int mca_coll_llrdma_shm_setup(mca_coll_llrdma_module_t *m, struct ompi_communicator_t *comm)
{
    mca_coll_llrdma_component_t *c = &mca_coll_llrdma_component;
    int n = ompi_comm_size(comm), me = ompi_comm_rank(comm);
    size_t chunk = mca_coll_llrdma_shm_chunk(n), bytes = 0;
    seg_info_t info;
    char why[256] = "";
    void *base = NULL;
    int rc;

    memset(&info, 0, sizeof(info));
    if (0 == me) {
        segment_name(comm, info.name);
        base = create_segment(comm, n, info.name, &chunk,
                              0 != c->shm_chunk ? chunk : LLRDMA_AR_SHM_MIN_CHUNK, &bytes, why,
                              sizeof(why));
        if (NULL == base) {
            info.name[0] = '\0'; /* the others need not try */
        }
        info.chunk = chunk;
        info.lines_max = c->shm_lines_max;
        info.share_min = n >= c->shm_share_ranks ? c->shm_share_min : 0;
    }
    rc = comm->c_coll->coll_bcast(&info, (int)sizeof(info), MPI_BYTE, 0, comm,
                                  comm->c_coll->coll_bcast_module);
    if (OMPI_SUCCESS != rc) {
        snprintf(why, sizeof(why), "broadcasting the segment name failed (%d)", rc);
    } else if (0 != me && '\0' != info.name[0]) {
        info.name[NAME_LEN - 1] = '\0';
        chunk = (size_t)info.chunk;
        bytes = llrdma_ar_shm_bytes(n, chunk);
        base = attach_segment(comm, n, me, info.name, chunk, bytes, why, sizeof(why));
    }
    return finish_setup(m, comm, base, 0 == me, info.name, n, me, chunk, (size_t)info.lines_max,
                        (size_t)info.share_min, bytes, why);
}

size_t mca_coll_llrdma_shm_name_bytes(void)
{
    return sizeof(seg_info_t);
}

int mca_coll_llrdma_shm_setup_node(mca_coll_llrdma_module_t *m, struct ompi_communicator_t *comm,
                                   void *names)
{
    mca_coll_llrdma_component_t *c = &mca_coll_llrdma_component;
    const llrdma_ar_hier_t *h = &m->hier;
    seg_info_t info, *all = (seg_info_t *)names;
    int L = h->local_size, me = h->local_rank, rc;
    /* One slot holds one piece per slice, of any element (16 bytes at most). */
    size_t min_chunk = ((size_t)L * 16 + 63) / 64 * 64;
    size_t chunk = mca_coll_llrdma_shm_chunk(L), bytes = 0;
    char why[256] = "";
    void *base = NULL;

    if (chunk < min_chunk) {
        chunk = min_chunk;
    }
    memset(&info, 0, sizeof(info));
    if (0 == me && L > 1) {
        segment_name(comm, info.name);
        base = create_segment(comm, L, info.name, &chunk,
                              0 != c->shm_chunk ? chunk : LLRDMA_AR_SHM_MIN_CHUNK, &bytes, why,
                              sizeof(why));
        if (NULL == base) {
            info.name[0] = '\0'; /* its node's other ranks need not try */
        }
        info.chunk = chunk;
        info.lines_max = c->shm_lines_max;
        info.share_min = L >= c->shm_share_ranks ? c->shm_share_min : 0;
    }
    /* Every node's first rank publishes its arena; the others map their node's. */
    rc = comm->c_coll->coll_allgather(&info, (int)sizeof(info), MPI_BYTE, all, (int)sizeof(info),
                                      MPI_BYTE, comm, comm->c_coll->coll_allgather_module);
    if (OMPI_SUCCESS != rc) {
        snprintf(why, sizeof(why), "exchanging the arena names failed (%d)", rc);
    } else if (0 != me && '\0' != all[m->node_leader].name[0]) {
        info = all[m->node_leader];
        info.name[NAME_LEN - 1] = '\0';
        chunk = (size_t)info.chunk;
        bytes = llrdma_ar_shm_bytes(L, chunk);
        base = attach_segment(comm, L, me, info.name, chunk, bytes, why, sizeof(why));
    }
    return finish_setup(m, comm, base, 0 == me, info.name, L, me, chunk, (size_t)info.lines_max,
                        (size_t)info.share_min, bytes, why);
}

/* Where this rank's rounds through the slots went (verbose 5): the mean of
 * each phase per round, so a slow call can be told apart into copying,
 * folding and waiting for the others. */
static void report_phases(const mca_coll_llrdma_module_t *m)
{
    char text[256];
    size_t used = 0;
    if (0 == m->shm.phase_rounds) {
        return;
    }
    for (int i = 0; i < LLRDMA_AR_PHASES && used < sizeof(text); ++i) {
        int n = snprintf(text + used, sizeof(text) - used, "%s%s %.2f", i ? ", " : "",
                         llrdma_ar_phase_name(i),
                         (double)m->shm.phase_ns[i] / 1e3 / (double)m->shm.phase_rounds);
        used += n > 0 ? (size_t)n : 0;
    }
    opal_output_verbose(5, mca_coll_llrdma_component.output,
                        "coll:llrdma: arena rank %d: %llu rounds through the slots (%llu with "
                        "the fold shared, %llu tiles folded for other ranks, %llu copied out "
                        "streamed), us per round: %s",
                        m->shm_rank, (unsigned long long)m->shm.phase_rounds,
                        (unsigned long long)m->shm.share_rounds,
                        (unsigned long long)m->shm.share_stolen,
                        (unsigned long long)m->shm.stream_outs, text);
}

void mca_coll_llrdma_shm_release(mca_coll_llrdma_module_t *m)
{
    if (NULL != m->shm.base) {
        /* Which path the calls took (test-shm.sh checks the line count). */
        opal_output_verbose(5, mca_coll_llrdma_component.output,
                            "coll:llrdma: arena of %d ranks released after %llu rounds, %llu of "
                            "them in lines (%llu calls without re-planning)",
                            m->shm_ranks, (unsigned long long)m->shm.gen,
                            (unsigned long long)m->shm.line_rounds,
                            (unsigned long long)m->fast_calls);
        report_phases(m);
        mca_coll_llrdma_gpu_unregister(m);
        munmap(m->shm.base, m->shm_bytes);
        m->shm.base = NULL;
        m->gpu_key = 0; /* republished in the next arena's info line */
    }
}

int mca_coll_llrdma_shm_rebuild(mca_coll_llrdma_module_t *m, struct ompi_communicator_t *comm)
{
    opal_output_verbose(1, mca_coll_llrdma_component.output,
                        "coll:llrdma: %s: the shared-memory arena broke in an earlier "
                        "Allreduce; every rank sets up a fresh one",
                        comm->c_name);
    mca_coll_llrdma_shm_release(m);
    return mca_coll_llrdma_shm_setup(m, comm);
}
