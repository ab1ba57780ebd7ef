#!/usr/bin/env python3
"""Runs the Python package's pytest suite with the interpreter of the virtual environment
scripts/install_python_package.sh installed it into (build/python-venv), so the tests import the
installed package, not the source tree. The command line's binary is handed over in XLENS_BINARY
for the tests that compare the package's messages with its."""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile


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
    # -p no:cacheprovider: the suite writes nothing into the source tree. Its temporary files go
    # in a folder removed afterwards: the tests' tmp_path folders (--basetemp; by default pytest
    # keeps its last three runs in /tmp/pytest-of-USER), and through TMPDIR what TensorFlow's
    # autograph and Qt (the viewer's runtime folder) make there. A crash of the test process (a
    # signal) is a failure like any other: pytest's exit status is the test's.
    base = tempfile.mkdtemp(prefix="xlens-pytest-")
    env["TMPDIR"] = base
    command = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               f"--basetemp={os.path.join(base, 'pytest')}", here] + args.pytest_args
    try:
        result = subprocess.run(command, env=env, cwd=args.venv)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if result.returncode < 0:
        print(f"python_package: pytest died of signal {-result.returncode}")
        return 1
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
