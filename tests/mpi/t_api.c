/*
 * MPI test program for the public API (llrdma.h) and MPI_T access.
 *
 *   t_api set VALUE           llrdma_set_size_hint(VALUE) before MPI_Init, then
 *                             expect it in effect (source api) and the setter
 *                             refused after MPI_Init
 *   t_api alias VALUE         the report's names, same as "set"
 *   t_api expect VALUE SOURCE after MPI_Init, hint == VALUE from SOURCE
 *   t_api mpit                print btl_llrdma_size_hint read through MPI_T
 *   t_api gradient            llrdma_hint_for_gradient edge cases
 *
 * Each rank prints "t_api rank R: PASS" on success; a failing rank prints a
 * FAIL line with the reason and exits 1 (MPI_Abort once MPI is initialised).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llrdma.h"

static int rank = -1; /* in MPI_COMM_WORLD; before MPI_Init what mpirun says, if anything */

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "t_api rank %d: FAIL: ", rank);                                            \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
        MPI_Abort(MPI_COMM_WORLD, 1);                                                              \
    } while (0)

static int json_has(const char *json, const char *needle)
{
    return NULL != strstr(json, needle);
}

static void expect_effective(size_t value, const char *source)
{
    char json[8192], needle[128];
    if (llrdma_get_size_hint() != value) {
        FAIL("llrdma_get_size_hint() = %zu, expected %zu", llrdma_get_size_hint(), value);
    }
    if (LLRDMA_SUCCESS != llrdma_effective_config_json(json, sizeof(json))) {
        FAIL("llrdma_effective_config_json failed: llrdma not loaded?");
    }
    snprintf(needle, sizeof(needle), "\"source\":\"%s\"", source);
    if (!json_has(json, needle)) {
        FAIL("expected %s in %s", needle, json);
    }
}

static int set_mode(size_t v, int aliases)
{
    int rc = aliases ? set_low_latency_rdma_size_hint(v) : llrdma_set_size_hint(v);
    if (LLRDMA_SUCCESS != rc) {
        fprintf(stderr, "t_api rank %d: FAIL: setter before MPI_Init returned %d\n", rank, rc);
        return 1;
    }
    if ((aliases ? get_low_latency_rdma_size_hint() : llrdma_get_size_hint()) != v) {
        fprintf(stderr, "t_api rank %d: FAIL: getter before MPI_Init does not see %zu\n", rank, v);
        return 1;
    }
    MPI_Init(NULL, NULL);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    expect_effective(v, "api");
    rc = aliases ? set_low_latency_rdma_size_hint(v + 1) : llrdma_set_size_hint(v + 1);
    if (LLRDMA_ERR_FIXED != rc) {
        FAIL("setter after MPI_Init returned %d, expected LLRDMA_ERR_FIXED (%s)", rc,
             llrdma_strerror(LLRDMA_ERR_FIXED));
    }
    if (llrdma_get_size_hint() != v) {
        FAIL("refused setter changed the hint");
    }
    return 0;
}

/* MPI_T before MPI_Init: MPI_T_init_thread registers every component's
 * variables.  (After MPI_Init the variable exists only while btl/llrdma is
 * loaded; without a device it unloads itself, see docs/hint.md.) */
static int mpit_mode(void)
{
    int provided, idx, count;
    MPI_T_cvar_handle h;
    char value[256] = "";

    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    if (MPI_SUCCESS != MPI_T_cvar_get_index("btl_llrdma_size_hint", &idx)) {
        fprintf(stderr, "t_api rank %d: FAIL: MPI_T_cvar_get_index(btl_llrdma_size_hint) failed\n",
                rank);
        return 1;
    }
    MPI_T_cvar_handle_alloc(idx, NULL, &h, &count);
    MPI_T_cvar_read(h, value);
    MPI_T_cvar_handle_free(&h);
    MPI_T_finalize();
    printf("t_api: MPI_T btl_llrdma_size_hint = '%s'\n", value);
    return 0;
}

static void gradient_mode(void)
{
    struct {
        size_t grad;
        int ranks;
        double headroom;
        size_t want;
    } t[] = {
        {8 << 20, 8, 0.2, 1258292}, /* 1 MiB * 1.2 rounded up */
        {1000, 4, 0.0, 250},        {1000, 3, 0.0, 334},
        {1000, 0, 0.2, 0},          {1000, -2, 0.2, 0},
        {1000, 4, -1.0, 250},       {(size_t)-1, 1, 0.2, LLRDMA_SIZE_HINT_MAX},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); ++i) {
        size_t got = llrdma_hint_for_gradient(t[i].grad, t[i].ranks, t[i].headroom);
        if (got != t[i].want) {
            FAIL("llrdma_hint_for_gradient(%zu, %d, %g) = %zu, expected %zu", t[i].grad, t[i].ranks,
                 t[i].headroom, got, t[i].want);
        }
    }
}

int main(int argc, char **argv)
{
    if (getenv("OMPI_COMM_WORLD_RANK")) {
        rank = atoi(getenv("OMPI_COMM_WORLD_RANK"));
    }
    if (argc == 3 && (0 == strcmp(argv[1], "set") || 0 == strcmp(argv[1], "alias"))) {
        if (set_mode(strtoull(argv[2], NULL, 0), 0 == strcmp(argv[1], "alias"))) {
            return 1;
        }
    } else if (argc == 4 && 0 == strcmp(argv[1], "expect")) {
        MPI_Init(NULL, NULL);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        expect_effective(strtoull(argv[2], NULL, 0), argv[3]);
    } else if (argc == 2 && 0 == strcmp(argv[1], "mpit")) {
        if (mpit_mode()) {
            return 1;
        }
        MPI_Init(NULL, NULL);
    } else if (argc == 2 && 0 == strcmp(argv[1], "gradient")) {
        MPI_Init(NULL, NULL);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        gradient_mode();
    } else {
        fprintf(stderr, "usage: t_api set|alias VALUE | expect VALUE SOURCE | mpit | gradient\n");
        return 2;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    printf("t_api rank %d: PASS\n", rank);
    return 0;
}
