"""What autograd saved for backward, per function in program order, and what a call of one of
the file's functions or modules does to it: the model TL007 queries.

Which op saves what is data (``rules/_saved_tensors.toml``, ``torchlint.saved_tensors``).  A
tensor is identified by the expression that produced it (``TensorIdentities``: views and
``.detach()`` share their base's version counter).  ``SavedTensors`` walks a function (as hooks of
the analyzer) and keeps, per scope, which tensor which op saved; a backward() frees what it
reached.  The in-place changes it meets are handed to ``_on_change`` with the record of what
saved the changed tensor (a rule reports them); backward, step and return events go to the other
``_on_*`` hooks, no-ops here.

A call of a function or module of this file (``_HelperCall``) counts among the saving ops; what
it does is its summary (``SavedSummary``: whether what it returns is an output autograd saved,
which parameters its body saved, which it changes in place), asked only when something changes
the call's result or argument in place.  A summary walks the callee once per (callee, instance,
argument kinds, depth) with a rule-less analyzer and a ``SavedTensors`` of its own (a probe),
shared by every walker of the file; depth is bounded (``MAX_SUMMARY_DEPTH``) and a recursive call
answers "nothing known".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING

import libcst as cst

from torchlint import fixes
from torchlint.analysis import Kind, dotted_name, keyword_arg, positional_args
from torchlint.analysis.effects import CallEffects, blocks_of, defined_names
from torchlint.analysis.events import AutogradEvent, EventKind
from torchlint.analysis.instance_constants import built_by_call, constructor_literals, reachable
from torchlint.analysis.scopes import FunctionInfo
from torchlint.analysis.tensor_identity import NO_DEPS, Identity, TensorIdentities
from torchlint.analysis.torch_api import (
    ELEMENTWISE_OF_REDUCTION,
    OP_NAMESPACES,
    OPERATOR_OPS,
    STORING_METHODS,
    is_inplace_method,
)
from torchlint.analysis.values import UNKNOWN as UNKNOWN_VALUE, Value
from torchlint.saved_tensors import (
    BINARY_SAVES,
    BOTH,
    INPUT,
    NOTHING,
    OPERANDS,
    OTHER_OPERAND,
    OUT_OF_PLACE,
    OUTPUT,
    saved_tensor_table,
)

if TYPE_CHECKING:
    from torchlint.analysis.analyzer import Analyzer

# Calls of this file's functions inside the functions looked into: how deep summaries go.
MAX_SUMMARY_DEPTH = 3
# What a change's fix is made from, built only when the change is of a saved tensor: the name of
# the rule's fix (``method``, ``torch_function``, ``functional``, ``augassign``) and its arguments.
FixRecipe = tuple


@dataclass(frozen=True)
class Saved:
    op: cst.CSTNode  # the op that saved the tensor
    role: str  # OUTPUT (its result) or INPUT (one of its inputs)
    inside: str | None = None  # (a call of this file's function or module) the op in it that saved it


@dataclass(frozen=True)
class SavedSummary:
    """What a call of this file's function or module does to what autograd saved (``_summarise``)."""

    returns: str | None  # the op whose saved output every return the call can take gives
    saves: dict[str, str]  # parameter -> the op in the body that saved it for backward
    # The first in-place change of each parameter: (parameter, the change, how, its statement).
    writes: tuple[tuple[str, cst.CSTNode, str, cst.CSTNode | None], ...]


NO_SUMMARY = SavedSummary(None, {}, ())


@dataclass(frozen=True)
class Layers:
    """An ``nn.Sequential``'s layers, read where it is built (its arguments are that scope's names)."""

    first: Value  # the first layer (``*layers``: what the list holds)
    last: cst.Call | None  # the last layer's constructor (None: not known, or ``*layers``)
    trained_before_last: bool  # a layer before the last has parameters: the last one's input requires grad


@dataclass(frozen=True)
class _HelperCall:
    """A call of a function or module of this file: whether its result is an output autograd saved
    is asked when something changes it in place (``_helper_output``)."""

    call: cst.Call
    callee: FunctionInfo | None  # the function, or the module's ``forward``; None: an ``nn.Sequential``
    passed: dict[str, Value]  # parameter -> what the call passes
    instance: Value | None  # the module called (its constructor's literals decide branches)




@dataclass
class _Shared:
    """What every ``SavedTensors`` of one file's walk (the rule's and its probes') shares."""

    summaries: dict[tuple, SavedSummary] = field(default_factory=dict)  # (depth, callee, instance, kinds)
    layers: dict[int, Layers] = field(default_factory=dict)  # nn.Sequential constructor id -> its layers
    literals: dict[tuple[int, int], dict[str, object]] = field(default_factory=dict)  # (class, constructor)
    # function (or region) id -> its statements change a parameter (or anything) in place
    changing: dict[int, bool] = field(default_factory=dict)
    defined: set[str] | None = None  # names of the file's ``def`` statements


class SavedTensors:
    """Hooks of the analyzer (visit_/leave_ methods) tracking what autograd saved; a rule subclasses
    it and implements the ``_on_*`` hooks.  With ``probe_of`` it summarises that callee instead."""

    # Whether the effects of calls of the file's functions go to ``_on_call_effects`` (a rule
    # following optimizer steps; the module graph is tracked).
    _follows_calls = False

    def __init__(self, ctx: Analyzer, probe_of: FunctionInfo | None = None, shared: _Shared | None = None) -> None:
        self.ctx = ctx
        self._probe_of = probe_of
        self.probe_returns: list[tuple[cst.Return, str | None]] = []
        self.probe_writes: list[tuple[str, cst.CSTNode, str, cst.CSTNode | None]] = []
        # The callee's parameters by identity (a parameter's value is made by its ``Param`` node).
        params = probe_of.node.params if probe_of is not None else None
        listed = [*params.posonly_params, *params.params, *params.kwonly_params] if params is not None else []
        if probe_of is not None and probe_of.is_method:
            listed = listed[1:]
        self.probe_params: dict[Identity, str] = {id(param): param.name.value for param in listed}
        self._table = saved_tensor_table()
        self._operators = _saving_operators()
        self._saved: dict[object, dict[Identity, Saved]] = {}  # scope -> tensor -> the op that saved it
        # Which tensor an expression is, and which saving ops a value was computed from.
        self._ids = TensorIdentities(ctx)
        # scope -> identity -> a call of this file's function or module that made it (``_HelperCall``)
        self._helper_calls: dict[object, dict[Identity, _HelperCall]] = {}
        self._shared = shared if shared is not None else _Shared()
        # scope -> identity -> the calls of this file's functions and modules it was passed to (parameter)
        self._passed: dict[object, dict[Identity, list[tuple[_HelperCall, str]]]] = {}

    # ------------------------------------------------------------ what a client does with events
    def _on_change(self, saved: Saved, target: cst.BaseExpression, node: cst.CSTNode, how: str,
                   fix: FixRecipe | None, statement: cst.CSTNode | None, via_data: bool) -> None:
        """An in-place change of ``target``, a tensor ``saved`` says autograd saved."""

    def _on_backward(self, call: cst.Call, reached: frozenset[int]) -> None:
        """A backward() through the saving ops ``reached`` (before it frees what they saved)."""

    def _after_backward(self, call: cst.Call, event: AutogradEvent) -> None:
        """After a backward() (or ``torch.autograd.grad``) with a subject."""

    def _on_step(self, call: cst.Call, event: AutogradEvent) -> None:
        """An optimizer step."""

    def _on_overwrite(self, call: cst.Call, modules: frozenset[str]) -> None:
        """(``_follows_calls``) ``m.load_state_dict(sd)``: the parameters of ``modules`` are
        overwritten in place, as by a step."""

    def _on_call_effects(self, call: cst.Call, effects: CallEffects) -> None:
        """(``_follows_calls``: the module graph is tracked) a call of the file's own function that
        runs backward() calls or steps (``effects.py``)."""

    def _on_sequential(self, call: cst.Call) -> None:
        """An ``nn.Sequential(...)`` constructor call."""

    def _on_return(self, node: cst.Return) -> None:
        """A ``return`` of the function walked (not a probe's)."""

    def summarise(self, info: FunctionInfo, passed: dict[str, Value]) -> None:
        """(A probe) walk ``info``'s body with its parameters bound to ``passed``."""
        self.ctx.attach([self])  # type: ignore[list-item]
        self.ctx.summarise(info, passed)

    @property
    def _scope(self) -> object:
        return self.ctx.function


    # ------------------------------------------------------------ bindings
    def leave_Assign(self, node: cst.Assign) -> None:
        deps = self._ids.deps_of(node.value)
        self._ids.note_alias(node.value)
        for target in node.targets:
            if isinstance(target.target, cst.Subscript):
                self._changed(target.target.value, node, "indexed write", None)
                self._ids.add_deps(self._ids.holder(target.target.value), deps)
            else:
                self._ids.bind(target.target, node.value, deps)
                self._name_helper_result(target.target, node.value)

    def _name_helper_result(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        """``h = block(x)``: the call's result is known to the name as the object it holds."""
        calls = self._helper_calls.get(self._scope) if self._helper_calls else None
        helper = calls.get(id(value)) if calls else None
        key = dotted_name(target) if helper is not None else None
        holder = self._ids.latest(key) if key is not None else None
        if holder is not None:
            calls[holder] = helper  # type: ignore[index]

    def leave_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._ids.note_alias(node.value)
            self._ids.bind(node.target, node.value, self._ids.deps_of(node.value))

    def leave_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._ids.bind(node.target, node.value, self._ids.deps_of(node.value))


    def visit_For(self, node: cst.For) -> None:
        self._ids.unbind(node.target)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._ids.unbind(node.asname.name)

    def visit_Del(self, node: cst.Del) -> None:
        self._ids.unbind(node.target)

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        if node.name is not None:
            self._ids.unbind(node.name.name)

    # ------------------------------------------------------------ saving
    def _save(self, expr: cst.BaseExpression, op: cst.CSTNode, role: str) -> None:
        identity, via_data = self._ids.resolve(expr)
        if identity is not None and not via_data:
            self._saved.setdefault(self._scope, {})[identity] = Saved(op, role)
            self._ids.note_saving(op)

    def _save_output(self, op: cst.CSTNode) -> None:
        self._saved.setdefault(self._scope, {})[id(op)] = Saved(op, OUTPUT)
        self._ids.note_saving(op)

    def _record_op(self, op: cst.CSTNode, saves: str | None, operands: list[cst.BaseExpression]) -> None:
        """Remember what ``op`` saved, given which of its operands require grad."""
        if saves is None or saves == NOTHING or not operands or self.ctx.grad_mode.statically_disabled:
            return
        grads = [self.ctx.value_of(operand).certainly_requires_grad for operand in operands]
        if saves in BINARY_SAVES:
            if len(operands) != 2:
                return
            (a, b), (a_grad, b_grad) = operands, grads
            if saves == OTHER_OPERAND:
                if b_grad:
                    self._save(a, op, INPUT)
                if a_grad:
                    self._save(b, op, INPUT)
            elif a_grad or b_grad:
                if saves == OPERANDS or b_grad:
                    self._save(a, op, INPUT)
                self._save(b, op, INPUT)
            return
        if not grads[0]:
            return
        if saves in (INPUT, BOTH):
            self._save(operands[0], op, INPUT)
        if saves in (OUTPUT, BOTH):
            self._save_output(op)

    def leave_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        name = self._operators.get(type(node.operator))
        if name is None:
            return
        if name == "pow":
            left, right = self.ctx.value_of(node.left), self.ctx.value_of(node.right)
            if right.kind is Kind.NUMBER:
                self._record_op(node, self._table.op("pow"), [node.left])
            elif left.kind is Kind.NUMBER:
                self._record_op(node, self._table.op("__rpow__"), [node.right])
            return
        self._record_op(node, self._table.op(name), [node.left, node.right])

    def _op_of_call(
        self, node: cst.Call, qualified: str | None, args: list[cst.BaseExpression]
    ) -> tuple[str | None, list[cst.BaseExpression]]:
        """(what the call saves per the table, its tensor operands) for torch ops and tensor methods
        (``qualified``: the callee's qualified name; ``args``: the positional arguments)."""
        func = node.func
        if qualified is not None:
            namespace, _, name = qualified.rpartition(".")
            if namespace not in OP_NAMESPACES:
                return None, []
            operands = args
        elif isinstance(func, cst.Attribute) and self.ctx.value_of(func.value).is_tensor:
            name = func.attr.value
            operands = [func.value, *args]
        else:
            return None, []
        elementwise = ELEMENTWISE_OF_REDUCTION.get(name)
        if elementwise is not None:
            if len(operands) == 1 and len(node.args) == len(args):
                return self._table.op(name), operands
            if len(operands) == 2 and self.ctx.value_of(operands[1]).is_tensor:
                return self._table.op(elementwise), operands
            return None, []
        if name == "pow":
            if len(operands) == 2 and self.ctx.value_of(operands[1]).kind is Kind.NUMBER:
                return self._table.op("pow"), operands[:1]
            return None, []
        saves = self._table.op(name)
        if saves in BINARY_SAVES:
            return saves, operands[:2]
        return saves, operands[:1]

    def _module_of_call(self, callee: Value | None) -> tuple[str | None, cst.Call | None]:
        """(the built-in nn module's name, its constructor call) when the callee (the value of a
        call's ``func``; None: a qualified name) is one."""
        found = self.ctx.builtin_module(callee) if callee is not None else None
        return found if found is not None else (None, None)

    # ------------------------------------------------------------ calls
    def leave_Call(self, node: cst.Call) -> None:
        """Post-order: the operands' own ops and changes come first, as when Python evaluates them."""
        event = self.ctx.autograd_event(node)
        if event is not None and event.kind in (EventKind.BACKWARD, EventKind.GRAD):
            # torch.autograd.grad runs (and checks, and frees) the graph like backward()
            if event.subject is not None:
                self._backward(node, (event.subject,), event.retain_graph is True)
                self._after_backward(node, event)
            return
        if event is not None and event.kind is EventKind.STEP:
            self._on_step(node, event)
            return
        if event is None and self._follows_calls:
            graph = self.ctx.module_graph
            func = node.func
            overwritten = graph.overwritten_modules(node) if type(func) is cst.Attribute else None  # type: ignore[union-attr]
            if overwritten is not None:  # `model_old.load_state_dict(sd)`: copies into the parameters in place
                self._on_overwrite(node, overwritten)
                return
            effects = graph.effects_of(node)  # type: ignore[union-attr]
            if effects is not None:
                self._on_call_effects(node, effects)
        func = node.func
        qualified = self.ctx.qualify(func)
        if qualified == "torch.nn.Sequential":
            self._on_sequential(node)
            self._note_layers(node)
        args = positional_args(node)
        callee = self.ctx.value_of(func) if qualified is None else None
        module = self._module_of_call(callee)  # (both checks below need it; asking is free of effects)
        if self._check_inplace_call(node, qualified, args, module):
            return
        if type(func) is cst.Attribute and func.attr.value in STORING_METHODS:
            self._ids.add_deps(self._ids.holder(func.value), self._ids.deps_of(node))  # `losses.append(loss)`
        module_name, _ = module
        if module_name is not None:
            saves = self._table.module(module_name)
            if saves in (INPUT, OUTPUT, BOTH) and args:
                self._record_op(node, saves, args[:1])
            if saves in (INPUT, BOTH, OTHER_OPERAND) and args and callee is not None \
                    and "parameterless" not in callee.tags and not self.ctx.grad_mode.statically_disabled:
                self._save(args[0], node, INPUT)  # a layer with a weight saves its input for the weight's gradient
            elif module_name == "Sequential" and callee is not None:
                self._note_helper_call(node, None, callee)
            return
        saves, operands = self._op_of_call(node, qualified, args)
        self._record_op(node, saves, operands)
        if saves is None and callee is not None:
            self._note_helper_call(node, self._callee_of(node, callee), callee)

    # ------------------------------------------------------------ this file's functions and modules
    def _callee_of(self, node: cst.Call, callee: Value) -> FunctionInfo | None:
        """The body a call of this file runs: a module's ``forward``, a function or method (not a
        constructor or a property)."""
        if callee.kind is Kind.MODULE:
            if callee.cls is None or callee.cls.node is None:
                return None
            return callee.cls.forward_method()
        func = node.func
        name = func.value if type(func) is cst.Name else func.attr.value if type(func) is cst.Attribute else None
        shared = self._shared
        if shared.defined is None:
            shared.defined = defined_names(self.ctx.source)
        if name is None or name not in shared.defined:
            return None
        info = self.ctx.resolve_function(func)
        if info is None or info.name in ("__init__", "forward") or info.is_property:
            return None
        return info

    def _note_helper_call(self, node: cst.Call, info: FunctionInfo | None, callee: Value) -> None:
        """``h = block(x)``, ``h = self.block(x)``: remember the call, and count it among the saving ops
        (whether it saved its output, or its argument ``x``, is asked only when one of them is changed
        in place).  An argument autograd already saved that the callee changes in place is changed here.
        Where nothing here changes a value in place and the callee no parameter, only a module call's
        arguments are remembered (a later callee may change them), without their values."""
        if info is None and callee.kind is not Kind.MODULE or self.ctx.grad_mode.statically_disabled:
            return
        changes = info is not None and self._probe_of is None and self._may_change_parameters(info)
        full = changes or self._probe_of is not None or self._region_changes_in_place()
        if not full and callee.kind is not Kind.MODULE:
            return  # a function: nothing here changes its result in place, nor does it its parameter
        arguments = self._arguments_of(node, info)
        value_of = self.ctx.value_of
        passed = {name: value_of(argument) for name, argument in arguments.items()} if full and info is not None else {}
        helper = _HelperCall(node, info, passed, callee if callee.kind is Kind.MODULE else None)
        scope = self._scope
        known = self._passed.setdefault(scope, {})
        for name, argument in arguments.items():
            held = self._ids.resolve(argument)[0]
            if held is None:
                continue
            if changes and (held in self._saved.get(scope, {}) or held in known
                            or held in self._helper_calls.get(scope, {})):
                self._changed_by_callee(node, info, helper, name, argument)  # type: ignore[arg-type]
            known.setdefault(held, []).append((helper, name))
        if full:
            self._helper_calls.setdefault(scope, {})[id(node)] = helper  # (a name bound to it: ``_name_helper_result``)
        self._ids.note_saving(node)

    def _changed_by_callee(
        self, node: cst.Call, info: FunctionInfo, helper: _HelperCall, name: str, argument: cst.BaseExpression
    ) -> None:
        """The callee changes its parameter ``name`` in place: ``argument`` is changed (reported at the
        change, in the callee, with its statement: ``# noqa`` there)."""
        where = f"{info.cls.name}.{info.name}" if info.cls is not None else info.name
        for param, change, how, statement in self._summary(helper).writes:
            if param == name:
                self._changed(argument, change, f"{how} in `{where}()` (called as `{short(fixes.source_of(node))}`)",
                              None, statement)

    def _region_changes_in_place(self) -> bool:
        """The function being analysed (or the module's own statements) changes something in place."""
        region = self.ctx.region
        known = self._shared.changing.get(id(region))
        if known is None:
            known = self._shared.changing[id(region)] = _changes_in_place(region, parameters_only=False)
        return known

    def _may_change_parameters(self, info: FunctionInfo) -> bool:
        """The callee's statements change a parameter in place (``x += ...``, ``out = x; out[i] = ...``,
        ``x.mul_(...)``, ``inplace=True``): a quick test before walking it for what it changes."""
        known = self._shared.changing.get(id(info))
        if known is None:
            known = self._shared.changing[id(info)] = _changes_in_place(info.node, parameters_only=True)
        return known

    def _unambiguous(self, target: cst.BaseExpression, identity: Identity) -> bool:
        """``target``'s name holds ``identity`` on every path: its latest binding is that object too
        (not ``out = t.clone()`` in one branch and ``out = t`` in the other)."""
        key = dotted_name(strip_data(target))
        latest = self._ids.latest(key) if key is not None else None
        return latest is None or latest == identity

    def _arguments_of(self, node: cst.Call, info: FunctionInfo | None) -> dict[str, cst.BaseExpression]:
        """Parameter -> the argument ``node`` passes (an ``nn.Sequential``: its input as ``input``)."""
        if info is None:
            args = positional_args(node)
            return {"input": args[0]} if len(node.args) == 1 and args else {}
        from torchlint.analysis.functions import argument_expressions

        return argument_expressions(node, info) or {}

    def _helper_output(self, identity: Identity) -> Saved | None:
        """The result of a call of this file's function or module (``identity``), when what the call
        returns on every path it can take is an output autograd saved (the callee's last op
        ``F.relu``, an ``nn.Sequential`` ending in ``nn.ReLU``) and no backward() freed it; or a
        tensor such a call was handed and saved (its first layer a convolution)."""
        calls = self._helper_calls.get(self._scope)
        helper = calls.pop(identity, None) if calls else None
        if helper is not None:
            inside = self._summary(helper).returns
            if inside is not None:
                return self._remember(identity, Saved(helper.call, OUTPUT, inside))
        for helper, name in self._passed.get(self._scope, {}).pop(identity, ()):
            inside = self._summary(helper).saves.get(name)
            if inside is not None:
                return self._remember(identity, Saved(helper.call, INPUT, inside))
        return None

    def _remember(self, identity: Identity, saved: Saved) -> Saved:
        self._saved.setdefault(self._scope, {})[identity] = saved
        return saved

    def _summary(self, helper: _HelperCall) -> SavedSummary:
        instance = helper.instance
        if helper.callee is None:
            return self._sequential_summary(helper)
        # (Once per depth too: a summary asked deeper sees less of the callees it calls.)
        key = (self.ctx.summary_depth, id(helper.callee), id(instance.origin) if instance is not None else None,
               tuple(sorted((name, value.kind.value) for name, value in helper.passed.items())))
        summaries = self._shared.summaries
        if key not in summaries:
            summaries[key] = NO_SUMMARY  # (recursion)
            summaries[key] = self._summarise(helper)
        return summaries[key]

    def _note_layers(self, node: cst.Call) -> None:
        args = node.args
        if not args or any(arg.keyword for arg in args):
            return
        first = self.ctx.value_of(args[0].value)
        if args[0].star:
            first = first.element if first.kind is Kind.COLLECTION and first.element is not None else UNKNOWN_VALUE
        starred = any(arg.star for arg in args)
        last = None if starred else self._layer_constructor(args[-1].value)
        trained = any(value.kind is Kind.MODULE and "parameterless" not in value.tags
                      for value in (self.ctx.value_of(arg.value) for arg in args[:-1]))
        self._shared.layers[id(node)] = Layers(first, last, trained)

    def _sequential_summary(self, helper: _HelperCall) -> SavedSummary:
        """An ``nn.Sequential``: it returns its last layer's output and saves its input when its first
        layer does (a layer with a weight, a module of this file whose forward saves it)."""
        constructor = helper.instance.origin if helper.instance is not None else None
        layers = self._shared.layers.get(id(constructor)) if constructor is not None else None
        if layers is None:
            return NO_SUMMARY
        saves = self._first_layer_saves(layers.first, helper.call)
        last = layers.last
        if last is None or not self._layer_saves_output(last):
            return SavedSummary(None, saves, ())
        inputs = positional_args(helper.call)
        if not layers.trained_before_last and not (inputs and self.ctx.value_of(inputs[0]).certainly_requires_grad):
            return SavedSummary(None, saves, ())
        return SavedSummary(short(fixes.source_of(last)), saves, ())

    def _first_layer_saves(self, value: Value, call: cst.Call) -> dict[str, str]:
        """``{"input": op}`` when the first layer of an ``nn.Sequential`` saves its input."""
        if value.kind is not Kind.MODULE:
            return {}
        found = self.ctx.builtin_module(value)
        if found is not None:
            name, _ = found
            if self._table.module(name) in (INPUT, BOTH, OTHER_OPERAND) and "parameterless" not in value.tags:
                return {"input": short(fixes.source_of(found[1]))}
            return {}
        forward = value.cls.forward_method() if value.cls is not None and value.cls.node is not None else None
        params = [p.name.value for p in forward.node.params.params[1:]] if forward is not None else []
        if not params:
            return {}
        inside = self._summary(_HelperCall(call, forward, {}, value)).saves.get(params[0])
        return {"input": inside} if inside is not None else {}

    def _summarise(self, helper: _HelperCall) -> SavedSummary:
        """Walk the callee with a probe of its own (``probe_of``), for the instance called (its
        constructor's literals decide branches)."""
        info = helper.callee
        assert info is not None
        if self.ctx.summary_depth >= MAX_SUMMARY_DEPTH or info.node.asynchronous is not None:
            return NO_SUMMARY
        from torchlint.analysis.analyzer import Analyzer

        probe = SavedTensors(Analyzer.for_summary(self.ctx), probe_of=info, shared=self._shared)
        probe.summarise(info, helper.passed)
        literals = self._instance_literals(helper.instance)
        found = [inside for node, inside in probe.probe_returns if reachable(info, node, literals)]
        writes: dict[str, tuple[str, cst.CSTNode, str, cst.CSTNode | None]] = {}
        for write in probe.probe_writes:
            if write[0] not in writes and reachable(info, write[1], literals):
                writes[write[0]] = write
        return SavedSummary(found[0] if found and all(found) else None, probe.probe_saved_parameters(),
                            tuple(writes.values()))

    def _instance_literals(self, instance: Value | None) -> dict[str, object]:
        if instance is None or instance.cls is None or instance.origin is None:
            return {}
        key = (id(instance.cls), id(instance.origin))
        literals = self._shared.literals
        if key not in literals:
            literals[key] = constructor_literals(instance.cls, instance.origin)
        return literals[key]

    def probe_saved_parameters(self) -> dict[str, str]:
        """(A probe, after its walk) parameter -> the op that saved it."""
        found: dict[str, str] = {}
        saved = self._saved.get(self._scope, {}) if self.ctx.function is self._probe_of else {}
        for identity, name in self.probe_params.items():
            record = saved.get(identity) or self._helper_output(identity)
            if record is not None:
                found[name] = record.inside or short(fixes.source_of(record.op))
        return found

    def _check_inplace_call(
        self,
        node: cst.Call,
        qualified: str | None,
        args: list[cst.BaseExpression],
        module: tuple[str | None, cst.Call | None],
    ) -> bool:
        """In-place calls: ``y.mul_()``, ``torch.sigmoid_(y)``, ``F.relu(y, inplace=True)``,
        an ``nn.ReLU(inplace=True)`` module applied to ``y``.  True if ``node`` is one.
        (``qualified``, ``args``, ``module``: the callee's qualified name, the positional
        arguments, and ``_module_of_call(node)``.)"""
        func = node.func
        if qualified is None and type(func) is cst.Attribute and is_inplace_method(func.attr.value):
            method, target = func.attr.value, func.value
            if not (self.ctx.value_of(strip_data(target)).is_tensor or self._ids.resolve(target)[0] is not None):
                return False
            if not (isinstance(target, cst.Call) and isinstance(target.func, cst.Attribute)
                    and is_inplace_method(target.func.attr.value)):  # `y.mul_(2).add_(1)`: reported once
                self._changed(target, node, f"`{method}()`", ("method", node, target, method))
            self._ids.add_deps(self._ids.holder(target), self._ids.deps_of(node))
            self._record_inplace_output(node, target, method[:-1])
            return True
        if qualified is not None and qualified.startswith("torch."):
            namespace, _, name = qualified.rpartition(".")
            if name.endswith("_") and not name.startswith("__") and args:
                self._changed(args[0], node, f"`{name}()`", ("torch_function", node, namespace, name))
                if namespace in OP_NAMESPACES:
                    effect = self._table.inplace_effect(name[:-1])
                    saves_output = effect == OUTPUT or (effect is None and self._table.op(name[:-1]) == OUTPUT)
                    self._inplace_result(node, args[0], saves_output)
                return True
            inplace = keyword_arg(node, "inplace")
            if namespace == "torch.nn.functional" and inplace is not None and is_true(inplace.value) and args:
                effect = self._table.inplace_effect(name)
                if effect == OUT_OF_PLACE:
                    return False
                self._changed(args[0], node, f"`{name}(..., inplace=True)`", ("functional", node, inplace))
                self._inplace_result(node, args[0], effect == OUTPUT)
                return True
            return False
        module_name, constructor = module
        if constructor is not None and args:
            inplace = keyword_arg(constructor, "inplace")
            effect = self._table.inplace_effect(module_name or "")
            if inplace is not None and is_true(inplace.value) and effect != OUT_OF_PLACE:
                self._changed(args[0], node, f"in-place `nn.{module_name}`", None)
                self._inplace_result(node, args[0], effect == OUTPUT)
                return True
        return False

    def _inplace_result(self, node: cst.Call, target: cst.BaseExpression, saves_output: bool) -> None:
        """The result of an in-place call is ``target`` itself; when the op saves its output
        (``F.relu(y, inplace=True)``, ``nn.ELU(inplace=True)``), changing it again raises the in-place error."""
        base, via_data = self._ids.resolve(target)
        if base is not None:
            self._ids.alias(node, base, via_data)
        self._ids.add_deps(self._ids.holder(target), self._ids.deps_of(node))
        if saves_output:
            self._record_inplace_output(node, target, None)

    def _record_inplace_output(self, node: cst.Call, target: cst.BaseExpression, op_name: str | None) -> None:
        """``y.relu_()`` saves ``y`` (its output) like ``relu`` does (measured for every output-saving op)."""
        if op_name is not None and self._table.op(op_name) != OUTPUT:
            return
        target_value = self.ctx.value_of(strip_data(target))
        if self.ctx.grad_mode.statically_disabled or not target_value.certainly_requires_grad:
            return
        if _goes_through_data(target):
            return
        self._save(target, node, OUTPUT)
        self._ids.add_deps(self._ids.holder(target), frozenset({id(node)}))

    def leave_AugAssign(self, node: cst.AugAssign) -> None:
        target = node.target
        if isinstance(target, cst.Subscript):
            self._changed(target.value, node, "indexed write", None)
            self._ids.add_deps(self._ids.holder(target.value), self._ids.deps_of(node.value))
            return
        self._changed(target, node, "augmented assignment", ("augassign", node))
        self._ids.add_deps(self._ids.holder(target), self._ids.deps_of(node.value))  # `total += loss`

    # ------------------------------------------------------------ changes
    def _changed(
        self, target: cst.BaseExpression, node: cst.CSTNode, how: str, fix: FixRecipe | None,
        statement: cst.CSTNode | None = None,
    ) -> None:
        """``node`` changes ``target`` in place (``how``): a probe notes a change of a parameter; a
        change of a tensor autograd saved goes to ``_on_change``."""
        identity, via_data = self._ids.resolve(target)
        if self._probe_of is not None and identity in self.probe_params and not via_data \
                and self.ctx.function is self._probe_of and self._unambiguous(target, identity):
            self.probe_writes.append((self.probe_params[identity], node, how, self.ctx.statement))
        saved = self._saved.get(self._scope, {}).get(identity) if identity is not None else None
        if saved is None and identity is not None and (self._helper_calls or self._passed):
            saved = self._helper_output(identity)
        if saved is not None:
            self._on_change(saved, target, node, how, fix, statement, via_data)

    def _backward(self, call: cst.Call, roots: tuple[cst.BaseExpression, ...], retains_graph: bool) -> None:
        """A backward() from ``roots`` runs the saving ops they were computed from (``_on_backward``),
        then frees what they saved."""
        reached: frozenset[int] = NO_DEPS
        for root in roots:
            reached = reached | self._ids.deps_of(root)
        self._on_backward(call, reached)
        if not retains_graph:
            saved = self._saved.get(self._scope, {})
            for identity in [i for i, record in saved.items() if id(record.op) in reached]:
                del saved[identity]
            calls = self._helper_calls.get(self._scope, {})
            for identity in [i for i, helper in calls.items() if id(helper.call) in reached]:
                del calls[identity]
            for identity, helpers in self._passed.get(self._scope, {}).items():
                helpers[:] = [entry for entry in helpers if id(entry[0].call) not in reached]

    def leave_Return(self, node: cst.Return) -> None:
        if self._probe_of is None:
            self._on_return(node)
        elif self.ctx.function is self._probe_of:
            self.probe_returns.append((node, self._saved_output_of(node.value)))

    def reached_from(self, root: cst.BaseExpression) -> frozenset[int]:
        """The saving ops ``root`` was computed from (a backward() from it runs them)."""
        return self._ids.deps_of(root)

    def _saved_output_of(self, value: cst.BaseExpression | None) -> str | None:
        """(A probe) the op whose saved output ``value`` is, if it is one."""
        identity, via_data = self._ids.resolve(value) if value is not None else (None, False)
        if identity is None or via_data:
            return None
        saved = self._saved.get(self._scope, {}).get(identity)
        if saved is None and (self._helper_calls or self._passed):
            saved = self._helper_output(identity)
        if saved is None or saved.role != OUTPUT or not self._same_module_always(saved.op):
            return None
        return saved.inside or short(fixes.source_of(saved.op))

    def _same_module_always(self, op: cst.CSTNode) -> bool:
        """(A probe) ``op`` is not a call of a ``self.<attr>`` module the class may build as one module or
        another (``nn.ReLU() if relu else nn.Identity()``: the analysis keeps the first)."""
        func = op.func if isinstance(op, cst.Call) else None
        key = dotted_name(func) if isinstance(func, cst.Attribute) else None
        cls = self._probe_of.cls if self._probe_of is not None else None
        if key is None or not key.startswith("self.") or key.count(".") != 1 or cls is None:
            return True
        return built_by_call(cls, key)


    def _layer_constructor(self, layer: cst.BaseExpression) -> cst.Call | None:
        """The ``nn.X(...)`` call a layer of an ``nn.Sequential`` was built by (written there, or bound to a name)."""
        if isinstance(layer, cst.Call):
            return layer
        origin = self.ctx.value_of(layer).origin
        return origin if isinstance(origin, cst.Call) else None

    def _layer_saves_output(self, constructor: cst.Call) -> bool:
        name = self.ctx.qualify(constructor.func) or ""
        if not name.startswith("torch.nn."):
            return False
        inplace = keyword_arg(constructor, "inplace")
        effect = self._table.inplace_effect(name[9:])
        if inplace is not None and is_true(inplace.value) and effect != OUT_OF_PLACE:
            return effect == OUTPUT
        return self._table.module(name[9:]) in (OUTPUT, BOTH)



@cache
def _saving_operators() -> dict[type[cst.BaseBinaryOp], str]:
    """The arithmetic operators whose op may save a tensor (``*``, ``/``, ``@``, ``**``; not ``+``)."""
    table = saved_tensor_table()
    return {getattr(cst, name): op for name, op in OPERATOR_OPS.items() if table.op(op) not in (None, NOTHING)}


def _changes_in_place(region: cst.CSTNode, parameters_only: bool) -> bool:
    """Some statement of ``region`` (a function or the module; nested functions and classes aside)
    changes something in place -- with ``parameters_only``, a name that is one of the function's
    parameters or bound to one (``out = x``): an augmented assignment, an indexed write, a call of
    an in-place method or with ``inplace=True`` (as a statement or a value)."""
    params = region.params if isinstance(region, cst.FunctionDef) else None
    names = {param.name.value for param in (*params.posonly_params, *params.params, *params.kwonly_params)} \
        if params is not None else set()
    changed: list[cst.BaseExpression] = []
    blocks: list[cst.CSTNode] = [region.body if isinstance(region, cst.FunctionDef) else region]
    while blocks:
        block = blocks.pop()
        for statement in getattr(block, "body", ()):
            kind = type(statement)
            if kind is cst.SimpleStatementLine:
                for small in statement.body:  # type: ignore[attr-defined]
                    _note_changes(small, names, changed)
            elif kind is not cst.FunctionDef and kind is not cst.ClassDef:
                blocks.extend(blocks_of(statement))
    if not parameters_only:
        return bool(changed)
    return any(_root_name(target) in names for target in changed)


def _note_changes(small: cst.CSTNode, names: set[str], changed: list[cst.BaseExpression]) -> None:
    """What the small statement changes in place (into ``changed``); ``out = x`` adds ``out`` to
    the names bound to a parameter."""
    kind = type(small)
    if kind is cst.AugAssign:
        changed.append(small.target)  # type: ignore[attr-defined]
    elif kind is cst.Assign:
        for target in small.targets:  # type: ignore[attr-defined]
            if type(target.target) is cst.Subscript:
                changed.append(target.target)
            elif type(target.target) is cst.Name and type(small.value) is cst.Name \
                    and small.value.value in names:  # type: ignore[attr-defined]
                names.add(target.target.value)
    value = getattr(small, "value", None)
    if type(value) is cst.Call:
        func = value.func  # type: ignore[attr-defined]
        if type(func) is cst.Attribute and is_inplace_method(func.attr.value):
            changed.append(func.value)
        elif keyword_arg(value, "inplace") is not None and value.args:  # type: ignore[arg-type]
            changed.append(value.args[0].value)  # type: ignore[attr-defined]


def _root_name(expr: cst.BaseExpression) -> str | None:
    while type(expr) in (cst.Subscript, cst.Attribute):
        expr = expr.value  # type: ignore[attr-defined]
    return expr.value if type(expr) is cst.Name else None  # type: ignore[attr-defined]




def strip_data(expr: cst.BaseExpression) -> cst.BaseExpression:
    while isinstance(expr, cst.Attribute) and expr.attr.value == "data":
        expr = expr.value
    return expr


def _goes_through_data(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Attribute) and expr.attr.value == "data"


def is_true(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "True"




def short(source: str, limit: int = 40) -> str:
    source = " ".join(source.split())
    return source if len(source) <= limit else source[: limit - 3] + "..."


__all__ = ["MAX_SUMMARY_DEPTH", "FixRecipe", "Layers", "Saved", "SavedSummary", "SavedTensors"]
