#!/usr/bin/env bash
# tools/format.sh - applies .clang-format to every tracked C, C++ and CUDA file; `--check` only
# reports (clang-format --dry-run -Werror) and fails when a file is not formatted.
#
#   tools/format.sh [--check] [SOURCE_ROOT]
#
# The files are the repository's tracked *.c *.h *.cc *.cu (`git ls-files`), or, outside a git
# checkout (a release tarball), the same suffixes under the source root minus build folders.
# Exits 77 (meson's "skipped") when clang-format is not installed, so the test says why instead of
# failing on a machine without it.
set -euo pipefail
check=0
if [ "${1:-}" = "--check" ]; then check=1; shift; fi
root=${1:-"$(dirname "$0")/.."}
cd "$root"
CLANG_FORMAT=${CLANG_FORMAT:-clang-format}
if ! command -v "$CLANG_FORMAT" >/dev/null 2>&1; then
  echo "format: $CLANG_FORMAT is not installed (Debian: apt-get install clang-format); skipped" >&2
  exit 77
fi
files=()
if git rev-parse --is-inside-work-tree >/dev/null 2>&1 \
    && [ "$(git rev-parse --show-toplevel)" = "$(pwd -P)" ]; then
  while IFS= read -r -d '' f; do files+=("$f"); done \
    < <(git ls-files -z -- '*.c' '*.h' '*.cc' '*.cu')
else
  # a build folder holds meson-private/; generated sources there are not ours to format
  while IFS= read -r -d '' f; do files+=("$f"); done \
    < <(find . \( -name .git -o -exec test -d '{}/meson-private' \; \) -prune -o -type f \
          \( -name '*.c' -o -name '*.h' -o -name '*.cc' -o -name '*.cu' \) -print0 | sort -z)
fi
if [ ${#files[@]} -eq 0 ]; then
  echo "format: no C sources found under $(pwd)" >&2
  exit 1
fi
if [ $check -eq 1 ]; then
  # other major versions lay some constructs out differently: their verdict would be noise
  major=$("$CLANG_FORMAT" --version | sed -n 's/.*clang-format version \([0-9]*\).*/\1/p')
  if [ "$major" != "14" ]; then
    echo "format: .clang-format is tuned for clang-format 14, this is ${major:-unknown}; skipped" >&2
    exit 77
  fi
  # --dry-run prints a warning per change it would make; -Werror makes any of them fail (it
  # stops at the first file, so the count of what is left comes from a second, listing pass)
  if "$CLANG_FORMAT" --style=file --dry-run -Werror "${files[@]}"; then
    echo "format: ${#files[@]} files match .clang-format"
    exit 0
  fi
  left=$("$CLANG_FORMAT" --style=file --dry-run "${files[@]}" 2>&1 | grep -E '^[^ :]+:[0-9]+:[0-9]+: warning:' | cut -d: -f1 \
         | sort | uniq -c | sort -rn)
  echo "format: $(printf '%s\n' "$left" | wc -l) of ${#files[@]} files differ from .clang-format" \
       "(changes per file below); tools/format.sh applies it" >&2
  printf '%s\n' "$left" >&2
  exit 1
fi
exec "$CLANG_FORMAT" --style=file -i "${files[@]}"
