// The paged kernels' key-index division (src/kernels/fast_divide.h): a wrong
// quotient would read a key from the wrong page, which only the numerical
// GPU tests could notice, and only for the page sizes they happen to use.
// Here every page size up to 2^16 and sampled larger ones are checked
// against integer division, at the edges of every quotient step.
#include <stdint.h>

#include <random>
#include <sstream>
#include <vector>

#include "fmha_catch.h"
#include "kernels/fast_divide.h"

namespace {

// Dividends that stress divisor d: around 0, around multiples of d (the
// quotient's steps) near the bottom and the top of the 31-bit range, and
// random ones.
std::vector<int32_t> dividends(int32_t d, std::mt19937 &rng) {
    std::vector<int32_t> n = {0, 1, 2, d - 1, d, 0x7fffffff, 0x7ffffffe};
    const int64_t top = (int64_t(0x7fffffff) / d) * d;
    for (int64_t m : {int64_t(d), 2 * int64_t(d), 3 * int64_t(d), 1000 * int64_t(d), top, top - d}) {
        for (int64_t delta : {-1, 0, 1}) {
            const int64_t v = m + delta;
            if (v >= 0 && v <= 0x7fffffff) n.push_back(static_cast<int32_t>(v));
        }
    }
    std::uniform_int_distribution<int32_t> any(0, 0x7fffffff);
    for (int i = 0; i < 16; ++i) n.push_back(any(rng));
    return n;
}

}  // namespace

TEST_CASE("fast division matches integer division for every page size", "[cpu][fast-divide]") {
    std::mt19937 rng(20261130);
    std::vector<int32_t> divisors;
    for (int32_t d = 1; d <= 65536; ++d) divisors.push_back(d);
    for (int shift = 17; shift <= 30; ++shift) {
        divisors.push_back(int32_t(1) << shift);
        divisors.push_back((int32_t(1) << shift) - 1);
        divisors.push_back((int32_t(1) << shift) + 1);
    }
    divisors.push_back(0x7fffffff);
    std::uniform_int_distribution<int32_t> large(65537, 0x7fffffff);
    for (int i = 0; i < 2000; ++i) divisors.push_back(large(rng));

    int64_t checked = 0, wrong = 0;
    std::ostringstream first;
    for (int32_t d : divisors) {
        const fmha::FastDivide f = fmha::make_fast_divide(d);
        for (int32_t n : dividends(d, rng)) {
            ++checked;
            const int got = fmha::fast_divide(n, f);
            if (got != n / d) {
                if (wrong++ == 0)
                    first << n << " / " << d << " gave " << got << ", not " << n / d
                          << " (magic " << f.magic << ", shift " << f.shift << ")";
            }
        }
    }
    INFO("checked " << checked << " quotients; first wrong: " << first.str());
    CHECK(checked > 65536 * 20);
    REQUIRE(wrong == 0);
}
