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

static void init(void)
{
    int f = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    dev_base = mmap(NULL, SPAN, PROT_NONE, f, -1, 0);
    dev_back = mmap(NULL, SPAN, PROT_READ | PROT_WRITE, f, -1, 0);
    man_base = mmap(NULL, SPAN, PROT_READ | PROT_WRITE, f, -1, 0);
    if (MAP_FAILED == dev_base || MAP_FAILED == dev_back || MAP_FAILED == man_base) {
        abort();
    }
}

static int in_dev(const void *p)
{
    return (const unsigned char *)p >= dev_base && (const unsigned char *)p < dev_base + SPAN;
}
static int in_man(const void *p)
{
    return (const unsigned char *)p >= man_base && (const unsigned char *)p < man_base + SPAN;
}
static void *real(const void *p)
{
    return in_dev(p) ? dev_back + ((const unsigned char *)p - dev_base) : (void *)p;
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
    size_t *next = managed ? &man_next : &dev_next, off;
    pthread_once(&once, init);
    pthread_mutex_lock(&lock);
    off = (*next + 255) / 256 * 256;
    *next = off + bytes + 256;
    pthread_mutex_unlock(&lock);
    return (managed ? man_base : dev_base) + off;
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

static int run_job(llrdma_cuda_session_t *s, job_t *j)
{
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
};

EXPORT const llrdma_cuda_api_t *llrdma_cuda_api(int version)
{
    return LLRDMA_CUDA_API_VERSION == version ? &api : NULL;
}
