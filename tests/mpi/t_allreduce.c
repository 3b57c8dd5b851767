/*
 * MPI_Allreduce through coll/llrdma against a locally computed reference:
 * integer results exactly, floating point identical on every rank and close to
 * the reference; awkward counts, MPI_IN_PLACE, every op on representative
 * datatypes, pair types with ties, sub-communicators (including permuted
 * ranks), repeated calls, and calls that must fall back (user op, derived type).
 * --matrix: instead of the suite, every predefined datatype coll/llrdma maps x
 * every op defined on it (values that stay exact in every type), on the same
 * communicators.
 * --fault N [COUNT]: calls 1..N+2 on COUNT doubles with MPI_ERRORS_RETURN;
 * call N must fail (a failure injected on some rank, see test-allreduce-faults.sh)
 * and every other one be right (the arena is rebuilt).  --die R N [COUNT]: rank R
 * kills itself at call N; the others' call N must fail within 10 s.
 * --die-mid N [COUNT]: a rank is killed inside call N (by coll/llrdma's test
 * hook LLRDMA_TEST_DIE_AT_SEND, between its messages); every survivor's call N
 * returns the right sum or fails, and its two later calls fail within 10 s.
 * --fault-stays N [COUNT]: as --fault, but call N and every later one must fail
 * (a failure in the hierarchical schedule: its node arenas are not rebuilt).
 * --forever: Allreduce until killed (prints "t_allreduce rank R: running").
 * --info VALUE [RANK]: the suite on a duplicate of MPI_COMM_WORLD made with info
 * llrdma_allreduce=VALUE (only on rank RANK when given; the others pass none).
 * Each rank judges its own results: it prints "t_allreduce rank R: PASS" or its
 * first problems (FAIL lines) and exits 1.  The verdict never travels through
 * an MPI_Allreduce, i.e. through the code under test; mpirun exits nonzero when
 * any rank does.
 */
#include <mpi.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, fails;

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        if (fails++ < 10) {                                                                        \
            fprintf(stderr, "t_allreduce rank %d: FAIL: ", rank);                                  \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static uint64_t h(int r, long i, int salt)
{
    return mix(((uint64_t)salt << 48) ^ ((uint64_t)r << 32) ^ (uint64_t)i);
}

/* ---------------------------------------------------------- integers */

static int64_t ival(MPI_Op op, int r, long i, int salt)
{
    uint64_t x = h(r, i, salt);
    if (op == MPI_PROD)
        return (int64_t)(1 + x % 3) * ((x & 8) ? -1 : 1);
    if (op == MPI_LAND)
        return x % 5 ? 1 : 0;
    if (op == MPI_LOR)
        return x % 5 ? 0 : 1;
    return (int64_t)x;
}

static int32_t iop(MPI_Op op, int32_t a, int32_t b)
{
    uint32_t ua = (uint32_t)a, ub = (uint32_t)b;
    if (op == MPI_SUM)
        return (int32_t)(ua + ub);
    if (op == MPI_PROD)
        return (int32_t)(ua * ub);
    if (op == MPI_MIN)
        return a < b ? a : b;
    if (op == MPI_MAX)
        return a > b ? a : b;
    if (op == MPI_LAND)
        return a && b;
    if (op == MPI_LOR)
        return a || b;
    if (op == MPI_LXOR)
        return !a != !b;
    if (op == MPI_BAND)
        return a & b;
    if (op == MPI_BOR)
        return a | b;
    return a ^ b;
}

static void test_int32(MPI_Comm comm, MPI_Op op, const char *name, long n, int inplace, int salt)
{
    int me, p;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &p);
    int32_t *in = malloc((n + 1) * sizeof *in), *out = malloc((n + 1) * sizeof *out);
    for (long i = 0; i < n; ++i)
        in[i] = (int32_t)ival(op, me, i, salt);
    if (inplace) {
        memcpy(out, in, n * sizeof *in);
        MPI_Allreduce(MPI_IN_PLACE, out, (int)n, MPI_INT, op, comm);
    } else {
        MPI_Allreduce(in, out, (int)n, MPI_INT, op, comm);
    }
    for (long i = 0; i < n; ++i) {
        int32_t want = (int32_t)ival(op, 0, i, salt);
        for (int r = 1; r < p; ++r)
            want = iop(op, want, (int32_t)ival(op, r, i, salt));
        if (out[i] != want) {
            FAIL("int %s n=%ld inplace=%d p=%d: [%ld] = %d, want %d", name, n, inplace, p, i,
                 out[i], want);
            break;
        }
    }
    free(in);
    free(out);
}

static void test_other_ints(MPI_Comm comm, long n)
{
    int me, p;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &p);
    uint8_t *a = malloc(n + 1), *b = malloc(n + 1);
    int64_t *c = malloc((n + 1) * 8), *d = malloc((n + 1) * 8);
    for (long i = 0; i < n; ++i) {
        a[i] = (uint8_t)h(me, i, 7);
        c[i] = (int64_t)h(me, i, 8);
    }
    MPI_Allreduce(a, b, (int)n, MPI_UNSIGNED_CHAR, MPI_SUM, comm);
    MPI_Allreduce(c, d, (int)n, MPI_LONG_LONG, MPI_MAX, comm);
    for (long i = 0; i < n; ++i) {
        uint8_t s = 0;
        int64_t m = INT64_MIN;
        for (int r = 0; r < p; ++r) {
            s = (uint8_t)(s + (uint8_t)h(r, i, 7));
            int64_t v = (int64_t)h(r, i, 8);
            m = v > m ? v : m;
        }
        if (b[i] != s || d[i] != m) {
            FAIL("uchar sum / long long max n=%ld [%ld]", n, i);
            break;
        }
    }
    free(a), free(b), free(c), free(d);
}

/* ----------------------------------------------------- floating point */

static void test_double(MPI_Comm comm, MPI_Op op, long n, int inplace)
{
    int me, p;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &p);
    double *in = malloc((n + 1) * 8), *out = malloc((n + 1) * 8), *r0 = malloc((n + 1) * 8);
    for (long i = 0; i < n; ++i)
        in[i] = 0.5 + (double)(h(me, i, 3) % 100003) / 100003.0;
    memcpy(out, in, n * 8);
    MPI_Allreduce(inplace ? MPI_IN_PLACE : in, out, (int)n, MPI_DOUBLE, op, comm);
    memcpy(r0, out, n * 8);
    MPI_Bcast(r0, (int)n, MPI_DOUBLE, 0, comm);
    if (n > 0 && memcmp(r0, out, n * 8) != 0)
        FAIL("double n=%ld p=%d: result differs from rank 0's bits", n, p);
    for (long i = 0; i < n; ++i) {
        double want = op == MPI_MAX ? -1e300 : op == MPI_PROD ? 1.0 : 0.0;
        for (int r = 0; r < p; ++r) {
            double v = 0.5 + (double)(h(r, i, 3) % 100003) / 100003.0;
            want = op == MPI_SUM ? want + v : op == MPI_PROD ? want * v : (v > want ? v : want);
        }
        if (fabs(out[i] - want) > 1e-12 * fabs(want)) {
            FAIL("double n=%ld p=%d: [%ld] = %.17g, want %.17g", n, p, i, out[i], want);
            break;
        }
    }
    free(in), free(out), free(r0);
}

/* ------------------------------------------------------- pair types */

static void test_pairs(MPI_Comm comm, long n)
{
    int me, p;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &p);
    struct {
        double v;
        int k;
    } *a = malloc((n + 1) * sizeof *a), *b = malloc((n + 1) * sizeof *b);
    struct {
        short v;
        int k;
    } *s = malloc((n + 1) * sizeof *s), *t = malloc((n + 1) * sizeof *t);
    for (long i = 0; i < n; ++i) {
        a[i].v = (double)(h(me, i, 4) % 3); /* ties across ranks */
        a[i].k = (int)(h(me, i, 5) % 100);
        s[i].v = (short)(h(me, i, 6) % 3);
        s[i].k = me;
    }
    MPI_Allreduce(a, b, (int)n, MPI_DOUBLE_INT, MPI_MAXLOC, comm);
    MPI_Allreduce(s, t, (int)n, MPI_SHORT_INT, MPI_MINLOC, comm);
    for (long i = 0; i < n; ++i) {
        double mv = -1;
        int mk = 0;
        short sv = 100;
        int sk = 0;
        for (int r = 0; r < p; ++r) {
            double v = (double)(h(r, i, 4) % 3);
            int k = (int)(h(r, i, 5) % 100);
            if (v > mv || (v == mv && k < mk))
                mv = v, mk = k;
            short w = (short)(h(r, i, 6) % 3);
            if (w < sv)
                sv = w, sk = r;
        }
        if (b[i].v != mv || b[i].k != mk || t[i].v != sv || t[i].k != sk) {
            FAIL("maxloc/minloc n=%ld [%ld]: (%g,%d) (%d,%d), want (%g,%d) (%d,%d)", n, i, b[i].v,
                 b[i].k, t[i].v, t[i].k, mv, mk, sv, sk);
            break;
        }
    }
    free(a), free(b), free(s), free(t);
}

/* -------------------------------------------------------- fallbacks */

static void my_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    for (int i = 0; i < *len; ++i)
        ((int *)inout)[i] += ((int *)in)[i];
}

static void my_sum5(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    int n = 5 * *len;
    my_sum(in, inout, &n, dt);
}

static void test_fallbacks(MPI_Comm comm)
{
    int me, p, x[5], y[5];
    long double lx = 1.5L, ly = 0;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &p);
    MPI_Op op, op5;
    MPI_Datatype five;
    MPI_Op_create(my_sum, 1, &op);
    MPI_Op_create(my_sum5, 1, &op5);
    MPI_Type_contiguous(5, MPI_INT, &five);
    MPI_Type_commit(&five);
    for (int i = 0; i < 5; ++i)
        x[i] = me + i;
    MPI_Allreduce(x, y, 5, MPI_INT, op, comm);
    for (int i = 0; i < 5; ++i)
        if (y[i] != p * (p - 1) / 2 + p * i)
            FAIL("user op [%d] = %d", i, y[i]);
    MPI_Allreduce(x, y, 1, five, op5, comm);
    for (int i = 0; i < 5; ++i)
        if (y[i] != p * (p - 1) / 2 + p * i)
            FAIL("derived type [%d] = %d", i, y[i]);
    MPI_Allreduce(&lx, &ly, 1, MPI_LONG_DOUBLE, MPI_SUM, comm);
    if (ly != 1.5L * p)
        FAIL("long double sum %Lg", ly);
    MPI_Type_free(&five);
    MPI_Op_free(&op5);
    MPI_Op_free(&op);
}

static void suite(MPI_Comm comm)
{
    int p;
    MPI_Comm_size(comm, &p);
    long counts[] = {0, 1, 2, 3, p - 1, p, p + 1, 1000, 4097, 300000};
    MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MIN,  MPI_MAX, MPI_LAND,
                    MPI_LOR, MPI_LXOR, MPI_BAND, MPI_BOR, MPI_BXOR};
    const char *names[] = {"sum", "prod", "min",  "max", "land",
                           "lor", "lxor", "band", "bor", "bxor"};
    for (int c = 0; c < 10; ++c) {
        long n = counts[c];
        for (int o = 0; o < 10; ++o)
            if (n < 10000 || o % 4 == 0)
                test_int32(comm, ops[o], names[o], n, (c + o) % 2, c * 16 + o);
        test_other_ints(comm, n);
        test_double(comm, MPI_SUM, n, c % 2);
        test_double(comm, c % 2 ? MPI_MAX : MPI_PROD, n, 1 - c % 2);
        test_pairs(comm, n);
    }
    for (int i = 0; i < 50; ++i) /* repeated small calls, no barrier between */
        test_int32(comm, MPI_SUM, "sum", 1 + i % 7, i % 2, 99);
    for (int i = 0; i < 50; ++i) /* the same call again and again (coll/llrdma's fast path) */
        test_int32(comm, MPI_SUM, "sum", 3, i % 2, 99);
    test_fallbacks(comm);
}

/* ------------------------------------------------ op x datatype matrix */

typedef struct {
    MPI_Datatype dt;
    const char *name;
    int size, is_signed, kind; /* kind 0 integer, 1 floating point, 2 bool, 3 byte */
} mtype_t;

static void mput(const mtype_t *t, void *buf, long i, int64_t v)
{
    char *p = (char *)buf + i * t->size;
    if (1 == t->kind) {
        if (4 == t->size) {
            float f = (float)v;
            memcpy(p, &f, 4);
        } else {
            double d = (double)v;
            memcpy(p, &d, 8);
        }
        return;
    }
    memcpy(p, &v, (size_t)t->size); /* little endian: the low bytes */
}

/* The value of element i, widened (sign-extended for signed types). */
static int64_t mget(const mtype_t *t, const void *buf, long i)
{
    const char *p = (const char *)buf + i * t->size;
    if (1 == t->kind) {
        if (4 == t->size) {
            float f;
            memcpy(&f, p, 4);
            return (int64_t)f;
        }
        double d;
        memcpy(&d, p, 8);
        return (int64_t)d;
    }
    uint64_t u = 0;
    memcpy(&u, p, (size_t)t->size);
    if (t->is_signed && t->size < 8 && (u >> (8 * t->size - 1)) & 1) {
        u |= ~(uint64_t)0 << (8 * t->size);
    }
    return (int64_t)u;
}

/* a OP b at the type's width (integers wrap), computed here, not by MPI. */
static int64_t mref(const mtype_t *t, MPI_Op op, int64_t a, int64_t b)
{
    uint64_t r;
    if (op == MPI_SUM)
        r = (uint64_t)a + (uint64_t)b;
    else if (op == MPI_PROD)
        r = (uint64_t)a * (uint64_t)b;
    else if (op == MPI_MIN)
        return a < b ? a : b; /* values 0..99: no wrap, no sign issue */
    else if (op == MPI_MAX)
        return a > b ? a : b;
    else if (op == MPI_LAND)
        return a && b;
    else if (op == MPI_LOR)
        return a || b;
    else if (op == MPI_LXOR)
        return !a != !b;
    else if (op == MPI_BAND)
        r = (uint64_t)a & (uint64_t)b;
    else if (op == MPI_BOR)
        r = (uint64_t)a | (uint64_t)b;
    else
        r = (uint64_t)a ^ (uint64_t)b;
    if (1 == t->kind || t->size == 8)
        return (int64_t)r;
    r &= ((uint64_t)1 << (8 * t->size)) - 1;
    if (t->is_signed && (r >> (8 * t->size - 1)) & 1)
        r |= ~(uint64_t)0 << (8 * t->size);
    return (int64_t)r;
}

/* Inputs: 0..99, or 0/1 for logical ops, or factors 1, 2 (and -1 for
 * signed integers) for prod; floating point stays exact (small sums,
 * products of at most a few 2s). */
static int64_t mval(const mtype_t *t, MPI_Op op, int r, long i)
{
    uint64_t x = h(r, i, 11);
    if (op == MPI_PROD)
        return (x % 3 == 2 && t->is_signed && 0 == t->kind) ? -1 : (int64_t)(1 + x % 2);
    if (op == MPI_LAND || op == MPI_LOR || op == MPI_LXOR || 2 == t->kind)
        return op == MPI_LAND ? (x % 5 ? 1 : 0) : (x % 3 ? 0 : 1);
    return (int64_t)(x % 100);
}

static void matrix(MPI_Comm comm)
{
    const mtype_t types[] = {
        {MPI_INT8_T, "int8_t", 1, 1, 0},
        {MPI_SIGNED_CHAR, "signed char", 1, 1, 0},
        {MPI_INT16_T, "int16_t", 2, 1, 0},
        {MPI_INT32_T, "int32_t", 4, 1, 0},
        {MPI_INT64_T, "int64_t", 8, 1, 0},
        {MPI_UINT8_T, "uint8_t", 1, 0, 0},
        {MPI_UNSIGNED_CHAR, "unsigned char", 1, 0, 0},
        {MPI_UINT16_T, "uint16_t", 2, 0, 0},
        {MPI_UINT32_T, "uint32_t", 4, 0, 0},
        {MPI_UINT64_T, "uint64_t", 8, 0, 0},
        {MPI_SHORT, "short", sizeof(short), 1, 0},
        {MPI_INT, "int", sizeof(int), 1, 0},
        {MPI_LONG, "long", sizeof(long), 1, 0},
        {MPI_LONG_LONG, "long long", sizeof(long long), 1, 0},
        {MPI_UNSIGNED_SHORT, "unsigned short", sizeof(short), 0, 0},
        {MPI_UNSIGNED, "unsigned", sizeof(int), 0, 0},
        {MPI_UNSIGNED_LONG, "unsigned long", sizeof(long), 0, 0},
        {MPI_UNSIGNED_LONG_LONG, "unsigned long long", sizeof(long long), 0, 0},
        {MPI_FLOAT, "float", 4, 1, 1},
        {MPI_DOUBLE, "double", 8, 1, 1},
        {MPI_C_BOOL, "C bool", 1, 0, 2},
        {MPI_BYTE, "byte", 1, 0, 3},
    };
    MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MIN,  MPI_MAX, MPI_LAND,
                    MPI_LOR, MPI_LXOR, MPI_BAND, MPI_BOR, MPI_BXOR};
    const char *names[] = {"sum", "prod", "min",  "max", "land",
                           "lor", "lxor", "band", "bor", "bxor"};
    const long counts[] = {1, 7, 1001, 70001};
    int me, p;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &p);
    for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ++ti) {
        const mtype_t *t = &types[ti];
        for (int o = 0; o < 10; ++o) {
            /* MPI's op x type table: arithmetic on numbers, logical on
             * integers and bool, bitwise on integers and byte. */
            if ((t->kind == 1 && o >= 4) || (t->kind == 2 && (o < 4 || o >= 7)) ||
                (t->kind == 3 && o < 7))
                continue;
            for (int c = 0; c < 4; ++c) {
                long n = counts[c];
                char *in = malloc((size_t)n * t->size), *out = malloc((size_t)n * t->size);
                for (long i = 0; i < n; ++i)
                    mput(t, in, i, mval(t, ops[o], me, i));
                if ((c + o) % 2) {
                    memcpy(out, in, (size_t)n * t->size);
                    MPI_Allreduce(MPI_IN_PLACE, out, (int)n, t->dt, ops[o], comm);
                } else {
                    MPI_Allreduce(in, out, (int)n, t->dt, ops[o], comm);
                }
                for (long i = 0; i < n; ++i) {
                    int64_t want = mval(t, ops[o], 0, i);
                    for (int r = 1; r < p; ++r)
                        want = mref(t, ops[o], want, mval(t, ops[o], r, i));
                    if (mget(t, out, i) != want) {
                        FAIL("matrix %s %s n=%ld p=%d: [%ld] = %lld, want %lld", t->name, names[o],
                             n, p, i, (long long)mget(t, out, i), (long long)want);
                        break;
                    }
                }
                free(in);
                free(out);
            }
        }
    }
}

/* Calls 1..last on `count` doubles, in place; call `bad` must fail, the
 * others give the right sum.  die >= 0: that rank kills itself at call bad
 * and the others stop after it (nothing collective can work any more). */
static int stays; /* --fault-stays: calls after the bad one fail too */
static int mid;   /* --die-mid: call `bad` may fail or not, later ones fail */

static void faults(int bad, long count, int die)
{
    double *v = malloc((size_t)count * sizeof(double));
    int p, k, last = die >= 0 && !mid ? bad : bad + 2;
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    for (k = 1; k <= last; ++k) {
        for (long i = 0; i < count; ++i)
            v[i] = rank + k + (double)(i % 1000);
        if (k == bad && rank == die) {
            fflush(stdout);
            raise(SIGKILL);
        }
        double t0 = MPI_Wtime();
        int rc = MPI_Allreduce(MPI_IN_PLACE, v, (int)count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        double secs = MPI_Wtime() - t0;
        long i = count - 1;
        double want = (double)p * (p - 1) / 2 + (double)p * (k + (double)(i % 1000));
        int must_fail = k == bad || ((stays || mid) && k > bad);
        if (mid && k == bad ? MPI_SUCCESS == rc && v[i] != want
            : must_fail     ? MPI_SUCCESS == rc
                            : MPI_SUCCESS != rc || v[i] != want)
            FAIL("fault run: call %d returned %d (last element %g, want %g)", k, rc, v[i], want);
        if (k >= bad && (die >= 0 || mid) && secs > 10)
            FAIL("fault run: call %d took %.1f s to see a rank gone", k, secs);
    }
    free(v);
}

/* Allreduce of 1000 doubles until killed (a node of the job is cut off
 * mid-run: tests/cluster/test-kill.sh); says "running" after the first call. */
static void forever(void)
{
    double v[1000];
    int p;
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    for (long k = 1;; ++k) {
        for (int i = 0; i < 1000; ++i)
            v[i] = rank + k + i;
        MPI_Allreduce(MPI_IN_PLACE, v, 1000, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (v[999] != (double)p * (p - 1) / 2 + (double)p * (double)(k + 999)) {
            FAIL("forever: call %ld: last element %g", k, v[999]);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        if (1 == k) {
            printf("t_allreduce rank %d: running\n", rank);
            fflush(stdout);
        }
    }
}

int main(int argc, char **argv)
{
    int size;
    MPI_Comm half, rev;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 2 && 0 == strcmp(argv[1], "--fault-stays")) {
        stays = 1;
        faults(atoi(argv[2]), argc > 3 ? atol(argv[3]) : 1000, -1);
        goto done;
    }
    if (argc > 2 && 0 == strcmp(argv[1], "--fault")) {
        faults(atoi(argv[2]), argc > 3 ? atol(argv[3]) : 1000, -1);
        goto done;
    }
    if (argc > 1 && 0 == strcmp(argv[1], "--forever"))
        forever();
    if (argc > 2 && 0 == strcmp(argv[1], "--info")) {
        MPI_Info info = MPI_INFO_NULL;
        MPI_Comm dup;
        if (argc < 4 || rank == atoi(argv[3])) {
            MPI_Info_create(&info);
            MPI_Info_set(info, "llrdma_allreduce", argv[2]);
        }
        MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &dup);
        MPI_Comm_set_name(dup, "t_allreduce info dup");
        if (MPI_INFO_NULL != info)
            MPI_Info_free(&info);
        suite(dup);
        MPI_Comm_free(&dup);
        goto done;
    }
    if ((argc > 3 && 0 == strcmp(argv[1], "--die")) ||
        (argc > 2 && 0 == strcmp(argv[1], "--die-mid"))) {
        mid = 0 == strcmp(argv[1], "--die-mid");
        if (mid)
            faults(atoi(argv[2]), argc > 3 ? atol(argv[3]) : 1000, -1);
        else
            faults(atoi(argv[3]), argc > 4 ? atol(argv[4]) : 1000, atoi(argv[2]));
        /* MPI_Finalize may wait for the dead rank (a PMIx fence): judge first. */
        if (fails)
            fprintf(stderr, "t_allreduce rank %d: FAIL (%d failed checks)\n", rank, fails);
        else
            printf("t_allreduce rank %d: PASS (%d ranks, one killed)\n", rank, size);
        fflush(NULL);
        _exit(fails ? 1 : 0);
    }
    {
        void (*run)(MPI_Comm) = argc > 1 && 0 == strcmp(argv[1], "--matrix") ? matrix : suite;
        run(MPI_COMM_WORLD);
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
        run(half);
        MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &rev); /* ranks permuted */
        run(rev);
    }
    MPI_Comm_free(&half);
    MPI_Comm_free(&rev);
done:
    /* A rank that failed still finalizes: every rank made the same calls. */
    MPI_Finalize();
    if (fails)
        fprintf(stderr, "t_allreduce rank %d: FAIL (%d failed checks, %d ranks)\n", rank, fails,
                size);
    else
        printf("t_allreduce rank %d: PASS (%d ranks)\n", rank, size);
    return fails ? 1 : 0;
}
