/*
 * llrdma_allreduce.h -- C API of the llrdma Allreduce core (C++17, no MPI).
 *
 * The Open MPI coll glue (C) maps MPI handles onto the enums below, asks the
 * planner for an algorithm, and runs it over a point-to-point vtable it
 * implements with the PML.  Nothing here includes an MPI or Open MPI header;
 * the header compiles as C and as C++.  No function throws across this
 * boundary: every failure is a negative return code.
 *
 * See docs/allreduce.md for the algorithms, the planner rules and the fixed
 * floating-point reduction order.
 */
#ifndef LLRDMA_ALLREDUCE_H
#define LLRDMA_ALLREDUCE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LLRDMA_AR_OK 0
#define LLRDMA_AR_ERR_INVALID (-1)      /* bad argument (same value as LLRDMA_ERR_INVALID) */
#define LLRDMA_AR_ERR_UNSUPPORTED (-20) /* datatype/op pair not handled: caller falls back */
#define LLRDMA_AR_ERR_NOMEM (-21)
#define LLRDMA_AR_ERR_TRANSPORT                                                                    \
    (-22) /* isend/irecv/waitall failed; the glue keeps the                                        \
             transport's own code in its ctx */
#define LLRDMA_AR_ERR_MEMORY                                                                       \
    (-23) /* a copy/reduce/alloc hook failed; the glue keeps the                                   \
             hook's own error in its ctx */
#define LLRDMA_AR_ERR_PEER_GONE                                                                    \
    (-24) /* a rank of the shared arena died (llrdma_ar_shm_t.alive)                               \
           */
/* Another rank failed in this call and said so in its messages (0-byte
 * messages: llrdma_ar_comm_t.waitall_sizes). */
#define LLRDMA_AR_ERR_PEER_FAILED (-25)

/* ---------------------------------------------------------- datatypes/ops */

typedef enum {
    LLRDMA_DT_INT8 = 0,
    LLRDMA_DT_INT16,
    LLRDMA_DT_INT32,
    LLRDMA_DT_INT64,
    LLRDMA_DT_UINT8,
    LLRDMA_DT_UINT16,
    LLRDMA_DT_UINT32,
    LLRDMA_DT_UINT64,
    LLRDMA_DT_FLOAT,
    LLRDMA_DT_DOUBLE,
    LLRDMA_DT_BOOL, /* C _Bool, C++ bool, 1-byte LOGICAL: logical ops only (nonzero true) */
    LLRDMA_DT_BYTE, /* MPI_BYTE: bitwise ops only */
    /* Pair types for MAXLOC/MINLOC, laid out as the C structs MPI defines
     * (value first, then int index; padded to the struct's alignment). */
    LLRDMA_DT_FLOAT_INT,  /* struct { float v; int k; }  8 bytes */
    LLRDMA_DT_DOUBLE_INT, /* struct { double v; int k; } 16 bytes */
    LLRDMA_DT_LONG_INT,   /* struct { long v; int k; }   16 bytes on LP64 */
    LLRDMA_DT_2INT,       /* struct { int v; int k; }    8 bytes */
    LLRDMA_DT_SHORT_INT,  /* struct { short v; int k; }  8 bytes */
    /* Fortran LOGICAL of 2, 4, 8 bytes (1 byte: LLRDMA_DT_BOOL): logical ops
     * only; nonzero is true, results are 1 or 0 (Open MPI's rule). */
    LLRDMA_DT_LOGICAL16,
    LLRDMA_DT_LOGICAL32,
    LLRDMA_DT_LOGICAL64,
    /* Fortran pair types for MAXLOC/MINLOC: the index has the value's type. */
    LLRDMA_DT_2FLOAT,  /* MPI_2REAL:             struct { float v; float k; }     8 bytes */
    LLRDMA_DT_2DOUBLE, /* MPI_2DOUBLE_PRECISION: struct { double v; double k; }  16 bytes */
    LLRDMA_DT_2INT64,  /* MPI_2INTEGER, 8-byte INTEGER: { int64 v; int64 k; }     16 bytes */
    /* Complex (C99 _Complex, Fortran COMPLEX): real part first; sum and prod
     * only, the ops MPI defines on complex. */
    LLRDMA_DT_FLOAT_COMPLEX,  /* struct { float re, im; }   8 bytes */
    LLRDMA_DT_DOUBLE_COMPLEX, /* struct { double re, im; } 16 bytes */
    LLRDMA_DT_COUNT
} llrdma_dtype_t;

typedef enum {
    LLRDMA_OP_SUM = 0,
    LLRDMA_OP_PROD,
    LLRDMA_OP_MIN,
    LLRDMA_OP_MAX,
    LLRDMA_OP_LAND,
    LLRDMA_OP_LOR,
    LLRDMA_OP_LXOR,
    LLRDMA_OP_BAND,
    LLRDMA_OP_BOR,
    LLRDMA_OP_BXOR,
    LLRDMA_OP_MAXLOC,
    LLRDMA_OP_MINLOC,
    LLRDMA_OP_COUNT
} llrdma_op_t;

/* 1 if the core reduces `dtype` with `op`, else 0 (also for out-of-range
 * values).  sum/prod/min/max: integers and float/double; sum/prod: complex;
 * land/lor/lxor: integers, bool and logical; band/bor/bxor: integers and byte;
 * maxloc/minloc: the pair types only. */
int llrdma_ar_supported(int dtype, int op);

/* Bytes of one element (the C struct size for pair types); 0 if out of range. */
size_t llrdma_ar_dtype_size(int dtype);
const char *llrdma_ar_dtype_name(int dtype); /* "int32", "double_int", "logical32",
                                                "2double", "double_complex", ...; "?" */
const char *llrdma_ar_op_name(int op);       /* "sum", "maxloc", ...; "?" */

/* inout[i] = in[i] OP inout[i] for i < count (MPI_Reduce_local semantics):
 * `in` is the left operand.  Integer arithmetic wraps (two's complement);
 * logical ops yield 0/1; min/max keep the left operand on ties and unordered
 * (NaN) compares; maxloc/minloc pick the smaller index on equal values; a
 * complex product is (ac - bd) + (ad + bc)i, each operation rounded once
 * (never fused, no C99 Annex G infinity recovery).
 * Buffers need no particular alignment.  Returns LLRDMA_AR_ERR_UNSUPPORTED for
 * a pair llrdma_ar_supported() rejects. */
int llrdma_reduce_local(int op, int dtype, const void *in, void *inout, size_t count);

/* ------------------------------------------------------------- algorithms */

enum {
    LLRDMA_AR_AUTO = 0,
    LLRDMA_AR_RECURSIVE_DOUBLING = 1,
    LLRDMA_AR_RABENSEIFNER = 2,
    LLRDMA_AR_RING = 3,
    LLRDMA_AR_SHM_DIRECT = 4, /* needs a shared arena (llrdma_ar_shm_t) */
    LLRDMA_AR_SHM_SPLIT = 5,  /* needs a shared arena */
    LLRDMA_AR_HIER = 6,       /* several nodes: llrdma_ar_plan_hier, llrdma_ar_hier_t */
    LLRDMA_AR_NALGS = 7
};
/* The algorithms the algorithm knob may force: LLRDMA_AR_AUTO up to, not
 * including, this (the hierarchical schedule is chosen per communicator). */
#define LLRDMA_AR_NKNOB LLRDMA_AR_HIER

/* "auto", "recursive_doubling", "rabenseifner", "ring", "shm_direct",
 * "shm_split", "hierarchical"; NULL if out of range. */
const char *llrdma_ar_alg_name(int alg);
/* Inverse of llrdma_ar_alg_name (exact, lower case); -1 if unknown or NULL. */
int llrdma_ar_alg_from_name(const char *name);

typedef struct {
    int alg;                 /* LLRDMA_AR_RECURSIVE_DOUBLING.. (never AUTO) */
    size_t segment_bytes;    /* ring: largest message; a multiple of the element
                                size, >= one element.  Unused by the others. */
    int nsegments_in_flight; /* ring: receives (and sends) kept posted, >= 1 */
    const char *why;         /* static text naming the rule that fired */
    /* LLRDMA_AR_HIER only (0 otherwise): the inter-node step's algorithm
     * (recursive_doubling, rabenseifner or ring; segment_bytes and
     * nsegments_in_flight above are its), the rule that chose it, the
     * slices the vector is cut into (one per local rank taking part) and the
     * nodes it spans. */
    int inter_alg;
    const char *inter_why;
    int slices;
    int nodes;
    /* Recursive doubling and Rabenseifner: the vector is reduced in pieces
     * of at most this many bytes, one after the other, so their scratch
     * (a whole piece, half a piece) stays bounded; 0 = the whole vector at
     * once.  The planners set LLRDMA_AR_PIECE_BYTES. */
    size_t piece_bytes;
} llrdma_ar_plan_t;

/* The planners' piece for the message algorithms: a 256 MB Allreduce keeps
 * at most 32 MB of scratch (a piece; Rabenseifner on a power of two of
 * ranks half of it). */
#define LLRDMA_AR_PIECE_BYTES ((size_t)32 << 20)

/* Pure.  Choose algorithm and segmentation for `bytes` (= count * dtype_size)
 * on `comm_size` ranks with the transport's size hint (0 = none).
 * forced_alg != LLRDMA_AR_AUTO selects that algorithm; forced_segment > 0
 * replaces the derived segment (rounded down to whole elements, at least one).
 * Rules (docs/allreduce.md):
 *   comm_size 1 or bytes 0      -> recursive_doubling (a copy, no messages)
 *   bytes <= small_max          -> recursive_doubling,
 *        small_max = max(8K, min(hint, 64K))
 *   count < comm_size           -> recursive_doubling (blocks would be empty)
 *   bytes <= 1M, power of two   -> rabenseifner
 *   bytes <= 256K, otherwise    -> rabenseifner
 *   else                        -> ring
 *   ring segment: hint >= 4K ? min(hint, 1M) : 64K;
 *   in flight: clamp(512K / segment, 2, 8).
 * All ranks must pass equal arguments (the result drives message matching). */
int llrdma_ar_plan(size_t bytes, size_t dtype_size, int comm_size, uint64_t hint, int forced_alg,
                   size_t forced_segment, llrdma_ar_plan_t *out);

/* Same, knowing the transport: eager_bytes is the largest payload the
 * point-to-point layer sends eagerly to every peer (0 = unknown).  A small
 * vector just too big for one eager message, whose halves are eager, then
 * goes to Rabenseifner instead of recursive doubling.  Every rank must pass
 * the same value (the glue agrees on the minimum). */
int llrdma_ar_plan_ex(size_t bytes, size_t dtype_size, int comm_size, uint64_t hint,
                      size_t eager_bytes, int forced_alg, size_t forced_segment,
                      llrdma_ar_plan_t *out);

/* Same, knowing whether the ranks share a memory arena: shm_chunk > 0 is the
 * arena's chunk (llrdma_ar_shm_t.chunk_bytes), 0 = no arena.  With an arena
 * the shared-memory algorithms are chosen (the hint and eager limit describe
 * the network path, which they do not use):
 *   bytes * comm_size <= 4K      -> shm_direct
 *   else                         -> shm_split
 *   segment: the chunk, or the forced segment when smaller.
 * A forced shm_* without an arena plans as auto without one. */
int llrdma_ar_plan_shm(size_t bytes, size_t dtype_size, int comm_size, uint64_t hint,
                       size_t eager_bytes, size_t shm_chunk, int forced_alg, size_t forced_segment,
                       llrdma_ar_plan_t *out);

/* -------------------------------------------------------------- transport */

/* Point-to-point transport, implemented by the glue (PML) or a test.
 *  - isend/irecv start a transfer of exactly `bytes` bytes and return a request
 *    in *req (0 on success).  Zero-byte transfers are never requested.
 *  - tag is small, 0 <= tag < LLRDMA_AR_TAG_MAX.  Every algorithm keeps, for each
 *    ordered pair of ranks, the same order of sends on one side as of receives
 *    on the other, so the glue may map all tags onto one reserved collective tag
 *    (MCA_COLL_BASE_TAG_ALLREDUCE).  Messages only match within one call; the
 *    call is collective and calls on one communicator are ordered.
 *  - waitall completes and releases every request given, even when it fails;
 *    it returns 0 or the first error.
 *  - cancel (may be NULL) asks an outstanding request to finish early; it is
 *    used only after an error, always followed by waitall on that request.
 * After any error the core cancels and waits all its outstanding requests,
 * then returns LLRDMA_AR_ERR_TRANSPORT: no request outlives the call. */
#define LLRDMA_AR_TAG_MAX 32

/* A memory arena every rank of the communicator maps (POSIX shared memory on
 * one node; threads in tests), used by the shm_* algorithms instead of
 * messages.  Layout (llrdma_ar_shm_bytes, shm_arena.cc): per rank three
 * 64-byte lines (two flags, one info line), an abort line, per rank two
 * generations of 19 lines for vectors of at most 1 KB, then 4p + 2
 * chunks (two generations of one slot per rank, two results, two private
 * chunks per rank).  Each rank has its own llrdma_ar_shm_t (its mapping's address,
 * its own generation counter); the arena's bytes are shared.
 *  - base: the mapping, 64-byte aligned, zero-filled before the first run.
 *  - chunk_bytes: a multiple of 64, > 0, equal on every rank.
 *  - gen: rounds this rank completed; 0 at first, advanced by llrdma_ar_run.
 *    Every rank must run the same sequence of shm calls on one arena.
 *  - progress: called about every 64 polls while waiting for other ranks
 *    (Open MPI: opal_progress, which yields the core when oversubscribed);
 *    NULL: the core yields the thread.
 *  - device_fold: with copy/reduce hooks, 1 when the reduce hook may read
 *    (and its copies write) the arena directly -- pinned host memory mapped
 *    for the GPU -- so the reduction runs there; 0: the CPU folds the arena.
 *    Local to the rank (results are bitwise the same either way).
 *  - device_fold_min: shm_split slices below this many bytes fold on the
 *    CPU even with device_fold (a device fold costs one more stream sync).
 *  - call: the caller's number of the current Allreduce on this arena, the
 *    same on every rank for the same call (the glue counts its arena calls).
 *    The first rank that fails records it, so every rank can tell which call
 *    the arena broke in (llrdma_ar_shm_check).
 *  - alive, alive_ctx, liveness_ns: while a rank waits on another's flag, it
 *    asks alive(alive_ctx, rank) about that rank every liveness_ns; 0 means
 *    the rank is gone (its process died): the arena is marked broken with
 *    that rank recorded, and the wait ends with LLRDMA_AR_ERR_PEER_GONE.
 *    NULL or 0: no check.
 * After a rank fails inside a shm run (a memory hook error) or marks the
 * arena (llrdma_ar_shm_fail), the arena stays broken: every rank's current
 * and later shm runs on it return LLRDMA_AR_ERR_TRANSPORT (or
 * LLRDMA_AR_ERR_PEER_GONE) instead of waiting for the failed rank. */
/* How a waiter behaves: spin for spin_ns, then yield the CPU between polls;
 * after sleep_ns in all (0: never), sleep between polls. */
typedef struct {
    uint64_t spin_ns;
    uint64_t sleep_ns;
} llrdma_ar_wait_policy_t;

/* The phases of a round through the arena's slots (llrdma_ar_shm_t.phase_ns). */
typedef enum {
    LLRDMA_AR_PHASE_COPY_IN,  /* this rank's input into its slot */
    LLRDMA_AR_PHASE_WAIT_IN,  /* until every rank's input is there */
    LLRDMA_AR_PHASE_FOLD,     /* the fold: this rank's slice, or all of it */
    LLRDMA_AR_PHASE_WAIT_RED, /* until the other ranks' slices are reduced */
    LLRDMA_AR_PHASE_COPY_OUT, /* the result out (shm_split) */
    LLRDMA_AR_PHASES
} llrdma_ar_phase_t;

typedef struct llrdma_ar_shm {
    void *base;
    size_t chunk_bytes;
    uint64_t gen;
    void (*progress)(void *ctx);
    void *progress_ctx;
    int device_fold;
    size_t device_fold_min;
    uint64_t call;
    int (*alive)(void *ctx, int rank);
    void *alive_ctx;
    uint64_t liveness_ns;
    /* How a waiting rank behaves (llrdma_ar_wait_idle).  Zero: yield at
     * once, never sleep. */
    llrdma_ar_wait_policy_t wait;
    /* shm_direct on vectors of at most lines_max bytes (capped at
     * LLRDMA_AR_SHM_LINES_MAX; 0 = never) sends them in the arena's lines:
     * data and round number in one cache line.  Equal on every rank. */
    size_t lines_max;
    /* Rounds this rank ran in the lines (tests, the dump). */
    uint64_t line_rounds;
    /* Where this rank's rounds through the slots spend their time: set
     * time_phases and every such round adds its nanoseconds per phase (two
     * clock reads per phase, so off unless asked for; the glue sets it at
     * coll_llrdma_verbose 5 and says the means when the arena goes). */
    int time_phases;
    uint64_t phase_rounds;
    uint64_t phase_ns[LLRDMA_AR_PHASES];
    /* shm_split on host buffers shares the fold when a call's rounds hold
     * at least share_min bytes (0 = never): each rank copies its input in
     * slice by slice, announcing each, and the slices' tiles go to whichever
     * rank claims them (its owner from the front, the others from the back),
     * so a rank that runs slower (a busy or shared CPU) folds less, and
     * ranks that finished copying in fold what every rank has copied so far.
     * Equal on every rank.  Counters (tests, the dump): rounds shared, and
     * tiles this rank folded from other ranks' slices. */
    size_t share_min;
    /* Host copies out of the arena (shm_split) in calls of at least
     * stream_min bytes use non-temporal stores (0 = never): the output's
     * lines are written without being read first and leave this core's
     * cache to the fold (llrdma_ar_shm_default_stream_min).  This rank's
     * own choice: nothing else changes.  Counter: rounds copied out so. */
    size_t stream_min;
    uint64_t stream_outs;
    uint64_t share_rounds;
    uint64_t share_stolen;
    /* Tests only (NULL otherwise): called after each tile this rank folds in
     * a shared round, before the tile is announced (a test slows a rank
     * down with it, or stops it holding a tile). */
    void (*on_tile)(void *ctx, int rank);
    void *on_tile_ctx;
} llrdma_ar_shm_t;

/* The phase's name as the verbose line says it ("copy in", ...). */
const char *llrdma_ar_phase_name(int phase);

/* The largest vector the arena's lines hold (llrdma_ar_shm_t.lines_max):
 * 37 lines per rank and generation. */
#define LLRDMA_AR_SHM_LINES_MAX 2048

/* The largest vector a shm_direct call on `size` ranks sends in the lines
 * with lines_max (llrdma_ar_shm_t.lines_max): lines_max up to
 * LLRDMA_AR_SHM_LINES_MAX on 2 ranks, at most five lines (280 bytes) on
 * more (docs/allreduce.md). */
size_t llrdma_ar_lines_limit(size_t lines_max, int size);

/* 1 when a shm_direct plan of `size` ranks sends `bytes` in the arena's
 * lines (the same answer on every rank: it reads only agreed values). */
int llrdma_ar_lines_fit(const llrdma_ar_shm_t *shm, int size, size_t bytes);

/* What llrdma_ar_run does for a shm_direct plan on host buffers (the lines
 * when the vector fits them, llrdma_ar_lines_fit, else the plan's rounds
 * through the slots), without a transport or scratch: the glue's fast path
 * for a call like the one before, on a communicator whose ranks all reach
 * it for the same calls.  sendbuf NULL or equal to recvbuf: in place.  Its
 * rounds, results and failures are llrdma_ar_run's. */
int llrdma_ar_shm_direct_host(const llrdma_ar_plan_t *plan, llrdma_ar_shm_t *shm, int rank,
                              int size, const void *sendbuf, void *recvbuf, size_t count, int dtype,
                              int op);

/* The same call prepared once, when it runs in the lines: what
 * llrdma_ar_shm_direct_host checks and looks up on every call (the
 * arguments, the fold kernel, whether the vector fits the lines) done when
 * the glue remembers the call, so that llrdma_ar_lines_run checks only the
 * arena's failure word before its round (a 64-byte call on 2 ranks spent
 * about a sixth of its instructions on those checks).  Filled by
 * llrdma_ar_lines_prepare; the caller only keeps it. */
typedef struct llrdma_ar_lines_call {
    void (*fold)(const void *a, const void *b, void *out, size_t count);
    size_t count;
    size_t esize;
    int rank;
    int size;
} llrdma_ar_lines_call_t;

/* 1 when llrdma_ar_shm_direct_host would run this call in the lines (then
 * *c is filled), else 0 (*c zeroed; run the call by
 * llrdma_ar_shm_direct_host). */
int llrdma_ar_lines_prepare(const llrdma_ar_plan_t *plan, const llrdma_ar_shm_t *shm, int rank,
                            int size, size_t count, int dtype, int op, llrdma_ar_lines_call_t *c);

/* One prepared call on shm (an arena of the size it was prepared for):
 * sendbuf NULL or equal to recvbuf: in place.  Its round, results and
 * failures are llrdma_ar_shm_direct_host's; LLRDMA_AR_ERR_INVALID for a
 * call not prepared or a missing buffer or arena. */
int llrdma_ar_lines_run(const llrdma_ar_lines_call_t *c, llrdma_ar_shm_t *shm, const void *sendbuf,
                        void *recvbuf);

/* One waiter's state: zero-initialise per wait. */
typedef struct {
    uint64_t start_ns; /* 0 until the first idle step that looks at the clock */
    uint64_t now_ns;   /* the clock as the last such step read it (callers reuse it) */
    uint32_t polls;
    uint32_t nap_us;
} llrdma_ar_wait_t;

/* One idle step between two polls of a flag or a request, the one wait
 * primitive of the arena's and the message transports' waits: a pause
 * instruction; every 64th step also progress(ctx) (when set) and, by the
 * policy, a yield of the CPU (once spin_ns have passed since the wait's
 * first such step) or a sleep of 50 us doubling to 1 ms (once sleep_ns
 * have, when sleep_ns > 0).  The clock is read only every 64th step. */
void llrdma_ar_wait_idle(const llrdma_ar_wait_policy_t *p, llrdma_ar_wait_t *w,
                         void (*progress)(void *ctx), void *ctx);

/* 1 when more ranks share this node than the process may run on at once:
 * ranks_here (processes of the job on this node) above the node's online
 * CPUs, above a CPU quota (cgroup cpu.max as CPUs; <= 0: none), or above an
 * affinity mask of more than one CPU (a process bound to one CPU is taken
 * to have it to itself, as mpirun binds ranks to distinct cores). */
int llrdma_ar_oversubscribed(int ranks_here, int online_cpus, int affinity_cpus, double quota_cpus);

/* The policy from the knobs: spin_us < 0 = auto (0 when oversubscribed,
 * else 10 ms), sleep_ms 0 = never sleep. */
llrdma_ar_wait_policy_t llrdma_ar_wait_policy_for(int oversubscribed, long spin_us, long sleep_ms);

/* The default arena chunk for comm_size ranks on a machine with l2_bytes of
 * L2 cache per core (0 = unknown: 1M): l2 as a power of two, 64K to 4M,
 * halved while the arena would pass 160 MB, never below
 * LLRDMA_AR_SHM_MIN_CHUNK (docs/allreduce.md, "Chunk"). */
#define LLRDMA_AR_SHM_MIN_CHUNK ((size_t)16 << 10)
size_t llrdma_ar_shm_default_chunk(int comm_size, size_t l2_bytes);
/* The default llrdma_ar_shm_t.stream_min: twice one core's L2 (0 =
 * unknown: 0) on Intel CPUs, where it was measured to pay, never on the
 * others (AMD EPYC: slower; docs/allreduce.md, "Streamed copy out"). */
size_t llrdma_ar_shm_default_stream_min(size_t l2_bytes, int cpu_intel);
/* Bytes of the arena for comm_size ranks; 0 for invalid arguments or overflow. */
size_t llrdma_ar_shm_bytes(int comm_size, size_t chunk_bytes);
/* Rank `rank`'s info line: 64 bytes, zero at first, that the core never
 * touches -- for the caller to publish per-rank facts to the other ranks
 * (the Open MPI glue: which GPU a rank uses).  NULL for bad arguments. */
void *llrdma_ar_shm_rank_info(const llrdma_ar_shm_t *shm, int comm_size, int rank);
/* 1 when a rank has failed on this arena (see above), else 0. */
int llrdma_ar_shm_broken(const llrdma_ar_shm_t *shm, int comm_size);
/* Marks the arena broken by this rank in call shm->call, for a failure
 * outside llrdma_ar_run (a GPU copy or a missing buffer before it): every
 * rank waiting on the arena stops waiting.  The first mark wins. */
void llrdma_ar_shm_fail(llrdma_ar_shm_t *shm, int comm_size);

/* What a rank does with the arena in its call shm->call (pure):
 *  USABLE     not broken;
 *  FAILED     it broke in this call: the call fails on this rank;
 *  REBUILD    it broke in an earlier call.  No rank passes the first round of
 *             the call after the one it broke in (the failed rank never posts
 *             it), so every rank reaches REBUILD in that same call, before
 *             writing any output: all can set up a fresh arena (a collective)
 *             and run the call again;
 *  PEER_GONE  a rank died (*gone_rank, when not NULL): nothing collective can
 *             succeed any more; every call fails. */
enum {
    LLRDMA_AR_SHM_USABLE = 0,
    LLRDMA_AR_SHM_FAILED = 1,
    LLRDMA_AR_SHM_REBUILD = 2,
    LLRDMA_AR_SHM_PEER_GONE = 3
};
int llrdma_ar_shm_check(const llrdma_ar_shm_t *shm, int comm_size, int *gone_rank);

/* The byte ranges of the arena that rank `rank` alone writes (its two input
 * slots and its two private chunks), so that each rank can reserve -- and
 * first-touch, which places the pages on its NUMA node -- its own part: up
 * to `max` ranges into off[]/len[]; returns how many (4), 0 for bad
 * arguments.  The rest (flags, results) is rank 0's. */
int llrdma_ar_shm_rank_ranges(int comm_size, size_t chunk_bytes, int rank, size_t *off, size_t *len,
                              int max);

/* Where a rank's own part of the arena lives (the glue's NUMA report, at
 * coll_llrdma_verbose 10).  llrdma_ar_shm_rank_pages: the whole pages of
 * `page_bytes` (a power of two) inside rank `rank`'s ranges, as offsets
 * from base, up to `max` into page_off[]; returns how many there are (may
 * exceed max: only max are written), 0 for bad arguments.  A page the range
 * shares with a neighbour's (the slots start 64-byte aligned, not page
 * aligned) is not counted: no hole can be punched in part of a page, so it
 * stays where rank 0's reservation put it. */
size_t llrdma_ar_shm_rank_pages(int comm_size, size_t chunk_bytes, int rank, size_t page_bytes,
                                size_t *page_off, size_t max);
/* The census of move_pages(2)'s status array (one node number or negative
 * errno per page) against the node `node` the rank runs on. */
typedef struct llrdma_ar_numa_census {
    size_t pages;       /* entries */
    size_t local;       /* on `node` */
    size_t remote;      /* on another node */
    size_t unknown;     /* negative status: not resident, or not queried */
    int remote_node;    /* the other node holding most of them, -1 if none */
    size_t remote_most; /* pages on remote_node */
} llrdma_ar_numa_census_t;
void llrdma_ar_numa_census(const int *status, size_t n, int node, llrdma_ar_numa_census_t *out);

/* ----------------------------------------------------------- hierarchical */

/* A communicator spanning several nodes (docs/allreduce.md, "Several
 * nodes"): every node reduces its ranks' inputs through its own arena, slice
 * by slice (slice j = block j of the vector cut into plan.slices blocks, held
 * by the rank with local_rank j on every node); the ranks holding slice j on
 * the different nodes run an inter-node Allreduce of it over the transport
 * (isend/irecv: the PML today, a BTL put path later); every node then
 * gathers the slices through its arena.  Ranks with local_rank >= slices
 * only copy in and out.
 *
 * What a communicator's layout says about it (llrdma_ar_layout). */
typedef struct llrdma_ar_topo {
    int nnodes;     /* nodes the communicator spans */
    int min_local;  /* fewest ranks on one node */
    int max_local;  /* most ranks on one node */
    int arenas;     /* 1: every node with more than one rank has an arena */
    int below_hier; /* 1: the module below is hierarchical itself (coll/han) */
} llrdma_ar_topo_t;

/* One rank's place in the layout, for llrdma_ar_run with a LLRDMA_AR_HIER
 * plan (llrdma_ar_comm_t.hier).  With local_size > 1, llrdma_ar_comm_t.shm is
 * the node's arena: local_size ranks, indexed by local_rank. */
typedef struct llrdma_ar_hier {
    int nnodes;
    int node;         /* this rank's node, 0..nnodes-1 (nodes ordered by their lowest rank) */
    int local_rank;   /* position among its node's ranks, in communicator rank order */
    int local_size;   /* ranks on its node */
    const int *peers; /* nnodes communicator ranks: the rank with this local_rank on
                         every node (peers[node] is this rank); -1 where that node has
                         fewer ranks.  Read for local_rank < plan.slices only. */
} llrdma_ar_hier_t;

/* From node_key[size] (equal keys: same node; any values), the topology and
 * rank `rank`'s place in it: *topo (arenas and below_hier set to 0), *me
 * with me->peers = peers, and peers[0..nnodes-1] (peers_max entries at
 * least; size is enough).  Nodes are numbered by their lowest rank, local
 * ranks in rank order.  0 or LLRDMA_AR_ERR_INVALID. */
int llrdma_ar_layout(int size, const int *node_key, int rank, llrdma_ar_topo_t *topo,
                     llrdma_ar_hier_t *me, int *peers, int peers_max);

/* Per communicator (once, the same on every rank): how coll/llrdma serves
 * a communicator with this topology and algorithm knob. */
enum { LLRDMA_AR_MODE_FLAT = 0, LLRDMA_AR_MODE_HIER = 1, LLRDMA_AR_MODE_DECLINE = 2 };
/*  one node, or one rank per node          -> FLAT (the flat planner above)
 *  several ranks on some node, arenas      -> HIER
 *  no arena, module below hierarchical     -> DECLINE (han does better than a
 *                                             flat schedule across nodes)
 *  no arena otherwise                      -> FLAT
 * *why (may be NULL): static text naming the rule.  Negative for bad input. */
int llrdma_ar_mode(const llrdma_ar_topo_t *topo, const char **why);

/* The plan of one call on a HIER communicator: alg LLRDMA_AR_HIER,
 * slices = min(min_local, max(1, bytes / 8K), count); the inter-node step is
 * what llrdma_ar_plan_ex chooses for the largest slice on nnodes ranks with
 * the hint, the eager limit and the knobs (a forced message algorithm forces
 * the inter-node step; a forced shm_* is ignored).  All ranks must pass
 * equal arguments. */
int llrdma_ar_plan_hier(size_t bytes, size_t dtype_size, const llrdma_ar_topo_t *topo,
                        uint64_t hint, size_t eager_bytes, int forced_alg, size_t forced_segment,
                        llrdma_ar_plan_t *out);

/* The largest message in bytes that the inter-node step of a HIER plan sends
 * for a vector of count elements of esize bytes (0: none, or not a HIER
 * plan): the largest slice for recursive doubling and for the fold onto a
 * power of two, the first half of it for Rabenseifner on a power of two of
 * nodes, the ring's segment (at most a block of the slice).  The glue sends
 * a call whose messages all fit the PML's eager limit through the PML. */
size_t llrdma_ar_hier_msg_max(const llrdma_ar_plan_t *plan, size_t count, size_t esize);

/* Test-only node grouping (coll_llrdma_node_split): "" = off; "N" = blocks
 * of N consecutive world ranks; "A,B,..." = groups of A, B, ... ranks, which
 * must cover the world exactly.  Parses text into sizes[0..*n-1] (at most
 * max; "N" gives *n = 1, *repeat = 1).  0, or LLRDMA_AR_ERR_INVALID with
 * err naming the problem. */
int llrdma_ar_node_split_parse(const char *text, int *sizes, int max, int *n, int *repeat,
                               char *err, size_t errlen);
/* The group of world rank `wrank` in a world of `wsize` ranks: >= 0, or -1
 * when an explicit list does not cover the world exactly (err says so). */
int llrdma_ar_node_split_group(const int *sizes, int n, int repeat, int wrank, int wsize, char *err,
                               size_t errlen);

typedef struct llrdma_ar_comm {
    void *ctx;
    int rank;
    int size;
    int (*isend)(void *ctx, const void *buf, size_t bytes, int peer, int tag, void **req);
    int (*irecv)(void *ctx, void *buf, size_t bytes, int peer, int tag, void **req);
    int (*waitall)(void *ctx, int n, void **reqs);
    int (*cancel)(void *ctx, void *req);
    /* Optional: waitall that also gives each receive's received bytes
     * (bytes[i]; anything for a send), and takes sends of 0 bytes.  With it
     * the message algorithms (recursive doubling, Rabenseifner, ring) carry
     * a rank's failure in their own messages: the failed rank runs the rest
     * of the schedule with 0-byte sends and no local work, every rank that
     * receives an empty message where it expected data does the same and
     * returns LLRDMA_AR_ERR_PEER_FAILED, and every message of the call is
     * matched within it, so nothing of a failed call reaches the next one.
     * A rank that failed after its last send leaves the others' results
     * good.  Without it a failure cancels the rank's requests and its peers
     * wait for messages that never come (as in MPI).  A scratch allocation
     * that fails before the first message is the caller's: the glue runs
     * the call failed (`failed`) with receives into memory of its own. */
    int (*waitall_sizes)(void *ctx, int n, void **reqs, size_t *bytes);

    /* Optional memory hooks, for buffers the core must not touch itself (GPU
     * memory): all NULL = host memory (memcpy, llrdma_reduce_local, malloc).
     * When copy and reduce are set, the core never reads or writes a buffer
     * except through copy/reduce/isend/irecv, and its scratch comes from alloc
     * (or from the caller).  Set copy and reduce together, alloc and free
     * together.  Each returns 0 or nonzero on failure (alloc: NULL); a failure
     * ends the call like a transport error, with LLRDMA_AR_ERR_MEMORY.
     *  - copy: bytes > 0, non-overlapping.
     *  - reduce: out[i] = a[i] OP b[i] (a the left operand, op/dtype semantics of
     *    llrdma_reduce_local); out may alias a or b.  count > 0.
     *  - alloc/free: scratch of llrdma_ar_scratch_bytes(); free is called once
     *    for every successful alloc, after every request of the call completed.
     * The hooks may be asynchronous (e.g. enqueued on one stream): the core only
     * relies on the effects of hook calls and transfers appearing in the order
     * it issues them, as seen by later hook calls and isends. */
    int (*copy)(void *ctx, void *dst, const void *src, size_t bytes);
    int (*reduce)(void *ctx, int op, int dtype, const void *a, const void *b, void *out,
                  size_t count);
    void *(*alloc)(void *ctx, size_t bytes);
    void (*free)(void *ctx, void *p);

    /* Shared-memory algorithms only.  shm: the arena (NULL: none; shm_*
     * plans then fail with LLRDMA_AR_ERR_INVALID).  sync: waits until every
     * copy/reduce hook call so far has taken effect (before the arena's data
     * is announced to other ranks); required with asynchronous hooks. */
    llrdma_ar_shm_t *shm;
    int (*sync)(void *ctx);

    /* LLRDMA_AR_HIER plans only: this rank's place in the node layout (shm is
     * then its node's arena, when it has more than one rank).  With the
     * hooks above (device vectors) the arena must be memory the hooks can
     * address (pinned; shm->device_fold as for shm_split) and isend/irecv
     * take device memory: the GPU-direct inter-node step. */
    const llrdma_ar_hier_t *hier;

    /* 1: this rank failed before the call (its input could not be staged):
     * with waitall_sizes and a message algorithm it still runs the call's
     * schedule, carrying the failure (empty sends, nothing computed; the
     * buffers must exist) and returns LLRDMA_AR_ERR_MEMORY, so its peers
     * fail the call too instead of waiting; otherwise it returns that at
     * once. */
    int failed;
} llrdma_ar_comm_t;

/* ------------------------------------------------ CUDA device vectors
 * Which way coll/llrdma moves a device vector (docs/allreduce.md, "GPU
 * buffers"): the size rules, shared by the component and llrdma-check. */
enum {
    LLRDMA_AR_DEV_WHOLE = 1, /* copied whole to host memory, host path */
    LLRDMA_AR_DEV_PEER = 2,  /* GPU peer path (CUDA IPC) */
    LLRDMA_AR_DEV_GPU = 3,   /* reduced on the GPU, staged per round or segment */
    LLRDMA_AR_DEV_DIRECT = 4 /* several nodes: GPU memory straight to the NIC */
};
typedef struct {
    int hier;           /* the plan is the hierarchical schedule (several nodes) */
    int shm_plan;       /* the plan runs in the shared-memory arena */
    int arena;          /* the communicator has an arena */
    int gpu_peer;       /* coll_llrdma_gpu_peer: 0 off, 1 auto, 2 force */
    uint64_t peer_min;  /* coll_llrdma_gpu_peer_min */
    int stage_auto;     /* coll_llrdma_gpu_stage_max is "auto" */
    uint64_t stage_max; /* its value otherwise */
    /* hier only: this rank's btl/llrdma registers GPU memory on every module
     * and the call's inter-node step goes by RDMA writes (the put transport):
     * the GPU-direct step.  Local to the rank: the messages are the same
     * either way. */
    int direct;
} llrdma_ar_dev_rule_t;
/* coll_llrdma_gpu_stage_max in effect ("auto": 16K with an arena, 2M without). */
uint64_t llrdma_ar_dev_stage_max(const llrdma_ar_dev_rule_t *r);
/* 1: the peer path is worth trying for `bytes` (whether the GPUs reach each
 * other is asked at run time). */
int llrdma_ar_dev_try_peer(uint64_t bytes, const llrdma_ar_dev_rule_t *r);
/* The path (LLRDMA_AR_DEV_*) of a device vector of `bytes`, given what run
 * time found: peer_ok (the GPUs reach each other and the peer path ran),
 * shared_gpu (another rank uses this GPU).  *why: one line. */
int llrdma_ar_dev_path(uint64_t bytes, const llrdma_ar_dev_rule_t *r, int peer_ok, int shared_gpu,
                       const char **why);
/* "host-copy", "gpu-peer", "gpu", "gpu-direct" */
const char *llrdma_ar_dev_path_name(int path);

/* Scratch the run needs, in bytes (0 is possible). */
size_t llrdma_ar_scratch_bytes(const llrdma_ar_plan_t *plan, size_t count, int dtype,
                               int comm_size);

/* Allreduce `count` elements.  sendbuf NULL or equal to recvbuf means in place
 * (MPI_IN_PLACE).  scratch NULL: the core mallocs (and frees) what it needs,
 * through comm->alloc/free when set (with copy/reduce hooks but no alloc hook,
 * scratch is required: LLRDMA_AR_ERR_INVALID otherwise); otherwise it must hold
 * llrdma_ar_scratch_bytes() bytes.  No buffer needs any alignment.  Buffers
 * must not overlap other than sendbuf == recvbuf.  The result is bitwise
 * identical on every rank (see docs/allreduce.md for the order). */
int llrdma_ar_run(const llrdma_ar_plan_t *plan, const llrdma_ar_comm_t *comm, const void *sendbuf,
                  void *recvbuf, size_t count, int dtype, int op, void *scratch,
                  size_t scratch_bytes);

/* ------------------------------------------------ BTL put transport
 * One message of coll/llrdma's inter-node put transport
 * (coll_llrdma_btlnet.c; docs/allreduce.md, "Transport seam"): the pure
 * protocol, the glue does the I/O.  Receiver: registers its buffer, sends
 * READY (address, size, handle; or the error that kept it from
 * registering), completes on DONE.  Sender: waits for READY, puts the bytes
 * in pieces (llrdma_np_next_piece), sends DONE with its status once every
 * put's callback ran.  Every READY carrying a registration gets one DONE. */
enum {
    LLRDMA_NP_WAIT_READY = 0, /* send: READY not arrived */
    LLRDMA_NP_PUTTING = 1,    /* send: pieces to start or in flight */
    LLRDMA_NP_SEND_DONE = 2,  /* send: DONE (with status) is to be sent */
    LLRDMA_NP_WAIT_DONE = 3,  /* receive: READY sent, DONE not arrived */
    LLRDMA_NP_COMPLETE = 4
};
enum {
    LLRDMA_NP_OK = 0,
    LLRDMA_NP_ERR_LOCAL = 1, /* a registration or put failed here */
    LLRDMA_NP_ERR_PEER = 2,  /* the other side reported a failure */
    LLRDMA_NP_ERR_SIZE = 3,  /* send and receive sizes differ (an empty send matches any:
                                a failure carried, waitall_sizes) */
    LLRDMA_NP_CANCELLED = 4,
    /* READY only: the receiver carries a failure and takes no data (it has
     * no buffer for it: llrdma_ar_comm_t.failed without scratch).  The send
     * completes without puts and without DONE, not as an error: the sender
     * learns of the failure from the receiver's own (empty) sends, as over
     * the PML.  The receive completes at once with 0 bytes. */
    LLRDMA_NP_SUNK = 5
};
typedef struct {
    int send, state, status, cancelled;
    int puts_out; /* send: puts started whose callback has not run */
    size_t bytes;
    size_t next; /* send: bytes whose put was started */
} llrdma_np_msg_t;
void llrdma_np_send_init(llrdma_np_msg_t *m, size_t bytes);
/* ready_status: what READY carried (LLRDMA_NP_OK: a registration). */
void llrdma_np_recv_init(llrdma_np_msg_t *m, size_t bytes, int ready_status);
void llrdma_np_on_ready(llrdma_np_msg_t *m, size_t peer_bytes, int peer_status);
/* The next put to start: 1 with [*off, *off + *len), else 0.  limit: the
 * BTL's put limit (0 = none); align: its put alignment (0 or 1 = none;
 * every piece but the last is then a multiple of it). */
int llrdma_np_next_piece(const llrdma_np_msg_t *m, size_t limit, size_t align, size_t *off,
                         size_t *len);
void llrdma_np_put_started(llrdma_np_msg_t *m, size_t len);
void llrdma_np_put_done(llrdma_np_msg_t *m, int ok); /* a put's callback */
void llrdma_np_fail(llrdma_np_msg_t *m, int status); /* a local failure (LLRDMA_NP_ERR_*) */
void llrdma_np_done_sent(llrdma_np_msg_t *m);
void llrdma_np_on_done(llrdma_np_msg_t *m, int peer_status);
void llrdma_np_cancel(llrdma_np_msg_t *m);
/* 1 when no RDMA write may touch this message's memory any more. */
int llrdma_np_may_release(const llrdma_np_msg_t *m);
/* 1 while a control message from the peer is due to this message. */
int llrdma_np_expects_ctl(const llrdma_np_msg_t *m);

#ifdef __cplusplus
}
#endif
#endif
