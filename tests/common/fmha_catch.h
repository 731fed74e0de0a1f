// Catch2 v3 (preferred) or v2 (Debian bookworm ships 2.13), behind one set of
// names. FMHA_CATCH2_MAJOR comes from tests/CMakeLists.txt.
#pragma once
#include <string>

#if FMHA_CATCH2_MAJOR >= 3
#include <catch2/catch_test_macros.hpp>
#else
#include <catch2/catch.hpp>
#endif

namespace fmha_test {
// Counts tests skipped for want of a GPU; gpu_main.cpp turns a run in which
// every test skipped that way into exit code 77, which ctest shows as
// "Skipped" (SKIP_RETURN_CODE), so a skip is never reported as a pass.
void note_gpu_skip();
int gpu_skips();
// Counts every skip where Catch2 has no SKIP (v2): the mains then exit 77
// (ctest: "Skipped") instead of 0, as v3's SKIP does with its exit code 4.
void note_skip();
int skips();
}  // namespace fmha_test

// Skips the current test visibly: Catch2's SKIP where it exists (v3.3+),
// otherwise a warning, a count, and an early return.
#if FMHA_CATCH2_MAJOR >= 3 && defined(SKIP)
#define FMHA_SKIP(msg) SKIP(msg)
#else
#define FMHA_SKIP(msg)                 \
    do {                               \
        ::fmha_test::note_skip();      \
        WARN("SKIPPED: " << msg);      \
        return;                        \
    } while (0)
#endif

// First statement of every GPU test.
#define FMHA_REQUIRE_GPU()                                       \
    do {                                                         \
        std::string fmha_why_;                                   \
        if (!::fmha_test::gpu_available(&fmha_why_)) {           \
            ::fmha_test::note_gpu_skip();                        \
            FMHA_SKIP("no CUDA device: " << fmha_why_);          \
        }                                                        \
    } while (0)

// Status check that prints the library's message when it fails.
#define FMHA_REQUIRE_STATUS(expected, call)                                    \
    do {                                                                       \
        fmha_status fmha_st_ = (call);                                         \
        INFO(#call << " -> " << fmha_status_string(fmha_st_) << ": "          \
                   << fmha_last_error_message());                              \
        REQUIRE(fmha_status_string(fmha_st_) == std::string(fmha_status_string(expected))); \
    } while (0)
#define FMHA_CHECK_STATUS(expected, call)                                      \
    do {                                                                       \
        fmha_status fmha_st_ = (call);                                         \
        INFO(#call << " -> " << fmha_status_string(fmha_st_) << ": "          \
                   << fmha_last_error_message());                              \
        CHECK(fmha_status_string(fmha_st_) == std::string(fmha_status_string(expected))); \
    } while (0)
