#!/usr/bin/env bash
# Lint and test: ruff check, ruff format --check, then pytest on test/. Extra arguments go to
# pytest (e.g. `bash scripts/test.sh -k spec -x`). Sets up .venv first if needed (see setup.sh),
# with ROS discovery limited to this machine and a ROS_DOMAIN_ID of this run's own, and NVIDIA's
# leapp 0.7.2 in .venv-nvidia where PyPI is reachable (scripts/nvidia_leapp.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/setup.sh
. scripts/setup.sh

# NVIDIA's leapp 0.7.2 in a second venv, for the test that verifies an export it wrote.
if [[ -z "${LEAPP_NVIDIA_PYTHON:-}" ]]; then
    if LEAPP_NVIDIA_PYTHON="$(bash scripts/nvidia_leapp.sh)"; then
        export LEAPP_NVIDIA_PYTHON
    else
        echo "test: without NVIDIA's leapp (see above); its test skips" >&2
        unset LEAPP_NVIDIA_PYTHON
    fi
fi

echo "test: ROS_DOMAIN_ID=$ROS_DOMAIN_ID ROS_AUTOMATIC_DISCOVERY_RANGE=$ROS_AUTOMATIC_DISCOVERY_RANGE"
ruff check .
ruff format --check .
python -m pytest test -q --durations=15 "$@"
