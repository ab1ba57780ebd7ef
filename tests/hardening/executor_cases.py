"""graph run: recursion through functions, loops whose iterations must not accumulate, inputs that expand."""

from harness import Case  # noqa: F401


def cases(shared, root_user):
    return []
