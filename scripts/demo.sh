#!/usr/bin/env bash
# Run the seed's two-node pipeline end to end (examples/demo.py) and write its
# export folder under out/demo (or LEAPP_DEMO_OUT). Extra arguments go to the example. Sets up
# .venv first if needed (see setup.sh), with ROS discovery limited to this machine and a
# ROS_DOMAIN_ID of this run's own.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/setup.sh
. scripts/setup.sh

out="${LEAPP_DEMO_OUT:-out/demo}"
mkdir -p "$out"
echo "demo: export folder under $out (ROS_DOMAIN_ID=$ROS_DOMAIN_ID)"
python examples/demo.py --save-path "$out" "$@"
