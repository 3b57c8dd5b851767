/*
 * xcore-latency: the floor under a 2-rank small Allreduce on one node, with
 * no MPI: two threads pinned to two CPUs hand a 64-byte line to each other.
 *   exchange:  both write their line, then wait for the other's (what each
 *              call of a 2-rank Allreduce does: one transfer each way, in
 *              parallel), ns per round
 *   pingpong:  A writes, B waits and answers, A waits (a round trip), ns
 *              per round
 * Waits poll with a pause instruction, as the arena's do.  Three runs of
 * each; the spread is the machine's (a VM's vCPUs move).
 *   cc -O2 -pthread contrib/bench/xcore-latency.c -o /tmp/xcore-latency
 *   /tmp/xcore-latency [CPU_A CPU_B [ROUNDS]]   (default 0 1 2000000)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static struct {
    _Alignas(64) volatile uint64_t w;
} line[2];
static long rounds;
static int cpu[2], mode; /* 0 exchange, 1 pingpong */

static void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void *side(void *arg)
{
    int me = (int)(intptr_t)arg, other = 1 - me;
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu[me], &s);
    if (0 != pthread_setaffinity_np(pthread_self(), sizeof(s), &s)) {
        fprintf(stderr, "xcore-latency: cannot pin to CPU %d\n", cpu[me]);
        exit(2);
    }
    for (uint64_t i = 1; i <= (uint64_t)rounds; ++i) {
        if (0 == mode || 0 == me) {
            line[me].w = i;
            while (line[other].w < i) {
                relax();
            }
        } else {
            while (line[other].w < i) {
                relax();
            }
            line[me].w = i;
        }
    }
    return NULL;
}

static double run(void)
{
    pthread_t t;
    struct timespec a, b;
    line[0].w = line[1].w = 0;
    clock_gettime(CLOCK_MONOTONIC, &a);
    pthread_create(&t, NULL, side, (void *)(intptr_t)1);
    side((void *)(intptr_t)0);
    pthread_join(t, NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    return ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / (double)rounds;
}

int main(int argc, char **argv)
{
    cpu[0] = argc > 2 ? atoi(argv[1]) : 0;
    cpu[1] = argc > 2 ? atoi(argv[2]) : 1;
    rounds = argc > 3 ? atol(argv[3]) : 2000000;
    if (rounds < 1) {
        fprintf(stderr, "xcore-latency: ROUNDS must be >= 1\n");
        return 2;
    }
    for (mode = 0; mode < 2; ++mode) {
        printf("%-9s CPUs %d,%d:", mode ? "pingpong" : "exchange", cpu[0], cpu[1]);
        for (int k = 0; k < 3; ++k) {
            printf(" %.1f", run());
        }
        printf(" ns per round\n");
    }
    return 0;
}
