#!/usr/bin/env bash
# run-fuzz.sh - builds the libFuzzer harnesses (clang, ASan+UBSan) and fuzzes every loader
# (images: png tiff dicom dicom-j2k gdal pixbuf; model files: safetensors gguf; the tokenizer JSON:
# tokenizer; training data: jsonl) and the report writers (report: PDF, HTML, JSON, with and
# without de-identification).
# Usage: tests/fuzz/run-fuzz.sh [SECONDS_PER_LOADER=600] [LOADER…]; not part of ./run.sh test.
# Prints each loader's exec count; exits non-zero if any harness crashed, leaked or hung.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs="${1:-600}"
shift || true
loaders=("$@")
[ ${#loaders[@]} -eq 0 ] &&
  loaders=(png tiff dicom dicom-j2k gdal pixbuf safetensors gguf tokenizer jsonl report)
bdir=build-fuzz
if [ ! -f "$bdir/build.ninja" ]; then
  CC=clang-14 CXX=clang++-14 meson setup "$bdir" -Dcuda=disabled -Dfuzzing=true \
    -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debugoptimized
fi
ninja -C "$bdir" tests/make-fixtures tests/test-gguf $(printf 'tests/fuzz-%s ' "${loaders[@]}")

out=fuzz-out
mkdir -p "$out"
seeds="$out/seeds"
if [ ! -f "$seeds/manifest.json" ]; then
  "$bdir/tests/make-fixtures" "$seeds" >/dev/null
fi
rc=0
for l in "${loaders[@]}"; do
  corpus="$out/corpus-$l"
  mkdir -p "$corpus"
  case "$l" in
    png) pat='*.png' ;;
    tiff) pat='*.tif*' ;;
    dicom) pat='*.dcm' ;;
    pixbuf) pat='*.jpg *.jpeg *.bmp *.gif *.webp' ;;
    *) pat='' ;;
  esac
  case "$l" in
    report | jsonl | tokenizer) self_seeded=1 ;;
    *) self_seeded=0 ;;
  esac
  if [ $self_seeded = 1 ]; then
    # the harness writes its own seeds (report: cases; jsonl: lines of both schemas, good and
    # bad; tokenizer: the shipped models' tokenizers and a trained one), read from the root
    [ -d "$out/seeds-$l" ] || CL_FUZZ_WRITE_SEEDS="$out/seeds-$l" "$bdir/tests/fuzz-$l" >/dev/null
    find "$out/seeds-$l" -maxdepth 1 -type f -exec cp -n {} "$corpus/" \;
  elif [ "$l" = safetensors ]; then
    # the harness writes its own seeds: small models of every variant and dtype, broken files
    [ -d "$out/seeds-safetensors" ] ||
      CL_FUZZ_WRITE_SEEDS="$out/seeds-safetensors" "$bdir/tests/fuzz-safetensors" >/dev/null
    find "$out/seeds-safetensors" -maxdepth 1 -name '*.safetensors' -exec cp -n {} "$corpus/" \;
  elif [ "$l" = dicom-j2k ]; then
    # the harness writes its own seeds: a 6-byte header and a codestream from OpenJPEG's encoder
    [ -d "$out/seeds-dicom-j2k" ] ||
      CL_FUZZ_WRITE_SEEDS="$out/seeds-dicom-j2k" "$bdir/tests/fuzz-dicom-j2k" >/dev/null
    find "$out/seeds-dicom-j2k" -maxdepth 1 -name '*.j2kseed' -exec cp -n {} "$corpus/" \;
  elif [ "$l" = gdal ]; then
    # the harness writes its own seeds: small rasters from GDAL's writers (NITF, JPEG 2000,
    # GeoTIFF, HFA) and a VRT, each behind the byte that picks the name GDAL is shown
    [ -d "$out/seeds-gdal" ] || CL_FUZZ_WRITE_SEEDS="$out/seeds-gdal" "$bdir/tests/fuzz-gdal" >/dev/null
    find "$out/seeds-gdal" -maxdepth 1 -name '*.gdalseed' -exec cp -n {} "$corpus/" \;
  elif [ "$l" = gguf ]; then
    # test-gguf writes the seeds: a file with every value and tensor type, refused variants
    [ -d "$out/seeds-gguf" ] || CL_FUZZ_WRITE_SEEDS="$out/seeds-gguf" "$bdir/tests/test-gguf"
    find "$out/seeds-gguf" -maxdepth 1 -name '*.gguf' -exec cp -n {} "$corpus/" \;
  else
    for p in $pat; do find "$seeds" -maxdepth 1 -name "$p" -exec cp -n {} "$corpus/" \; ; done
  fi
  extra=()
  [ -f "tests/fuzz/$l.dict" ] && extra+=("-dict=tests/fuzz/$l.dict")
  log="$out/fuzz-$l.log"
  echo "fuzzing $l for ${secs}s ($(ls "$corpus" | wc -l) seeds) -> $log"
  if ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1:quarantine_size_mb=64 \
     UBSAN_OPTIONS=halt_on_error=1 \
     LSAN_OPTIONS=suppressions=tests/fuzz/lsan.supp \
     "$bdir/tests/fuzz-$l" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
       -malloc_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$out/$l-" \
       ${extra[@]+"${extra[@]}"} \
       "$corpus" \
       >"$log" 2>&1; then
    status=ok
  else
    status=FAILED
    rc=1
  fi
  execs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}')
  echo "$l: $status, ${execs:-?} executions in ${secs}s"
done
exit $rc
