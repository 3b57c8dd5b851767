// hist_internal.hpp -- helpers shared by histogram.cc and advisor.cc (C++ only, pure).
#ifndef LLRDMA_HIST_INTERNAL_HPP
#define LLRDMA_HIST_INTERNAL_HPP

#include <cstdio>
#include <string>

namespace llrdma
{

// A JSON string literal: quotes, backslashes and control characters escaped, UTF-8 as is.
inline void put_json_string(std::string &o, const std::string &s)
{
    o += '"';
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            o += '\\';
            o += static_cast<char>(c);
        } else if (c < 0x20 || c == 0x7f) {
            char esc[8];
            std::snprintf(esc, sizeof esc, "\\u%04x", c);
            o += esc;
        } else {
            o += static_cast<char>(c);
        }
    }
    o += '"';
}

} // namespace llrdma

#endif
