"""The persistent compile cache: planted links, foreign and forged entries, huge entries."""

from harness import Case  # noqa: F401


def cases(shared, root_user):
    return []
