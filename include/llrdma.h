/*
 * llrdma.h -- public API of llrdma (link with -lllrdma, pkg-config llrdma).
 *
 * The low-latency RDMA size hint: "most of my messages are at most N bytes".
 * btl/llrdma and coll/llrdma fix their transport profile from it when MPI
 * initialises; it cannot change afterwards.  See docs/hint.md.
 */
#ifndef LLRDMA_H
#define LLRDMA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LLRDMA_SUCCESS 0
#define LLRDMA_ERR_INVALID (-1)    /* bad argument */
#define LLRDMA_ERR_RANGE (-2)      /* above LLRDMA_SIZE_HINT_MAX */
#define LLRDMA_ERR_FIXED (-3)      /* MPI is initialised: the hint is fixed */
#define LLRDMA_ERR_TRUNCATED (-4)  /* buffer too small */
#define LLRDMA_ERR_NOT_LOADED (-5) /* no llrdma component ran in this process */
#define LLRDMA_ERR_INTERNAL (-6)   /* unexpected internal failure (out of memory) */

/* Largest hint accepted anywhere (1 GiB). */
#define LLRDMA_SIZE_HINT_MAX ((size_t)1 << 30)

/* The hint in bytes, 0 = none.  After MPI_Init: the value llrdma's components
 * fixed.  Before: what they would see from llrdma_set_size_hint(),
 * OMPI_MCA_btl_llrdma_size_hint or RDMA_LOW_LATENCY_HINT (parameter files are
 * read only by MPI_Init); a value that does not parse yields 0 here and an
 * error at MPI_Init. */
size_t llrdma_get_size_hint(void);

/* Before MPI_Init: make `bytes` this process's hint (highest precedence; 0 =
 * explicitly no hint).  After MPI_Init: LLRDMA_ERR_FIXED, nothing changes. */
int llrdma_set_size_hint(size_t bytes);

/* The field report's names, same behaviour. */
size_t get_low_latency_rdma_size_hint(void);
int set_low_latency_rdma_size_hint(size_t bytes);

/* Hint for data-parallel training: grad_bytes / ranks * (1 + headroom),
 * rounded up (the report uses headroom 0.2 for control messages).
 * ranks <= 0 -> 0 (no hint); headroom < 0 or NaN counts as 0; the result
 * saturates at LLRDMA_SIZE_HINT_MAX instead of overflowing. */
size_t llrdma_hint_for_gradient(size_t grad_bytes, int ranks, double headroom);

/* This rank's effective configuration as one JSON object (the same text as
 * the btl_llrdma_dump output).  LLRDMA_ERR_NOT_LOADED when no llrdma
 * component initialised in this process (e.g. the component path is not set). */
int llrdma_effective_config_json(char *buf, size_t len);

/* Text for a return code. */
const char *llrdma_strerror(int rc);

#ifdef __cplusplus
}
#endif
#endif
