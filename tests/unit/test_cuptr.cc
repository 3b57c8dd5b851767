// coll/llrdma's buffer classification (ompi_mca_coll_llrdma/coll_llrdma_cuptr.c)
// without a GPU: no libcuda (or one without the symbol) means host memory for
// every pointer, and the driver's answers map onto host / device / managed as
// docs/allreduce.md says (host-registered and cudaMallocHost memory stay on the
// host path; "not initialised" -- a process that never used CUDA -- is host).
#define BOOST_TEST_MODULE test_cuptr
#include <boost/test/unit_test.hpp>

#include "coll_llrdma_cuptr.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace
{

// Fake address ranges the fake driver knows about.
unsigned char g_dev[64], g_managed[64], g_registered[64], g_unified[64];
int g_calls = 0;
int g_result = 0; // CUresult to return

bool in(const unsigned char *base, unsigned long long p)
{
    auto b = reinterpret_cast<uintptr_t>(base);
    return p >= b && p < b + 64;
}

// Writes like the driver: 4-byte enum / int, 1-byte-or-more bool.
int fake_getattrs(unsigned int n, int *attrs, void **data, unsigned long long ptr)
{
    ++g_calls;
    if (g_result != 0)
        return g_result;
    for (unsigned i = 0; i < n; ++i) {
        uint32_t v = 0;
        switch (attrs[i]) {
        case 2: // MEMORY_TYPE
            v = in(g_dev, ptr) || in(g_managed, ptr) ? 2
                : in(g_registered, ptr)              ? 1
                : in(g_unified, ptr)                 ? 4
                                                     : 0;
            std::memcpy(data[i], &v, 4);
            break;
        case 8: { // IS_MANAGED
            unsigned char m = in(g_managed, ptr);
            std::memcpy(data[i], &m, 1);
            break;
        }
        case 9: // DEVICE_ORDINAL
            v = in(g_dev, ptr) ? 3 : in(g_managed, ptr) ? 0 : uint32_t(-1);
            std::memcpy(data[i], &v, 4);
            break;
        default:
            return 1; // CUDA_ERROR_INVALID_VALUE: an attribute we did not expect
        }
    }
    return 0;
}

} // namespace

BOOST_AUTO_TEST_CASE(no_libcuda_means_host)
{
    llrdma_cuptr_t d;
    llrdma_cuptr_open(&d, "libllrdma-test-no-such-libcuda.so.1");
    BOOST_CHECK(d.getattrs == nullptr);
    int stack = 0, dev = 7;
    void *heap = std::malloc(16);
    BOOST_CHECK_EQUAL(llrdma_cuptr_kind(&d, &stack, &dev), LLRDMA_MEM_HOST);
    BOOST_CHECK_EQUAL(dev, -1);
    BOOST_CHECK_EQUAL(llrdma_cuptr_kind(&d, heap, &dev), LLRDMA_MEM_HOST);
    BOOST_CHECK_EQUAL(llrdma_cuptr_kind(&d, nullptr, &dev), LLRDMA_MEM_HOST);
    std::free(heap);
    llrdma_cuptr_close(&d);
}

BOOST_AUTO_TEST_CASE(library_without_the_symbol_means_host)
{
    llrdma_cuptr_t d;
    llrdma_cuptr_open(&d, "libm.so.6");
    BOOST_CHECK(d.lib != nullptr);
    BOOST_CHECK(d.getattrs == nullptr);
    int x = 0, dev;
    BOOST_CHECK_EQUAL(llrdma_cuptr_kind(&d, &x, &dev), LLRDMA_MEM_HOST);
    llrdma_cuptr_close(&d);
}

BOOST_AUTO_TEST_CASE(system_libcuda_in_a_process_without_cuda)
{
    // Here: no libcuda.so.1 at all.  On a GPU machine: present, never
    // initialised by this process, so the driver says so.  Host either way.
    llrdma_cuptr_t d;
    llrdma_cuptr_open(&d, nullptr);
    BOOST_TEST_MESSAGE("libcuda.so.1 " << (d.lib ? "present" : "absent"));
    int x = 0, dev;
    void *heap = std::malloc(1 << 20);
    BOOST_CHECK_EQUAL(llrdma_cuptr_kind(&d, &x, &dev), LLRDMA_MEM_HOST);
    BOOST_CHECK_EQUAL(llrdma_cuptr_kind(&d, heap, &dev), LLRDMA_MEM_HOST);
    std::free(heap);
    llrdma_cuptr_close(&d);
}

BOOST_AUTO_TEST_CASE(driver_answers)
{
    llrdma_cuptr_t d;
    llrdma_cuptr_use(&d, fake_getattrs);
    int dev = 42, other = 0;
    BOOST_CHECK_EQUAL(llrdma_cuptr_kind(&d, g_dev + 5, &dev), LLRDMA_MEM_DEVICE);
    BOOST_CHECK_EQUAL(dev, 3);
    BOOST_CHECK_EQUAL(llrdma_cuptr_kind(&d, g_managed, &dev), LLRDMA_MEM_MANAGED);
    BOOST_CHECK_EQUAL(dev, -1); // managed: the caller's current device
    BOOST_CHECK_EQUAL(llrdma_cuptr_kind(&d, g_unified, &dev), LLRDMA_MEM_MANAGED);
    BOOST_CHECK_EQUAL(llrdma_cuptr_kind(&d, g_registered, &dev), LLRDMA_MEM_HOST);
    BOOST_CHECK_EQUAL(dev, -1);
    BOOST_CHECK_EQUAL(llrdma_cuptr_kind(&d, &other, &dev), LLRDMA_MEM_HOST);
    // Asked every time: nothing cached per pointer.
    int before = g_calls;
    llrdma_cuptr_kind(&d, g_dev, &dev);
    llrdma_cuptr_kind(&d, g_dev, &dev);
    BOOST_CHECK_EQUAL(g_calls - before, 2);
    BOOST_CHECK_EQUAL(llrdma_cuptr_kind(&d, nullptr, &dev), LLRDMA_MEM_HOST);
}

BOOST_AUTO_TEST_CASE(driver_errors_mean_host)
{
    llrdma_cuptr_t d;
    llrdma_cuptr_use(&d, fake_getattrs);
    int dev;
    for (int err : {3 /* NOT_INITIALIZED */, 4 /* DEINITIALIZED */, 1, 999}) {
        g_result = err;
        BOOST_CHECK_EQUAL(llrdma_cuptr_kind(&d, g_dev, &dev), LLRDMA_MEM_HOST);
        BOOST_CHECK_EQUAL(dev, -1);
    }
    g_result = 0;
}
