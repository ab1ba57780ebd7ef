#!/usr/bin/env python3
"""XLA itself reads what xlens prints.

For every module of the corpus, `xlens print` (long and short form) is parsed by XLA's own HLO
parser (from jaxlib), and XLA's printout of it must equal XLA's printout of the original file:
the two texts describe the same module as XLA sees it. Exits 77 (skipped) when jaxlib or the
corpus is absent.
"""
import argparse
import difflib
import glob
import os
import subprocess
import sys

SKIP = 77


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--xlens", required=True)
    parser.add_argument("--corpus", required=True)
    args = parser.parse_args()
    try:
        from jaxlib import _hlo as xla_hlo
    except ImportError as e:
        print(f"SKIPPED: jaxlib is not installed ({e}); scripts/setup.sh installs it")
        return SKIP
    files = sorted(glob.glob(os.path.join(args.corpus, "*.hlo")) +
                   glob.glob(os.path.join(args.corpus, "large", "*.hlo")))
    if not files:
        print(f"SKIPPED: no corpus at {args.corpus}")
        return SKIP
    passed = failed = 0
    for path in files:
        with open(path, encoding="utf-8") as f:
            original = xla_hlo.hlo_module_from_text(f.read()).to_string()
        for form in ([], ["--short"]):
            run = subprocess.run([args.xlens, "print", "--no-verify", path] + form,
                                 capture_output=True, text=True)
            name = f"{os.path.basename(path)} {' '.join(form) or '--long'}"
            if run.returncode != 0:
                print(f"FAIL {name}: xlens print failed: {run.stderr.strip()}")
                failed += 1
                continue
            try:
                ours = xla_hlo.hlo_module_from_text(run.stdout).to_string()
            except Exception as e:  # XLA reports parse errors as generic exceptions.
                print(f"FAIL {name}: XLA cannot parse what xlens printed: {e}")
                failed += 1
                continue
            # The short form drops metadata and backend_config by design: compare what remains.
            if form:
                original_cmp = xla_hlo.hlo_module_from_text(
                    subprocess.run([args.xlens, "print", "--no-verify", path],
                                   capture_output=True, text=True).stdout)
                options = xla_hlo.HloPrintOptions.short_parsable()
                # XLA fills an elided constant `{...}` with arbitrary values when it parses one.
                options.print_large_constants = False
                ours = xla_hlo.hlo_module_from_text(run.stdout).to_string(options)
                expected = original_cmp.to_string(options)
            else:
                expected = original
            if ours != expected:
                diff = "\n".join(list(difflib.unified_diff(expected.splitlines(), ours.splitlines(),
                                                           "xla(original)", "xla(xlens print)",
                                                           lineterm="", n=1))[:20])
                diff = "\n".join(line[:200] for line in diff.splitlines())
                print(f"FAIL {name}: XLA sees a different module\n{diff}")
                failed += 1
                continue
            passed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
