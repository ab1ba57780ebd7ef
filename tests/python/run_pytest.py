#!/usr/bin/env python3
"""Runs the Python package's pytest suite with the interpreter of the virtual environment
scripts/install_python_package.sh installed it into (build/python-venv), so the tests import the
installed package, not the source tree. The command line's binary is handed over in XLENS_BINARY
for the tests that compare the package's messages with its."""

import argparse
import os
import subprocess
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--venv", required=True)
    parser.add_argument("--xlens", required=True)
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args()
    args.venv = os.path.abspath(args.venv)
    python = os.path.join(args.venv, "bin", "python")
    if not os.path.exists(python):
        print(f"python_package: no virtual environment at {args.venv} "
              "(scripts/install_python_package.sh makes it; scripts/test.sh runs it)")
        return 77
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, XLENS_BINARY=os.path.abspath(args.xlens))
    # -p no:cacheprovider: the suite writes nothing into the source tree. A crash of the test
    # process (a signal) is a failure like any other: pytest's exit status is the test's.
    command = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", here] + args.pytest_args
    result = subprocess.run(command, env=env, cwd=args.venv)
    if result.returncode < 0:
        print(f"python_package: pytest died of signal {-result.returncode}")
        return 1
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
