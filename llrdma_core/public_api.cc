// Public API (include/llrdma.h) on top of the core's process-wide state.
#include "llrdma.h"
#include "llrdma_core.h"

#include <cstdlib>

// Weak: resolves to Open MPI's MPI_Initialized when the application links MPI,
// so the setter refuses after MPI_Init even if no llrdma component loaded.
extern "C" int MPI_Initialized(int *flag) __attribute__((weak));

static_assert(LLRDMA_ERR_FIXED == -3 && LLRDMA_ERR_RANGE == -2, "public and core codes agree");

namespace
{
bool mpi_initialized()
{
    int flag = 0;
    if (MPI_Initialized != nullptr && MPI_Initialized(&flag) == 0 && flag)
        return true;
    return llrdma_state_is_frozen() != 0;
}

} // namespace

extern "C" size_t llrdma_get_size_hint(void)
{
    llrdma_rank_config_t cfg;
    if (llrdma_state_get(&cfg) == LLRDMA_OK)
        return static_cast<size_t>(cfg.hint.bytes);
    // Before MPI_Init: the same resolution the components will run, from what
    // is visible now (API value, environment; files are read by MPI_Init).
    llrdma_hint_inputs_t in{};
    in.mca_name = "btl_llrdma_size_hint";
    in.mca_text = std::getenv("OMPI_MCA_btl_llrdma_size_hint");
    in.mca_source = in.mca_text != nullptr ? LLRDMA_SRC_ENV : LLRDMA_SRC_DEFAULT;
    in.alias_text = std::getenv("RDMA_LOW_LATENCY_HINT");
    llrdma_hint_t hint;
    if (llrdma_hint_resolve(&in, &hint, nullptr, 0) != LLRDMA_OK)
        return 0; // invalid text: MPI_Init will say why
    return static_cast<size_t>(hint.bytes);
}

extern "C" int llrdma_set_size_hint(size_t bytes)
{
    if (mpi_initialized())
        return LLRDMA_ERR_FIXED;
    return llrdma_state_set_api_hint(static_cast<uint64_t>(bytes));
}

extern "C" size_t get_low_latency_rdma_size_hint(void)
{
    return llrdma_get_size_hint();
}
extern "C" int set_low_latency_rdma_size_hint(size_t bytes)
{
    return llrdma_set_size_hint(bytes);
}

extern "C" size_t llrdma_hint_for_gradient(size_t grad_bytes, int ranks, double headroom)
{
    return static_cast<size_t>(llrdma_hint_for_gradient_u64(grad_bytes, ranks, headroom));
}

extern "C" int llrdma_effective_config_json(char *buf, size_t len)
{
    llrdma_rank_config_t cfg;
    if (buf == nullptr || len == 0)
        return LLRDMA_ERR_INVALID;
    if (llrdma_state_get(&cfg) != LLRDMA_OK)
        return LLRDMA_ERR_NOT_LOADED;
    return llrdma_config_to_json(&cfg, buf, len);
}

extern "C" const char *llrdma_strerror(int rc)
{
    switch (rc) {
    case LLRDMA_SUCCESS:
        return "success";
    case LLRDMA_ERR_INVALID:
        return "invalid argument";
    case LLRDMA_ERR_RANGE:
        return "size hint above the maximum (1G)";
    case LLRDMA_ERR_FIXED:
        return "the size hint is fixed once MPI is initialised";
    case LLRDMA_ERR_TRUNCATED:
        return "buffer too small";
    case LLRDMA_ERR_NOT_LOADED:
        return "no llrdma component initialised in this process";
    case LLRDMA_ERR_INTERNAL:
        return "internal error in llrdma (out of memory?)";
    default:
        return "unknown llrdma error";
    }
}
