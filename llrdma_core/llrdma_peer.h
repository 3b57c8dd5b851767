/*
 * llrdma_peer.h -- the GPU peer path of the Allreduce: ranks of one node
 * whose device buffers other ranks' GPUs can reach (CUDA IPC) reduce them GPU
 * to GPU, without the host arena's copies.  C API of the C++ core; no CUDA
 * and no MPI type appears here (handles are opaque bytes), so the selection,
 * the handle caches and the round protocol are unit-tested without a GPU.
 *
 * One call (llrdma_peer_run) over the communicator's shared arena:
 *  0. placement: every rank stamps its placement word with the call and
 *     whether its buffers are in host or managed memory.  Such a rank knows
 *     the call falls back and returns at once, waiting for nobody: host
 *     calls pay no round for the GPU path.  The others read every rank's
 *     word (no round is used); one such rank is a fallback for all;
 *  1. publish: every rank writes its record (llrdma_peer_record_t: where its
 *     buffers live, their IPC handles, its GPU, its interprocess event, or why
 *     it cannot take part) into its slot and posts a round;
 *  2. every rank decides from all records, the same way (llrdma_peer_decide):
 *     the peer path, or a fallback to the arena path, said by the reason of
 *     the lowest rank that cannot;
 *  3. confirm, only when some rank's buffers or event changed since the last
 *     peer call: every rank maps the new ones (ops->open) and posts its
 *     outcome; any failure is a fallback on every rank;
 *  4. each rank r enqueues one kernel over its block r of the vector (the
 *     planner's block split): it reads block r of every rank's input and
 *     writes the result into block r of every rank's output -- the
 *     reduce-scatter and the all-gather in one pass -- then records its
 *     event and posts a round;
 *  5. each rank's stream waits for every other rank's event (no host wait
 *     for the GPU until the end), then for itself; the call returns.
 * Nothing is written before step 4, so a fallback leaves the buffers as the
 * caller gave them.
 * Every record and confirmation is stamped (LLRDMA_PEER_MAGIC, the call
 * number llrdma_ar_shm_t.call, the arena round), and a rank decides only
 * from stamps of this call and round: a slot holding anything else (a rank
 * that did not try the peer path in this call, a record of an earlier call)
 * ends the call with LLRDMA_PEER_ERR_SYNC on every rank, never a guess or a
 * hang.  Records are copied out of the arena before the round is released,
 * so a fast rank's next call cannot overwrite what a slow rank still reads.  Reduction order: the
 * left fold in rank order,
 * ((v0 OP v1) OP v2) ... OP v(p-1), the shm algorithms' order, so the
 * result is bitwise the host path's.
 */
#ifndef LLRDMA_PEER_H
#define LLRDMA_PEER_H

#include <stddef.h>
#include <stdint.h>

#include "llrdma_allreduce.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LLRDMA_PEER_MAX_RANKS 16
#define LLRDMA_PEER_HANDLE_BYTES 64 /* cudaIpcMemHandle_t, cudaIpcEventHandle_t */
/* llrdma_peer_run's result when the call must take the arena path instead
 * (nothing was written). */
#define LLRDMA_PEER_FALLBACK 1
/* llrdma_peer_run's error when rank *who's slot held no record of this call
 * and round: the ranks disagree on which calls try the peer path (a bug:
 * every rank must compute llrdma_peer_attempt alike).  The arena is marked
 * broken, so every rank's call fails instead of waiting. */
#define LLRDMA_PEER_ERR_SYNC (-40)
/* First word of every record and confirmation ("llrdmaPR"). */
#define LLRDMA_PEER_MAGIC 0x6c6c72646d615052ULL

/* Why a rank, or the communicator, does not take the peer path. */
enum {
    LLRDMA_PEER_OK = 0,
    /* This call only: a later call may take the peer path. */
    LLRDMA_PEER_HOST_RECV = 1, /* receive buffer in host memory */
    LLRDMA_PEER_HOST_SEND,     /* send buffer in host memory (pageable, pinned, registered) */
    LLRDMA_PEER_MANAGED,       /* managed memory: CUDA IPC cannot export it */
    LLRDMA_PEER_EXPORT,        /* CUDA refused an IPC handle (stream-ordered pool, VMM) */
    LLRDMA_PEER_OPEN,          /* a peer's IPC handle did not open here */
    /* For good on this communicator. */
    LLRDMA_PEER_SHARED_GPU, /* two ranks on one GPU */
    LLRDMA_PEER_MIG,        /* two ranks on MIG instances of one GPU */
    LLRDMA_PEER_NO_ACCESS,  /* cudaDeviceCanAccessPeer: no */
    LLRDMA_PEER_NO_LIBRARY, /* the GPU library is missing or has no IPC */
    LLRDMA_PEER_DEVICE,     /* the GPU's facts or the event could not be had */
    LLRDMA_PEER_NREASONS
};

/* Short text for a reason ("shared GPU", ...); "?" when out of range. */
const char *llrdma_peer_reason_text(int reason);
/* 1 when the reason holds for good (the communicator stops trying). */
int llrdma_peer_reason_sticky(int reason);

/* One buffer as its owner publishes it. */
typedef struct {
    uint64_t id;     /* the allocation's identity, never reused in the owner's process */
    uint64_t base;   /* the allocation's start in the owner's address space */
    uint64_t size;   /* its length */
    uint64_t offset; /* the buffer's offset in it */
    unsigned char handle[LLRDMA_PEER_HANDLE_BYTES];
} llrdma_peer_buf_t;

/* What one rank publishes per call (the arena's chunk must hold it:
 * llrdma_peer_attempt checks). */
typedef struct {
    uint64_t magic; /* stamp, set by llrdma_peer_run: LLRDMA_PEER_MAGIC, */
    uint64_t call;  /* the call (llrdma_ar_shm_t.call) */
    uint64_t round; /* and the arena round it was published in */
    int32_t reason; /* LLRDMA_PEER_OK, or why this rank cannot take part */
    int32_t pad;
    uint64_t device_key;    /* the physical GPU (a hash of its PCI bus id) */
    unsigned char uuid[16]; /* the CUDA device's UUID (a MIG instance has its own) */
    char bus_id[32];        /* its PCI bus id, for the peers' access check */
    uint64_t event_id;      /* identity of the interprocess event below */
    unsigned char event_handle[LLRDMA_PEER_HANDLE_BYTES];
    llrdma_peer_buf_t in;  /* the send buffer (the receive buffer in place) */
    llrdma_peer_buf_t out; /* the receive buffer */
} llrdma_peer_record_t;

/* From every rank's record (recs[0..n), n ranks): LLRDMA_PEER_OK when all can
 * take part, else the first reason by rank (*who: that rank, or the higher
 * rank of a pair sharing a GPU).  allow_shared: ranks sharing a GPU (or MIG
 * instances of one) count as peers (tests on one GPU; slow without MPS). */
int llrdma_peer_decide(const llrdma_peer_record_t *const *recs, int n, int allow_shared, int *who);

/* Per communicator and rank; zero-initialise.  Every field changes the same
 * way on every rank (each follows the same records), so all ranks attempt
 * the same calls. */
typedef struct {
    int never; /* a sticky reason was seen: no more attempts */
    int never_reason;
    uint64_t next_call; /* after a per-call fallback: no attempt before this call */
    uint32_t backoff;   /* calls skipped after the next per-call fallback */
    int have_last;      /* last[] holds the identities of the last peer call, which
                           succeeded on this rank; clear it on every rank when the
                           arena is rebuilt (a rank may have failed that call) */
    uint64_t last[LLRDMA_PEER_MAX_RANKS][3]; /* in.id, out.id, event_id per rank */
    uint32_t said;                           /* reasons already logged (bit per reason) */
} llrdma_peer_state_t;

/* After a fallback because of where buffers live (host, managed) the next
 * call tries again (a placement word, no round: step 0 above); after CUDA
 * refused a handle the next attempts come after 1, 2, 4 ... and at most this many calls. */
#define LLRDMA_PEER_BACKOFF_MAX 64

/* 1 when call number `call` (llrdma_ar_shm_t.call, equal on every rank)
 * should try the peer path: n ranks (2..LLRDMA_PEER_MAX_RANKS), an arena
 * whose chunk holds a record, no sticky reason, not inside a backoff. */
int llrdma_peer_attempt(const llrdma_peer_state_t *st, const llrdma_ar_shm_t *shm, int n,
                        uint64_t call);
/* 1 the first time `reason` is seen by this state (to say it once). */
int llrdma_peer_first_time(llrdma_peer_state_t *st, int reason);

/* The GPU side, implemented by the glue (or a test).  Each returns 0, or -1
 * on a failure that ends the call (the arena is then marked broken). */
typedef struct {
    void *ctx;
    /* Map every other rank's buffers and event (new since the last peer
     * call) for this rank's GPU: LLRDMA_PEER_OK or the reason it cannot. */
    int (*open)(void *ctx, const llrdma_peer_record_t *const *recs, int n);
    /* Enqueue: for i in [first, first + count): v = in_0[i] OP in_1[i] ...
     * OP in_(n-1)[i]; out_q[i] = v for every q; then record this rank's
     * event.  count may be 0 (the event is still recorded). */
    int (*reduce)(void *ctx, const llrdma_peer_record_t *const *recs, int n, size_t first,
                  size_t count);
    /* Make this rank's stream wait for every other rank's event, then wait
     * for the stream. */
    int (*finish)(void *ctx, const llrdma_peer_record_t *const *recs, int n);
} llrdma_peer_ops_t;

/* One Allreduce of `count` elements over the peer path (see the top).  `mine`:
 * this rank's record.  Returns LLRDMA_AR_OK; LLRDMA_PEER_FALLBACK with
 * *reason and *who (nothing written: run the arena path); or an error
 * (LLRDMA_AR_ERR_*: a rank failed; LLRDMA_PEER_ERR_SYNC with *who: that
 * rank's slot held no record of this call; the arena is marked broken).
 * mine's stamp is ignored (set here).  Updates *st. */
int llrdma_peer_run(llrdma_ar_shm_t *shm, int rank, int n, llrdma_peer_state_t *st,
                    const llrdma_peer_record_t *mine, const llrdma_peer_ops_t *ops, size_t count,
                    int allow_shared, int *reason, int *who);

/* --------------------------------------------------------- handle cache */

/* Mappings of other ranks' allocations (and this rank's exported handles),
 * keyed by (rank, allocation id).  An allocation's id changes when it is
 * freed and another takes its place, even at the same address: a new id
 * whose range overlaps a cached one of the same rank means that one was
 * freed, so adding it drops the old one (and the least recently used beyond
 * `max_per_rank`) through `drop`. */
typedef struct llrdma_peer_cache llrdma_peer_cache_t;
typedef void (*llrdma_peer_drop_fn)(void *ctx, int rank, void *value);

llrdma_peer_cache_t *llrdma_peer_cache_new(size_t max_per_rank); /* NULL: no memory */
/* Drops every entry through drop (may be NULL), then frees the cache. */
void llrdma_peer_cache_free(llrdma_peer_cache_t *c, llrdma_peer_drop_fn drop, void *ctx);
/* 1 and *value (and the handle, when handle is not NULL) when cached. */
int llrdma_peer_cache_find(llrdma_peer_cache_t *c, int rank, uint64_t id, void **value,
                           unsigned char *handle);
/* 0, or -1 (no memory: nothing added, nothing dropped). */
int llrdma_peer_cache_add(llrdma_peer_cache_t *c, int rank, uint64_t id, uint64_t base,
                          uint64_t size, void *value, const unsigned char *handle,
                          llrdma_peer_drop_fn drop, void *ctx);
size_t llrdma_peer_cache_size(const llrdma_peer_cache_t *c);

#ifdef __cplusplus
}
#endif
#endif
