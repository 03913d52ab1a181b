#!/usr/bin/env bash
# Lint and test: ruff check, ruff format --check, the docs build (mkdocs --strict), then
# pytest on test/. Extra arguments go to pytest (e.g. `bash scripts/test.sh -k spec -x`). Sets
# up .venv first if needed (see setup.sh), with ROS discovery limited to this machine and a
# ROS_DOMAIN_ID of this run's own, and NVIDIA's leapp 0.7.2 in .venv-nvidia where PyPI is
# reachable (scripts/nvidia_leapp.sh).
#
#   bash scripts/test.sh --lane jazzy [pytest arguments]
#
# runs CI's second lane instead: the ROS-facing tests (JAZZY_TESTS below: nodes, robot
# operations, simulator, bags, the CLI) on ROS 2 Jazzy's wheels in .venv-jazzy
# (LEAPP_ROS_DISTRO=jazzy for setup.sh), with LEAPP_TEST_LANE=jazzy, which names the lane for
# test/support/skips.py. It does not lint: the code is the same in every lane.
#
#   bash scripts/test.sh --lane main-ros [pytest arguments]
#   bash scripts/test.sh --lane main-rest [pytest arguments]
#
# run the main lane in two parts, which together run every test of the main lane once: main-ros
# is ruff, the docs build and the tests marked `ros` (those that talk DDS) but not `soak`;
# main-rest the other tests (and the soak), on the same venv, without linting. CI (.ci/run) runs main-ros beside the jazzy lane and
# main-rest after the jazzy lane, which ends minutes before the main lane's ROS tests do: the
# two lanes then end at about the same time, and no more than two pytest processes ever run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

JAZZY_TESTS=(test/ros test/operations test/sim test/bags test/tools)

lane=main
if [[ "${1:-}" == --lane ]]; then
    lane="${2:?usage: test.sh --lane LANE [pytest arguments]}"
    shift 2
fi
lint=true
case "$lane" in
    main) tests=(test) ;;
    main-ros) tests=(test -m "ros and not soak") ;;
    main-rest) tests=(test -m "not ros or soak") lint=false ;;
    jazzy) tests=("${JAZZY_TESTS[@]}") lint=false ;;
    *)
        echo "test: no lane '$lane' (main, main-ros, main-rest, jazzy)" >&2
        exit 2
        ;;
esac
if [[ "$lane" != main* ]]; then
    export LEAPP_ROS_DISTRO="$lane" LEAPP_TEST_LANE="$lane"
fi
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

echo "test: lane $lane, $VIRTUAL_ENV, ROS_DOMAIN_ID=$ROS_DOMAIN_ID" \
    "ROS_AUTOMATIC_DISCOVERY_RANGE=$ROS_AUTOMATIC_DISCOVERY_RANGE"
if [[ "$lint" == true ]]; then
    ruff check .
    ruff format --check .
    # The documentation site, warnings as errors (links between pages and to their anchors
    # included); its reference pages and pictures are generated from the code as it builds.
    NO_MKDOCS_2_WARNING=1 mkdocs build --strict --quiet
fi
python -m pytest "${tests[@]}" -q --durations=15 "$@"
