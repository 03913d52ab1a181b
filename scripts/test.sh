#!/usr/bin/env bash
# Lint and test: ruff check, ruff format --check, then pytest on test/. Extra arguments go to
# pytest (e.g. `bash scripts/test.sh -k spec -x`). Sets up .venv first if needed (see setup.sh),
# with ROS discovery limited to this machine and a ROS_DOMAIN_ID of this run's own.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/setup.sh
. scripts/setup.sh

echo "test: ROS_DOMAIN_ID=$ROS_DOMAIN_ID ROS_AUTOMATIC_DISCOVERY_RANGE=$ROS_AUTOMATIC_DISCOVERY_RANGE"
ruff check .
ruff format --check .
python -m pytest test -q --durations=15 "$@"
