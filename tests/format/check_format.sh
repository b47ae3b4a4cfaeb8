#!/usr/bin/env bash
# Every C++ source of the repository is formatted as .clang-format says (clang-format 14, the
# version Debian 12 ships: other versions format some constructs differently, so they are not
# used). Usage: check_format.sh SOURCE_DIR [--fix]
set -euo pipefail
cd "$1"
tool=$(command -v clang-format-14 || true)
if [ -z "$tool" ]; then
  if [ -n "${CI:-}" ]; then echo "check_format: clang-format-14 not found (apt install clang-format)" >&2; exit 1; fi
  echo "check_format: clang-format-14 not found; skipped (apt install clang-format)"; exit 0
fi
mapfile -t files < <(find include src cli python tests bench fuzz examples -type f \( -name '*.cc' -o -name '*.h' \) | sort)
if [ "${2:-}" = "--fix" ]; then
  "$tool" -i "${files[@]}"; exit 0
fi
if ! "$tool" --dry-run --Werror "${files[@]}" 2>/tmp/posenc-format.$$; then
  grep -E '^[^ ].*: error:' /tmp/posenc-format.$$ | cut -d: -f1 | sort -u | sed 's/^/not formatted: /' >&2
  echo "check_format: run tests/format/check_format.sh . --fix (clang-format 14)" >&2
  rm -f /tmp/posenc-format.$$; exit 1
fi
rm -f /tmp/posenc-format.$$
echo "check_format: ${#files[@]} files formatted as .clang-format says"
