#!/usr/bin/env bash
# The report as a browser shows it: headless Chromium (Debian's `chromium`) loads the file,
# the page's inline self-check measures every figure, and the console must stay silent.
#   check_report.sh POSENC BUILD_DIR
# Leaves BUILD_DIR/report.html, BUILD_DIR/report.png (a 1280 x 4000 screenshot to look at),
# BUILD_DIR/report.dom.html and BUILD_DIR/report.chromium.log.
# Without chromium the test is skipped (exit 0) unless CI is set (and not "false" or "0"), where a missing browser fails.
set -euo pipefail
posenc=$1
build=$(cd "$2" && pwd)

chromium=""
for c in chromium chromium-browser; do
  if command -v "$c" >/dev/null 2>&1; then chromium=$(command -v "$c"); break; fi
done
if [ -z "$chromium" ]; then
  case "${CI:-}" in ""|false|0) ci="" ;; *) ci=1 ;; esac
  if [ -n "$ci" ]; then
    echo "check_report: FAIL: chromium is not installed and CI is set (apt-get install chromium)" >&2
    exit 1
  fi
  echo "check_report: SKIPPED: chromium is not installed (apt-get install chromium, or ./setup.sh test)"
  exit 0
fi

# A private profile and HOME, so that the test neither reads nor writes the user's.
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
flags=(--headless --no-sandbox --disable-gpu --enable-logging=stderr --v=0 --user-data-dir="$profile"
       --no-first-run --disable-extensions --disable-background-networking --disable-sync
       --disable-component-update --disable-default-apps --mute-audio --hide-scrollbars)

# check_page HTML DOM LOG: loads the page, prints what it found; status 1 when a check fails.
check_page() {
  local page=$1 dom=$2 log=$3 status=0
  HOME="$profile" timeout 120 "$chromium" "${flags[@]}" --dump-dom "file://$page" >"$dom" 2>"$log"
  local selfcheck
  selfcheck=$(grep -o '<p id="selfcheck"[^<]*' "$dom" | sed 's/.*>//' || true)
  echo "check_report: $(basename "$page"): selfcheck: ${selfcheck:-<missing>}"
  if ! printf '%s' "$selfcheck" | grep -Eq '^figures: [1-9][0-9]*, all non-zero$'; then
    echo "check_report: $(basename "$page"): the page's self-check did not report every figure as non-zero" >&2
    status=1
  fi
  # Chromium (156) logs every console message of the page as an INFO:CONSOLE line, console.error
  # included, and uncaught exceptions as "Uncaught ...". The report's script logs nothing, so any
  # console line from the page, whatever its level, counts as an error.
  local errors
  errors=$(grep -E 'CONSOLE|Uncaught' "$log" || true)
  if [ -n "$errors" ]; then
    echo "check_report: $(basename "$page"): console messages or errors:" >&2
    printf '%s\n' "$errors" >&2
    status=1
  fi
  return $status
}

# First, the checks must catch a broken page: a zero-size figure and a console error.
broken="$build/report.broken.html"
cat >"$broken" <<'HTML'
<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>
<p id="selfcheck">not measured</p>
<svg xmlns="http://www.w3.org/2000/svg" width="0" height="0" viewBox="0 0 0 0"></svg>
<script>
var s = document.querySelectorAll("svg"), empty = 0;
for (var i = 0; i < s.length; i++) { var b = s[i].getBoundingClientRect(); if (!(b.width > 0)) empty++; }
document.getElementById("selfcheck").textContent = "figures: " + s.length + (empty ? ", zero-size: 1" : ", all non-zero");
console.error("a deliberate error");
</script></body></html>
HTML
if check_page "$broken" "$build/report.broken.dom.html" "$build/report.broken.log" 2>/dev/null; then
  echo "check_report: FAIL: the checks passed a broken page (zero-size figure, console error)" >&2
  exit 1
fi
echo "check_report: the checks reject a broken page, as they should"

report="$build/report.html"
"$posenc" report -o "$report"
status=0
check_page "$report" "$build/report.dom.html" "$build/report.chromium.log" || status=1

HOME="$profile" timeout 120 "$chromium" "${flags[@]}" --window-size=1280,4000 \
  --screenshot="$build/report.png" "file://$report" >/dev/null 2>>"$build/report.chromium.log"
if [ ! -s "$build/report.png" ]; then
  echo "check_report: FAIL: no screenshot at $build/report.png" >&2
  status=1
else
  echo "check_report: screenshot $build/report.png"
fi
[ $status -eq 0 ] && echo "check_report: PASS" || echo "check_report: FAIL" >&2
exit $status
