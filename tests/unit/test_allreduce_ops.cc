// Unit tests of the reduction kernels (llrdma_reduce_local) and the support matrix.
#define BOOST_TEST_MODULE test_allreduce_ops
#include <boost/test/unit_test.hpp>

#include "llrdma_allreduce.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace
{

enum Kind { kInt, kFloat, kBool, kByte, kPair, kComplex };

Kind kind_of(int dt)
{
    switch (dt) {
    case LLRDMA_DT_FLOAT:
    case LLRDMA_DT_DOUBLE:
        return kFloat;
    case LLRDMA_DT_BOOL:
    case LLRDMA_DT_LOGICAL16:
    case LLRDMA_DT_LOGICAL32:
    case LLRDMA_DT_LOGICAL64:
        return kBool;
    case LLRDMA_DT_FLOAT_COMPLEX:
    case LLRDMA_DT_DOUBLE_COMPLEX:
        return kComplex;
    case LLRDMA_DT_BYTE:
        return kByte;
    case LLRDMA_DT_FLOAT_INT:
    case LLRDMA_DT_DOUBLE_INT:
    case LLRDMA_DT_LONG_INT:
    case LLRDMA_DT_2INT:
    case LLRDMA_DT_SHORT_INT:
    case LLRDMA_DT_2FLOAT:
    case LLRDMA_DT_2DOUBLE:
    case LLRDMA_DT_2INT64:
        return kPair;
    default:
        return kInt;
    }
}

bool expect_supported(int dt, int op)
{
    bool arith = op <= LLRDMA_OP_MAX;
    bool logical = op >= LLRDMA_OP_LAND && op <= LLRDMA_OP_LXOR;
    bool bitwise = op >= LLRDMA_OP_BAND && op <= LLRDMA_OP_BXOR;
    bool loc = op == LLRDMA_OP_MAXLOC || op == LLRDMA_OP_MINLOC;
    switch (kind_of(dt)) {
    case kInt:
        return arith || logical || bitwise;
    case kFloat:
        return arith;
    case kBool:
        return logical;
    case kByte:
        return bitwise;
    case kPair:
        return loc;
    case kComplex: // MPI defines no order, logic or bits on complex numbers
        return op == LLRDMA_OP_SUM || op == LLRDMA_OP_PROD;
    }
    return false;
}

// Independent reference for integer ops, computed in 64 bits then truncated.
template <typename T> T ref_int(int op, T a, T b)
{
    uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
    switch (op) {
    case LLRDMA_OP_SUM:
        return static_cast<T>(ua + ub);
    case LLRDMA_OP_PROD:
        return static_cast<T>(ua * ub);
    case LLRDMA_OP_MIN:
        return a < b ? a : b;
    case LLRDMA_OP_MAX:
        return a > b ? a : b;
    case LLRDMA_OP_LAND:
        return (a && b) ? 1 : 0;
    case LLRDMA_OP_LOR:
        return (a || b) ? 1 : 0;
    case LLRDMA_OP_LXOR:
        return (!a != !b) ? 1 : 0;
    case LLRDMA_OP_BAND:
        return static_cast<T>(ua & ub);
    case LLRDMA_OP_BOR:
        return static_cast<T>(ua | ub);
    case LLRDMA_OP_BXOR:
        return static_cast<T>(ua ^ ub);
    }
    return 0;
}

template <typename T> void check_int_type(int dt)
{
    using L = std::numeric_limits<T>;
    std::vector<T> vals = {0,
                           1,
                           2,
                           3,
                           7,
                           static_cast<T>(100),
                           L::max(),
                           L::min(),
                           static_cast<T>(L::max() - 1),
                           static_cast<T>(L::max() / 2 + 3)};
    if (L::is_signed) {
        vals.push_back(static_cast<T>(-1));
        vals.push_back(static_cast<T>(-5));
    }
    // All ordered pairs as one vector; inout gets b, in gets a.
    std::vector<T> in, inout;
    for (T a : vals)
        for (T b : vals) {
            in.push_back(a);
            inout.push_back(b);
        }
    for (int op = LLRDMA_OP_SUM; op <= LLRDMA_OP_BXOR; ++op) {
        std::vector<T> out = inout;
        BOOST_REQUIRE_EQUAL(llrdma_reduce_local(op, dt, in.data(), out.data(), in.size()), 0);
        for (size_t i = 0; i < in.size(); ++i) {
            BOOST_TEST_CONTEXT(llrdma_ar_dtype_name(dt) << " " << llrdma_ar_op_name(op) << " "
                                                        << +in[i] << " , " << +inout[i])
            BOOST_CHECK_EQUAL(+out[i], +ref_int<T>(op, in[i], inout[i]));
        }
    }
}

template <typename V, typename K = int> struct Pair {
    V v;
    K k;
};

template <typename V, typename K = int> void check_loc_type(int dt)
{
    BOOST_REQUIRE_EQUAL(llrdma_ar_dtype_size(dt), sizeof(Pair<V, K>));
    // in, inout, expected maxloc, expected minloc
    struct Case {
        Pair<V, K> a, b, mx, mn;
    } cases[] = {
        {{5, 3}, {5, 1}, {5, 1}, {5, 1}}, // tie: smaller index either way
        {{5, 1}, {5, 3}, {5, 1}, {5, 1}},
        {{7, 9}, {2, 0}, {7, 9}, {2, 0}},
        {{2, 0}, {7, 9}, {7, 9}, {2, 0}},
        {{-4, 2}, {-4, -8}, {-4, -8}, {-4, -8}}, // negative indexes are legal
    };
    for (int op : {LLRDMA_OP_MAXLOC, LLRDMA_OP_MINLOC}) {
        for (const Case &c : cases) {
            Pair<V, K> out = c.b;
            BOOST_REQUIRE_EQUAL(llrdma_reduce_local(op, dt, &c.a, &out, 1), 0);
            const Pair<V, K> &want = op == LLRDMA_OP_MAXLOC ? c.mx : c.mn;
            BOOST_CHECK_EQUAL(out.v, want.v);
            BOOST_CHECK_EQUAL(out.k, want.k);
        }
    }
}

} // namespace

BOOST_AUTO_TEST_CASE(sizes_and_names)
{
    BOOST_CHECK_EQUAL(llrdma_ar_dtype_size(LLRDMA_DT_INT8), 1u);
    BOOST_CHECK_EQUAL(llrdma_ar_dtype_size(LLRDMA_DT_UINT16), 2u);
    BOOST_CHECK_EQUAL(llrdma_ar_dtype_size(LLRDMA_DT_FLOAT), 4u);
    BOOST_CHECK_EQUAL(llrdma_ar_dtype_size(LLRDMA_DT_INT64), 8u);
    BOOST_CHECK_EQUAL(llrdma_ar_dtype_size(LLRDMA_DT_BOOL), 1u);
    BOOST_CHECK_EQUAL(llrdma_ar_dtype_size(LLRDMA_DT_DOUBLE_INT), 16u);
    BOOST_CHECK_EQUAL(llrdma_ar_dtype_size(LLRDMA_DT_2INT), 8u);
    BOOST_CHECK_EQUAL(llrdma_ar_dtype_size(LLRDMA_DT_SHORT_INT), 8u);
    BOOST_CHECK_EQUAL(llrdma_ar_dtype_size(-1), 0u);
    BOOST_CHECK_EQUAL(llrdma_ar_dtype_size(LLRDMA_DT_COUNT), 0u);
    BOOST_CHECK_EQUAL(std::string(llrdma_ar_dtype_name(LLRDMA_DT_LONG_INT)), "long_int");
    BOOST_CHECK_EQUAL(llrdma_ar_dtype_size(LLRDMA_DT_LOGICAL16), 2u);
    BOOST_CHECK_EQUAL(llrdma_ar_dtype_size(LLRDMA_DT_LOGICAL32), 4u);
    BOOST_CHECK_EQUAL(llrdma_ar_dtype_size(LLRDMA_DT_LOGICAL64), 8u);
    BOOST_CHECK_EQUAL(llrdma_ar_dtype_size(LLRDMA_DT_2FLOAT), 8u);
    BOOST_CHECK_EQUAL(llrdma_ar_dtype_size(LLRDMA_DT_2DOUBLE), 16u);
    BOOST_CHECK_EQUAL(llrdma_ar_dtype_size(LLRDMA_DT_2INT64), 16u);
    BOOST_CHECK_EQUAL(llrdma_ar_dtype_size(LLRDMA_DT_FLOAT_COMPLEX), 8u);
    BOOST_CHECK_EQUAL(llrdma_ar_dtype_size(LLRDMA_DT_DOUBLE_COMPLEX), 16u);
    const char *dnames[LLRDMA_DT_COUNT] = {
        "int8",   "int16",     "int32",     "int64",         "uint8",
        "uint16", "uint32",    "uint64",    "float",         "double",
        "bool",   "byte",      "float_int", "double_int",    "long_int",
        "2int",   "short_int", "logical16", "logical32",     "logical64",
        "2float", "2double",   "2int64",    "float_complex", "double_complex"};
    for (int i = 0; i < LLRDMA_DT_COUNT; ++i)
        BOOST_CHECK_EQUAL(std::string(llrdma_ar_dtype_name(i)), dnames[i]);
    BOOST_CHECK_EQUAL(std::string(llrdma_ar_dtype_name(LLRDMA_DT_COUNT)), "?");
    BOOST_CHECK_EQUAL(std::string(llrdma_ar_op_name(LLRDMA_OP_MINLOC)), "minloc");
    BOOST_CHECK_EQUAL(std::string(llrdma_ar_op_name(99)), "?");

    const char *names[LLRDMA_AR_NALGS] = {"auto",        "recursive_doubling", "rabenseifner",
                                          "ring",        "shm_direct",         "shm_split",
                                          "hierarchical"};
    for (int i = 0; i < LLRDMA_AR_NALGS; ++i) {
        BOOST_CHECK_EQUAL(std::string(llrdma_ar_alg_name(i)), names[i]);
        BOOST_CHECK_EQUAL(llrdma_ar_alg_from_name(names[i]), i);
    }
    BOOST_CHECK(llrdma_ar_alg_name(LLRDMA_AR_NALGS) == nullptr);
    BOOST_CHECK(llrdma_ar_alg_name(-1) == nullptr);
    BOOST_CHECK_EQUAL(llrdma_ar_alg_from_name("Ring"), -1);
    BOOST_CHECK_EQUAL(llrdma_ar_alg_from_name("tree"), -1);
    BOOST_CHECK_EQUAL(llrdma_ar_alg_from_name(""), -1);
    BOOST_CHECK_EQUAL(llrdma_ar_alg_from_name(nullptr), -1);
}

BOOST_AUTO_TEST_CASE(support_matrix)
{
    for (int dt = -1; dt <= LLRDMA_DT_COUNT; ++dt)
        for (int op = -1; op <= LLRDMA_OP_COUNT; ++op) {
            bool in_range = dt >= 0 && dt < LLRDMA_DT_COUNT && op >= 0 && op < LLRDMA_OP_COUNT;
            bool want = in_range && expect_supported(dt, op);
            BOOST_TEST_CONTEXT("dtype " << dt << " op " << op)
            BOOST_CHECK_EQUAL(llrdma_ar_supported(dt, op), want ? 1 : 0);
            unsigned char a[16] = {}, b[16] = {};
            int rc = llrdma_reduce_local(op, dt, a, b, 1);
            BOOST_CHECK_EQUAL(rc, want ? LLRDMA_AR_OK : LLRDMA_AR_ERR_UNSUPPORTED);
        }
}

BOOST_AUTO_TEST_CASE(integers_every_op)
{
    check_int_type<int8_t>(LLRDMA_DT_INT8);
    check_int_type<int16_t>(LLRDMA_DT_INT16);
    check_int_type<int32_t>(LLRDMA_DT_INT32);
    check_int_type<int64_t>(LLRDMA_DT_INT64);
    check_int_type<uint8_t>(LLRDMA_DT_UINT8);
    check_int_type<uint16_t>(LLRDMA_DT_UINT16);
    check_int_type<uint32_t>(LLRDMA_DT_UINT32);
    check_int_type<uint64_t>(LLRDMA_DT_UINT64);
}

BOOST_AUTO_TEST_CASE(overflow_wraps)
{
    uint8_t a8 = 200, b8 = 100;
    llrdma_reduce_local(LLRDMA_OP_SUM, LLRDMA_DT_UINT8, &a8, &b8, 1);
    BOOST_CHECK_EQUAL(+b8, 44);
    uint16_t a16 = 65535, b16 = 65535; // promoted int multiply would overflow
    llrdma_reduce_local(LLRDMA_OP_PROD, LLRDMA_DT_UINT16, &a16, &b16, 1);
    BOOST_CHECK_EQUAL(b16, 1);
    int32_t a32 = std::numeric_limits<int32_t>::max(), b32 = 1;
    llrdma_reduce_local(LLRDMA_OP_SUM, LLRDMA_DT_INT32, &a32, &b32, 1);
    BOOST_CHECK_EQUAL(b32, std::numeric_limits<int32_t>::min());
    uint64_t a64 = ~0ull, b64 = 2;
    llrdma_reduce_local(LLRDMA_OP_SUM, LLRDMA_DT_UINT64, &a64, &b64, 1);
    BOOST_CHECK_EQUAL(b64, 1u);
    int64_t m = std::numeric_limits<int64_t>::min(), n = -1;
    llrdma_reduce_local(LLRDMA_OP_PROD, LLRDMA_DT_INT64, &m, &n, 1);
    BOOST_CHECK_EQUAL(n, std::numeric_limits<int64_t>::min());
}

BOOST_AUTO_TEST_CASE(floats)
{
    double in[] = {1.5, -2.0, 1e300, 3.0};
    double io[] = {2.25, 8.0, 1e300, -0.5};
    double s[4], p[4];
    std::memcpy(s, io, sizeof io);
    std::memcpy(p, io, sizeof io);
    llrdma_reduce_local(LLRDMA_OP_SUM, LLRDMA_DT_DOUBLE, in, s, 4);
    llrdma_reduce_local(LLRDMA_OP_PROD, LLRDMA_DT_DOUBLE, in, p, 4);
    for (int i = 0; i < 4; ++i) {
        BOOST_CHECK_EQUAL(s[i], in[i] + io[i]);
        BOOST_CHECK_EQUAL(p[i], in[i] * io[i]);
    }
    float fin[] = {1.0f, -3.0f}, fmin[] = {2.0f, -4.0f}, fmax[] = {2.0f, -4.0f};
    llrdma_reduce_local(LLRDMA_OP_MIN, LLRDMA_DT_FLOAT, fin, fmin, 2);
    llrdma_reduce_local(LLRDMA_OP_MAX, LLRDMA_DT_FLOAT, fin, fmax, 2);
    BOOST_CHECK_EQUAL(fmin[0], 1.0f);
    BOOST_CHECK_EQUAL(fmin[1], -4.0f);
    BOOST_CHECK_EQUAL(fmax[0], 2.0f);
    BOOST_CHECK_EQUAL(fmax[1], -3.0f);
}

BOOST_AUTO_TEST_CASE(min_max_keep_left_operand)
{
    // Documented: ties and unordered compares keep `in` (the left operand).
    double nz = -0.0, pz = 0.0, nan = std::nan("");
    double r = pz;
    llrdma_reduce_local(LLRDMA_OP_MIN, LLRDMA_DT_DOUBLE, &nz, &r, 1);
    BOOST_CHECK(std::signbit(r));
    r = nz;
    llrdma_reduce_local(LLRDMA_OP_MAX, LLRDMA_DT_DOUBLE, &pz, &r, 1);
    BOOST_CHECK(!std::signbit(r));
    r = 1.0;
    llrdma_reduce_local(LLRDMA_OP_MIN, LLRDMA_DT_DOUBLE, &nan, &r, 1);
    BOOST_CHECK(std::isnan(r));
    double one = 1.0;
    r = nan;
    llrdma_reduce_local(LLRDMA_OP_MAX, LLRDMA_DT_DOUBLE, &one, &r, 1);
    BOOST_CHECK_EQUAL(r, 1.0);
}

BOOST_AUTO_TEST_CASE(loc_ops_every_pair_type)
{
    check_loc_type<float>(LLRDMA_DT_FLOAT_INT);
    check_loc_type<double>(LLRDMA_DT_DOUBLE_INT);
    check_loc_type<long>(LLRDMA_DT_LONG_INT);
    check_loc_type<int>(LLRDMA_DT_2INT);
    check_loc_type<short>(LLRDMA_DT_SHORT_INT);
    // Fortran MPI_2REAL, MPI_2DOUBLE_PRECISION, MPI_2INTEGER of 8 bytes: the
    // index has the value's type.
    check_loc_type<float, float>(LLRDMA_DT_2FLOAT);
    check_loc_type<double, double>(LLRDMA_DT_2DOUBLE);
    check_loc_type<int64_t, int64_t>(LLRDMA_DT_2INT64);
}

// Fortran LOGICAL (Open MPI's rule, op_base_functions.c: C's && || on the
// integer): any nonzero bit pattern is true -- also one whose low byte is
// zero -- and results are exactly 1 or 0 in the full width.
template <typename T> void check_logical_type(int dt)
{
    BOOST_REQUIRE_EQUAL(llrdma_ar_dtype_size(dt), sizeof(T));
    const T big = static_cast<T>(T(1) << (8 * sizeof(T) - 1)); // only the top bit set
    std::vector<T> vals = {0, 1, 2, 0x100, big, static_cast<T>(~T(0))};
    for (int op : {LLRDMA_OP_LAND, LLRDMA_OP_LOR, LLRDMA_OP_LXOR})
        for (T a : vals)
            for (T b : vals) {
                T r = b;
                BOOST_REQUIRE_EQUAL(llrdma_reduce_local(op, dt, &a, &r, 1), 0);
                bool ta = a != 0, tb = b != 0;
                bool want = op == LLRDMA_OP_LAND  ? ta && tb
                            : op == LLRDMA_OP_LOR ? ta || tb
                                                  : ta != tb;
                BOOST_TEST_CONTEXT(llrdma_ar_dtype_name(dt)
                                   << " " << llrdma_ar_op_name(op) << " " << +a << " , " << +b)
                BOOST_CHECK_EQUAL(+r, want ? 1 : 0);
            }
    T a = 1, r = 1;
    for (int op : {LLRDMA_OP_SUM, LLRDMA_OP_MAX, LLRDMA_OP_BAND, LLRDMA_OP_MAXLOC})
        BOOST_CHECK_EQUAL(llrdma_reduce_local(op, dt, &a, &r, 1), LLRDMA_AR_ERR_UNSUPPORTED);
}

// Complex sum and product against std::complex, on values whose results are
// exact (small halves), so any rounding choice gives the same bits; and the
// ops MPI leaves undefined on complex are refused.
template <typename T> void check_complex_type(int dt)
{
    BOOST_REQUIRE_EQUAL(llrdma_ar_dtype_size(dt), 2 * sizeof(T));
    const T v[] = {0, 1, -1, 0.5, -2.5, 3, 7.5, -0.0};
    std::vector<std::complex<T>> in, io;
    for (T a : v)
        for (T b : v)
            for (T c : {T(1), T(-0.5), T(4)}) {
                in.emplace_back(a, b);
                io.emplace_back(c * b, a - c);
            }
    for (int op : {LLRDMA_OP_SUM, LLRDMA_OP_PROD}) {
        std::vector<std::complex<T>> out = io;
        BOOST_REQUIRE_EQUAL(llrdma_reduce_local(op, dt, in.data(), out.data(), in.size()), 0);
        for (size_t i = 0; i < in.size(); ++i) {
            std::complex<T> want = op == LLRDMA_OP_SUM ? in[i] + io[i] : in[i] * io[i];
            BOOST_TEST_CONTEXT(llrdma_ar_dtype_name(dt)
                               << " " << llrdma_ar_op_name(op) << " " << in[i] << " , " << io[i])
            {
                BOOST_CHECK_EQUAL(out[i].real(), want.real());
                BOOST_CHECK_EQUAL(out[i].imag(), want.imag());
            }
        }
    }
    // Non-commuting parts: (1 + 2i)(3 + 4i) = -5 + 10i; i * i = -1.
    std::complex<T> a(1, 2), b(3, 4), i1(0, 1), i2(0, 1);
    BOOST_REQUIRE_EQUAL(llrdma_reduce_local(LLRDMA_OP_PROD, dt, &a, &b, 1), 0);
    BOOST_CHECK_EQUAL(b, std::complex<T>(-5, 10));
    BOOST_REQUIRE_EQUAL(llrdma_reduce_local(LLRDMA_OP_PROD, dt, &i1, &i2, 1), 0);
    BOOST_CHECK_EQUAL(i2, std::complex<T>(-1, 0));
    for (int op = LLRDMA_OP_MIN; op < LLRDMA_OP_COUNT; ++op) {
        std::complex<T> x(1, 1), y(2, 2);
        BOOST_TEST_CONTEXT(llrdma_ar_op_name(op))
        {
            BOOST_CHECK_EQUAL(llrdma_ar_supported(dt, op), 0);
            BOOST_CHECK_EQUAL(llrdma_reduce_local(op, dt, &x, &y, 1), LLRDMA_AR_ERR_UNSUPPORTED);
            BOOST_CHECK_EQUAL(y, std::complex<T>(2, 2)); // untouched
        }
    }
}

BOOST_AUTO_TEST_CASE(fortran_logical)
{
    check_logical_type<uint16_t>(LLRDMA_DT_LOGICAL16);
    check_logical_type<uint32_t>(LLRDMA_DT_LOGICAL32);
    check_logical_type<uint64_t>(LLRDMA_DT_LOGICAL64);
}

BOOST_AUTO_TEST_CASE(complex_sum_prod_only)
{
    check_complex_type<float>(LLRDMA_DT_FLOAT_COMPLEX);
    check_complex_type<double>(LLRDMA_DT_DOUBLE_COMPLEX);
}

// A product whose parts round: the documented formula, each operation rounded
// once and none fused (the GPU kernels compute the same bits).
BOOST_AUTO_TEST_CASE(complex_product_rounds_each_operation)
{
    volatile double ar = 0.1, ai = 0.7, br = 1.0 / 3.0, bi = 2.0 / 7.0; // volatile: no folding
    double a[2] = {ar, ai}, b[2] = {br, bi};
    double p1 = ar * br, p2 = ai * bi, p3 = ar * bi, p4 = ai * br;
    volatile double q1 = p1, q2 = p2, q3 = p3, q4 = p4; // each product rounded on its own
    BOOST_REQUIRE_EQUAL(llrdma_reduce_local(LLRDMA_OP_PROD, LLRDMA_DT_DOUBLE_COMPLEX, a, b, 1), 0);
    BOOST_CHECK_EQUAL(b[0], q1 - q2);
    BOOST_CHECK_EQUAL(b[1], q3 + q4);
}

BOOST_AUTO_TEST_CASE(bool_and_byte)
{
    uint8_t a[] = {0, 0, 1, 1}, b[] = {0, 1, 0, 1};
    uint8_t land[] = {0, 0, 0, 1}, lor[] = {0, 1, 1, 1}, lxor[] = {0, 1, 1, 0};
    for (int op : {LLRDMA_OP_LAND, LLRDMA_OP_LOR, LLRDMA_OP_LXOR}) {
        uint8_t r[4];
        std::memcpy(r, b, 4);
        BOOST_REQUIRE_EQUAL(llrdma_reduce_local(op, LLRDMA_DT_BOOL, a, r, 4), 0);
        const uint8_t *want = op == LLRDMA_OP_LAND ? land : op == LLRDMA_OP_LOR ? lor : lxor;
        BOOST_CHECK_EQUAL_COLLECTIONS(r, r + 4, want, want + 4);
    }
    uint8_t x = 0xF0, y = 0x3C;
    llrdma_reduce_local(LLRDMA_OP_BXOR, LLRDMA_DT_BYTE, &x, &y, 1);
    BOOST_CHECK_EQUAL(+y, 0xCC);
}

BOOST_AUTO_TEST_CASE(unaligned_and_empty)
{
    // MPI buffers need not be aligned for their type.
    alignas(8) unsigned char raw[1 + 3 * 8 + 1 + 3 * 8];
    unsigned char *pin = raw + 1, *pio = raw + 1 + 3 * 8 + 1;
    for (int i = 0; i < 3; ++i) {
        double a = i + 0.5, b = 10.0 * i;
        std::memcpy(pin + 8 * i, &a, 8);
        std::memcpy(pio + 8 * i, &b, 8);
    }
    BOOST_REQUIRE_EQUAL(llrdma_reduce_local(LLRDMA_OP_SUM, LLRDMA_DT_DOUBLE, pin, pio, 3), 0);
    for (int i = 0; i < 3; ++i) {
        double r;
        std::memcpy(&r, pio + 8 * i, 8);
        BOOST_CHECK_EQUAL(r, i + 0.5 + 10.0 * i);
    }
    BOOST_CHECK_EQUAL(llrdma_reduce_local(LLRDMA_OP_SUM, LLRDMA_DT_INT32, nullptr, nullptr, 0), 0);
    int v = 1;
    BOOST_CHECK_EQUAL(llrdma_reduce_local(LLRDMA_OP_SUM, LLRDMA_DT_INT32, nullptr, &v, 1),
                      LLRDMA_AR_ERR_INVALID);
}

// The kernels run vector loops over long arrays (AVX2 or SSE2, whichever
// clone the CPU gets) and scalar code over one element: both must give the
// same bits for every op and type, NaNs, signed zeros and ties included, so
// that the result does not depend on a rank's CPU or on where an element
// falls in a vector.  Types with padding bytes are left out (their padding
// is not a value).
BOOST_AUTO_TEST_CASE(long_vectors_match_element_by_element)
{
    const int padded[] = {LLRDMA_DT_DOUBLE_INT, LLRDMA_DT_LONG_INT, LLRDMA_DT_SHORT_INT};
    const size_t n = 67; // a vector body and a tail at any width up to 64 bytes
    uint64_t x = 0x9E3779B97F4A7C15ull;
    auto next = [&x]() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        return x;
    };
    int checked = 0;
    for (int dt = 0; dt < LLRDMA_DT_COUNT; ++dt) {
        if (std::find(std::begin(padded), std::end(padded), dt) != std::end(padded))
            continue;
        const size_t es = llrdma_ar_dtype_size(dt);
        for (int op = 0; op < LLRDMA_OP_COUNT; ++op) {
            if (!llrdma_ar_supported(dt, op))
                continue;
            // One byte off alignment on both sides, as user buffers may be.
            std::vector<unsigned char> in(n * es + 1), io(n * es + 1);
            for (auto &b : in)
                b = static_cast<unsigned char>(next());
            for (auto &b : io)
                b = static_cast<unsigned char>(next());
            if (dt == LLRDMA_DT_DOUBLE || dt == LLRDMA_DT_FLOAT) {
                // Ties, signed zeros, NaN on either side at scattered places.
                for (size_t i = 0; i < n; i += 5) {
                    unsigned char *a = &in[1 + i * es], *b = &io[1 + i * es];
                    double d[] = {0.0, -0.0, std::nan(""), 1.0};
                    float f[] = {0.0f, -0.0f, std::nanf(""), 1.0f};
                    int k = static_cast<int>(next() % 4), m = static_cast<int>(next() % 4);
                    if (dt == LLRDMA_DT_DOUBLE) {
                        std::memcpy(a, &d[k], es);
                        std::memcpy(b, &d[m], es);
                    } else {
                        std::memcpy(a, &f[k], es);
                        std::memcpy(b, &f[m], es);
                    }
                }
            }
            std::vector<unsigned char> vec = io, one = io;
            BOOST_TEST_CONTEXT("dtype " << dt << " op " << op)
            {
                BOOST_REQUIRE_EQUAL(llrdma_reduce_local(op, dt, &in[1], &vec[1], n), LLRDMA_AR_OK);
                for (size_t i = 0; i < n; ++i)
                    llrdma_reduce_local(op, dt, &in[1 + i * es], &one[1 + i * es], 1);
                BOOST_CHECK(vec == one);
            }
            ++checked;
        }
    }
    BOOST_CHECK_GE(checked, 100); // the matrix, not a handful
}
