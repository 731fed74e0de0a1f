// main() for Catch2 v2 (v3 links Catch2::Catch2WithMain instead). A run in
// which a test skipped (FMHA_SKIP) and nothing failed exits 77, which ctest
// reports as "Skipped" (SKIP_RETURN_CODE), never "Passed".
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <atomic>

#include "fmha_catch.h"

namespace fmha_test {
namespace {
std::atomic<int> g_skips{0};
}
void note_skip() { ++g_skips; }
int skips() { return g_skips.load(); }
}  // namespace fmha_test

int main(int argc, char **argv) {
    const int rc = Catch::Session().run(argc, argv);
    return rc == 0 && fmha_test::skips() > 0 ? 77 : rc;
}
