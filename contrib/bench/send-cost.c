/*
 * send-cost: the loops that contrib/bench/send-cost.sh runs under valgrind's
 * callgrind to count user-space instructions per message.
 *
 *   send-cost ITERS [SIZE]         blocking ping-pongs between ranks 0 and 1:
 *       one send (MPI_Send, the BTL's send entry, UCX's am_short)
 *   send-cost ITERS SIZE drain     ITERS / 16 rounds: rank 1 sends 16 messages
 *       while rank 0 sleeps, then rank 0 receives them all inside drain() (the
 *       function callgrind collects in, after 20 bursts that are not counted):
 *       the receive handling, with every message already there, so next to
 *       no empty polls
 *
 * Every message is checked; a rank prints "send-cost rank R: PASS sends S
 * received M" (S: its MPI_Send calls, M: messages drain() received) or a FAIL
 * line.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DRAIN_BURST 16

static uint32_t want_of(int it)
{
    return (uint32_t)it * 2654435761u;
}

#define DRAIN_WARM 20

/* Receives round's burst; 0 or the number of wrong messages. */
__attribute__((noinline)) static int recv_burst(unsigned char *buf, int size, int round)
{
    int bad = 0;
    for (int i = 0; i < DRAIN_BURST; ++i) {
        int it = round * DRAIN_BURST + i;
        uint32_t got;
        MPI_Recv(buf, size, MPI_BYTE, 1, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        memcpy(&got, buf, sizeof(got));
        bad += got != want_of(it) || buf[size - 1] != (unsigned char)(it & 0xff);
    }
    return bad;
}

/* The callgrind run of the drain mode collects only inside drain(); the
 * warm-up bursts go through drain_warm(), which it does not. */
static volatile int warm_rounds; /* keeps the compiler from folding the two */

__attribute__((noinline)) static int drain_warm(unsigned char *buf, int size, int round)
{
    ++warm_rounds;
    return recv_burst(buf, size, round);
}

__attribute__((noinline)) static int drain(unsigned char *buf, int size, int round)
{
    return recv_burst(buf, size, round);
}

int main(int argc, char **argv)
{
    int rank, iters, size = 8, bad = 0, sends = 0, received = 0, drain_mode;
    unsigned char buf[4096];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    iters = argc > 1 ? atoi(argv[1]) : 2000;
    if (argc > 2) {
        size = atoi(argv[2]);
    }
    drain_mode = argc > 3 && 0 == strcmp(argv[3], "drain");
    if (iters < 1 || size < 4 || size > (int)sizeof(buf) || (argc > 3 && !drain_mode)) {
        fprintf(stderr, "usage: send-cost ITERS [SIZE 4..4096 [drain]]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    /* The first DRAIN_WARM rounds go through drain_warm(), which callgrind
     * does not collect in: the receive queue grows to the burst there. */
    for (int round = 0; drain_mode && round < DRAIN_WARM + iters / DRAIN_BURST && rank < 2;
         ++round) {
        unsigned char ack = 0;
        if (0 == rank) {
            /* Long enough for the burst to arrive from a native rank 1, even
             * when it runs under callgrind too. */
            struct timespec nap = {0, 20 * 1000 * 1000};
            nanosleep(&nap, NULL);
            if (round < DRAIN_WARM) {
                bad += drain_warm(buf, size, round);
            } else {
                bad += drain(buf, size, round);
                received += DRAIN_BURST;
            }
            MPI_Send(&ack, 1, MPI_BYTE, 1, 9, MPI_COMM_WORLD);
            ++sends;
        } else {
            for (int i = 0; i < DRAIN_BURST; ++i) {
                int it = round * DRAIN_BURST + i;
                uint32_t want = want_of(it);
                memset(buf, (int)(it & 0xff), (size_t)size);
                memcpy(buf, &want, sizeof(want));
                MPI_Send(buf, size, MPI_BYTE, 0, 8, MPI_COMM_WORLD);
                ++sends;
            }
            MPI_Recv(&ack, 1, MPI_BYTE, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    }
    for (int it = 0; !drain_mode && it < iters && rank < 2; ++it) {
        uint32_t want = want_of(it), got;
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
        printf("send-cost rank %d: PASS sends %d received %d\n", rank, sends, received);
    }
    MPI_Finalize();
    return bad ? 1 : 0;
}
