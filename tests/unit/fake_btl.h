/*
 * A world of btl/llrdma modules in one process, wired through the fake
 * device (fake_verbs.h): each module stands for one MPI process (vpid i,
 * address 10.0.0.(i+1)), with its own opal_proc_t made current
 * (opal_proc_local_set) whenever the test calls into it, its modex record
 * served to the others (opal_pmix.get), and ob1's callbacks recorded.
 * Messages carry a header (sender, class, sequence number) and a byte
 * pattern the receiver checks, so lost, duplicated, reordered or corrupted
 * fragments are caught.
 */
#ifndef FAKE_BTL_H
#define FAKE_BTL_H

#include <time.h>

#include "opal_config.h"

#include <pthread.h>
#include <stdio.h>

#include "opal/util/proc.h"

#include "btl_llrdma.h"
#include "fake_verbs.h"

#define FW_MAX 4
#define FW_TAG 0x41
#define FW_NCLS 8 /* message classes: in order within one (sender, class) */

extern int fw_failures, fw_checks;
/* Held by the recording callbacks (ob1's view in fw_proc_t): a thread
 * reading those counters while others progress takes it too. */
extern pthread_mutex_t fw_ob1_lock;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        ++fw_checks;                                                                               \
        if (!(cond)) {                                                                             \
            ++fw_failures;                                                                         \
            printf("%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                        \
        }                                                                                          \
    } while (0)

/* In front of every test message (16 bytes). */
typedef struct fw_msg {
    uint32_t magic;
    uint32_t seq;
    uint16_t from, cls;
    uint32_t len; /* whole message */
} fw_msg_t;
#define FW_MAGIC 0x66776d73u

typedef struct fw_proc {
    opal_proc_t *proc;
    mca_btl_llrdma_module_t *m;
    llrdma_profile_t prof;
    mca_btl_llrdma_port_t port;
    mca_btl_llrdma_endpoint_t *ep[FW_MAX];
    /* ob1's view */
    int err_calls;
    char err_text[1024];
    opal_proc_t *err_proc;
    int accepted;    /* sends that will call back (btl_send returned OPAL_SUCCESS) */
    int inline_done; /* sends complete at once (returned 1) */
    int cb_calls, cb_errors;
    int recv_calls, recv_bad;
    size_t recv_max_len;
    uint32_t send_seq[FW_MAX][FW_NCLS]; /* next sequence number to each peer */
    uint32_t recv_seq[FW_MAX][FW_NCLS]; /* next expected from each peer */
    uint32_t recv_from[FW_MAX];         /* messages received from each peer */
} fw_proc_t;

extern fw_proc_t fw[FW_MAX];
extern int fw_n;

/* Once per program: opal, the hooks, the component's knobs. */
int fw_init(int *argc, char ***argv);
void fw_fini(void);
/* Start a test: a fresh fake device, no modules, default knobs. */
/* fw_alloc's descriptors ask for a callback at completion
 * (MCA_BTL_DES_SEND_ALWAYS_CALLBACK), as ob1's control messages do; 0 (what
 * fw_begin sets): as its eager sends, done at post where the BTL copied
 * the data. */
extern int fw_cb_always;
void fw_begin(void);
/* Knobs a module is created with (reset by fw_begin). */
extern uint32_t fw_port_max_cqe, fw_port_max_srq_wr;
/* A module for the next process; its index, or -1 (creation failed).
 * Registers ob1's error callback unless fw_error_cb_late (reset by
 * fw_begin); then fw_register_error does, later. */
int fw_add(uint64_t hint, uint32_t ll_sq, uint32_t bw_sq);
extern int fw_error_cb_late;
void fw_register_error(int i);
/* Process i learns about j (ob1's add_procs); every pair for fw_mesh. */
mca_btl_llrdma_endpoint_t *fw_add_procs(int i, int j);
void fw_mesh(void);
/* Make process i the current one (its calls into opal see its name). */
/* Raw peers: n processes named (7, FW_RAW_BASE + k) whose modex record is a
 * copy of process `like`'s and that have no module: a test drives one
 * module with their connect requests (fake_connect_request), as many
 * processes of a large job would.  fw_raw_end after the modules' fw_end. */
#define FW_RAW_BASE 1000u
static inline double fw_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
int fw_raw_begin(int n, int like);
void fw_raw_end(void);
void fw_as(int i);
void fw_progress(int rounds);
void fw_progress_one(int i, int rounds);
/* Progress everything until nothing moves (at most `max` rounds). */
void fw_settle(int max);
/* A descriptor of `size` bytes from i to j, filled with the next message of
 * class `cls` (size >= sizeof(fw_msg_t)). */
mca_btl_base_descriptor_t *fw_alloc(int i, int j, size_t size, int cls);
void fw_fill(int i, int j, void *buf, size_t size, int cls);
/* ob1's btl_send of a new message; returns what the BTL returned. */
int fw_send(int i, int j, size_t size, int cls);
/* Processes 0 and 1 with the LL path (and BW when `bw`) connected, one
 * fragment per message (coalescing and batching off); 0 on success. */
int fw_pair(uint64_t hint, uint32_t sq, int bw);
/* ob1's sendi from i to j: a header of `hdr` bytes and a payload to pack
 * (size in all); *des on BUSY. */
int fw_sendi(int i, int j, size_t size, size_t hdr, mca_btl_base_descriptor_t **des);
/* Messages i sent to j that j received, over all classes. */
uint32_t fw_sent(int i, int j);
/* Finalize every module and check nothing leaked and the device saw no
 * fault (unless allow_faults). */
void fw_end(int allow_faults);

/* Around tests whose expected transport errors each print a user-facing
 * message: stderr to /dev/null (fw_stderr_off returns what fw_stderr_on
 * needs to bring it back). */
int fw_stderr_off(void);
void fw_stderr_on(int saved);
/* fw_fini, then the verdict line; returns the exit status. */
int fw_finish(void);

/* Everything sent was received and called back, nobody saw an error. */
void fw_check_all_arrived(void);
/* A convertor over n contiguous bytes, as ob1 prepares one for a send. */
struct opal_convertor_t *fw_bytes_convertor(const void *buf, size_t n);

/* The connection of process i to j on path p (NULL when none). */
static inline mca_btl_llrdma_conn_t *fw_conn(int i, int j, int p)
{
    return NULL == fw[i].ep[j] ? NULL : fw[i].ep[j]->conn[p];
}

#endif
