#!/usr/bin/env bash
# The Python the tests compare against (NumPy now; pandas and Jupyter
# clients later): a virtual environment at .venv-test with the pinned
# packages of tests/requirements.txt. Prints the interpreter's path, for
# BRISK_PYTHON. Safe to run again: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-test
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv" >&2
fi
if ! "$venv/bin/python" -c "import sys; sys.exit(0)" 2>/dev/null; then
    echo "error: $venv is broken; remove it and run again" >&2
    exit 1
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r tests/requirements.txt >&2
echo "$PWD/$venv/bin/python"
