#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image (Ubuntu base).
# It installs Python, the pinned requirements (requirements.txt, written by `attnscore export
# gradescope`) and attnscore itself from the source copy in this bundle (python/), into a
# virtual environment outside /autograder/source, which is then made readable by root only:
# the spec (with its hidden cases) lives there, and the sandboxed worker runs as another user.
set -euo pipefail

source_dir=/autograder/source
venv=/opt/attnscore/venv

export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends python3 python3-venv python3-pip
# bubblewrap adds namespaces where the container allows them; attnscore works without it.
apt-get install -y --no-install-recommends bubblewrap || true

# The pins come from the exporting machine's Python: pick the base image with the same version
# (Ubuntu 22.04: 3.10, 24.04: 3.12), or export from an environment with this image's Python.
exported="$(cat "$source_dir/python-version.txt" 2>/dev/null || true)"
here="$(python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
if [ -n "$exported" ] && [ "$exported" != "$here" ]; then
    echo "warning: requirements.txt was pinned with Python $exported; this image has Python $here" >&2
fi

python3 -m venv "$venv"
"$venv/bin/python" -m pip install --no-cache-dir --upgrade pip
"$venv/bin/python" -m pip install --no-cache-dir -r "$source_dir/requirements.txt"
"$venv/bin/python" -m pip install --no-cache-dir --no-deps "$source_dir/python"

# The worker (another uid) must read the interpreter and packages, never the spec.
chmod -R a+rX /opt/attnscore
chmod 0700 "$source_dir"
"$venv/bin/attnscore" --version
