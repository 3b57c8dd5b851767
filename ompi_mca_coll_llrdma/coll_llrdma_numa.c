/*
 * coll/llrdma: where a rank's own part of the shared-memory arena lives
 * (docs/allreduce.md, "NUMA placement").  At coll_llrdma_verbose 5, after
 * the arena's set-up, every rank says which NUMA node it runs on and on
 * which nodes the pages of its own ranges (llrdma_ar_shm_rank_pages: its
 * input slots and private chunks, whole pages only) are, so first-touch
 * placement can be checked on a two-socket node -- and is, in an emulated
 * two-node guest, by tests/softroce/test-numa.sh.
 *
 * move_pages(2) with nodes == NULL only asks (it moves nothing); called
 * through syscall(2) so that no libnuma is needed.  It sees only pages
 * mapped in this process's page tables, so each page is read once first:
 * a read of a page that exists maps it and allocates nothing (the pages
 * were reserved at set-up).  A kernel or container that refuses the call
 * (ENOSYS, EPERM) is said, nothing else changes.
 */
#include "ompi_config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ompi/communicator/communicator.h"
#include "opal/util/output.h"

#include "coll_llrdma.h"

/* Pages asked per move_pages call. */
#define BATCH 512

/* The node the calling thread runs on now, -1 unknown. */
static int current_node(int *cpu)
{
    unsigned c = 0, node = 0;
    if (0 != syscall(SYS_getcpu, &c, &node, NULL)) {
        *cpu = -1;
        return -1;
    }
    *cpu = (int)c;
    return (int)node;
}

void mca_coll_llrdma_numa_report(struct ompi_communicator_t *comm, void *base, int nranks, int me,
                                 size_t chunk)
{
    mca_coll_llrdma_component_t *c = &mca_coll_llrdma_component;
    long ps = sysconf(_SC_PAGESIZE);
    size_t page = ps > 0 ? (size_t)ps : 4096, n, done;
    size_t *off = NULL;
    int *status = NULL, cpu, node, err = 0;
    void *addr[BATCH];
    llrdma_ar_numa_census_t census;

    if (opal_output_get_verbosity(c->output) < 5) {
        return;
    }
    node = current_node(&cpu);
    n = llrdma_ar_shm_rank_pages(nranks, chunk, me, page, NULL, 0);
    off = (size_t *)malloc((n ? n : 1) * sizeof(*off));
    status = (int *)malloc((n ? n : 1) * sizeof(*status));
    if (NULL == off || NULL == status) {
        err = ENOMEM;
        goto free_arrays;
    }
    (void)llrdma_ar_shm_rank_pages(nranks, chunk, me, page, off, n);
    for (done = 0; done < n && 0 == err; done += BATCH) {
        size_t k, m = n - done < BATCH ? n - done : BATCH;
        for (k = 0; k < m; ++k) {
            addr[k] = (char *)base + off[done + k];
            (void)*(volatile char *)addr[k]; /* map it: move_pages sees mapped pages */
        }
        if (0 != syscall(SYS_move_pages, 0, (unsigned long)m, addr, NULL, status + done, 0)) {
            err = errno;
        }
    }
    if (0 == err) {
        llrdma_ar_numa_census(status, n, node, &census);
        opal_output_verbose(5, c->output,
                            "coll:llrdma: %s: rank %d runs on NUMA node %d (cpu %d); its arena "
                            "slots: %lu pages, %lu on node %d, %lu on other nodes (most on node "
                            "%d), %lu not resident",
                            comm->c_name, ompi_comm_rank(comm), node, cpu,
                            (unsigned long)census.pages, (unsigned long)census.local, node,
                            (unsigned long)census.remote, census.remote_node,
                            (unsigned long)census.unknown);
    }
free_arrays:
    free(off);
    free(status);
    if (0 != err) {
        opal_output_verbose(5, c->output,
                            "coll:llrdma: %s: rank %d runs on NUMA node %d; where its arena slots "
                            "live is unknown (move_pages: %s)",
                            comm->c_name, ompi_comm_rank(comm), node, strerror(err));
    }
}
