#!/usr/bin/env bash
# test-engine.sh - the engine-only programs (core/meson.build's engine_dep): changelens-engine and
# test-cuda load none of the image, case-database, PACS, report or MPI libraries, and the engine
# works without them: it trains, reads PNG data sets, and refuses what it cannot do with a
# message. With BUNDLE=1 (the gpu-bundle test) it also builds tools/gpu-check.sh's bundle and
# checks that it and the tree fit what travels to a GPU machine.
# Usage: test-engine.sh ENGINE CLI TEST_CUDA
set -uo pipefail

if [ $# -ne 3 ]; then
    echo "usage: $0 ENGINE CLI TEST_CUDA" >&2
    exit 2
fi
engine=$1 cli=$2 tcuda=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
pass() { echo "ok: $*"; }
fail() {
    echo "FAIL: $*"
    failed=1
}

if [ "${BUNDLE:-0}" = 1 ]; then
    src=${CL_SOURCE_ROOT:?}
    if ! grep -q "CL_HAVE_CUDA 1" "${CL_BUILD_ROOT:?}/cl-config.h"; then
        echo "SKIP: this build has no CUDA"
        exit 77
    fi
    if ! git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        echo "SKIP: the source is not a git checkout (the tree is measured by git ls-files)"
        exit 77
    fi
    stem=${CHANGELENS_DATA:-${XDG_DATA_HOME:-$HOME/.local/share}/changelens}/pretrained/efficientnet-lite0.safetensors
    if [ ! -f "$stem" ]; then
        echo "SKIP: no pretrained EfficientNet-Lite0 (set-up fetches it): the bundle would lack it"
        exit 77
    fi
    out=$(CL_GPU_BUNDLE=$tmp/bundle bash "$src/tools/gpu-check.sh" bundle 2>&1)
    rc=$?
    printf '%s\n' "$out"
    if [ $rc -eq 0 ] && [ -f "$tmp/bundle/bundle.tar.xz" ]; then
        pass "the bundle and the tree fit what travels to a GPU machine"
    else
        fail "tools/gpu-check.sh bundle (exit $rc)"
    fi
    # what the GPU run unpacks: both programs and the stem, the stem's stride-16 blocks as set-up
    # fetched them and the tensors past them zero
    mkdir -p "$tmp/unpacked" && tar -C "$tmp/unpacked" -xJf "$tmp/bundle/bundle.tar.xz" || fail "unpack"
    for f in bin/changelens-engine bin/test-cuda data/pretrained/efficientnet-lite0.safetensors; do
        [ -f "$tmp/unpacked/$f" ] && pass "the bundle has $f" || fail "the bundle lacks $f"
    done
    if python3 - "$stem" "$tmp/unpacked/data/pretrained/efficientnet-lite0.safetensors" <<'PY'; then
import json, re, struct, sys
def tensors(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    return {k: data[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]
            for k, v in header.items() if k != "__metadata__"}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
keep = re.compile(r"^(_conv_stem\.|_bn0\.|_blocks\.([0-9]|10)\.)")
assert a.keys() == b.keys(), "other tensors"
for k in a:
    if keep.match(k):
        assert a[k] == b[k], k + " differs"
    else:
        assert b[k] == bytes(len(b[k])), k + " is not zero"
PY
        pass "the bundle's stem: blocks 0-10 as fetched, the rest zero"
    else
        fail "the bundle's stem"
    fi
    exit $failed
fi

# 1. what they load: none of the full programs' libraries (the same check sees them in the CLI)
forbidden='libgdal|libdcm|libofstd|libtiff|libgeotiff|libsqlite3|libpq\.|libmpi|libsoup|libopenjp2|libicu'
# (ldd's output read whole first: grep -q stops at the first match, and under pipefail the
# writer's SIGPIPE would read as no match)
cli_libs=$(ldd "$cli")
if grep -q -E "$forbidden" <<<"$cli_libs"; then
    pass "changelens-cli loads the full programs' libraries (the check sees them)"
else
    fail "changelens-cli: none of $forbidden (the check would see nothing)"
fi
for b in "$engine" "$tcuda"; do
    if bad=$(ldd "$b" | grep -E "$forbidden"); then
        fail "$(basename "$b") loads: $(echo "$bad" | awk '{ print $1 }' | tr '\n' ' ')"
    else
        pass "$(basename "$b") loads $(ldd "$b" | grep -c '=>') libraries, none of the full programs'"
    fi
done

# 2. it runs: version, a short training run, the model it wrote
version=$("$engine" version)
if grep -q "^changelens-engine " <<<"$version"; then pass "version"; else fail "version"; fi
if "$engine" train --preset tiny --task shapes --steps 2 --out "$tmp/run" >"$tmp/train.log" 2>&1 &&
    [ -f "$tmp/run/model.safetensors" ] && "$engine" model info "$tmp/run/model.safetensors" >/dev/null; then
    pass "train --task shapes: a model it reads back"
else
    fail "train --task shapes: $(tail -n 3 "$tmp/train.log")"
fi

# 3. data sets: PNG images train; DICOM ones are refused with a message naming changelens-cli
"$cli" synth --task shapes --n 2 --seed 1 --out "$tmp/png" >/dev/null 2>&1 || fail "synth shapes"
"$cli" synth --task radiograph --n 2 --seed 1 --out "$tmp/dcm" >/dev/null 2>&1 || fail "synth radiograph"
if "$engine" train --preset tiny --data "$tmp/png/data.jsonl" --steps 1 --out "$tmp/run-png" \
    >"$tmp/png.log" 2>&1; then
    pass "train --data (PNG images)"
else
    fail "train --data (PNG images): $(tail -n 3 "$tmp/png.log")"
fi
"$engine" train --preset tiny --data "$tmp/dcm/data.jsonl" --steps 1 --out "$tmp/run-dcm" \
    >"$tmp/dcm.log" 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -q "reads PNG images alone (this file is DICOM); changelens-cli reads every format" "$tmp/dcm.log"; then
    pass "train --data (DICOM images): refused, exit $rc"
else
    fail "train --data (DICOM images): exit $rc, $(tail -n 3 "$tmp/dcm.log")"
fi

# 4. what it has not: a message and a usage error, never a crash
check_refused() {
    local want=$1 expect_rc=$2
    shift 2
    "$engine" "$@" >"$tmp/out.log" 2>&1
    local rc=$?
    if [ $rc -eq "$expect_rc" ] && grep -q -F "$want" "$tmp/out.log"; then
        pass "$* refused (exit $rc)"
    else
        fail "$*: exit $rc, $(head -n 3 "$tmp/out.log")"
    fi
}
check_refused "changelens-cli has every command" 2 describe a.png b.png
check_refused "the engine-only programs have no MPI" 2 train --preset tiny --task shapes --steps 1 \
    --out "$tmp/run-mpi" --mpi
check_refused "the engine-only program has no case database" 2 bench --casedb
check_refused "the engine-only program writes no data sets" 2 model fit-ood --model m --out o
exit $failed
