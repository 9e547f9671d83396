#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image (Ubuntu base).
# It installs Python, the pinned requirements (requirements.txt, written by `attnscore export
# gradescope`) and attnscore itself from the source copy in this bundle (python/), into a
# virtual environment outside /autograder/source, which is then made readable by root only:
# the spec (with its hidden cases; an assignment's specs and reference files too) lives there, and
# the sandboxed worker runs as another user.
# The image needs network access while it builds (PyPI, and download.pytorch.org for torch's CPU
# wheel) and about 1.5 GB of disk. The spec's environment adds system-packages.txt (apt: a C++
# compiler and Python's headers when submissions may use torch.compile) and course-requirements.txt
# (the packages submissions may import, installed without moving any pinned version).
#
# Overrides, for testing the bundle outside Gradescope:
#   ATTNSCORE_AUTOGRADER_ROOT  the folder laid out like /autograder (default /autograder)
#   ATTNSCORE_SETUP_PYTHON3    the image's python3 (default python3)
#   ATTNSCORE_SETUP_VENV       where the virtual environment goes (default /opt/attnscore/venv)
#   ATTNSCORE_SETUP_NO_APT     set to 1: install no system packages
set -euo pipefail

source_dir="${ATTNSCORE_AUTOGRADER_ROOT:-/autograder}/source"
venv="${ATTNSCORE_SETUP_VENV:-/opt/attnscore/venv}"
python3="${ATTNSCORE_SETUP_PYTHON3:-python3}"

if [ "${ATTNSCORE_SETUP_NO_APT:-0}" != 1 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends python3 python3-venv python3-pip
    # bubblewrap adds namespaces where the container allows them; attnscore works without it.
    apt-get install -y --no-install-recommends bubblewrap || true
    # The course's system packages (the spec's environment: g++ and python3-dev for torch.compile).
    if [ -s "$source_dir/system-packages.txt" ]; then
        xargs -r apt-get install -y --no-install-recommends < "$source_dir/system-packages.txt"
    fi
fi

# requirements.txt is pinned for one base image's Python (`attnscore export gradescope --image`):
# stop here, before installing anything, when this image has another.
image="$(cat "$source_dir/base-image.txt" 2>/dev/null || echo "unknown image")"
wanted="$(cat "$source_dir/python-version.txt")"
here="$("$python3" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
if [ "$wanted" != "$here" ]; then
    echo "error: this autograder was exported for the base image $image (Python $wanted), but this image's" \
        "python3 is Python $here: select $image on Gradescope's Configure Autograder page, or export" \
        "again for this image (attnscore export gradescope --image ubuntu-22.04 for Python 3.10," \
        "--image ubuntu-24.04 for Python 3.12)" >&2
    exit 1
fi

"$python3" -m venv "$venv"
"$venv/bin/python" -m pip install --no-cache-dir --upgrade pip
"$venv/bin/python" -m pip install --no-cache-dir --only-binary=:all: -r "$source_dir/requirements.txt"
# The packages the course's submissions may import (the spec's environment), constrained by what is
# installed: a course package never changes the grader's pinned torch or numpy.
if grep -qv '^[[:space:]]*\(#\|$\)' "$source_dir/course-requirements.txt" 2> /dev/null; then
    constraints="$(mktemp)"
    "$venv/bin/python" -m pip freeze --all > "$constraints"
    "$venv/bin/python" -m pip install --no-cache-dir -c "$constraints" -r "$source_dir/course-requirements.txt"
    rm -f "$constraints"
fi
"$venv/bin/python" -m pip install --no-cache-dir --no-deps "$source_dir/python"

# The worker (another uid) must read the interpreter and packages, never the spec.
chmod -R a+rX "$(dirname "$venv")"
chmod 0700 "$source_dir"
"$venv/bin/attnscore" --version

# Warm up once, into the image: grading an empty file builds the spec's cases into the case cache
# (~/.cache/attnscore/cases, root's own, 0700) and, where the worker reads the interpreter through a
# mirror, that mirror; each student's run then starts from them instead of drawing every input
# again. The empty file scores 0; its report is thrown away.
warm_up="$(mktemp -d)"
: > "$warm_up/warm_up.py"
spec="$source_dir/spec.yaml"
if [ -f "$source_dir/spec-path.txt" ]; then  # an assignment: its file, inside the bundle
    spec="$source_dir/$(head -n 1 "$source_dir/spec-path.txt")"
fi
"$venv/bin/attnscore" grade "$warm_up/warm_up.py" --spec "$spec" > /dev/null 2>&1 || true
rm -rf "$warm_up"
