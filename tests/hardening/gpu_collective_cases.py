"""Collectives on several GPUs (`xlens run --backend=gpu-sim|gpu --num_replicas=R --num_partitions=P`),
hostile.

The GPU backend's devices meet through the same rendezvous as the CPU's, so the same hostile
modules must get the same answers there: replica groups that do not fit the device count (a
missing replica, devices left out, a replica in two groups, a group naming a replica that the
partitions do not make), a channel used by two collectives, a permutation with a source used
twice, and collectives that can never complete (a collective-permute that one device skips in a
conditional, crossed collectives, a simulated device that never comes back, which cannot be
stopped and is left behind), and --backend=gpu on more devices than there are GPUs: each is one
line naming the instruction (or the flag) and exit 1, quickly, with no hang.
"""

from collective_cases import CROSSED, SKIPPED, SPINS, _module
from harness import Case

SIM = ["--backend=gpu-sim"]
AR = "  ROOT ar = f32[4] all-reduce(p), replica_groups={groups}, to_apply=add"


def _case(name, text, flags, mentions, expect="error", names="m.hlo", timeout=20, quick=True):
    def setup(ctx):
        ctx.write("m.hlo", text)
    return Case(id=f"gpu_collective/{name}", reader="gpu-collectives", args=["run", "m.hlo"] + list(flags),
                setup=setup, expect=expect, names=None if expect == "ok" else names, mentions=mentions,
                quick=quick, timeout=timeout)


def cases(shared, root_user):
    two = SIM + ["--num_replicas=2"]
    four = SIM + ["--num_replicas=4"]
    return [
        # Groups that do not fit the devices.
        _case("group-names-a-missing-replica", _module(AR.format(groups="{{0,1},{2,3}}")), two,
              r"%ar.*names replica 2"),
        _case("groups-leave-out-devices", _module(AR.format(groups="{{0,1,2,3}}")),
              SIM + ["--num_replicas=8"], r"%ar.*leaves out replicas 4, 5, 6, 7"),
        _case("replica-in-two-groups", _module(AR.format(groups="{{0,1},{1,2,3}}")), four,
              r"%ar.*replica 1 in two groups"),
        _case("replica-groups-counted-over-partitions", _module(AR.format(groups="{{0,1,2,3}}")),
              SIM + ["--num_replicas=2", "--num_partitions=2"], r"%ar.*names replica 2, but there are 2"),
        # Channels and permutations.
        # Two kinds of collective on one channel (an all-reduce, then an all-gather of its value).
        _case("channel-used-by-two-kinds",
              _module("  a = f32[4] all-reduce(p), channel_id=3, replica_groups={{0,1}}, "
                      "use_global_device_ids=true, to_apply=add\n  ROOT g = f32[8] all-gather(a), "
                      "channel_id=3, replica_groups={{1,0}}, use_global_device_ids=true, dimensions={0}"),
              two, r"channel_id=3.*%a.*%g"),
        _case("permute-source-used-twice",
              _module("  ROOT cp = f32[4] collective-permute(p), source_target_pairs={{0,1},{0,2}}"),
              SIM + ["--num_replicas=3"], r"%cp.*source twice"),
        # Collectives that can never complete: one line at once, or after --collective_timeout.
        _case("permute-leaves-a-device-waiting", SKIPPED, two, r"%cp.*device 1 never arrived"),
        _case("crossed-collectives-deadlock", CROSSED, two, r"deadlock"),
        _case("device-that-never-comes-is-left-behind", SPINS, two + ["--collective_timeout=0.5"],
              r"%ar.*within 0.5 s.*left behind"),
        # Real GPUs: more devices than any machine here has; refused before anything runs.
        _case("gpu-backend-more-devices-than-gpus", _module(AR.format(groups="{}")),
              ["--backend=gpu", "--num_replicas=64"], r"64 devices need 64 GPUs", names="--backend"),
        # The good form runs and matches the evaluator.
        _case("all-reduce-matches-the-evaluator", _module(AR.format(groups="[2,2]<=[4]")),
              four + ["--reference"], r"reference: .* match", expect="ok"),
    ]
