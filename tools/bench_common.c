/*
 * bench_common.c -- option parsing, size lists and MPI helpers shared by the
 * llrdma-bench modes.
 */
#include <mpi.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "llrdma.h"
#include "llrdma_core.h"

void bench_usage_error(const char *mode, const char *fmt, ...)
{
    va_list ap;

    if (!bench_early_printer()) {
        bench_early_wait(); /* under mpirun: rank 0 says it once */
        return;
    }
    fprintf(stderr, "llrdma-bench: %s%s", mode ? mode : "", mode ? ": " : "");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'llrdma-bench --help'.\n");
}

int bench_opt(const char *arg, const char *name)
{
    size_t n = strlen(name);
    return 0 == strncmp(arg, name, n) && ('\0' == arg[n] || '=' == arg[n]);
}

const char *bench_optarg(const char *mode, int argc, char **argv, int *i)
{
    const char *eq = strchr(argv[*i], '=');

    if (0 == strncmp(argv[*i], "--", 2) && NULL != eq) {
        return eq + 1; /* --opt=value */
    }
    if (*i + 1 >= argc) {
        bench_usage_error(mode, "option %s needs a value", argv[*i]);
        return NULL;
    }
    ++*i;
    return argv[*i];
}

int bench_parse_long(const char *mode, const char *opt, const char *text, long min, long max,
                     long *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(text, &end, 10);
    if ('\0' == *text || '\0' != *end || 0 != errno || isspace((unsigned char)*text)) {
        bench_usage_error(mode, "%s '%s': not an integer", opt, text);
        return -1;
    }
    if (v < min || v > max) {
        bench_usage_error(mode, "%s '%s': must be between %ld and %ld", opt, text, min, max);
        return -1;
    }
    *out = v;
    return 0;
}

int bench_parse_bytes(const char *mode, const char *opt, const char *text, uint64_t max,
                      uint64_t *out)
{
    char err[256];

    if (LLRDMA_OK != llrdma_parse_size(text, max, out, err, sizeof(err))) {
        bench_usage_error(mode, "%s: %s", opt, err); /* err quotes the text */
        return -1;
    }
    return 0;
}

/* mpirun 5 (PRRTE) ends the whole job at the first non-zero exit: a rank
 * leaving the message to rank 0 gives it time to print before ending (seen
 * in tests/mpi/test-bench.sh: rank 0's line lost in 3 of 5 runs). */
void bench_early_wait(void)
{
    struct timespec ts = {2, 0};
    while (0 != nanosleep(&ts, &ts) && EINTR == errno) {
    }
}

int bench_early_printer(void)
{
    static const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};

    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); ++i) {
        const char *v = getenv(vars[i]);
        if (NULL != v) {
            return 0 == strcmp(v, "0");
        }
    }
    return 1;
}

void bench_size_label(uint64_t bytes, char *buf, size_t len)
{
    const uint64_t k = 1024, m = 1024 * 1024;

    if (bytes >= m && 0 == bytes % m) {
        snprintf(buf, len, "%llu MB", (unsigned long long)(bytes / m));
    } else if (bytes >= k && 0 == bytes % k) {
        snprintf(buf, len, "%llu KB", (unsigned long long)(bytes / k));
    } else {
        snprintf(buf, len, "%llu B", (unsigned long long)bytes);
    }
}

/* ------------------------------------------------------------ size lists */

static int parse_term(const char *mode, const char *opt, const char *tok, bench_size_term_t *t)
{
    char err[256];

    if (0 == strncasecmp(tok, "hint", 4)) {
        const char *rest = tok + 4;
        if ('\0' == *rest) {
            t->kind = BENCH_SZ_HINT_ADD;
            t->value = 0;
            return 0;
        }
        switch (*rest) {
        case '+':
            t->kind = BENCH_SZ_HINT_ADD;
            break;
        case '-':
            t->kind = BENCH_SZ_HINT_SUB;
            break;
        case '*':
            t->kind = BENCH_SZ_HINT_MUL;
            break;
        case '/':
            t->kind = BENCH_SZ_HINT_DIV;
            break;
        default:
            bench_usage_error(mode, "%s: '%s': expected hint, hint+N, hint-N, hint*N or hint/N",
                              opt, tok);
            return -1;
        }
        if (LLRDMA_OK != llrdma_parse_size(rest + 1, BENCH_MAX_SIZE, &t->value, err, sizeof(err))) {
            bench_usage_error(mode, "%s: in '%s': %s", opt, tok, err);
            return -1;
        }
        if ((BENCH_SZ_HINT_MUL == t->kind || BENCH_SZ_HINT_DIV == t->kind) && 0 == t->value) {
            bench_usage_error(mode, "%s: '%s': factor must be at least 1", opt, tok);
            return -1;
        }
        return 0;
    }
    t->kind = BENCH_SZ_ABS;
    if (LLRDMA_OK != llrdma_parse_size(tok, BENCH_MAX_SIZE, &t->value, err, sizeof(err))) {
        bench_usage_error(mode, "%s: %s", opt, err);
        return -1;
    }
    return 0;
}

int bench_parse_size_list(const char *mode, const char *opt, const char *text,
                          bench_size_spec_t *spec)
{
    char *copy = strdup(text), *save = NULL, *tok;
    int rc = 0, any = 0;

    if (NULL == copy) {
        return -1;
    }
    for (tok = strtok_r(copy, ",", &save); NULL != tok; tok = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*tok)) {
            ++tok;
        }
        for (char *e = tok + strlen(tok); e > tok && isspace((unsigned char)e[-1]); --e) {
            e[-1] = '\0';
        }
        if (spec->nterms >= BENCH_MAX_SIZES) {
            bench_usage_error(mode, "%s '%s': more than %d sizes", opt, text, BENCH_MAX_SIZES);
            rc = -1;
            break;
        }
        if (0 != parse_term(mode, opt, tok, &spec->terms[spec->nterms])) {
            rc = -1;
            break;
        }
        ++spec->nterms;
        any = 1;
    }
    if (0 == rc && !any) {
        bench_usage_error(mode, "%s '%s': empty size list", opt, text);
        rc = -1;
    }
    free(copy);
    return rc;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Appends v to out[*n] unless full; -1 when full. */
static int push(uint64_t *out, int *n, uint64_t v)
{
    if (*n >= BENCH_MAX_SIZES) {
        return -1;
    }
    out[(*n)++] = v;
    return 0;
}

int bench_resolve_sizes(const bench_size_spec_t *spec, uint64_t dmin, uint64_t dmax, uint64_t hint,
                        uint64_t *out, int *dropped)
{
    int n = 0, m = 0;

    *dropped = 0;
    if (spec->nterms > 0) {
        for (int i = 0; i < spec->nterms; ++i) {
            const bench_size_term_t *t = &spec->terms[i];
            uint64_t v = 0;
            int ok = 1;
            if (BENCH_SZ_ABS != t->kind && 0 == hint) {
                ++*dropped;
                continue;
            }
            switch (t->kind) {
            case BENCH_SZ_ABS:
                v = t->value;
                break;
            case BENCH_SZ_HINT_ADD:
                v = hint + t->value;
                break;
            case BENCH_SZ_HINT_SUB:
                ok = t->value <= hint;
                v = hint - t->value;
                break;
            case BENCH_SZ_HINT_MUL:
                ok = hint <= BENCH_MAX_SIZE / t->value;
                v = hint * t->value;
                break;
            case BENCH_SZ_HINT_DIV:
                v = hint / t->value;
                break;
            }
            if (!ok || v > BENCH_MAX_SIZE) {
                ++*dropped;
                continue;
            }
            if (0 != push(out, &n, v)) {
                return -1;
            }
        }
    } else {
        uint64_t lo = spec->have_min ? spec->min : dmin, hi = spec->have_max ? spec->max : dmax;
        if (lo > hi) {
            return -1;
        }
        if (0 == lo) {
            if (0 != push(out, &n, 0)) {
                return -1;
            }
            lo = 1;
        }
        for (uint64_t s = lo; s <= hi; s *= 2) {
            if (0 != push(out, &n, s)) {
                return -1;
            }
        }
    }
    if (spec->around_hint && hint > 0) {
        if (0 != push(out, &n, hint - 1) || 0 != push(out, &n, hint) ||
            (hint < BENCH_MAX_SIZE && 0 != push(out, &n, hint + 1))) {
            return -1;
        }
    }
    qsort(out, (size_t)n, sizeof(*out), cmp_u64);
    for (int i = 0; i < n; ++i) {
        if (0 == m || out[m - 1] != out[i]) {
            out[m++] = out[i];
        }
    }
    return m;
}

/* ------------------------------------------------------------ MPI helpers */

void bench_describe_rank(int rank, char *buf, size_t len)
{
    char host[256] = "?";
    char *json = malloc(LLRDMA_CONFIG_JSON_MAX);
    llrdma_rank_config_t *cfg = calloc(1, sizeof(*cfg));

    (void)gethostname(host, sizeof(host) - 1);
    if (NULL != json && NULL != cfg &&
        LLRDMA_SUCCESS == llrdma_effective_config_json(json, LLRDMA_CONFIG_JSON_MAX) &&
        LLRDMA_OK == llrdma_config_from_json(json, cfg)) {
        snprintf(buf, len, "rank%d host=%s size_hint=%llu source=%s btl_status=%s%s%s", rank, host,
                 (unsigned long long)cfg->hint.bytes, llrdma_source_name(cfg->hint.source),
                 cfg->btl_status, cfg->device.name[0] ? " device=" : "", cfg->device.name);
    } else {
        snprintf(buf, len,
                 "rank%d host=%s llrdma not loaded (size_hint from environment=%llu; "
                 "Open MPI's own transports)",
                 rank, host, (unsigned long long)llrdma_get_size_hint());
    }
    free(cfg);
    free(json);
}

long bench_gather_errors(long errors, int root)
{
    int me, n;
    long *all, sum = 0;

    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    all = root == me ? calloc((size_t)n, sizeof(long)) : NULL;
    if (root == me && NULL == all) {
        return errors; /* the exit statuses still tell */
    }
    MPI_Gather(&errors, 1, MPI_LONG, all, 1, MPI_LONG, root, MPI_COMM_WORLD);
    if (root != me) {
        return errors;
    }
    for (int i = 0; i < n; ++i) {
        sum += all[i];
    }
    free(all);
    return sum;
}

void bench_print_ranks(FILE *fp, int root, const int *ranks, int n)
{
    char line[BENCH_LINE_MAX];
    int me;

    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    for (int i = 0; i < n; ++i) {
        if (ranks[i] == me && me != root) {
            bench_describe_rank(me, line, sizeof(line));
            MPI_Send(line, (int)strlen(line) + 1, MPI_CHAR, root, 9001, MPI_COMM_WORLD);
        } else if (me == root) {
            if (ranks[i] == root) {
                bench_describe_rank(me, line, sizeof(line));
            } else {
                MPI_Recv(line, (int)sizeof(line), MPI_CHAR, ranks[i], 9001, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
            }
            fprintf(fp, "# %s\n", line);
        }
    }
    if (me == root) {
        const char *btl = getenv("OMPI_MCA_btl");
        fprintf(fp, "# btl selection: %s\n", btl ? btl : "Open MPI default (all available)");
        fflush(fp);
    }
}

void *bench_alloc(size_t bytes)
{
    void *p = NULL;

    if (0 == bytes) {
        bytes = 1;
    }
    if (0 != posix_memalign(&p, 4096, bytes)) {
        return NULL;
    }
    memset(p, 0, bytes); /* fault the pages in before timing */
    return p;
}

int bench_check_size_spec(const char *mode, const bench_size_spec_t *spec)
{
    if (spec->nterms > 0 && (spec->have_min || spec->have_max)) {
        bench_usage_error(mode, "--sizes and --min/--max exclude each other");
        return -1;
    }
    if (spec->have_min && spec->have_max && spec->min > spec->max) {
        bench_usage_error(mode, "--min %llu is above --max %llu", (unsigned long long)spec->min,
                          (unsigned long long)spec->max);
        return -1;
    }
    return 0;
}

int bench_parse_size_option(const char *mode, const char *opt, const char *val,
                            bench_size_spec_t *spec)
{
    uint64_t u;

    int is_min = bench_opt(opt, "--min");

    if (bench_opt(opt, "--sizes")) {
        return bench_parse_size_list(mode, "--sizes", val, spec);
    }
    if (0 != bench_parse_bytes(mode, is_min ? "--min" : "--max", val, BENCH_MAX_SIZE, &u)) {
        return -1;
    }
    if (is_min) {
        spec->have_min = 1;
        spec->min = u;
    } else {
        spec->have_max = 1;
        spec->max = u;
    }
    return 0;
}
