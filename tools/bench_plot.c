/*
 * llrdma-bench plot: PNG charts of llrdma-bench's CSVs and of the size
 * histogram in btl/llrdma's dumps, drawn by gnuplot (docs/bench.md, "plot").
 *
 * The CSV kind is recognised from its header; rows are grouped by hint
 * (pingpong, sweep, bw, allreduce) or by coll component (allreduce-compare),
 * written to a data file as gnuplot index blocks, and a generated script draws
 * them.  gnuplot is looked up at run time ($LLRDMA_GNUPLOT, else PATH), so
 * building needs none; without it plot says how to install it and exits 3.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "dump_read.h"
#include "llrdma_core.h"
#include "llrdma_hist.h"

#define MODE "plot"
#define MAX_COLS 32
#define MAX_GROUPS 16

typedef enum { K_AUTO, K_LATENCY, K_BW, K_ALLREDUCE, K_COMPARE, K_HIST } kind_t;
static const char *const kind_names[] = {"auto", "latency", "bw", "allreduce", "compare", "hist"};

typedef struct {
    double size, p50, p99, bw;
} point_t;

typedef struct {
    char name[64]; /* "hint 8K", "llrdma" */
    uint64_t hint;
    point_t *pts;
    int n, cap;
} group_t;

typedef struct {
    group_t g[MAX_GROUPS];
    int ng;
} series_t;

static void plot_usage(FILE *fp)
{
    fprintf(fp, "Usage: llrdma-bench plot [--out FILE.png] [--kind KIND] [--title TEXT]\n"
                "                         [--width PX] [--height PX] INPUT...\n"
                "  INPUT: a CSV of pingpong, sweep, bw, allreduce or allreduce-compare\n"
                "  (--csv), or btl/llrdma dumps (files or a directory) for the size histogram.\n"
                "  KIND: auto (from the CSV header, or hist for JSON dumps), latency, bw,\n"
                "  allreduce, compare, hist.  --out defaults to INPUT with .png.\n"
                "  gnuplot draws the chart: $LLRDMA_GNUPLOT, else gnuplot from PATH.\n");
}

static int fail_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "llrdma-bench: plot: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    return BENCH_EXIT_USAGE;
}

/* ------------------------------------------------------------ gnuplot */

/* The program to run, or NULL with a message saying how to get it. */
static const char *find_gnuplot(char *buf, size_t len)
{
    const char *env = getenv("LLRDMA_GNUPLOT");
    const char *path = getenv("PATH");
    if (NULL != env && '\0' != env[0]) {
        if (0 == access(env, X_OK)) {
            return env;
        }
        fprintf(stderr, "llrdma-bench: plot: LLRDMA_GNUPLOT='%s' is not an executable: %s\n", env,
                strerror(errno));
        return NULL;
    }
    while (NULL != path && '\0' != *path) {
        const char *end = strchr(path, ':');
        size_t n = end ? (size_t)(end - path) : strlen(path);
        snprintf(buf, len, "%.*s/gnuplot", (int)n, n ? path : ".");
        if (0 == access(buf, X_OK)) {
            return buf;
        }
        path += n + (end ? 1 : 0);
    }
    fprintf(stderr, "llrdma-bench: plot: gnuplot not found in PATH: install it (Debian/Ubuntu: "
                    "apt-get install gnuplot-nox) or set LLRDMA_GNUPLOT to its path\n");
    return NULL;
}

/* A path inside a gnuplot single-quoted string ('' is a quote). */
static void put_quoted(FILE *fp, const char *s)
{
    fputc('\'', fp);
    for (; *s; ++s) {
        if ('\'' == *s) {
            fputc('\'', fp);
        }
        fputc(*s, fp);
    }
    fputc('\'', fp);
}

static int run_gnuplot(const char *gp, const char *script, const char *out)
{
    struct stat st;
    int status;
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "llrdma-bench: plot: fork: %s\n", strerror(errno));
        return BENCH_EXIT_RUNTIME;
    }
    if (0 == pid) {
        execl(gp, gp, script, (char *)NULL);
        fprintf(stderr, "llrdma-bench: plot: cannot run %s: %s\n", gp, strerror(errno));
        _exit(127);
    }
    while (waitpid(pid, &status, 0) < 0 && EINTR == errno) {
    }
    if (!WIFEXITED(status) || 0 != WEXITSTATUS(status)) {
        fprintf(stderr, "llrdma-bench: plot: %s failed (status %d) drawing %s\n", gp,
                WIFEXITED(status) ? WEXITSTATUS(status) : -1, out);
        return BENCH_EXIT_RUNTIME;
    }
    if (0 != stat(out, &st) || 0 == st.st_size) {
        fprintf(stderr, "llrdma-bench: plot: %s wrote no image to %s\n", gp, out);
        return BENCH_EXIT_RUNTIME;
    }
    return BENCH_EXIT_OK;
}

/* ------------------------------------------------------------ CSV */

static int split(char *line, char **cols)
{
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(line, ",\r\n", &save); t && n < MAX_COLS;
         t = strtok_r(NULL, ",\r\n", &save)) {
        cols[n++] = t;
    }
    return n;
}

static int col_of(char **cols, int n, const char *name)
{
    for (int i = 0; i < n; ++i) {
        if (0 == strcmp(cols[i], name)) {
            return i;
        }
    }
    return -1;
}

static group_t *group_for(series_t *s, const char *name, uint64_t hint)
{
    for (int i = 0; i < s->ng; ++i) {
        if (0 == strcmp(s->g[i].name, name)) {
            return &s->g[i];
        }
    }
    if (MAX_GROUPS == s->ng) {
        return NULL;
    }
    group_t *g = &s->g[s->ng++];
    snprintf(g->name, sizeof(g->name), "%s", name);
    g->hint = hint;
    return g;
}

static int num(const char *file, int line, const char *text, double *out)
{
    char *end = NULL;
    errno = 0;
    *out = strtod(text, &end);
    if (errno || end == text || '\0' != *end) {
        fprintf(stderr, "llrdma-bench: plot: %s:%d: '%s' is not a number\n", file, line, text);
        return -1;
    }
    return 0;
}

/* Reads the CSV, checks it is of `*kind` (or recognises it), fills groups. */
static int read_csv(const char *file, kind_t *kind, series_t *s)
{
    FILE *fp = fopen(file, "r");
    char *line = NULL, header[1024], *cols[MAX_COLS], hint_txt[32];
    size_t cap = 0;
    int lineno = 0, ncols = 0, rc = 0, coll, hint, size, p50, p99, bw, nrows = 0;
    kind_t found;

    if (NULL == fp) {
        fprintf(stderr, "llrdma-bench: plot: %s: cannot open: %s\n", file, strerror(errno));
        return BENCH_EXIT_RUNTIME;
    }
    if (getline(&line, &cap, fp) < 0) {
        fprintf(stderr, "llrdma-bench: plot: %s: empty file\n", file);
        rc = BENCH_EXIT_RUNTIME;
        goto out;
    }
    lineno = 1;
    line[strcspn(line, "\r\n")] = '\0';
    snprintf(header, sizeof(header), "%s", line);
    ncols = split(line, cols);
    coll = col_of(cols, ncols, "coll");
    hint = col_of(cols, ncols, "hint");
    size = col_of(cols, ncols, "size");
    p50 = col_of(cols, ncols, "p50_us");
    p99 = col_of(cols, ncols, "p99_us");
    bw = col_of(cols, ncols, "bw_MBps");
    if (coll >= 0 && size >= 0 && p50 >= 0 && p99 >= 0) {
        found = K_COMPARE;
    } else if (col_of(cols, ncols, "ranks") >= 0 && size >= 0 && p50 >= 0 && p99 >= 0) {
        found = K_ALLREDUCE;
    } else if (hint >= 0 && size >= 0 && p50 >= 0 && p99 >= 0) {
        found = K_LATENCY;
    } else if (hint >= 0 && size >= 0 && bw >= 0) {
        found = K_BW;
    } else {
        fprintf(stderr,
                "llrdma-bench: plot: %s: not a CSV of pingpong, sweep, bw, allreduce or "
                "allreduce-compare (header '%.200s')\n",
                file, header);
        rc = BENCH_EXIT_RUNTIME;
        goto out;
    }
    /* A latency CSV also has bandwidth; other kinds need their own columns. */
    if (K_AUTO == *kind) {
        *kind = found;
    } else if (*kind != found && !(K_BW == *kind && K_LATENCY == found && bw >= 0)) {
        fprintf(stderr,
                "llrdma-bench: plot: %s: --kind %s does not fit a %s CSV (header '%.200s')\n", file,
                kind_names[*kind], K_LATENCY == found ? "pingpong/sweep" : kind_names[found],
                header);
        rc = BENCH_EXIT_RUNTIME;
        goto out;
    }
    while (getline(&line, &cap, fp) >= 0) {
        char *f[MAX_COLS], name[64];
        double v[4] = {0, 0, 0, 0}, h = 0;
        group_t *g;
        ++lineno;
        line[strcspn(line, "\r\n")] = '\0';
        if ('\0' == line[0] || '#' == line[0] || 0 == strcmp(line, header)) {
            continue;
        }
        if (split(line, f) != ncols) {
            fprintf(stderr, "llrdma-bench: plot: %s:%d: %d columns expected as in the header\n",
                    file, lineno, ncols);
            rc = BENCH_EXIT_RUNTIME;
            goto out;
        }
        if ((hint >= 0 && num(file, lineno, f[hint], &h)) || num(file, lineno, f[size], &v[0]) ||
            (p50 >= 0 && num(file, lineno, f[p50], &v[1])) ||
            (p99 >= 0 && num(file, lineno, f[p99], &v[2])) ||
            (bw >= 0 && num(file, lineno, f[bw], &v[3]))) {
            rc = BENCH_EXIT_RUNTIME;
            goto out;
        }
        llrdma_format_size((uint64_t)h, hint_txt, sizeof(hint_txt));
        if (K_COMPARE == *kind) {
            snprintf(name, sizeof(name), "%s", f[coll]);
        } else {
            snprintf(name, sizeof(name), "hint %s", hint_txt);
        }
        g = group_for(s, name, (uint64_t)h);
        if (NULL == g) {
            fprintf(stderr, "llrdma-bench: plot: %s: more than %d hints or components\n", file,
                    MAX_GROUPS);
            rc = BENCH_EXIT_RUNTIME;
            goto out;
        }
        if (g->n == g->cap) {
            int c = g->cap ? 2 * g->cap : 32;
            point_t *p = realloc(g->pts, (size_t)c * sizeof(*p));
            if (NULL == p) {
                rc = BENCH_EXIT_RUNTIME;
                goto out;
            }
            g->pts = p;
            g->cap = c;
        }
        g->pts[g->n++] = (point_t){v[0], v[1], v[2], v[3]};
        ++nrows;
    }
    if (0 == nrows) {
        fprintf(stderr, "llrdma-bench: plot: %s: no data rows\n", file);
        rc = BENCH_EXIT_RUNTIME;
    }
out:
    free(line);
    fclose(fp);
    return rc;
}

/* ------------------------------------------------------------ scripts */

static void script_head(FILE *sc, const char *out, int w, int h, const char *title)
{
    fprintf(sc, "set terminal pngcairo size %d,%d enhanced font 'Sans,10'\nset output ", w, h);
    put_quoted(sc, out);
    fprintf(sc, "\nset title ");
    put_quoted(sc, title);
    fprintf(sc, " noenhanced\nset grid\nset key top left noenhanced\nset datafile missing '-'\n");
}

/* Size axis in the hint's units (8, 1K, 64K, 1M): a tic per power of 4 in range. */
static void size_axis(FILE *sc, const series_t *s)
{
    double lo = 0, hi = 0;
    char t[32];
    int first = 1;
    for (int i = 0; i < s->ng; ++i) {
        for (int k = 0; k < s->g[i].n; ++k) {
            double v = s->g[i].pts[k].size;
            lo = (0 == lo || v < lo) && v > 0 ? v : lo;
            hi = v > hi ? v : hi;
        }
    }
    fprintf(sc, "set offsets graph 0.03, graph 0.03, 0, 0\nset logscale x 2\nset xlabel 'message "
                "size (bytes)'\nset xtics (");
    for (uint64_t v = 1; v <= (uint64_t)hi * 2 && v < ((uint64_t)1 << 62); v *= 4) {
        if ((double)v * 2 < lo) {
            continue;
        }
        llrdma_format_size(v, t, sizeof(t));
        fprintf(sc, "%s'%s' %llu", first ? "" : ", ", t, (unsigned long long)v);
        first = 0;
    }
    fprintf(sc, ")\n");
}

/* Dashed vertical line at each distinct non-zero hint, in its group's colour. */
static void mark_hints(FILE *sc, const series_t *s)
{
    for (int i = 0; i < s->ng; ++i) {
        char t[32];
        if (0 == s->g[i].hint) {
            continue;
        }
        llrdma_format_size(s->g[i].hint, t, sizeof(t));
        fprintf(
            sc,
            "set arrow from %llu, graph 0 to %llu, graph 1 nohead dt 2 lw 1.5 lc %d\n"
            "set label 'hint %s' at %llu, graph 0.03 rotate left offset -0.8,0 tc lt %d noenhanced "
            "front\n",
            (unsigned long long)s->g[i].hint, (unsigned long long)s->g[i].hint, i + 1, t,
            (unsigned long long)s->g[i].hint, i + 1);
    }
}

static int write_data(const char *path, const series_t *s, int ratio)
{
    FILE *fp = fopen(path, "w");
    if (NULL == fp) {
        return -1;
    }
    for (int i = 0; i < s->ng; ++i) {
        fprintf(fp, "# %s\n", s->g[i].name);
        for (int k = 0; k < s->g[i].n; ++k) {
            const point_t *p = &s->g[i].pts[k];
            fprintf(fp, "%.0f %.6g %.6g %.6g\n", p->size, p->p50, p->p99, p->bw);
        }
        fprintf(fp, "\n\n");
    }
    if (ratio) {
        /* First component's P50 over the best other one's, per size both measured. */
        fprintf(fp, "# ratio\n");
        for (int k = 0; k < s->g[0].n; ++k) {
            double best = 0;
            for (int i = 1; i < s->ng; ++i) {
                for (int j = 0; j < s->g[i].n; ++j) {
                    if (s->g[i].pts[j].size == s->g[0].pts[k].size && s->g[i].pts[j].p50 > 0 &&
                        (0 == best || s->g[i].pts[j].p50 < best)) {
                        best = s->g[i].pts[j].p50;
                    }
                }
            }
            if (best > 0) {
                fprintf(fp, "%.0f %.6g\n", s->g[0].pts[k].size, s->g[0].pts[k].p50 / best);
            }
        }
        fprintf(fp, "\n\n");
    }
    return fclose(fp);
}

/* Latency (P50 line, P50..P99 band) per group on log axes. */
static void plot_latency(FILE *sc, const char *data, const series_t *s, const char *ylabel)
{
    fprintf(sc, "set logscale y 10\nset ylabel '%s'\n", ylabel);
    fprintf(sc, "plot ");
    for (int i = 0; i < s->ng; ++i) {
        int band = 0; /* a CSV transcribed from a P50-only table has P99 = P50 */
        for (int k = 0; k < s->g[i].n; ++k) {
            band |= s->g[i].pts[k].p99 > s->g[i].pts[k].p50;
        }
        if (band) {
            put_quoted(sc, data);
            fprintf(sc,
                    " index %d using 1:2:3 with filledcurves fs transparent solid 0.18 noborder "
                    "lc %d title '%s P50..P99', ",
                    i, i + 1, s->g[i].name);
        }
        put_quoted(sc, data);
        fprintf(sc, " index %d using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc %d title '%s P50'%s",
                i, i + 1, s->g[i].name, i + 1 < s->ng ? ", \\\n  " : "\n");
    }
}

static void plot_bw(FILE *sc, const char *data, const series_t *s)
{
    fprintf(sc, "set logscale y 10\nset ylabel 'bandwidth (MB/s, 10^6 bytes/s)'\n"
                "set key bottom right\nplot ");
    for (int i = 0; i < s->ng; ++i) {
        put_quoted(sc, data);
        fprintf(sc, " index %d using 1:4 with linespoints pt 7 ps 0.6 lw 2 lc %d title '%s'%s", i,
                i + 1, s->g[i].name, i + 1 < s->ng ? ", \\\n  " : "\n");
    }
}

static void plot_compare(FILE *sc, const char *data, const series_t *s)
{
    fprintf(sc, "set multiplot layout 2,1\nset size 1,0.62\nset origin 0,0.38\n");
    plot_latency(sc, data, s, "Allreduce P50 (us, slowest rank)");
    /* The ratio panel: a dashed line at 1, kept in range by plotting it. */
    fprintf(sc,
            "unset title\nset size 1,0.38\nset origin 0,0\nunset logscale y\n"
            "set yrange [0:*]\nset ylabel '%s / best other P50'\nset key bottom right\nplot ",
            s->g[0].name);
    put_quoted(sc, data);
    fprintf(sc,
            " index %d using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc 1 title '%s faster below "
            "1', 1 with lines dt 2 lc rgb 'gray40' notitle\nunset multiplot\n",
            s->ng, s->g[0].name);
}

/* ------------------------------------------------------------ histogram */

static int plot_hist(FILE *sc, const char *data, int ninputs, char **inputs, char *title,
                     size_t tlen, int user_title)
{
    llrdma_dumpset_t set;
    llrdma_advice_t a;
    llrdma_hist_t all;
    uint64_t counts[LLRDMA_HIST_BUCKETS];
    int lo = -1, hi = -1, rc = 0;
    FILE *fp;

    memset(&set, 0, sizeof(set));
    memset(&all, 0, sizeof(all));
    for (int i = 0; i < ninputs && 0 == rc; ++i) {
        rc = llrdma_dumpset_read("llrdma-bench: plot", inputs[i], &set);
    }
    if (0 != rc || 0 != llrdma_dumpset_check("llrdma-bench: plot", &set) ||
        LLRDMA_OK != llrdma_advise(set.ranks, set.n, &a)) {
        llrdma_dumpset_free(&set);
        return BENCH_EXIT_RUNTIME;
    }
    for (int i = 0; i < set.n; ++i) {
        llrdma_hist_merge(&all, &set.ranks[i].hist);
    }
    llrdma_dumpset_free(&set);
    if (0 == llrdma_hist_totals(&all, counts)) {
        fprintf(stderr, "llrdma-bench: plot: the dumps counted no fragment: nothing to draw\n");
        return BENCH_EXIT_RUNTIME;
    }
    for (int b = 0; b < LLRDMA_HIST_BUCKETS; ++b) {
        if (counts[b]) {
            lo = lo < 0 ? b : lo;
            hi = b;
        }
    }
    /* One empty bucket either side, and the recommended hint inside the range. */
    if (LLRDMA_ADVICE_HINT == a.kind) {
        int hb = (int)llrdma_hist_bucket(a.hint + LLRDMA_HIST_HDR_ALLOWANCE);
        lo = hb < lo ? hb : lo;
        hi = hb > hi ? hb : hi;
    }
    lo = lo > 0 ? lo - 1 : 0;
    hi = hi + 1 < LLRDMA_HIST_BUCKETS ? hi + 1 : hi;
    fp = fopen(data, "w");
    if (NULL == fp) {
        fprintf(stderr, "llrdma-bench: plot: %s: %s\n", data, strerror(errno));
        return BENCH_EXIT_RUNTIME;
    }
    for (int b = lo; b <= hi; ++b) {
        char t[32];
        llrdma_format_size(llrdma_hist_bucket_max((unsigned)b), t, sizeof(t));
        fprintf(fp, "%d %s %llu %llu %llu\n", b, b == LLRDMA_HIST_BUCKETS - 1 ? "more" : t,
                (unsigned long long)all.count[LLRDMA_HIST_LL][b],
                (unsigned long long)all.count[LLRDMA_HIST_BW][b],
                (unsigned long long)all.count[LLRDMA_HIST_RDMA][b]);
    }
    fclose(fp);
    if (!user_title) {
        snprintf(title, tlen, "fragment payload sizes, %d rank(s), %llu fragments", a.nranks,
                 (unsigned long long)a.fragments);
    }
    fprintf(sc, "set style data histograms\nset style histogram rowstacked\n"
                "set style fill solid 0.75 border -1\nset boxwidth 0.8\n"
                "set xlabel 'payload up to (bytes; bucket (2^{b-1}, 2^b])'\n"
                "set ylabel 'fragments'\nset yrange [0:*]\nset offsets 0, 0, graph 0.1, 0\nset key "
                "top right\n");
    if (LLRDMA_ADVICE_HINT == a.kind) {
        char t[32];
        int hb = (int)llrdma_hist_bucket(a.hint + LLRDMA_HIST_HDR_ALLOWANCE);
        llrdma_format_size(a.hint, t, sizeof(t));
        /* Histogram x positions are 0.. from the first row; the line goes right of the hint's
         * bucket: everything left of it travels the low-latency path. */
        fprintf(sc,
                "set arrow from %.1f, graph 0 to %.1f, graph 1 nohead lw 2 lc rgb 'red' front\n"
                "set label 'recommended hint %s (covers %.0f%%)' at %.1f, graph 0.95 left "
                "offset 1,0 tc rgb 'red' front\n",
                hb - lo + 0.5, hb - lo + 0.5, t, 100.0 * a.covered, hb - lo + 0.5);
    } else {
        fprintf(sc, "set label '%s' at graph 0.02, graph 0.95 tc rgb 'red' front\n",
                LLRDMA_ADVICE_NO_HINT == a.kind ? "recommendation: no hint (llrdma-hint recommend "
                                                  "says why)"
                                                : "no recommendation");
    }
    fprintf(sc, "plot ");
    put_quoted(sc, data);
    fprintf(sc, " using 3:xtic(2) title 'low-latency path' lc rgb '#1f77b4', '' using 4 title "
                "'bandwidth path' lc rgb '#ff7f0e', '' using 5 title 'RDMA' lc rgb '#2ca02c'\n");
    return BENCH_EXIT_OK;
}

/* ------------------------------------------------------------ main */

static int is_json_input(const char *path)
{
    struct stat st;
    FILE *fp;
    int c;
    if (0 == stat(path, &st) && S_ISDIR(st.st_mode)) {
        return 1;
    }
    fp = fopen(path, "r");
    if (NULL == fp) {
        return 0; /* read_csv reports it */
    }
    while (' ' == (c = fgetc(fp)) || '\n' == c) {
    }
    fclose(fp);
    return '{' == c;
}

int bench_plot_main(int argc, char **argv)
{
    const char *out = NULL, *gp;
    char title[512] = "", outbuf[4096], dir[4096], data[4200], script[4200], gpbuf[4096];
    const char *tmp = getenv("TMPDIR");
    char *inputs[64];
    int ninputs = 0, w = 900, h = 560, rc = BENCH_EXIT_OK, user_title = 0;
    kind_t kind = K_AUTO;
    series_t s;
    FILE *sc;

    memset(&s, 0, sizeof(s));
    for (int i = 0; i < argc; ++i) {
        const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (0 == strcmp(opt, "--out") || 0 == strcmp(opt, "--title") ||
            0 == strcmp(opt, "--kind") || 0 == strcmp(opt, "--width") ||
            0 == strcmp(opt, "--height")) {
            if (NULL == val) {
                return fail_usage("%s needs a value", opt);
            }
            ++i;
            if ('o' == opt[2]) {
                out = val;
            } else if ('t' == opt[2]) {
                snprintf(title, sizeof(title), "%s", val);
                user_title = 1;
            } else if ('k' == opt[2]) {
                kind = K_AUTO;
                while (kind <= K_HIST && 0 != strcmp(kind_names[kind], val)) {
                    ++kind;
                }
                if (kind > K_HIST) {
                    return fail_usage("--kind '%s': expected auto, latency, bw, allreduce, "
                                      "compare or hist",
                                      val);
                }
            } else {
                char *end = NULL;
                long v = strtol(val, &end, 10);
                if (end == val || '\0' != *end || v < 200 || v > 8000) {
                    return fail_usage("'%s': a size in pixels from 200 to 8000", val);
                }
                *('w' == opt[2] ? &w : &h) = (int)v;
            }
        } else if (0 == strcmp(opt, "--help") || 0 == strcmp(opt, "-h")) {
            plot_usage(stdout);
            return BENCH_EXIT_OK;
        } else if ('-' == opt[0] && '\0' != opt[1]) {
            return fail_usage("unknown option '%s'", opt);
        } else if (ninputs < 64) {
            inputs[ninputs++] = argv[i];
        }
    }
    if (0 == ninputs) {
        plot_usage(stderr);
        return BENCH_EXIT_USAGE;
    }
    if (K_AUTO == kind && is_json_input(inputs[0])) {
        kind = K_HIST;
    }
    if (K_HIST != kind && ninputs > 1) {
        return fail_usage("one CSV per chart ('%s' is extra)", inputs[1]);
    }
    if (NULL == out) {
        const char *dot = strrchr(inputs[0], '.'), *slash = strrchr(inputs[0], '/');
        size_t stem =
            (dot && (!slash || dot > slash)) ? (size_t)(dot - inputs[0]) : strlen(inputs[0]);
        while (stem > 1 && '/' == inputs[0][stem - 1]) {
            --stem; /* a directory given as DIR/ */
        }
        snprintf(outbuf, sizeof(outbuf), "%.*s.png", (int)stem, inputs[0]);
        out = outbuf;
    }
    gp = find_gnuplot(gpbuf, sizeof(gpbuf));
    if (NULL == gp) {
        return BENCH_EXIT_RUNTIME;
    }
    if (K_HIST != kind && 0 != (rc = read_csv(inputs[0], &kind, &s))) {
        goto out_free;
    }
    if (K_COMPARE == kind && s.ng < 2) {
        fprintf(stderr, "llrdma-bench: plot: %s: allreduce-compare needs two components\n",
                inputs[0]);
        rc = BENCH_EXIT_RUNTIME;
        goto out_free;
    }
    snprintf(dir, sizeof(dir), "%s/llrdma-plot-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (NULL == mkdtemp(dir)) {
        fprintf(stderr, "llrdma-bench: plot: mkdtemp: %s\n", strerror(errno));
        rc = BENCH_EXIT_RUNTIME;
        goto out_free;
    }
    snprintf(data, sizeof(data), "%s/data", dir);
    snprintf(script, sizeof(script), "%s/chart.gp", dir);
    sc = fopen(script, "w");
    if (NULL == sc || (K_HIST != kind && 0 != write_data(data, &s, K_COMPARE == kind))) {
        fprintf(stderr, "llrdma-bench: plot: cannot write in %s: %s\n", dir, strerror(errno));
        rc = BENCH_EXIT_RUNTIME;
        if (sc) {
            fclose(sc);
        }
        goto out_rm;
    }
    if (!user_title) {
        static const char *const what[] = {"",
                                           "round-trip latency by size and hint",
                                           "bandwidth by size and hint",
                                           "MPI_Allreduce time by size",
                                           "MPI_Allreduce by coll component",
                                           ""};
        snprintf(title, sizeof(title), "%s (%s)", what[kind], inputs[0]);
    }
    if (K_HIST == kind) {
        /* The title is only known after reading the dumps. */
        FILE *body = tmpfile();
        rc = NULL == body
                 ? BENCH_EXIT_RUNTIME
                 : plot_hist(body, data, ninputs, inputs, title, sizeof(title), user_title);
        if (BENCH_EXIT_OK == rc) {
            int c;
            script_head(sc, out, w, h, title);
            rewind(body);
            while (EOF != (c = fgetc(body))) {
                fputc(c, sc);
            }
        }
        if (body) {
            fclose(body);
        }
    } else {
        script_head(sc, out, w, h, title);
        size_axis(sc, &s);
        if (K_COMPARE != kind) {
            mark_hints(sc, &s);
        }
        if (K_LATENCY == kind) {
            plot_latency(sc, data, &s, "round trip (us)");
        } else if (K_ALLREDUCE == kind) {
            plot_latency(sc, data, &s, "MPI_Allreduce (us, slowest rank)");
        } else if (K_BW == kind) {
            plot_bw(sc, data, &s);
        } else {
            plot_compare(sc, data, &s);
        }
    }
    fclose(sc);
    if (BENCH_EXIT_OK == rc) {
        rc = run_gnuplot(gp, script, out);
    }
    if (BENCH_EXIT_OK == rc) {
        printf("llrdma-bench: plot: wrote %s\n", out);
    }
out_rm:
    unlink(data);
    unlink(script);
    rmdir(dir);
out_free:
    for (int i = 0; i < s.ng; ++i) {
        free(s.g[i].pts);
    }
    return rc;
}
