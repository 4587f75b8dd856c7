"""Which modules a value's graph goes through, and which modules an optimizer updates.

A *forward* is a call that runs a module: ``D(x)``, ``self.netD(x)``, a method of a module
(``netD_seq.netG_adv_loss(fake)``), a module's ``forward``.  Every value computed from a forward's
output carries it: through ops, unknown calls (``g_loss_module(fake_tex, ...)``,
``lambda_return(values, ...)``), tuple unpacking of a model's outputs, containers it is stored
in, and the values helpers of this file return from their arguments.  ``.detach()``, ``.item()``
and code under ``no_grad`` cut the graph, so they carry none.

Which modules an optimizer updates is read from what it was built from:
``Adam(M.parameters())``, ``params=M.sub.parameters()``, ``list(a.parameters()) +
list(b.parameters())``, ``itertools.chain``, param groups, a name bound to one of these, and
``self.opt = ...`` in ``__init__`` for the other methods of the class (``Adam(self.params)``: the
attribute followed), a parameter every call site of the function hands an optimizer whose modules
are known (in the callee's terms: the parameters those modules are passed as), an optimizer of
another object built in its class (``agent.actor_opt`` from ``Adam(self.actor.parameters())``:
``agent.actor``), and one a module keeps on itself where the file does not show its construction
(``agent.actor.optimizer``: ``agent.actor``).  Unknown (None) when the construction is not in the
file (a factory's result).

Module keys are dotted names, related when one is the other or a part of it: stepping
``net.encoder`` changes weights a forward of ``net`` saved, and stepping ``net`` changes those
of ``net.encoder``.

Tracking is on demand (``Analyzer.track_module_graph``): it costs nothing for files whose rules do not
ask.  The state is updated when a statement's bindings are applied, so a rule asking during the
statement sees the values before it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import libcst as cst

from torchlint.analysis import effects as call_effects
from torchlint.analysis import torch_api as api
from torchlint.analysis.events import EventKind
from torchlint.analysis.module_evidence import called_in
from torchlint.analysis.names import dotted_name, literal_bool
from torchlint.analysis.scopes import parameter_names
from torchlint.analysis.values import Kind
from torchlint.analysis.walk import children

if TYPE_CHECKING:
    from torchlint.analysis.analyzer import Analyzer
    from torchlint.analysis.effects import CallEffects
    from torchlint.analysis.events import AutogradEvent
    from torchlint.analysis.scopes import FunctionInfo

# How deep a name's assigned expression is followed to find what an optimizer was built from.
_MAX_PARAMETER_HOPS = 2
# Methods that store a submodule on a module under a name: ``self.add_module("D", D)``.
_SUBMODULE_REGISTRATION = frozenset({"add_module", "register_module"})


def element_key(expr: cst.BaseExpression) -> str | None:
    """The dotted name of ``expr``; of an element of a container (``self.q_nets[i]``, ``opts[0]``),
    the container's: for the graph a list of modules is one module, and a list of optimizers
    updates them all (an element's index is not followed)."""
    while type(expr) is cst.Subscript:
        expr = expr.value  # type: ignore[attr-defined]
    return dotted_name(expr)


def related(a: str, b: str) -> bool:
    """Module keys naming the same module, or one a submodule of the other."""
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


@dataclass(frozen=True, eq=False)
class Forward:
    """A call that ran a module; ``serial`` orders forwards (and steps) in analysis order."""

    call: cst.Call
    module: str  # the module's key: ``D``, ``self.netD``, ``net``
    serial: int
    # False for a single built-in layer applied to data: its backward needs its input, not its
    # weight, so a step over the weight changes nothing it saved.
    saves_parameters: bool
    # Known to be a module (its value, or ``D.parameters()`` / ``D.train()`` in the file); else a
    # callable handed in as a parameter (a model, or a loss function).
    is_module: bool = True
    function: object = None  # the FunctionInfo the call sits in (None: module level)


_NONE: frozenset[Forward] = frozenset()
_NOT_ASKED = object()


class ModuleGraph:
    """The forwards each name's value went through, per function (see the module docstring)."""

    def __init__(
        self,
        ctx: Analyzer,
        parent: ModuleGraph | None = None,
        callee: FunctionInfo | None = None,
        call: cst.Call | None = None,
        receiver: cst.BaseExpression | None = None,
        arguments: dict[str, cst.BaseExpression] | None = None,
    ) -> None:
        """The file's graph; with ``parent``, the graph of ``callee``'s body analysed for the
        effects of ``call`` (``analysis/effects.py``): ``receiver`` and ``arguments`` (parameter ->
        argument) are the call's, read in the parent's terms."""
        self._ctx = ctx
        self._through: dict[tuple[object, str], frozenset[Forward]] = {}
        self._assigned: dict[tuple[object, str], cst.BaseExpression] = {}
        # (function or class, container key) -> the optimizer constructions appended to it (root only).
        self._held_optimizers: dict[tuple[object, str], list[cst.Call]] = {}
        self._forwards: dict[int, Forward] = {}  # call id -> its forward (one per call node)
        self._last_forward: dict[tuple[object, str], Forward] = {}  # (function, module key) -> its latest forward
        self._module_keys: set[str] = set()  # names with module evidence (``D.parameters()``, ``D.train()``)
        # Modules some ``torch.optim`` optimizer built in the file updates.
        self.optimized_keys: set[str] = set()
        self.serial = parent.serial if parent is not None else 0
        self.bindings = 0  # counts bindings: ``_bound_at`` tells when a name was last bound
        self._bound_at: dict[tuple[object, str], int] = {}
        # ``self.*`` attributes per class: what a method left on the instance, for the others.
        self._class_through: dict[tuple[object, str], frozenset[Forward]] = {}
        self._call_effects: dict[int, CallEffects | None] = {}
        self.parent = parent
        self._root: ModuleGraph = parent.root if parent is not None else self
        self._definitions: set[str] | None = None
        self._callee = callee
        self._receiver_key = dotted_name(receiver) if receiver is not None else None
        self._arguments = arguments or {}
        self._locals = frozenset(parameter_names(callee.node)) if callee is not None else frozenset()
        # Effects analysis (``analysis/effects.py``): what the body did, in the root's terms.
        self.recorded: list[call_effects.Effect] = []
        self.returned: frozenset[Forward] = _NONE
        self.text_index: object = None  # (root) the file's functions read from its text (effects.py)
        self.module_event_sites: int | None = None  # (root) event sites of the module's own statements
        self.self_assignments: dict[int, frozenset[str]] = {}  # (root) function id -> the self.* it assigns
        self.effect_analyses = 0  # (root) callee bodies analysed
        # (Root) function id -> per call site seen: parameter -> the modules the optimizer passed
        # for it updates, in the callee's terms (None: not known).
        self._passed_optimizers: dict[int, list[dict[str, frozenset[str] | None]]] = {}
        # (Root) function id -> the forwards its own body made that its ``return`` statements return.
        self._own_returns: dict[int, frozenset[Forward]] = {}
        # (Root) class, name -> those forwards a method of the class returns as a name (``return a, loss``).
        # (None: several methods return the name.)
        self._returned_names: dict[tuple[object, str], tuple[object, frozenset[Forward]] | None] = {}
        # (Root) class, local name -> the ``self.*`` key a method stored it as (``self.add_module("D", D)``).
        self._self_aliases: dict[tuple[object, str], str] = {}
        self._stored_locals: dict[tuple[object, str], str] = {}  # (root) class, self.* key -> that local
        # (function, optimizer key) -> (the modules a factory returned it with, the binding it was).
        self._factory_outputs: dict[tuple[object, str], tuple[frozenset[str], int]] = {}

    @property
    def ctx(self) -> Analyzer:
        return self._ctx

    @property
    def root(self) -> ModuleGraph:
        return self._root

    def definitions(self) -> set[str]:
        """(Root) the names the file defines functions by (``def name``), read from its text."""
        if self._definitions is None:
            self._definitions = call_effects.defined_names(self._ctx.source)
        return self._definitions

    def in_progress(self, info: FunctionInfo) -> bool:
        """``info``'s body is being analysed for effects (a recursive call)."""
        graph: ModuleGraph | None = self
        while graph is not None:
            if graph._callee is info:
                return True
            graph = graph.parent
        return False

    # ------------------------------------------------------------ questions
    def forwards_of(self, expr: cst.CSTNode) -> frozenset[Forward]:
        """The forwards ``expr``'s value (at the current point) was computed through."""
        kind = type(expr)
        if kind is cst.Name or kind is cst.Attribute:
            key = dotted_name(expr)  # type: ignore[arg-type]
            if key is not None:
                found = self._key_forwards(key)
                if kind is cst.Attribute:
                    if expr.attr.value == "data":  # type: ignore[attr-defined]
                        return _NONE
                    found = found | self.forwards_of(expr.value)  # type: ignore[attr-defined]  # `outputs.loss`
                    if not found and self._last_forward:
                        stored = self._stored_by_forward(expr)  # type: ignore[arg-type]
                        found = frozenset({stored}) if stored is not None else found
                return found
        if kind is cst.Call:
            return self._forwards_of_call(expr)  # type: ignore[arg-type]
        if kind in (cst.Lambda, cst.SimpleString, cst.Integer, cst.Float, cst.Name):
            return _NONE
        found = _NONE
        for child in value_children(expr):
            found = found | self.forwards_of(child)
        return found

    def _stored_by_forward(self, attribute: cst.Attribute) -> Forward | None:
        """``encoder.z_mean`` read after ``encoder(x)`` in this function: a tensor the module's forward
        stored on it, so it carries that forward's graph -- the latest forward of the module (not a
        parameter, submodule or configuration attribute).  Only for a module whose class is not in
        this file: what a forward of this file stores is known exactly (``fresh_stores``)."""
        owner = dotted_name(attribute.value)
        forward = self._last_forward.get((self._ctx.function, owner)) if owner is not None else None
        attr = attribute.attr.value
        if forward is None or attr in api.BUILTIN_PARAMETER_ATTRS or attr in api.NOT_SUBMODULE_ATTRIBUTES:
            return None
        if self._ctx.value_of(attribute).kind is not Kind.UNKNOWN:
            return None  # a submodule, a parameter, a number ...
        if self._ctx.value_of(attribute.value).cls is not None:
            return None
        return forward

    def optimized_modules(self, optimizer: cst.BaseExpression) -> frozenset[str] | None:
        """The module keys ``optimizer`` was built from; None when that is not known."""
        if type(optimizer) is cst.Subscript:  # `self.q_optimizers[i]`: all that its container's optimizers update
            container = element_key(optimizer)
            held = self._held_optimizer_modules(container) if container is not None else None
            listed = self.assigned(container) if held is None and container is not None else None
            if type(listed) in (cst.List, cst.Tuple):  # `opts = [Adam(G.parameters()), Adam(D.parameters())]`
                held = self._modules_in(listed, _MAX_PARAMETER_HOPS)  # type: ignore[arg-type]
            elif type(listed) is cst.ListComp:  # `[Adam(a.parameters()) for a in self.actors]`
                held = self._modules_in_comprehension(listed)  # type: ignore[arg-type]
            if held is not None:
                return held if self.parent is None else frozenset(self._outer_key(k) for k in held)
        key = dotted_name(optimizer)
        argument = self._argument_of(key) if key is not None else None
        if argument is not None:
            return self.parent.optimized_modules(argument) if self.parent is not None else None
        factory = self._factory_outputs.get((self._ctx.function, key)) if key is not None else None
        if factory is not None and self._bound_at.get((self._ctx.function, key), 0) == factory[1]:
            # (not a module another optimizer of the file updates)
            keys = frozenset(k for k in factory[0] if not any(related(k, o) for o in self.root.optimized_keys))
            return keys if self.parent is None else frozenset(self._outer_key(k) for k in keys)
        value = self._ctx.value_of(optimizer)
        constructor = value.origin
        if type(constructor) is cst.Param and "from-call-sites" in value.tags:
            return self._passed_modules(constructor.name.value)  # `def update(qf, qf_opt)`
        # (the object an attribute optimizer is kept on: `agent` of `agent.actor_opt`; not `self`)
        owner = key.rpartition(".")[0] if key is not None and not key.startswith("self.") else ""
        if not isinstance(constructor, cst.Call):
            constructor = self.assigned(key) if key is not None else None
        if not isinstance(constructor, cst.Call):
            # `agent.actor.optimizer`, of a class the file does not show: an optimizer a module
            # keeps on itself updates that module.
            if owner and constructor is None and value.origin is None and self.is_module_key(owner):
                return frozenset({self._outer_key(owner)})
            return None
        keys = self._modules_in(constructor, _MAX_PARAMETER_HOPS)
        if keys is not None and owner and constructor is value.origin \
                and (self._ctx.function, key) not in self._assigned:
            # `agent.actor_opt` built in `Agent.__init__` as `Adam(self.actor.parameters())`: its
            # `self` is the object it is an attribute of (`agent.actor`).
            keys = frozenset(owner + k[4:] if k == "self" or k.startswith("self.") else k for k in keys)
        elif keys is not None and key is not None and key.startswith("self."):
            keys = self._as_attributes(keys)
        return keys if keys is None or self.parent is None else frozenset(self._outer_key(k) for k in keys)

    def _modules_in_comprehension(self, listed: cst.ListComp) -> frozenset[str] | None:
        """The modules the optimizers a list comprehension builds update: those its element hands
        over, the loop variable's being the container it iterates (``for a in self.actors``:
        ``self.actors``, one module for the graph)."""
        comp = listed.for_in
        if comp.inner_for_in is not None or type(comp.target) is not cst.Name:
            return None
        keys = self._modules_in(listed.elt, _MAX_PARAMETER_HOPS)
        if keys is None:
            return None
        variable = comp.target.value
        iterated = element_key(comp.iter)
        found = set()
        for key in keys:
            first, dot, rest = key.partition(".")
            if first != variable:
                found.add(key)
            elif iterated is None:
                return None  # (what the loop variable holds is not known)
            else:
                found.add(iterated + dot + rest)
        return frozenset(found)

    def _as_attributes(self, keys: frozenset[str]) -> frozenset[str]:
        """The modules of an optimizer kept on ``self``, built from locals of a method that stored
        them on ``self`` too (``D = Discriminator(); self.add_module("D", D); self.opt = Adam(D.parameters())``):
        their attribute keys."""
        function = self._ctx.function
        cls = function.cls if function is not None else None
        aliases = self.root._self_aliases
        if cls is None or not aliases:
            return keys
        renamed = set()
        for key in keys:
            first, dot, rest = key.partition(".")
            alias = aliases.get((cls, first)) if (function, first) not in self._bound_at else None
            renamed.add(alias + dot + rest if alias else key)
        return frozenset(renamed)

    def reset_modules(self, subject: cst.BaseExpression, is_optimizer: bool) -> frozenset[str] | None:
        """The module keys whose gradients ``subject.zero_grad()`` resets: an optimizer's, those it
        was built from; a module's, itself.  Each with what its root name was bound to
        (``net = model.module``: ``net`` and ``model.module``).  None when that is not known."""
        keys = self.optimized_modules(subject) if is_optimizer else None
        if not is_optimizer:
            key = dotted_name(subject)
            keys = frozenset([key]) if key is not None else None
        return None if keys is None else frozenset(alias for key in keys for alias in self._aliases(key))

    def _aliases(self, key: str) -> tuple[str, ...]:
        root, dot, rest = key.partition(".")
        bound = self.assigned(root)
        other = dotted_name(bound) if isinstance(bound, (cst.Name, cst.Attribute)) else None
        return (key,) if other is None else (key, other + dot + rest)

    def overwritten_modules(self, call: cst.Call) -> frozenset[str] | None:
        """The module keys whose parameters ``call`` overwrites in place, as a step does:
        ``M.load_state_dict(sd)`` of a module ``M``; None for any other call."""
        func = call.func
        if type(func) is not cst.Attribute:
            return None
        if func.attr.value not in api.PARAMETER_OVERWRITING_METHODS:
            return self._overwritten_by_project_method(func)
        key = dotted_name(func.value)
        if key is None or not (self.is_module_key(key) or self._ctx.value_of(func.value).kind is Kind.MODULE):
            return None
        return frozenset({self._outer_key(key)})

    def _overwritten_by_project_method(self, func: cst.Attribute) -> frozenset[str] | None:
        """``agent.update_network_parameters()``, a method of a class of another project file that
        loads state into modules it keeps (``self.target_actor.load_state_dict(sd)``): those modules."""
        receiver = dotted_name(func.value)
        if self._ctx.project is None or receiver is None or not self._ctx.made_project_objects():
            return None
        project = self._ctx.project_class_of(func.value)
        if project is None:
            return None
        attributes = project.overwritten_attributes(func.attr.value)
        if not attributes:
            return None
        return frozenset(self._outer_key(receiver + "." + a if a else receiver) for a in attributes)  # type: ignore[operator]

    def effects_of(self, call: cst.Call) -> CallEffects | None:
        """What ``call``, a call of a function of this file, does (``analysis/effects.py``); asked
        at the call (once per call node), None when it is not such a call or does nothing known.
        Event paths start inside the callee."""
        func = call.func
        kind = type(func)
        name = func.attr.value if kind is cst.Attribute else func.value if kind is cst.Name else None  # type: ignore[attr-defined]
        definitions = self._root._definitions  # (read directly: this runs for every call node)
        if definitions is None:
            definitions = self._root.definitions()
        if name is None or name not in definitions:
            return None
        known = self._call_effects.get(id(call), _NOT_ASKED)
        if known is not _NOT_ASKED:
            return known  # type: ignore[return-value]
        self._call_effects[id(call)] = None  # (recursion)
        info = self._ctx.resolve_function(func)
        if info is not None and self.parent is None and call.args and call_effects.may_have_effects(self, info):
            self._note_passed_optimizers(call, info)  # (only a callee whose text may step asks)
        result = None
        if info is not None and info.name != "__init__" and not info.is_property:
            result = call_effects.call_effects(self, call, info)
        self._call_effects[id(call)] = result
        return result

    def assigned(self, key: str) -> cst.BaseExpression | None:
        """The expression last assigned to ``key`` in this function (``self.x``: in this method,
        else in the class's ``__init__`` or another method)."""
        function = self._ctx.function
        found = self._assigned.get((function, key))
        if found is None and key.startswith("self.") and function is not None and function.cls is not None:
            found = self.root._assigned.get((function.cls, key))
        return found

    def held_since(self, forward: Forward, bindings: int) -> bool:
        """Some name of this function bound no later than binding number ``bindings`` (the start of
        a loop) still holds a value computed through ``forward``."""
        function = self._ctx.function
        return any(
            slot[0] is function and forward in forwards and self._bound_at.get(slot, 0) <= bindings
            for slot, forwards in self._through.items()
        )

    def is_module_key(self, key: str) -> bool:
        """Something in the file treats ``key`` as a module (its parameters, ``train()`` ...)."""
        if key in self._module_keys or self._ctx.value_of_key(key).kind is Kind.MODULE:
            return True
        if self.parent is None:
            function = self._ctx.function
            local = self._stored_locals.get((function.cls, key)) if function is not None else None
            return local is not None and local in self._module_keys  # `self.add_module("D", D)`, `D.parameters()`
        root_keys = self.root._module_keys
        return self._outer_key(key) in root_keys or (key.startswith("self.") and key in root_keys)

    # ------------------------------------------------------------ updates (from the analyzer)
    def bind(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        """``target = value``: what ``target`` goes through from now on."""
        if value is None:
            return
        if isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)) \
                and len(target.elements) == len(value.elements):
            pairs = [(t.value, v.value) for t, v in zip(target.elements, value.elements)]
            computed = [(t, self.forwards_of(v), v) for t, v in pairs]  # all before any binds
            for sub_target, forwards, sub_value in computed:
                self._set(sub_target, forwards, sub_value)
            return
        self._set(target, self.forwards_of(value), value)
        if type(value) is cst.Call and type(target) in (cst.Tuple, cst.List):
            self._note_factory_outputs(target)  # type: ignore[arg-type]

    def _note_factory_outputs(self, target: cst.Tuple | cst.List) -> None:
        """``netD_img, netD_seq, optimizer_netD = create_netD(opt)``: a factory returns an optimizer
        with the modules it built it from.  The one name the file steps or zeroes is the optimizer
        (none or several: not known which), the other names are modules it updates."""
        keys = [dotted_name(element.value) for element in target.elements]
        if len(keys) < 2 or None in keys:
            return
        source = self._ctx.source
        optimizers = [key for key in keys if _stepped_in(source, key)]  # type: ignore[arg-type]
        if len(optimizers) != 1:
            return
        modules = frozenset(key for key in keys if key not in optimizers)  # type: ignore[misc]
        slot = (self._ctx.function, optimizers[0])
        self._factory_outputs[slot] = (modules, self._bound_at.get(slot, 0))
        self._module_keys |= modules

    def bind_loop_target(self, target: cst.BaseExpression, iterable: cst.BaseExpression) -> None:
        self._set(target, self.forwards_of(iterable), None)

    def add(self, holder: cst.BaseExpression, value: cst.BaseExpression) -> None:
        """``holder`` now also holds ``value``: ``losses.append(loss)``, ``total += loss``, ``x[i] = y``."""
        key = dotted_name(holder)
        if key is not None and type(value) is cst.Call and self._is_optimizer_construction(value):
            self._note_held_optimizer(key, value)  # `self.q_optimizers.append(Adam(self.q_nets[i].parameters()))`
        forwards = self.forwards_of(value)
        if key is not None and forwards:
            slot = (self._ctx.function, key)
            self._through[slot] = self._through.get(slot, _NONE) | forwards

    def _is_optimizer_construction(self, call: cst.Call) -> bool:
        qualified = self._ctx.qualify(call.func) or ""
        return qualified.startswith(api.OPTIMIZER_PREFIX) and not qualified.startswith(api.NON_OPTIMIZER_PREFIXES)

    def _note_held_optimizer(self, key: str, construction: cst.Call) -> None:
        function = self._ctx.function
        owners = [function] + ([function.cls] if function is not None and function.cls is not None
                               and key.startswith("self.") else [])
        for owner in owners:
            self.root._held_optimizers.setdefault((owner, key), []).append(construction)

    def _held_optimizer_modules(self, container: str) -> frozenset[str] | None:
        """The modules the optimizers appended to ``container`` update (None: none appended)."""
        function = self._ctx.function
        held = self.root._held_optimizers.get((function, container))
        if held is None and container.startswith("self.") and function is not None and function.cls is not None:
            held = self.root._held_optimizers.get((function.cls, container))
        if held is None:
            return None
        keys: set[str] = set()
        for construction in held:
            found = self._modules_in(construction, _MAX_PARAMETER_HOPS)
            if found is None:
                return None
            keys |= found
        return frozenset(keys)

    def unbind(self, target: cst.BaseExpression) -> None:
        self._set(target, _NONE, None)

    def note_call(self, call: cst.Call) -> None:
        """Every call: ``D.parameters()`` / ``D.train()`` make ``D`` a module key; a
        ``torch.optim`` optimizer's construction tells which modules have one."""
        func = call.func
        if type(func) is cst.Attribute and func.attr.value in _SUBMODULE_REGISTRATION and self.parent is None:
            self._note_alias(call)
        if type(func) is cst.Attribute and func.attr.value in api.MODULE_GRAPH_EVIDENCE_METHODS:
            key = element_key(func.value)  # (`self.q_nets[i].parameters()`: the container holds modules)
            if key is not None:
                self._module_keys.add(key)
                if self.parent is not None:  # (what a callee finds holds for the file)
                    self.root._module_keys.add(key if key.startswith("self.") else self._outer_key(key))
            return
        if type(func) is cst.Attribute and func.attr.value in api.PARAMETER_OVERWRITING_METHODS:
            key = dotted_name(func.value)
            if key is not None and key not in self._module_keys and called_in(self._ctx.source, key):
                self._module_keys.add(key)  # `model_old.load_state_dict(sd)` and `model_old(x)`: a module
        qualified = self._ctx.qualify(func)
        if qualified is None and self._ctx.in_comprehension:
            self._forward(call)  # `[agent.actor(s) for agent in agents]`: what `agent` holds is known only here
        if qualified is not None:
            if qualified.startswith(api.OPTIMIZER_PREFIX) and not qualified.startswith(api.NON_OPTIMIZER_PREFIXES):
                self.optimized_keys |= self._modules_in(call, _MAX_PARAMETER_HOPS) or frozenset()
            if self.parent is None:
                return
        if self.parent is not None:
            self._record_event(call)
        effects = self.effects_of(call) if qualified is None else None
        if effects is None:
            return
        for key, forwards in effects.stored.items():
            self._bind_slot(key, forwards)
        function = self._ctx.function
        for key, value in effects.assigned.items():
            self._assigned[(function, key)] = value  # `self._build()` from `__init__`
            if function is not None and function.cls is not None and self.parent is None:
                self._assigned[(function.cls, key)] = value
        if self.parent is not None:
            here = call_effects.Place(call, self._ctx.function, self._ctx.statement)
            self.recorded.extend(replace(effect, path=(here, *effect.path)) for effect in effects.effects)

    def fresh_stores(self, call: cst.Call, info: FunctionInfo) -> CallEffects | None:
        """A call of a method that neither backpropagates nor steps: the ``self.*`` attributes it
        assigns, and what it returns, hold new forwards, made now, of the modules they went
        through where the callee's own analysis saw them (``policy_loss = self.get_p_loss(s)``;
        none known, or not analysed yet: no graph)."""
        receiver = dotted_name(call.func.value) if isinstance(call.func, cst.Attribute) else None
        if receiver is None or info.cls is None or not info.is_method:
            return None
        keys = call_effects.assigned_self_attributes(self, info)
        returned = self.root._own_returns.get(id(info), _NONE)
        if not keys and not returned:
            return None
        # (in the order the callee made them: serials order the forwards, and which one a message names)
        stored = {receiver + key[4:]: frozenset(self._made_again(call, old, receiver)
                                                for old in _in_order(self.root._through.get((info, key), _NONE)))
                  for key in sorted(keys)}  # (its binding in the callee's own analysis)
        again = frozenset(self._made_again(call, old, receiver) for old in _in_order(returned))
        return call_effects.CallEffects(returned=again, stored=stored)

    def _made_again(self, call: cst.Call, old: Forward, receiver: str) -> Forward:
        """``old``, a forward of a method's body, run again by ``call`` of it on ``receiver``."""
        self.serial += 1
        module = receiver + old.module[4:] if old.module.split(".")[0] == "self" else old.module
        return Forward(call, module, self.serial, old.saves_parameters, old.is_module, self._ctx.function)

    def note_return(self, value: cst.BaseExpression) -> None:
        """The function being analysed returns ``value``: (effects analysis) what the call
        returns; (the file's analysis) the forwards the body itself made on the instance
        (``self.*``) or of globals, made again by each call of it (``fresh_stores``)."""
        if self.parent is not None:
            self.returned = self.returned | self.forwards_of(value)
            return
        function = self._ctx.function
        if function is None or not function.is_method or function.runs_as_forward:
            return  # (only calls of methods are made fresh; ``forward`` runs as ``model(x)``)
        forwards = self.forwards_of(value)
        if not forwards:
            return
        names = parameter_names(function.node)
        own = frozenset(f for f in forwards if f.function is function and (
            (first := f.module.split(".")[0]) == "self" or first not in names and (function, first) not in self._bound_at))
        if own:
            self._own_returns[id(function)] = self._own_returns.get(id(function), _NONE) | own
            if function.cls is not None:
                elements = [e.value for e in value.elements] if type(value) in (cst.Tuple, cst.List) else [value]  # type: ignore[attr-defined]
                for element in elements:
                    if type(element) is cst.Name:
                        slot = (function.cls, element.value)  # type: ignore[attr-defined]
                        named = own & self.forwards_of(element)
                        known = self._returned_names.get(slot, (function, _NONE))
                        self._returned_names[slot] = (function, known[1] | named) \
                            if known is not None and known[0] is function else None

    def stored_attributes(self) -> dict[str, frozenset[Forward]]:
        """(Effects analysis) the ``self.*`` attributes the callee bound, in the root's terms."""
        function = self._ctx.function
        return {self._outer_key(key): self._through.get(slot, _NONE)
                for slot in self._bound_at if slot[0] is function and (key := slot[1]).startswith("self.")}

    def assigned_attributes(self) -> dict[str, cst.BaseExpression]:
        """(Effects analysis) what the callee assigned to ``self.*`` attributes (root's terms)."""
        function = self._ctx.function
        return {self._outer_key(key): value for (owner, key), value in self._assigned.items()
                if owner is function and key.startswith("self.")}

    def _note_passed_optimizers(self, call: cst.Call, info: FunctionInfo) -> None:
        """(Root) ``update(env, qf, qf_opt)``: which modules each optimizer the call hands
        ``info`` updates, in ``info``'s terms -- an argument module is the parameter it is passed
        as, the receiver is ``self``; a module the callee cannot name does not count."""
        from torchlint.analysis.functions import argument_expressions

        arguments = argument_expressions(call, info) or {}
        site: dict[str, frozenset[str] | None] = {}
        for param, expr in arguments.items():
            if self._ctx.value_of(expr).kind is Kind.OPTIMIZER:
                modules = self.optimized_modules(expr)
                site[param] = None if modules is None else self._in_callee_terms(modules, call, info, arguments)
        self._passed_optimizers.setdefault(id(info), []).append(site)

    def _in_callee_terms(self, modules: frozenset[str], call: cst.Call, info: FunctionInfo,
                         arguments: dict[str, cst.BaseExpression]) -> frozenset[str]:
        names = {name: param for param, expr in arguments.items() if (name := dotted_name(expr)) is not None}
        if info.is_method and type(call.func) is cst.Attribute and (receiver := dotted_name(call.func.value)):
            names[receiver] = "self"
        found: set[str] = set()
        for key in modules:
            for name, param in names.items():
                if key == name or key.startswith(name + "."):
                    found.add(param + key[len(name):])  # `qf` passed as `qf`, `net.enc` of `net` passed as `model`
                elif name.startswith(key + "."):
                    found.add(param)  # the optimizer updates all of the module passed
        return frozenset(found)

    def _passed_modules(self, param: str) -> frozenset[str] | None:
        """(Root) the modules the optimizer parameter ``param`` of this function updates: what
        every call site seen hands it (all of them, or not known)."""
        function = self._ctx.function
        sites = self._passed_optimizers.get(id(function), []) if self.parent is None and function is not None else []
        if not sites or len(sites) != len(function.call_arguments) or any(site.get(param) is None for site in sites):
            return None
        return frozenset().union(*(site[param] for site in sites))  # type: ignore[misc]

    def _note_alias(self, call: cst.Call) -> None:
        """(Root) ``self.add_module("D", D)`` in a method: the local ``D`` is ``self.D``."""
        args = [arg.value for arg in call.args if arg.keyword is None]
        function = self._ctx.function
        if len(args) == 2 and dotted_name(call.func.value) == "self" and type(args[0]) is cst.SimpleString \
                and type(args[1]) is cst.Name and function is not None and function.cls is not None:  # type: ignore[attr-defined]
            name = args[0].evaluated_value  # type: ignore[attr-defined]
            if isinstance(name, str) and name.isidentifier():
                self._alias(function.cls, args[1].value, "self." + name)  # type: ignore[attr-defined]

    def _alias(self, cls: object, local: str, key: str) -> None:
        """The local ``local`` of a method of ``cls`` is stored as ``key``; a local stored as two
        attributes is neither ("" -- not known which one an optimizer was built from)."""
        known = self._self_aliases.get((cls, local))
        self._self_aliases[(cls, local)] = key if known is None or known == key else ""
        self._stored_locals[(cls, key)] = local

    def _record_event(self, call: cst.Call) -> None:
        event = self._ctx.autograd_event(call)
        if event is None or event.subject is None:
            overwritten = self.overwritten_modules(call) if event is None else None
            if overwritten is not None:  # `self.target.load_state_dict(sd)`: a step of the target
                here = (call_effects.Place(call, self._ctx.function, self._ctx.statement),)
                self.recorded.append(call_effects.Effect(EventKind.STEP, here, self.serial, modules=overwritten))
            return
        here = (call_effects.Place(call, self._ctx.function, self._ctx.statement),)
        if event.kind in (EventKind.BACKWARD, EventKind.GRAD):
            self.recorded.append(call_effects.Effect(
                event.kind, here, self.serial, self.forwards_of(event.subject), keeps_graph=self._keeps_graph(event)))
        elif event.kind is EventKind.STEP:
            self.recorded.append(call_effects.Effect(
                event.kind, here, self.serial, modules=self.optimized_modules(event.subject)))

    def _keeps_graph(self, event: AutogradEvent) -> bool:
        """``retain_graph=retain_graph``: the argument the call passes, or the parameter's default."""
        if event.retain_graph is not None:
            return event.retain_graph
        for arg in event.node.args:  # type: ignore[attr-defined]
            if arg.keyword is None or arg.keyword.value not in (*api.RETAIN_GRAPH_KEYWORDS, "create_graph"):
                continue
            if type(arg.value) is not cst.Name:
                return False
            name = arg.value.value
            passed = self._arguments.get(name)
            if passed is None and self._callee is not None:
                passed = _default_of(self._callee, name)
            return literal_bool(passed) is True
        return False

    # ------------------------------------------------------------ bookkeeping
    def _set(self, target: cst.BaseExpression, forwards: frozenset[Forward], value: cst.BaseExpression | None) -> None:
        if type(target) in (cst.Tuple, cst.List):
            for element in target.elements:  # a model's outputs unpacked: each carries the graph
                self._set(element.value, forwards, None)
            return
        if type(target) is cst.StarredElement:
            self._set(target.value, forwards, None)
            return
        if type(target) is cst.Subscript:
            if value is not None:
                self.add(target.value, value)  # `outputs[i] = D(x)`
            return
        key = dotted_name(target)
        if key is None:
            return
        function = self._ctx.function
        slot = (function, key)
        self._bind_slot(key, forwards)
        if value is not None:
            self._assigned[slot] = value
            if key.startswith("self.") and function is not None and function.cls is not None:
                self._assigned[(function.cls, key)] = value
                if type(value) is cst.Name and self.parent is None:
                    self._alias(function.cls, value.value, key)  # `self.D = D`
        else:
            self._assigned.pop(slot, None)

    def _forwards_of_call(self, call: cst.Call) -> frozenset[Forward]:
        func = call.func
        if type(func) is cst.Attribute and func.attr.value in api.GRAPH_CUTTING_METHODS:
            return _NONE
        if self._ctx.grad_mode.statically_disabled:
            return _NONE  # no graph under no_grad()
        found = _NONE
        if type(func) is cst.Attribute:
            found = self.forwards_of(func.value)
        for arg in call.args:
            found = found | self.forwards_of(arg.value)
        forward = self._forward(call)
        if forward is not None:
            found = found | {forward}
        effects = self.effects_of(call)
        if effects is not None:
            found = found | effects.returned  # what a helper of this file returns
        return found

    def _key_forwards(self, key: str) -> frozenset[Forward]:
        """The forwards the value bound to ``key`` went through: bound in this function, else (an
        effects analysis) the caller's argument or receiver attribute, else what a method of the
        class left on ``self``."""
        function = self._ctx.function
        slot = (function, key)
        found = self._through.get(slot)
        if found is not None:
            return found
        if slot in self._bound_at:
            return _NONE
        if self.parent is not None:
            first, dot, rest = key.partition(".")
            argument = self._arguments.get(first)
            if argument is not None and first in self._locals:
                return self.parent.forwards_of(argument)
            if first == "self" and self._receiver_key is not None:
                found = self.parent._key_forwards(self._receiver_key + dot + rest)
                if found or self._receiver_key == "self":
                    return found
        if key.startswith("self.") and function is not None and function.cls is not None:
            return self.root._class_through.get((function.cls, key), _NONE)
        if self.parent is None and function is not None and function.cls is not None and not function.call_arguments:
            return self._handed_back(function, key)
        return _NONE

    def _handed_back(self, function: FunctionInfo, key: str) -> frozenset[Forward]:
        """A parameter of a method no code of this file calls: what another method of the class
        returns under the parameter's name, handed back by the caller (``outputs, gen_loss,
        dis_loss = model.process(x)`` then ``model.backward(gen_loss, dis_loss)``): its forwards,
        made before this call."""
        returned = self._returned_names
        if not returned or "." in key or key not in parameter_names(function.node) or key == "self":
            return _NONE
        found = returned.get((function.cls, key))
        return found[1] if found is not None else _NONE  # (returned by one method only)

    def _bind_slot(self, key: str, forwards: frozenset[Forward]) -> None:
        function = self._ctx.function
        slot = (function, key)
        self.bindings += 1
        self._bound_at[slot] = self.bindings
        if forwards:
            self._through[slot] = forwards
        else:
            self._through.pop(slot, None)
        if self.parent is None and key.startswith("self.") and function is not None and function.cls is not None:
            self._class_through[(function.cls, key)] = forwards

    def _argument_of(self, key: str) -> cst.BaseExpression | None:
        """(Effects analysis) the caller's argument a parameter ``key`` holds, if not rebound."""
        if self.parent is None or key not in self._arguments or key not in self._locals:
            return None
        return None if (self._ctx.function, key) in self._bound_at else self._arguments[key]

    def _outer_key(self, key: str) -> str:
        """``key`` of the callee's body in the root's terms: ``self.net`` of ``critic.learn()`` is
        ``critic.net``, a parameter is its argument; the callee's own locals get a name of their own."""
        if self.parent is None:
            return key
        first, dot, rest = key.partition(".")
        if first == "self" and self._receiver_key is not None:
            outer = self._receiver_key + dot + rest
        elif first in self._arguments and dotted_name(self._arguments[first]) is not None:
            outer = dotted_name(self._arguments[first]) + dot + rest  # type: ignore[operator]
        elif first in self._locals or (self._ctx.function, first) in self._bound_at or first == "self":
            return f"{self._callee.name}:{key}" if self._callee is not None else key
        else:
            outer = key  # a global
        return self.parent._outer_key(outer)

    def _forward(self, call: cst.Call) -> Forward | None:
        """The forward ``call`` is, if it runs a module."""
        known = self._forwards.get(id(call))
        if known is not None:
            return known
        module = self._module_called(call)
        if module is None:
            return None
        key, saves, is_module = module
        self.serial += 1
        forward = Forward(call, self._outer_key(key), self.serial, saves, is_module, self._ctx.function)
        self._forwards[id(call)] = forward
        self._last_forward[(self._ctx.function, key)] = forward
        return forward

    def _module_called(self, call: cst.Call) -> tuple[str, bool, bool] | None:
        """(the module's key, whether its graph saves its parameters, whether it is known to be a
        module) when ``call`` runs a module, or may (a callable parameter)."""
        ctx, func = self._ctx, call.func
        if type(func) is cst.Subscript:  # `self.q_nets[i](x)`: an element of a container of modules
            container = element_key(func)
            if container is None or ctx.value_of(func).kind not in (Kind.MODULE, Kind.UNKNOWN):
                return None
            held = ctx.value_of(func.value)
            if self.is_module_key(container) or held.kind is Kind.MODULE:  # (`self.actors[j]` of an `nn.ModuleList`)
                return container, self._elements_save_parameters(call, held.origin), True
            return None
        key = dotted_name(func)
        if key is None or ctx.qualify(func) is not None:
            return None
        value = ctx.value_of(func)
        if value.kind is Kind.MODULE:
            if "parameterless" in value.tags:
                return None
            return key, self._saves_parameters(call, value.origin if value.cls is None else None), True
        if value.kind is not Kind.UNKNOWN:
            return None
        if self.is_module_key(key):
            return key, True, True
        if type(func) is cst.Name and "param" in value.tags:
            return key, True, False
        if type(func) is cst.Attribute and func.attr.value not in api.NOT_FORWARD_METHODS:
            receiver = dotted_name(func.value)
            if receiver is not None and self.is_module_key(receiver):
                return receiver, True, True  # `netD_seq.netG_adv_loss(fake)`: a method of the module
            if receiver is not None and func.attr.value == "forward" and ctx.value_of(func.value).kind is Kind.UNKNOWN:
                self._module_keys.add(receiver)  # `agent.actor.forward(s)`: what has a forward is a module
                return receiver, True, True
        return None

    def _elements_save_parameters(self, call: cst.Call, container: cst.CSTNode | None) -> bool:
        """An element of ``nn.ModuleList([nn.Linear(4, 2) for _ in range(n)])`` applied to data saves
        its input, not its weight (as the one layer would); any other element: its parameters."""
        if type(container) is not cst.Call or not container.args:  # type: ignore[attr-defined]
            return True
        listed = container.args[0].value  # type: ignore[attr-defined]
        if type(listed) is cst.ListComp:
            constructors = [listed.elt]  # type: ignore[attr-defined]
        elif type(listed) in (cst.List, cst.Tuple):
            constructors = [element.value for element in listed.elements]  # type: ignore[attr-defined]
        else:
            return True
        return not constructors or any(self._saves_parameters(call, constructor) for constructor in constructors)

    def _saves_parameters(self, call: cst.Call, constructor: cst.CSTNode | None) -> bool:
        """A single built-in layer (``nn.Linear``) on data saves its input, not its weight."""
        if not isinstance(constructor, cst.Call):
            return True
        layer = self._ctx.qualify(constructor.func) or ""
        if layer in api.CONTAINER_MODULES or not layer.startswith("torch.nn."):
            return True
        return any(self._ctx.value_of(arg.value).certainly_requires_grad for arg in call.args)

    def _modules_in(self, node: cst.CSTNode, hops: int) -> frozenset[str] | None:
        """Module keys whose parameters ``node`` (an optimizer's construction) hands over;
        names are followed to what they were assigned (``params = list(G.parameters()) + ...``)."""
        keys: set[str] = set()
        unresolved = False
        todo: list[cst.CSTNode] = [node]
        while todo:
            current = todo.pop()
            kind = type(current)
            if kind is cst.Call:
                func = current.func  # type: ignore[attr-defined]
                if type(func) is cst.Attribute and func.attr.value in api.PARAMETER_SOURCES:
                    key = element_key(func.value)
                    unresolved = unresolved or key is None
                    keys.update([key] if key is not None else [])
                else:  # `Adam(...)`, `list(...)`, `chain(...)`: what they are handed
                    todo.extend(arg.value for arg in current.args if not _is_option(arg))  # type: ignore[attr-defined]
            elif kind is cst.Name or kind is cst.Attribute and dotted_name(current) is not None:  # type: ignore[arg-type]
                if self._ctx.value_of(current).kind is Kind.LEAF:  # type: ignore[arg-type]
                    continue  # `Adam([w])`: a tensor, not a module
                name = dotted_name(current)  # type: ignore[arg-type]  # `params`, `self.critic_params`
                assigned = self.assigned(name) if hops > 0 and name is not None else None
                inner = self._modules_in(assigned, hops - 1) if assigned is not None else None
                if inner is None:
                    unresolved = True
                else:
                    keys |= inner
            elif kind is not cst.Lambda:
                todo.extend(children(current))
        if unresolved and not keys:
            return None
        return frozenset(keys)


def _in_order(forwards: frozenset[Forward]) -> list[Forward]:
    return sorted(forwards, key=lambda forward: forward.serial)


def _stepped_in(source: str, key: str) -> bool:
    """``key.step(`` or ``key.zero_grad(`` appears in ``source``: an optimizer (or a scheduler).
    (The literal is searched for, then what surrounds it: a leading lookbehind would be tried at
    every position of the source.)"""
    prefix = key + "."
    start = source.find(prefix)
    while start >= 0:
        before = source[start - 1] if start else " "
        if not (before.isalnum() or before in "_.") and _STEP_CALL.match(source, start + len(prefix)):
            return True
        start = source.find(prefix, start + 1)
    return False


_STEP_CALL = re.compile(r"(?:step|zero_grad)\s*\(")


def _default_of(info: FunctionInfo, name: str) -> cst.BaseExpression | None:
    params = info.node.params
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        if param.name.value == name:
            return param.default
    return None


def _is_option(arg: cst.Arg) -> bool:
    """A keyword argument of an optimizer that is not its parameters."""
    return arg.keyword is not None and arg.keyword.value not in ("params", "param_groups")


def value_children(expr: cst.CSTNode) -> list[cst.CSTNode]:
    """The sub-expressions whose values flow into ``expr``'s value."""
    if type(expr) is cst.Call:
        func = expr.func
        receiver = [func.value] if type(func) is cst.Attribute else []
        return [*receiver, *(arg.value for arg in expr.args)]
    if type(expr) is cst.BinaryOperation:
        return [expr.left, expr.right]
    if type(expr) is cst.UnaryOperation:
        return [expr.expression]
    if type(expr) is cst.BooleanOperation:
        return [expr.left, expr.right]
    if type(expr) is cst.Comparison:
        return [expr.left, *(target.comparator for target in expr.comparisons)]
    if type(expr) is cst.IfExp:
        return [expr.body, expr.orelse]
    if type(expr) is cst.Subscript:
        return [expr.value]
    if type(expr) is cst.Attribute:
        return [expr.value]
    if type(expr) in (cst.List, cst.Tuple, cst.Set):
        return [element.value for element in expr.elements]
    if type(expr) is cst.Dict:
        return [element.value for element in expr.elements]
    if type(expr) in (cst.ListComp, cst.SetComp, cst.GeneratorExp):
        return [expr.elt, expr.for_in.iter]
    if type(expr) in (cst.StarredElement, cst.Await):
        return [expr.value if type(expr) is cst.StarredElement else expr.expression]
    return []


def covers(reset: frozenset[str], updated: frozenset[str]) -> bool:
    """A gradient reset of the modules ``reset`` reaches some parameter an optimizer of the modules
    ``updated`` steps (related keys: the same module, or one inside the other)."""
    return any(related(a, b) for a in reset for b in updated)


__all__ = ["Forward", "ModuleGraph", "covers", "related", "value_children"]
