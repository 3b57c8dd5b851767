// Public API (llrdma.h) without MPI: setter/getter, freeze, gradient helper.
#define BOOST_TEST_MODULE public_api
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "llrdma.h"
#include "llrdma_core.h"

namespace
{
struct Fresh {
    Fresh()
    {
        llrdma_state_reset_for_tests();
        unsetenv("OMPI_MCA_btl_llrdma_size_hint");
        unsetenv("RDMA_LOW_LATENCY_HINT");
    }
    ~Fresh() { llrdma_state_reset_for_tests(); }
};
} // namespace

BOOST_FIXTURE_TEST_CASE(unset_is_zero, Fresh)
{
    BOOST_TEST(llrdma_get_size_hint() == 0u);
}

BOOST_FIXTURE_TEST_CASE(setter_then_getter, Fresh)
{
    BOOST_TEST(llrdma_set_size_hint(16384) == LLRDMA_SUCCESS);
    BOOST_TEST(llrdma_get_size_hint() == 16384u);
    BOOST_TEST(get_low_latency_rdma_size_hint() == 16384u);
    BOOST_TEST(set_low_latency_rdma_size_hint(4096) == LLRDMA_SUCCESS);
    BOOST_TEST(llrdma_get_size_hint() == 4096u);
}

BOOST_FIXTURE_TEST_CASE(setter_zero_means_explicitly_none, Fresh)
{
    setenv("RDMA_LOW_LATENCY_HINT", "8192", 1);
    BOOST_TEST(llrdma_get_size_hint() == 8192u);
    BOOST_TEST(llrdma_set_size_hint(0) == LLRDMA_SUCCESS);
    BOOST_TEST(llrdma_get_size_hint() == 0u);
}

BOOST_FIXTURE_TEST_CASE(setter_above_max, Fresh)
{
    BOOST_TEST(llrdma_set_size_hint(LLRDMA_SIZE_HINT_MAX + 1) == LLRDMA_ERR_RANGE);
    BOOST_TEST(llrdma_set_size_hint(LLRDMA_SIZE_HINT_MAX) == LLRDMA_SUCCESS);
}

BOOST_FIXTURE_TEST_CASE(setter_refused_after_freeze, Fresh)
{
    BOOST_TEST(llrdma_set_size_hint(1024) == LLRDMA_SUCCESS);
    llrdma_state_freeze();
    BOOST_TEST(llrdma_set_size_hint(2048) == LLRDMA_ERR_FIXED);
    BOOST_TEST(set_low_latency_rdma_size_hint(2048) == LLRDMA_ERR_FIXED);
    BOOST_TEST(llrdma_get_size_hint() == 1024u);
    BOOST_TEST(std::string(llrdma_strerror(LLRDMA_ERR_FIXED)).find("fixed") != std::string::npos);
}

BOOST_FIXTURE_TEST_CASE(getter_reads_environment_before_init, Fresh)
{
    setenv("RDMA_LOW_LATENCY_HINT", "0x2000", 1);
    BOOST_TEST(llrdma_get_size_hint() == 8192u);
    setenv("OMPI_MCA_btl_llrdma_size_hint", "16K", 1);
    BOOST_TEST(llrdma_get_size_hint() == 16384u);
    setenv("OMPI_MCA_btl_llrdma_size_hint", "abc", 1);
    BOOST_TEST(llrdma_get_size_hint() == 0u); // invalid: 0 here, an error at MPI_Init
}

BOOST_FIXTURE_TEST_CASE(getter_after_publish_is_effective_value, Fresh)
{
    llrdma_rank_config_t cfg{};
    cfg.hint.bytes = 65536;
    cfg.hint.source = LLRDMA_SRC_ENV;
    llrdma_state_publish(&cfg);
    setenv("RDMA_LOW_LATENCY_HINT", "1", 1);
    BOOST_TEST(llrdma_get_size_hint() == 65536u);
    char buf[8192];
    BOOST_TEST(llrdma_effective_config_json(buf, sizeof(buf)) == LLRDMA_SUCCESS);
    BOOST_TEST(std::string(buf).find("\"size_hint\":65536") != std::string::npos);
    BOOST_TEST(llrdma_effective_config_json(buf, 8) == LLRDMA_ERR_TRUNCATED);
    BOOST_TEST(llrdma_effective_config_json(nullptr, 8) == LLRDMA_ERR_INVALID);
}

BOOST_FIXTURE_TEST_CASE(effective_config_needs_a_component, Fresh)
{
    char buf[256];
    BOOST_TEST(llrdma_effective_config_json(buf, sizeof(buf)) == LLRDMA_ERR_NOT_LOADED);
}

BOOST_AUTO_TEST_CASE(gradient_formula)
{
    BOOST_TEST(llrdma_hint_for_gradient(8u << 20, 8, 0.2) == 1258292u);
    BOOST_TEST(llrdma_hint_for_gradient(1000, 3, 0.0) == 334u);
    BOOST_TEST(llrdma_hint_for_gradient(1000, 0, 0.2) == 0u);
    BOOST_TEST(llrdma_hint_for_gradient(1000, -4, 0.2) == 0u);
    BOOST_TEST(llrdma_hint_for_gradient(1000, 4, -0.5) == 250u);
    BOOST_TEST(llrdma_hint_for_gradient(1000, 4, std::nan("")) == 250u);
    BOOST_TEST(llrdma_hint_for_gradient(1000, 4, std::numeric_limits<double>::infinity()) ==
               LLRDMA_SIZE_HINT_MAX);
    BOOST_TEST(llrdma_hint_for_gradient(std::numeric_limits<size_t>::max(), 1, 0.2) ==
               LLRDMA_SIZE_HINT_MAX);
    BOOST_TEST(llrdma_hint_for_gradient(0, 4, 0.2) == 0u);
}
