/*
 * MPI_Alltoall across nodes, every byte checked by the rank that receives it
 * (tests/cluster/test-alltoall4.sh): for each block size given on the
 * command line, ITERS calls whose contents depend on sender, receiver, byte
 * and call (a block delivered to the wrong rank, from the wrong rank, late
 * or twice does not pass).  No verdict travels through MPI: each rank prints
 * "t_alltoall rank R: PASS (B bytes checked)" or FAIL lines and exits 1.
 *   t_alltoall ITERS SIZE...
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char expect(int src, int dst, size_t i, int iter)
{
    return (unsigned char)(src * 131 + dst * 17 + (int)(i % 251) * 7 + iter * 29 + (int)(i >> 8));
}

int main(int argc, char **argv)
{
    int rank, nranks, fails = 0, iters;
    unsigned long long checked = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (argc < 3 || (iters = atoi(argv[1])) < 1) {
        if (0 == rank) {
            fprintf(stderr, "usage: t_alltoall ITERS SIZE...\n");
        }
        MPI_Finalize();
        return 2;
    }
    for (int a = 2; a < argc; ++a) {
        size_t s = (size_t)strtoull(argv[a], NULL, 10), n = s * (size_t)nranks;
        unsigned char *sb = malloc(n ? n : 1), *rb = malloc(n ? n : 1);
        if (NULL == sb || NULL == rb) {
            fprintf(stderr, "t_alltoall rank %d: FAIL: no memory for %zu bytes\n", rank, n);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        for (int it = 0; it < iters; ++it) {
            for (int d = 0; d < nranks; ++d) {
                for (size_t i = 0; i < s; ++i) {
                    sb[(size_t)d * s + i] = expect(rank, d, i, it);
                }
            }
            memset(rb, 0xA5, n);
            int rc = MPI_Alltoall(sb, (int)s, MPI_BYTE, rb, (int)s, MPI_BYTE, MPI_COMM_WORLD);
            if (MPI_SUCCESS != rc) {
                fprintf(stderr, "t_alltoall rank %d: FAIL: %zu-byte blocks, call %d: rc %d\n", rank,
                        s, it, rc);
                ++fails;
                continue;
            }
            for (int src = 0; src < nranks; ++src) {
                for (size_t i = 0; i < s; ++i) {
                    if (rb[(size_t)src * s + i] != expect(src, rank, i, it)) {
                        if (fails++ < 10) {
                            fprintf(stderr,
                                    "t_alltoall rank %d: FAIL: %zu-byte blocks, call %d: byte %zu "
                                    "from rank %d is %u, not %u\n",
                                    rank, s, it, i, src, rb[(size_t)src * s + i],
                                    expect(src, rank, i, it));
                        }
                        break;
                    }
                }
            }
            checked += n;
        }
        free(sb);
        free(rb);
    }
    MPI_Finalize();
    if (fails) {
        fprintf(stderr, "t_alltoall rank %d: FAIL (%d failed checks)\n", rank, fails);
        return 1;
    }
    printf("t_alltoall rank %d: PASS (%llu bytes checked, %d ranks)\n", rank, checked, nranks);
    return 0;
}
