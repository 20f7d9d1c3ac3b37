#!/usr/bin/env bash
# The hardware check on a GPU machine that has Python 3 and numpy but no package registry and no installed hcq:
# runs `python -m hcq.check` from this tree as it is (an import tree of symlinks mapping hcq.drivers, hcq.autogen and
# hcq.asm to their folders, as setup.py's ROOTS does), under a time limit, and prints one header line and one table.
#
#   bash tools/hardware_check.sh [hcq.check arguments, e.g. --dev NV --bytes 1073741824]
#
# PYTHON picks the interpreter (default python3); HCQ_CHECK_LIMIT the seconds allowed (default 420: under 8 minutes);
# HCQ_MODULE another module run the same way (HCQ_MODULE=hcq.smi ... --json: the fields to compare with nvidia-smi -q).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tree=$(mktemp -d /tmp/hcq-tree.XXXXXX)
trap 'rm -rf "$tree"' EXIT
mkdir "$tree/hcq"
for entry in "$root"/hcq/*; do ln -s "$entry" "$tree/hcq/"; done
for sub in drivers autogen asm; do ln -s "$root/$sub" "$tree/hcq/$sub"; done  # setup.py ROOTS: hcq.<sub> is <sub>/
py=${PYTHON:-python3}
driver=$(head -1 /proc/driver/nvidia/version 2>/dev/null | sed 's/  */ /g' || true)
echo "host: $(uname -sr), $(nproc) CPUs; ${driver:-no /proc/driver/nvidia/version}"
cd "$tree"  # python -m puts the working folder first on sys.path: there hcq is the tree, not the repository's hcq/
PYTHONPATH="$tree" PYTHONDONTWRITEBYTECODE=1 timeout "${HCQ_CHECK_LIMIT:-420}" "$py" -m "${HCQ_MODULE:-hcq.check}" "$@"
