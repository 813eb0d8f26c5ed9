"""A model's sizes and device, read off its parameter tensors: declared once per class
(``n_visible = Axis("W", 0)``, ``device = DeviceOf("W")``) rather than a property each."""

from __future__ import annotations


class _ReadOnly:
    """A read-only attribute computed from the instance (as a ``property`` without a setter)."""

    def __init__(self, tensor: str, doc: str | None = None):
        self.tensor = tensor
        self.__doc__ = doc

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, obj, owner=None):
        return self if obj is None else self.read(getattr(obj, self.tensor))

    def __set__(self, obj, value) -> None:
        raise AttributeError(f"property {self.name!r} of {type(obj).__name__!r} object has no setter")

    def read(self, tensor):
        raise NotImplementedError


class Axis(_ReadOnly):
    """A size: the length of axis ``axis`` of the parameter tensor named ``tensor``, as an ``int``."""

    def __init__(self, tensor: str, axis: int, doc: str | None = None):
        super().__init__(tensor, doc)
        self.axis = axis

    def read(self, tensor) -> int:
        return int(tensor.shape[self.axis])


class DeviceOf(_ReadOnly):
    """The model's device: that of the parameter tensor named ``tensor``."""

    def read(self, tensor):
        return tensor.device
