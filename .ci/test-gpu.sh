#!/usr/bin/env bash
# Runs the libfmha test suite ON a GPU machine, from the repository root,
# with an already built build directory:
#
#   FMHA_BUILD_DIR=build OUT=/tmp/fmha-out .ci/test-gpu.sh
#
# Steps (FMHA_CI_STEPS selects a subset, in this order; default all):
#   ctest      every registered test but the bindings (CPU and GPU, default kernel)
#   portable   the GPU tests again with FMHA_TEST_KERNEL=portable
#   hopper     the GPU tests with FMHA_TEST_KERNEL=hopper (only on sm_90)
#   decode     the GPU tests with FMHA_TEST_KERNEL=decode
#   smem       the decode-forced serving suites with FMHA_SHARED_MEMORY_LIMIT
#              at 163 KB and 99 KB, so that the decode kernel's tiles for
#              devices with less shared memory per block run here too
#   memcheck   compute-sanitizer --tool memcheck on the [sanitize],
#              [serving-sanitize], [large-offsets] and [bad-lengths] subsets,
#              per kernel family
#   racecheck  compute-sanitizer --tool racecheck on the first two
#   demo       the fmha_demo program
#   pytest     the Python binding's GPU tests against torch SDPA
#   rust       the Rust binding's GPU tests (bindings/rust/tests/gpu.rs): with
#              cargo, or a test binary built elsewhere by
#              .ci/build-binding-gpu-tests.sh, named by FMHA_RUST_GPU_TEST
#   go         the Go binding's GPU tests (bindings/go/gpu_test.go): with go
#              and an install prefix (FMHA_PREFIX), or FMHA_GO_GPU_TEST
#   bench      tests/bench/bench_prefill.py (FMHA_BENCH_ARGS, default --quick)
#   bench-serving  tests/bench/bench_serving.py (FMHA_BENCH_SERVING_ARGS, default --quick)
#   bench-ceiling  tests/bench/bench_read_ceiling.py (FMHA_BENCH_CEILING_ARGS, default
#              --quick; skipped where Python has no Triton)
# Logs go to ${OUT:-/tmp/fmha-out}/ (one file per step). A compact summary is
# printed at the end; the exit status is non-zero if any step failed.
# A GPU test binary that finds no GPU counts as a failure here unless
# FMHA_ALLOW_NO_GPU=1 (this script is meant for machines with one). A step
# that ran zero cases (a sanitizer subset, the sweep, ctest, pytest) fails.
#
# Random inputs: every run picks a fresh base seed FMHA_TEST_SEED (read by the
# C++ tests, tests/support/random.cpp, and the Python tests, seeds.py) unless
# it is set; it is printed first and in the summary. To repeat a run:
#   FMHA_TEST_SEED=N .ci/test-gpu.sh
set -u

build=${FMHA_BUILD_DIR:-build}
out=${OUT:-/tmp/fmha-out}
steps=${FMHA_CI_STEPS:-ctest portable hopper decode smem memcheck racecheck demo pytest rust go bench bench-serving bench-ceiling}
gpu_bin="$build/tests/fmha_test_gpu"
demo_bin="$build/fmha_demo"
mkdir -p "$out"

# The base seed: decimal (or 0x hex) as strtoull(s, NULL, 0) reads it in the
# C++ tests; fresh ones are 32-bit decimals (also fine for torch.manual_seed).
if [ -z "${FMHA_TEST_SEED:-}" ]; then
    FMHA_TEST_SEED=$(od -An -N4 -tu4 /dev/urandom 2>/dev/null | tr -d ' \n')
    [ -n "$FMHA_TEST_SEED" ] || FMHA_TEST_SEED=$(( (RANDOM << 17) ^ (RANDOM << 8) ^ RANDOM ))
    seed_origin="fresh"
else
    seed_origin="given"
fi
if ! [[ "$FMHA_TEST_SEED" =~ ^(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)$ ]]; then
    echo "test-gpu.sh: FMHA_TEST_SEED='$FMHA_TEST_SEED' is not a decimal or 0x hex number" >&2
    exit 2
fi
export FMHA_TEST_SEED
echo "test-gpu.sh: FMHA_TEST_SEED=$FMHA_TEST_SEED ($seed_origin; repeat with FMHA_TEST_SEED=$FMHA_TEST_SEED .ci/test-gpu.sh)"
# The programs find libfmha.so through their RUNPATH; this also covers a build
# directory that was copied to another path.
export LD_LIBRARY_PATH="$(cd "$build" 2>/dev/null && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# Only the C++ steps run the GPU test program (the binding steps load the
# library alone).
needs_gpu_bin=0
for step in $steps; do
    case "$step" in ctest | portable | hopper | decode | memcheck | racecheck) needs_gpu_bin=1 ;; esac
done
if [ "$needs_gpu_bin" = 1 ] && [ ! -x "$gpu_bin" ]; then
    echo "test-gpu.sh: $gpu_bin not found: build first (cmake --build $build)" >&2
    exit 2
fi

declare -a summary
failed=0

record() {  # record STEP STATUS DETAIL
    summary+=("$(printf '%-10s %-5s %s' "$1" "$2" "$3")")
    [ "$2" = FAIL ] && failed=1
    return 0
}

# bench_step STEP TITLE SCRIPT ARGS PATTERN: runs tests/bench/SCRIPT ARGS
# against the build's library, logs to $out/STEP.log, and records the last
# line matching the regex PATTERN; the step fails on a non-zero exit.
bench_step() {
    local step=$1 title=$2 script=$3 args=$4 pattern=$5
    local log="$out/$step.log" rc detail
    echo "== $title ($args) -> $log"
    # $args is word-split on purpose: it holds the script's options.
    # shellcheck disable=SC2086
    FMHA_LIBRARY="$(cd "$build" && pwd)/libfmha.so" PYTHONPATH=bindings/python/src \
        python3 "tests/bench/$script" $args >"$log" 2>&1
    rc=$?
    detail=$(grep -E "$pattern" "$log" | tail -n 1)
    if [ "$rc" -eq 0 ]; then record "$step" PASS "${detail:-no line matching $pattern}"
    else record "$step" FAIL "exit $rc; ${detail:+$detail; }see $log"; fi
}

# "gpu sweep: N cases, worst error ratio R (case ...); F failed; ..." -> "N cases, worst ratio R, F failed"
sweep_line() {
    grep -h -o 'gpu sweep: [0-9]* cases, worst error ratio [^ ]* (case [^)]*); [0-9]* failed' "$1" |
        tail -n 1 |
        sed -E 's/gpu sweep: ([0-9]+) cases, worst error ratio ([^ ]+) \(case ([^)]*)\); ([0-9]+) failed/\1 cases, worst ratio \2 (\3), \4 failed/'
}

skipped_for_no_gpu() { grep -q 'no CUDA device' "$1"; }

# A GPU-test run: exit 0 passes; 77 means tests skipped, for want of a GPU
# (a failure here) or for another reason, such as the Hopper kernel's tests
# off sm_90 (a pass, said so).
judge_gpu_run() {  # judge_gpu_run STEP RC LOG
    local step=$1 rc=$2 log=$3 detail
    detail=$(sweep_line "$log")
    if { [ "$rc" -eq 77 ] || [ "$rc" -eq 0 ]; } && skipped_for_no_gpu "$log"; then
        if [ "${FMHA_ALLOW_NO_GPU:-0}" = 1 ]; then record "$step" SKIP "no GPU (see $log)"
        else record "$step" FAIL "no GPU found by the tests (see $log)"; fi
    elif { [ "$rc" -eq 77 ] || [ "$rc" -eq 0 ]; } && [ "${detail%% cases*}" = 0 ]; then
        record "$step" FAIL "gpu sweep ran 0 cases; see $log"
    elif [ "$rc" -eq 77 ]; then
        record "$step" PASS "${detail:-ok}; some tests skipped (SKIPPED in $log)"
    elif [ "$rc" -eq 0 ]; then
        record "$step" PASS "${detail:-ok}"
    else
        record "$step" FAIL "exit $rc; ${detail:+$detail; }see $log"
    fi
}

device_sm() {
    local sm=""
    if command -v nvidia-smi >/dev/null 2>&1; then
        sm=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .')
    fi
    if [ -z "$sm" ]; then
        sm=$("$gpu_bin" "device selection and the driver" 2>/dev/null |
            sed -n 's/^device: sm_\([0-9]*\),.*/\1/p' | head -n 1)
    fi
    echo "$sm"
}

sanitizer=""
if command -v compute-sanitizer >/dev/null 2>&1; then
    sanitizer=$(command -v compute-sanitizer)
else
    for c in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
        if [ -x "$c" ]; then sanitizer=$c; break; fi
    done
fi

sm=$(device_sm)
echo "test-gpu.sh: build dir $build, logs in $out, device sm_${sm:-unknown}, steps: $steps"

for step in $steps; do
    case "$step" in
    ctest)
        log="$out/ctest.log"
        echo "== ctest (all tests) -> $log"
        # The binding suites need toolchains (cargo, go) a GPU machine may lack;
        # CI runs them. Their GPU halves are the pytest step.
        ctest --test-dir "$build" -V --output-on-failure -LE bindings >"$log" 2>&1
        rc=$?
        totals=$(grep -E '^[0-9]+% tests passed' "$log" | tail -n 1)
        ran=$(printf '%s\n' "$totals" | sed -n -E 's/.* out of ([0-9]+).*/\1/p')
        skipped=$(grep -c -- '\*\*\*Skipped' "$log")
        detail="${totals:-no ctest summary}; $skipped skipped; $(sweep_line "$log")"
        if [ "$rc" -ne 0 ]; then record ctest FAIL "$detail"
        elif [ "${ran:-0}" -eq 0 ]; then record ctest FAIL "ran 0 tests (${totals:-no ctest summary}); see $log"
        elif grep -q -- 'gpu.*\*\*\*Skipped' "$log" && skipped_for_no_gpu "$log" &&
            [ "${FMHA_ALLOW_NO_GPU:-0}" != 1 ]; then
            # (Tests of the Hopper kernel skip off sm_90; that is no failure.)
            record ctest FAIL "GPU tests found no GPU on a GPU machine; $detail"
        else record ctest PASS "$detail"; fi
        ;;
    portable | hopper | decode)
        log="$out/gpu-$step.log"
        if [ "$step" = hopper ] && [ "$sm" != 90 ]; then
            record hopper SKIP "device is sm_${sm:-unknown}, the Hopper kernel needs sm_90"
            continue
        fi
        echo "== GPU tests, FMHA_TEST_KERNEL=$step -> $log"
        FMHA_TEST_KERNEL=$step "$gpu_bin" >"$log" 2>&1
        judge_gpu_run "$step" $? "$log"
        ;;
    smem)
        # sm_80/87 (166912 bytes per block) and sm_86/89/120 (101376): the
        # compact hd256/hd512 tiles and the narrow hd128 one must each run.
        log="$out/gpu-smem.log"
        : >"$log"
        echo "== decode-forced serving suites under FMHA_SHARED_MEMORY_LIMIT -> $log"
        worst=0
        for limit in 166912 101376; do
            echo "---- FMHA_SHARED_MEMORY_LIMIT=$limit" >>"$log"
            FMHA_SHARED_MEMORY_LIMIT=$limit FMHA_TEST_KERNEL=decode "$gpu_bin" \
                "[decode],[paged],[split],[features]" >>"$log" 2>&1
            rc=$?
            echo "---- exit $rc" >>"$log"
            if [ "$rc" -ne 0 ] && { [ "$worst" -eq 0 ] || [ "$worst" -eq 77 ]; }; then worst=$rc; fi
        done
        missing=""
        for k in fmha_decode_compact_bf16_hd256 fmha_decode_compact_fp16_hd512 \
                 fmha_decode_paged_compact_bf16_hd512 fmha_decode_narrow; do
            grep -q "kernel $k" "$log" || missing+=" $k"
        done
        if [ "$worst" -eq 77 ] && skipped_for_no_gpu "$log" && [ "${FMHA_ALLOW_NO_GPU:-0}" = 1 ]; then
            record smem SKIP "no GPU"
        elif [ "$worst" -ne 0 ] && [ "$worst" -ne 77 ]; then
            record smem FAIL "exit $worst; see $log"
        elif [ -n "$missing" ]; then
            record smem FAIL "these tiles never ran:$missing; see $log"
        else
            record smem PASS "$(grep -c 'kernel fmha_decode_[a-z_]*compact\|kernel fmha_decode_narrow' "$log") suite-kernel lines of the smaller tiles"
        fi
        ;;
    memcheck | racecheck)
        log="$out/sanitizer-$step.log"
        if [ -z "$sanitizer" ]; then
            record "$step" SKIP "compute-sanitizer not on PATH"
            continue
        fi
        # memcheck also runs the tensors placed hundreds of GiB apart and the
        # broken length arrays (their shared-memory use is the other subsets',
        # so racecheck skips them).
        subsets="[sanitize],[serving-sanitize]"
        [ "$step" = memcheck ] && subsets+=",[large-offsets],[bad-lengths]"
        echo "== compute-sanitizer --tool $step, $subsets -> $log"
        : >"$log"
        kernels="portable decode"
        [ "$sm" = 90 ] && kernels="portable decode hopper"
        worst=0
        for k in $kernels; do
            echo "---- FMHA_TEST_KERNEL=$k" >>"$log"
            FMHA_TEST_KERNEL=$k "$sanitizer" --tool "$step" --error-exitcode 99 \
                "$gpu_bin" "$subsets" >>"$log" 2>&1
            rc=$?
            echo "---- exit $rc" >>"$log"
            # The first failure stands; a later 77 (no GPU) must not hide it.
            if [ "$rc" -ne 0 ] && { [ "$worst" -eq 0 ] || [ "$worst" -eq 77 ]; }; then worst=$rc; fi
        done
        errors=$(grep -h -E '(ERROR SUMMARY|RACECHECK SUMMARY)' "$log" | tr '\n' ' ')
        # Each kernel's run must report cases from both subsets: "sanitize
        # subset: N cases, ..." and "serving sanitize: N cases, R runs: ...".
        # A missing line or a 0 means the sanitizer checked nothing there.
        counts="" zero=""
        for k in $kernels; do
            section=$(sed -n "/^---- FMHA_TEST_KERNEL=$k\$/,/^---- exit /p" "$log")
            dense=$(printf '%s\n' "$section" | grep -o 'sanitize subset: [0-9]* cases' | tail -n 1 | tr -dc '0-9')
            serving=$(printf '%s\n' "$section" | grep -o 'serving sanitize: [0-9]* cases, [0-9]* runs' | tail -n 1)
            serving_cases=$(printf '%s\n' "$serving" | sed -n -E 's/.*: ([0-9]+) cases.*/\1/p')
            serving_runs=$(printf '%s\n' "$serving" | sed -n -E 's/.* ([0-9]+) runs$/\1/p')
            counts+="$k ${dense:-?}+${serving_cases:-?} cases; "
            [ "${dense:-0}" -gt 0 ] || zero+=" $k: [sanitize] ran ${dense:-no} cases;"
            if [ "$step" = memcheck ]; then
                far=$(printf '%s\n' "$section" | grep -o 'large offsets: [0-9]* cases, [0-9]* runs' | tail -n 1)
                far_runs=$(printf '%s\n' "$far" | sed -n -E 's/.* ([0-9]+) runs$/\1/p')
                bad_runs=$(printf '%s\n' "$section" | grep -o 'bad lengths: [0-9]* runs' | tail -n 1 | tr -dc '0-9')
                counts+="$k ${far_runs:-?} large-offset and ${bad_runs:-?} bad-length runs; "
                [ "${far_runs:-0}" -gt 0 ] || zero+=" $k: [large-offsets] ran ${far_runs:-no} runs;"
                [ "${bad_runs:-0}" -gt 0 ] || zero+=" $k: [bad-lengths] ran ${bad_runs:-no} runs;"
            fi
            if [ "${serving_cases:-0}" -eq 0 ] || [ "${serving_runs:-0}" -eq 0 ]; then
                zero+=" $k: [serving-sanitize] ran ${serving_cases:-no} cases, ${serving_runs:-no} runs;"
            fi
        done
        if [ "$worst" -eq 77 ] && [ "${FMHA_ALLOW_NO_GPU:-0}" = 1 ]; then
            record "$step" SKIP "no GPU"
        elif [ "$worst" -ne 0 ]; then
            record "$step" FAIL "exit $worst; ${counts}${errors}see $log"
        elif [ -n "$zero" ]; then
            record "$step" FAIL "0 cases checked:${zero} see $log"
        else
            record "$step" PASS "${counts}${errors:-no summary line}"
        fi
        ;;
    demo)
        log="$out/demo.log"
        if [ ! -x "$demo_bin" ]; then
            record demo FAIL "$demo_bin not built"
            continue
        fi
        echo "== fmha_demo -> $log"
        "$demo_bin" >"$log" 2>&1
        rc=$?
        if [ "$rc" -ne 0 ]; then record demo FAIL "exit $rc; see $log"
        elif grep -q 'nothing to run' "$log"; then
            if [ "${FMHA_ALLOW_NO_GPU:-0}" = 1 ]; then record demo SKIP "no GPU"
            else record demo FAIL "no GPU found by the demo"; fi
        else
            record demo PASS "$(grep -E 'TFLOP/s' "$log" | sed -E 's/.* (non-causal|causal) +kernel ([^ ]+) .*max err ([^ ]+) .*\| ([0-9.]+ TFLOP\/s).*/\1 \2 err \3 \4/' | tr '\n' ';')"
        fi
        ;;
    pytest)
        # The Python binding's GPU tests against torch SDPA (needs torch there).
        log="$out/pytest.log"
        echo "== Python GPU tests -> $log"
        FMHA_LIBRARY="$(cd "$build" && pwd)/libfmha.so" PYTHONPATH=bindings/python/src \
            python3 -m pytest bindings/python/tests \
            -q -m gpu -p no:cacheprovider >"$log" 2>&1
        rc=$?
        detail=$(grep -E '^[0-9]+ (passed|failed|skipped|deselected|errors?)\b|^no tests ran' "$log" | tail -n 1)
        passed=$(printf '%s\n' "$detail" | grep -o -E '[0-9]+ passed' | tr -dc '0-9')
        seed_line=$(grep -h -o 'FMHA_TEST_SEED=[^ ]* (from' "$log" | head -n 1 | sed 's/ (from//')
        if [ "$rc" -eq 0 ] && [ "${passed:-0}" -gt 0 ]; then record pytest PASS "$detail${seed_line:+; $seed_line}"
        elif [ "$rc" -eq 0 ]; then record pytest FAIL "ran 0 tests (${detail:-no pytest summary}); see $log"
        else record pytest FAIL "exit $rc; ${detail:+$detail; }see $log"; fi
        ;;
    rust)
        # The Rust binding's GPU tests are #[ignore]d in plain cargo test (CI
        # has no GPU); here they run with --ignored. A binary built on another
        # machine (.ci/build-binding-gpu-tests.sh) serves where cargo is absent.
        log="$out/rust.log"
        if [ -n "${FMHA_RUST_GPU_TEST:-}" ]; then
            echo "== Rust GPU tests ($FMHA_RUST_GPU_TEST) -> $log"
            "$FMHA_RUST_GPU_TEST" --ignored --test-threads=1 --nocapture >"$log" 2>&1
            rc=$?
        elif command -v cargo >/dev/null 2>&1; then
            echo "== Rust GPU tests (cargo) -> $log"
            (lib_dir=$(cd "$build" && pwd) && include_dir=$PWD/include && cd bindings/rust &&
                FMHA_LIB_DIR="$lib_dir" FMHA_INCLUDE_DIR="$include_dir" \
                cargo test --offline --locked --test gpu -- --ignored --test-threads=1 --nocapture) >"$log" 2>&1
            rc=$?
        else
            record rust SKIP "no cargo and FMHA_RUST_GPU_TEST not set (.ci/build-binding-gpu-tests.sh builds one)"
            continue
        fi
        detail=$(grep -E '^test result:' "$log" | tail -n 1 | sed 's/; finished in.*//')
        passed=$(printf '%s\n' "$detail" | sed -n -E 's/.* ([0-9]+) passed.*/\1/p')
        seed_line=$(grep -h -o -m 1 'FMHA_TEST_SEED=[0-9xa-fA-F]*' "$log" | head -n 1)
        if [ "$rc" -eq 0 ] && [ "${passed:-0}" -gt 0 ]; then record rust PASS "$detail${seed_line:+; $seed_line}"
        elif [ "$rc" -eq 0 ]; then record rust FAIL "ran 0 GPU tests (${detail:-no summary}); see $log"
        else record rust FAIL "exit $rc; ${detail:+$detail; }see $log"; fi
        ;;
    go)
        # The Go binding's GPU tests skip unless FMHA_GPU_TESTS=1; here they
        # must run, so a SKIP line fails the step.
        log="$out/go.log"
        if [ -n "${FMHA_GO_GPU_TEST:-}" ]; then
            echo "== Go GPU tests ($FMHA_GO_GPU_TEST) -> $log"
            FMHA_GPU_TESTS=1 "$FMHA_GO_GPU_TEST" -test.run GPU -test.v -test.count=1 >"$log" 2>&1
            rc=$?
        elif command -v go >/dev/null 2>&1 && [ -n "${FMHA_PREFIX:-}" ]; then
            echo "== Go GPU tests (go test) -> $log"
            FMHA_GPU_TESTS=1 FMHA_BUILD_DIR="$build" GO_TEST_RUN=GPU \
                bash .ci/test-go.sh >"$log" 2>&1
            rc=$?
        else
            record go SKIP "no go with FMHA_PREFIX, and FMHA_GO_GPU_TEST not set (.ci/build-binding-gpu-tests.sh builds one)"
            continue
        fi
        passed=$(grep -c -E '^--- PASS: TestGPU[A-Za-z0-9]*\b' "$log")
        skipped=$(grep -c -E '^--- SKIP: TestGPU' "$log")
        failed_tests=$(grep -c -E '^--- FAIL: TestGPU' "$log")
        seed_line=$(grep -h -o -m 1 'FMHA_TEST_SEED=[0-9xa-fA-F]*' "$log" | head -n 1)
        detail="$passed GPU tests passed, $failed_tests failed, $skipped skipped${seed_line:+; $seed_line}"
        if [ "$rc" -eq 0 ] && [ "$passed" -gt 0 ] && [ "$skipped" -eq 0 ]; then record go PASS "$detail"
        else record go FAIL "exit $rc; $detail; see $log"; fi
        ;;
    bench)
        # The side-by-side benchmark (libfmha beside torch SDPA cuDNN and flash).
        bench_step bench benchmark bench_prefill.py "${FMHA_BENCH_ARGS:---quick}" '^median'
        ;;
    bench-serving)
        # Decode, paged, multi-token, hd512 and varlen beside cuDNN (or dense).
        bench_step bench-serving "serving benchmark" bench_serving.py \
            "${FMHA_BENCH_SERVING_ARGS:---quick}" '^bars met'
        ;;
    bench-ceiling)
        # The decode rows beside checked plain reads of their bytes (Triton reads).
        if ! python3 -c "import triton" >/dev/null 2>&1; then
            record bench-ceiling SKIP "python3 has no triton (the plain reads are Triton kernels)"
            continue
        fi
        bench_step bench-ceiling "read-ceiling benchmark" bench_read_ceiling.py \
            "${FMHA_BENCH_CEILING_ARGS:---quick}" '^failures'
        ;;
    *)
        record "$step" FAIL "unknown step (known: ctest portable hopper decode memcheck racecheck demo pytest rust go bench bench-serving bench-ceiling)"
        ;;
    esac
done

echo
echo "==== libfmha GPU test summary (device sm_${sm:-unknown}) ===="
for line in "${summary[@]}"; do echo "$line"; done
echo "seed: FMHA_TEST_SEED=$FMHA_TEST_SEED ($seed_origin); repeat: FMHA_TEST_SEED=$FMHA_TEST_SEED FMHA_CI_STEPS='$steps' .ci/test-gpu.sh"
if [ "$failed" -ne 0 ]; then
    echo "RESULT: FAIL (logs in $out)"
    exit 1
fi
echo "RESULT: PASS (logs in $out)"
exit 0
