"""`python -m xlens ARGS` and the `xlens` command of the package's environment: the command line
installed with the package (xlens/bin/xlens), run with these arguments in place of this process."""

import os
import sys


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    binary = os.path.join(here, "bin", "xlens")
    if not os.access(binary, os.X_OK):
        print(f"xlens: no command line beside the package ({binary}); install the package from a "
              "built tree (scripts/install_python_package.sh)", file=sys.stderr)
        return 1
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(binary, ["xlens"] + sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
