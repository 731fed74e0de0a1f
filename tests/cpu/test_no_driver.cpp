// The no-driver path, everywhere (GPU or not): a forked child points
// FMHA_LIBCUDA at a file that does not exist before its first libfmha call,
// so the library's one-time driver load fails. This binary makes no libfmha
// call in the parent, so the child cannot inherit an already loaded driver.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "fmha/fmha.h"
#include "fmha_catch.h"

namespace {

// Child exit codes: 0 = all good, otherwise which check failed.
enum ChildResult {
    kOk = 0,
    kCreatePlanStatus = 10,
    kCreatePlanMessage,
    kCreatePlanNotNull,
    kDriverVersionStatus,
    kDriverVersionMessage,
    kCheckSupportCurrentStatus,
    kCheckSupportOffline,
    kLastErrorStatus,
    kSetup,
};

const char *describe(int code) {
    switch (code) {
    case kOk: return "ok";
    case kCreatePlanStatus: return "fmha_create_plan did not return FMHA_STATUS_NO_DRIVER";
    case kCreatePlanMessage: return "fmha_create_plan's message does not mention dlopen and the path";
    case kCreatePlanNotNull: return "fmha_create_plan left *plan non-NULL";
    case kDriverVersionStatus: return "fmha_driver_version did not return FMHA_STATUS_NO_DRIVER";
    case kDriverVersionMessage: return "fmha_driver_version's message does not mention dlopen";
    case kCheckSupportCurrentStatus:
        return "fmha_check_support(FMHA_SM_CURRENT_DEVICE) did not return FMHA_STATUS_NO_DRIVER";
    case kCheckSupportOffline: return "fmha_check_support(desc, 90) needed the driver";
    case kLastErrorStatus: return "fmha_last_error_status is not FMHA_STATUS_NO_DRIVER";
    case kSetup: return "setting up the descriptor failed";
    }
    return "unexpected exit code";
}

bool contains(const char *haystack, const char *needle) {
    return haystack != nullptr && std::strstr(haystack, needle) != nullptr;
}

// Runs in the child; never returns.
[[noreturn]] void child() {
    const char *path = "/nonexistent/libcuda.so.1";
    setenv("FMHA_LIBCUDA", path, 1);
    fmha_descriptor d;
    if (fmha_descriptor_init(&d, FMHA_DESCRIPTOR_VERSION) != FMHA_STATUS_SUCCESS) _exit(kSetup);
    d.batch = 1;
    d.num_q_heads = d.num_kv_heads = 4;
    d.seqlen_q = d.seqlen_k = 64;
    d.head_dim = 128;
    fmha_strides_bshd(&d.q_strides, 64, 4, 128);
    d.k_strides = d.v_strides = d.o_strides = d.q_strides;

    fmha_plan *plan = reinterpret_cast<fmha_plan *>(0x10);
    fmha_status st = fmha_create_plan(&plan, &d);
    std::fprintf(stderr, "child: fmha_create_plan -> %s: %s\n", fmha_status_string(st),
                 fmha_last_error_message());
    if (st != FMHA_STATUS_NO_DRIVER) _exit(kCreatePlanStatus);
    if (!contains(fmha_last_error_message(), "dlopen") ||
        !contains(fmha_last_error_message(), path))
        _exit(kCreatePlanMessage);
    if (fmha_last_error_status() != FMHA_STATUS_NO_DRIVER) _exit(kLastErrorStatus);
    if (plan != nullptr) _exit(kCreatePlanNotNull);

    int32_t version = -1;
    st = fmha_driver_version(&version);
    std::fprintf(stderr, "child: fmha_driver_version -> %s: %s\n", fmha_status_string(st),
                 fmha_last_error_message());
    if (st != FMHA_STATUS_NO_DRIVER) _exit(kDriverVersionStatus);
    if (!contains(fmha_last_error_message(), "dlopen")) _exit(kDriverVersionMessage);

    st = fmha_check_support(&d, FMHA_SM_CURRENT_DEVICE);
    if (st != FMHA_STATUS_NO_DRIVER) _exit(kCheckSupportCurrentStatus);
    // An explicit compute capability needs no driver at all.
    st = fmha_check_support(&d, 90);
    if (st != FMHA_STATUS_SUCCESS && st != FMHA_STATUS_NO_KERNEL_IMAGE) _exit(kCheckSupportOffline);
    _exit(kOk);
}

}  // namespace

TEST_CASE("no driver: FMHA_LIBCUDA pointing nowhere gives FMHA_STATUS_NO_DRIVER",
          "[cpu][no-driver]") {
    std::fflush(nullptr);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) child();
    int wstatus = 0;
    REQUIRE(waitpid(pid, &wstatus, 0) == pid);
    REQUIRE(WIFEXITED(wstatus));
    const int code = WEXITSTATUS(wstatus);
    INFO("child exit code " << code << ": " << describe(code));
    CHECK(code == kOk);
}
