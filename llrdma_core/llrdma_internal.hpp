// llrdma_internal.hpp -- helpers shared by the core's translation units.
//
// C++ only; never included by the C glue.  Everything here is pure (no I/O).
#ifndef LLRDMA_INTERNAL_HPP
#define LLRDMA_INTERNAL_HPP

#include "llrdma_core.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace llrdma
{

// Parse a size.  On failure `reason` is the bare reason ("unknown suffix 'X'"), without the
// offending text, so callers can prefix their own context.
int parse_size(std::string_view text, uint64_t max, uint64_t &out, std::string &reason);

// "16K", "2M", "1G" for exact multiples, plain decimal otherwise.
std::string format_size(uint64_t bytes);

// Blanks accepted around a size (and nowhere else but between number and suffix).
inline bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// Copy `s` into a C buffer, always NUL-terminated when len > 0.  Returns LLRDMA_OK, or
// LLRDMA_ERR_TRUNCATED when only a prefix fit.
inline int copy_out(const std::string &s, char *buf, size_t len)
{
    if (buf == nullptr || len == 0)
        return LLRDMA_ERR_TRUNCATED;
    size_t n = s.size() < len - 1 ? s.size() : len - 1;
    std::memcpy(buf, s.data(), n);
    buf[n] = '\0';
    return n == s.size() ? LLRDMA_OK : LLRDMA_ERR_TRUNCATED;
}

// Error text is best effort: a NULL or zero-length err buffer is allowed.
inline void set_err(char *err, size_t errlen, const std::string &msg)
{
    if (err != nullptr && errlen > 0)
        (void)copy_out(msg, err, errlen);
}

// Length of a C string stored in a fixed array that may lack its terminator.
inline size_t bounded_len(const char *s, size_t cap)
{
    const void *nul = std::memchr(s, '\0', cap);
    return nul ? static_cast<size_t>(static_cast<const char *>(nul) - s) : cap;
}

inline std::string from_fixed(const char *s, size_t cap)
{
    return std::string(s, bounded_len(s, cap));
}

// Inverse of llrdma_source_name(); false for an unknown name.
bool source_from_name(std::string_view name, llrdma_source_t &out);

} // namespace llrdma

#endif
