#define BOOST_TEST_MODULE test_state
#include <boost/test/unit_test.hpp>

#include "llrdma_core.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

namespace
{

struct Clean {
    Clean() { llrdma_state_reset_for_tests(); }
    ~Clean() { llrdma_state_reset_for_tests(); }
};

llrdma_rank_config_t config(int rank, uint64_t hint)
{
    llrdma_rank_config_t c;
    std::memset(&c, 0, sizeof c);
    c.rank = rank;
    c.hint.bytes = hint;
    c.hint.source = LLRDMA_SRC_ENV;
    std::snprintf(c.host, sizeof c.host, "host%d", rank);
    std::snprintf(c.btl_status, sizeof c.btl_status, "active");
    BOOST_TEST_REQUIRE(llrdma_profile_derive(hint, nullptr, &c.profile) == LLRDMA_OK);
    return c;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(state, Clean)

BOOST_AUTO_TEST_CASE(api_hint_set_get)
{
    uint64_t v = 99;
    BOOST_TEST(llrdma_state_get_api_hint(&v) == LLRDMA_ERR_NOT_FOUND);
    BOOST_TEST(v == 99u);
    BOOST_TEST(llrdma_state_set_api_hint(16384) == LLRDMA_OK);
    BOOST_TEST(llrdma_state_get_api_hint(&v) == LLRDMA_OK);
    BOOST_TEST(v == 16384u);
    BOOST_TEST(llrdma_state_set_api_hint(0) == LLRDMA_OK); // explicit "no hint" is a value
    BOOST_TEST(llrdma_state_get_api_hint(&v) == LLRDMA_OK);
    BOOST_TEST(v == 0u);
    BOOST_TEST(llrdma_state_get_api_hint(nullptr) == LLRDMA_ERR_INVALID);
}

BOOST_AUTO_TEST_CASE(api_hint_range)
{
    uint64_t v = 0;
    BOOST_TEST(llrdma_state_set_api_hint(LLRDMA_HINT_MAX) == LLRDMA_OK);
    BOOST_TEST(llrdma_state_set_api_hint(LLRDMA_HINT_MAX + 1) == LLRDMA_ERR_RANGE);
    BOOST_TEST(llrdma_state_set_api_hint(UINT64_MAX) == LLRDMA_ERR_RANGE);
    BOOST_TEST(llrdma_state_get_api_hint(&v) == LLRDMA_OK);
    BOOST_TEST(v == LLRDMA_HINT_MAX); // a refused value changes nothing
}

BOOST_AUTO_TEST_CASE(freeze_fixes_the_hint)
{
    BOOST_TEST(llrdma_state_is_frozen() == 0);
    BOOST_TEST(llrdma_state_set_api_hint(4096) == LLRDMA_OK);
    llrdma_state_freeze();
    BOOST_TEST(llrdma_state_is_frozen() == 1);
    BOOST_TEST(llrdma_state_set_api_hint(8192) == LLRDMA_ERR_FIXED);
    BOOST_TEST(llrdma_state_set_api_hint(LLRDMA_HINT_MAX + 1) == LLRDMA_ERR_FIXED);
    uint64_t v = 0;
    BOOST_TEST(llrdma_state_get_api_hint(&v) == LLRDMA_OK); // still readable
    BOOST_TEST(v == 4096u);
    llrdma_state_freeze(); // idempotent
    BOOST_TEST(llrdma_state_is_frozen() == 1);
}

BOOST_AUTO_TEST_CASE(publish_and_get)
{
    llrdma_rank_config_t got;
    BOOST_TEST(llrdma_state_get(&got) == LLRDMA_ERR_NOT_FOUND);
    BOOST_TEST(llrdma_state_get(nullptr) == LLRDMA_ERR_INVALID);
    llrdma_state_publish(nullptr); // ignored
    BOOST_TEST(llrdma_state_is_frozen() == 0);

    llrdma_rank_config_t c = config(2, 16384);
    llrdma_state_publish(&c);
    BOOST_TEST(llrdma_state_is_frozen() == 1); // the first publish freezes
    BOOST_TEST(llrdma_state_set_api_hint(1) == LLRDMA_ERR_FIXED);
    std::memset(&got, 0, sizeof got);
    BOOST_TEST(llrdma_state_get(&got) == LLRDMA_OK);
    BOOST_TEST(std::memcmp(&got, &c, sizeof c) == 0);

    // A copy is stored: later changes to the caller's struct do not leak in.
    c.rank = 99;
    BOOST_TEST(llrdma_state_get(&got) == LLRDMA_OK);
    BOOST_TEST(got.rank == 2);

    // A later publish (the coll component after the BTL) replaces the config.
    llrdma_rank_config_t c2 = config(2, 16384);
    std::snprintf(c2.btl_status, sizeof c2.btl_status, "active; coll too");
    llrdma_state_publish(&c2);
    BOOST_TEST(llrdma_state_get(&got) == LLRDMA_OK);
    BOOST_TEST(std::string(got.btl_status) == "active; coll too");
}

BOOST_AUTO_TEST_CASE(reset_clears_everything)
{
    BOOST_TEST(llrdma_state_set_api_hint(64) == LLRDMA_OK);
    llrdma_rank_config_t c = config(0, 64);
    llrdma_state_publish(&c);
    llrdma_state_reset_for_tests();
    uint64_t v;
    llrdma_rank_config_t got;
    BOOST_TEST(llrdma_state_is_frozen() == 0);
    BOOST_TEST(llrdma_state_get_api_hint(&v) == LLRDMA_ERR_NOT_FOUND);
    BOOST_TEST(llrdma_state_get(&got) == LLRDMA_ERR_NOT_FOUND);
    BOOST_TEST(llrdma_state_set_api_hint(128) == LLRDMA_OK);
}

// Setters racing a freeze: every set either happened before the freeze (OK) or was refused
// (FIXED); after the freeze the value never changes.  Readers never see a torn config.
BOOST_AUTO_TEST_CASE(concurrent_access)
{
    std::atomic<bool> stop{false};
    std::atomic<int> torn{0};
    std::vector<std::thread> threads;
    const llrdma_rank_config_t a = config(1, 4096), b = config(1, 65536);
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; !stop.load(); ++i) {
                int rc = llrdma_state_set_api_hint(static_cast<uint64_t>(t * 1000 + i % 1000));
                if (rc != LLRDMA_OK && rc != LLRDMA_ERR_FIXED)
                    torn.fetch_add(1);
                llrdma_state_publish((i & 1) ? &a : &b);
                llrdma_rank_config_t got;
                if (llrdma_state_get(&got) == LLRDMA_OK && std::memcmp(&got, &a, sizeof a) != 0 &&
                    std::memcmp(&got, &b, sizeof b) != 0)
                    torn.fetch_add(1);
            }
        });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    uint64_t frozen_value = 0;
    BOOST_TEST(llrdma_state_is_frozen() == 1); // publishes froze it
    BOOST_TEST(llrdma_state_get_api_hint(&frozen_value) == LLRDMA_OK);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    uint64_t later = 0;
    BOOST_TEST(llrdma_state_get_api_hint(&later) == LLRDMA_OK);
    BOOST_TEST(later == frozen_value);
    stop.store(true);
    for (std::thread &th : threads)
        th.join();
    BOOST_TEST(torn.load() == 0);
}

BOOST_AUTO_TEST_SUITE_END()
