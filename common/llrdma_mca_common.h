/*
 * Glue shared by btl/llrdma and coll/llrdma: reading an MCA variable with its
 * source, user-facing fatal errors, the per-rank dump and the modex record.
 * Compiled into both components (opal headers only).
 */
#ifndef LLRDMA_MCA_COMMON_H
#define LLRDMA_MCA_COMMON_H

#include "opal_config.h"
#include "llrdma_core.h"
#include "llrdma_hist.h"

/* Modex key under which btl/llrdma publishes this rank's hint. */
#define LLRDMA_MODEX_KEY "llrdma.hint.v1"

/* Name of the help file installed with the components. */
#define LLRDMA_HELP_FILE "help-mpi-llrdma.txt"

/* Fill `in` from MCA variable `var_index` (value, source, file and line).
 * String pointers stay valid as long as the variable is registered.  The
 * RDMA_LOW_LATENCY_HINT alias is read from the environment here, too. */
int llrdma_mca_hint_inputs(int var_index, const char *var_name, llrdma_hint_inputs_t *in);

/* Make the help file findable (idempotent). */
void llrdma_mca_help_init(void);

/* User-facing messages: the help text of `topic` in LLRDMA_HELP_FILE (its
 * one %s argument = detail), rendered by this process and written to its
 * stderr.  Not opal_show_help(): Open MPI 4.1 can lose a rank's show_help
 * and print "ORTE_ERROR_LOG: Data unpack would read past end of buffer"
 * instead (llrdma_mca_common.c says why).  The first process of the job on a
 * node prints the whole text of a topic; later ones print one line with
 * their own detail. */

/* A configuration error that must stop the job: report it, then abort the
 * whole job through PMIx so no rank hangs in MPI_Init.  A process that
 * printed only its line waits LLRDMA_FATAL_GRACE_S before aborting, so the
 * node's whole text is out before the job ends. */
#define LLRDMA_FATAL_GRACE_S 2
void llrdma_mca_fatal(const char *topic, const char *detail);

/* End the whole job without printing anything (another rank reports). */
void llrdma_mca_abort(const char *detail);

/* Same reporting without aborting. */
void llrdma_mca_warn(const char *topic, const char *detail);

/* A warning every process of a node would give alike (about a device, say):
 * the first process of the job on this node to report `topic` for `key`
 * prints it, the others print nothing.  Returns 1 if this process printed. */
int llrdma_mca_warn_once(const char *topic, const char *key, const char *detail);

/* Write cfg as one JSON line according to `spec`: NULL/""/"off" -> nothing,
 * "stderr", "stdout", otherwise a path pattern (%r rank, %h host, %p pid).
 * Returns OPAL_SUCCESS or an error after printing why. */
int llrdma_mca_dump(const char *spec, const llrdma_rank_config_t *cfg);
/* The same at MPI_Finalize: cfg with the size histogram (llrdma_stats_to_json),
 * appended to the same place. */
int llrdma_mca_dump_stats(const char *spec, const llrdma_rank_config_t *cfg,
                          const llrdma_hist_t *hist);

/* Fill rank/size/host/pid of cfg from the opal process info. */
void llrdma_mca_fill_identity(llrdma_rank_config_t *cfg);

#endif
