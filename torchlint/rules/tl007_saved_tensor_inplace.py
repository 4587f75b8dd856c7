"""TL007 saved-tensor-inplace: an in-place change of a tensor that autograd saved for
backward, before that backward runs.

Which op saves what is data (``rules/_saved_tensors.toml``, see ``torchlint.saved_tensors``).
A tensor is identified by the expression that produced it (the ``origin`` of its
analysed value); views and ``.detach()`` share their base's version counter, so
they are followed back to the base (the model's ``TensorIdentities``, which also
follows which saving ops a value was computed from).  Saved tensors are tracked per function in
program order and forgotten at every ``backward()`` (unless it retains the graph).
A change is reported once a later ``backward()`` in the same function could
reach it, or at once inside an ``nn.Module``'s ``forward`` (the framework runs
backward after it).

In-place modules and functionals (``nn.ReLU(inplace=True)``, ``F.relu_``) are in-place
ops whose result *is* their input; what their in-place form saves is data too (the
``[inplace]`` table).  An optimizer step changes the parameters of the models it was
built from: model calls made before the step are pending changes that a later
``backward()`` through them reports (the GAN mistake).  Backward and step events are
the analysis's (``ctx.autograd_event``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from torchlint import fixes
from torchlint.analysis import Kind, dotted_name, keyword_arg, positional_args
from torchlint.analysis.effects import CallEffects, Place, blocks_of, defined_names
from torchlint.analysis.events import EventKind
from torchlint.analysis.module_graph import Forward, related
from torchlint.analysis.tensor_identity import NO_DEPS, Identity, TensorIdentities
from torchlint.analysis.torch_api import (
    OP_NAMESPACES,
    OUT_OF_PLACE_TWINS,
    STORING_METHODS,
    TORCH_INPLACE_FUNCTIONS,
    is_inplace_method,
)
from torchlint.analysis.flow import Flow
from torchlint.analysis.instance_constants import built_by_call, constructor_literals, reachable
from torchlint.analysis.scopes import FunctionInfo
from torchlint.analysis.values import UNKNOWN as UNKNOWN_VALUE, Value
from torchlint.rule import Fix, FixSafety, Rule
from torchlint.saved_tensors import (
    BOTH,
    DIVISOR,
    INPUT,
    NOTHING,
    OPERANDS,
    OTHER_OPERAND,
    OUT_OF_PLACE,
    OUTPUT,
    saved_tensor_table,
)

M4 = "one of the variables needed for gradient computation has been modified by an inplace operation"

_BINARY_SAVES = frozenset({OTHER_OPERAND, DIVISOR, OPERANDS})
_OPERATORS: dict[type[cst.BaseBinaryOp], str] = {
    cst.Multiply: "mul",
    cst.Divide: "div",
    cst.MatrixMultiply: "matmul",
    cst.Power: "pow",
}
_AUG_TO_BINARY: dict[type[cst.BaseAugOp], type[cst.BaseBinaryOp]] = {
    cst.AddAssign: cst.Add,
    cst.SubtractAssign: cst.Subtract,
    cst.MultiplyAssign: cst.Multiply,
    cst.DivideAssign: cst.Divide,
    cst.MatrixMultiplyAssign: cst.MatrixMultiply,
    cst.PowerAssign: cst.Power,
    cst.FloorDivideAssign: cst.FloorDivide,
    cst.ModuloAssign: cst.Modulo,
}


_NO_FORWARDS: frozenset[Forward] = frozenset()
# Calls of this file's functions inside the functions looked into: how deep (``_ReturnProbe``).
_MAX_SUMMARY_DEPTH = 3


@dataclass(frozen=True)
class _Saved:
    op: cst.CSTNode  # the op that saved the tensor
    role: str  # OUTPUT (its result) or INPUT (one of its inputs)
    inside: str | None = None  # (a call of this file's function or module) the op in it that saved it


@dataclass(frozen=True)
class _Summary:
    """What a call of this file's function or module does to what autograd saved (``_summarise``)."""

    returns: str | None  # the op whose saved output every return the call can take gives
    saves: dict[str, str]  # parameter -> the op in the body that saved it for backward
    # The first in-place change of each parameter: (parameter, the change, how, its statement).
    writes: tuple[tuple[str, cst.CSTNode, str, cst.CSTNode | None], ...]


_NO_SUMMARY = _Summary(None, {}, ())


@dataclass(frozen=True)
class _Layers:
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


@dataclass(frozen=True)
class _Change:
    """An in-place change of a saved tensor, reported once a backward() through ``op`` can follow."""

    op: cst.CSTNode
    node: cst.CSTNode
    message: str
    fix: Fix | None
    statement: cst.CSTNode | None


@dataclass(frozen=True)
class _Step:
    """An optimizer step, reported once a backward() through a forward it made stale follows."""

    node: cst.Call  # the step, or the call of this function's that runs it
    serial: int  # the module graph's serial at the step: forwards up to it ran before it
    modules: frozenset[str] | None  # the modules it updates; None: not known
    retained: frozenset[Forward]  # (not known) the graph the retained backward() before it reached
    statement: cst.CSTNode | None
    # A step in a function this one calls: the call, the nested calls, the step (effects.py).
    path: tuple[Place, ...] = ()


@dataclass
class _Loop:
    """A loop being analysed: its steps and the graphs its retained backward() calls reached."""

    scope: object
    serial: int  # the module graph's serial before the loop: forwards up to it were made before it
    bindings: int  # the module graph's binding count before the loop
    steps: list[_Step] = field(default_factory=list)
    retained: list[frozenset[Forward]] = field(default_factory=list)


class SavedTensorInplace(Rule):
    code = "TL007"
    name = "saved-tensor-inplace"
    summary = "In-place change of a tensor that autograd saved for backward, before backward runs"
    fix_safety = FixSafety.UNSAFE
    # Findings need a backward() in the same function, a module's forward(), or an
    # in-place nn module in an nn.Sequential.
    tokens = ("backward", "forward", "training_step", "inplace")

    def __init__(self, *args: object, probe_of: FunctionInfo | None = None, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        # A probe (``_summarise_returns``): this rule's model of what ops save, run over a callee's
        # body on behalf of a call; it records what each ``return`` gives, reports nothing and
        # tracks no optimizer.
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
        self._saved: dict[object, dict[Identity, _Saved]] = {}  # scope -> tensor -> the op that saved it
        # Which tensor an expression is, and which saving ops a value was computed from (the model's).
        self._ids = TensorIdentities(self.ctx)
        self._changes: dict[object, list[_Change]] = {}  # scope -> changes waiting for a backward()
        self._reported: set[int] = set()  # ids of nodes already reported
        # Optimizer steps: which modules values went through is the model's (``module_graph``).
        self._graph = self.ctx.track_module_graph() if "step" in self.ctx.source and probe_of is None else None
        # scope -> identity -> a call of this file's function or module that made it (``_HelperCall``)
        self._helper_calls: dict[object, dict[Identity, _HelperCall]] = {}
        self._defined: set[str] | None = None  # names of the file's ``def`` statements
        self._summaries: dict[tuple, _Summary] = {}  # (callee, instance, passed kinds) -> its summary
        self._layers: dict[int, _Layers] = {}  # nn.Sequential constructor id -> its layers (shared with probes)
        # function (or region) id -> its statements change a parameter (or anything) in place
        self._changing: dict[int, bool] = {}
        self._literals: dict[tuple[int, int], dict[str, object]] = {}  # (class, constructor) -> its literals
        # scope -> identity -> the calls of this file's functions and modules it was passed to (parameter)
        self._passed: dict[object, dict[Identity, list[tuple[_HelperCall, str]]]] = {}
        self._steps: dict[object, list[_Step]] = {}  # scope -> steps waiting for a backward()
        self._freed: dict[object, set[int]] = {}  # scope -> forwards (call ids) a backward() freed
        self._retained: dict[object, frozenset[Forward]] = {}  # scope -> the graph the last backward() kept
        self._loops: list[_Loop] = []  # the loops being analysed, innermost last

    @property
    def _scope(self) -> object:
        return self.ctx.function

    def _in_forward(self) -> bool:
        function = self.ctx.function
        return function is not None and function.runs_as_forward

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

    def visit_While(self, node: cst.While) -> None:
        if self._graph is not None:
            self._loops.append(_Loop(self._scope, self._graph.serial, self._graph.bindings))

    def leave_While(self, node: cst.While) -> None:
        if self._graph is not None:
            self._second_iteration(self._loops.pop())

    leave_For = leave_While

    def visit_For(self, node: cst.For) -> None:
        self.visit_While(node)  # type: ignore[arg-type]
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
            self._saved.setdefault(self._scope, {})[identity] = _Saved(op, role)
            self._ids.note_saving(op)

    def _save_output(self, op: cst.CSTNode) -> None:
        self._saved.setdefault(self._scope, {})[id(op)] = _Saved(op, OUTPUT)
        self._ids.note_saving(op)

    def _record_op(self, op: cst.CSTNode, saves: str | None, operands: list[cst.BaseExpression]) -> None:
        """Remember what ``op`` saved, given which of its operands require grad."""
        if saves is None or saves == NOTHING or not operands or self.ctx.grad_mode.statically_disabled:
            return
        grads = [self.ctx.value_of(operand).certainly_requires_grad for operand in operands]
        if saves in _BINARY_SAVES:
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
        name = _OPERATORS.get(type(node.operator))
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
        if name in ("max", "min"):
            if len(operands) == 1 and len(node.args) == len(args):
                return self._table.op(name), operands
            if len(operands) == 2 and self.ctx.value_of(operands[1]).is_tensor:
                return self._table.op("maximum" if name == "max" else "minimum"), operands
            return None, []
        if name == "pow":
            if len(operands) == 2 and self.ctx.value_of(operands[1]).kind is Kind.NUMBER:
                return self._table.op("pow"), operands[:1]
            return None, []
        saves = self._table.op(name)
        if saves in _BINARY_SAVES:
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
                self._backward_after_steps(node, event.subject, event.keeps_graph)
            return
        if event is not None and event.kind is EventKind.STEP:
            self._optimizer_step(node, event.subject)
            return
        if event is None and self._graph is not None:
            effects = self._graph.effects_of(node)
            if effects is not None:
                self._call_effects(node, effects)
        func = node.func
        qualified = self.ctx.qualify(func)
        if qualified == "torch.nn.Sequential":
            self._check_sequential(node)
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
        if self._defined is None:
            self._defined = defined_names(self.ctx.source)
        if name is None or name not in self._defined:
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
                self._changed(argument, change, f"{how} in `{where}()` (called as `{_short(fixes.source_of(node))}`)",
                              None, statement)

    def _region_changes_in_place(self) -> bool:
        """The function being analysed (or the module's own statements) changes something in place."""
        region = self.ctx.region
        known = self._changing.get(id(region))
        if known is None:
            known = self._changing[id(region)] = _changes_in_place(region, parameters_only=False)
        return known

    def _may_change_parameters(self, info: FunctionInfo) -> bool:
        """The callee's statements change a parameter in place (``x += ...``, ``out = x; out[i] = ...``,
        ``x.mul_(...)``, ``inplace=True``): a quick test before walking it for what it changes."""
        known = self._changing.get(id(info))
        if known is None:
            known = self._changing[id(info)] = _changes_in_place(info.node, parameters_only=True)
        return known

    def _unambiguous(self, target: cst.BaseExpression, identity: Identity) -> bool:
        """``target``'s name holds ``identity`` on every path: its latest binding is that object too
        (not ``out = t.clone()`` in one branch and ``out = t`` in the other)."""
        key = dotted_name(_strip_data(target))
        latest = self._ids.latest(key) if key is not None else None
        return latest is None or latest == identity

    def _arguments_of(self, node: cst.Call, info: FunctionInfo | None) -> dict[str, cst.BaseExpression]:
        """Parameter -> the argument ``node`` passes (an ``nn.Sequential``: its input as ``input``)."""
        if info is None:
            args = positional_args(node)
            return {"input": args[0]} if len(node.args) == 1 and args else {}
        from torchlint.analysis.functions import argument_expressions

        return argument_expressions(node, info) or {}

    def _helper_output(self, identity: Identity) -> _Saved | None:
        """The result of a call of this file's function or module (``identity``), when what the call
        returns on every path it can take is an output autograd saved (the callee's last op
        ``F.relu``, an ``nn.Sequential`` ending in ``nn.ReLU``) and no backward() freed it; or a
        tensor such a call was handed and saved (its first layer a convolution)."""
        calls = self._helper_calls.get(self._scope)
        helper = calls.pop(identity, None) if calls else None
        if helper is not None:
            inside = self._summary(helper).returns
            if inside is not None:
                return self._remember(identity, _Saved(helper.call, OUTPUT, inside))
        for helper, name in self._passed.get(self._scope, {}).pop(identity, ()):
            inside = self._summary(helper).saves.get(name)
            if inside is not None:
                return self._remember(identity, _Saved(helper.call, INPUT, inside))
        return None

    def _remember(self, identity: Identity, saved: _Saved) -> _Saved:
        self._saved.setdefault(self._scope, {})[identity] = saved
        return saved

    def _summary(self, helper: _HelperCall) -> _Summary:
        instance = helper.instance
        if helper.callee is None:
            return self._sequential_summary(helper)
        key = (id(helper.callee), id(instance.origin) if instance is not None else None,
               tuple(sorted((name, value.kind.value) for name, value in helper.passed.items())))
        if key not in self._summaries:
            self._summaries[key] = _NO_SUMMARY  # (recursion)
            self._summaries[key] = self._summarise(helper)
        return self._summaries[key]

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
        self._layers[id(node)] = _Layers(first, last, trained)

    def _sequential_summary(self, helper: _HelperCall) -> _Summary:
        """An ``nn.Sequential``: it returns its last layer's output and saves its input when its first
        layer does (a layer with a weight, a module of this file whose forward saves it)."""
        constructor = helper.instance.origin if helper.instance is not None else None
        layers = self._layers.get(id(constructor)) if constructor is not None else None
        if layers is None:
            return _NO_SUMMARY
        saves = self._first_layer_saves(layers.first, helper.call)
        last = layers.last
        if last is None or not self._layer_saves_output(last):
            return _Summary(None, saves, ())
        inputs = positional_args(helper.call)
        if not layers.trained_before_last and not (inputs and self.ctx.value_of(inputs[0]).certainly_requires_grad):
            return _Summary(None, saves, ())
        return _Summary(_short(fixes.source_of(last)), saves, ())

    def _first_layer_saves(self, value: Value, call: cst.Call) -> dict[str, str]:
        """``{"input": op}`` when the first layer of an ``nn.Sequential`` saves its input."""
        if value.kind is not Kind.MODULE:
            return {}
        found = self.ctx.builtin_module(value)
        if found is not None:
            name, _ = found
            if self._table.module(name) in (INPUT, BOTH, OTHER_OPERAND) and "parameterless" not in value.tags:
                return {"input": _short(fixes.source_of(found[1]))}
            return {}
        forward = value.cls.forward_method() if value.cls is not None and value.cls.node is not None else None
        params = [p.name.value for p in forward.node.params.params[1:]] if forward is not None else []
        if not params:
            return {}
        inside = self._summary(_HelperCall(call, forward, {}, value)).saves.get(params[0])
        return {"input": inside} if inside is not None else {}

    def _summarise(self, helper: _HelperCall) -> _Summary:
        """Walk the callee with this rule's model of what ops save (a probe: ``probe_of``), for the
        instance called (its constructor's literals decide branches)."""
        info = helper.callee
        assert info is not None
        if self.ctx.summary_depth >= _MAX_SUMMARY_DEPTH or info.node.asynchronous is not None:
            return _NO_SUMMARY
        from torchlint.analysis.analyzer import Analyzer

        walker = Analyzer.for_summary(self.ctx)
        probe = SavedTensorInplace(walker, [], self.options, probe_of=info)
        probe._layers, probe._literals = self._layers, self._literals
        walker.attach([probe])
        walker.summarise(info, helper.passed)
        literals = self._instance_literals(helper.instance)
        found = [inside for node, inside in probe.probe_returns if reachable(info, node, literals)]
        writes: dict[str, tuple[str, cst.CSTNode, str, cst.CSTNode | None]] = {}
        for write in probe.probe_writes:
            if write[0] not in writes and reachable(info, write[1], literals):
                writes[write[0]] = write
        return _Summary(found[0] if found and all(found) else None, probe.probe_saved_parameters(),
                        tuple(writes.values()))

    def _instance_literals(self, instance: Value | None) -> dict[str, object]:
        if instance is None or instance.cls is None or instance.origin is None:
            return {}
        key = (id(instance.cls), id(instance.origin))
        if key not in self._literals:
            self._literals[key] = constructor_literals(instance.cls, instance.origin)
        return self._literals[key]

    def probe_saved_parameters(self) -> dict[str, str]:
        """(A probe, after its walk) parameter -> the op that saved it."""
        found: dict[str, str] = {}
        saved = self._saved.get(self._scope, {}) if self.ctx.function is self._probe_of else {}
        for identity, name in self.probe_params.items():
            record = saved.get(identity) or self._helper_output(identity)
            if record is not None:
                found[name] = record.inside or _short(fixes.source_of(record.op))
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
            if not (self.ctx.value_of(_strip_data(target)).is_tensor or self._ids.resolve(target)[0] is not None):
                return False
            if not (isinstance(target, cst.Call) and isinstance(target.func, cst.Attribute)
                    and is_inplace_method(target.func.attr.value)):  # `y.mul_(2).add_(1)`: reported once
                self._changed(target, node, f"`{method}()`", self._method_fix(node, target, method))
            self._ids.add_deps(self._ids.holder(target), self._ids.deps_of(node))
            self._record_inplace_output(node, target, method[:-1])
            return True
        if qualified is not None and qualified.startswith("torch."):
            namespace, _, name = qualified.rpartition(".")
            if name.endswith("_") and not name.startswith("__") and args:
                self._changed(args[0], node, f"`{name}()`", self._torch_function_fix(node, namespace, name))
                if namespace in OP_NAMESPACES:
                    effect = self._table.inplace_effect(name[:-1])
                    saves_output = effect == OUTPUT or (effect is None and self._table.op(name[:-1]) == OUTPUT)
                    self._inplace_result(node, args[0], saves_output)
                return True
            inplace = keyword_arg(node, "inplace")
            if namespace == "torch.nn.functional" and inplace is not None and _is_true(inplace.value) and args:
                effect = self._table.inplace_effect(name)
                if effect == OUT_OF_PLACE:
                    return False
                self._changed(args[0], node, f"`{name}(..., inplace=True)`", self._functional_fix(node, inplace))
                self._inplace_result(node, args[0], effect == OUTPUT)
                return True
            return False
        module_name, constructor = module
        if constructor is not None and args:
            inplace = keyword_arg(constructor, "inplace")
            effect = self._table.inplace_effect(module_name or "")
            if inplace is not None and _is_true(inplace.value) and effect != OUT_OF_PLACE:
                self._changed(args[0], node, f"in-place `nn.{module_name}`", None)
                self._inplace_result(node, args[0], effect == OUTPUT)
                return True
        return False

    def _inplace_result(self, node: cst.Call, target: cst.BaseExpression, saves_output: bool) -> None:
        """The result of an in-place call is ``target`` itself; when the op saves its output
        (``F.relu(y, inplace=True)``, ``nn.ELU(inplace=True)``), changing it again raises M4."""
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
        target_value = self.ctx.value_of(_strip_data(target))
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
        self._changed(target, node, "augmented assignment", self._augassign_fix(node))
        self._ids.add_deps(self._ids.holder(target), self._ids.deps_of(node.value))  # `total += loss`

    # ------------------------------------------------------------ changes
    def _changed(
        self, target: cst.BaseExpression, node: cst.CSTNode, how: str, fix: Fix | None,
        statement: cst.CSTNode | None = None,
    ) -> None:
        identity, via_data = self._ids.resolve(target)
        if self._probe_of is not None and identity in self.probe_params and not via_data \
                and self.ctx.function is self._probe_of and self._unambiguous(target, identity):
            self.probe_writes.append((self.probe_params[identity], node, how, self.ctx.statement))
        saved = self._saved.get(self._scope, {}).get(identity) if identity is not None else None
        if saved is None and identity is not None and (self._helper_calls or self._passed):
            saved = self._helper_output(identity)
        if saved is None:
            return
        name = fixes.source_of(_strip_data(target))
        op = f"`{_short(fixes.source_of(saved.op))}`"
        if saved.inside is not None:
            op += f" (it returns `{saved.inside}`)" if saved.role == OUTPUT else f" (`{saved.inside}` in it)"
        if via_data:
            message = (
                f"{how} changes `{name}` through `.data` after {op} saved "
                f"{'it' if saved.role == OUTPUT else 'it as an input'} for backward: autograd cannot see the "
                "change, so there is no error but backward() computes a wrong gradient from the changed values; "
                "use an out-of-place op, or `.clone()` first"
            )
        else:
            whose = "the output of" if saved.role == OUTPUT else "saved for backward by"
            message = (
                f"{how} changes `{name}`, {whose} {op}: autograd saved it for backward, so backward() raises "
                f"'{M4}'; use an out-of-place op, or `.clone()` first"
            )
        if self.ctx.grad_mode.statically_disabled:
            fix = None  # out of place under no_grad() the result would lose its graph
        change = _Change(saved.op, node, message, fix, statement or self.ctx.statement)
        self._changes.setdefault(self._scope, []).append(change)

    def _backward(self, call: cst.Call, roots: tuple[cst.BaseExpression, ...], retains_graph: bool) -> None:
        """A backward() from ``roots`` runs the saving ops they were computed from: report the
        changes of their saved tensors (on a path that reaches ``call``), then free them."""
        reached: frozenset[int] = NO_DEPS
        for root in roots:
            reached = reached | self._ids.deps_of(root)
        self._report_changes(reached, call)
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
        """In ``forward()`` the framework runs backward from what it returns."""
        if self._probe_of is not None:
            if self.ctx.function is self._probe_of:
                self.probe_returns.append((node, self._saved_output_of(node.value)))
            return
        if node.value is not None and self._in_forward():
            self._report_changes(self._ids.deps_of(node.value), None)

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
        return saved.inside or _short(fixes.source_of(saved.op))

    def _same_module_always(self, op: cst.CSTNode) -> bool:
        """(A probe) ``op`` is not a call of a ``self.<attr>`` module the class may build as one module or
        another (``nn.ReLU() if relu else nn.Identity()``: the analysis keeps the first)."""
        func = op.func if isinstance(op, cst.Call) else None
        key = dotted_name(func) if isinstance(func, cst.Attribute) else None
        cls = self._probe_of.cls if self._probe_of is not None else None
        if key is None or not key.startswith("self.") or key.count(".") != 1 or cls is None:
            return True
        return built_by_call(cls, key)

    def _report_changes(self, reached: frozenset[int], backward: cst.CSTNode | None) -> None:
        """Report the waiting changes of what ``reached`` saved; with a ``backward`` call, only those
        on a path through it (not in the other branch of an ``if``: the body's ``ctx.flow``)."""
        waiting = self._changes.get(self._scope, [])
        flow = None
        for change in list(waiting):
            if id(change.op) not in reached:
                continue
            if backward is not None:
                flow = flow or self.ctx.flow(self._scope.node if self._scope is not None else self.ctx.module)
                if not _on_one_path(flow, change.node, backward):
                    continue
            waiting.remove(change)
            if id(change.node) in self._reported:
                continue  # one optimizer step, several model calls it invalidated
            self._reported.add(id(change.node))
            self.report(change.node, change.message, change.fix, statement=change.statement)

    # ------------------------------------------------------------ optimizer steps
    def _optimizer_step(self, node: cst.Call, optimizer: cst.BaseExpression | None) -> None:
        """``opt.step()`` changes the parameters of the modules it was built from in place: a later
        backward() through a forward of one of them made before the step raises M4 (the GAN mistake).
        When what it updates is not known, it updates what the backward() just before reached."""
        if optimizer is None or self._graph is None:
            return
        self._add_step(node, self._graph.serial, self._graph.optimized_modules(optimizer), ())

    def _add_step(self, node: cst.Call, serial: int, modules: frozenset[str] | None, path: tuple[Place, ...]) -> None:
        retained = self._retained.get(self._scope, _NO_FORWARDS) if modules is None else _NO_FORWARDS
        if modules is not None and not modules or modules is None and not retained:
            return
        step = _Step(node, serial, modules, retained, self.ctx.statement, path)
        self._steps.setdefault(self._scope, []).append(step)
        for loop in self._loops:
            if loop.scope is self._scope:
                loop.steps.append(step)

    def _backward_after_steps(self, node: cst.Call, loss: cst.BaseExpression, keeps_graph: bool) -> None:
        """A backward() from ``loss``: report the steps before it that changed parameters its graph saved."""
        if self._graph is None:
            return
        self._backward_reaching(node, self._graph.forwards_of(loss), keeps_graph)

    def _call_effects(self, node: cst.Call, effects: CallEffects) -> None:
        """A call of a function of this file: its backward() calls and steps, in order."""
        here = Place(node, self.ctx.function, self.ctx.statement)
        for effect in effects.effects:
            if effect.kind is EventKind.STEP:
                self._add_step(node, effect.serial, effect.modules, (here, *effect.path))
            else:
                self._backward_reaching(node, effect.reached, effect.keeps_graph, (here, *effect.path))

    def _backward_reaching(
        self, node: cst.Call, reached: frozenset[Forward], keeps_graph: bool, path: tuple[Place, ...] = ()
    ) -> None:
        """A backward() (``node``, or a call running it: ``path`` down to it) through the forwards ``reached``."""
        freed = self._freed.setdefault(self._scope, set())
        pending = self._steps.get(self._scope, [])
        for step in list(pending):
            stale = [f for f in reached if f.serial <= step.serial and id(f.call) not in freed and f.saves_parameters]
            hit = self._stale_forward(step, stale, reached)
            if hit is None or self._exclusive(step.node, node):
                continue
            pending.remove(step)
            self._report_step(step, hit, backward=path or (Place(node, self.ctx.function, None),))
        for loop in self._loops:
            if keeps_graph and loop.scope is self._scope:
                loop.retained.append(reached)
        if keeps_graph:
            self._retained[self._scope] = reached
        else:
            freed.update(id(forward.call) for forward in reached)
            self._retained.pop(self._scope, None)

    def _stale_forward(self, step: _Step, stale: list[Forward], reached: frozenset[Forward]) -> Forward | None:
        """The forward made before ``step`` whose saved parameters ``step`` changed, if any."""
        if step.modules is not None:
            hits = [f for f in stale if any(related(f.module, module) for module in step.modules)]
        else:
            # Not known what it updates: what the retained backward() before it reached, but not a
            # module with an optimizer of its own.  One of those run again after the step is
            # probably the one stepped: silent.
            graph = self._graph
            assert graph is not None
            stepped = {f.module for f in step.retained
                       if not any(related(f.module, key) for key in graph.optimized_keys)}
            if any(f.serial > step.serial and any(related(f.module, m) for m in stepped) for f in reached):
                return None
            hits = [f for f in stale if f in step.retained and f.module in stepped]
        # The first forward of the stepped module itself (or of a part of it), else of a whole it is part of.
        inside = step.modules or frozenset(f.module for f in step.retained)
        return min(hits, key=lambda f: (not any(_within(f.module, m) for m in inside), f.serial)) if hits else None

    def _second_iteration(self, loop: _Loop) -> None:
        """A retained backward() in a loop through a forward made before the loop runs again on
        the next iteration, after the loop's step changed that forward's module (SinGAN's G steps
        over one ``fake``)."""
        graph = self._graph
        assert graph is not None
        for step in loop.steps:
            if step.modules is None:
                continue
            for reached in loop.retained:
                hits = [f for f in reached if f.serial <= loop.serial and f.saves_parameters
                        and any(related(f.module, m) for m in step.modules)
                        and graph.held_since(f, loop.bindings)]  # (not rebound in the loop)
                if hits:
                    self._report_step(step, min(hits, key=lambda forward: forward.serial), next_iteration=True)
                    break

    def _exclusive(self, a: cst.CSTNode, b: cst.CSTNode) -> bool:
        return self.ctx.flow(self.ctx.region).exclusive(a, b)

    def _report_step(
        self, step: _Step, forward: Forward, next_iteration: bool = False, backward: tuple[Place, ...] = ()
    ) -> None:
        node, statement = step.node, step.statement
        # A step in a function this one calls: where the forward sits (the step follows it in
        # the same function), else the call here that runs the step.
        where = self.ctx.function
        for place in step.path:
            if place.function is forward.function and place is not step.path[0]:
                node, statement, where = place.node, place.statement, place.function
        if id(node) in self._reported:
            return
        self._reported.add(id(node))
        call, module = _short(fixes.source_of(node)), _short(fixes.source_of(forward.call))
        later = "a backward() that runs after the step"
        if node is not step.node and backward:  # (the step is in a function called here): name the backward
            shown = next((place.node for place in reversed(backward) if place.function is where), backward[0].node)
            later = f"the backward() `{_short(fixes.source_of(shown))}`, which runs after the step"
        if step.modules is not None:
            stepped = next((m for m in sorted(step.modules) if related(m, forward.module)), forward.module)
            stepped = stepped.rpartition(":")[2]  # (a callee's own name for it: ``effects.py``)
            message = (
                f"`{call}` changes the parameters of `{stepped}` in place, but `{module}` saved them "
                f"for {later}{' (on the next iteration of the loop)' if next_iteration else ''}: "
                f"backward() raises '{M4}'; call step() after every "
                "backward() through the graph, or compute the loss again after the step"
            )
        else:
            message = (
                f"`{call}` changes in place the parameters the retained backward() before it reached, and a "
                f"later backward() goes through that graph again (through `{module}`), which saved them: backward() "
                f"raises '{M4}'; call step() after every backward() through the graph, or compute the loss "
                "again after the step"
            )
        self.report(node, message, None, statement=statement)

    # ------------------------------------------------------------ nn.Sequential
    def _check_sequential(self, node: cst.Call) -> None:
        layers = [arg.value for arg in node.args if arg.keyword is None and not arg.star]
        for previous, layer in zip(layers, layers[1:]):
            layer_call = self._layer_constructor(layer)
            if layer_call is None:
                continue
            qualified = self.ctx.qualify(layer_call.func) or ""
            inplace = keyword_arg(layer_call, "inplace")
            if not qualified.startswith("torch.nn.") or inplace is None or not _is_true(inplace.value):
                continue
            if self._table.inplace_effect(qualified[9:]) == OUT_OF_PLACE:
                continue
            previous_call = self._layer_constructor(previous)
            if previous_call is None or not self._layer_saves_output(previous_call):
                continue
            name, before = qualified[9:], _short(fixes.source_of(previous))
            fix = fixes.replace("drop `inplace=True`", layer, _without_keyword(layer, inplace)) if layer is layer_call else None
            self.report(
                layer,
                f"`nn.{name}(inplace=True)` right after `{before}` overwrites that layer's output, which autograd "
                f"saved for backward: backward() raises '{M4}'; drop `inplace=True`",
                fix,
            )

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
        if inplace is not None and _is_true(inplace.value) and effect != OUT_OF_PLACE:
            return effect == OUTPUT
        return self._table.module(name[9:]) in (OUTPUT, BOTH)

    # ------------------------------------------------------------ fixes
    def _rebind(self, small: cst.Expr, target: cst.BaseExpression, value: cst.BaseExpression, what: str) -> Fix:
        assign = cst.Assign(targets=[cst.AssignTarget(target)], value=value, semicolon=small.semicolon)
        return fixes.replace(what, small, assign)

    def _method_fix(self, node: cst.Call, target: cst.BaseExpression, method: str) -> Fix | None:
        """``y.mul_(2)`` -> ``y = y.mul(2)`` (also for ``y.data.mul_(2)``)."""
        base = _strip_data(target)
        small = self.ctx.expression_statement(node)
        if small is None or dotted_name(base) is None or method[:-1] not in OUT_OF_PLACE_TWINS:
            return None
        call = node.with_changes(func=cst.Attribute(value=base, attr=cst.Name(method[:-1])))
        return self._rebind(small, base, call, f"use out-of-place `{method[:-1]}()`")

    def _torch_function_fix(self, node: cst.Call, namespace: str, name: str) -> Fix | None:
        """``torch.sigmoid_(u)`` -> ``u = torch.sigmoid(u)``."""
        args = positional_args(node)
        small = self.ctx.expression_statement(node)
        if small is None or namespace != "torch" or name[:-1] not in TORCH_INPLACE_FUNCTIONS:
            return None
        if not isinstance(node.func, cst.Attribute) or dotted_name(args[0]) is None:
            return None
        call = node.with_changes(func=node.func.with_changes(attr=cst.Name(name[:-1])))
        return self._rebind(small, args[0], call, f"use out-of-place `{name[:-1]}()`")

    def _functional_fix(self, node: cst.Call, inplace: cst.Arg) -> Fix | None:
        """``F.relu(y, inplace=True)`` -> ``F.relu(y)``; as a statement: ``y = F.relu(y)``."""
        call = _without_keyword(node, inplace)
        small = self.ctx.expression_statement(node)
        if small is None:
            return fixes.replace("drop `inplace=True`", node, call)
        target = positional_args(node)[0]
        if dotted_name(target) is None:
            return None
        return self._rebind(small, target, call, "drop `inplace=True` and rebind")

    def _augassign_fix(self, node: cst.AugAssign) -> Fix | None:
        """``y += 1`` -> ``y = y + 1`` (also for ``y.data += 1``)."""
        operator = _AUG_TO_BINARY.get(type(node.operator))
        base = _strip_data(node.target)
        if operator is None or dotted_name(base) is None:
            return None
        right = node.value
        if isinstance(right, (cst.BinaryOperation, cst.BooleanOperation, cst.Comparison, cst.IfExp, cst.Lambda,
                              cst.NamedExpr)) and not right.lpar:
            right = right.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        value = cst.BinaryOperation(left=base, operator=operator(), right=right)
        assign = cst.Assign(targets=[cst.AssignTarget(base)], value=value, semicolon=node.semicolon)
        return fixes.replace("assign the out-of-place result", node, assign)


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


def _within(key: str, module: str) -> bool:
    """``key`` names ``module`` or one of its parts."""
    return key == module or key.startswith(module + ".")


def _strip_data(expr: cst.BaseExpression) -> cst.BaseExpression:
    while isinstance(expr, cst.Attribute) and expr.attr.value == "data":
        expr = expr.value
    return expr


def _goes_through_data(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Attribute) and expr.attr.value == "data"


def _is_true(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "True"


def _on_one_path(flow: Flow, a: cst.CSTNode, b: cst.CSTNode) -> bool:
    """One of ``a``, ``b`` sits in every frame the other does (up to the shorter chain): not two
    sibling branches (``if``/``else``, ``try``/``except``).  A node the flow does not place (in a
    lambda) counts as on the path."""
    pa, pb = flow.place(a), flow.place(b)
    if pa is None or pb is None:
        return True
    shorter = min(len(pa.frames), len(pb.frames))
    return pa.frames[:shorter] == pb.frames[:shorter]


def _without_keyword(call: cst.Call, keyword: cst.Arg) -> cst.Call:
    args = [arg for arg in call.args if arg is not keyword]
    if args:
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return call.with_changes(args=args)


def _short(source: str, limit: int = 40) -> str:
    source = " ".join(source.split())
    return source if len(source) <= limit else source[: limit - 3] + "..."


__all__ = ["SavedTensorInplace"]
