"""Writes that fail (stdout on a full device, a full disk), work kept on interruption, out-of-memory messages."""

from harness import Case  # noqa: F401


def cases(shared, root_user):
    return []
