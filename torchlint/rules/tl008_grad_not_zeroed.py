"""TL008 grad-not-zeroed: a loop calls ``backward()`` and updates the parameters
but never resets their gradients, so every step uses the sum of all gradients so far.

Which loops and functions call ``backward()`` is the model's index (``event_index.py``).
Every other event (an update, a zeroing, a call to a helper or to code whose body is not
in this file) is recorded for each loop that encloses it and for the function it is in.  Helpers are analysed after the code that calls them,
so loops are judged in ``finish``: a loop's facts include those of the helpers it
calls (transitively).  Anything that might zero the gradients keeps the rule silent.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import dataclasses

import libcst as cst

from torchlint import fixes
from torchlint.analysis import FunctionInfo, Kind, Value, dotted_name
from torchlint.analysis.events import EventKind, gradient_reads, is_optimizer, last_name, may_hide_autograd
from torchlint.analysis.flow import Flow, has_if_statement
from torchlint.analysis.module_graph import covers
from torchlint.analysis.names import root_name, through_grad
from torchlint.analysis.torch_api import ZERO_GRAD_METHODS, is_inplace_method
from torchlint.analysis.uses import Sink
from torchlint.rule import Fix, FixSafety, Rule

# Names a call to code we cannot see into may carry when it resets gradients.
_ZEROING_WORDS = ("zero", "reset", "clear", "none")
def _leaf_of(target: cst.BaseExpression) -> cst.BaseExpression:
    """``w`` for ``w``, ``w.data``, ``w[0]``, ``w.data[:, 1]``."""
    while isinstance(target, cst.Subscript):
        target = target.value
    if isinstance(target, cst.Attribute) and target.attr.value == "data":
        target = target.value
    return target


def _outside_modules(value: Value) -> bool:
    """A leaf made by the code itself (a factory, ``requires_grad_()``), not a parameter a module
    or a caller holds: ``model.zero_grad()`` does not reset its gradient."""
    return value.kind is Kind.LEAF and not value.tags & {"parameter", "param", "assumed-leaf", "from-call-sites"}


def _grad_owners(node: cst.CSTNode) -> list[str]:
    """Dotted names ``w`` whose ``w.grad`` is read somewhere in ``node``."""
    owners: list[str] = []
    for attribute in gradient_reads(node):
        owner = dotted_name(attribute.value)
        if owner is not None and owner not in owners:
            owners.append(owner)
    return owners


@dataclass
class _Update:
    """An optimizer ``step()`` (``optimizer`` is its dotted name) or a manual update from ``.grad``."""

    optimizer: str | None
    key: str | None  # the optimizer, or the updated tensor
    root: str | None
    line: cst.CSTNode | None = None  # manual update: the statement line
    grad_owners: tuple[str, ...] = ()
    with_closure: bool = False  # opt.step(closure): the closure must zero, not the loop
    # ids of the enclosing loops on whose every iteration the update runs (no `if` between).
    every_iteration_of: frozenset[int] = frozenset()
    # Gradient owners that are no module's parameters (an input image made a leaf).
    outside_modules: tuple[str, ...] = ()
    site: cst.CSTNode | None = None  # the statement it is made by
    modules: frozenset[str] | None = None  # an optimizer's: the modules it updates, if known


@dataclass
class _OpaqueCall:
    """A call into code whose body is not in this file."""

    name: str
    roots: frozenset[str]
    holds_parameters: bool
    node: cst.Call
    region: cst.CSTNode  # the function or module the call is in (where its result is followed)
    forward: bool = False  # it runs a module (``D.net(x)``): a forward does not reset gradients

    def named_as_zeroing(self) -> bool:
        name = self.name.lower()
        return "grad" in name and any(word in name for word in _ZEROING_WORDS)

    def may_zero(self, optimizer_roots: set[str], forwards_run: bool = True) -> bool:
        if self.forward and not forwards_run:
            return False
        if self.named_as_zeroing():
            return True
        return self.holds_parameters or bool(self.roots & optimizer_roots)


@dataclass(eq=False)
class _Facts:
    updates: list[_Update] = field(default_factory=list)
    zeroes: bool = False  # every gradient is reset (zero_grad(), or what is reset is unknown)
    zeroed: set[str] = field(default_factory=set)  # tensors whose own gradient is reset (`w.grad = None`)
    zeroes_modules: bool = False  # `model.zero_grad()`: module parameters only, not other leaves
    zeroing_sites: list[cst.CSTNode] = field(default_factory=list)  # statements that reset gradients
    # Per reset, the modules whose gradients it resets (``opt.zero_grad()``, ``D.zero_grad()``); None: unknown.
    resets: list[frozenset[str] | None] = field(default_factory=list)
    helpers: list[FunctionInfo] = field(default_factory=list)
    opaque: list[_OpaqueCall] = field(default_factory=list)
    # For a function: updates that are not inside one of its own loops.
    updates_outside_loops: list[_Update] = field(default_factory=list)


@dataclass(eq=False)
class _Loop:
    node: cst.For | cst.While
    parent: _Loop | None
    facts: _Facts = field(default_factory=_Facts)
    # In the parent's body itself (not in a class body there): what this body rebinds, the parent's does.
    in_parent_body: bool = False


class GradNotZeroed(Rule):
    code = "TL008"
    name = "grad-not-zeroed"
    summary = "A training loop calls backward() and updates but never zeroes the gradients"
    # Safe where the loop updates on every iteration; unsafe where the intent is unclear.
    fix_safety = FixSafety.SAFE
    tokens = ("backward",)

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._loops: dict[int, _Loop] = {}
        self._order: list[_Loop] = []
        self._functions: dict[int, _Facts] = {}
        # The backward() calls (any spelling), by loop and function: the model's index.
        self._events = self.ctx.track_autograd_events()
        # Loops that reset gradients only in the other arm of an ``if`` fixed for the loop.
        self._split_by: dict[int, cst.If] = {}
        # Loops whose resets cover other optimizers' parameters only: the steps left out.
        self._uncovered: dict[int, list[_Update]] = {}
        # Which modules an optimizer updates and a ``zero_grad()`` resets is the model's.
        self._graph = self.ctx.track_module_graph() if "step" in self.ctx.source else None

    # ------------------------------------------------------------ bookkeeping
    def _enclosing(self) -> list[_Facts]:
        """Facts of every loop around the current point, and of the current function."""
        found = [self._loops[id(loop)].facts for loop in self.ctx.loops if id(loop) in self._loops]
        function_facts = self._function_facts()
        if function_facts is not None:
            found.append(function_facts)
        return found

    def _function_facts(self) -> _Facts | None:
        function = self.ctx.function
        if function is None:
            return None
        facts = self._functions.get(id(function))
        if facts is None:  # (not ``setdefault``: it would build a _Facts on every call)
            facts = self._functions[id(function)] = _Facts()
        return facts

    def _enter_loop(self, node: cst.For | cst.While) -> None:
        parent = self._loops.get(id(self.ctx.loops[-1])) if self.ctx.loops else None
        loop = _Loop(node, parent, in_parent_body=parent is not None and self.ctx.scope.kind != "class")
        self._loops[id(node)] = loop
        self._order.append(loop)

    def visit_For(self, node: cst.For) -> None:
        self._enter_loop(node)

    def visit_While(self, node: cst.While) -> None:
        self._enter_loop(node)

    def _backwards_in(self, loop: _Loop) -> list[cst.Call]:
        """The backward() calls (any spelling) of one iteration of ``loop``."""
        return self._events.backwards_in(self.ctx.flow(loop.node))

    def _record_update(self, update: _Update) -> None:
        loops = frozenset(id(loop) for loop in self.ctx.loops if self.ctx.runs_every_iteration(loop))
        update = dataclasses.replace(update, every_iteration_of=loops, site=self.ctx.statement)
        for facts in self._enclosing():
            facts.updates.append(update)
        function = self._function_facts()
        if function is not None and not self.ctx.loops:
            function.updates_outside_loops.append(update)

    def _record_zeroing(self, owner: cst.BaseExpression | None = None, resets: frozenset[str] | None = None) -> None:
        """A gradient reset: of one tensor's (``w.grad = None``), or of all (``opt.zero_grad()``)."""
        key = dotted_name(owner) if owner is not None and self.ctx.value_of(owner).is_tensor else None
        module = owner is not None and key is None and not is_optimizer(self.ctx, owner) and (
            self.ctx.value_of(owner).kind in (Kind.MODULE, Kind.UNKNOWN))
        site = self.ctx.statement
        for facts in self._enclosing():
            if site is not None:
                facts.zeroing_sites.append(site)
            facts.resets.append(resets)
            if module:
                facts.zeroes_modules = True
            elif key is None:
                facts.zeroes = True
            else:
                facts.zeroed.add(key)

    # ------------------------------------------------------------ events
    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.loops and self.ctx.function is None:
            return  # module-level code outside loops cannot matter
        event = self._events.event_at(self.ctx, node)  # (a backward() is the index's)
        if event is not None:
            if event.kind is EventKind.ZERO_GRAD:
                self._record_zeroing(event.subject, self._reset_modules(node, event.subject))
            elif event.kind is EventKind.STEP:
                self._record_step(node, event.subject)
            if event.kind is not EventKind.GRAD:
                return
        func = node.func
        # Runs for every call: exact type tests, not ``isinstance`` (slow on libcst's ABCs).
        method = func.attr.value if type(func) is cst.Attribute else None
        if method is not None and self._check_inplace_update(node, func, method):
            return
        self._check_call_target(node)

    def _reset_modules(self, node: cst.Call, subject: cst.BaseExpression | None) -> frozenset[str] | None:
        """The modules ``subject.zero_grad()`` resets (not ``p.grad.zero_()``, ``_foreach_zero_``)."""
        if self._graph is None or subject is None or type(node.func) is not cst.Attribute:
            return None
        if node.func.attr.value not in ZERO_GRAD_METHODS:
            return None
        return self._graph.reset_modules(subject, is_optimizer(self.ctx, subject))

    def _record_step(self, node: cst.Call, optimizer: cst.BaseExpression | None) -> None:
        """``opt.step()`` / ``scaler.step(opt)``: an optimizer update."""
        assert optimizer is not None
        func = node.func
        key = dotted_name(optimizer)
        # An optimizer class of this file may zero in its own step(); an LBFGS closure runs.
        helpers = [self.ctx.resolve_function(f) for f in (func, *(arg.value for arg in node.args))]
        closure = any(h is not None for h in helpers[1:]) or any(isinstance(arg.value, cst.Lambda) for arg in node.args)
        modules = self._graph.reset_modules(optimizer, True) if self._graph is not None else None
        self._record_update(_Update(key or fixes.source_of(optimizer), key, root_name(optimizer), with_closure=closure,
                                    modules=modules))
        if self.ctx.step_may_zero_gradients(optimizer):
            self._record_zeroing()  # the project's own optimizer resets the gradients in its step()
        for helper in helpers:
            if helper is not None:
                self._record_helper(helper)

    def _check_inplace_update(self, node: cst.Call, func: cst.Attribute, method: str) -> bool:
        """``w.sub_(lr * w.grad)`` / ``w.data.add_(w.grad, alpha=-lr)`` on a trainable leaf."""
        if not is_inplace_method(method):
            return False
        target = func.value
        if not self._is_parameter_target(target):
            return False
        if not any(self.ctx.mentions_gradient(arg.value) for arg in node.args):
            return False
        self._record_manual_update(target, node)
        return True

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if self._is_parameter_target(node.target) and self.ctx.mentions_gradient(node.value):
            self._record_manual_update(node.target, node)

    def _is_parameter_target(self, target: cst.BaseExpression) -> bool:
        if through_grad(target):
            return False  # clipping or scaling a gradient is not a parameter update
        while isinstance(target, cst.Subscript):
            target = target.value
        if isinstance(target, cst.Attribute) and target.attr.value == "data":
            target = target.value
        return self.ctx.value_of(target).kind is Kind.LEAF

    def _record_manual_update(self, target: cst.BaseExpression, node: cst.CSTNode) -> None:
        line = self.ctx.statement
        owners = tuple(_grad_owners(line)) if line is not None else ()
        key = dotted_name(target)
        leaf = dotted_name(_leaf_of(target))
        if not owners and leaf is not None:
            owners = (leaf,)  # `x += step` with `step = lr * x.grad` computed before: its own gradient
        outside = tuple(o for o in owners if _outside_modules(self.ctx.value_of_key(o)))
        self._record_update(_Update(None, key, root_name(target), line, owners, outside_modules=outside))

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._note_assignment(target.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._note_assignment(node.target)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._note_assignment(node.target)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._note_assignment(node.asname.name)

    def _note_assignment(self, target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Attribute) and target.attr.value == "grad":
            self._record_zeroing(target.value)  # p.grad = None, p.grad = torch.zeros_like(p)
            return
        if through_grad(target):
            self._record_zeroing()

    def visit_Del(self, node: cst.Del) -> None:
        targets = node.target.elements if isinstance(node.target, (cst.Tuple, cst.List)) else [node.target]
        for target in targets:
            expr = target.value if isinstance(target, cst.Element) else target
            if isinstance(expr, cst.Attribute) and expr.attr.value == "grad":
                self._record_zeroing(expr.value)

    # ------------------------------------------------------------ calls into other code
    def _check_call_target(self, node: cst.Call) -> None:
        helper = self.ctx.resolve_function(node.func)
        if helper is not None:
            self._record_helper(helper)
        else:
            opaque = self._opaque(node)
            if opaque is not None:
                for facts in self._enclosing():
                    facts.opaque.append(opaque)
        for arg in node.args:  # a function handed over (e.g. an LBFGS closure) may be called
            if type(arg.value) is cst.Name or type(arg.value) is cst.Attribute:
                passed = self.ctx.resolve_function(arg.value)
                if passed is not None:
                    self._record_helper(passed)

    def _record_helper(self, helper: FunctionInfo) -> None:
        for facts in self._enclosing():
            facts.helpers.append(helper)

    def _opaque(self, node: cst.Call) -> _OpaqueCall | None:
        """The call, if it runs code torchlint cannot see that might reach the gradients."""
        if not may_hide_autograd(self.ctx, node):
            return None
        func = node.func
        roots = self._arg_roots(node)
        if type(func) is cst.Attribute:
            receiver = self.ctx.value_of(func.value)
            receiver_root = root_name(func.value)
            stored = receiver.cls.attr(func.attr.value) if receiver.cls is not None else None
            if stored is None and receiver_root is not None:
                roots = roots | {receiver_root}  # (an object kept on the instance gets only its arguments)
        name = last_name(func) if self.ctx.qualify(func) is not None or type(func) in (cst.Name, cst.Attribute) else ""
        region = self.ctx.region
        key = dotted_name(func)
        forward = self._graph is not None and key is not None and self._graph.is_module_key(key)
        return _OpaqueCall(name, roots, self._holds_parameters(node), node, region, forward)

    def _arg_roots(self, node: cst.Call) -> frozenset[str]:
        roots = {root_name(arg.value) for arg in node.args}
        return frozenset(root for root in roots if root is not None)

    def _holds_parameters(self, node: cst.Call) -> bool:
        for arg in node.args:
            value = self.ctx.value_of(arg.value)
            if value.kind in (Kind.MODULE, Kind.OPTIMIZER, Kind.OBJECT, Kind.LEAF):
                return True
            if value.kind is Kind.COLLECTION and (
                "named-parameters" in value.tags or (value.element is not None and value.element.kind is Kind.LEAF)
            ):
                return True
        return False

    # ------------------------------------------------------------ judgement
    def finish(self) -> None:
        failing = [loop for loop in self._order if self._fails(loop)]
        has_failing_inner: set[int] = set()
        for loop in failing:
            parent = loop.parent
            while parent is not None:
                has_failing_inner.add(id(parent))
                parent = parent.parent
        for loop in failing:
            if id(loop) not in has_failing_inner:
                self._report(loop)

    def _own_updates(self, loop: _Loop) -> list[_Update]:
        """Updates in the loop body of something that is not re-created in each iteration."""
        if not loop.facts.updates:
            return []  # (most loops: their body's binding table is not needed)
        if self._rebinds_none_of(loop.parent if loop.in_parent_body else None, loop.facts.updates):
            return list(loop.facts.updates)  # (an inner loop: its body is not walked for its bindings)
        bound = self.ctx.binding_table(loop.node.body).rebound
        return [u for u in loop.facts.updates if u.key not in bound and u.root not in bound]

    def _rebinds_none_of(self, loop: _Loop | None, updates: list[_Update]) -> bool:
        """Whether the body of ``loop`` rebinds the key and root of none of ``updates``.  An
        enclosing loop's updates include its inner loops' (``_enclosing``): its binding table is
        built for ``_own_updates`` anyway."""
        if loop is None:
            return False
        bound = self.ctx.binding_table(loop.node.body).rebound
        return not any(u.key in bound or u.root in bound for u in updates)

    def _fails(self, loop: _Loop) -> bool:
        facts = loop.facts
        backward = self._events.loop_calls_backward(loop.node)
        updates, zeroes = list(self._own_updates(loop)), facts.zeroes
        zeroed = set(facts.zeroed)
        zeroes_modules = facts.zeroes_modules
        opaque = list(facts.opaque)
        helpers_zero = False
        for helper in self._helpers_of(facts):
            backward = backward or self._events.calls_backward_outside_loops(helper)
            summary = self._functions.get(id(helper))
            if summary is None:
                continue
            updates.extend(summary.updates_outside_loops)
            helpers_zero = helpers_zero or bool(summary.zeroes or summary.zeroed or summary.zeroes_modules)
            zeroes = zeroes or summary.zeroes
            zeroed |= summary.zeroed
            zeroes_modules = zeroes_modules or summary.zeroes_modules
            opaque.extend(summary.opaque)
        if not backward or not updates:
            return False
        if facts.zeroing_sites and not helpers_zero:
            split = self._zeroing_skipped_by_a_fixed_branch(loop)
            if split is not None:
                self._split_by[id(loop)] = split
                zeroes, zeroed, zeroes_modules = False, set(), False
        uncovered = [] if helpers_zero else self._steps_no_reset_covers(loop)
        if uncovered:
            self._uncovered[id(loop)] = uncovered
            updates = uncovered
        elif zeroes:
            return False
        elif zeroes_modules and not any(o not in zeroed for u in updates for o in u.outside_modules):
            return False  # `model.zero_grad()` resets every updated parameter (as far as can be told)
        if zeroed and not self._unreset_owners(updates, zeroed):
            return False  # each manually updated tensor's gradient is reset (an optimizer's too, then)
        roots = {u.root for u in updates if u.root is not None}
        # Where the loop resets some gradients by hand, the one it leaves out is not reset in a forward.
        own = {id(call) for call in facts.opaque}
        return not any(
            call.may_zero(roots, forwards_run=not uncovered)
            and not (id(call) in own and self._cannot_be_the_reset(loop, call, roots))
            for call in opaque
        )

    def _cannot_be_the_reset(self, loop: _Loop, call: _OpaqueCall, optimizer_roots: set[str]) -> bool:
        """A call in the loop body that may reach the gradients but does not reset them for the
        next iteration: it runs after a ``backward()`` and before every update (a reset there
        would discard the gradients the update is about to use: ``clip_gradient(optimizer, c)``),
        or what it returns is backpropagated (it computes the loss: a forward pass,
        ``out = predict(model, x)``) and it is not handed an optimizer."""
        node = call.node
        if call.named_as_zeroing():
            return False
        flow = self.ctx.flow(loop.node)
        if not flow.contains(node):
            return False
        sites = [u.site for u in self._own_updates(loop)]
        if sites and all(site is not None and flow.contains(site) for site in sites) and any(
            all(flow.between(node, backward, site) for site in sites)  # type: ignore[arg-type]
            for backward in self._backwards_in(loop)
        ):
            return True
        if call.roots & optimizer_roots:
            return False
        uses = self.ctx.value_flow(call.region).follow_value(node) or ()
        return any(use.sink is Sink.BACKWARD and flow.before(node, use.node) for use in uses)

    def _steps_no_reset_covers(self, loop: _Loop) -> list[_Update]:
        """Optimizer steps of the loop body over known modules none of whose parameters any reset
        in the body reaches, when every reset's modules are known (``optimizer_E.zero_grad()`` in
        a loop that also steps ``optimizer_D``, built over other modules)."""
        resets = loop.facts.resets
        if not resets or any(reset is None for reset in resets):
            return []
        return [update for update in self._own_updates(loop) if update.modules
                and not any(covers(reset, update.modules) for reset in resets)]  # type: ignore[arg-type]

    def _zeroing_skipped_by_a_fixed_branch(self, loop: _Loop) -> cst.If | None:
        """Some update (with a ``backward()`` on its path) sits in one arm of an ``if`` whose
        test does not change in the loop, and every gradient reset of the loop body sits in
        another arm: the iterations that take the update's arm never reset (DAB-DETR's
        ``if args.amp: optimizer.zero_grad(); ... else: losses.backward(); optimizer.step()``).
        A test that may change between iterations (``if i % k == 0``) is accumulation by design."""
        if not has_if_statement(loop.node.body):
            return None  # no ``if`` to split the body (and no flow of it to build)
        flow = self.ctx.flow(loop.node)
        backwards = self._backwards_in(loop)
        for update in self._own_updates(loop):
            site = update.site
            if site is None or not flow.contains(site):
                continue
            if not any(not flow.exclusive(call, site) for call in backwards):
                continue
            splits = [self._fixed_split(loop, flow, zeroing, site) for zeroing in loop.facts.zeroing_sites]
            if splits and all(split is not None for split in splits):
                return splits[0]
        return None

    def _fixed_split(self, loop: _Loop, flow: Flow, a: cst.CSTNode, b: cst.CSTNode) -> cst.If | None:
        """The ``if`` in whose different arms ``a`` and ``b`` sit, when its test is the same on
        every iteration of ``loop``."""
        branch = flow.separating_node(a, b)
        return branch if isinstance(branch, cst.If) and self.ctx.invariant_in(branch.test, loop.node) else None

    def _helpers_of(self, facts: _Facts) -> list[FunctionInfo]:
        """Helpers called from the body, and the helpers they call, transitively."""
        seen: dict[int, FunctionInfo] = {}
        todo = list(facts.helpers)
        while todo:
            helper = todo.pop()
            if id(helper) in seen:
                continue
            seen[id(helper)] = helper
            summary = self._functions.get(id(helper))
            if summary is not None:
                todo.extend(summary.helpers)
        return list(seen.values())

    def _report(self, loop: _Loop) -> None:
        uncovered = self._uncovered.get(id(loop))
        updates = uncovered or self._own_updates(loop)
        optimizers = sorted({u.optimizer for u in updates if u.optimizer is not None})
        if optimizers:
            what = " and ".join(f"`{name}.step()`" for name in optimizers)
            remedy = (
                f"call `{optimizers[0]}.zero_grad()` in the loop"
                if len(optimizers) == 1
                else "zero each optimizer's gradients in the loop"
            )
        else:
            what = "updates the parameters from `.grad`"
            remedy = "reset the gradients in the loop (`w.grad = None`)"
        split = self._split_by.get(id(loop))
        never = (
            "resets only the gradients of other parameters (another optimizer's or module's)"
            if uncovered
            else "never zeroes the gradients"
            if split is None
            else f"zeroes the gradients only in the other branch of `if {fixes.source_of(split.test)}:`"
            " (the same branch is taken on every iteration)"
        )
        message = (
            f"this loop calls `backward()` and {what} but {never}: `backward()` adds "
            f"into `.grad`, so each update uses the sum of all gradients so far; {remedy}"
        )
        self.report(loop.node, message, self._fix(loop, updates))

    # ------------------------------------------------------------ fixes
    def _fix(self, loop: _Loop, updates: list[_Update]) -> Fix | None:
        if not updates:
            return None
        fix = None
        if all(u.optimizer is not None for u in updates):
            fix = self._zero_grad_fix(loop, updates)
        elif all(u.optimizer is None for u in updates):
            fix = self._set_to_none_fix(loop, updates)
        if fix is None:
            return None
        # A loop that updates on every iteration means one step per gradient: adding the
        # reset is what it needs (safe).  Conditional or helper-made updates may be
        # deliberate accumulation: the intent is unclear (unsafe).
        safe = not loop.facts.helpers and all(id(loop.node) in u.every_iteration_of for u in updates)
        return dataclasses.replace(fix, safety=FixSafety.SAFE if safe else FixSafety.UNSAFE)

    def _zero_grad_fix(self, loop: _Loop, updates: list[_Update]) -> Fix | None:
        keys = {u.key for u in updates}
        if len(keys) != 1 or any(u.with_closure for u in updates):
            return None
        key = keys.pop()
        body = loop.node.body
        if key is None or not isinstance(body, cst.IndentedBlock) or not body.body:
            return None
        root = key.split(".")[0]
        bindings = self.ctx.binding_table(body)
        if root in bindings.rebound or root in bindings.loop_targets:
            return None  # the optimizer is not known at the top of the body
        call = cst.parse_expression(f"{key}.zero_grad()")
        line = cst.SimpleStatementLine(body=[cst.Expr(call)])
        first = body.body[0]
        return Fix(f"call `{key}.zero_grad()` at the top of the loop", ((first, cst.FlattenSentinel([line, first])),))

    @staticmethod
    def _unreset_owners(updates: list[_Update], zeroed: set[str]) -> list[str]:
        """Tensors a manual update reads the gradient of that nothing in the loop resets (an
        optimizer step, or an update whose gradient source is not named, counts as reset once
        the loop resets some gradient: it may be the right one)."""
        return [o for u in updates if u.optimizer is None for o in u.grad_owners if o not in zeroed]

    def _set_to_none_fix(self, loop: _Loop, updates: list[_Update]) -> Fix | None:
        replacements = []
        flow = self.ctx.flow(loop.node)
        reads = gradient_reads(loop.node.body)
        backwards = self._backwards_in(loop)
        reset: list[str] = []
        for update in updates:
            line = update.line
            if not isinstance(line, cst.SimpleStatementLine) or not update.grad_owners:
                return None
            owners = [o for o in update.grad_owners if o not in loop.facts.zeroed]
            if not owners:
                continue
            if any(_unsafe_to_reset(flow, reads, backwards, owner, line) for owner in owners):
                return None
            resets = [cst.parse_statement(self._reset_statement(owner)) for owner in owners]
            replacements.append((line, cst.FlattenSentinel([line, *resets])))
            reset += owners
        if not replacements or len({id(old) for old, _ in replacements}) != len(replacements):
            return None
        owners = ", ".join(f"`{o}.grad`" for o in reset)
        how = "zero" if self._zeroes_in_place() else "set to None"
        return Fix(f"{how} {owners} after the update", tuple(replacements))

    def _zeroes_in_place(self) -> bool:
        """The file's own style of resetting gradients: ``w.grad.zero_()`` or ``w.grad = None``."""
        return ".grad.zero_()" in self.ctx.source or ".grad.data.zero_()" in self.ctx.source

    def _reset_statement(self, owner: str) -> str:
        return f"{owner}.grad.zero_()\n" if self._zeroes_in_place() else f"{owner}.grad = None\n"


def _unsafe_to_reset(
    flow: Flow, reads: list[cst.Attribute], backwards: list[cst.Call], owner: str, line: cst.SimpleStatementLine
) -> bool:
    """Resetting ``owner.grad`` right after ``line`` (in one iteration: ``flow``) breaks a read of
    it later in the iteration, or in the next one before a ``backward()`` recreates it."""
    inside = {id(read) for read in gradient_reads(line)}
    own = [read for read in reads if dotted_name(read.value) == owner]
    if any(flow.before(line, read) and id(read) not in inside for read in own):
        return True
    first_backward = min((flow.place(call).order for call in backwards), default=None)  # type: ignore[union-attr]
    if first_backward is None:
        return True
    return any(flow.place(read).order < first_backward for read in own if flow.place(read) is not None)  # type: ignore[union-attr]
