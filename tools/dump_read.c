/*
 * dump_read.c -- file handling for the per-rank dumps; see dump_read.h.
 */
#define _GNU_SOURCE
#include "dump_read.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A rank dumps at MPI_Init and again at MPI_Finalize into the same file,
 * which is appended to: a rerun adds records.  The last finalize record of a
 * rank is the latest run's. */
static int add(llrdma_dumpset_t *set, const llrdma_rank_stats_t *r)
{
    for (int i = 0; i < set->n; ++i) {
        if (set->ranks[i].rank == r->rank) {
            set->ranks[i] = *r;
            return 0;
        }
    }
    if (set->n == set->cap) {
        int cap = set->cap ? 2 * set->cap : 16;
        llrdma_rank_stats_t *p = realloc(set->ranks, (size_t)cap * sizeof(*p));
        if (NULL == p) {
            return -1;
        }
        set->ranks = p;
        set->cap = cap;
    }
    set->ranks[set->n++] = *r;
    return 0;
}

static int read_file(const char *prog, const char *path, llrdma_dumpset_t *set)
{
    FILE *fp = fopen(path, "r");
    char *line = NULL, err[256];
    size_t cap = 0;
    ssize_t len;
    int lineno = 0, records = 0, rc = 0;
    llrdma_rank_stats_t r;

    if (NULL == fp) {
        fprintf(stderr, "%s: %s: cannot open: %s\n", prog, path, strerror(errno));
        return -1;
    }
    while ((len = getline(&line, &cap, fp)) >= 0) {
        ++lineno;
        while (len > 0 && ('\n' == line[len - 1] || '\r' == line[len - 1])) {
            line[--len] = '\0';
        }
        if (0 == len) {
            continue;
        }
        ++records;
        err[0] = '\0';
        switch (llrdma_stats_from_json(line, &r, err, sizeof(err))) {
        case LLRDMA_OK:
            if (0 != add(set, &r)) {
                fprintf(stderr, "%s: out of memory\n", prog);
                rc = -1;
            }
            break;
        case LLRDMA_ERR_NOT_FOUND:
            ++set->init_only;
            break;
        default:
            fprintf(stderr, "%s: %s:%d: %s\n", prog, path, lineno, err[0] ? err : "unreadable");
            rc = -1;
            break;
        }
        if (rc) {
            break;
        }
    }
    free(line);
    fclose(fp);
    if (0 == rc && 0 == records) {
        fprintf(stderr, "%s: %s: empty, not an llrdma dump\n", prog, path);
        rc = -1;
    }
    ++set->files;
    return rc;
}

static int json_name(const struct dirent *d)
{
    size_t n = strlen(d->d_name);
    return n > 5 && 0 == strcmp(d->d_name + n - 5, ".json");
}

int llrdma_dumpset_read(const char *prog, const char *path, llrdma_dumpset_t *set)
{
    struct stat st;
    struct dirent **names = NULL;
    int n, rc = 0, regular = 0;

    if (0 != stat(path, &st)) {
        fprintf(stderr, "%s: %s: cannot open: %s\n", prog, path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        return read_file(prog, path, set);
    }
    n = scandir(path, &names, json_name, alphasort);
    if (n < 0) {
        fprintf(stderr, "%s: %s: cannot read the directory: %s\n", prog, path, strerror(errno));
        return -1;
    }
    for (int i = 0; i < n; ++i) {
        char full[4096];
        snprintf(full, sizeof(full), "%s/%s", path, names[i]->d_name);
        if (0 == rc && 0 == stat(full, &st) && S_ISREG(st.st_mode)) {
            ++regular;
            rc = read_file(prog, full, set);
        }
        free(names[i]);
    }
    free(names);
    if (0 == rc && 0 == regular) {
        fprintf(stderr, "%s: %s: no *.json dump in this directory\n", prog, path);
        rc = -1;
    }
    return rc;
}

int llrdma_dumpset_check(const char *prog, const llrdma_dumpset_t *set)
{
    if (set->n > 0) {
        return 0;
    }
    fprintf(stderr,
            "%s: %d record(s) in %d file(s), none with statistics: the statistics are written "
            "at MPI_Finalize by ranks where btl/llrdma was active (did the job finish, with "
            "btl_llrdma_dump set to a file pattern?)\n",
            prog, set->init_only, set->files);
    return -1;
}

void llrdma_dumpset_free(llrdma_dumpset_t *set)
{
    free(set->ranks);
    set->ranks = NULL;
    set->n = set->cap = 0;
}
