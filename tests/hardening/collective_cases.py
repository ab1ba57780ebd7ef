"""Collectives on simulated devices (`xlens run --num_replicas=R --num_partitions=P`), hostile.

Replica groups that do not fit the devices (out of range, a device in two groups, groups of
unequal size where the op cuts by group size, groups that leave devices out, malformed iota and
mesh forms), a channel used by two collectives, permutations with a source used twice, inputs made
for another device count, and collectives that can never complete (a device that skips one in a
conditional, crossed collectives, a device that never comes back): each is one line naming the
instruction (or the folder, or the flag) and exit 1, quickly, with no hang.
"""

from harness import Case

ADD = "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n"


def _module(body, computations=""):
    return f"HloModule m\n{ADD}{computations}ENTRY e {{\n  p = f32[4] parameter(0)\n{body}\n}}\n"


def _case(name, text, flags, mentions, expect="error", setup_extra=None, names="m.hlo", timeout=20,
          outputs=(), command="run"):
    def setup(ctx):
        ctx.write("m.hlo", text)
        if setup_extra:
            setup_extra(ctx)
    return Case(id=f"collectives/{name}", reader="collectives", args=[command, "m.hlo"] + list(flags),
                setup=setup, expect=expect, names=None if expect == "ok" else names,
                mentions=mentions, quick=True, timeout=timeout, outputs=outputs)


AR = "  ROOT ar = f32[4] all-reduce(p), replica_groups={groups}, to_apply=add"

# A branch only replica 0 takes holds the collective: the other devices never come.
SKIPPED = _module(
    "  r = u32[] replica-id()\n  zero = u32[] constant(0)\n  first = pred[] compare(r, zero), direction=EQ\n"
    "  ROOT c = f32[4] conditional(first, p, p), true_computation=with, false_computation=without",
    "with {\n  x = f32[4] parameter(0)\n"
    "  ROOT cp = f32[4] collective-permute(x), source_target_pairs={{0,1},{1,0}}\n}\n"
    "without {\n  ROOT x = f32[4] parameter(0)\n}\n")

# Replica 0 reduces with add then max, the others max then add: each waits for the other.
CROSSED = _module(
    "  r = u32[] replica-id()\n  zero = u32[] constant(0)\n  first = pred[] compare(r, zero), direction=EQ\n"
    "  ROOT c = f32[4] conditional(first, p, p), true_computation=a_first, false_computation=b_first",
    "max {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT m = f32[] maximum(x, y)\n}\n"
    "a_first {\n  x = f32[4] parameter(0)\n  a = f32[4] all-reduce(x), replica_groups={}, to_apply=add\n"
    "  ROOT b = f32[4] all-reduce(a), replica_groups={}, to_apply=max\n}\n"
    "b_first {\n  x = f32[4] parameter(0)\n  b = f32[4] all-reduce(x), replica_groups={}, to_apply=max\n"
    "  ROOT a = f32[4] all-reduce(b), replica_groups={}, to_apply=add\n}\n")

# Replica 1 spins forever before the all-reduce replica 0 waits at.
SPINS = _module(
    "  r = u32[] replica-id()\n  w = u32[] while(r), condition=cond, body=body\n"
    "  wf = f32[] convert(w)\n  wb = f32[4] broadcast(wf), dimensions={}\n  q = f32[4] add(p, wb)\n"
    "  ROOT ar = f32[4] all-reduce(q), replica_groups={}, to_apply=add",
    "cond {\n  s = u32[] parameter(0)\n  zero = u32[] constant(0)\n"
    "  ROOT ne = pred[] compare(s, zero), direction=NE\n}\nbody {\n  ROOT s = u32[] parameter(0)\n}\n")


def _device_folders(count, extra=()):
    def make(ctx):
        import numpy as np
        import io
        for d in list(range(count)) + list(extra):
            buffer = io.BytesIO()
            np.save(buffer, np.arange(4, dtype=np.float32) + d)
            ctx.write(f"in/device_{d}/arg0.npy", buffer.getvalue())
    return make


def _global_input(shape):
    def make(ctx):
        import numpy as np
        import io
        buffer = io.BytesIO()
        np.save(buffer, np.zeros(shape, dtype=np.float32))
        ctx.write("in/arg0.npy", buffer.getvalue())
    return make


def cases(shared, root_user):
    two = ["--num_replicas=2"]
    four = ["--num_replicas=4"]
    return [
        # Groups that do not fit the devices.
        _case("group-names-a-missing-replica", _module(AR.format(groups="{{0,1},{2,3}}")), two,
              r"%ar.*replica 2"),
        _case("device-count-does-not-match-the-groups", _module(AR.format(groups="{{0,1,2,3}}")),
              ["--num_replicas=8"], r"%ar.*leaves out replicas 4, 5, 6, 7"),
        _case("replica-in-two-groups", _module(AR.format(groups="{{0,1},{1,2,3}}")), four,
              r"%ar.*replica 1 in two groups"),
        _case("all-gather-groups-of-unequal-size",
              _module("  ROOT ag = f32[8] all-gather(p), replica_groups={{0},{1,2,3}}, dimensions={0}"),
              four, r"%ag.*one size"),
        _case("iota-groups-that-do-not-fill", _module(AR.format(groups="[2,3]<=[4]")), four,
              r"%ar.*replica_groups="),
        _case("mesh-groups-name-a-missing-axis", _module(AR.format(groups="mesh['x'=4] {'y'}")), four,
              r"%ar.*axis 'y'"),
        _case("global-ids-without-a-channel",
              _module("  ROOT ar = f32[4] all-reduce(p), replica_groups={{0,1}}, "
                      "use_global_device_ids=true, to_apply=add"), two, r"%ar.*channel_id"),
        _case("channel-used-twice",
              _module("  a = f32[4] all-reduce(p), channel_id=7, replica_groups={{0,1}}, "
                      "use_global_device_ids=true, to_apply=add\n"
                      "  ROOT b = f32[4] all-reduce(a), channel_id=7, replica_groups={{0,1}}, "
                      "use_global_device_ids=true, to_apply=add"), two, r"channel_id=7.*%a.*%b"),
        _case("permute-source-used-twice",
              _module("  ROOT cp = f32[4] collective-permute(p), source_target_pairs={{0,1},{0,2}}"),
              ["--num_replicas=3"], r"%cp.*source twice"),
        _case("permute-names-a-missing-replica",
              _module("  ROOT cp = f32[4] collective-permute(p), source_target_pairs={{0,5}}"), two,
              r"%cp.*replica 5"),
        # Collectives that can never complete: reported at once, on every device, no hang.
        _case("permute-leaves-a-device-waiting", SKIPPED, two, r"%cp.*device 1 never arrived"),
        _case("crossed-collectives-deadlock", CROSSED, two, r"deadlock"),
        _case("device-that-never-comes-times-out", SPINS, two + ["--collective_timeout=0.5"],
              r"%ar.*within 0.5 s"),
        # Inputs for another device count, and values that do not split.
        _case("per-device-inputs-for-fewer-devices", _module(AR.format(groups="{}")),
              four + ["--inputs", "in"], r"device_2/", setup_extra=_device_folders(2), names="in"),
        _case("per-device-inputs-for-more-devices", _module(AR.format(groups="{}")),
              two + ["--inputs", "in"], r"device_2/.*another device count",
              setup_extra=_device_folders(2, extra=(2,)), names="in"),
        _case("global-input-of-the-wrong-shape", _module(AR.format(groups="{}")),
              two + ["--inputs", "in"], r"expects f32\[4\]", setup_extra=_global_input((5,)),
              names="arg0.npy"),
        # Flags that cannot go with several devices.
        _case("too-many-devices", _module(AR.format(groups="{}")), ["--num_replicas=100000"],
              r"at most \d+ devices", names="--num_replicas"),
        _case("too-many-devices-to-compile", _module(AR.format(groups="{}")), ["--num_replicas=512"],
              r"at most \d+ devices are compiled", names="--num_replicas"),
        # Several devices run on GPUs through NCCL now: without one, the message says so.
        _case("gpu-backend", _module(AR.format(groups="{}")), two + ["--backend=gpu"],
              r"need \d+ GPUs|run on the CPU", names="--backend"),
        # The good forms run.
        _case("all-reduce-runs", _module(AR.format(groups="[2,2]<=[4]")), four + ["--inputs", "in"],
              None, expect="ok", setup_extra=_device_folders(4)),
        _case("one-device-group-of-one", _module(AR.format(groups="{}")), ["--num_partitions=1"], None,
              expect="ok"),
        _case("one-device-compiled-without-flags", _module(AR.format(groups="{}")), [], None, expect="ok"),
        # The evaluator alone (xlens eval) on the same devices: the same refusals, the same results.
        _case("eval-permute-leaves-a-device-waiting", SKIPPED, two, r"%cp.*device 1 never arrived",
              command="eval"),
        _case("eval-device-that-never-comes-times-out", SPINS, two + ["--collective_timeout=0.5"],
              r"%ar.*within 0.5 s", command="eval"),
        _case("eval-all-reduce-runs", _module(AR.format(groups="mesh['a'=2,'b'=2] {'b'}")),
              four + ["--inputs", "in"], None, expect="ok", setup_extra=_device_folders(4), command="eval"),
        _case("compiled-matches-the-evaluator", _module(AR.format(groups="[2,2]<=[2,2]T(1,0)")),
              four + ["--reference"], r"reference: .* match", expect="ok"),
    ]
