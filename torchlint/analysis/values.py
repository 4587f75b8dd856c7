"""What an expression or name holds, as far as autograd is concerned.

The lattice is deliberately small: a *leaf that requires grad* (a trainable
tensor), a *non-leaf* (the result of a differentiable op on something that
requires grad), a *plain* tensor (does not require grad), an ``nn.Module`` or
optimizer, a collection of values, or *unknown*.  Unknown means silence.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from typing import Callable, ClassVar, TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from torchlint.analysis.scopes import ClassInfo


class Kind(enum.Enum):
    LEAF = "leaf that requires grad"
    NONLEAF = "non-leaf tensor"
    PLAIN = "tensor that does not require grad"
    NUMBER = "Python number"
    MODULE = "nn.Module"
    OPTIMIZER = "optimizer"
    OBJECT = "instance of a class defined in this file"
    COLLECTION = "collection"
    UNKNOWN = "unknown"


TENSOR_KINDS = frozenset({Kind.LEAF, Kind.NONLEAF, Kind.PLAIN})
# Values known not to be a tensor.
NON_TENSOR_KINDS = frozenset({Kind.MODULE, Kind.OPTIMIZER, Kind.OBJECT, Kind.COLLECTION, Kind.NUMBER})
# Tags of values that require grad only by assumption (see ``Value.tags``).
ASSUMED_TAGS = frozenset({"assumed-leaf", "assumed"})
GRAD_KINDS = frozenset({Kind.LEAF, Kind.NONLEAF})
# Tag of an UNKNOWN value that a ``backward()`` went through (or computed from one): if it is a
# torch tensor, it carries a graph.
BACKPROPAGATED = "backpropagated"
# Tag of the NONLEAF ``leaf.to(device)``: on a GPU a copy, but the leaf itself when ``device`` is
# the CPU (measured: ``t.to(torch.device("cpu")) is t``).
LEAF_ON_CPU = "leaf-on-cpu"
# A non-leaf `.cuda()` copy of a leaf made on the CPU: a copy wherever the code runs at all.
COPIED_TO_GPU = "copied-to-gpu"
# Tag of an UNKNOWN value that is a leaf that requires grad on some path reaching it (the join of
# ``w = torch.zeros(3, requires_grad=True)`` in one branch with anything in the other); unlike other
# tags it survives a join with a value that does not carry it.
LEAF_ON_A_PATH = "leaf-on-a-path"
# Tag of the UNKNOWN copy ``w.to(device)`` / ``w.cuda()`` of such a value: a non-leaf on that path.
MOVED_LEAF_ON_A_PATH = "moved-leaf-on-a-path"
_PATH_TAGS = frozenset({LEAF_ON_A_PATH, MOVED_LEAF_ON_A_PATH})
# Tag of the UNKNOWN join of values that each require grad, a leaf on one path and a non-leaf on
# the other (``h = emb.weight`` joined with ``h = A @ h`` of a loop's earlier iteration): which
# it is is not known, but an op on it makes a non-leaf, and numpy of it raises.
REQUIRES_GRAD_ON_EVERY_PATH = "requires-grad-on-every-path"

# Tag of a NONLEAF view (``b = w.view(2, -1)``, ``w[0]``, ``w.t()``) of a leaf that requires grad,
# made in grad mode: an in-place op on it raises like one on the leaf itself (measured).
VIEW_OF_LEAF = "view-of-leaf"
# Tag of an UNKNOWN element of a module's submodule container (``for mi in m.m``, ``for c in
# self.convs``): its ``weight``/``bias`` is a parameter, as one reached by attributes is.
SUBMODULE_ELEMENT = "submodule-element"
# Tag of a MODULE value built from different classes that different call sites pass for a
# parameter (``fit(SoftmaxNet())`` in one script, ``fit(LogitNet())`` in another): which one runs
# depends on the caller, so what is said of its output must hold for every one of them.
CLASS_PER_CALL_SITE = "class-per-call-site"
# Tag of an UNKNOWN element unpacked from a module call's output (``validity, label = D(x)``):
# what the module's ``forward`` returns there is asked later (``ValueFacts.forward_returns``).
MODEL_OUTPUT_ITEM = "model-output-item"


@dataclass(frozen=True, eq=False)
class Value:
    """An abstract value.  ``origin`` is the expression that produced it."""

    kind: Kind
    origin: cst.CSTNode | None = None
    # For MODULE/OBJECT values built from a class defined in this file.
    cls: ClassInfo | None = None
    # For COLLECTION values: what iterating over it yields.
    element: Value | None = None
    # For fixed-size tuples (``enumerate`` pairs ...): the value of each position.
    items: tuple[Value, ...] | None = None
    # Provenance facts rules may ask about, e.g. "grad" (a .grad tensor),
    # "data" (a .data view), "detached" (lost its graph: .item(), .detach(), no_grad),
    # "rebound-leaf" (a leaf rebound to a value derived from itself),
    # "device-dependent" (leaf on CPU, non-leaf on GPU), "retains-grad",
    # "assumed-leaf" (a name only guessed to be a trainable leaf because its .grad is read),
    # "assumed" (a non-leaf computed only from assumed leaves: it may not require grad at all),
    # "softmax" (the output of a softmax: probabilities), on MODULE values "softmax-output"
    # (calling it returns a softmax), on COLLECTION values "empty" (a literal ``[]`` nothing
    # was appended to yet), on NUMBER values "zero" (a literal 0: an accumulator's start) and "integral" (an int or bool).
    tags: frozenset[str] = field(default_factory=frozenset)
    # For a MODULE value built from different classes of the project on different paths
    # (``netD = NetA() if imagenet else NetB()``; ``cls`` is None then): those classes.
    alternatives: tuple[ClassInfo, ...] = ()
    # For a dict literal (``{"mse": nn.MSELoss()}``): what indexing it gives (``element`` is what
    # iterating gives: its keys).  Not a field (every value would pay for setting it): set on
    # the few dict values by ``with_entries``; ``replace`` and ``join`` drop it (unknown).
    entries: ClassVar[Value | None] = None
    # For the output of a module whose ``forward`` the analysis knows (``model(x)``, an element
    # of it), and for the join of such outputs on different paths (``with torch.no_grad(): out =
    # model(x)`` in one branch, ``out = model(x)`` in the other): where each path's output came
    # from (the module calls, or the unpacking targets / subscripts of their elements), for
    # ``ValueFacts`` to ask each.  Not a field either (set by ``with_outputs``; ``replace`` drops it).
    outputs: ClassVar[tuple[cst.CSTNode, ...]] = ()
    # For a torch module handed in from another file (``importers.py``): the torch class it was
    # built from, qualified with that file's imports (``torch.nn.NLLLoss``).  Set by
    # ``with_torch_class``; ``replace`` and ``join`` drop it.
    torch_class: ClassVar[str | None] = None

    @property
    def requires_grad(self) -> bool:
        return self.kind in GRAD_KINDS

    @property
    def certainly_requires_grad(self) -> bool:
        """Requires grad, and not just by the guess that made an assumed leaf."""
        return self.requires_grad and not self.tags & ASSUMED_TAGS

    @property
    def is_tensor(self) -> bool:
        return self.kind in TENSOR_KINDS

    @property
    def carries_grad(self) -> bool:
        """A tensor that requires grad, or a collection (list, tuple) holding one."""
        if self.kind is Kind.COLLECTION:
            if self.items is not None:
                return any(item.carries_grad for item in self.items)
            return self.element is not None and self.element.carries_grad
        return self.requires_grad

    def tagged_within(self, tags: frozenset[str]) -> bool:
        """This value, or (for a collection) what it holds, carries one of ``tags``."""
        if self.kind is Kind.COLLECTION:
            if self.items is not None:
                return any(item.tagged_within(tags) for item in self.items)
            return self.element is not None and self.element.tagged_within(tags)
        return bool(self.tags & tags)

    @property
    def has_no_graph(self) -> bool:
        """A tensor known to have lost its graph: computed under no_grad/inference_mode, or from
        ``.detach()``, ``.item()``/``float()``/NumPy, or a ``torch.tensor(...)`` copy."""
        return self.kind is Kind.PLAIN and "detached" in self.tags

    def with_entries(self, entries: Value) -> Value:
        """This collection, indexed as a dict whose values are ``entries``."""
        value = replace(self)
        object.__setattr__(value, "entries", entries)
        return value

    def with_outputs(self, outputs: tuple[cst.CSTNode, ...]) -> Value:
        """This value, known to be the output of the module calls (or elements) ``outputs``."""
        value = replace(self)
        object.__setattr__(value, "outputs", outputs)
        return value

    def with_torch_class(self, torch_class: str) -> Value:
        """This module, built from the torch class ``torch_class`` (in another file)."""
        value = replace(self)
        object.__setattr__(value, "torch_class", torch_class)
        return value

    def tagged(self, *tags: str) -> Value:
        return replace(self, tags=self.tags | frozenset(tags))

    def with_kind(self, kind: Kind, origin: cst.CSTNode | None = None) -> Value:
        return replace(self, kind=kind, origin=origin if origin is not None else self.origin)

    def __repr__(self) -> str:  # compact, for debugging and test failures
        extra = f" tags={sorted(self.tags)}" if self.tags else ""
        return f"Value({self.kind.name}{extra})"


UNKNOWN = Value(Kind.UNKNOWN)
NUMBER = Value(Kind.NUMBER)
ZERO = Value(Kind.NUMBER, tags=frozenset({"zero"}))
# A name bound to a torch object itself (``self.softmax = F.softmax``, ``nn = torch.nn``): the tag
# is this prefix and the qualified name; ``Analyzer.qualify`` reads the name through it.
TORCH_NAME = "torch-name:"


def torch_name_of(value: Value) -> str | None:
    """``torch.nn.functional.softmax`` for a value bound to that function (see TORCH_NAME)."""
    for tag in value.tags:
        if tag.startswith(TORCH_NAME):
            return tag[len(TORCH_NAME):]
    return None


# A NumPy array of numbers (``np.zeros(n)``): what is stored into it is converted to a number.
NUMPY_ARRAY = "numpy-array"
# An int or bool (a literal, ``len(x)``, int arithmetic): tensors made from such data are integral.
INTEGRAL = "integral"
INTEGER = Value(Kind.NUMBER, tags=frozenset({INTEGRAL}))
ZERO_INTEGER = Value(Kind.NUMBER, tags=frozenset({"zero", INTEGRAL}))


def join(a: Value | None, b: Value | None) -> Value:
    """Merge two control-flow paths: equal kinds survive, anything else is unknown."""
    if a is b and a is not None:
        return a
    if (
        a is not None and b is not None and a.kind is b.kind is Kind.MODULE
        and (a.cls is not b.cls or a.alternatives or b.alternatives)
    ):
        return _module_of_either_class(a, b)
    if a is None or b is None or a.kind != b.kind or a.cls is not b.cls:
        joined = _some_path_value(a, b)
        return _joined_outputs(joined, a, b) if a is not None and b is not None and a.outputs and b.outputs else joined
    element = None
    if a.kind is Kind.COLLECTION:
        # An empty list joined with a list of X (the path that appended to it) is a list of X.
        if "empty" in a.tags:
            element = b.element
        elif "empty" in b.tags:
            element = a.element
        else:
            element = join(a.element, b.element)
    joined = Value(a.kind, a.origin, a.cls, element, None, a.tags & b.tags | (a.tags | b.tags) & _PATH_TAGS)
    if a.outputs or b.outputs:
        # (With a module's output on one path only, ``a.origin`` tells nothing of the other.)
        return _joined_outputs(joined, a, b) if a.outputs and b.outputs else joined.with_outputs(_NOT_AN_OUTPUT)
    return joined


# ``Value.outputs`` of a value that is a module's output on some paths only: no module call.
_NOT_AN_OUTPUT = (cst.Pass(),)


def _joined_outputs(joined: Value, a: Value, b: Value) -> Value:
    """``joined`` (of two module outputs) still known as the output of each path's module call."""
    outputs = a.outputs + tuple(o for o in b.outputs if all(o is not seen for seen in a.outputs))
    return joined.with_outputs(outputs)


def join_call_sites(values: list[Value]) -> Value:
    """The join of what several call sites pass for one parameter: a module built from
    different classes at different sites is tagged ``CLASS_PER_CALL_SITE``; torch modules built
    in other files from one torch class keep it."""
    joined = values[0]
    for value in values[1:]:
        joined = join(joined, value)
    if joined.alternatives and any(_classes(value) != _classes(values[0]) for value in values[1:]):
        return joined.tagged(CLASS_PER_CALL_SITE)
    torch_class = values[0].torch_class
    if torch_class is not None and joined.kind is Kind.MODULE and all(v.torch_class == torch_class for v in values):
        return joined.with_torch_class(torch_class)  # (torch modules of one class, from other files)
    return joined


def _classes(value: Value) -> frozenset[int]:
    return frozenset(id(cls) for cls in ((value.cls,) if value.cls is not None else value.alternatives))


def _module_of_either_class(a: Value, b: Value) -> Value:
    """A module built from one project class on one path and another on the other: still a
    module, whose ``forward`` is one of theirs.  With a torch module (or one of unknown class)
    on a path, the class is not known: unknown."""
    classes: list[ClassInfo] = []
    for value in (a, b):
        if value.cls is None and not value.alternatives:
            return _some_path_value(a, b)
        for cls in (value.cls,) if value.cls is not None else value.alternatives:
            if all(cls is not seen for seen in classes):
                classes.append(cls)
    tags = a.tags & b.tags | (a.tags | b.tags) & _PATH_TAGS
    return Value(Kind.MODULE, a.origin, tags=tags, alternatives=tuple(classes))


def _some_path_value(a: Value | None, b: Value | None) -> Value:
    """The join of two values of different kinds (None: not bound on that path): unknown, but
    still known to be (a copy of) a leaf that requires grad on one of the paths."""
    tags = frozenset()
    for value in (a, b):
        if value is None:
            continue
        if value.kind is Kind.LEAF and not value.tags & ASSUMED_TAGS:
            tags |= {LEAF_ON_A_PATH}
        tags |= value.tags & _PATH_TAGS
    if a is not None and b is not None and _requires_grad_certainly(a) and _requires_grad_certainly(b):
        tags |= {REQUIRES_GRAD_ON_EVERY_PATH}
    return Value(Kind.UNKNOWN, tags=tags) if tags else UNKNOWN


def _requires_grad_certainly(value: Value) -> bool:
    return (value.certainly_requires_grad or REQUIRES_GRAD_ON_EVERY_PATH in value.tags) and value.kind is not Kind.COLLECTION


def join_states(
    a: dict[str, Value], b: dict[str, Value], unbound_where_missing: Callable[[str], bool] | None = None
) -> dict[str, Value]:
    """Merge two name->value maps.  A name bound on one path only becomes unknown, unless
    ``unbound_where_missing(name)`` says the other path leaves it unbound: then code that
    reads it afterwards ran the binding path (the other raises NameError), so it keeps that
    path's value (``for ...: loss = ...`` then ``loss.numpy()`` after the loop)."""
    merged: dict[str, Value] = {}
    for key in a.keys() | b.keys():
        left, right = a.get(key), b.get(key)
        if (left is None or right is None) and unbound_where_missing is not None and unbound_where_missing(key):
            merged[key] = left or right  # type: ignore[assignment]
        else:
            merged[key] = join(left, right)
    return merged
