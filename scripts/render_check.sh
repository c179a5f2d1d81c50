#!/usr/bin/env bash
# Renders space-time diagrams (.svg) and reports (.html) in headless Chromium and checks that
# each screenshot is a real picture (not blank, not an error page).
#
#   scripts/render_check.sh FILE.svg|FILE.html ...   screenshot the given files
#   scripts/render_check.sh                          plan every model in models/ with --svg and
#                                                    --html into a temporary folder, then check
#
# Screenshots are written beside each file as FILE.png (look at them). Installs Debian's
# chromium when it is missing. Exit code 0 when every file rendered.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)

browser=$(command -v chromium || command -v chromium-browser || true)
if [[ -z "$browser" ]]; then
    echo "render_check: installing chromium" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-dejavu-core >/dev/null
    browser=$(command -v chromium)
fi

files=("$@")
if [[ ${#files[@]} -eq 0 ]]; then
    out=$(mktemp -d)
    bin="${CARGO_TARGET_DIR:-$here/target}/release/onnx-memplan"
    (cd "$here" && cargo build --release --quiet)
    for model in "$here"/models/*.onnx; do
        stem=$(basename "$model" .onnx)
        "$bin" plan "$model" --dim batch=1 --dim sequence=16 -o "$out/$stem.memplan.onnx" \
            --svg "$out/$stem.svg" --html "$out/$stem.html" 2>>"$out/plan.log" || {
            echo "render_check: planning $stem failed:" >&2
            tail -1 "$out/plan.log" >&2
            exit 1
        }
        files+=("$out/$stem.svg" "$out/$stem.html")
    done
fi

failed=0
for file in "${files[@]}"; do
    file=$(realpath "$file")
    png="$file.png"
    profile=$(mktemp -d)
    size="1320,1200"
    [[ "$file" == *.html ]] && size="1400,2000"
    rm -f "$png"
    timeout 120 "$browser" --headless --no-sandbox --disable-gpu --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --hide-scrollbars --user-data-dir="$profile" --screenshot="$png" \
        --window-size="$size" "file://$file" >/dev/null 2>&1 || true
    rm -rf "$profile"
    # A blank page compresses to a few kilobytes; a drawn diagram does not.
    bytes=$(stat -c %s "$png" 2>/dev/null || echo 0)
    if (( bytes < 20000 )); then
        echo "FAIL $file: screenshot missing or blank ($bytes bytes)"
        failed=1
    else
        echo "ok   $file -> $png ($bytes bytes)"
    fi
done
exit $failed
