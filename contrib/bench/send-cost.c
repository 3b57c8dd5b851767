/*
 * send-cost: blocking 8-byte ping-pongs between ranks 0 and 1, the loop that
 * contrib/bench/send-cost.sh runs under valgrind's callgrind to count the
 * user-space instructions of one send (MPI_Send, the BTL's send entry, UCX's
 * am_short).  Every message is checked; a rank prints
 * "send-cost rank R: PASS sends S" (S: its MPI_Send calls) or a FAIL line.
 *
 *   send-cost ITERS [SIZE]
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rank, iters, size = 8, bad = 0, sends = 0;
    unsigned char buf[4096];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    iters = argc > 1 ? atoi(argv[1]) : 2000;
    if (argc > 2) {
        size = atoi(argv[2]);
    }
    if (iters < 1 || size < 4 || size > (int)sizeof(buf)) {
        fprintf(stderr, "usage: send-cost ITERS [SIZE 4..4096]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int it = 0; it < iters && rank < 2; ++it) {
        uint32_t want = (uint32_t)it * 2654435761u, got;
        if (0 == rank) {
            memset(buf, (int)(it & 0xff), (size_t)size);
            memcpy(buf, &want, sizeof(want));
            MPI_Send(buf, size, MPI_BYTE, 1, 7, MPI_COMM_WORLD);
            ++sends;
            MPI_Recv(buf, size, MPI_BYTE, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, size, MPI_BYTE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, size, MPI_BYTE, 0, 7, MPI_COMM_WORLD);
            ++sends;
        }
        memcpy(&got, buf, sizeof(got));
        if (got != want || buf[size - 1] != (unsigned char)(it & 0xff)) {
            ++bad;
        }
    }
    if (bad) {
        printf("send-cost rank %d: FAIL %d of %d messages wrong\n", rank, bad, iters);
    } else {
        printf("send-cost rank %d: PASS sends %d\n", rank, sends);
    }
    MPI_Finalize();
    return bad ? 1 : 0;
}
