/*
 * bench.h -- shared declarations of llrdma-bench (see docs/bench.md).
 *
 * Modes: pingpong, bw, bibw, allreduce and incast are MPI programs (launched by mpirun); sweep
 * and allreduce-compare are plain drivers that relaunch the tool under mpirun
 * once per size hint / coll component and tabulate the CSV the runs print.
 */
#ifndef LLRDMA_BENCH_H
#define LLRDMA_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit status (documented in --help). */
#define BENCH_EXIT_OK 0
#define BENCH_EXIT_VERIFY 1      /* --verify (incast: always) found wrong or missing data */
#define BENCH_EXIT_USAGE 2       /* bad command line */
#define BENCH_EXIT_RUNTIME 3     /* MPI/launch/allocation failure, a relaunched run failed */
#define BENCH_EXIT_UNSUPPORTED 4 /* --device in a build without CUDA */

#define BENCH_MAX_SIZE ((uint64_t)1 << 30) /* largest message: 1 GiB */
#define BENCH_MAX_SIZES 256                /* sizes per run */
#define BENCH_LINE_MAX 1024

/* ------------------------------------------------------------ size lists */

/* One element of --sizes: an absolute size or an expression of the size hint
 * (resolved after MPI_Init, when the effective hint is known). */
typedef enum {
    BENCH_SZ_ABS = 0,
    BENCH_SZ_HINT_ADD, /* hint+N (hint = hint+0) */
    BENCH_SZ_HINT_SUB, /* hint-N */
    BENCH_SZ_HINT_MUL, /* hint*N */
    BENCH_SZ_HINT_DIV  /* hint/N */
} bench_size_kind_t;

typedef struct {
    bench_size_kind_t kind;
    uint64_t value;
} bench_size_term_t;

typedef struct {
    bench_size_term_t terms[BENCH_MAX_SIZES];
    int nterms;      /* > 0: --sizes given */
    int have_min;    /* --min given */
    int have_max;    /* --max given */
    uint64_t min;    /* --min (powers of two from min to max) */
    uint64_t max;    /* --max */
    int around_hint; /* add hint-1, hint, hint+1 */
} bench_size_spec_t;

/* Parse "8,256,1K,hint-1,hint,hint+1" for option `opt`.  On error prints
 * "llrdma-bench: MODE: OPT 'TEXT': reason" and returns -1. */
int bench_parse_size_list(const char *mode, const char *opt, const char *text,
                          bench_size_spec_t *spec);
/* Expand a spec into a sorted list without duplicates (at most BENCH_MAX_SIZES).
 * Without --sizes: powers of two from min (default dmin) to max (default dmax).
 * Hint-relative sizes are dropped when hint is 0 or the result is out of
 * range; *dropped counts them.  Returns the number of sizes, -1 on error
 * (message printed when `mode` is not NULL). */
int bench_resolve_sizes(const bench_size_spec_t *spec, uint64_t dmin, uint64_t dmax, uint64_t hint,
                        uint64_t *out, int *dropped);

/* ------------------------------------------------------------ options */

/* Integer option in [min, max]; on error prints the option and value, -1. */
/* One of --sizes LIST, --min S, --max S (opt, also as --opt=...) into spec: 0, or
 * -1 after a usage error. */
int bench_parse_size_option(const char *mode, const char *opt, const char *val,
                            bench_size_spec_t *spec);
/* --sizes excludes --min/--max, and --min may not exceed --max: 0 or -1 after
 * a usage error. */
int bench_check_size_spec(const char *mode, const bench_size_spec_t *spec);
int bench_parse_long(const char *mode, const char *opt, const char *text, long min, long max,
                     long *out);
/* Size option (same syntax as the hint, at most `max`). */
int bench_parse_bytes(const char *mode, const char *opt, const char *text, uint64_t max,
                      uint64_t *out);
/* "llrdma-bench: MODE: message" plus a pointer to --help, on stderr. */
void bench_usage_error(const char *mode, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Whether arg is option `name` ("--iters" or "--iters=..."). */
int bench_opt(const char *arg, const char *name);
/* The value of option argv[*i] (advancing *i), or NULL after an error message. */
const char *bench_optarg(const char *mode, int argc, char **argv, int *i);
/* Before MPI_Init: whether this process should print (rank 0 per the
 * launcher's environment, or not launched by mpirun). */
int bench_early_printer(void);
/* The wait of a rank that leaves an early error message to rank 0. */
void bench_early_wait(void);

/* "8 B", "16 KB", "2 MB", "16385 B". */
void bench_size_label(uint64_t bytes, char *buf, size_t len);

/* ------------------------------------------------------------ MPI helpers */

/* One line "rankN host=H size_hint=B source=S btl_status=..." describing this
 * process's llrdma configuration (or that llrdma did not load). */
void bench_describe_rank(int rank, char *buf, size_t len);
/* Collective over MPI_COMM_WORLD: rank `root` prints "# <line>" for each rank
 * in `ranks` (n of them) to fp. */
void bench_print_ranks(FILE *fp, int root, const int *ranks, int n);
/* --verify verdict: each rank's exit status carries its own errors (the
 * authority: mpirun fails when any rank does); for rank 0's summary line the
 * counts are gathered with MPI_Gather, not summed by the MPI_Allreduce under
 * test.  Returns the sum on `root`, the local count elsewhere. */
long bench_gather_errors(long errors, int root);

/* Buffer of `bytes` aligned to a page, touched; NULL on failure. */
void *bench_alloc(size_t bytes);

/* ------------------------------------------------------------ drivers */

/* Growable argument vector (NULL-terminated); strings are copied. */
typedef struct {
    char **v;
    int n, cap;
} bench_argv_t;

void bench_argv_add(bench_argv_t *a, const char *s);
void bench_argv_free(bench_argv_t *a);
/* Split `text` like a shell would on blanks, honouring '...' and "..." and
 * backslash; -1 (message printed) on an unterminated quote. */
int bench_split_args(const char *mode, const char *opt, const char *text, bench_argv_t *out);

/* Options common to sweep and allreduce-compare. */
typedef struct {
    const char *mode;
    const char *list; /* --hints / --colls */
    long np;
    bench_argv_t mpirun_args; /* --mpirun-args, split, in order */
    const char *csv;          /* --csv FILE: all raw rows */
    int show_output;          /* --show-output: echo every line the runs print */
    bench_argv_t child;       /* after "--": options of the measuring mode */
    const char *mpirun;       /* LLRDMA_MPIRUN or "mpirun" */
    char self[4096];          /* how to start llrdma-bench again */
} bench_driver_t;

/* Parses [--LISTOPT L] [--np N] [--mpirun-args S]... [--csv F] [--show-output]
 * [-- CHILD-OPTIONS]; -1 after a usage message. */
int bench_driver_parse(bench_driver_t *d, const char *mode, const char *list_opt,
                       const char *list_default, int argc, char **argv, const char *argv0);
void bench_driver_free(bench_driver_t *d);

/* One parsed CSV row of a relaunched run (columns by header name; absent = 0). */
typedef struct {
    uint64_t hint, size;
    long iters, ranks;
    double p50, p90, p99, p999, max, mean, min, bw, rate, stream_bw;
    char raw[512]; /* the line as printed */
} bench_row_t;

typedef struct {
    char label[64]; /* "8 KB" hint label, or coll name */
    uint64_t key;   /* the hint in bytes (sweep) */
    int exit_code;  /* of mpirun; -1 when it could not be started */
    char header[512];
    char served_by[64]; /* allreduce: the coll component that served it */
    bench_row_t *rows;
    int nrows;
} bench_run_t;

/* Runs argv (mpirun ...), capturing stdout: comment lines are echoed to
 * stdout prefixed by "# [label] ", CSV rows after a header line that starts
 * with `header_start` are parsed into run->rows.  Returns run->exit_code. */
int bench_run_child(const bench_driver_t *d, bench_argv_t *argv, const char *header_start,
                    bench_run_t *run);
void bench_run_free(bench_run_t *run);
/* End of a driver mode: close the CSV, say where it is and how many runs
 * failed, free the runs and the driver; returns the exit status. */
int bench_driver_finish(bench_driver_t *d, bench_run_t *runs, int n, FILE *csv, int failed);
/* Row of `size` in run, or NULL. */
const bench_row_t *bench_run_find(const bench_run_t *run, uint64_t size);

/* ------------------------------------------------------------ modes */

int bench_pingpong_main(int argc, char **argv);
int bench_allreduce_main(int argc, char **argv);
int bench_incast_main(int argc, char **argv);
/* Streaming bandwidth, one direction (bw) or both (bibw): bench_bw.c. */
int bench_bw_main(int argc, char **argv);
int bench_bibw_main(int argc, char **argv);
int bench_sweep_main(int argc, char **argv, const char *self);
int bench_compare_main(int argc, char **argv, const char *self);
/* PNG charts of the CSVs and of a dump's size histogram (bench_plot.c); no MPI. */
int bench_plot_main(int argc, char **argv);
int bench_selftest_main(void);
void bench_help(FILE *fp);

#endif
