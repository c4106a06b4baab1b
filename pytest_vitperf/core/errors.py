"""The error every layer raises for the user: a message that ends with what to do about it."""

from __future__ import annotations


class VitperfError(RuntimeError):
    """A failure with a message meant for the user, ending with what to do about it."""


class OutOfMemory(VitperfError):
    """An engine did not fit in the device's memory: a family that holds several engines at once falls back to one
    at a time."""


class NotBuilt(VitperfError):
    """This environment has no kernel for the combination (a library declined the shape or the GPU): it is skipped
    with the reason, not failed."""
