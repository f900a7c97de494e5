"""The values the padded (`use_remove_padding: false`) path reads, kept beside the fake tensors.

Padded forwards look at the batch's layout before running the model: the first column any row
attends to (`logprob._first_attended_column`), which rows share a prompt (`torch.unique` in
`engine/shared_prefix.py`). Fake tensors have no values, so those reads fail. `KnownValues`
carries real values for the small integer and boolean tensors the dry run builds (ids, masks,
positions) and everything computed from them alone: such an op runs for real on the values as
well as on the fake tensors, and a read of a value (`int(t)`, `bool(t)`) or an op whose result
size depends on values (`unique`, `nonzero`, a boolean selection) answers from them. Float
tensors, large ones and anything touched by a fake weight stay fake, so the measured model work
is unchanged. The dry run's rows are distinct full-length rows (its worst case): every column
attended, no prompt shared, so the padded forward it measures is the plain one.
"""

from __future__ import annotations

from typing import Any

import torch
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensor,
)
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes
from torch.utils._pytree import tree_flatten, tree_map, tree_map_only
from torch.utils.weak import WeakIdKeyDictionary

# Tensors with more elements than this are not given values (a (rows, 1, T, T) attention mask
# is a shape to the dry run, not something to compute).
MAX_KNOWN_ELEMENTS = 1 << 20
_VALUED_DTYPES = (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)
_aten = torch.ops.aten


def _shapes(result: Any) -> list[Any]:
    flat = tree_flatten(result)[0]
    return [tuple(x.shape) if isinstance(x, torch.Tensor) else type(x) for x in flat]


class KnownValues(TorchDispatchMode):
    """Real values for the small integer/boolean fake tensors built without a fake input."""

    def __init__(self) -> None:
        super().__init__()
        self.values: WeakIdKeyDictionary = WeakIdKeyDictionary()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        known = all(self._has_value(t) for t in tensors)
        if func is _aten._local_scalar_dense.default and known:
            with _disable_current_modes():
                return self._value(args[0]).item()
        if not known:
            self._forget_written(func, args, kwargs)
            return func(*args, **kwargs)
        try:
            fake = func(*args, **kwargs)
        except (DataDependentOutputException, DynamicOutputShapeException):
            return self._from_real(self._real(func, args, kwargs), tensors)
        if not self._worth_knowing(fake):
            self._forget_written(func, args, kwargs)
            return fake
        real = self._real(func, args, kwargs)
        if _shapes(fake) != _shapes(real):  # a selection `FullMasks` answered as all true
            return self._from_real(real, tensors)
        self._remember(fake, real)
        return fake

    def _has_value(self, tensor: torch.Tensor) -> bool:
        # A plain tensor is its own value (a constant: `mask[:, :3] = 0` lifts the 0).
        return type(tensor) is torch.Tensor or tensor in self.values

    def _value(self, x: Any) -> Any:
        """A known tensor's value (a plain tensor is its own); anything else as it is."""
        if not isinstance(x, torch.Tensor) or type(x) is torch.Tensor:
            return x
        return self.values[x]

    def _real(self, func: Any, args: Any, kwargs: Any) -> Any:
        with _disable_current_modes():
            return func(*tree_map(self._value, args), **tree_map(self._value, kwargs))

    def _from_real(self, real: Any, inputs: list[torch.Tensor]) -> Any:
        """Fake tensors for an op whose result sizes only the values give."""
        mode = next((t.fake_mode for t in inputs if isinstance(t, FakeTensor)), None)
        assert mode is not None, "a value-dependent op on tensors the fake mode never saw"
        fake = tree_map_only(torch.Tensor, mode.from_tensor, real)
        self._remember(fake, real)
        return fake

    def _remember(self, fake: Any, real: Any) -> None:
        for f, r in zip(tree_flatten(fake)[0], tree_flatten(real)[0], strict=True):
            if isinstance(f, torch.Tensor):
                self.values[f] = r

    @staticmethod
    def _worth_knowing(result: Any) -> bool:
        tensors = [t for t in tree_flatten(result)[0] if isinstance(t, torch.Tensor)]
        return bool(tensors) and all(
            t.dtype in _VALUED_DTYPES and t.numel() <= MAX_KNOWN_ELEMENTS for t in tensors
        )

    def _forget_written(self, func: Any, args: Any, kwargs: Any) -> None:
        """A tensor written by an op not computed here no longer has the value on record."""
        schema = func._schema
        if not schema.is_mutable:
            return
        given = dict(zip((a.name for a in schema.arguments), args, strict=False)) | kwargs
        for argument in schema.arguments:
            if argument.alias_info is not None and argument.alias_info.is_write:
                for tensor in tree_flatten(given.get(argument.name))[0]:
                    if isinstance(tensor, torch.Tensor):
                        self._forget_storage(tensor)

    def _forget_storage(self, written: torch.Tensor) -> None:
        """Forget `written` and every tensor sharing its storage (a view's base, other views)."""
        storage = written.untyped_storage()._cdata
        for tensor in [t for t in self.values if t.untyped_storage()._cdata == storage]:
            self.values.pop(tensor, None)
