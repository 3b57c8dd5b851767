/*
 * A fake GPU for testing coll/llrdma's GPU path without one: one shared
 * library that is both "libcuda.so.1" (cuPointerGetAttributes, through a
 * symlink) and libllrdma_cuda.so (llrdma_cuda_api, through LLRDMA_CUDA_LIB).
 *
 * "Device memory" is a PROT_NONE address range whose contents live in a
 * separate backing mapping: the CPU -- Open MPI's PML, the host core, a
 * module below -- faults on any access, so a device pointer that leaks past
 * the staging transport kills the test.  "Managed memory" is ordinary memory
 * the fake driver reports as managed.  The API does with memcpy and
 * llrdma_reduce_local what the real one does with CUDA, checks its contract
 * (sends and receives staged only for GPU-side memory, every bounce buffer
 * returned, every session ended) and counts calls for the test.
 * FAKEGPU_FAIL_AT=N fails the N-th stage_out of the process,
 * FAKEGPU_FAIL_SYNC_AT=N its N-th sync (the shared-memory arena's wait),
 * FAKEGPU_FAIL_COPY_AT=N its N-th whole-vector copy (copy_sync);
 * FAKEGPU_NIC_VISIBLE=1 maps device memory readable and writable, so a NIC
 * can register it as with peermem (Soft-RoCE's ibv_reg_mr pins its pages):
 * the GPU-direct test; a stray CPU access is then not caught.
 * FAKEGPU_NO_REGISTER=1 refuses to pin host memory (copies to unpinned host
 * memory are then allowed, as CUDA allows them); FAKEGPU_NOT_MAPPED=1 pins
 * it for copies but not for kernels.
 * Like a CUDA stream, a session's copy, reduce and stage_in only enqueue work:
 * it runs at the next sync, stage_out (which waits for its own copy, so for
 * everything before it) or end, so code that reads what a copy writes before
 * synchronising reads stale data (FAKEGPU_DEFER=0: run at once).
 */
#include "llrdma_allreduce.h"
#include "llrdma_cuda.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#define SPAN ((size_t)1 << 34)
#define EXPORT __attribute__((visibility("default")))

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static unsigned char *dev_base, *dev_back, *man_base;
static size_t dev_next, man_next;
static long counters[10]; /* see fakegpu_counters() */
enum { C_BEGIN, C_END, C_STAGE_OUT, C_STAGE_IN, C_REDUCE, C_COPY, C_ALLOC, C_FREE, C_SYNC, C_ERR };

/* Device memory is a shared file (/dev/shm/fakegpu.PID) so that other
 * processes can map it through "IPC handles".  Its first TABLE_BYTES hold
 * the process's allocations (identity, range, live) and interprocess event
 * counters, which importers read to refuse or detect stale handles. */
#define TABLE_BYTES ((size_t)1 << 20)
#define MAX_ALLOCS 8192
#define MAX_EVENTS 256
typedef struct {
    uint64_t id, off, size, live;
} alloc_t;
typedef struct {
    uint64_t used, recorded, completed, pad;
} fevent_t;
typedef struct {
    uint64_t nallocs, next_id;
    alloc_t allocs[MAX_ALLOCS];
    fevent_t events[MAX_EVENTS];
} table_t;
static table_t *table;
static char shm_name[64];

static void shm_path(char *buf, size_t len, long pid)
{
    snprintf(buf, len, "/fakegpu.%ld", pid);
}

__attribute__((destructor)) static void fini(void)
{
    if (shm_name[0]) {
        shm_unlink(shm_name);
    }
}

static int nic_visible(void)
{
    const char *v = getenv("FAKEGPU_NIC_VISIBLE");
    return NULL != v && 0 == strcmp(v, "1");
}

static void init(void)
{
    int f = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, fd;
    shm_path(shm_name, sizeof(shm_name), (long)getpid());
    fd = shm_open(shm_name, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || 0 != ftruncate(fd, (off_t)SPAN)) {
        abort();
    }
    if (nic_visible()) { /* the NIC pins it (peermem's way): the CPU may touch it too */
        dev_base = mmap(NULL, SPAN, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    } else {
        dev_base = mmap(NULL, SPAN, PROT_NONE, f, -1, 0);
    }
    dev_back = mmap(NULL, SPAN, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    man_base = mmap(NULL, SPAN, PROT_READ | PROT_WRITE, f, -1, 0);
    close(fd);
    if (MAP_FAILED == dev_base || MAP_FAILED == dev_back || MAP_FAILED == man_base) {
        abort();
    }
    table = (table_t *)dev_back;
    dev_next = TABLE_BYTES;
}

static int in_dev(const void *p)
{
    return (const unsigned char *)p >= dev_base && (const unsigned char *)p < dev_base + SPAN;
}

/* The live device allocation holding p, copied into *out: 1, else 0. */
static int live_alloc(const void *p, alloc_t *out)
{
    size_t off = (size_t)((const unsigned char *)p - dev_base);
    int found = 0;
    if (!in_dev(p)) {
        return 0;
    }
    pthread_mutex_lock(&lock);
    for (uint64_t i = 0; i < table->nallocs && !found; ++i) {
        const alloc_t *a = &table->allocs[i];
        if (a->live && off >= a->off && off < a->off + a->size) {
            *out = *a;
            found = 1;
        }
    }
    pthread_mutex_unlock(&lock);
    return found;
}

/* Other processes' allocations mapped here (ipc_open): a PROT_NONE range
 * the CPU faults on, and the owner's pages behind it. */
#define MAX_IMPORTS 256
static struct {
    unsigned char *addr, *back;
    size_t size;
    long pid;
    uint64_t id, off;
    table_t *owner; /* the owner's table, mapped */
} imports[MAX_IMPORTS];

static int import_of(const void *p)
{
    const unsigned char *c = (const unsigned char *)p;
    for (int i = 0; i < MAX_IMPORTS; ++i) {
        if (NULL != imports[i].addr && c >= imports[i].addr &&
            c < imports[i].addr + imports[i].size) {
            return i;
        }
    }
    return -1;
}
static int in_man(const void *p)
{
    return (const unsigned char *)p >= man_base && (const unsigned char *)p < man_base + SPAN;
}
static void *real(const void *p)
{
    int i;
    if (in_dev(p)) {
        return dev_back + ((const unsigned char *)p - dev_base);
    }
    if ((i = import_of(p)) >= 0) {
        return imports[i].back + ((const unsigned char *)p - imports[i].addr);
    }
    return (void *)p;
}
static void count(int c)
{
    pthread_mutex_lock(&lock);
    ++counters[c];
    pthread_mutex_unlock(&lock);
}

/* ----------------------------------------------------- for the test program */

EXPORT void *fakegpu_malloc(size_t bytes, int managed)
{
    size_t *next = managed ? &man_next : &dev_next, off = 0;
    int reuse = -1;
    pthread_once(&once, init);
    pthread_mutex_lock(&lock);
    if (!managed) { /* a freed range that fits is reused at the same address */
        for (uint64_t i = 0; i < table->nallocs && reuse < 0; ++i) {
            if (!table->allocs[i].live && table->allocs[i].size >= bytes) {
                reuse = (int)i;
            }
        }
    }
    if (reuse >= 0) {
        off = table->allocs[reuse].off;
        bytes = table->allocs[reuse].size;
        table->allocs[reuse].size = 0; /* the range moves to the new entry */
    } else {
        off = (*next + 255) / 256 * 256;
        *next = off + bytes + 256;
    }
    if (!managed && table->nallocs < MAX_ALLOCS) {
        alloc_t *a = &table->allocs[table->nallocs++];
        a->id = ++table->next_id;
        a->off = off;
        a->size = bytes;
        __atomic_store_n(&a->live, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&lock);
    return (managed ? man_base : dev_base) + off;
}

/* Device allocations only: the range may come back from the next malloc,
 * at the same address, with a new identity. */
EXPORT void fakegpu_free(void *p)
{
    size_t off = (size_t)((unsigned char *)p - dev_base);
    pthread_mutex_lock(&lock);
    for (uint64_t i = 0; i < table->nallocs; ++i) {
        if (table->allocs[i].live && table->allocs[i].off == off) {
            __atomic_store_n(&table->allocs[i].live, 0, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&lock);
}

static long peer_counters[5]; /* see fakegpu_peer_counters() */
enum { P_EXPORT, P_OPEN, P_CLOSE, P_REDUCE, P_WAIT };

/* exports, opens, closes, peer reductions, event waits */
EXPORT void fakegpu_peer_counters(long out[5])
{
    pthread_mutex_lock(&lock);
    memcpy(out, peer_counters, sizeof(peer_counters));
    pthread_mutex_unlock(&lock);
}

EXPORT void fakegpu_memcpy(void *dst, const void *src, size_t bytes)
{
    memmove(real(dst), real(src), bytes);
}

/* begin, end, stage_out, stage_in, reduce, copy, alloc, free, copy_sync, errors */
EXPORT void fakegpu_counters(long out[10])
{
    pthread_mutex_lock(&lock);
    memcpy(out, counters, sizeof(counters));
    pthread_mutex_unlock(&lock);
}

/* --------------------------------------------------------- "libcuda.so.1" */

EXPORT int cuPointerGetAttributes(unsigned int n, int *attrs, void **data, unsigned long long ptr)
{
    const void *p = (const void *)(uintptr_t)ptr;
    unsigned int i;
    pthread_once(&once, init);
    for (i = 0; i < n; ++i) {
        int32_t v = 0;
        switch (attrs[i]) {
        case 2: /* MEMORY_TYPE: managed memory reports DEVICE too */
            v = in_dev(p) || in_man(p) ? 2 : 0;
            break;
        case 8: /* IS_MANAGED */
            v = in_man(p);
            break;
        case 9: /* DEVICE_ORDINAL */
            v = in_dev(p) || in_man(p) ? 0 : -1;
            break;
        case 7: { /* BUFFER_ID (64 bits): the allocation's id, never reused */
            uint64_t id = 0;
            alloc_t a;
            if (live_alloc(p, &a)) {
                id = a.id;
            }
            memcpy(data[i], &id, 8);
            continue;
        }
        default:
            return 1;
        }
        memcpy(data[i], &v, 4);
    }
    return 0;
}

/* ------------------------------------------------------ libllrdma_cuda.so */

/* Work enqueued on a session's "stream". */
typedef struct job {
    struct job *next;
    int reduce; /* 0: copy dst <- src (bytes); 1: out = a OP b */
    void *dst;  /* copy */
    const void *src;
    size_t bytes;
    void *bounce;  /* freed once the copy ran (stage_in) */
    int op, dtype; /* reduce */
    const void *a, *b;
    void *out;
    size_t count;
    /* 2: peer reduction over n ranks' pointers; 3: event completes; 4: wait */
    const void *pin[16];
    void *pout[16];
    int n;
    fevent_t *ev;
    uint64_t target;
} job_t;

struct llrdma_cuda_session {
    int bounces; /* lent out or holding staged data */
    char err[256];
    job_t *head, *tail;
};

static int fail(llrdma_cuda_session_t *s, const char *what)
{
    if ('\0' == s->err[0]) {
        snprintf(s->err, sizeof(s->err), "%s", what);
    }
    count(C_ERR);
    return -1;
}

static int gpu_side(const void *p)
{
    return in_dev(p) || in_man(p);
}

static int stale(const void *p)
{
    int i = import_of(p);
    if (i < 0) {
        return 0;
    }
    for (uint64_t k = 0; k < imports[i].owner->nallocs; ++k) {
        alloc_t *a = &imports[i].owner->allocs[k];
        if (a->id == imports[i].id) {
            return !__atomic_load_n(&a->live, __ATOMIC_ACQUIRE);
        }
    }
    return 1;
}

static int run_peer(llrdma_cuda_session_t *s, job_t *j)
{
    size_t n = j->count * llrdma_ar_dtype_size(j->dtype);
    unsigned char *acc = malloc(n), *t = malloc(n);
    int rc = 0;
    for (int q = 0; q < j->n && 0 == rc; ++q) {
        if (stale(j->pin[q]) || stale(j->pout[q])) {
            rc = fail(s, "fakegpu: peer reduction through a stale IPC mapping (the owner freed "
                         "that allocation)");
        }
    }
    if (0 == rc && (NULL == acc || NULL == t)) {
        rc = fail(s, "fakegpu: out of memory");
    }
    for (int q = 0; q < j->n && 0 == rc; ++q) {
        memcpy(q ? t : acc, real(j->pin[q]), n);
        if (q > 0) { /* t = acc OP t: the left fold */
            if (0 != llrdma_reduce_local(j->op, j->dtype, acc, t, j->count)) {
                rc = fail(s, "fakegpu: reduction rejected");
            }
            unsigned char *x = acc;
            acc = t;
            t = x;
        }
    }
    for (int q = 0; q < j->n && 0 == rc; ++q) {
        memcpy(real(j->pout[q]), acc, n);
    }
    free(acc);
    free(t);
    return rc;
}

static int run_job(llrdma_cuda_session_t *s, job_t *j)
{
    if (2 == j->reduce) {
        return run_peer(s, j);
    }
    if (3 == j->reduce) {
        __atomic_add_fetch(&j->ev->completed, 1, __ATOMIC_RELEASE);
        return 0;
    }
    if (4 == j->reduce) { /* the peer's recorded work, which its own flush runs */
        for (long spins = 0; __atomic_load_n(&j->ev->completed, __ATOMIC_ACQUIRE) < j->target;
             ++spins) {
            if (spins > 20L * 1000 * 1000) {
                return fail(s, "fakegpu: waited 20 s for a peer's event");
            }
            usleep(1);
        }
        return 0;
    }
    if (!j->reduce) {
        memmove(real(j->dst), real(j->src), j->bytes);
        free(j->bounce);
        return 0;
    }
    size_t n = j->count * llrdma_ar_dtype_size(j->dtype);
    unsigned char *tmp = malloc(n);
    if (NULL == tmp) {
        return fail(s, "fakegpu: out of memory");
    }
    memcpy(tmp, real(j->b), n);
    if (0 != llrdma_reduce_local(j->op, j->dtype, real(j->a), tmp, j->count)) {
        free(tmp);
        return fail(s, "fakegpu: reduction rejected");
    }
    memcpy(real(j->out), tmp, n);
    free(tmp);
    return 0;
}

/* Runs everything enqueued, in order (a stream synchronisation). */
static int flush(llrdma_cuda_session_t *s)
{
    int rc = 0;
    while (NULL != s->head) {
        job_t *j = s->head;
        s->head = j->next;
        if (0 == rc && !s->err[0]) {
            rc = run_job(s, j);
        } else if (!j->reduce) {
            free(j->bounce);
        }
        free(j);
    }
    s->tail = NULL;
    return rc;
}

static int enqueue(llrdma_cuda_session_t *s, const job_t *proto)
{
    const char *d = getenv("FAKEGPU_DEFER");
    job_t *j = malloc(sizeof(*j));
    if (NULL == j) {
        return fail(s, "fakegpu: out of memory");
    }
    *j = *proto;
    j->next = NULL;
    if (NULL != d && 0 == strcmp(d, "0")) {
        int rc = run_job(s, j);
        free(j);
        return rc;
    }
    if (NULL != s->tail) {
        s->tail->next = j;
    } else {
        s->head = j;
    }
    s->tail = j;
    return 0;
}

static int f_begin(int device, llrdma_cuda_session_t **out, char *err, size_t errlen)
{
    (void)device;
    (void)err;
    (void)errlen;
    pthread_once(&once, init);
    *out = calloc(1, sizeof(**out));
    count(C_BEGIN);
    return NULL == *out ? -1 : 0;
}

static int f_end(llrdma_cuda_session_t *s, char *err, size_t errlen)
{
    int rc;
    (void)flush(s);
    if (0 != s->bounces) {
        fail(s, "fakegpu: session ended with bounce buffers outstanding");
    }
    rc = '\0' == s->err[0] ? 0 : -1;
    snprintf(err, errlen, "%s", s->err);
    free(s);
    count(C_END);
    return rc;
}

/* Host ranges pinned through host_register (the coll arena): copies inside a
 * session may target them, as cudaMemcpyAsync targets pinned memory. */
#define MAX_PINNED 64
static struct {
    unsigned char *p;
    size_t n;
} pinned[MAX_PINNED];

static int is_pinned(const void *p, size_t bytes)
{
    const unsigned char *c = (const unsigned char *)p;
    int yes = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_PINNED && !yes; ++i) {
        yes = NULL != pinned[i].p && c >= pinned[i].p && c + bytes <= pinned[i].p + pinned[i].n;
    }
    pthread_mutex_unlock(&lock);
    return yes;
}

static int f_copy(llrdma_cuda_session_t *s, void *dst, const void *src, size_t bytes)
{
    count(C_COPY);
    if (s->err[0]) {
        return -1;
    }
    if (!gpu_side(dst) && !is_pinned(dst, bytes) && NULL == getenv("FAKEGPU_NO_REGISTER")) {
        return fail(s, "fakegpu: copy to host memory inside a session");
    }
    return enqueue(s, &(job_t){.dst = dst, .src = src, .bytes = bytes});
}

static int f_reduce(llrdma_cuda_session_t *s, int op, int dtype, const void *a, const void *b,
                    void *out, size_t count_)
{
    size_t n = count_ * llrdma_ar_dtype_size(dtype);
    count(C_REDUCE);
    if (s->err[0]) {
        return -1;
    }
    if (!(gpu_side(a) || is_pinned(a, n)) || !(gpu_side(b) || is_pinned(b, n)) ||
        !(gpu_side(out) || is_pinned(out, n))) {
        return fail(s, "fakegpu: reduction on host memory");
    }
    return enqueue(
        s, &(job_t){
               .reduce = 1, .op = op, .dtype = dtype, .a = a, .b = b, .out = out, .count = count_});
}

static void *f_alloc(llrdma_cuda_session_t *s, size_t bytes)
{
    count(C_ALLOC);
    return s->err[0] ? NULL : fakegpu_malloc(bytes, 0);
}

static void f_free(llrdma_cuda_session_t *s, void *p)
{
    (void)s;
    (void)p;
    count(C_FREE);
}

static int f_stage_out(llrdma_cuda_session_t *s, const void *src, size_t bytes, void **bounce)
{
    static long n;
    const char *at = getenv("FAKEGPU_FAIL_AT");
    long k;
    pthread_mutex_lock(&lock);
    k = ++n;
    pthread_mutex_unlock(&lock);
    count(C_STAGE_OUT);
    *bounce = NULL;
    if (s->err[0]) {
        return -1;
    }
    if (NULL != at && atol(at) == k) {
        return fail(s, "fakegpu: injected stage_out failure");
    }
    if (!gpu_side(src)) {
        return fail(s, "fakegpu: send staged from host memory");
    }
    if (0 != flush(s)) { /* the copy waits for the stream's earlier work */
        return -1;
    }
    if (NULL == (*bounce = malloc(bytes))) {
        return fail(s, "fakegpu: out of memory");
    }
    memcpy(*bounce, real(src), bytes);
    ++s->bounces;
    return 0;
}

static int f_bounce_get(llrdma_cuda_session_t *s, size_t bytes, void **bounce)
{
    *bounce = s->err[0] ? NULL : malloc(bytes);
    if (NULL == *bounce) {
        return s->err[0] ? -1 : fail(s, "fakegpu: out of memory");
    }
    ++s->bounces;
    return 0;
}

static int f_stage_in(llrdma_cuda_session_t *s, void *dst, void *bounce, size_t bytes)
{
    count(C_STAGE_IN);
    --s->bounces;
    if (!s->err[0] && !gpu_side(dst)) {
        fail(s, "fakegpu: receive staged into host memory");
    }
    if (s->err[0]) {
        free(bounce);
        return -1;
    }
    return enqueue(s, &(job_t){.dst = dst, .src = bounce, .bytes = bytes, .bounce = bounce});
}

static void f_bounce_put(llrdma_cuda_session_t *s, void *bounce)
{
    --s->bounces;
    free(bounce);
}

static const char *f_error(const llrdma_cuda_session_t *s)
{
    return s->err;
}

static int f_copy_sync(void *dst, const void *src, size_t bytes, char *err, size_t errlen)
{
    static long n;
    const char *at = getenv("FAKEGPU_FAIL_COPY_AT");
    long k;
    pthread_mutex_lock(&lock);
    k = ++n;
    pthread_mutex_unlock(&lock);
    if (NULL != at && atol(at) == k) {
        snprintf(err, errlen, "fakegpu: injected copy failure");
        return -1;
    }
    count(C_SYNC);
    memmove(real(dst), real(src), bytes);
    return 0;
}

static void f_finalize(void) {}

static int f_sync(llrdma_cuda_session_t *s)
{
    static long n;
    const char *at = getenv("FAKEGPU_FAIL_SYNC_AT");
    long k;
    pthread_mutex_lock(&lock);
    k = ++n;
    pthread_mutex_unlock(&lock);
    if (s->err[0]) {
        return -1;
    }
    if (NULL != at && atol(at) == k) {
        return fail(s, "fakegpu: injected sync failure");
    }
    return flush(s);
}

static int f_host_register(void *p, size_t bytes, char *err, size_t errlen)
{
    int slot = -1;
    const char *no = getenv("FAKEGPU_NO_REGISTER");
    if (NULL != no && '1' == no[0]) {
        snprintf(err, errlen, "fakegpu: host_register refused (FAKEGPU_NO_REGISTER)");
        return -1;
    }
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_PINNED && slot < 0; ++i) {
        if (NULL == pinned[i].p) {
            slot = i;
            pinned[i].p = (unsigned char *)p;
            pinned[i].n = bytes;
        }
    }
    pthread_mutex_unlock(&lock);
    if (slot < 0) {
        snprintf(err, errlen, "fakegpu: too many pinned ranges");
        return -1;
    }
    if (NULL != getenv("FAKEGPU_NOT_MAPPED")) {
        snprintf(err, errlen, "fakegpu: pinned, not mapped (FAKEGPU_NOT_MAPPED)");
        return 1;
    }
    return 0;
}

static void f_host_unregister(void *p)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_PINNED; ++i) {
        if (pinned[i].p == p) {
            pinned[i].p = NULL;
        }
    }
    pthread_mutex_unlock(&lock);
}

/* Every process its own GPU, unless FAKEGPU_DEVICE_KEY names one they share. */
static int f_device_key(int device, unsigned long long *key, char *err, size_t errlen)
{
    const char *k = getenv("FAKEGPU_DEVICE_KEY");
    (void)device;
    (void)err;
    (void)errlen;
    *key = NULL != k ? strtoull(k, NULL, 10) : 1000ull + (unsigned long long)getpid();
    return 0;
}

/* ------------------------------------------------------ version 3: peers */

/* A handle names the owner's process and allocation (or event slot). */
typedef struct {
    uint64_t magic, pid, id, off, size;
} fhandle_t;
#define HANDLE_MAGIC 0xfa4e69c0ull

static unsigned long long fake_key(void)
{
    const char *k = getenv("FAKEGPU_DEVICE_KEY");
    return NULL != k ? strtoull(k, NULL, 10) : 1000ull + (unsigned long long)getpid();
}

/* Bus id from the device key; UUID = the key (one GPU), or per process with
 * FAKEGPU_MIG=1 (MIG instances of the GPU the key names). */
static int f_device_info(int device, char *bus_id, size_t bus_len, unsigned char *uuid, char *err,
                         size_t errlen)
{
    unsigned long long k = fake_key(),
                       u = NULL != getenv("FAKEGPU_MIG") ? (unsigned long long)getpid() : k;
    (void)device;
    (void)err;
    (void)errlen;
    snprintf(bus_id, bus_len, "0000:%llx:00.0", k);
    memset(uuid, 0, 16);
    memcpy(uuid, &u, sizeof(u));
    return 0;
}

static int f_peer_access(int device, const char *bus_id, char *err, size_t errlen)
{
    (void)device;
    (void)bus_id;
    (void)err;
    (void)errlen;
    return NULL != getenv("FAKEGPU_NO_PEER") ? 0 : 1;
}

static int f_mem_range(const void *p, unsigned long long *id, void **base, size_t *size, char *err,
                       size_t errlen)
{
    alloc_t a;
    if (!in_dev(p)) {
        snprintf(err, errlen, "fakegpu: mem_range of memory that is not device memory");
        return -1;
    }
    if (!live_alloc(p, &a)) {
        snprintf(err, errlen, "fakegpu: no live allocation holds %p", p);
        return -1;
    }
    *id = a.id;
    *base = dev_base + a.off;
    *size = a.size;
    return 0;
}

static int f_ipc_export(void *base, void *handle, char *err, size_t errlen)
{
    unsigned long long id;
    void *b;
    size_t size;
    if (0 != f_mem_range(base, &id, &b, &size, err, errlen)) {
        return -1;
    }
    if (NULL != getenv("FAKEGPU_NO_IPC")) {
        snprintf(err, errlen, "fakegpu: IPC export refused (FAKEGPU_NO_IPC)");
        return -1;
    }
    fhandle_t h = {HANDLE_MAGIC, (uint64_t)getpid(), id, (uint64_t)((unsigned char *)b - dev_base),
                   size};
    memset(handle, 0, LLRDMA_CUDA_IPC_BYTES);
    memcpy(handle, &h, sizeof(h));
    pthread_mutex_lock(&lock);
    ++peer_counters[P_EXPORT];
    pthread_mutex_unlock(&lock);
    return 0;
}

/* Maps the owner's file: its table, and (when size > 0) one range. */
static void *map_owner(long pid, uint64_t off, size_t size, table_t **owner)
{
    char name[64];
    int fd;
    void *t, *p = NULL;
    shm_path(name, sizeof(name), pid);
    if ((fd = shm_open(name, O_RDWR, 0)) < 0) {
        return NULL;
    }
    t = mmap(NULL, TABLE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (size > 0 && MAP_FAILED != t) { /* mmap wants a page-aligned offset */
        size_t lead = off % 4096;
        p = mmap(NULL, size + lead, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)(off - lead));
        p = MAP_FAILED == p ? p : (unsigned char *)p + lead;
    }
    close(fd);
    if (MAP_FAILED == t || MAP_FAILED == p) {
        return NULL;
    }
    *owner = (table_t *)t;
    return size > 0 ? p : t;
}

static int f_ipc_open(const void *handle, void **mapped, char *err, size_t errlen)
{
    fhandle_t h;
    table_t *owner = NULL;
    int slot = -1;
    memcpy(&h, handle, sizeof(h));
    if (HANDLE_MAGIC != h.magic || (long)h.pid == (long)getpid()) {
        snprintf(err, errlen, "fakegpu: not another process's IPC handle");
        return -1;
    }
    unsigned char *back = map_owner((long)h.pid, h.off, h.size, &owner);
    if (NULL == back) {
        snprintf(err, errlen, "fakegpu: cannot map process %ld's device memory", (long)h.pid);
        return -1;
    }
    int live = 0;
    for (uint64_t k = 0; k < owner->nallocs; ++k) {
        live |= owner->allocs[k].id == h.id &&
                __atomic_load_n(&owner->allocs[k].live, __ATOMIC_ACQUIRE);
    }
    unsigned char *addr = mmap(NULL, h.size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_IMPORTS && slot < 0; ++i) {
        if (NULL == imports[i].addr) {
            slot = i;
        }
    }
    if (!live || slot < 0 || MAP_FAILED == addr) {
        pthread_mutex_unlock(&lock);
        munmap(back - h.off % 4096, h.size + h.off % 4096);
        munmap(owner, TABLE_BYTES);
        if (MAP_FAILED != addr) {
            munmap(addr, h.size);
        }
        snprintf(err, errlen, "fakegpu: %s",
                 !live ? "invalid IPC handle (the allocation was freed)" : "too many IPC mappings");
        return -1;
    }
    imports[slot].addr = addr;
    imports[slot].back = back;
    imports[slot].size = h.size;
    imports[slot].pid = (long)h.pid;
    imports[slot].id = h.id;
    imports[slot].off = h.off;
    imports[slot].owner = owner;
    ++peer_counters[P_OPEN];
    pthread_mutex_unlock(&lock);
    *mapped = addr;
    return 0;
}

static void f_ipc_close(void *mapped)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_IMPORTS; ++i) {
        if (imports[i].addr == mapped) {
            munmap(imports[i].addr, imports[i].size);
            munmap(imports[i].back - imports[i].off % 4096,
                   imports[i].size + imports[i].off % 4096);
            munmap(imports[i].owner, TABLE_BYTES);
            imports[i].addr = NULL;
            ++peer_counters[P_CLOSE];
        }
    }
    pthread_mutex_unlock(&lock);
}

/* An event is a slot of counters in its owner's table; the value handed
 * out is a pointer to it (own table, or the owner's mapped). */
static int f_event_create(void **ev, void *handle, char *err, size_t errlen)
{
    int slot = -1;
    pthread_once(&once, init);
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_EVENTS && slot < 0; ++i) {
        if (!table->events[i].used) {
            slot = i;
            table->events[i].used = 1;
        }
    }
    pthread_mutex_unlock(&lock);
    if (slot < 0) {
        snprintf(err, errlen, "fakegpu: too many events");
        return -1;
    }
    fhandle_t h = {HANDLE_MAGIC, (uint64_t)getpid(), (uint64_t)slot, 0, 0};
    memset(handle, 0, LLRDMA_CUDA_IPC_BYTES);
    memcpy(handle, &h, sizeof(h));
    *ev = &table->events[slot];
    return 0;
}

static int f_event_open(const void *handle, void **ev, char *err, size_t errlen)
{
    fhandle_t h;
    table_t *owner = NULL;
    memcpy(&h, handle, sizeof(h));
    if (HANDLE_MAGIC != h.magic || h.id >= MAX_EVENTS ||
        NULL == map_owner((long)h.pid, 0, 0, &owner)) {
        snprintf(err, errlen, "fakegpu: cannot open that event handle");
        return -1;
    }
    *ev = &owner->events[h.id];
    return 0;
}

static void f_event_destroy(void *ev)
{
    unsigned char *c = (unsigned char *)ev;
    if (c >= (unsigned char *)table && c < (unsigned char *)table + TABLE_BYTES) {
        ((fevent_t *)ev)->used = 0;
    } /* another process's table stays mapped (one page per peer, small) */
}

static int f_peer_reduce(llrdma_cuda_session_t *s, int op, int dtype, const void *const *in,
                         void *const *out, int n, size_t count_)
{
    job_t j;
    size_t bytes = count_ * llrdma_ar_dtype_size(dtype);
    memset(&j, 0, sizeof(j));
    if (s->err[0]) {
        return -1;
    }
    if (n < 1 || n > 16) {
        return fail(s, "fakegpu: peer_reduce of more than 16 ranks");
    }
    for (int q = 0; q < n; ++q) {
        int ok_in = in_dev(in[q]) || import_of(in[q]) >= 0;
        int ok_out = in_dev(out[q]) || import_of(out[q]) >= 0;
        if (!ok_in || !ok_out) {
            return fail(s, "fakegpu: peer_reduce on memory that is neither this process's "
                           "device memory nor mapped through IPC");
        }
        if ((import_of(in[q]) >= 0 && import_of((const char *)in[q] + bytes - 1) < 0) ||
            (import_of(out[q]) >= 0 && import_of((const char *)out[q] + bytes - 1) < 0)) {
            return fail(s, "fakegpu: peer_reduce past the end of a mapped allocation");
        }
        j.pin[q] = in[q];
        j.pout[q] = out[q];
    }
    j.reduce = 2;
    j.op = op;
    j.dtype = dtype;
    j.n = n;
    j.count = count_;
    pthread_mutex_lock(&lock);
    ++peer_counters[P_REDUCE];
    pthread_mutex_unlock(&lock);
    return enqueue(s, &j);
}

static int f_event_record(llrdma_cuda_session_t *s, void *ev)
{
    job_t j;
    if (s->err[0]) {
        return -1;
    }
    memset(&j, 0, sizeof(j));
    j.reduce = 3;
    j.ev = (fevent_t *)ev;
    __atomic_add_fetch(&j.ev->recorded, 1, __ATOMIC_RELEASE);
    return enqueue(s, &j);
}

static int f_stream_wait(llrdma_cuda_session_t *s, void *ev)
{
    job_t j;
    if (s->err[0]) {
        return -1;
    }
    memset(&j, 0, sizeof(j));
    j.reduce = 4;
    j.ev = (fevent_t *)ev;
    j.target = __atomic_load_n(&j.ev->recorded, __ATOMIC_ACQUIRE); /* its last record */
    pthread_mutex_lock(&lock);
    ++peer_counters[P_WAIT];
    pthread_mutex_unlock(&lock);
    return enqueue(s, &j);
}

static void *f_dev_alloc(int device, size_t bytes, char *err, size_t errlen)
{
    (void)device;
    (void)err;
    (void)errlen;
    return fakegpu_malloc(bytes, 0); /* not a session's: not in the counters */
}

static void f_dev_free(void *p)
{
    fakegpu_free(p);
}

static const llrdma_cuda_api_t api = {
    LLRDMA_CUDA_API_VERSION,
    f_begin,
    f_end,
    f_copy,
    f_reduce,
    f_alloc,
    f_free,
    f_stage_out,
    f_bounce_get,
    f_stage_in,
    f_bounce_put,
    f_error,
    f_copy_sync,
    f_finalize,
    f_sync,
    f_host_register,
    f_host_unregister,
    f_device_key,
    f_device_info,
    f_peer_access,
    f_mem_range,
    f_ipc_export,
    f_ipc_open,
    f_ipc_close,
    f_event_create,
    f_event_open,
    f_event_destroy,
    f_peer_reduce,
    f_event_record,
    f_stream_wait,
    f_dev_alloc,
    f_dev_free,
};

EXPORT const llrdma_cuda_api_t *llrdma_cuda_api(int version)
{
    return LLRDMA_CUDA_API_VERSION == version ? &api : NULL;
}
