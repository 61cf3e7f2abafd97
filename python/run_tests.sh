#!/bin/sh
# Runs the Python package's tests against the Weft library given as $1 (the
# build's libnccl.so.2 or libweft.so). Exit 77 (ctest: skipped) when no Python
# with pytest is found; modules whose optional packages are missing (NumPy,
# PyTorch) skip themselves inside pytest. Extra arguments go to pytest.
#   Debian packages for the full run: python3-pytest python3-numpy python3-torch
set -u
library=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
python=""
# WEFT_PYTHON first; then Debian's interpreter, where apt installs python3-*
# packages (a python3 earlier on PATH may be another installation).
for candidate in ${WEFT_PYTHON:-} /usr/bin/python3 python3; do
  if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c "import pytest" 2>/dev/null; then
    python=$candidate
    break
  fi
done
if [ -z "$python" ]; then
  echo "SKIPPED: no Python with pytest found (Debian: apt-get install python3-pytest python3-numpy python3-torch)"
  exit 77
fi
echo "python: $python ($("$python" --version 2>&1)); library: $library"
for module in numpy torch; do
  "$python" -c "import $module" 2>/dev/null || echo "note: $module is not installed for $python: its tests are skipped"
done
cd "$here" || exit 1
WEFT_LIBRARY=$library WEFT_BACKEND=host "$python" -m pytest -p no:cacheprovider -rs "$@" tests
status=$?
[ "$status" -eq 5 ] && { echo "SKIPPED: pytest collected no tests"; exit 77; }
exit "$status"
