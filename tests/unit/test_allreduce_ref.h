// test_allreduce_ref.h -- inputs and reference results for the Allreduce
// simulations (test_allreduce_sim.cc, test_allreduce_sim_hier.cc): generated
// inputs for every op x datatype, the documented reduction orders computed
// sequentially with llrdma_reduce_local, and bitwise / tolerant comparison.
#ifndef TEST_ALLREDUCE_REF_H
#define TEST_ALLREDUCE_REF_H

#include "llrdma_allreduce.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

namespace simref
{

using Bytes = std::vector<unsigned char>;

struct Combo {
    int dt, op;
};

inline std::vector<Combo> all_combos()
{
    std::vector<Combo> v;
    for (int dt = 0; dt < LLRDMA_DT_COUNT; ++dt)
        for (int op = 0; op < LLRDMA_OP_COUNT; ++op)
            if (llrdma_ar_supported(dt, op))
                v.push_back({dt, op});
    return v;
}

inline uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

template <typename V, typename K = int> struct Pair {
    V v;
    K k;
};

template <typename T> struct Cplx {
    T re, im;
};

inline bool is_complex(int dt)
{
    return dt == LLRDMA_DT_FLOAT_COMPLEX || dt == LLRDMA_DT_DOUBLE_COMPLEX;
}

// Floating point: compared with a tolerance against the sequential order.
inline bool is_float(int dt)
{
    return dt == LLRDMA_DT_FLOAT || dt == LLRDMA_DT_DOUBLE || is_complex(dt);
}

template <typename T> inline void put(unsigned char *dst, T v)
{
    std::memcpy(dst, &v, sizeof v);
}

// Integer inputs chosen so each op is non-trivial: products of small factors
// (that still wrap for narrow types), logical inputs mostly 1 for land and
// mostly 0 for lor, full-range values otherwise.
template <typename T> inline T int_value(int op, uint64_t h, int p)
{
    bool rare = h % static_cast<uint64_t>(p + 1) == 0;
    switch (op) {
    case LLRDMA_OP_PROD: {
        T f = static_cast<T>(1 + (h >> 5) % 3);
        return (std::is_signed<T>::value && (h & 8)) ? static_cast<T>(0 - f) : f;
    }
    case LLRDMA_OP_LAND:
        return rare ? T(0) : static_cast<T>(h | 1);
    case LLRDMA_OP_LOR:
        return rare ? static_cast<T>(h | 1) : T(0);
    case LLRDMA_OP_LXOR:
        return (h & 2) ? static_cast<T>(h | 1) : T(0);
    default:
        return static_cast<T>(h);
    }
}

template <typename F> inline F float_value(int op, uint64_t h)
{
    if (op == LLRDMA_OP_SUM || op == LLRDMA_OP_PROD)
        return static_cast<F>(0.5 + static_cast<double>(h % 100003) / 100003.0);
    if (h % 7 == 0) // signed zeros: ties whose winner shows in the bits
        return (h >> 3) & 1 ? F(-0.0) : F(0.0);
    return static_cast<F>((static_cast<double>(h % 2001) - 1000.0) / 8.0);
}

template <typename V, typename K = int> inline void put_pair(unsigned char *dst, uint64_t h)
{
    Pair<V, K> x;
    std::memset(&x, 0, sizeof x);
    x.v = static_cast<V>(static_cast<int>(h % 4) - 2); // many ties
    x.k = static_cast<K>((h >> 8) % 50);
    std::memcpy(dst, &x, sizeof x);
}

template <typename T> inline void put_complex(unsigned char *dst, int op, uint64_t h)
{
    Cplx<T> z{float_value<T>(op, h), float_value<T>(op, mix(h))};
    if (op == LLRDMA_OP_PROD && (h & 16)) // rotations too, so parts cancel
        z = {static_cast<T>(-z.im), z.re};
    std::memcpy(dst, &z, sizeof z);
}

inline void gen(const Combo &c, uint64_t seed, int r, int p, size_t i, unsigned char *d)
{
    uint64_t h = mix(seed ^ mix((static_cast<uint64_t>(r) << 40) + i));
    int op = c.op;
    switch (c.dt) {
    case LLRDMA_DT_INT8:
        return put(d, int_value<int8_t>(op, h, p));
    case LLRDMA_DT_INT16:
        return put(d, int_value<int16_t>(op, h, p));
    case LLRDMA_DT_INT32:
        return put(d, int_value<int32_t>(op, h, p));
    case LLRDMA_DT_INT64:
        return put(d, int_value<int64_t>(op, h, p));
    case LLRDMA_DT_UINT8:
    case LLRDMA_DT_BYTE:
        return put(d, int_value<uint8_t>(op, h, p));
    case LLRDMA_DT_UINT16:
        return put(d, int_value<uint16_t>(op, h, p));
    case LLRDMA_DT_UINT32:
        return put(d, int_value<uint32_t>(op, h, p));
    case LLRDMA_DT_UINT64:
        return put(d, int_value<uint64_t>(op, h, p));
    case LLRDMA_DT_BOOL:
        return put(d, static_cast<uint8_t>(int_value<uint8_t>(op, h, p) != 0));
    case LLRDMA_DT_FLOAT:
        return put(d, float_value<float>(op, h));
    case LLRDMA_DT_DOUBLE:
        return put(d, float_value<double>(op, h));
    case LLRDMA_DT_FLOAT_INT:
        return put_pair<float>(d, h);
    case LLRDMA_DT_DOUBLE_INT:
        return put_pair<double>(d, h);
    case LLRDMA_DT_LONG_INT:
        return put_pair<long>(d, h);
    case LLRDMA_DT_2INT:
        return put_pair<int>(d, h);
    case LLRDMA_DT_SHORT_INT:
        return put_pair<short>(d, h);
    case LLRDMA_DT_LOGICAL16: // any nonzero value is true
        return put(d, int_value<uint16_t>(op, h, p));
    case LLRDMA_DT_LOGICAL32:
        return put(d, int_value<uint32_t>(op, h, p));
    case LLRDMA_DT_LOGICAL64:
        return put(d, int_value<uint64_t>(op, h, p));
    case LLRDMA_DT_2FLOAT:
        return put_pair<float, float>(d, h);
    case LLRDMA_DT_2DOUBLE:
        return put_pair<double, double>(d, h);
    case LLRDMA_DT_2INT64:
        return put_pair<int64_t, int64_t>(d, h);
    case LLRDMA_DT_FLOAT_COMPLEX:
        return put_complex<float>(d, op, h);
    case LLRDMA_DT_DOUBLE_COMPLEX:
        return put_complex<double>(d, op, h);
    }
}

inline Bytes input(const Combo &c, uint64_t seed, int r, int p, size_t count)
{
    size_t es = llrdma_ar_dtype_size(c.dt);
    Bytes b(count * es);
    for (size_t i = 0; i < count; ++i)
        gen(c, seed, r, p, i, &b[i * es]);
    return b;
}

// acc = acc OP v over n elements from element offset `off` (acc is the left operand).
inline void fold_into(const Combo &c, Bytes &acc, const Bytes &v, size_t off, size_t n)
{
    size_t es = llrdma_ar_dtype_size(c.dt);
    Bytes tmp(v.begin() + off * es, v.begin() + (off + n) * es);
    llrdma_reduce_local(c.op, c.dt, acc.data() + off * es, tmp.data(), n);
    std::copy(tmp.begin(), tmp.end(), acc.begin() + off * es);
}

// Documented order of recursive doubling and Rabenseifner: fold pairs (2i, 2i+1)
// for i < rem, then the balanced tree over the p2 leaves in rank order.
inline Bytes tree_order(const Combo &c, const std::vector<Bytes> &in, size_t count)
{
    int p = static_cast<int>(in.size()), p2 = 1;
    while (p2 * 2 <= p)
        p2 *= 2;
    int rem = p - p2;
    std::vector<Bytes> leaf(p2);
    for (int i = 0; i < p2; ++i) {
        if (i < rem) {
            leaf[i] = in[2 * i];
            fold_into(c, leaf[i], in[2 * i + 1], 0, count);
        } else {
            leaf[i] = in[i + rem];
        }
    }
    for (int m = 1; m < p2; m *= 2)
        for (int i = 0; i < p2; i += 2 * m)
            fold_into(c, leaf[i], leaf[i + m], 0, count);
    return leaf[0];
}

// Documented order of the ring: block b is ((v[b] OP v[b+1]) ...) OP v[b-1].
inline Bytes ring_order(const Combo &c, const std::vector<Bytes> &in, size_t count)
{
    size_t p = in.size();
    Bytes out(in[0].size());
    size_t es = llrdma_ar_dtype_size(c.dt);
    for (size_t b = 0; b < p; ++b) {
        size_t q = count / p, r = count % p;
        size_t start = b * q + std::min(b, r), len = q + (b < r ? 1 : 0);
        Bytes acc = in[b];
        for (size_t j = 1; j < p; ++j)
            fold_into(c, acc, in[(b + j) % p], start, len);
        std::copy(acc.begin() + start * es, acc.begin() + (start + len) * es,
                  out.begin() + start * es);
    }
    return out;
}

inline Bytes sequential(const Combo &c, const std::vector<Bytes> &in, size_t count)
{
    Bytes acc = in[0];
    for (size_t r = 1; r < in.size(); ++r)
        fold_into(c, acc, in[r], 0, count);
    return acc;
}

// For pair types: bytes of the value, offset and bytes of the index; zeros
// otherwise.
struct PairLayout {
    size_t vb, koff, kb;
};
using Pair2F = Pair<float, float>;
using Pair2D = Pair<double, double>;
using Pair2L = Pair<int64_t, int64_t>;
inline PairLayout pair_layout(int dt)
{
    switch (dt) {
    case LLRDMA_DT_FLOAT_INT:
        return {sizeof(float), offsetof(Pair<float>, k), sizeof(int)};
    case LLRDMA_DT_DOUBLE_INT:
        return {sizeof(double), offsetof(Pair<double>, k), sizeof(int)};
    case LLRDMA_DT_LONG_INT:
        return {sizeof(long), offsetof(Pair<long>, k), sizeof(int)};
    case LLRDMA_DT_2INT:
        return {sizeof(int), offsetof(Pair<int>, k), sizeof(int)};
    case LLRDMA_DT_SHORT_INT:
        return {sizeof(short), offsetof(Pair<short>, k), sizeof(int)};
    case LLRDMA_DT_2FLOAT:
        return {sizeof(float), offsetof(Pair2F, k), sizeof(float)};
    case LLRDMA_DT_2DOUBLE:
        return {sizeof(double), offsetof(Pair2D, k), sizeof(double)};
    case LLRDMA_DT_2INT64:
        return {sizeof(int64_t), offsetof(Pair2L, k), sizeof(int64_t)};
    default:
        return {0, 0, 0};
    }
}

// Bitwise equality of one element; pair types compare v and k, not padding.
inline bool same(int dt, const unsigned char *a, const unsigned char *b)
{
    PairLayout l = pair_layout(dt);
    if (l.vb == 0)
        return std::memcmp(a, b, llrdma_ar_dtype_size(dt)) == 0;
    return std::memcmp(a, b, l.vb) == 0 && std::memcmp(a + l.koff, b + l.koff, l.kb) == 0;
}

// Floating point within a relative tolerance; complex numbers part by part,
// relative to the magnitude (parts may cancel).
inline bool close(int dt, const unsigned char *a, const unsigned char *b)
{
    double x[2] = {0, 0}, y[2] = {0, 0};
    bool single = dt == LLRDMA_DT_FLOAT || dt == LLRDMA_DT_FLOAT_COMPLEX;
    int parts = is_complex(dt) ? 2 : 1;
    for (int i = 0; i < parts; ++i) {
        if (single) {
            float fx, fy;
            std::memcpy(&fx, a + 4 * i, 4);
            std::memcpy(&fy, b + 4 * i, 4);
            x[i] = fx, y[i] = fy;
        } else {
            std::memcpy(&x[i], a + 8 * i, 8);
            std::memcpy(&y[i], b + 8 * i, 8);
        }
    }
    double tol = single ? 1e-5 : 1e-12, mag = std::max(1.0, std::fabs(y[0]) + std::fabs(y[1]));
    return std::fabs(x[0] - y[0]) <= tol * mag && std::fabs(x[1] - y[1]) <= tol * mag;
}

} // namespace simref

#endif
