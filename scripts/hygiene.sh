#!/usr/bin/env bash
# Fails when a tracked file is over 1 MB or is an executable binary (ELF, Mach-O, PE): build
# outputs belong in .gitignore, not in the tree. Run by .ci/run before the tests.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

limit=$((1024 * 1024))
bad=0
while IFS= read -r -d '' f; do
  [ -f "$f" ] || continue # deleted in the work tree
  size=$(stat -c %s "$f")
  if [ "$size" -gt "$limit" ]; then
    echo "hygiene: $f is $size bytes (limit $limit)" >&2
    bad=1
  fi
  magic=$(head -c 4 "$f" | od -An -tx1 | tr -d ' \n')
  case "$magic" in
    7f454c46 | feedface | feedfacf | cefaedfe | cffaedfe | 4d5a*)
      echo "hygiene: $f is an executable binary (magic $magic)" >&2
      bad=1
      ;;
  esac
done < <(git ls-files -z)
[ "$bad" = 0 ] || { echo "hygiene: remove these files from git and ignore them" >&2; exit 1; }
# Every tracked Go file is gofmt-formatted.
unformatted=$(git ls-files -z '*.go' | xargs -0 gofmt -l)
[ -z "$unformatted" ] || { printf 'hygiene: gofmt would change:\n%s\n' "$unformatted" >&2; exit 1; }
echo "hygiene: $(git ls-files | wc -l) tracked files, none over 1 MB, no executable binaries, Go files gofmt-formatted"
