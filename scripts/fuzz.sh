#!/usr/bin/env bash
# Fuzzes llrouter on the stable toolchain with AFL++ (docs/fuzzing.md): installs what is missing
# (Debian's afl++), builds the targets of fuzz/ with AFL++'s instrumentation, runs each for SECS
# seconds on its committed corpus (fuzz/corpus/TARGET) and fails if any found a crash or a hang.
#
#   bash scripts/fuzz.sh                      # every target, SECS (default 20) seconds each
#   SECS=600 TARGETS="rules config" bash scripts/fuzz.sh
#
# Environment:
#   SECS            seconds of fuzzing per target (default 20)
#   TARGETS         targets to run (default: frame forward rules ctl config bpf_diff)
#   NICE            nice level of afl-fuzz and the targets (default 0; 19 beside other work)
#   TIMEOUT_MS      per-input time limit of afl-fuzz (default 1000)
#   KEEP            a directory to copy every target's AFL++ output into (queue, stats)
#   FUZZ_TARGET_DIR cargo target directory of the instrumented build (default fuzz/target/afl)
# bpf_diff needs root (it loads the XDP classifier): not root, it is skipped, except under CI
# (CI=true), where that is an error. A crash or hang is copied to fuzz/artifacts/TARGET/ and
# printed with its panic message and base64, so a CI log alone reproduces it.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
SECS=${SECS:-20}
TARGETS=${TARGETS:-frame forward rules ctl config bpf_diff}
NICE=${NICE:-0}
TIMEOUT_MS=${TIMEOUT_MS:-1000}
target_dir=${FUZZ_TARGET_DIR:-$repo/fuzz/target/afl}
case $SECS in '' | *[!0-9]* | 0) echo "fuzz: SECS must be a number of seconds (at least 1), not '$SECS'" >&2; exit 2 ;; esac

bash scripts/install-deps.sh --fuzz
export PATH="$HOME/.cargo/bin:$PATH"
afl_rt=/usr/lib/afl/afl-compiler-rt.o
for need in afl-fuzz "$afl_rt"; do
    if ! command -v "$need" >/dev/null 2>&1 && [ ! -e "$need" ]; then
        echo "fuzz: $need missing after installing afl++" >&2
        exit 1
    fi
done

work=$(mktemp -d -t llr-fuzz.XXXXXX)
pid=""
cleanup() {
    if [ -n "$pid" ]; then
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'echo "fuzz: interrupted" >&2; exit 130' INT TERM

# The instrumentation cargo-afl (afl.rs) uses on stable: SanitizerCoverage's trace-pc-guard
# edges (+ compare tracing), AFL++'s runtime linked in, debug assertions and overflow checks on.
# --target keeps RUSTFLAGS off build scripts and proc macros (built plainly, and faster).
host=$(rustc -vV | sed -n 's/^host: //p')
afl_flags="-C debug-assertions -C overflow-checks -C codegen-units=1 -C opt-level=3 \
-C target-cpu=native -C passes=sancov-module -C llvm-args=-sanitizer-coverage-level=3 \
-C llvm-args=-sanitizer-coverage-trace-pc-guard -C llvm-args=-sanitizer-coverage-prune-blocks=0 \
-C llvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -C link-arg=$afl_rt"
bins=()
for t in $TARGETS; do
    [ -d "fuzz/corpus/$t" ] || { echo "fuzz: unknown target '$t' (no fuzz/corpus/$t)" >&2; exit 2; }
    bins+=(--bin "$t")
done
echo "== fuzz: build ${TARGETS// /, } (AFL++ $(dpkg-query -W -f='${Version}' afl++), $(rustc --version))"
t0=$(date +%s)
RUSTFLAGS="$afl_flags ${RUSTFLAGS:-}" cargo build --quiet --release --manifest-path fuzz/Cargo.toml \
    --features afl --target "$host" --target-dir "$target_dir" "${bins[@]}"
echo "fuzz: built in $(($(date +%s) - t0)) s"
bindir=$target_dir/$host/release

afl_stat() { sed -n "s/^$1 *: *//p" "$2" 2>/dev/null | head -1; }

export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1 AFL_NO_AFFINITY=1 \
    AFL_FAST_CAL=1 AFL_NO_CRASH_README=1 AFL_IGNORE_UNKNOWN_ENVS=1
ran=0 crashes=0 hangs=0 failed=0
for t in $TARGETS; do
    if [ "$t" = bpf_diff ] && [ "$(id -u)" != 0 ]; then
        if [ "${CI:-}" = true ]; then
            echo "fuzz bpf_diff: needs root (loads the XDP classifier), and CI runs as root" >&2
            failed=$((failed + 1))
        else
            echo "fuzz bpf_diff: skipped (needs root: it loads the XDP classifier)"
        fi
        continue
    fi
    out=$work/$t
    dict=()
    [ -f "fuzz/dict/$t.dict" ] && dict=(-x "fuzz/dict/$t.dict")
    set +e
    # -V bounds the fuzzing; timeout bounds everything else (calibration, a stuck target).
    timeout --kill-after=10 $((SECS + 120)) nice -n "$NICE" afl-fuzz -i "fuzz/corpus/$t" -o "$out" \
        -V "$SECS" -t "$TIMEOUT_MS" -m none "${dict[@]}" -- "$bindir/$t" >"$work/$t.log" 2>&1 &
    pid=$!
    wait "$pid"
    rc=$?
    pid=""
    set -e
    stats=$out/default/fuzzer_stats
    if [ "$rc" != 0 ] || [ ! -f "$stats" ]; then
        echo "fuzz $t: afl-fuzz failed (exit $rc); the end of its log:" >&2
        sed 's/\x1b\[[0-9;?]*[a-zA-Z]//g' "$work/$t.log" | grep -v 'Fuzzing test case' | tail -20 >&2
        failed=$((failed + 1))
        continue
    fi
    ran=$((ran + 1))
    c=$(afl_stat saved_crashes "$stats") h=$(afl_stat saved_hangs "$stats")
    crashes=$((crashes + c)) hangs=$((hangs + h))
    printf 'fuzz %-8s %10s execs (%s/s) in %s s, corpus %s (%s new), edges %s (%s), %s crashes, %s hangs\n' \
        "$t" "$(afl_stat execs_done "$stats")" "$(afl_stat execs_per_sec "$stats" | cut -d. -f1)" \
        "$(afl_stat run_time "$stats")" "$(afl_stat corpus_count "$stats")" "$(afl_stat corpus_found "$stats")" \
        "$(afl_stat edges_found "$stats")" "$(afl_stat bitmap_cvg "$stats")" "$c" "$h"
    # Every crashing/hanging input is kept; the first three are shown with their panic.
    shown=0
    for kind in crash hang; do
        for f in "$out/default/${kind}s"/id:* "$out/default/${kind}es"/id:*; do
            [ -e "$f" ] || continue
            mkdir -p "fuzz/artifacts/$t"
            keep=fuzz/artifacts/$t/$kind-$(sha1sum "$f" | cut -c1-12)
            cp "$f" "$keep"
            shown=$((shown + 1))
            [ "$shown" -le 3 ] || continue
            echo "fuzz $t: $kind input: $keep" >&2
            echo "    reproduce: $bindir/$t < $keep" >&2
            # (…; true): the subshell, not this shell, reports the target's abort, into the file.
            (RUST_BACKTRACE=0 timeout 10 "$bindir/$t" <"$keep"; true) >"$work/replay" 2>&1
            grep -a -A2 'panicked at' "$work/replay" | grep -av '^note: run with' | head -2 |
                cut -c1-500 | sed 's/^/    /' >&2 || true
            if [ "$(wc -c <"$keep")" -le 4096 ]; then
                echo "    base64: $(base64 -w0 "$keep")" >&2
            fi
        done
    done
    if [ "$shown" -gt 3 ]; then
        echo "fuzz $t: $((shown - 3)) more crash/hang inputs in fuzz/artifacts/$t/" >&2
    fi
    if [ -n "${KEEP:-}" ]; then
        mkdir -p "$KEEP"
        rm -rf "${KEEP:?}/$t"
        cp -r "$out/default" "$KEEP/$t"
        cp "$work/$t.log" "$KEEP/$t/afl-fuzz.log"
    fi
done
echo "== fuzz: $ran targets ran, $crashes crashes, $hangs hangs (${SECS} s each)"
if [ "$failed" != 0 ]; then
    echo "fuzz: $failed targets could not run" >&2
    exit 1
fi
[ "$crashes" = 0 ] && [ "$hangs" = 0 ]
