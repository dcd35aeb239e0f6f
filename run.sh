#!/usr/bin/env bash
# run.sh - the two commands. `./run.sh` sets up, builds and opens the app on the demo case;
# `./run.sh test` sets up, builds and runs the whole test suite; `./run.sh cli ARGS...` runs the CLI.
# Idempotent: installs only what is missing, reconfigures only when needed.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")"

# Every Debian 12 package the product, its build and its tests need: this list and nowhere else.
PACKAGES=(
  # build
  meson ninja-build pkg-config gcc g++ gettext
  # set-up: the pretrained parts come as PyPI wheels (tools/fetch-pretrained.sh)
  python3-pip
  # core
  libglib2.0-dev libglib2.0-bin libgdk-pixbuf-2.0-dev libpng-dev zlib1g-dev libtiff-dev libgeotiff-dev
  libdcmtk-dev libsndfile1-dev libssl-dev libwrap0-dev libjson-glib-dev libcairo2-dev libpango1.0-dev
  libopenblas-dev libsqlite3-dev libopenjp2-7-dev
  # a department's shared case database on a PostgreSQL server (--db postgresql://...)
  libpq-dev
  # DICOMweb to a PACS (QIDO-RS, WADO-RS, STOW-RS)
  libsoup-3.0-dev
  # GDAL: the geospatial rasters TIFF does not cover, and the GeoTIFF/GeoPackage export; gdalinfo;
  # HDF5's own library writes the GDAL test's HDF5 file (GDAL reads HDF5 but cannot write it)
  libgdal-dev gdal-bin libhdf5-dev
  # fonts for the PDF and HTML reports (Pango)
  fonts-dejavu-core
  # image formats gdk-pixbuf loads at run time
  webp-pixbuf-loader libgdk-pixbuf2.0-bin
  # application
  libgtk-4-dev libadwaita-1-dev librsvg2-common
  # tests: display server, desktop-file and AppStream validators
  xvfb xauth desktop-file-utils appstream
  # tests: render exported PDFs to PNG (pdftoppm); the style check (tools/format.sh); xz packs the
  # GPU machine's bundle (tools/gpu-check.sh, the gpu-bundle test)
  poppler-utils clang-format xz-utils
  # data-parallel training across processes (train --mpi; tests/test-mpi.c runs mpirun -np 2)
  libopenmpi-dev openmpi-bin
  # tests: a PostgreSQL server the case-database tests start on a loopback port and stop
  postgresql
  # tests: a one-node Slurm (and munge) that tests/test-slurm.sh starts on loopback ports and stops
  slurm-wlm munge
  # tests: a real PACS (Orthanc) that the PACS test starts on loopback ports and stops (tests/test-pacs.cc)
  orthanc orthanc-dicomweb
  # tests: scikit-image's sample photographs (independent checks of the pretrained image network)
  # and Debian's PyTorch, the peer EfficientNet-Lite0's logits are compared with (/effnet/pytorch)
  python3-skimage python3-torch
  # the photo-edits task (core/synth/photo-edits.c): the pasted objects' emoji font, the training
  # photographs (two wallpaper collections) and the held-out ones (OpenCV's sample photographs)
  fonts-noto-color-emoji plasma-workspace-wallpapers mate-backgrounds opencv-doc
)

log() { printf '\033[1mrun.sh:\033[0m %s\n' "$*" >&2; }

install_missing() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing ${#missing[@]} missing Debian packages: ${missing[*]}"
  local sudo=()
  [ "$(id -u)" -ne 0 ] && sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

build() {
  # CUDA 13 lives in /usr/local/cuda; meson compiles kernels/ when nvcc is on PATH.
  [ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH"
  if [ ! -f build/build.ninja ]; then
    meson setup build
  fi
  ninja -C build
}

# The core and model suites a second time, built with AddressSanitizer and
# UndefinedBehaviorSanitizer (build-asan/, no CUDA, no GUI): a memory error or undefined behaviour
# fails the test that hit it. Leak reports are off: GLib, fontconfig and OpenBLAS keep
# process-lifetime allocations that are not ours to free.
sanitize_tests() {
  if [ ! -f build-asan/build.ninja ]; then
    meson setup build-asan -Db_sanitize=address,undefined -Dcuda=disabled \
      -Dbuildtype=debugoptimized >/dev/null
  fi
  # the suites' tests that run our C code (the scripts' checks — data, doc-refs, format — need
  # no second run), and their executables
  local tests targets
  tests=$(meson introspect --tests build-asan | python3 -c '
import json, sys
for t in json.load(sys.stdin):
    if {"changelens:core", "changelens:model"} & set(t["suite"]) and "/build-asan/" in t["cmd"][0]:
        print(t["name"], t["cmd"][0].split("/build-asan/", 1)[1])')
  targets=$(echo "$tests" | cut -d' ' -f2 | sort -u)
  # shellcheck disable=SC2086 # one target or test name per word
  ninja -C build-asan app/changelens-cli $targets
  # shellcheck disable=SC2046
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:detect_stack_use_after_return=0 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    meson test -C build-asan --no-rebuild --print-errorlogs --logbase sanitize \
    $(echo "$tests" | cut -d' ' -f1)
}

# Prints the plain closing line "N passed, N failed, N skipped" from meson's test log.
summarise_tests() {
  local log=${1:-build/meson-logs/testlog.json}
  [ -f "$log" ] || return 0
  python3 - "$log" <<'PY' 2>/dev/null || true
import json, sys
p = f = s = 0
for line in open(sys.argv[1]):
    r = json.loads(line).get("result")
    if r in ("OK", "EXPECTEDFAIL"): p += 1
    elif r == "SKIP": s += 1
    else: f += 1
print(f"{p} passed, {f} failed, {s} skipped")
PY
}

cmd="${1:-app}"
[ $# -gt 0 ] && shift
install_missing
bash tools/fetch-pretrained.sh
build
case "$cmd" in
  test)
    # the test side's peers (llama.cpp for the GGUF parity test; PyTorch for /effnet/pytorch with
    # CL_PEER_TORCH=1): installed once, skipped if they cannot be
    bash tools/peer-venv.sh
    export GSETTINGS_BACKEND=memory GTK_A11Y=none NO_AT_BRIDGE=1
    rc=0
    xvfb-run -a -s '-screen 0 1600x1000x24' meson test -C build --print-errorlogs "$@" || rc=$?
    if [ $# -eq 0 ]; then
      # the whole suite: core and model again under the sanitizers
      log "core and model suites under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/)"
      srt=0
      sanitize_tests || srt=$?
      echo "sanitizers: $(summarise_tests build-asan/meson-logs/sanitize.json)"
      [ $srt -ne 0 ] && rc=$srt
    fi
    summarise_tests
    exit $rc
    ;;
  cli)
    exec build/app/changelens-cli "$@"
    ;;
  app)
    # opens on the most recent case; on the first run the database gets the demo cases
    # (data/demo: a radiograph, an aerial and an edited-photo pair)
    export GSETTINGS_SCHEMA_DIR="$PWD/build/data${GSETTINGS_SCHEMA_DIR:+:$GSETTINGS_SCHEMA_DIR}"
    exec build/app/changelens "$@"
    ;;
  *)
    log "unknown command '$cmd' (use: ./run.sh, ./run.sh test, ./run.sh cli ARGS...)"
    exit 2
    ;;
esac
