/*
 * MPI traffic for the btl/llrdma flow-control system tests (tests/softroce/):
 * many peers at once and peers with different size hints.  Every byte is
 * verified by the rank that receives it; a rank that finds a wrong byte says
 * so and calls MPI_Abort, so the verdict never depends on the transport.
 *
 *   t_flow alltoall ITERS BURST SIZE...
 *       per size: ITERS x MPI_Alltoall, then ITERS x two hand-written
 *       all-to-alls (BURST messages to and from every other rank with
 *       MPI_Isend/MPI_Irecv; the first posts the receives first, the second the
 *       sends, so its messages arrive unexpected)
 *   t_flow pair ITERS BURST SIZE...
 *       ranks 0 and 1: per size, ITERS verified round trips (each side sends its
 *       own pattern), then BURST messages each way at the same time; prints
 *       each rank's effective size hint (mixed-hint runs check it took effect)
 *
 * Each rank prints "t_flow rank R: PASS" when all it received was right, and
 * rank 0 also "t_flow: PASS MODE (N ranks)".
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llrdma.h"

static int rank, nranks;

static void die(const char *what, long a, long b, long c)
{
    fprintf(stderr, "t_flow: FAIL rank %d: %s (%ld, %ld, %ld)\n", rank, what, a, b, c);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Byte i of the message identified by (src, dst, iter, seq) of size n. */
static unsigned char pat(long src, long dst, long iter, long seq, size_t n, size_t i)
{
    uint64_t x = (uint64_t)src * 0x9e3779b97f4a7c15ull ^ (uint64_t)dst * 0xc2b2ae3d27d4eb4full ^
                 (uint64_t)iter * 0x165667b19e3779f9ull ^ (uint64_t)seq * 0x27d4eb2f165667c5ull ^
                 (uint64_t)n * 0x94d049bb133111ebull ^ (uint64_t)i * 0xbf58476d1ce4e5b9ull;
    return (unsigned char)(x >> 56 ^ x >> 23 ^ i);
}

static void fill(unsigned char *p, size_t n, long src, long dst, long iter, long seq)
{
    for (size_t i = 0; i < n; ++i) {
        p[i] = pat(src, dst, iter, seq, n, i);
    }
}

static void check(const unsigned char *p, size_t n, long src, long dst, long iter, long seq)
{
    for (size_t i = 0; i < n; ++i) {
        if (p[i] != pat(src, dst, iter, seq, n, i)) {
            fprintf(stderr,
                    "t_flow: rank %d: %zu-byte message %ld of iteration %ld from rank %ld: byte "
                    "%zu is 0x%02x, expected 0x%02x\n",
                    rank, n, seq, iter, src, i, p[i], pat(src, dst, iter, seq, n, i));
            die("corrupt message (size, source, byte)", (long)n, src, (long)i);
        }
    }
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (NULL == p) {
        die("malloc", (long)n, 0, 0);
    }
    return p;
}

static void check_count(const MPI_Status *st, size_t n, int src)
{
    int count = -1;
    MPI_Get_count(st, MPI_BYTE, &count);
    if ((size_t)count != n || st->MPI_SOURCE != src) {
        die("wrong length or source (bytes, source, expected bytes)", count, st->MPI_SOURCE,
            (long)n);
    }
}

static int alltoall(int iters, int burst, int nsizes, char **sizes)
{
    for (int s = 0; s < nsizes; ++s) {
        size_t n = strtoull(sizes[s], NULL, 0);
        size_t slots = (size_t)nranks * (size_t)burst;
        unsigned char *sb = xmalloc(n * slots), *rb = xmalloc(n * slots);
        MPI_Request *req = xmalloc(sizeof(MPI_Request) * 2 * slots);
        MPI_Status *st = xmalloc(sizeof(MPI_Status) * slots);
        double t0 = MPI_Wtime();

        for (int it = 0; it < iters; ++it) {
            for (int d = 0; d < nranks; ++d) {
                fill(sb + (size_t)d * n, n, rank, d, it, -1);
            }
            memset(rb, 0, n * (size_t)nranks);
            MPI_Alltoall(sb, (int)n, MPI_BYTE, rb, (int)n, MPI_BYTE, MPI_COMM_WORLD);
            for (int d = 0; d < nranks; ++d) {
                check(rb + (size_t)d * n, n, d, rank, it, -1);
            }
        }
        /* Iteration it: receives first (2 it), then sends first (2 it + 1). */
        for (int it = 0; it < 2 * iters; ++it) {
            MPI_Request *rreq = req, *sreq = req + slots;
            int nr = 0, ns = 0;
            for (int d = 0; d < nranks; ++d) {
                for (int b = 0; b < burst; ++b) {
                    fill(sb + ((size_t)d * burst + b) * n, n, rank, d, it, b);
                }
            }
            memset(rb, 0, n * slots);
            for (int phase = 0; phase < 2; ++phase) {
                int recv_phase = it % 2;
                for (int k = 1; k < nranks; ++k) {
                    /* Peers in a rotating order, so no rank is everybody's first. */
                    int sp = (rank + k) % nranks, rp = (rank - k + nranks) % nranks;
                    for (int b = 0; b < burst; ++b) {
                        if (phase == recv_phase) {
                            MPI_Irecv(rb + ((size_t)rp * burst + b) * n, (int)n, MPI_BYTE, rp, 7,
                                      MPI_COMM_WORLD, &rreq[nr++]);
                        } else {
                            MPI_Isend(sb + ((size_t)sp * burst + b) * n, (int)n, MPI_BYTE, sp, 7,
                                      MPI_COMM_WORLD, &sreq[ns++]);
                        }
                    }
                }
            }
            MPI_Waitall(nr, rreq, st);
            MPI_Waitall(ns, sreq, MPI_STATUSES_IGNORE);
            for (int k = 1, q = 0; k < nranks; ++k) {
                int rp = (rank - k + nranks) % nranks;
                for (int b = 0; b < burst; ++b, ++q) {
                    check_count(&st[q], n, rp);
                    check(rb + ((size_t)rp * burst + b) * n, n, rp, rank, it, b);
                }
            }
        }
        if (0 == rank) {
            printf("t_flow: %8zu bytes: %d MPI_Alltoall + %d x %d messages per peer pair, "
                   "verified (%.2f s)\n",
                   n, iters, 2 * iters, burst, MPI_Wtime() - t0);
            fflush(stdout);
        }
        free(st);
        free(req);
        free(rb);
        free(sb);
    }
    return 0;
}

static int pair(int iters, int burst, int nsizes, char **sizes)
{
    int peer = rank ^ 1;
    uint64_t mine = llrdma_get_size_hint(), theirs = 0;

    if (nranks < 2 || rank > 1) {
        return 0; /* ranks 2.. idle */
    }
    MPI_Sendrecv(&mine, 1, MPI_UINT64_T, peer, 1, &theirs, 1, MPI_UINT64_T, peer, 1, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    if (0 == rank) {
        printf("t_flow: rank 0 size hint %llu, rank 1 size hint %llu\n", (unsigned long long)mine,
               (unsigned long long)theirs);
        fflush(stdout);
    }
    for (int s = 0; s < nsizes; ++s) {
        size_t n = strtoull(sizes[s], NULL, 0);
        unsigned char *sb = xmalloc(n * (size_t)burst), *rb = xmalloc(n * (size_t)burst);
        MPI_Request *req = xmalloc(sizeof(MPI_Request) * 2 * (size_t)burst);
        MPI_Status *st = xmalloc(sizeof(MPI_Status) * 2 * (size_t)burst);
        MPI_Status one;
        double t0 = MPI_Wtime();

        for (int it = 0; it < iters; ++it) {
            if (0 == rank) {
                fill(sb, n, rank, peer, it, 0);
                MPI_Send(sb, (int)n, MPI_BYTE, peer, 2, MPI_COMM_WORLD);
                MPI_Recv(rb, (int)n, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &one);
            } else {
                MPI_Recv(rb, (int)n, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &one);
                fill(sb, n, rank, peer, it, 0);
                MPI_Send(sb, (int)n, MPI_BYTE, peer, 2, MPI_COMM_WORLD);
            }
            check_count(&one, n, peer);
            check(rb, n, peer, rank, it, 0);
        }
        for (int b = 0; b < burst; ++b) {
            fill(sb + (size_t)b * n, n, rank, peer, iters, b + 1);
        }
        memset(rb, 0, n * (size_t)burst);
        for (int b = 0; b < burst; ++b) {
            MPI_Irecv(rb + (size_t)b * n, (int)n, MPI_BYTE, peer, 3, MPI_COMM_WORLD, &req[b]);
        }
        for (int b = 0; b < burst; ++b) {
            MPI_Isend(sb + (size_t)b * n, (int)n, MPI_BYTE, peer, 3, MPI_COMM_WORLD,
                      &req[burst + b]);
        }
        MPI_Waitall(2 * burst, req, st);
        for (int b = 0; b < burst; ++b) {
            check_count(&st[b], n, peer);
            check(rb + (size_t)b * n, n, peer, rank, iters, b + 1);
        }
        if (0 == rank) {
            printf("t_flow: %8zu bytes: %d round trips + %d each way at once, verified (%.3f s)\n",
                   n, iters, burst, MPI_Wtime() - t0);
            fflush(stdout);
        }
        free(st);
        free(req);
        free(rb);
        free(sb);
    }
    return 0;
}

int main(int argc, char **argv)
{
    int rc = 2;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc >= 5 && 0 == strcmp(argv[1], "alltoall")) {
        rc = alltoall(atoi(argv[2]), atoi(argv[3]), argc - 4, argv + 4);
    } else if (argc >= 5 && 0 == strcmp(argv[1], "pair")) {
        rc = pair(atoi(argv[2]), atoi(argv[3]), argc - 4, argv + 4);
    } else if (0 == rank) {
        fprintf(stderr, "usage: t_flow alltoall ITERS BURST SIZE... | pair ITERS BURST SIZE...\n");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    if (0 == rc) {
        /* Each rank's own verdict on what it received. */
        printf("t_flow rank %d: PASS\n", rank);
        if (0 == rank) {
            printf("t_flow: PASS %s (%d ranks)\n", argv[1], nranks);
        }
    }
    return rc;
}
