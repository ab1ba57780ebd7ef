"""Runs spread over processes (`xlens run|eval --distributed=mpi`), hostile, without mpirun.

Run outside mpirun, Open MPI starts a single rank (a singleton) that holds every device, so the
refusals a rank makes on its own show here: an engine xlens does not have, the MPI library
missing or not xlens's (XLENS_MPI_LIBRARY), a backend other than the CPU, a rank whose device
folder is missing. Each is one line naming the flag, the library or the folder, exit 1.
tests/runtime/mpi_run_test.py covers what needs several ranks under mpirun (a rank killed, a
rank missing its input while the others wait, a device late past --collective_timeout).
"""

from harness import Case

ADD = "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n"
MODULE = (f"HloModule m\n{ADD}ENTRY e {{\n  p = f32[4] parameter(0)\n"
          "  ROOT ar = f32[4] all-reduce(p), replica_groups={{0,1}}, use_global_device_ids=true, "
          "channel_id=1, to_apply=add\n}\n")


def _case(name, flags, names, mentions, env=None, setup_extra=None, command="run"):
    def setup(ctx):
        ctx.write("m.hlo", MODULE)
        if setup_extra:
            setup_extra(ctx)
    return Case(id=f"mpi/{name}", reader="mpi", args=[command, "m.hlo", "--num_partitions=2"] + list(flags),
                setup=setup, env=env or {}, expect="error", names=names, mentions=mentions, quick=True,
                timeout=30)


def _one_device_folder(ctx):
    import struct
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }"
    header += b" " * (63 - len(header)) + b"\n"
    ctx.write("inputs/device_0/arg0.npy", b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header
              + struct.pack("<4f", 1, 2, 3, 4))


def cases(shared, root_user):
    return [
        _case("unknown-engine", ["--distributed=gloo"], "--distributed", r"gloo not in \{mpi\}"),
        _case("library-missing", ["--distributed=mpi"], "nope.so",
              r"does not exist: XLENS_MPI_LIBRARY names it", env={"XLENS_MPI_LIBRARY": "{work}/nope.so"}),
        _case("library-not-xlens", ["--distributed=mpi"], "plugin.so",
              r"is not this xlens's MPI library|cannot load",
              env={"XLENS_MPI_LIBRARY": "{work}/plugin.so"},
              setup_extra=lambda ctx: ctx.write("plugin.so", b"\x7fELF not really a library")),
        _case("backend", ["--distributed=mpi", "--backend=gpu-sim"], "--backend=gpu-sim",
              r"--distributed=mpi runs on the CPU"),
        # A singleton rank holds devices 0 and 1; device_1/ is missing. Without Open MPI the
        # library is missing instead: one line either way.
        _case("device-folder-missing", ["--distributed=mpi", "--inputs=inputs"], None,
              r"rank 0 of 1: --inputs inputs: device_1/ is missing|built without Open MPI",
              setup_extra=_one_device_folder, command="eval"),
    ]
