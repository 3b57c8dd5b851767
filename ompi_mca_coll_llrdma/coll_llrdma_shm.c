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
 * Tests: LLRDMA_TEST_SHM_FAIL=RANK:STEP makes step STEP (1 open, 2 reserve or
 * check the size, 3 map) fail on communicator rank RANK, to run every
 * cleanup path; step 4 makes rank 0's first reservation find /dev/shm full
 * (the chunk is halved).
 */
#include "ompi_config.h"

#include <errno.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

/* What rank 0 broadcasts: the segment's name (empty: none) and its chunk. */
typedef struct {
    char name[NAME_LEN];
    uint64_t chunk;
} seg_info_t;

static void progress(void *ctx)
{
    (void)ctx;
    (void)opal_progress();
}

int mca_coll_llrdma_shm_local(struct ompi_communicator_t *comm)
{
    int n = ompi_comm_size(comm);
    for (int i = 0; i < n; ++i) {
        ompi_proc_t *proc = ompi_comm_peer_lookup(comm, i);
        if (NULL == proc || !OPAL_PROC_ON_LOCAL_NODE(proc->super.proc_flags)) {
            return 0;
        }
    }
    return 1;
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

/* Rank 0: create, reserve and map, halving the chunk while /dev/shm has no
 * room for the arena (down to `min_chunk`; with the chunk knob set, no
 * shrinking).  Returns the mapping, *chunk and *bytes, or NULL with why. */
static void *create_segment(struct ompi_communicator_t *comm, const char *name, size_t *chunk,
                            size_t min_chunk, size_t *bytes, char *why, size_t whylen)
{
    void *base;
    int fd, rc;

    fd = test_fail(comm, 1) ? -1 : shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
        snprintf(why, whylen, "shm_open(%s): %s", name, strerror(errno));
        return NULL;
    }
    for (int tries = 0;; ++tries) {
        *bytes = llrdma_ar_shm_bytes(ompi_comm_size(comm), *chunk);
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
    close(fd);
    return base;

unlink_segment:
    shm_unlink(name);
    close(fd);
    return NULL;
}

/* Other ranks: open and map what rank 0 created. */
static void *attach_segment(struct ompi_communicator_t *comm, const char *name, size_t bytes,
                            char *why, size_t whylen)
{
    struct stat st;
    void *base;
    int fd;

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

/* The knob, or the core's default for this machine's L2 (docs/allreduce.md,
 * "Chunk").  Only rank 0's value counts: it is broadcast with the name. */
size_t mca_coll_llrdma_shm_chunk(int comm_size)
{
    size_t c = mca_coll_llrdma_component.shm_chunk;
    return 0 != c ? c : llrdma_ar_shm_default_chunk(comm_size, mca_coll_llrdma_shm_l2_bytes());
}

int mca_coll_llrdma_shm_setup(mca_coll_llrdma_module_t *m, struct ompi_communicator_t *comm)
{
    static unsigned serial;
    mca_coll_llrdma_component_t *c = &mca_coll_llrdma_component;
    size_t chunk = mca_coll_llrdma_shm_chunk(ompi_comm_size(comm)), bytes = 0;
    seg_info_t info;
    char why[256] = "";
    void *base = NULL;
    int mine, all, rc;

    memset(&info, 0, sizeof(info));
    if (0 == ompi_comm_rank(comm)) {
        /* pid + context id + a serial: unique on the node while it exists. */
        snprintf(info.name, sizeof(info.name), "/llrdma-coll-%ld-%u-%u", (long)getpid(),
                 (unsigned)ompi_comm_get_cid(comm), serial++);
        base = create_segment(comm, info.name, &chunk,
                              0 != c->shm_chunk ? chunk : LLRDMA_AR_SHM_MIN_CHUNK, &bytes, why,
                              sizeof(why));
        if (NULL == base) {
            info.name[0] = '\0'; /* the others need not try */
        }
        info.chunk = chunk;
    }
    rc = comm->c_coll->coll_bcast(&info, (int)sizeof(info), MPI_BYTE, 0, comm,
                                  comm->c_coll->coll_bcast_module);
    if (OMPI_SUCCESS != rc) {
        snprintf(why, sizeof(why), "broadcasting the segment name failed (%d)", rc);
    } else if (0 != ompi_comm_rank(comm) && '\0' != info.name[0]) {
        info.name[NAME_LEN - 1] = '\0';
        chunk = (size_t)info.chunk;
        bytes = llrdma_ar_shm_bytes(ompi_comm_size(comm), chunk);
        base = attach_segment(comm, info.name, bytes, why, sizeof(why));
    }
    mine = (NULL != base) ? 1 : 0;
    rc =
        m->previous_allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm, m->previous_allreduce_module);
    if (0 == ompi_comm_rank(comm) && NULL != base) {
        shm_unlink(info.name); /* every rank mapped it or gave up */
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
    m->shm.base = base;
    m->shm.chunk_bytes = chunk;
    m->shm.gen = 0;
    m->shm.progress = progress;
    m->shm.progress_ctx = NULL;
    m->shm_bytes = bytes;
    opal_output_verbose(10, c->output,
                        "coll:llrdma: %s: shared-memory arena of %lu bytes, chunk %lu (%s)",
                        comm->c_name, (unsigned long)bytes, (unsigned long)chunk, info.name);
    return OMPI_SUCCESS;
}

void mca_coll_llrdma_shm_release(mca_coll_llrdma_module_t *m)
{
    if (NULL != m->shm.base) {
        mca_coll_llrdma_gpu_unregister(m);
        munmap(m->shm.base, m->shm_bytes);
        m->shm.base = NULL;
    }
}
