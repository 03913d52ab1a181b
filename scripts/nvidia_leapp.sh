#!/usr/bin/env bash
# A second venv with NVIDIA's leapp 0.7.2, the reference this project is measured and tested
# against: <repo>/.venv-nvidia, with torch==2.13.0 (that exact pin: any other spec downloads
# several GB) and leapp==0.7.2 from PyPI. Prints its Python on stdout, for
#
#   LEAPP_NVIDIA_PYTHON="$(bash scripts/nvidia_leapp.sh)" python -m pytest test  # the NVIDIA test
#   python bench/export.py --nvidia-python "$(bash scripts/nvidia_leapp.sh)"
#
# Seconds when it is there already (a stamp records what was installed). Exits 1, saying why on
# stderr, when it cannot be installed (no PyPI); scripts/test.sh then runs without it and the
# test that needs it skips, saying so. One call at a time installs: a second one (CI starts this
# beside its lanes, whose scripts/test.sh asks for it too) waits for the first to end, then
# finds the stamp.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv-nvidia"
want="torch==2.13.0 leapp==0.7.2"
stamp="$venv/.leapp_nvidia_stamp"

exec 9<"$root/scripts/nvidia_leapp.sh" # the lock: this file, which every caller has
flock 9

if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    echo "nvidia_leapp: installing $want into $venv (about a minute)" >&2
    rm -rf "$venv"
    "${LEAPP_PYTHON:-python3}" -m venv "$venv" >&2
    quiet() { "$@" 2>&1 | { grep -v -E "^WARNING: Location '[^']*' is ignored" || true; } >&2; }
    # torch first, on its own: leapp's requirements must not pick another build of it.
    # shellcheck disable=SC2086
    if ! quiet "$venv/bin/python" -m pip install -q torch==2.13.0 ||
        ! quiet "$venv/bin/python" -m pip install -q $want; then
        echo "nvidia_leapp: could not install $want (is PyPI reachable?)" >&2
        rm -rf "$venv"
        exit 1
    fi
    echo "$want" >"$stamp"
fi
echo "$venv/bin/python"
