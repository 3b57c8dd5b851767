/*
 * Passes a token around the ring and runs a small MPI_Allreduce: proves the
 * job runs over Open MPI's other BTLs when btl/llrdma disqualifies itself.
 * A rank that sees a wrong value aborts the job (FAIL line, nonzero exit);
 * every rank that got through prints "t_ring rank R: PASS".
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size, token = 0, sum = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int round = 0; round < 3; ++round) {
        if (0 == rank) {
            token = round * 100;
            if (size > 1) {
                MPI_Send(&token, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
                MPI_Recv(&token, 1, MPI_INT, size - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
            if (token != round * 100 + size - 1) {
                fprintf(stderr, "t_ring rank %d: FAIL: token %d\n", rank, token);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        } else {
            MPI_Recv(&token, 1, MPI_INT, rank - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            token += 1;
            MPI_Send(&token, 1, MPI_INT, (rank + 1) % size, 0, MPI_COMM_WORLD);
        }
    }
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (sum != size * (size - 1) / 2) {
        fprintf(stderr, "t_ring rank %d: FAIL: allreduce %d\n", rank, sum);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Finalize();
    printf("t_ring rank %d: PASS (%d ranks)\n", rank, size);
    return 0;
}
