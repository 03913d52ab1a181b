#!/usr/bin/env bash
# Prepare the development environment in <repo>/.venv. Needs only python3 (3.10-3.12) and pip.
#
#   bash scripts/setup.sh      create or update .venv (seconds when nothing changed)
#   . scripts/setup.sh         the same, then use .venv in this shell: sets PATH, VIRTUAL_ENV,
#                              AMENT_PREFIX_PATH, ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST and, unless
#                              already set, a ROS_DOMAIN_ID in 201-232 taken from the shell's PID
#                              (the tests hand out 1-200 with locks: leapp_ros.testing.probe)
#
# What it installs: requirements.txt (with torch==2.13.0: always that exact pin, any other spec
# downloads several GB), requirements-ros.txt (ROS 2 from PyPI wheels), requirements-dev.txt
# (pytest<9, ruff, warp-lang: optional for users, tested here), then this package. Where
# ../shared/ros2-launch exists next to the repository (or LEAPP_ROS2_LAUNCH names such a
# folder), its install.sh adds the ROS 2 launch stack that the
# PyPI wheels lack (launch, launch_ros, launch_testing, ros2cli, composition_interfaces, colcon),
# so `ros2 launch`, launch_testing, `ros2 component` and `colcon build/test` work in .venv;
# without it those tests skip, saying what to install. A real ROS 2 install needs none of this.
#
# The package is installed editable (pip install -e .), so tests, examples and ROS nodes
# started in subprocesses all run the source tree as it is now, with no reinstall after an edit.
# An editable install does not install setup.py's data_files, and pip puts console scripts in
# bin/ (setup.cfg's lib/leapp_ros applies only to colcon), so scripts/ros_prefix.py then links
# package.xml, the ament index marker, launch/ and config/ files under .venv/share and the
# executables under .venv/lib/leapp_ros, which is what ament_index_python, `ros2 run` and launch
# expect.
#
# A stamp file in .venv records a hash of everything the steps above depend on; when it matches,
# nothing is reinstalled. LEAPP_SETUP_FORCE=1 reinstalls anyway. LEAPP_PYTHON picks the Python
# used to create .venv (default python3).

leapp_setup_install() {
    set -euo pipefail
    local root venv py stamp key launch_stack
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    venv="$root/.venv"
    py="$venv/bin/python"
    stamp="$venv/.leapp_setup_stamp"
    launch_stack="${LEAPP_ROS2_LAUNCH:-$root/../shared/ros2-launch}"
    [[ -f "$launch_stack/install.sh" ]] || launch_stack=""

    if [[ ! -x "$py" ]]; then
        echo "setup: creating $venv"
        "${LEAPP_PYTHON:-python3}" -m venv "$venv"
    fi

    # Everything the installation depends on: the requirement files, the packaging files, this
    # script, and which launch/config files and packages exist (their contents are linked or
    # editable, so edits to them need no reinstall).
    key="$(
        cd "$root"
        "$py" -c 'import sys; print(sys.version)'
        cat requirements.txt requirements-ros.txt requirements-dev.txt setup.py setup.cfg \
            package.xml scripts/setup.sh scripts/ros_prefix.py
        find launch config -maxdepth 1 \( -name '*.py' -o -name '*.yaml' \) 2>/dev/null | sort
        find leapp leapp_ros -name __init__.py 2>/dev/null | sort
        if [[ -n "$launch_stack" ]]; then cat "$launch_stack/install.sh"; ls "$launch_stack"; fi
    )"
    key="$(printf '%s' "$key" | sha256sum | cut -d' ' -f1)"
    if [[ "${LEAPP_SETUP_FORCE:-0}" != 1 && -f "$stamp" && "$(cat "$stamp")" == "$key" ]]; then
        return 0
    fi

    echo "setup: installing into $venv (about a minute on a fresh machine)"
    rm -f "$stamp"
    cd "$root"
    # setuptools < 80: colcon-core (the launch stack's colcon) requires it.
    leapp_setup_pip install --upgrade pip 'setuptools>=70.1,<80'
    leapp_setup_pip install -r requirements.txt -r requirements-ros.txt -r requirements-dev.txt
    # Dependencies are in place already; no build isolation keeps this offline and fast. The
    # warning filter drops setuptools' generic notice about editable installs.
    PYTHONWARNINGS="ignore:Editable installation" \
        leapp_setup_pip install --no-deps --no-build-isolation --editable .
    "$py" scripts/ros_prefix.py --prefix "$venv"
    if [[ -n "$launch_stack" ]]; then
        echo "setup: adding the ROS 2 launch stack from $launch_stack"
        bash "$launch_stack/install.sh" "$venv" 2>&1 | { grep -v -E "^WARNING: Location '[^']*' is ignored" || true; }
    fi
    echo "$key" >"$stamp"
    echo "setup: done"
}

# pip of .venv ($py of the caller), quiet, without the "WARNING: Location '...' is ignored" lines
# that a pip configuration with a file:// index produces; keeps pip's exit status (pipefail).
leapp_setup_pip() {
    "$py" -m pip -q "$@" 2>&1 | { grep -v -E "^WARNING: Location '[^']*' is ignored" || true; }
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
    leapp_setup_install
else
    # Sourced: install in a child shell so that set -e and cd stay out of the caller's shell.
    if bash "${BASH_SOURCE[0]}"; then
        LEAPP_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
        export LEAPP_ROOT
        export VIRTUAL_ENV="$LEAPP_ROOT/.venv"
        case "$PATH:" in
            "$VIRTUAL_ENV/bin:"*) ;;
            *) export PATH="$VIRTUAL_ENV/bin:$PATH" ;;
        esac
        # leapp_ros also does this when imported; exporting it helps tools that do not import it.
        case ":${AMENT_PREFIX_PATH:-}:" in
            *":$VIRTUAL_ENV:"*) ;;
            *) export AMENT_PREFIX_PATH="${AMENT_PREFIX_PATH:+$AMENT_PREFIX_PATH:}$VIRTUAL_ENV" ;;
        esac
        # Never let DDS discovery leave this machine; keep each run in a domain of its own,
        # outside the ids the tests reserve (leapp_ros.testing.probe.SHELL_DOMAIN_IDS).
        export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
        export ROS_DOMAIN_ID="${ROS_DOMAIN_ID:-$(($$ % 32 + 201))}"
    else
        echo "setup: failed; see the messages above" >&2
        return 1
    fi
fi
