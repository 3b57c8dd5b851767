/*
 * dump_read.h -- read btl/llrdma's per-rank dumps (btl_llrdma_dump) for the
 * offline tools (llrdma-hint recommend, llrdma-check --stats).  The parsing is
 * the core's (llrdma_stats_from_json); this is the file handling around it.
 */
#ifndef LLRDMA_DUMP_READ_H
#define LLRDMA_DUMP_READ_H

#include "llrdma_hist.h"

typedef struct {
    llrdma_rank_stats_t *ranks; /* one per rank with a finalize record, latest wins */
    int n, cap;
    int init_only; /* records without statistics (written at MPI_Init) */
    int files;
} llrdma_dumpset_t;

/* Add FILE, or every regular *.json file in DIR.  On bad input prints
 * "PROG: FILE:LINE: reason" to stderr and returns -1; 0 otherwise. */
int llrdma_dumpset_read(const char *prog, const char *path, llrdma_dumpset_t *set);
/* After all paths: -1 (with a message) when no record had statistics. */
int llrdma_dumpset_check(const char *prog, const llrdma_dumpset_t *set);
void llrdma_dumpset_free(llrdma_dumpset_t *set);

#endif
