// state.cc -- the process-wide hint state shared by the BTL and coll components.
//
// The hint must be fixed before any connection exists: a value changed after the BTL set up
// its queues would apply to new connections only, and ranks would silently run different
// profiles.  So the first publish (or an explicit freeze at MPI_Init) locks the API setter.
#include "llrdma_internal.hpp"

#include <mutex>

namespace llrdma
{
namespace
{

struct State {
    std::mutex mu;
    bool api_set = false;
    uint64_t api_bytes = 0;
    bool frozen = false;
    bool published = false;
    llrdma_rank_config_t config{};
};

// All members have constexpr initialisers (std::mutex included), so the compiler
// constant-initialises this: safe to use from other static constructors.
State g_state;

} // namespace
} // namespace llrdma

using llrdma::g_state;

// std::mutex::lock() may throw std::system_error in theory; the C API must not, so every
// entry point catches and reports LLRDMA_ERR_INTERNAL (or does nothing, for void ones).

extern "C" int llrdma_state_set_api_hint(uint64_t bytes)
{
    try {
        std::lock_guard<std::mutex> lock(g_state.mu);
        if (g_state.frozen)
            return LLRDMA_ERR_FIXED;
        if (bytes > LLRDMA_HINT_MAX)
            return LLRDMA_ERR_RANGE;
        // 0 is a legitimate API value: "this application wants the generic profile", and it
        // still beats the environment and files.
        g_state.api_set = true;
        g_state.api_bytes = bytes;
        return LLRDMA_OK;
    } catch (...) {
        return LLRDMA_ERR_INTERNAL;
    }
}

extern "C" int llrdma_state_get_api_hint(uint64_t *bytes)
{
    if (bytes == nullptr)
        return LLRDMA_ERR_INVALID;
    try {
        std::lock_guard<std::mutex> lock(g_state.mu);
        if (!g_state.api_set)
            return LLRDMA_ERR_NOT_FOUND;
        *bytes = g_state.api_bytes;
        return LLRDMA_OK;
    } catch (...) {
        return LLRDMA_ERR_INTERNAL;
    }
}

extern "C" void llrdma_state_freeze(void)
{
    try {
        std::lock_guard<std::mutex> lock(g_state.mu);
        g_state.frozen = true;
    } catch (...) {
    }
}

extern "C" int llrdma_state_is_frozen(void)
{
    try {
        std::lock_guard<std::mutex> lock(g_state.mu);
        return g_state.frozen ? 1 : 0;
    } catch (...) {
        return 1; // unknown: claim frozen so nobody changes the hint late
    }
}

extern "C" void llrdma_state_publish(const llrdma_rank_config_t *cfg)
{
    if (cfg == nullptr)
        return;
    try {
        std::lock_guard<std::mutex> lock(g_state.mu);
        g_state.config = *cfg;
        g_state.published = true;
        g_state.frozen = true; // what took effect can no longer change
    } catch (...) {
    }
}

extern "C" int llrdma_state_get(llrdma_rank_config_t *cfg)
{
    if (cfg == nullptr)
        return LLRDMA_ERR_INVALID;
    try {
        std::lock_guard<std::mutex> lock(g_state.mu);
        if (!g_state.published)
            return LLRDMA_ERR_NOT_FOUND;
        *cfg = g_state.config;
        return LLRDMA_OK;
    } catch (...) {
        return LLRDMA_ERR_INTERNAL;
    }
}

extern "C" void llrdma_state_reset_for_tests(void)
{
    try {
        std::lock_guard<std::mutex> lock(g_state.mu);
        g_state.api_set = false;
        g_state.api_bytes = 0;
        g_state.frozen = false;
        g_state.published = false;
        g_state.config = llrdma_rank_config_t{};
    } catch (...) {
    }
}
