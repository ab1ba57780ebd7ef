#!/usr/bin/env bash
# Time and peak memory of `xlens trace summary` on a large trace of valid events and on gzip bombs,
# for this build and, when given, a baseline binary in the same run (ratios, not absolute times,
# are what to compare across machines; CPU time is less disturbed by a busy machine than wall
# time).
#
#   tests/bench/trace_summary_bench.sh [XLENS] [BASELINE_XLENS] [MEGABYTES]
#
# XLENS defaults to build/compiler/cli/xlens; MEGABYTES (default 200) is the size of the valid
# trace. The inputs are generated once into out/bench/traces/ (about MEGABYTES + 10 MB).
set -euo pipefail
cd "$(dirname "$0")/../.."
xlens=${1:-build/compiler/cli/xlens}
baseline=${2:-}
megabytes=${3:-200}
dir=out/bench/traces
mkdir -p "$dir"

python3 - "$dir" "$megabytes" <<'PY'
import gzip, os, random, sys
out, megabytes = sys.argv[1], int(sys.argv[2])
valid = os.path.join(out, f"valid_{megabytes}mb.json")
if not os.path.exists(valid):
    rng = random.Random(1)
    names = [f"fusion.{i}" for i in range(300)] + [f"dot.{i}" for i in range(50)] + \
            [f"void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_{i}>(Params)" for i in range(150)]
    cats = ["cpu_kernel"] * 300 + ["library_call"] * 50 + ["kernel"] * 150
    with open(valid + ".tmp", "w") as f:
        f.write('{"schemaVersion":1,"displayTimeUnit":"ms","baseTimeNanoseconds":1700000000000000000,\n'
                '"otherData":{"producer":"bench"},\n"traceEvents":[\n')
        f.write('{"ph":"M","name":"process_name","pid":0,"tid":0,"args":{"name":"Host (CPU)"}}')
        for t in range(8):
            f.write(f',\n{{"ph":"M","name":"thread_name","pid":0,"tid":{t},"args":{{"name":"worker {t}"}}}}')
        ts, written, i = 0, 0, 0
        target = megabytes << 20
        while written < target:
            k = rng.randrange(len(names))
            ts += rng.randrange(1, 50)
            dur = rng.randrange(1, 5000) / 1000
            line = (f',\n{{"ph":"X","cat":"{cats[k]}","name":"{names[k]}","pid":0,"tid":{i % 8},'
                    f'"ts":{ts}.{i % 1000:03},"dur":{dur:.3f},"args":{{"hlo_op":"{names[k]}",'
                    f'"bytes_accessed":{rng.randrange(1 << 30)},"grid":[{k},1,1],"module":"bench_module"}}}}')
            f.write(line)
            written += len(line)
            i += 1
            if i % 1000 == 0:
                f.write(f',\n{{"ph":"s","cat":"ac2g","name":"ac2g","id":{i},"pid":0,"tid":{i % 8},"ts":{ts}.{i % 1000:03}}}')
        f.write("\n]}\n")
    os.rename(valid + ".tmp", valid)

def bomb(name, head, fill, count, tail):
    path = os.path.join(out, name)
    if os.path.exists(path):
        return
    with gzip.open(path + ".tmp", "wb", compresslevel=9) as f:
        f.write(head)
        chunk = fill * (1 << 20)
        for _ in range(count):
            f.write(chunk)
        f.write(tail)
    os.rename(path + ".tmp", path)

# 1 GiB of one kind of byte in about 1 MB of gzip: spaces between events, and one huge name.
bomb("bomb_spaces.json.gz", b'{"traceEvents":[', b" ", 1024, b"]}")
bomb("bomb_name.json.gz", b'{"traceEvents":[{"ph":"X","cat":"kernel","name":"', b"a", 1024,
     b'","ts":1,"dur":1}]}')
# 1 GiB of the same valid event (compresses less: a few MB).
path = os.path.join(out, "bomb_events.json.gz")
event = b'{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":1,"ts":1.000,"dur":2.000},\n'
if not os.path.exists(path):
    block = event * ((1 << 20) // len(event))
    with gzip.open(path + ".tmp", "wb", compresslevel=9) as f:
        f.write(b'{"traceEvents":[')
        for _ in range(1024):
            f.write(block)
        f.write(b'{"ph":"i","name":"end","ts":2}]}')
    os.rename(path + ".tmp", path)
PY

measure() {  # BINARY FILE: prints seconds, peak RSS, exit status and the first error line
  local stats=$dir/time.txt err=$dir/stderr.txt rc=0
  /usr/bin/time -o "$stats" -f "%e %U %S %M" "$1" trace summary "$2" >/dev/null 2>"$err" || rc=$?
  read -r seconds user system kilobytes < <(tail -n 1 "$stats")
  printf "%7s s (cpu %6.2f s) %6s MB max RSS  exit %s  %s\n" "$seconds" "$(echo "$user + $system" | bc)" \
    "$((kilobytes / 1024))" "$rc" "$(head -c 110 "$err" | head -n 1)"
}

for input in "$dir/valid_${megabytes}mb.json" "$dir/bomb_spaces.json.gz" "$dir/bomb_name.json.gz" \
             "$dir/bomb_events.json.gz"; do
  size=$(du -m "$input" | cut -f1)
  echo "== $(basename "$input") (${size} MB on disk)"
  # The baseline on the events bomb may need more memory than the machine has (15 GB before the
  # reader streamed): BENCH_SKIP_BASELINE=events leaves it out.
  if [ -n "$baseline" ] && [[ "$input" != *"${BENCH_SKIP_BASELINE:-no input has this name}"* ]]; then
    printf "  baseline: "; measure "$baseline" "$input"
  fi
  printf "  this:     "; measure "$xlens" "$input"
done
