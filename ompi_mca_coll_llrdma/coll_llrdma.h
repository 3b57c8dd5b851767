/*
 * coll/llrdma: MPI_Allreduce whose algorithm and segment size follow the
 * low-latency RDMA size hint; every other collective, and every Allreduce it
 * does not handle, goes to the module below it.
 */
#ifndef MCA_COLL_LLRDMA_H
#define MCA_COLL_LLRDMA_H

#include "ompi_config.h"

#include "ompi/mca/coll/coll.h"

#include "llrdma_ompi_compat.h"

#include "llrdma_allreduce.h"
#include "llrdma_core.h"
#include "llrdma_peer.h"

BEGIN_C_DECLS

typedef enum {
    LLRDMA_MISMATCH_ABORT = 0,
    LLRDMA_MISMATCH_WARN = 1,
} llrdma_mismatch_action_t;

#define MCA_COLL_LLRDMA_SPLIT_MAX 1024 /* groups in coll_llrdma_node_split */
/* Communicator info key: "false" keeps coll/llrdma off that communicator
 * (the previous module serves its Allreduce), e.g. for A/B measurements. */
#define LLRDMA_INFO_ALLREDUCE "llrdma_allreduce"
/* coll_llrdma_internode_transport */
enum { LLRDMA_NET_AUTO = 0, LLRDMA_NET_PML = 1, LLRDMA_NET_BTL = 2 };
/* coll_llrdma_gpu_peer */
enum { LLRDMA_GPU_PEER_OFF = 0, LLRDMA_GPU_PEER_AUTO = 1, LLRDMA_GPU_PEER_FORCE = 2 };
/* mca_coll_llrdma_gpu_peer: the call must take the arena path (nothing done). */
#define MCA_COLL_LLRDMA_PEER_FALLBACK 1

typedef struct mca_coll_llrdma_component_t {
    llrdma_coll_base_component_t super;

    /* MCA variables (coll_llrdma_component.c) */
    int priority;
    int verbose;
    char *size_hint; /* override of btl_llrdma_size_hint for coll only */
    int size_hint_index;
    int algorithm_index;  /* registration result: < 0 when the value was refused */
    char *segment_text;   /* 0 = from the hint */
    char *gpu_stage_text; /* device vectors up to this are staged whole */
    int mismatch_index;   /* registration results, as algorithm_index */
    int shm_index;
    int shm_enable;               /* 1: shared-memory arena on single-node communicators */
    char *shm_chunk_text;         /* arena chunk per rank and round */
    char *shm_lines_text;         /* largest vector sent in the arena's lines */
    char *shm_share_text;         /* smallest round whose fold is shared */
    char *shm_stream_text;        /* smallest call copied out by streamed stores; auto */
    char *gpu_fold_text;          /* arena slices from this size reduce on the GPU */
    int shm_liveness_ms;          /* arena waits check the awaited rank's process this often */
    int shm_share_ranks;          /* the shared fold only on arenas of this many ranks */
    int wait_spin_us;             /* waits spin this long before yielding; -1 auto */
    int wait_sleep_ms;            /* and sleep between polls after this long; 0 never */
    llrdma_ar_wait_policy_t wait; /* what took effect (init_query) */
    int wait_oversubscribed;
    char wait_why[96];
    char *scratch_cache_text; /* host buffers kept between calls up to this size */
    char *node_split_text;    /* tests: treat groups of world ranks as nodes */
    int gpu_peer;             /* LLRDMA_GPU_PEER_* (an enumerated knob) */
    int gpu_peer_index;       /* registration result */
    char *gpu_peer_min_text;  /* device vectors from this size take the peer path */

    /* coll_llrdma_internode_transport: LLRDMA_NET_*, registration result */
    int internode_transport;
    int internode_transport_index;

    /* Validated at init_query */
    int output;
    int algorithm;            /* LLRDMA_AR_* */
    size_t segment_bytes;     /* 0 = planner decides */
    size_t gpu_stage_max;     /* device vectors up to this: host copy + host path */
    int gpu_stage_auto;       /* "auto": 16K with an arena, 2M without */
    size_t shm_chunk;         /* validated shm_chunk_text; 0 = by communicator size */
    size_t shm_lines_max;     /* validated shm_lines_text */
    size_t shm_share_min;     /* validated shm_share_text */
    size_t shm_stream_min;    /* validated shm_stream_text (auto: for this machine) */
    int shm_stream_auto;      /* shm_stream_text is "auto" */
    size_t gpu_fold_min;      /* validated gpu_fold_text */
    size_t scratch_cache_max; /* validated scratch_cache_text */
    size_t gpu_peer_min;      /* validated gpu_peer_min_text */
    int test_alloc_rank;      /* LLRDMA_TEST_ALLOC_FAIL=RANK:CALL (tests only) */
    uint64_t test_alloc_call;
    long test_die_send; /* LLRDMA_TEST_DIE_AT_SEND=WORLDRANK:N: SIGKILL before the
                           N-th PML send of this process (tests only; 0 off) */
    int mismatch;       /* llrdma_mismatch_action_t (an enumerated knob) */
    uint64_t hint;      /* the hint coll uses */
    int checked_world;  /* cross-rank check done */
    int published;      /* this rank's pid is in the modex (coll_llrdma_pml.c) */
    int off_for_job;    /* some rank has no coll/llrdma: off on every communicator */
    /* coll_llrdma_node_split, parsed (llrdma_ar_node_split_parse); n 0 = off */
    int split_sizes[MCA_COLL_LLRDMA_SPLIT_MAX];
    int split_n, split_repeat;
} mca_coll_llrdma_component_t;

typedef struct mca_coll_llrdma_module_t {
    mca_coll_base_module_t super;
    mca_coll_base_module_allreduce_fn_t previous_allreduce;
    mca_coll_base_module_t *previous_allreduce_module;
    uint64_t hint;
    int agreed;         /* 0: not checked yet, 1: all ranks plan alike, -1: they do not */
    size_t eager_bytes; /* smallest eager payload to any peer, agreed; 0 = unknown */
    /* Host scratch kept across calls: a fresh multi-megabyte malloc per call
     * is an mmap whose first touch page-faults every page, every call. */
    void *scratch;
    size_t scratch_bytes;
    /* Shared-memory arena (coll_llrdma_shm.c); base NULL: none. */
    llrdma_ar_shm_t shm;
    size_t shm_bytes;
    /* Host copies of device vectors for the whole-vector path (gpu fallback). */
    void *host_stage[2];
    size_t host_stage_bytes[2];
    int host_stage_pinned[2];
    /* The GPU this rank last used, as published in the arena's info line. */
    unsigned long long gpu_key;
    int gpu_key_device;
    int gpu_shared_said;
    int shm_pinned; /* GPU path: 0 not tried, 1 pinned and mapped, 2 pinned, -1 failed */
    int shm_ranks;  /* the arena's communicator size (liveness checks) */
    int shm_rank;   /* this rank's index in the arena (the verbose lines) */
    int gone_said;  /* a dead rank was reported */
    int msg_gone;   /* a rank found gone by a message wait (-1: none): every call fails */
    /* The last call, when the planned path ran it as shm_direct from host
     * memory (coll_llrdma_allreduce.c, remember_fast): a call with the same
     * count, datatype and op on host buffers runs that plan again without
     * re-planning.  count 0: none. */
    struct {
        llrdma_ar_plan_t plan;
        int count;
        struct ompi_datatype_t *dtype;
        struct ompi_op_t *op;
        int dt, lop;
        size_t esize;
        /* In the lines: the call prepared once (llrdma_ar_lines_run). */
        int in_lines;
        llrdma_ar_lines_call_t lines;
    } fast;
    uint64_t fast_calls; /* calls that took it (said when the arena is released) */
    uint64_t msg_calls;  /* calls on a flat message plan (tests' injections count them) */
    /* Nodes (coll_llrdma_hier.c), from the first Allreduce on: how this
     * communicator is served (LLRDMA_AR_MODE_*), its topology, this rank's
     * place in it (hier.peers = peers), the lowest rank of its node.  With
     * LLRDMA_AR_MODE_HIER, shm is this node's arena (none on a one-rank node). */
    int mode;
    llrdma_ar_topo_t topo;
    llrdma_ar_hier_t hier;
    int *peers;
    int *locals; /* communicator ranks of this rank's node, by local rank */
    int node_leader;
    const char *decline_why; /* why coll/llrdma stepped aside (static text) */
    int info_off;            /* the communicator's info said llrdma_allreduce=false */
    /* The inter-node step's transport (coll_llrdma_net.c), chosen at set-up
     * (NULL: the PML), and the BTL put transport's state when it is that. */
    const struct mca_coll_llrdma_net *net;
    struct mca_coll_llrdma_btlnet *btlnet;
    /* With net btl under auto: calls whose inter-node messages are all at
     * most this many bytes (the smallest eager limit of btl/llrdma to any
     * rank's inter-node peers, agreed at set-up, less ob1's header: what ob1
     * sends eagerly) take the PML. */
    size_t net_eager;
    /* GPU-direct inter-node step (docs/allreduce.md): 1 when net is btl and
     * this rank's btl/llrdma registers GPU memory on every module (so device
     * vectors cross nodes by RDMA from and to GPU memory); decided at set-up,
     * per rank (the messages are the same either way).  Its device scratch
     * is kept across calls so its registration is reused. */
    int gpu_direct;
    void *dev_scratch;
    size_t dev_scratch_bytes;
    int dev_scratch_device;
    int hier_said; /* a broken node arena was reported */
    /* The GPU peer path (coll_llrdma_peer.c): its state (same on every
     * rank), mapped peer allocations and events, exported handles, this
     * rank's interprocess event and GPU facts. */
    llrdma_peer_state_t peer;
    llrdma_peer_cache_t *peer_maps, *peer_events, *peer_exports;
    void *peer_event;
    unsigned char peer_event_handle[LLRDMA_PEER_HANDLE_BYTES];
    unsigned long long peer_event_id;
    int peer_dev;
    unsigned long long peer_key;
    char peer_bus_id[32];
    unsigned char peer_uuid[16];
} mca_coll_llrdma_module_t;

OBJ_CLASS_DECLARATION(mca_coll_llrdma_module_t);

LLRDMA_MODULE_DECLSPEC extern mca_coll_llrdma_component_t mca_coll_llrdma_component;

int mca_coll_llrdma_init_query(bool enable_progress_threads, bool enable_mpi_threads);
mca_coll_base_module_t *mca_coll_llrdma_comm_query(struct ompi_communicator_t *comm, int *priority);

/* coll_llrdma_check.c: cross-rank hint check over the modex (MPI_COMM_WORLD,
 * once, during MPI_Init; no communication). */
void mca_coll_llrdma_check_world(struct ompi_communicator_t *world);
/* Some rank of MPI_COMM_WORLD without coll/llrdma: off_for_job, reported. */
void mca_coll_llrdma_check_loaded(struct ompi_communicator_t *world);
/* A knob's value that cannot be used: MPI_Init ends with the knob, its text
 * and why (help-mpi-llrdma.txt "invalid coll knob"). */
void mca_coll_llrdma_bad_knob(const char *name, const char *text, const char *why);
/* coll_llrdma_node_split must cover MPI_COMM_WORLD
 * exactly (an explicit list); otherwise MPI_Init ends naming the knob. */
void mca_coll_llrdma_check_split(struct ompi_communicator_t *world);
/* One line per job when btl/llrdma carries nothing although a btl_llrdma
 * knob was set (coll_llrdma_netuse.c gathers, llrdma_netuse_decide words). */
void mca_coll_llrdma_check_netuse(struct ompi_communicator_t *world);
/* Peers rank 0 looks at for it (llrdma-check: up to 256 from every rank). */
#define LLRDMA_NETUSE_SAMPLE 64

/* coll_llrdma_agree.c: on the first Allreduce of a communicator, check
 * (through the module below) that every rank plans with the same hint,
 * algorithm and segment; otherwise the ranks' schedules would differ and
 * hang.  Returns 1 when llrdma may run, 0 to fall back for good. */
int mca_coll_llrdma_agree(mca_coll_llrdma_module_t *m, struct ompi_communicator_t *comm);

/* coll_llrdma_shm.c: the arena of a communicator whose ranks all run on this
 * node (one node: mca_coll_llrdma_hier_setup says so).  _setup: collective,
 * called by every rank on the first Allreduce once they agreed to use one;
 * OMPI_SUCCESS with m->shm set, or an error on every rank (said once).
 * _release: unmaps (module destruction). */
size_t mca_coll_llrdma_shm_chunk(int comm_size); /* the knob, or its default */
size_t mca_coll_llrdma_shm_l2_bytes(void);       /* L2 per core, 0 = unknown */
int mca_coll_llrdma_cpu_intel(void);             /* 1: an Intel CPU (x86 CPUID) */
int mca_coll_llrdma_shm_setup(mca_coll_llrdma_module_t *m, struct ompi_communicator_t *comm);
void mca_coll_llrdma_shm_release(mca_coll_llrdma_module_t *m);
/* Collective over comm: the arena of this rank's node (m->hier, m->node_leader
 * set), every node's at once; `names` holds ompi_comm_size(comm) x
 * mca_coll_llrdma_shm_name_bytes() bytes (allocated before the exchange,
 * so an allocation failure is agreed on, not a hang).  OMPI_SUCCESS on every
 * rank when every node with several ranks has one. */
size_t mca_coll_llrdma_shm_name_bytes(void);
int mca_coll_llrdma_shm_setup_node(mca_coll_llrdma_module_t *m, struct ompi_communicator_t *comm,
                                   void *names);
/* coll_llrdma_numa.c: at coll_llrdma_verbose 10, says on which NUMA node this
 * rank runs and where the pages of its own arena ranges are (move_pages). */
void mca_coll_llrdma_numa_report(struct ompi_communicator_t *comm, void *base, int nranks, int me,
                                 size_t chunk);
/* Collective: replaces a broken arena by a fresh one (every rank calls it in
 * the same call, see llrdma_ar_shm_check); on failure there is none. */
int mca_coll_llrdma_shm_rebuild(mca_coll_llrdma_module_t *m, struct ompi_communicator_t *comm);
/* coll_llrdma_status.c, tests only: 1 when LLRDMA_TEST_ALLOC_FAIL says this
 * rank's allocation in this arena call fails. */
int mca_coll_llrdma_test_alloc_fails(const mca_coll_llrdma_module_t *m,
                                     struct ompi_communicator_t *comm);

/* coll_llrdma_hier.c: node identity and the per-communicator decision. */
/* This rank's node key on comm: ranks with equal keys share a node (Open
 * MPI's locality flags; split further by coll_llrdma_node_split). */
int mca_coll_llrdma_node_key(struct ompi_communicator_t *comm);
/* 1 when the Allreduce below coll/llrdma on this module is hierarchical (han). */
int mca_coll_llrdma_below_hier(const mca_coll_llrdma_module_t *m);
/* Collective (every rank, same arguments): the layout from every rank's key
 * (keys: ompi_comm_size entries of scratch), the mode, and the node arenas
 * when hierarchical.  shm_all / below_hier: agreed across the ranks.
 * Returns LLRDMA_AR_MODE_*, or -1 on a failed exchange (the caller steps
 * aside). */
int mca_coll_llrdma_hier_setup(mca_coll_llrdma_module_t *m, struct ompi_communicator_t *comm,
                               int *keys, void *names, int shm_all, int below_hier);

/* coll_llrdma_net.c: the inter-node step's transport (docs/allreduce.md,
 * "Transport seam"): point-to-point between ranks of comm on different
 * nodes.  begin (NULL: ctx is the PML context itself) gives the ctx of one
 * call, whose error and liveness record is *pml. */
struct mca_coll_llrdma_pml_ctx;
struct mca_bml_base_btl_t;
typedef struct mca_coll_llrdma_net {
    const char *name;
    int (*isend)(void *ctx, const void *buf, size_t bytes, int peer, int tag, void **req);
    int (*irecv)(void *ctx, void *buf, size_t bytes, int peer, int tag, void **req);
    int (*waitall)(void *ctx, int n, void **reqs);
    /* Received sizes too: failures carried across nodes (llrdma_ar_comm_t). */
    int (*waitall_sizes)(void *ctx, int n, void **reqs, size_t *bytes);
    int (*cancel)(void *ctx, void *req);
    void *(*begin)(struct mca_coll_llrdma_module_t *m, struct mca_coll_llrdma_pml_ctx *pml);
} mca_coll_llrdma_net_t;
/* Collective, on a hierarchical communicator at set-up: chooses the
 * transport (coll_llrdma_internode_transport; auto = btl when every rank
 * reaches each of its inter-node peers through btl/llrdma RDMA), agreed
 * through the module below; m->net and m->btlnet. */
void mca_coll_llrdma_net_setup(struct mca_coll_llrdma_module_t *m,
                               struct ompi_communicator_t *comm);
const mca_coll_llrdma_net_t *mca_coll_llrdma_net_of(const struct mca_coll_llrdma_module_t *m);
/* The transport of one hierarchical call (plan of count elements of esize
 * bytes): the communicator's, except that under auto a call whose
 * inter-node messages all fit the eager limit takes the PML.  The same on
 * every rank (equal plans, agreed limit). */
const mca_coll_llrdma_net_t *mca_coll_llrdma_net_for(const struct mca_coll_llrdma_module_t *m,
                                                     const llrdma_ar_plan_t *plan, size_t count,
                                                     size_t esize);
const char *mca_coll_llrdma_net_name(int knob); /* "auto", "pml", "btl" */
int mca_coll_llrdma_net_is_btl(const mca_coll_llrdma_net_t *net);

/* coll_llrdma_btlnet.c: the BTL put transport (see there). */
typedef struct mca_coll_llrdma_btlnet mca_coll_llrdma_btlnet_t;
/* The btl/llrdma RDMA path to rank r of comm, or NULL with *why. */
struct mca_bml_base_btl_t *mca_coll_llrdma_btlnet_find(struct ompi_communicator_t *comm, int r,
                                                       const char **why);
/* State for talking to ranks[0..nranks-1]; NULL when one has no path or
 * memory ran out. */
mca_coll_llrdma_btlnet_t *mca_coll_llrdma_btlnet_new(struct ompi_communicator_t *comm,
                                                     const int *ranks, int nranks);
void mca_coll_llrdma_btlnet_free(mca_coll_llrdma_btlnet_t *net); /* NULL: nothing */
void *mca_coll_llrdma_btlnet_begin(mca_coll_llrdma_btlnet_t *net,
                                   struct mca_coll_llrdma_pml_ctx *pml);
int mca_coll_llrdma_btlnet_isend(void *ctx, const void *buf, size_t bytes, int peer, int tag,
                                 void **req);
int mca_coll_llrdma_btlnet_irecv(void *ctx, void *buf, size_t bytes, int peer, int tag, void **req);
int mca_coll_llrdma_btlnet_waitall(void *ctx, int n, void **reqs);
int mca_coll_llrdma_btlnet_waitall_sizes(void *ctx, int n, void **reqs, size_t *bytes);
int mca_coll_llrdma_btlnet_cancel(void *ctx, void *req);
/* For the rest of this call (until the next begin), every receive takes no
 * data: READY says LLRDMA_NP_SUNK, nothing is registered.  A rank carrying
 * a failure without buffers for the data (run_sunk). */
void mca_coll_llrdma_btlnet_sink(void *ctx);

/* coll_llrdma_allreduce.c */
int mca_coll_llrdma_allreduce(const void *sbuf, void *rbuf, int count,
                              struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                              struct ompi_communicator_t *comm, mca_coll_base_module_t *module);

/* The PML transport of the core (llrdma_ar_comm_t), shared with the GPU
 * staging transport.  ctx: the first Open MPI error, returned to the caller
 * instead of the core's generic LLRDMA_AR_ERR_TRANSPORT. */
#define MCA_COLL_LLRDMA_PML_TRACK 128
typedef struct mca_coll_llrdma_pml_ctx {
    struct ompi_communicator_t *comm;
    int err;
    int gone;      /* a rank of comm on this node found gone while waiting, or -1 */
    int abandoned; /* requests given up incomplete (their memory must stay) */
    /* A call that carries a failure without scratch (it could not be had,
     * or a rank is gone): every receive lands at the start of this host
     * buffer of sink_bytes (the call's own vector: no receive is larger),
     * whatever the core asked, so the core's buffers are never touched.
     * Not a receive of nothing: ob1 copies a truncated rendezvous message
     * whole (CMA), past the end of the receive buffer. */
    void *sink;
    size_t sink_bytes;
    /* Each outstanding request's peer: a wait gives up only on a gone peer's
     * messages (a full table: any gone rank of this node, as before). */
    int ntrack;
    struct {
        void *req;
        int peer;
    } track[MCA_COLL_LLRDMA_PML_TRACK];
} mca_coll_llrdma_pml_ctx_t;
void mca_coll_llrdma_pml_ctx_init(mca_coll_llrdma_pml_ctx_t *c, struct ompi_communicator_t *comm);
/* After a call whose core returned rc: 1 when a rank was found gone (said
 * once; every later Allreduce on the communicator fails: m->msg_gone). */
int mca_coll_llrdma_pml_gone(mca_coll_llrdma_module_t *m, mca_coll_llrdma_pml_ctx_t *c, int rc);
/* The once-per-communicator report of a dead rank ("waited for WHAT"). */
void mca_coll_llrdma_say_gone(mca_coll_llrdma_module_t *m, struct ompi_communicator_t *comm,
                              int gone, const char *what);
/* coll_llrdma_pml.c: this process's pid in the modex (component open), and
 * whether a process still runs (0: no such pid, or a zombie). */
void mca_coll_llrdma_publish_pid(void);
/* 1 when MPI_COMM_WORLD rank `rank` published its pid: its coll/llrdma opened. */
int mca_coll_llrdma_world_rank_has_coll(int rank);
int mca_coll_llrdma_pid_alive(long pid);
/* The lowest rank of comm on this node whose process is gone, or -1. */
int mca_coll_llrdma_first_gone(struct ompi_communicator_t *comm);
int mca_coll_llrdma_pml_isend(void *ctx, const void *buf, size_t bytes, int peer, int tag,
                              void **req);
int mca_coll_llrdma_pml_irecv(void *ctx, void *buf, size_t bytes, int peer, int tag, void **req);
int mca_coll_llrdma_pml_waitall(void *ctx, int n, void **reqs);
int mca_coll_llrdma_pml_waitall_sizes(void *ctx, int n, void **reqs, size_t *bytes);
int mca_coll_llrdma_pml_cancel(void *ctx, void *req);
/* coll_llrdma_status.c: the Open MPI code for llrdma_ar_run's result. */
int mca_coll_llrdma_ar_status(int rc, int pml_err, struct ompi_communicator_t *comm);

/* coll_llrdma_gpu.c: GPU buffers (see there). */
int mca_coll_llrdma_gpu_kind(const void *p, int *device); /* LLRDMA_MEM_*, per call */
int mca_coll_llrdma_allreduce_gpu(const llrdma_ar_plan_t *plan, const void *sbuf, void *rbuf,
                                  size_t count, int dt, int lop, struct ompi_communicator_t *comm,
                                  mca_coll_llrdma_module_t *m, int device);
int mca_coll_llrdma_gpu_copy_sync(void *dst, const void *src, size_t bytes,
                                  struct ompi_communicator_t *comm);
/* The host pass of a staged call: the Allreduce of host copies s, r. */
typedef struct mca_coll_llrdma_host_pass {
    int (*run)(const void *s, void *r, struct mca_coll_llrdma_host_pass *self);
    int failed; /* set by gpu_fallback: the input could not be staged (carry it) */
} mca_coll_llrdma_host_pass_t;
/* Device vectors copied whole to host memory, reduced there, copied back.
 * pass NULL: the module below reduces (it cannot carry a failure); else
 * llrdma's host pass, planned by the caller (no re-entry into the
 * component's entry point). */
int mca_coll_llrdma_gpu_fallback(const void *sbuf, void *rbuf, int count,
                                 struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                 struct ompi_communicator_t *comm, mca_coll_llrdma_module_t *m,
                                 int skind, int rkind, mca_coll_llrdma_host_pass_t *pass);
void mca_coll_llrdma_gpu_finalize(void);
/* Unpins the module's arena if the GPU path pinned it. */
void mca_coll_llrdma_gpu_unregister(mca_coll_llrdma_module_t *m);
/* Frees (and unpins) the whole-vector host copies, and the GPU-direct scratch. */
void mca_coll_llrdma_gpu_release(mca_coll_llrdma_module_t *m);
/* 1 when another rank of comm uses the same physical GPU (published in the
 * arena's info lines; a rank's first call may not see the others yet, which
 * only changes how its data moves, never the schedule). */
int mca_coll_llrdma_gpu_shared(mca_coll_llrdma_module_t *m, struct ompi_communicator_t *comm,
                               int device);
/* 1 when this process may load libllrdma_cuda.so (built with CUDA, or
 * LLRDMA_CUDA_LIB set); loads nothing. */
int mca_coll_llrdma_gpu_possible(void);
/* 1 when this process can hold device buffers at all: the GPU path is
 * possible and the CUDA driver (libcuda.so.1) loaded; no cuInit. */
int mca_coll_llrdma_gpu_driver(void);
/* The GPU library: loaded now if need be (NULL with the reason logged), or
 * only if already loaded (never loads CUDA to clean up). */
const struct llrdma_cuda_api *mca_coll_llrdma_gpu_api(struct ompi_communicator_t *comm);
const struct llrdma_cuda_api *mca_coll_llrdma_gpu_loaded(void);

/* coll_llrdma_peer.c: the GPU peer path (CUDA IPC).  _wanted: 1 when this
 * call (every rank computes the same) tries it, once llrdma_ar_dev_try_peer
 * said the size is worth it.  _peer: OMPI_SUCCESS,
 * MCA_COLL_LLRDMA_PEER_FALLBACK (every rank: take the arena path, nothing
 * was written), or an error.  _release: module destruction. */
int mca_coll_llrdma_peer_wanted(mca_coll_llrdma_module_t *m, struct ompi_communicator_t *comm);
int mca_coll_llrdma_gpu_peer(mca_coll_llrdma_module_t *m, struct ompi_communicator_t *comm,
                             const void *sbuf, void *rbuf, size_t count, int dt, int lop,
                             size_t esize, int skind, int rkind, int device);
void mca_coll_llrdma_peer_release(mca_coll_llrdma_module_t *m);

END_C_DECLS
#endif
