/*
 * corrupt_recv.c -- LD_PRELOAD shim for tests/mpi/test-bench.sh: damages one
 * received message behind the program's back, so the test can show that
 * `llrdma-bench bw|bibw --verify` checks every message (not only the first
 * of a window) and exits 1 by itself.
 *
 * On rank LLRDMA_TEST_CORRUPT_RANK (default 1), the LLRDMA_TEST_CORRUPT_NTH-th
 * (1-based) MPI_Irecv is remembered; when the MPI_Waitall that completes it
 * returns, the last byte of its buffer is inverted.  Without the variables it
 * only passes calls through (PMPI).
 */
#include <mpi.h>
#include <stdlib.h>

static long nth = -1, seen;
static int armed = -1; /* -1: not decided yet; 0 off; 1 on */
static MPI_Request target = MPI_REQUEST_NULL;
static unsigned char *target_buf;
static int target_len;

static int enabled(void)
{
    if (armed < 0) {
        const char *n = getenv("LLRDMA_TEST_CORRUPT_NTH");
        const char *r = getenv("LLRDMA_TEST_CORRUPT_RANK");
        const char *me = getenv("OMPI_COMM_WORLD_RANK");
        armed = NULL != n && NULL != me && atoi(me) == (NULL != r ? atoi(r) : 1);
        nth = armed ? atol(n) : -1;
    }
    return armed;
}

int MPI_Irecv(void *buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm,
              MPI_Request *req)
{
    int rc = PMPI_Irecv(buf, count, type, src, tag, comm, req);

    if (enabled() && MPI_SUCCESS == rc && ++seen == nth && MPI_BYTE == type && count > 0) {
        target = *req;
        target_buf = buf;
        target_len = count;
    }
    return rc;
}

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status statuses[])
{
    int hit = 0, rc;

    for (int i = 0; i < n && NULL != target_buf; ++i) {
        hit |= MPI_REQUEST_NULL != target && reqs[i] == target;
    }
    rc = PMPI_Waitall(n, reqs, statuses);
    if (hit && MPI_SUCCESS == rc) {
        target_buf[target_len - 1] ^= 0xff;
        target_buf = NULL;
        target = MPI_REQUEST_NULL;
    }
    return rc;
}
