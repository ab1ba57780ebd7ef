#!/usr/bin/env python3
"""Writes the broken bundles of this directory with Python's tarfile (run it here to remake them).

Each NAME.tar.gz is a hostile or damaged bundle; NAME.expected holds a piece of the one-line
message `xlens replay` must give for it (the readers' tests check both, and that nothing was
written outside the private directory). The bombs expand past the 1 MiB limit the tests set.
"""
import gzip
import io
import os
import tarfile

MANIFEST = b'{"format": 1, "modules": []}\n'


def member(name, data=b"", kind=tarfile.REGTYPE, link="", size=None):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    info.mode = 0o644
    info.mtime = 0
    info.size = len(data) if size is None else size
    if kind in (tarfile.CHRTYPE, tarfile.BLKTYPE):
        info.devmajor, info.devminor = 1, 3
    return info, (io.BytesIO(data) if kind == tarfile.REGTYPE else None)


def bundle(members, fmt=tarfile.PAX_FORMAT):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=fmt) as tar:
        for info, data in members:
            tar.addfile(info, data)
    return gzip.compress(raw.getvalue(), mtime=0)


def good():
    return bundle([member("manifest.json", MANIFEST), member("module_0001.m.before_optimizations.txt",
                                                              b"HloModule m\n")])


CASES = {
    "absolute_path": (bundle([member("manifest.json", MANIFEST),
                              member("/tmp/xlens_bundle_escape", b"x")]), "an absolute path"),
    "dotdot": (bundle([member("manifest.json", MANIFEST), member("../xlens_bundle_escape", b"x")]),
               "'..' component"),
    "dotdot_inside": (bundle([member("manifest.json", MANIFEST), member("a/../../escape", b"x")]),
                      "'..' component"),
    "symlink": (bundle([member("manifest.json", MANIFEST), member("etc", kind=tarfile.SYMTYPE, link="/etc"),
                        member("etc/passwd", b"x")]), "a symbolic link to /etc"),
    "hardlink": (bundle([member("manifest.json", MANIFEST),
                         member("passwd", kind=tarfile.LNKTYPE, link="/etc/passwd")]), "a hard link"),
    "char_device": (bundle([member("manifest.json", MANIFEST), member("null", kind=tarfile.CHRTYPE)]),
                    "a device"),
    "block_device": (bundle([member("manifest.json", MANIFEST), member("disk", kind=tarfile.BLKTYPE)]),
                     "a device"),
    "fifo": (bundle([member("manifest.json", MANIFEST), member("pipe", kind=tarfile.FIFOTYPE)]), "a FIFO"),
    "duplicate": (bundle([member("manifest.json", MANIFEST), member("manifest.json", MANIFEST)]),
                  "a second member of the same name"),
    "duplicate_dir_and_file": (bundle([member("manifest.json", MANIFEST), member("a/", kind=tarfile.DIRTYPE),
                                       member("a", b"x")]), "a second member of the same name"),
    "control_character": (bundle([member("manifest.json", MANIFEST), member("evil\x1b[2J.txt", b"x")]),
                          "a control character"),
    "bomb": (bundle([member("manifest.json", MANIFEST), member("zeros.npy", bytes(8 << 20))]),
             "compression bomb"),
    "bomb_many_members": (bundle([member("manifest.json", MANIFEST)] +
                                 [member(f"z{i}.npy", bytes(64 << 10)) for i in range(40)]),
                          "compression bomb"),
    "truncated": (good()[: len(good()) // 2], "truncated"),
    "gzip_of_not_a_tar": (gzip.compress(b"manifest.json" + bytes(200), mtime=0), "cannot be read as a .tar.gz"),
    "not_gzip": (b"PK\x03\x04 this is a zip, not a bundle" + bytes(100), "cannot be read as a .tar.gz"),
    "empty": (b"", "cannot be read as a .tar.gz"),
    "no_manifest": (bundle([member("module_0001.m.before_optimizations.txt", b"HloModule m\n")]),
                    "no manifest.json"),
    "bad_manifest": (bundle([member("manifest.json", b'{"format": 1, "modules": [{"id": "x"}]}')]),
                     "manifest.json"),
}

if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    for name, (data, expected) in CASES.items():
        with open(os.path.join(here, name + ".tar.gz"), "wb") as f:
            f.write(data)
        with open(os.path.join(here, name + ".expected"), "w") as f:
            f.write(expected + "\n")
