"""TL003 nonleaf-parameter: a name meant as a trainable leaf is bound to a non-leaf."""

from __future__ import annotations

import libcst as cst

from torchlint import fixes
from torchlint.analysis.names import names_in, root_name
from torchlint.analysis import Kind, dotted_name, keyword_arg
from torchlint.analysis.events import EventKind
from torchlint.analysis.uses import references
from torchlint.analysis.values import LEAF_ON_A_PATH, MOVED_LEAF_ON_A_PATH, Value
from torchlint.analysis.walk import subtree as _subtree
from torchlint.analysis.torch_api import (
    CONVERSION_METHODS, DTYPE_OF_METHOD, FACTORIES, PARAMETER, PARAMETER_TOKENS, RESHAPING_METHODS, TORCH_DTYPES,
    OPTIMIZER_PREFIX, VARIABLE,
)
from torchlint.rule import FixSafety, Rule



class NonleafParameter(Rule):
    code = "TL003"
    name = "nonleaf-parameter"
    summary = "A tensor meant as a trainable leaf is created as (or rebound to) a non-leaf"
    fix_safety = FixSafety.SAFE
    tokens = ("requires_grad", *PARAMETER_TOKENS)

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        # name -> the assignment that rebound a leaf to a value derived from it
        self._rebound: dict[str, tuple[cst.BaseExpression, cst.CSTNode | None]] = {}
        # name -> (value, statement, fix) of a non-leaf creation not yet used as a leaf
        self._unused_creations: dict[str, tuple[cst.BaseExpression, cst.CSTNode | None, object]] = {}
        # Names differentiated with torch.autograd.grad, which accepts a non-leaf input.
        self._grad_inputs: set[str] = set()

    # ---------------------------------------------------------- creation site
    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._forget_starting_value(target.target, node.value)
            self._check_creation(target.target, node.value)
            name = dotted_name(target.target) or ""
            if "param" in name.rsplit(".", 1)[-1].lower():
                self._check_listed_as_parameters(node.value)
        if len(node.targets) == 1:
            self._note_rebinding(node.targets[0].target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._check_creation(node.target, node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._forget_starting_value(node.target, node.value)

    def _forget_starting_value(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        """A creation later rebound or changed in place, other than by a gradient update, was
        a starting value, not a trainable leaf: ``loss = torch.tensor(0.0, requires_grad=True)
        .to(dev)`` then ``loss = loss + l`` (seen in real code: YOLOLogic,
        RegionProposalGenerator).  ``w -= lr * w.grad`` uses it as a leaf."""
        key = dotted_name(target)
        if key in self._unused_creations and not self.ctx.mentions_gradient(value):
            del self._unused_creations[key]

    def _check_creation(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if isinstance(value, cst.Tuple) and isinstance(target, cst.Tuple) and len(target.elements) == len(value.elements):
            for sub_target, element in zip(target.elements, value.elements):
                self._check_creation(sub_target.value, element.value)
            return
        key = dotted_name(target)
        created = self.ctx.value_of(value)
        comprehension = _comprehension_of(value)
        if comprehension is not None and created.element is not None:
            # `[torch.ones(2, requires_grad=True).to(dev) for _ in ...]`: each element is created so.
            value, created = comprehension.elt, created.element
        creation = self._leaf_creation_under(value)
        if key is None or creation is None:
            return
        if created.kind is Kind.LEAF:
            return  # e.g. `.cpu()` / `.float()` on a CPU float32 tensor returns the leaf itself
        finding = (value, self.ctx.statement, self._creation_fix(value, creation))
        if self.ctx.qualify(creation.func) == PARAMETER:
            # An nn.Parameter is meant to be trained; the op turned it into a plain tensor.
            if not _repeats_inner_moves(value, creation) and not (
                _only_moves(value, creation) and self._made_from_module_tensors(creation)
            ):
                self._report_creation(*finding)
        else:
            # Reported once used as a leaf (`.grad` read, handed to an optimizer), else at the
            # end of the file -- unless it is differentiated with torch.autograd.grad, which
            # accepts a non-leaf input (learn2learn's CAVIA context tensor), or is a starting
            # value later rebound (a loss sum).
            self._unused_creations[key] = finding

    def _made_from_module_tensors(self, creation: cst.Call) -> bool:
        """``nn.Parameter(self.weight * old / new).to(**self.tpdv)`` (PopArt's rescaling): the data
        is computed from tensors the object already holds, which live where the module's forward
        uses them, i.e. on the device the move targets -- the move is then a no-op (the Parameter
        itself).  Whether it is cannot be known statically, so stay silent; a fresh factory
        inside (``torch.Tensor(n)``, on the CPU) keeps it reported."""
        if not creation.args:
            return False
        reads_self = False
        for node in _subtree(creation.args[0].value):
            if type(node) is cst.Call and self._factory(node) is not None:  # type: ignore[arg-type]
                return False
            if type(node) is cst.Attribute and root_name(node) == "self":  # type: ignore[arg-type]
                reads_self = True
        return reads_self

    def _report_creation(self, value: cst.BaseExpression, statement: cst.CSTNode | None, fix) -> None:
        self.report(
            value,
            "this is not a leaf: the op applied after creating the tensor with requires_grad=True "
            "returns a copy, so `.grad` stays None and optimizers reject it; create the leaf last",
            fix,
            statement=statement,
        )

    def _leaf_creation_under(self, value: cst.BaseExpression) -> cst.Call | None:
        """The leaf-creating call at the bottom of a chain of conversions/views/scalar ops, if any."""
        node = value
        depth = 0
        while True:
            if type(node) is cst.Call and type(node.func) is cst.Attribute:
                method = node.func.attr.value
                if depth > 0 and method == "requires_grad_":
                    return node if self._is_leaf_creation(node) else None
                if method not in CONVERSION_METHODS and method not in RESHAPING_METHODS:
                    return node if depth > 0 and self._is_leaf_creation(node) else None
                node = node.func.value
            elif type(node) is cst.BinaryOperation:
                left, right = self.ctx.value_of(node.left), self.ctx.value_of(node.right)
                if left.kind is Kind.NUMBER:
                    node = node.right
                elif right.kind is Kind.NUMBER:
                    node = node.left
                else:
                    return None
            elif type(node) is cst.Call:
                return node if depth > 0 and self._is_leaf_creation(node) else None
            else:
                return None
            depth += 1

    def _is_leaf_creation(self, call: cst.Call) -> bool:
        return self.ctx.value_of(call).kind is Kind.LEAF and (
            self._factory(call) is not None
            or self.ctx.qualify(call.func) in (PARAMETER, VARIABLE)
            or (isinstance(call.func, cst.Attribute) and call.func.attr.value == "requires_grad_")
        )

    def _factory(self, call: cst.Call) -> str | None:
        qualified = self.ctx.qualify(call.func)
        return qualified if qualified in FACTORIES else None

    # ---------------------------------------------------------- fixes
    def _creation_fix(self, value: cst.BaseExpression, creation: cst.Call):  # -> Fix | None
        moved = self._move_into_factory(value, creation)
        if moved is not None:
            return fixes.replace("create the tensor on its device/dtype directly", value, moved)
        if self.ctx.qualify(creation.func) == PARAMETER and creation.args:
            inner = creation.args[0].value
            rebuilt = _replace_node(value, creation, inner)
            if rebuilt is None:
                return None
            new_value = creation.with_changes(args=[creation.args[0].with_changes(value=fixes.strip_parens(rebuilt))])
            return fixes.replace("apply the op before wrapping in nn.Parameter", value, new_value.with_changes(
                lpar=value.lpar, rpar=value.rpar))
        if self._factory(creation) is not None or self.ctx.qualify(creation.func) == VARIABLE:
            plain = creation.with_changes(args=_without_requires_grad(creation.args))
        elif isinstance(creation.func, cst.Attribute):
            plain = creation.func.value
        else:
            return None
        rebuilt = _replace_node(value, creation, plain)
        if rebuilt is None:
            return None
        receiver = rebuilt
        if isinstance(rebuilt, cst.BinaryOperation) and not rebuilt.lpar:
            receiver = rebuilt.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return fixes.replace("make the final tensor the leaf", value, fixes.method_call(receiver, "requires_grad_", []))

    def _move_into_factory(self, value: cst.BaseExpression, creation: cst.Call) -> cst.Call | None:
        """``torch.randn(3, requires_grad=True).to(device)`` -> ``torch.randn(3, device=device, requires_grad=True)``."""
        if self._factory(creation) is None or not isinstance(value, cst.Call):
            return None
        if not isinstance(value.func, cst.Attribute) or value.func.value is not creation:
            return None
        method = value.func.attr.value
        keyword: str | None = None
        new_value: cst.BaseExpression | None = None
        if method == "to" and len(value.args) == 1 and value.args[0].keyword is None:
            arg = value.args[0].value
            qualified = self.ctx.qualify(arg)
            if qualified is not None and qualified in TORCH_DTYPES:
                keyword = "dtype"
            elif isinstance(arg, cst.SimpleString) or (
                isinstance(arg, cst.Call) and self.ctx.qualify(arg.func) == "torch.device"
            ):
                keyword = "device"
            elif isinstance(arg, (cst.Name, cst.Attribute)):
                spelled = (dotted_name(arg) or "").lower()
                keyword = "dtype" if "dtype" in spelled else "device" if "dev" in spelled else None
            new_value = arg
        elif method == "cuda" and not value.args:
            keyword, new_value = "device", cst.SimpleString('"cuda"')
        elif method in DTYPE_OF_METHOD and not value.args and self.ctx.torch_name:
            keyword = "dtype"
            new_value = cst.Attribute(value=cst.Name(self.ctx.torch_name), attr=cst.Name(DTYPE_OF_METHOD[method]))
        if keyword is None or new_value is None or keyword_arg(creation, keyword) is not None:
            return None
        args = list(creation.args)
        insert_at = next((i for i, a in enumerate(args) if a.keyword and a.keyword.value == "requires_grad"), len(args))
        new_arg = cst.Arg(
            value=new_value,
            keyword=cst.Name(keyword),
            equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
            comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
        )
        if insert_at == len(args) and args:
            args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            new_arg = new_arg.with_changes(comma=cst.MaybeSentinel.DEFAULT)
        args.insert(insert_at, new_arg)
        return creation.with_changes(args=args, lpar=value.lpar, rpar=value.rpar)

    # ---------------------------------------------------------- rebound leaf
    def _note_rebinding(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        key = dotted_name(target)
        if key is None:
            return
        old_value = self.ctx.value_of(target)
        if old_value.kind is not Kind.LEAF and LEAF_ON_A_PATH not in old_value.tags:
            return
        if self.ctx.mentions_gradient(value) or key not in names_in(value):
            return
        new_value = self.ctx.value_of(value)
        if new_value.kind is Kind.NONLEAF and self._moves_a_fresh_leaf(key, old_value, value):
            # `x = Variable(t, requires_grad=True)` then `x = x.cuda()`: the creation-with-a-move
            # in two statements, judged as the one-statement form is.
            self._unused_creations[key] = (value, self.ctx.statement, None)
        elif new_value.kind is Kind.NONLEAF or MOVED_LEAF_ON_A_PATH in new_value.tags:
            self._rebound[key] = (value, self.ctx.statement)

    def _moves_a_fresh_leaf(self, key: str, leaf: Value, value: cst.BaseExpression) -> bool:
        """``value`` converts ``key`` (``.to(device)``, ``.cuda()``, ``.double()`` ...) and ``key``
        holds a leaf created earlier in this function (or module) that nothing used since."""
        chain = _conversion_chain(value)
        if not chain or dotted_name(chain[-1].func.value) != key:  # type: ignore[attr-defined]
            return False
        creation = leaf.origin
        if not isinstance(creation, cst.Call) or not self._is_leaf_creation(creation):
            return False
        region = self.ctx.region
        flow = self.ctx.flow(region)
        if not flow.before(creation, value):
            return False
        statement = self.ctx.statement or value  # (its targets come before the value)
        inside = {id(node) for node in (*_subtree(creation), *_subtree(statement))}
        return not any(
            flow.between(reference, creation, value) and id(reference) not in inside
            for reference in references(region, key)
        )

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "grad":
            self._check_use_as_leaf(node.value)

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.ctx.qualify(node.func) or ""
        if qualified.startswith(OPTIMIZER_PREFIX) and node.args:
            self._check_listed_as_parameters(node.args[0].value)
        event = self.ctx.autograd_event(node)
        if event is not None and event.kind is EventKind.GRAD:
            # (`grad_outputs` need not be leaves either: a moved copy there is fine)
            inputs = [a.value for a in node.args if a.keyword is None][1:3] + [
                a.value for a in node.args if a.keyword is not None and a.keyword.value in ("inputs", "grad_outputs")
            ]
            for expr in inputs:
                for name in names_in(expr):
                    self._grad_inputs.add(name)
                    if "." in name:  # `policy.context` is `self.context` seen from outside
                        self._grad_inputs.add("." + name.rsplit(".", 1)[-1])

    def finish(self) -> None:
        for key, (value, statement, fix) in self._unused_creations.items():
            attribute = "." + key.rsplit(".", 1)[-1] if "." in key else None
            if key not in self._grad_inputs and attribute not in self._grad_inputs:
                self._report_creation(value, statement, fix)

    def visit_Return(self, node: cst.Return) -> None:
        function = self.ctx.function
        if function is not None and function.name == "parameters" and node.value is not None:
            self._check_listed_as_parameters(node.value)

    def _check_listed_as_parameters(self, collection: cst.BaseExpression) -> None:
        if isinstance(collection, (cst.List, cst.Tuple)):
            for element in collection.elements:
                group = _param_group_params(element.value)
                if group is None:
                    self._check_use_as_leaf(element.value)
                elif isinstance(group, (cst.List, cst.Tuple)):
                    self._check_listed_as_parameters(group)
                else:
                    self._check_use_as_leaf(group)  # `{'params': w}`: a tensor is a group of one

    def _check_use_as_leaf(self, expr: cst.BaseExpression) -> None:
        key = dotted_name(expr)
        if key is None:
            return
        current = self.ctx.value_of(expr)
        if key in self._unused_creations:
            value, statement, fix = self._unused_creations[key]
            if current.origin is value:
                del self._unused_creations[key]
                self._report_creation(value, statement, fix)
            return
        if key not in self._rebound:
            return
        value, statement = self._rebound[key]
        if current.origin is not value:
            return
        if current.kind is Kind.NONLEAF:
            was = "was a leaf that requires grad"
        elif MOVED_LEAF_ON_A_PATH in current.tags:
            was = "is a leaf that requires grad on some path here"
        else:
            return
        self.report(
            value,
            f"`{key}` {was}; rebinding it to this derived value makes it a "
            "non-leaf, and it is used as a leaf later (`.grad` stays None, optimizers reject it)",
            None,
            statement=statement,
        )


def _param_group_params(element: cst.BaseExpression) -> cst.BaseExpression | None:
    """``{'params': ps, 'lr': ...}`` (an optimizer's parameter group): ``ps``."""
    if not isinstance(element, cst.Dict):
        return None
    for item in element.elements:
        if isinstance(item, cst.DictElement) and isinstance(item.key, cst.SimpleString) and (
                item.key.evaluated_value == "params"):
            return item.value
    return None


def _comprehension_of(value: cst.BaseExpression) -> cst.ListComp | cst.GeneratorExp | None:
    """``[e for ...]``, or ``list(e for ...)`` / ``tuple(e for ...)``: the comprehension making its elements."""
    if type(value) is cst.Call and type(value.func) is cst.Name and value.func.value in ("list", "tuple"):
        if len(value.args) == 1 and value.args[0].keyword is None:
            value = value.args[0].value
    return value if type(value) in (cst.ListComp, cst.GeneratorExp) else None


def _repeats_inner_moves(value: cst.BaseExpression, creation: cst.Call) -> bool:
    """``nn.Parameter(t.to(dev)).to(dev)``: every conversion after the Parameter repeats one
    inside it, so it returns the Parameter itself (a no-op, measured)."""
    inner = _conversion_chain(creation.args[0].value if creation.args else None)
    outer = _conversion_chain(value, stop=creation)
    return bool(outer) and all(any(_same_conversion(call, done) for done in inner) for call in outer)


def _only_moves(value: cst.BaseExpression, creation: cst.Call) -> bool:
    """Everything applied to ``creation`` in ``value`` is a device/dtype conversion."""
    chain = _conversion_chain(value, stop=creation)
    return bool(chain) and chain[-1].func.value is creation  # type: ignore[attr-defined]


def _conversion_chain(node: cst.BaseExpression | None, stop: cst.CSTNode | None = None) -> list[cst.Call]:
    """The conversion calls ``.to(...)`` / ``.cuda()`` ... applied on top of each other."""
    chain: list[cst.Call] = []
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node is not stop:
        if node.func.attr.value not in CONVERSION_METHODS:
            break
        chain.append(node)
        node = node.func.value
    return chain


def _same_conversion(a: cst.Call, b: cst.Call) -> bool:
    """The same conversion method with the same arguments (the receivers left out)."""
    assert isinstance(a.func, cst.Attribute) and isinstance(b.func, cst.Attribute)
    return (
        a.func.attr.value == b.func.attr.value
        and len(a.args) == len(b.args)
        and all(x.value.deep_equals(y.value) for x, y in zip(a.args, b.args))
    )


def _without_requires_grad(args: tuple[cst.Arg, ...] | list[cst.Arg]) -> list[cst.Arg]:
    kept = [a for a in args if not (a.keyword is not None and a.keyword.value == "requires_grad")]
    if kept:
        kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return kept


def _replace_node(root: cst.BaseExpression, old: cst.CSTNode, new: cst.CSTNode) -> cst.BaseExpression | None:
    replaced = root.deep_replace(old, new)
    return replaced if isinstance(replaced, cst.BaseExpression) else None
