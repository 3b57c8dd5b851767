/*
 * MPI_Allreduce on the Fortran datatype handles (used from C: they are in
 * mpi.h), complex types, the MPI_AINT family and Fortran pair types, against
 * a reference every rank computes alone from every rank's inputs with plain C
 * (C99 _Complex for complex): nothing of the reference goes through MPI or
 * coll/llrdma.  Values stay exact in every type (small integers, halves), so
 * any reduction order gives the same bits.
 *
 * For every case whose handle has the expected size in this build, rank 0
 * prints "t_ftypes expect: allreduce BYTES bytes (TYPE OP)": the plan line
 * coll/llrdma writes at coll_llrdma_verbose 10 when it ran the call, with the
 * core type the handle must map to (test-ftypes.sh checks each is there).
 * Each case has its own count, so BYTES tells the cases apart.
 *
 * Invalid pairs (MPI_MAX on complex, MPI_LAND on MPI_INTEGER, MPI_SUM on
 * MPI_LOGICAL) must fail with MPI_ERR_OP, as Open MPI's own Allreduce does,
 * and leave the receive buffer alone.  MPI_REAL16 (no core type of 16-byte
 * reals) must still be right: coll/llrdma hands it to the module below.
 *
 * Each rank judges its own results: "t_ftypes rank R: PASS", or FAIL lines
 * and exit 1.
 */
#include <complex.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, fails;

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        if (fails++ < 20) {                                                                        \
            fprintf(stderr, "t_ftypes rank %d: FAIL: ", rank);                                     \
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

/* A small integer in [lo, hi] for rank r, element i of case `salt`. */
static long pick(int r, long i, int salt, long lo, long hi)
{
    uint64_t x = mix(((uint64_t)salt << 48) ^ ((uint64_t)r << 32) ^ (uint64_t)i);
    return lo + (long)(x % (uint64_t)(hi - lo + 1));
}

enum { C_INT, C_UINT, C_REAL, C_LOGICAL, C_COMPLEX, C_2INT, C_2REAL };

typedef struct {
    const char *name; /* of the handle */
    MPI_Datatype dt;
    int cls;   /* C_* */
    int width; /* bytes of one scalar (a part, for complex and pairs) */
    MPI_Op op;
    const char *opname;
    const char *core; /* the core type it must map to ("int32", ...) */
    long count;
} tcase;

/* One scalar of `width` bytes at p[i] (class cls), as a long double
 * (integers and exact halves only), and back. */
static long double get(const unsigned char *p, int cls, int width)
{
    if (C_REAL == cls || C_COMPLEX == cls || C_2REAL == cls) {
        if (4 == width) {
            float f;
            memcpy(&f, p, 4);
            return f;
        }
        double d;
        memcpy(&d, p, 8);
        return d;
    }
    switch (width) {
    case 1:
        return C_UINT == cls ? (long double)*(const uint8_t *)p : (long double)*(const int8_t *)p;
    case 2: {
        int16_t v;
        memcpy(&v, p, 2);
        return C_UINT == cls ? (long double)(uint16_t)v : (long double)v;
    }
    case 4: {
        int32_t v;
        memcpy(&v, p, 4);
        return C_UINT == cls ? (long double)(uint32_t)v : (long double)v;
    }
    default: {
        int64_t v;
        memcpy(&v, p, 8);
        return C_UINT == cls ? (long double)(uint64_t)v : (long double)v;
    }
    }
}

static void put(unsigned char *p, int cls, int width, long double x)
{
    if (C_REAL == cls || C_COMPLEX == cls || C_2REAL == cls) {
        if (4 == width) {
            float f = (float)x;
            memcpy(p, &f, 4);
        } else {
            double d = (double)x;
            memcpy(p, &d, 8);
        }
        return;
    }
    int64_t v = (int64_t)x;
    memcpy(p, &v, (size_t)width); /* little endian: the low bytes */
}

static int parts(int cls)
{
    return C_COMPLEX == cls || C_2INT == cls || C_2REAL == cls ? 2 : 1;
}

static void raw_input(const tcase *c, int salt, int r, long i, long double *x);

/* Rank r's element i, as `parts` scalars, as stored in the buffer (a value
 * too wide for the type keeps its low bytes). */
static void input(const tcase *c, int salt, int r, long i, long double *x)
{
    unsigned char b[8];
    raw_input(c, salt, r, i, x);
    for (int k = 0; k < parts(c->cls); ++k) {
        put(b, c->cls, c->width, x[k]);
        x[k] = get(b, c->cls, c->width);
    }
}

static void raw_input(const tcase *c, int salt, int r, long i, long double *x)
{
    switch (c->cls) {
    case C_LOGICAL: { /* false, or true written as 1, 2, 256 or -1 */
        static const long t[] = {0, 1, 2, 256, -1};
        x[0] = (long double)t[pick(r, i, salt, 0, 4)];
        if (MPI_LAND == c->op && pick(r, i, salt + 1, 0, size) != 0 && 0 == x[0]) {
            x[0] = 1; /* mostly true for land, so that both results show */
        }
        if (MPI_LOR == c->op && pick(r, i, salt + 1, 0, size) != 0) {
            x[0] = 0; /* mostly false for lor */
        }
        return;
    }
    case C_COMPLEX: /* products of up to 5 of these stay exact in float */
        x[0] = (long double)pick(r, i, salt, -2, 2);
        x[1] = (long double)pick(r, i, salt + 1, -2, 2);
        if (MPI_SUM == c->op) {
            x[0] /= 2;
        }
        return;
    case C_2INT:
    case C_2REAL:
        x[0] = (long double)pick(r, i, salt, -2, 1); /* many ties */
        x[1] = (long double)pick(r, i, salt + 1, 0, 40);
        return;
    default:
        if (MPI_PROD == c->op) {
            x[0] = (long double)pick(r, i, salt, C_UINT == c->cls ? 1 : -2, 2);
        } else if (MPI_SUM == c->op && C_REAL == c->cls) {
            x[0] = (long double)pick(r, i, salt, -1000, 1000) / 4;
        } else if (C_UINT == c->cls) {
            x[0] = (long double)pick(r, i, salt, 0, 1L << 30);
        } else {
            x[0] = (long double)pick(r, i, salt, -(1L << 30), 1L << 30);
        }
        return;
    }
}

/* acc = acc OP x, in plain C. */
static void fold(const tcase *c, long double *acc, const long double *x)
{
    MPI_Op op = c->op;
    if (C_COMPLEX == c->cls) {
        long double complex a = acc[0] + acc[1] * I, b = x[0] + x[1] * I;
        long double complex z = MPI_SUM == op ? a + b : a * b;
        acc[0] = creall(z);
        acc[1] = cimagl(z);
    } else if (C_2INT == c->cls || C_2REAL == c->cls) {
        int better = MPI_MAXLOC == op ? x[0] > acc[0] : x[0] < acc[0];
        if (better || (x[0] == acc[0] && x[1] < acc[1])) {
            acc[0] = x[0];
            acc[1] = x[1];
        }
    } else if (C_LOGICAL == c->cls) {
        int a = 0 != acc[0], b = 0 != x[0];
        acc[0] = MPI_LAND == op ? (a && b) : MPI_LOR == op ? (a || b) : (a != b);
    } else if (MPI_SUM == op) {
        acc[0] += x[0];
    } else if (MPI_PROD == op) {
        acc[0] *= x[0];
    } else if (MPI_MIN == op) {
        acc[0] = x[0] < acc[0] ? x[0] : acc[0];
    } else if (MPI_MAX == op) {
        acc[0] = x[0] > acc[0] ? x[0] : acc[0];
    } else { /* bitwise, on the two's complement bits */
        uint64_t a = (uint64_t)(int64_t)acc[0], b = (uint64_t)(int64_t)x[0];
        uint64_t v = MPI_BAND == op ? a & b : MPI_BOR == op ? a | b : a ^ b;
        acc[0] = (long double)(int64_t)v;
    }
}

/* Integers wrap to the type's width (prod and sum of 30-bit values). */
static long double wrap(const tcase *c, long double x)
{
    if (C_INT != c->cls && C_UINT != c->cls) {
        return x;
    }
    unsigned char b[8];
    int64_t v = (int64_t)x;
    memcpy(b, &v, 8);
    return get(b, c->cls, c->width);
}

static void run_case(const tcase *c, int salt, int inplace)
{
    int tsize = 0, np = parts(c->cls), w = c->width;
    size_t es = (size_t)np * (size_t)w;

    MPI_Type_size(c->dt, &tsize);
    if ((size_t)tsize != es) {
        if (0 == rank && 0 == inplace) {
            printf("t_ftypes: %s is %d bytes here, not %zu: skipped\n", c->name, tsize, es);
        }
        return;
    }
    unsigned char *in = malloc(es * (size_t)c->count), *out = malloc(es * (size_t)c->count);
    for (long i = 0; i < c->count; ++i) {
        long double x[2];
        input(c, salt, rank, i, x);
        for (int k = 0; k < np; ++k) {
            put(in + i * es + k * w, c->cls, w, x[k]);
        }
    }
    if (inplace) {
        memcpy(out, in, es * (size_t)c->count);
    }
    int rc = MPI_Allreduce(inplace ? MPI_IN_PLACE : in, out, (int)c->count, c->dt, c->op,
                           MPI_COMM_WORLD);
    if (MPI_SUCCESS != rc) {
        FAIL("%s %s: MPI_Allreduce returned %d", c->name, c->opname, rc);
    }
    for (long i = 0; i < c->count && MPI_SUCCESS == rc; ++i) {
        long double acc[2], x[2];
        input(c, salt, 0, i, acc);
        for (int r = 1; r < size; ++r) {
            input(c, salt, r, i, x);
            fold(c, acc, x);
        }
        for (int k = 0; k < np; ++k) {
            long double got = get(out + i * es + k * w, c->cls, w), want = wrap(c, acc[k]);
            if (got != want) {
                FAIL("%s %s count %ld%s: [%ld].%d = %.1Lf, want %.1Lf", c->name, c->opname,
                     c->count, inplace ? " in place" : "", i, k, got, want);
                break;
            }
        }
    }
    if (0 == rank && 0 == inplace && size > 1) {
        char op[16] = "";
        for (size_t k = 0; k + 1 < sizeof op && c->opname[4 + k]; ++k) { /* "MPI_SUM" -> "sum" */
            op[k] = (char)(c->opname[4 + k] - 'A' + 'a');
        }
        printf("t_ftypes expect: allreduce %zu bytes (%s %s)\n", es * (size_t)c->count, c->core,
               op);
    }
    free(in);
    free(out);
}

/* An op MPI does not define on the type: MPI_ERR_OP, buffer untouched. */
static void invalid(const char *name, MPI_Datatype dt, MPI_Op op, const char *opname)
{
    unsigned char in[64], out[64];
    int tsize = 0, cls = 0;
    MPI_Type_size(dt, &tsize);
    if (tsize <= 0 || tsize * 2 > (int)sizeof in) {
        return;
    }
    memset(in, 1, sizeof in);
    memset(out, 0x5A, sizeof out);
    int rc = MPI_Allreduce(in, out, 2, dt, op, MPI_COMM_WORLD);
    MPI_Error_class(rc, &cls);
    if (MPI_ERR_OP != cls) {
        FAIL("%s %s: error class %d, want MPI_ERR_OP (%d)", name, opname, cls, MPI_ERR_OP);
    }
    for (size_t i = 0; i < sizeof out; ++i) {
        if (0x5A != out[i]) {
            FAIL("%s %s: the receive buffer was written", name, opname);
            break;
        }
    }
}

#define T(h, cls, w, op, core, n)                                                                  \
    {                                                                                              \
#h, h, cls, w, op, #op, core, n                                                            \
    }

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    /* Counts differ, so the plan lines' byte counts tell the cases apart;
     * lower-case op names are what the plan line says. */
    const tcase cases[] = {
        T(MPI_INTEGER, C_INT, 4, MPI_SUM, "int32", 1001),
        T(MPI_INTEGER, C_INT, 4, MPI_BXOR, "int32", 1002),
        T(MPI_INTEGER, C_INT, 4, MPI_MIN, "int32", 7),
#ifdef MPI_INTEGER1
        T(MPI_INTEGER1, C_INT, 1, MPI_MAX, "int8", 1003),
#endif
#ifdef MPI_INTEGER2
        T(MPI_INTEGER2, C_INT, 2, MPI_PROD, "int16", 1004),
#endif
#ifdef MPI_INTEGER4
        T(MPI_INTEGER4, C_INT, 4, MPI_BAND, "int32", 1005),
#endif
#ifdef MPI_INTEGER8
        T(MPI_INTEGER8, C_INT, 8, MPI_SUM, "int64", 1006),
        T(MPI_INTEGER8, C_INT, 8, MPI_MAX, "int64", 100007),
#endif
        T(MPI_REAL, C_REAL, 4, MPI_SUM, "float", 1008),
        T(MPI_DOUBLE_PRECISION, C_REAL, 8, MPI_SUM, "double", 1009),
        T(MPI_DOUBLE_PRECISION, C_REAL, 8, MPI_MIN, "double", 200010),
#ifdef MPI_REAL4
        T(MPI_REAL4, C_REAL, 4, MPI_MAX, "float", 1011),
#endif
#ifdef MPI_REAL8
        T(MPI_REAL8, C_REAL, 8, MPI_PROD, "double", 1012),
#endif
        T(MPI_LOGICAL, C_LOGICAL, 4, MPI_LAND, "logical32", 1013),
        T(MPI_LOGICAL, C_LOGICAL, 4, MPI_LOR, "logical32", 1014),
        T(MPI_LOGICAL, C_LOGICAL, 4, MPI_LXOR, "logical32", 100015),
#ifdef MPI_LOGICAL1
        T(MPI_LOGICAL1, C_LOGICAL, 1, MPI_LOR, "bool", 1016),
#endif
#ifdef MPI_LOGICAL2
        T(MPI_LOGICAL2, C_LOGICAL, 2, MPI_LXOR, "logical16", 1017),
#endif
#ifdef MPI_LOGICAL4
        T(MPI_LOGICAL4, C_LOGICAL, 4, MPI_LAND, "logical32", 1018),
#endif
#ifdef MPI_LOGICAL8
        T(MPI_LOGICAL8, C_LOGICAL, 8, MPI_LAND, "logical64", 1019),
#endif
        T(MPI_2INTEGER, C_2INT, 4, MPI_MAXLOC, "2int", 1020),
        T(MPI_2REAL, C_2REAL, 4, MPI_MINLOC, "2float", 1021),
        T(MPI_2DOUBLE_PRECISION, C_2REAL, 8, MPI_MAXLOC, "2double", 1022),
        T(MPI_2DOUBLE_PRECISION, C_2REAL, 8, MPI_MINLOC, "2double", 100023),
        T(MPI_COMPLEX, C_COMPLEX, 4, MPI_SUM, "float_complex", 1024),
        T(MPI_COMPLEX, C_COMPLEX, 4, MPI_PROD, "float_complex", 1025),
        T(MPI_DOUBLE_COMPLEX, C_COMPLEX, 8, MPI_SUM, "double_complex", 1026),
        T(MPI_DOUBLE_COMPLEX, C_COMPLEX, 8, MPI_PROD, "double_complex", 1027),
        T(MPI_DOUBLE_COMPLEX, C_COMPLEX, 8, MPI_PROD, "double_complex", 100028),
        T(MPI_C_FLOAT_COMPLEX, C_COMPLEX, 4, MPI_PROD, "float_complex", 1029),
        T(MPI_C_DOUBLE_COMPLEX, C_COMPLEX, 8, MPI_SUM, "double_complex", 1030),
        T(MPI_C_COMPLEX, C_COMPLEX, 4, MPI_SUM, "float_complex", 1031),
#ifdef MPI_COMPLEX16
        T(MPI_COMPLEX16, C_COMPLEX, 8, MPI_PROD, "double_complex", 1032),
#endif
        T(MPI_AINT, C_INT, 8, MPI_SUM, "int64", 1033),
        T(MPI_COUNT, C_INT, 8, MPI_MIN, "int64", 1034),
        /* Open MPI reduces MPI_OFFSET as unsigned; so does coll/llrdma */
        T(MPI_OFFSET, C_UINT, 8, MPI_BOR, "uint64", 1035),
    };
    int salt = 1;
    for (size_t j = 0; j < sizeof cases / sizeof cases[0]; ++j, salt += 2) {
        run_case(&cases[j], salt, 0);
        run_case(&cases[j], salt, 1);
    }

    /* Open MPI rejects these (MPI_ERR_OP); coll/llrdma must not compute them. */
    invalid("MPI_DOUBLE_COMPLEX", MPI_DOUBLE_COMPLEX, MPI_MAX, "max");
    invalid("MPI_COMPLEX", MPI_COMPLEX, MPI_MIN, "min");
    invalid("MPI_C_DOUBLE_COMPLEX", MPI_C_DOUBLE_COMPLEX, MPI_LAND, "land");
    invalid("MPI_C_FLOAT_COMPLEX", MPI_C_FLOAT_COMPLEX, MPI_MAXLOC, "maxloc");
    invalid("MPI_INTEGER", MPI_INTEGER, MPI_LAND, "land");
    invalid("MPI_LOGICAL", MPI_LOGICAL, MPI_SUM, "sum");
    invalid("MPI_REAL", MPI_REAL, MPI_BAND, "band");

#ifdef MPI_REAL16
    { /* no core type: the module below; zero bits are +0 in any 16-byte float */
        int tsize = 0;
        MPI_Type_size(MPI_REAL16, &tsize);
        if (16 == tsize) {
            unsigned char z[16 * 5] = {0}, o[16 * 5];
            memset(o, 0x5A, sizeof o);
            int rc = MPI_Allreduce(z, o, 5, MPI_REAL16, MPI_SUM, MPI_COMM_WORLD);
            if (MPI_SUCCESS != rc || 0 != memcmp(z, o, sizeof o)) {
                FAIL("MPI_REAL16 sum: rc %d or result not zero", rc);
            }
            if (0 == rank) {
                printf("t_ftypes: MPI_REAL16 sum tried\n");
            }
        }
    }
#endif

    if (0 == fails) {
        printf("t_ftypes rank %d: PASS\n", rank);
    }
    fflush(stdout);
    MPI_Finalize();
    return fails ? 1 : 0;
}
