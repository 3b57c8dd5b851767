/*
 * btl/llrdma's message-size histogram on a known size mix (tests/softroce/
 * test-btl-hist.sh), read through MPI_T as a tool would.  Two ranks, hint 4K:
 *
 *   1. warm-up: 1 B and 20000 B each way (connects both paths; buckets 0
 *      and 15, which the mix does not use), barrier;
 *   2. the mix, rank 0 to rank 1 with MPI_Send: N200 x 200 B, N3000 x 3000 B
 *      (low-latency path, buckets 8 and 12), N6000 x 6000 B and N40000 x
 *      40000 B (bandwidth path, buckets 13 and 16); every message is one
 *      eager fragment, ob1 sends nothing back, so the counters' deltas over
 *      the mix are exact: rank 0 expects exactly these, rank 1 zero;
 *   3. a stalled receiver: rank 1 sleeps while rank 0 MPI_Isends NSTALL x
 *      200 B, more than the connection has credits: bucket 8 grows by
 *      exactly NSTALL and the low-latency path records waits.
 *
 * Each rank checks its own deltas against these constants (not through the
 * code under test), prints "t_hist rank R: PASS" or FAIL lines, and exits 1
 * on a failure.  The counts also reach the finalize dump, which the script
 * checks with awk and llrdma-hint recommend.
 */
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NB 32 /* LLRDMA_HIST_BUCKETS, restated: the test does not trust the header */
enum { N200 = 400, N3000 = 300, N6000 = 60, N40000 = 40, NSTALL = 600 };

static int rank, fails;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void fail(const char *fmt, ...)
{
    va_list ap;
    printf("t_hist rank %d: FAIL ", rank);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    ++fails;
}

typedef struct {
    MPI_T_pvar_handle h;
    int count;
} pvar_t;

static MPI_T_pvar_session session;

static int pvar_open(const char *name, pvar_t *p)
{
    int idx, rc = MPI_T_pvar_get_index(name, MPI_T_PVAR_CLASS_COUNTER, &idx);
    if (MPI_SUCCESS != rc) {
        fail("MPI_T has no counter %s (rc %d): is btl/llrdma active?", name, rc);
        return -1;
    }
    if (MPI_SUCCESS != MPI_T_pvar_handle_alloc(session, idx, NULL, &p->h, &p->count)) {
        fail("MPI_T_pvar_handle_alloc(%s) failed", name);
        return -1;
    }
    return 0;
}

static void pvar_read(pvar_t *p, unsigned long long *v)
{
    if (MPI_SUCCESS != MPI_T_pvar_read(session, p->h, v)) {
        fail("MPI_T_pvar_read failed");
    }
}

typedef struct {
    unsigned long long ll[NB], bw[NB], ll_waits, bw_waits;
} snap_t;

static pvar_t ll_count, bw_count, ll_waits, bw_waits;

static void snap(snap_t *s)
{
    pvar_read(&ll_count, s->ll);
    pvar_read(&bw_count, s->bw);
    pvar_read(&ll_waits, &s->ll_waits);
    pvar_read(&bw_waits, &s->bw_waits);
}

/* Deltas must be exactly `want_ll` / `want_bw` (NULL: all zero). */
static void expect(const char *phase, const snap_t *a, const snap_t *b, const long *want_ll,
                   const long *want_bw)
{
    for (int k = 0; k < NB; ++k) {
        long dl = (long)(b->ll[k] - a->ll[k]), db = (long)(b->bw[k] - a->bw[k]);
        long wl = want_ll ? want_ll[k] : 0, wb = want_bw ? want_bw[k] : 0;
        if (dl != wl || db != wb) {
            fail("%s: bucket %d: low-latency %ld (want %ld), bandwidth %ld (want %ld)", phase, k,
                 dl, wl, db, wb);
        }
    }
}

int main(int argc, char **argv)
{
    static char buf[40000];
    static char big[NSTALL][200];
    MPI_Request req[NSTALL];
    long want_ll[NB] = {0}, want_bw[NB] = {0};
    snap_t s0, s1, s2;
    int provided, nranks, peer;

    (void)argc;
    (void)argv;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (2 != nranks) {
        fail("needs 2 ranks, got %d", nranks);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    peer = 1 - rank;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MPI_T_pvar_session_create(&session);
    if (pvar_open("btl_llrdma_ll_frag_count", &ll_count) ||
        pvar_open("btl_llrdma_bw_frag_count", &bw_count) ||
        pvar_open("btl_llrdma_ll_send_waits", &ll_waits) ||
        pvar_open("btl_llrdma_bw_send_waits", &bw_waits)) {
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (NB != ll_count.count || NB != bw_count.count || 1 != ll_waits.count) {
        fail("pvar counts %d/%d/%d, want 32/32/1", ll_count.count, bw_count.count, ll_waits.count);
    }

    /* 1. Warm-up: both paths connected. */
    memset(buf, 1, sizeof(buf));
    for (int i = 0; i < 2; ++i) {
        int n = 0 == i ? 1 : 20000;
        if (0 == rank) {
            MPI_Send(buf, n, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, n, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, n, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, n, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* 2. The mix. */
    snap(&s0);
    {
        static const int size[4] = {200, 3000, 6000, 40000}, n[4] = {N200, N3000, N6000, N40000};
        for (int k = 0; k < 4; ++k) {
            for (int i = 0; i < n[k]; ++i) {
                if (0 == rank) {
                    MPI_Send(buf, size[k], MPI_CHAR, peer, 2, MPI_COMM_WORLD);
                } else {
                    MPI_Status st;
                    int got;
                    MPI_Recv(buf, size[k], MPI_CHAR, peer, 2, MPI_COMM_WORLD, &st);
                    MPI_Get_count(&st, MPI_CHAR, &got);
                    if (got != size[k]) {
                        fail("message %d of size %d arrived with %d bytes", i, size[k], got);
                    }
                }
            }
        }
    }
    snap(&s1);
    if (0 == rank) {
        want_ll[8] = N200;
        want_ll[12] = N3000;
        want_bw[13] = N6000;
        want_bw[16] = N40000;
        expect("mix", &s0, &s1, want_ll, want_bw);
    } else {
        expect("mix (receiver)", &s0, &s1, NULL, NULL);
    }
    if (s1.ll_waits < s0.ll_waits || s1.bw_waits < s0.bw_waits) {
        fail("waits went down");
    }

    /* 3. A receiver that does not progress: credits run out, sends wait.
     * The barrier's own messages are not part of it. */
    MPI_Barrier(MPI_COMM_WORLD);
    snap(&s1);
    if (0 == rank) {
        for (int i = 0; i < NSTALL; ++i) {
            MPI_Isend(big[i], 200, MPI_CHAR, peer, 3, MPI_COMM_WORLD, &req[i]);
        }
        snap(&s2);
        MPI_Waitall(NSTALL, req, MPI_STATUSES_IGNORE);
        memset(want_ll, 0, sizeof(want_ll));
        want_ll[8] = NSTALL;
        expect("stalled receiver", &s1, &s2, want_ll, NULL);
        if (s2.ll_waits - s1.ll_waits < 1 || s2.ll_waits - s1.ll_waits > NSTALL) {
            fail("stalled receiver: %llu low-latency waits, want 1..%d", s2.ll_waits - s1.ll_waits,
                 NSTALL);
        }
        printf("t_hist rank 0: stalled receiver: %llu of %d sends waited\n",
               s2.ll_waits - s1.ll_waits, NSTALL);
    } else {
        sleep(1);
        for (int i = 0; i < NSTALL; ++i) {
            MPI_Recv(big[i], 200, MPI_CHAR, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    }
    MPI_T_pvar_session_free(&session);
    MPI_T_finalize();
    printf("t_hist rank %d: %s\n", rank, fails ? "FAIL" : "PASS");
    fflush(stdout);
    MPI_Finalize();
    return fails ? 1 : 0;
}
