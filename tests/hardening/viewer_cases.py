"""The viewer and Graphviz: layouts that blow up, HTML labels that name files, names and counts in messages."""

from harness import Case  # noqa: F401


def cases(shared, root_user):
    return []
