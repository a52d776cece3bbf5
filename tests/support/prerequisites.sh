#!/usr/bin/env bash
# The system packages the test suite uses, installed when missing (Debian; run by `deno task test`
# before the tests, so the README's one test command is the whole set-up on a fresh machine):
# - python3-fusepy: the start-task test mounts a FUSE imitation of configfs-tsm
#   (tests/support/configfs_tsm_fuse.py);
# - jq: the README's `task verify` examples use it;
# - chromium: the /verify page and CORS browser tests drive a real headless Chromium (never
#   skipped, so it must be there);
# - golang-go, golang-golang-x-mod-dev: the transparency log's interop test checks tiles,
#   checkpoints and proofs with Go's golang.org/x/mod/sumdb/tlog and sumdb/note
#   (tests/interop/tlogcheck.go, GOPATH=/usr/share/gocode, no network).
set -uo pipefail
missing=()
/usr/bin/python3 -c "import fusepy" 2>/dev/null || missing+=(python3-fusepy)
command -v jq >/dev/null || missing+=(jq)
command -v chromium >/dev/null || missing+=(chromium)
command -v go >/dev/null || missing+=(golang-go)
[[ -d /usr/share/gocode/src/golang.org/x/mod/sumdb/tlog ]] || missing+=(golang-golang-x-mod-dev)
((${#missing[@]})) || exit 0
echo "installing ${missing[*]} (Debian packages the tests use)" >&2
sudo=()
[[ $(id -u) == 0 ]] || sudo=(sudo)
if ! ("${sudo[@]}" apt-get update -qq &&
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}") >/dev/null 2>&1; then
  echo "could not install ${missing[*]}: the tests needing them will fail" >&2
fi
exit 0
