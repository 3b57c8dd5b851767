/*
 * llrdma_core.h -- C API of the llrdma C++17 core.
 *
 * This is the only interface between the MCA glue (C, Open MPI headers) and the
 * core (C++, no Open MPI headers).  It includes nothing from Open MPI so that
 * both sides compile on their own.  All functions are thread-compatible; the
 * process-wide state (llrdma_state_*) is protected by a mutex inside the core.
 *
 * Return codes: 0 (LLRDMA_OK) on success, a negative LLRDMA_ERR_* otherwise.
 */
#ifndef LLRDMA_CORE_H
#define LLRDMA_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LLRDMA_OK 0
#define LLRDMA_ERR_INVALID (-1)   /* text is not a valid size / bad argument */
#define LLRDMA_ERR_RANGE (-2)     /* valid syntax but above the maximum */
#define LLRDMA_ERR_FIXED (-3)     /* hint already fixed (MPI initialised) */
#define LLRDMA_ERR_TRUNCATED (-4) /* output buffer too small */
#define LLRDMA_ERR_NOT_FOUND (-5)
#define LLRDMA_ERR_INTERNAL (-6) /* unexpected failure inside the core (out of memory) */

/* Largest accepted hint: 1 GiB.  Above this a "low-latency" profile is
 * meaningless (it would cover every message of a real workload). */
#define LLRDMA_HINT_MAX ((uint64_t)1 << 30)

/* ---------------------------------------------------------------- sizes */

/* Parse a size: decimal "16384", hex "0x4000", suffixes K/k/KiB/KB, M/MiB/MB,
 * G/GiB/GB (all binary: 1K = 1024).  Leading/trailing blanks are allowed,
 * anything else (sign, fraction, unknown suffix, empty, overflow) is
 * LLRDMA_ERR_INVALID; a value above `max` is LLRDMA_ERR_RANGE.  On error a
 * one-line reason ("'16X': unknown suffix 'X'") is written to err. */
int llrdma_parse_size(const char *text, uint64_t max, uint64_t *out, char *err, size_t errlen);

/* Format bytes the way users write them: 16384 -> "16K", 1000 -> "1000". */
void llrdma_format_size(uint64_t bytes, char *buf, size_t len);

/* ----------------------------------------------------------- hint source */

typedef enum {
    LLRDMA_SRC_DEFAULT = 0,  /* nothing set: 0 = no hint */
    LLRDMA_SRC_API = 1,      /* llrdma_set_size_hint() before MPI_Init */
    LLRDMA_SRC_ENV = 2,      /* OMPI_MCA_btl_llrdma_size_hint (also mpirun --mca) */
    LLRDMA_SRC_FILE = 3,     /* an MCA parameter file (file and line known) */
    LLRDMA_SRC_ALIAS = 4,    /* RDMA_LOW_LATENCY_HINT environment variable */
    LLRDMA_SRC_OVERRIDE = 5, /* a component-specific override knob */
    LLRDMA_SRC_OTHER = 6     /* command line of a singleton, MPI_T, ... */
} llrdma_source_t;

const char *llrdma_source_name(llrdma_source_t src); /* "default", "api", ... */

/* What the glue read.  Any pointer may be NULL (= not set). */
typedef struct {
    const char *mca_text; /* value of btl_llrdma_size_hint as text */
    llrdma_source_t mca_source;
    const char *mca_file;   /* for LLRDMA_SRC_FILE */
    int mca_line;           /* for LLRDMA_SRC_FILE, 0 if unknown */
    const char *mca_name;   /* variable name, for messages */
    const char *alias_text; /* getenv("RDMA_LOW_LATENCY_HINT") */
} llrdma_hint_inputs_t;

typedef struct {
    uint64_t bytes; /* 0 = no hint (generic profile) */
    llrdma_source_t source;
    char origin[512]; /* human readable: "environment (OMPI_MCA_btl_llrdma_size_hint)",
                         "file /home/u/.openmpi/mca-params.conf:3", ... */
    char text[64];    /* the text as given ("16K"), empty for default */
} llrdma_hint_t;

/* Precedence (highest first): API setter, MCA variable when its source is not
 * default (environment/command line beat files inside Open MPI), the
 * RDMA_LOW_LATENCY_HINT alias, default 0.  A value that does not parse is an
 * error, never silently 0: err then says which parameter, which text, and where it
 * came from, e.g. "btl_llrdma_size_hint = 'abc' (from environment
 * OMPI_MCA_btl_llrdma_size_hint): not a size". */
int llrdma_hint_resolve(const llrdma_hint_inputs_t *in, llrdma_hint_t *out, char *err,
                        size_t errlen);

/* Per-message hint from a gradient: grad_bytes / ranks * (1 + headroom),
 * rounded up.  ranks <= 0 -> 0 (no hint); headroom < 0 or NaN -> 0 headroom;
 * result saturates at LLRDMA_HINT_MAX. */
uint64_t llrdma_hint_for_gradient_u64(uint64_t grad_bytes, int ranks, double headroom);

/* -------------------------------------------------------------- profile */

typedef enum { LLRDMA_POLL_BUSY = 0, LLRDMA_POLL_EVENT = 1 } llrdma_poll_mode_t;

/* Transport parameters for one size class.  Signalling (how often a send WR
 * asks for a completion) and CQ event moderation (ibv_modify_cq count/period:
 * how many completions, or how many usec, before an event fires) are
 * different mechanisms and kept apart. */
typedef struct {
    uint64_t min_bytes;       /* smallest message on this path */
    uint64_t max_bytes;       /* largest (UINT64_MAX = unbounded) */
    uint32_t sq_depth;        /* send queue work requests */
    uint32_t rq_depth;        /* receive buffers allotted per connection (its peer's credits) */
    uint32_t recv_buf_bytes;  /* size of each pre-posted receive buffer */
    uint32_t inline_bytes;    /* requested max_inline_data */
    uint32_t signal_interval; /* 1 = every send signalled */
    uint32_t cq_mod_count;    /* 0 = no moderation */
    uint32_t cq_mod_usec;     /* 0 = no moderation */
    llrdma_poll_mode_t poll;
    uint64_t eager_limit;         /* ob1 eager limit on this path */
    uint64_t max_send_size;       /* largest fragment */
    uint64_t rdma_pipeline_bytes; /* ob1's RDMA pipeline from this size (no leave-pinned) */
    uint32_t rdma_rd_atomic;      /* RDMA reads outstanding per connection, requested; 0 no RDMA */
    uint64_t rdma_frag_bytes;     /* largest put/get work request (put/get limit, pipeline frag) */
} llrdma_path_profile_t;

typedef struct {
    uint64_t hint;               /* 0 = generic */
    int generic;                 /* 1 when hint == 0: one generic profile */
    llrdma_path_profile_t ll;    /* low latency: [1, hint] (+ boundary band) */
    llrdma_path_profile_t bw;    /* bandwidth: above ll.max_bytes */
    uint64_t coll_segment_bytes; /* Allreduce pipeline segment */
} llrdma_profile_t;

/* Knobs that override single derived fields; 0 = derive. */
typedef struct {
    uint32_t ll_sq_depth, bw_sq_depth;
    uint32_t ll_inline_bytes;
    uint32_t bw_signal_interval;
    uint32_t bw_cq_mod_count, bw_cq_mod_usec;
    uint64_t coll_segment_bytes;
} llrdma_profile_overrides_t;

/* Pure: derive the full profile from the hint (see docs/profile.md). */
int llrdma_profile_derive(uint64_t hint, const llrdma_profile_overrides_t *ovr,
                          llrdma_profile_t *out);

/* Pure: the Allreduce ring segment the profile gives a hint (the profile's
 * coll_segment_bytes, without deriving the rest; the planner calls it per call). */
uint64_t llrdma_coll_segment_for_hint(uint64_t hint);

/* --------------------------------------------------- effective config */

/* What a device granted (filled by the BTL data path; zeroed when none). */
typedef struct {
    char name[64]; /* "rxe0", "" when no device */
    int port;
    uint32_t max_inline_granted_ll, max_inline_granted_bw;
    uint32_t sq_depth_granted_ll, sq_depth_granted_bw;
    int cq_moderation_supported; /* -1 unknown (or not requested), 0 no, 1 applied */
    int gid_index;               /* GID rdma_cm binds to (RoCE); -1 unknown */
    uint32_t rq_depth_granted_ll, rq_depth_granted_bw; /* shared receive queue buffers */
    char gid_type[12]; /* type of that GID: "roce_v1", "roce_v2", "ib"; "" unknown */
    /* Set on every connection's QP: RNR back-off asked of senders (IB
     * encoding), RNR and transport retries. */
    uint32_t min_rnr_timer, rnr_retry, retry_count;
    /* ACK timeout set on every QP (IB encoding); 0 = rdma_cm's default. */
    uint32_t ack_timeout;
    /* The completion watchdog's limit asked (ms): 0 derived from each QP's
     * ACK timeout and retries (at least 60 s), -1 never. */
    int32_t completion_timeout_ms;
    /* RDMA on the BW path: reads outstanding (initiator depth) and answered
     * (responder resources) as granted -- by the device's limits at start-up,
     * then as read back from the first BW connection's QP -- and the largest
     * put/get (the profile's fragment, capped by the port's max_msg_sz). */
    uint32_t rd_atomic_granted, dest_rd_atomic_granted;
    uint64_t rdma_limit_granted;
    /* How GPU memory is registered: "dmabuf", "peermem", "none (why)". */
    char gpu_rdma[160];
    /* How each path's completions are found: "poll" (the application's
     * threads busy-poll its CQs) or "event" (btl_llrdma_progress_thread
     * sleeps on its completion channel); "" for a path not used. */
    char progress_ll[8], progress_bw[8];
    /* CQ moderation the BW CQs got (the profile's request when the device
     * took it; 0/0 when it has none or none was asked). */
    uint32_t cq_mod_count_granted, cq_mod_usec_granted;
    /* What that means, or why there is no progress thread. */
    char progress_note[128];
    /* How sendi's inline sends are posted on each path: "ll: ibv_wr_send,
     * bw: ibv_post_send (why)" (btl_llrdma_wr_api); "" when no BTL ran. */
    char post_api[160];
} llrdma_device_info_t;

/* One verbs device as btl/llrdma's device policy judged it (llrdma_nic.h). */
#define LLRDMA_NIC_REASON_MAX 128
#define LLRDMA_NIC_DUMP_MAX 16 /* devices a dump lists (the first ones found) */
typedef struct {
    char name[64];
    char ports[16]; /* ports it uses, "1" or "1,2"; "" when not chosen */
    char cls[8];    /* distance class: "PIX", "PXB", "PHB", "NODE", "UNKNOWN", "SYS", "-" */
    int chosen;
    char reason[LLRDMA_NIC_REASON_MAX]; /* "same PCIe switch as GPU 0000:1b:00.0", ... */
} llrdma_nic_report_t;

typedef struct {
    int rank; /* -1 unknown */
    int size;
    char host[256];
    long pid;
    llrdma_hint_t hint;
    llrdma_profile_t profile;
    int ndevices;                /* 0: BTL disqualified itself */
    llrdma_device_info_t device; /* first device */
    char btl_status[128];        /* "active", "disqualified: no verbs device", ... */
    char nic_policy[8];          /* btl_llrdma_device_policy; "" when the BTL did not run */
    char nic_near[64];           /* distances measured from: "GPU 0000:1b:00.0", "NUMA node 0" */
    int nnics;                   /* entries in nics (at most LLRDMA_NIC_DUMP_MAX) */
    llrdma_nic_report_t nics[LLRDMA_NIC_DUMP_MAX];
    uint64_t coll_hint;           /* hint coll/llrdma plans with (its override, else hint) */
    int coll_algorithm;           /* coll_llrdma_allreduce_algorithm (LLRDMA_AR_*; 0 = auto) */
    uint64_t coll_segment_knob;   /* coll_llrdma_allreduce_segment_size, 0 = from the hint */
    int coll_shm;                 /* coll_llrdma_shm: 1 = arena on single-node communicators */
    uint64_t coll_shm_chunk_knob; /* coll_llrdma_shm_chunk_size, 0 = default */
    uint64_t coll_shm_lines_max;  /* coll_llrdma_shm_lines_max, 0 = never */
    uint64_t coll_shm_share_min;  /* coll_llrdma_shm_share_min, 0 = never */
    int coll_shm_share_ranks;     /* coll_llrdma_shm_share_ranks */
    int coll_shm_stream_auto;     /* coll_llrdma_shm_stream_min is "auto" */
    uint64_t coll_shm_stream_min; /* what took effect, 0 = never */
    int coll_gpu_peer;            /* coll_llrdma_gpu_peer: 0 off, 1 auto, 2 force */
    uint64_t coll_gpu_peer_min;   /* coll_llrdma_gpu_peer_min */
    int coll_gpu_stage_auto;      /* coll_llrdma_gpu_stage_max is "auto" */
    uint64_t coll_gpu_stage_max;  /* its value otherwise */
    uint64_t coll_wait_spin_ns;   /* waits spin this long, then yield (coll_llrdma_wait_spin_us) */
    uint64_t coll_wait_sleep_ns;  /* then sleep after this long; 0 never (wait_sleep_ms) */
    int coll_wait_oversubscribed; /* more ranks on the node than this process may run on */
    char coll_wait_why[96];       /* the counts behind it: "4 ranks here, 2 online CPUs, ..." */
    char fork_safe[64];           /* btl_llrdma_fork_safe outcome: "kernel", "ibv_fork_init", "off",
                                     "failed: <strerror>"; "" when the BTL did not run */
    int gpu_rdma_every;           /* 1: every btl/llrdma module registers GPU memory (dmabuf or
                                     peermem), RDMA on: coll/llrdma's GPU-direct step may run */
} llrdma_rank_config_t;

/* Buffer size that holds the JSON of any llrdma_rank_config_t (worst-case escaping,
 * with room to spare: test_config_json keeps the worst case under half). */
#define LLRDMA_CONFIG_JSON_MAX 131072

/* One JSON object (single line, no trailing newline).  On LLRDMA_ERR_TRUNCATED buf
 * holds the empty string, never a partial object. */
int llrdma_config_to_json(const llrdma_rank_config_t *cfg, char *buf, size_t len);
/* Parse back (used by llrdma-check and tests); only fields it needs. */
int llrdma_config_from_json(const char *json, llrdma_rank_config_t *cfg);

/* Expand a dump path pattern: %r rank, %h host ("unknown" if NULL), %p pid,
 * %% percent.  Any other %x: LLRDMA_ERR_INVALID; too small: LLRDMA_ERR_TRUNCATED
 * (buf then empty, never a partial path). */
int llrdma_expand_path(const char *pattern, int rank, const char *host, long pid, char *buf,
                       size_t len);

/* ----------------------------------------------------- mismatch check */

typedef struct {
    int rank;
    int present; /* 0: peer did not publish (component excluded) */
    uint64_t bytes;
    char host[256];
    char origin[512];
} llrdma_peer_hint_t;

typedef struct {
    uint64_t majority_bytes; /* ties: the value held by the lowest rank (deterministic) */
    int majority_count;
    int present; /* how many peers published */
    int ndeviants;
} llrdma_consensus_t;

/* Pure.  deviant_idx (may be NULL) receives the indexes of peers whose value
 * differs from the majority, in input order, up to max_deviants (ndeviants is
 * the full count, which may exceed max_deviants). */
int llrdma_consensus(const llrdma_peer_hint_t *peers, int n, llrdma_consensus_t *out,
                     int *deviant_idx, int max_deviants);

/* Multi-line report, e.g.
 *   llrdma: the low-latency RDMA size hint differs across ranks (majority 16K on 7 of 8 ranks)
 *     rank 3 on h1: 64K (file /etc/openmpi-mca-params.conf:2)
 *     majority value from e.g. rank 0 on h0 (environment (RDMA_LOW_LATENCY_HINT))
 * Empty when nobody deviates.  '\n'-separated, no trailing newline; at most 32
 * deviant lines, then "  ... and N more ranks".  deviant_idx is not read (deviants
 * are recomputed from peers, so a short array is harmless) and may be NULL.
 * Truncation keeps a prefix and returns LLRDMA_ERR_TRUNCATED. */
int llrdma_consensus_report(const llrdma_peer_hint_t *peers, int n, const llrdma_consensus_t *c,
                            const int *deviant_idx, char *buf, size_t len);

/* Wire form published in the modex: "bytes;host;origin" (host/origin escaped:
 * '%', ';' and control characters as %XX).  The rank is not encoded; decode sets
 * bytes, host, origin and present = 1 and leaves p->rank as the caller set it.
 * LLRDMA_PEER_WIRE_MAX holds any encoded peer. */
#define LLRDMA_PEER_WIRE_MAX 4096
int llrdma_peer_encode(const llrdma_peer_hint_t *p, char *buf, size_t len);
int llrdma_peer_decode(const char *s, llrdma_peer_hint_t *p);

/* ------------------------------------------------ process-wide state */

/* Before MPI_Init: the application's own value (source API).  Fails with
 * LLRDMA_ERR_FIXED once llrdma_state_freeze() ran, LLRDMA_ERR_RANGE above max. */
int llrdma_state_set_api_hint(uint64_t bytes);
int llrdma_state_get_api_hint(uint64_t *bytes); /* LLRDMA_ERR_NOT_FOUND if unset */
/* Components publish what took effect; the first publish freezes the hint. */
void llrdma_state_freeze(void);
int llrdma_state_is_frozen(void);
void llrdma_state_publish(const llrdma_rank_config_t *cfg);
int llrdma_state_get(llrdma_rank_config_t *cfg); /* LLRDMA_ERR_NOT_FOUND if never published */
void llrdma_state_reset_for_tests(void);

#ifdef __cplusplus
}
#endif
#endif
