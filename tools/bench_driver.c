/*
 * bench_driver.c -- what sweep and allreduce-compare share: their options,
 * relaunching llrdma-bench under mpirun, and reading back the CSV it prints.
 *
 * The drivers are not MPI programs.  Each run is
 *   $LLRDMA_MPIRUN [--mpirun-args...] -np N [per-run --mca ...] SELF MODE --csv - [CHILD...]
 * with stdout captured (rank 0 prints the CSV there, so it also works when
 * rank 0 is on another node) and stderr passed through.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define CAPTURE_MAX ((size_t)64 << 20)

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (NULL == q) {
        fprintf(stderr, "llrdma-bench: out of memory\n");
        exit(BENCH_EXIT_RUNTIME);
    }
    return q;
}

void bench_argv_add(bench_argv_t *a, const char *s)
{
    if (a->n + 2 > a->cap) {
        a->cap = a->cap ? 2 * a->cap : 16;
        a->v = xrealloc(a->v, sizeof(char *) * (size_t)a->cap);
    }
    a->v[a->n] = strdup(s);
    if (NULL == a->v[a->n]) {
        fprintf(stderr, "llrdma-bench: out of memory\n");
        exit(BENCH_EXIT_RUNTIME);
    }
    a->v[++a->n] = NULL;
}

void bench_argv_free(bench_argv_t *a)
{
    for (int i = 0; i < a->n; ++i) {
        free(a->v[i]);
    }
    free(a->v);
    memset(a, 0, sizeof(*a));
}

int bench_split_args(const char *mode, const char *opt, const char *text, bench_argv_t *out)
{
    size_t len = strlen(text);
    char *word = malloc(len + 1);
    size_t w = 0;
    int in_word = 0;
    char quote = 0;

    if (NULL == word) {
        return -1;
    }
    for (const char *p = text;; ++p) {
        char c = *p;
        if ('\0' == c) {
            if (quote) {
                bench_usage_error(mode, "%s '%s': unterminated %c quote", opt, text, quote);
                free(word);
                return -1;
            }
            break;
        }
        if (quote) {
            if (c == quote) {
                quote = 0;
            } else if ('\\' == c && '"' == quote && ('"' == p[1] || '\\' == p[1])) {
                word[w++] = *++p;
            } else {
                word[w++] = c;
            }
        } else if (' ' == c || '\t' == c || '\n' == c) {
            if (in_word) {
                word[w] = '\0';
                bench_argv_add(out, word);
                w = 0;
                in_word = 0;
            }
            continue;
        } else if ('\'' == c || '"' == c) {
            quote = c;
        } else if ('\\' == c && '\0' != p[1]) {
            word[w++] = *++p;
        } else {
            word[w++] = c;
        }
        in_word = 1;
    }
    if (in_word) {
        word[w] = '\0';
        bench_argv_add(out, word);
    }
    free(word);
    return 0;
}

/* argv[0] as given, made absolute when relative with a slash, so that it
 * still names this program (or its libtool wrapper script) after mpirun. */
static void self_path(const char *argv0, char *buf, size_t len)
{
    const char *env = getenv("LLRDMA_BENCH");
    char cwd[2048];

    if (NULL != env && '\0' != *env) {
        snprintf(buf, len, "%s", env);
    } else if ('/' != argv0[0] && NULL != strchr(argv0, '/') && NULL != getcwd(cwd, sizeof(cwd))) {
        snprintf(buf, len, "%s/%s", cwd, argv0);
    } else {
        snprintf(buf, len, "%s", argv0);
    }
}

int bench_driver_parse(bench_driver_t *d, const char *mode, const char *list_opt,
                       const char *list_default, int argc, char **argv, const char *argv0)
{
    const char *mr = getenv("LLRDMA_MPIRUN");
    int i;

    memset(d, 0, sizeof(*d));
    d->mode = mode;
    d->list = list_default;
    d->np = 2;
    d->mpirun = (NULL != mr && '\0' != *mr) ? mr : "mpirun";
    self_path(argv0, d->self, sizeof(d->self));
    for (i = 0; i < argc; ++i) {
        const char *a = argv[i], *v;
        if (0 == strcmp(a, "--")) {
            ++i;
            break;
        }
        if (bench_opt(a, list_opt) || bench_opt(a, "--np") || bench_opt(a, "--mpirun-args") ||
            bench_opt(a, "--csv")) {
            if (NULL == (v = bench_optarg(mode, argc, argv, &i))) {
                return -1;
            }
            if (bench_opt(a, list_opt)) {
                d->list = v;
            } else if (bench_opt(a, "--np")) {
                if (0 != bench_parse_long(mode, "--np", v, 1, 1 << 20, &d->np)) {
                    return -1;
                }
            } else if (bench_opt(a, "--mpirun-args")) {
                if (0 != bench_split_args(mode, "--mpirun-args", v, &d->mpirun_args)) {
                    return -1;
                }
            } else {
                d->csv = v;
            }
        } else if (bench_opt(a, "--show-output")) {
            d->show_output = 1;
        } else {
            bench_usage_error(mode,
                              "unknown option '%s' (options of the measuring runs go after "
                              "'--')",
                              a);
            return -1;
        }
    }
    for (; i < argc; ++i) {
        if (bench_opt(argv[i], "--csv")) {
            bench_usage_error(mode,
                              "'%s' after '--': the runs' CSV is read by %s itself; use %s's "
                              "own --csv FILE before '--'",
                              argv[i], mode, mode);
            return -1;
        }
        bench_argv_add(&d->child, argv[i]);
    }
    if (NULL == d->list || '\0' == *d->list) {
        bench_usage_error(mode, "%s: empty list", list_opt);
        return -1;
    }
    return 0;
}

void bench_driver_free(bench_driver_t *d)
{
    bench_argv_free(&d->mpirun_args);
    bench_argv_free(&d->child);
}

/* ------------------------------------------------------------ one run */

static void print_command(FILE *fp, const char *label, const bench_argv_t *a)
{
    fprintf(fp, "# [%s] run:", label);
    for (int i = 0; i < a->n; ++i) {
        const char *s = a->v[i];
        if ('\0' == *s || strpbrk(s, " \t'\"\\$*?;&|<>()")) {
            fputs(" '", fp);
            for (; *s; ++s) {
                if ('\'' == *s) {
                    fputs("'\\''", fp);
                } else {
                    fputc(*s, fp);
                }
            }
            fputc('\'', fp);
        } else {
            fprintf(fp, " %s", s);
        }
    }
    fputc('\n', fp);
    fflush(fp);
}

/* Splits a CSV line in place (no quoting: the runs print numbers). */
static int split_csv(char *line, char **f, int max)
{
    int n = 0;
    char *p = line;

    while (n < max) {
        f[n++] = p;
        p = strchr(p, ',');
        if (NULL == p) {
            break;
        }
        *p++ = '\0';
    }
    return n;
}

static void set_field(bench_row_t *r, const char *name, const char *val)
{
    static const struct {
        const char *name;
        size_t off;
    } dbl[] = {
        {"p50_us", offsetof(bench_row_t, p50)},
        {"p90_us", offsetof(bench_row_t, p90)},
        {"p99_us", offsetof(bench_row_t, p99)},
        {"p999_us", offsetof(bench_row_t, p999)},
        {"max_us", offsetof(bench_row_t, max)},
        {"mean_us", offsetof(bench_row_t, mean)},
        {"min_us", offsetof(bench_row_t, min)},
        {"bw_MBps", offsetof(bench_row_t, bw)},
        {"rate_msgs_s", offsetof(bench_row_t, rate)},
        {"stream_MBps", offsetof(bench_row_t, stream_bw)},
    };

    if (0 == strcmp(name, "hint")) {
        r->hint = strtoull(val, NULL, 10);
    } else if (0 == strcmp(name, "size")) {
        r->size = strtoull(val, NULL, 10);
    } else if (0 == strcmp(name, "iters")) {
        r->iters = strtol(val, NULL, 10);
    } else if (0 == strcmp(name, "ranks")) {
        r->ranks = strtol(val, NULL, 10);
    } else {
        for (size_t i = 0; i < sizeof(dbl) / sizeof(dbl[0]); ++i) {
            if (0 == strcmp(name, dbl[i].name)) {
                *(double *)((char *)r + dbl[i].off) = strtod(val, NULL);
            }
        }
    }
}

/* Comment lines of a run worth repeating: what each rank ran with, and
 * anything that went wrong (the fixed header is the same for every run). */
static int echo_comment(const char *line)
{
    return 0 == strncmp(line, "# rank", 6) || 0 == strncmp(line, "# btl", 5) ||
           0 == strncmp(line, "# size hint", 11) || 0 == strncmp(line, "# transport", 11) ||
           0 == strncmp(line, "# allreduce served by", 21) || NULL != strstr(line, "WARNING") ||
           NULL != strstr(line, "skipped") || NULL != strstr(line, "--verify");
}

/* Handles one captured line. */
static void take_line(const bench_driver_t *d, char *line, const char *header_start,
                      bench_run_t *run, char **cols, int *ncols, char *hdrbuf)
{
    char *f[64], tmp[512];
    int nf;

    if (d->show_output) {
        printf("# [%s] | %s\n", run->label, line);
    } else if ('#' == line[0] && echo_comment(line)) {
        printf("# [%s] %s\n", run->label, line + 1 + (' ' == line[1]));
    }
    if (0 == strncmp(line, "# allreduce served by: coll/", 28)) {
        snprintf(run->served_by, sizeof(run->served_by), "%.*s", (int)strcspn(line + 28, " "),
                 line + 28);
    }
    if (0 == strncmp(line, header_start, strlen(header_start)) && 0 == *ncols) {
        snprintf(run->header, sizeof(run->header), "%s", line);
        snprintf(hdrbuf, 512, "%s", line);
        *ncols = split_csv(hdrbuf, cols, 64);
        return;
    }
    if (0 == *ncols || line[0] < '0' || line[0] > '9' || strlen(line) >= sizeof(tmp)) {
        return;
    }
    snprintf(tmp, sizeof(tmp), "%s", line);
    nf = split_csv(tmp, f, 64);
    if (nf != *ncols) {
        return;
    }
    if (run->nrows % 32 == 0) {
        run->rows = xrealloc(run->rows, sizeof(bench_row_t) * (size_t)(run->nrows + 32));
    }
    memset(&run->rows[run->nrows], 0, sizeof(bench_row_t));
    for (int i = 0; i < nf; ++i) {
        set_field(&run->rows[run->nrows], cols[i], f[i]);
    }
    snprintf(run->rows[run->nrows].raw, sizeof(run->rows[0].raw), "%s", line);
    ++run->nrows;
}

int bench_run_child(const bench_driver_t *d, bench_argv_t *argv, const char *header_start,
                    bench_run_t *run)
{
    int fds[2], status;
    pid_t pid;
    char *buf = NULL, *cols[64], hdrbuf[512];
    size_t len = 0, cap = 0;
    int ncols = 0;

    print_command(stdout, run->label, argv);
    if (0 != pipe(fds)) {
        fprintf(stderr, "llrdma-bench: %s: pipe: %s\n", d->mode, strerror(errno));
        return run->exit_code = -1;
    }
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        fprintf(stderr, "llrdma-bench: %s: fork: %s\n", d->mode, strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return run->exit_code = -1;
    }
    if (0 == pid) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execvp(argv->v[0], argv->v);
        fprintf(stderr,
                "llrdma-bench: %s: cannot run '%s': %s (set LLRDMA_MPIRUN to mpirun's path)\n",
                d->mode, argv->v[0], strerror(errno));
        _exit(127);
    }
    close(fds[1]);
    for (;;) {
        ssize_t r;
        if (cap - len < 4096) {
            cap = cap ? 2 * cap : 65536;
            buf = xrealloc(buf, cap + 1);
        }
        r = read(fds[0], buf + len, cap - len);
        if (r < 0 && EINTR == errno) {
            continue;
        }
        if (r <= 0) {
            break;
        }
        len += (size_t)r;
        /* Bounded: a run that prints without end is cut, its tail dropped. */
        if (len > CAPTURE_MAX) {
            len = CAPTURE_MAX;
        }
    }
    close(fds[0]);
    while (waitpid(pid, &status, 0) < 0 && EINTR == errno) {
    }
    run->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (NULL != buf) {
        char *save = NULL;
        buf[len] = '\0';
        for (char *line = strtok_r(buf, "\n", &save); NULL != line;
             line = strtok_r(NULL, "\n", &save)) {
            size_t l = strlen(line);
            if (l > 0 && '\r' == line[l - 1]) {
                line[l - 1] = '\0';
            }
            take_line(d, line, header_start, run, cols, &ncols, hdrbuf);
        }
    }
    free(buf);
    if (0 != run->exit_code) {
        fprintf(stderr, "llrdma-bench: %s: [%s] the run failed (exit status %d)%s\n", d->mode,
                run->label, run->exit_code,
                d->show_output ? "" : "; --show-output shows everything it printed");
    } else if (0 == run->nrows) {
        fprintf(stderr, "llrdma-bench: %s: [%s] the run printed no result rows\n", d->mode,
                run->label);
        run->exit_code = BENCH_EXIT_RUNTIME;
    }
    fflush(stdout);
    return run->exit_code;
}

void bench_run_free(bench_run_t *run)
{
    free(run->rows);
    run->rows = NULL;
    run->nrows = 0;
}

const bench_row_t *bench_run_find(const bench_run_t *run, uint64_t size)
{
    for (int i = 0; i < run->nrows; ++i) {
        if (run->rows[i].size == size) {
            return &run->rows[i];
        }
    }
    return NULL;
}

int bench_driver_finish(bench_driver_t *d, bench_run_t *runs, int n, FILE *csv, int failed)
{
    if (NULL != csv) {
        fclose(csv);
        printf("\n# raw rows: %s\n", d->csv);
    }
    if (failed) {
        printf("# %d of %d runs failed: their cells show '-'\n", failed, n);
    }
    for (int i = 0; i < n; ++i) {
        bench_run_free(&runs[i]);
    }
    bench_driver_free(d);
    return failed ? BENCH_EXIT_RUNTIME : BENCH_EXIT_OK;
}
