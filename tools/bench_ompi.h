/*
 * bench_ompi.h -- Open MPI internals llrdma-bench looks at (bench_ompi.c).
 */
#ifndef LLRDMA_BENCH_OMPI_H
#define LLRDMA_BENCH_OMPI_H

#include <mpi.h>
#include <stddef.h>

/* Name of the coll component whose MPI_Allreduce serves comm ("tuned",
 * "llrdma", ...) and where it was found ("mca_coll_tuned.so SYMBOL");
 * 0 on success, -1 when unknown (name "unknown"). */
int bench_allreduce_component(MPI_Comm comm, char *name, size_t nlen, char *detail, size_t dlen);

/* The transport towards `peer` (a rank of comm) after at least one message
 * went there: "pml=ob1 btl eager=vader send=vader rdma=vader", or the pml
 * when it is not ob1 (ucx, cm: no BTL involved). */
void bench_peer_transport(MPI_Comm comm, int peer, char *buf, size_t len);

#endif
