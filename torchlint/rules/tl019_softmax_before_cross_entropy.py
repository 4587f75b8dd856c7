"""TL019 softmax-before-cross-entropy: a cross-entropy (or NLL) loss fed softmax probabilities."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from torchlint import fixes
from torchlint.analysis import Kind, Value
from torchlint.analysis import torch_api as api
from torchlint.analysis.values import MODEL_OUTPUT_ITEM
from torchlint.rule import Fix, FixSafety, Rule

_LOGITS = "logits"
_LOG_PROBABILITIES = "log-probabilities"


class SoftmaxBeforeCrossEntropy(Rule):
    code = "TL019"
    name = "softmax-before-cross-entropy"
    summary = "Cross-entropy of softmax outputs (or `nll_loss` of probabilities): the loss plateaus, training stalls"
    fix_safety = FixSafety.UNSAFE
    # (A model file with a softmax head whose loss is handed in by the files importing it names
    # no loss: ``self.loss_op(y_pred, y)``.)
    tokens = ("cross_entropy", "CrossEntropyLoss", "nll_loss", "NLLLoss", "softmax", "Softmax")

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        # Losses of model outputs: (call, message, statement, the softmax classes once known).
        self._pending: list[tuple[cst.Call, str, cst.CSTNode | None, Callable[[], tuple[str, ...] | None]]] = []

    def visit_Call(self, node: cst.Call) -> None:
        expects, callee = self._expected_input(node)
        never_passed = default = None
        if expects is None:
            if callee is None:
                return
            # `self.loss_func(out, y)` where `__init__(self, loss_func=nn.CrossEntropyLoss())`.
            expects = self._expected_of_default(callee)
            if expects is None:
                # `self.loss_op(y_pred, y)` where `add_loss_op(self, loss_op)` is handed the loss by
                # the files importing this one (`model.add_loss_op(nn.NLLLoss())` in train.py).
                passed = self.ctx.passed_by_importers(callee) if callee.kind is Kind.UNKNOWN else None
                expects = _expected_of_class(self.ctx.torch_class(passed)) if passed is not None else None
                if expects is None:
                    return
                callee = passed
            else:
                default = callee.origin.default  # type: ignore[union-attr]
                never_passed = lambda: self.ctx.default_when_never_passed(callee) is not None  # noqa: E731
        argument = _input_argument(node)
        if argument is None:
            return
        if expects == _LOG_PROBABILITIES and _unreduced(node):
            # `nll_loss(probs, y, reduction="none")` is -probs[i, y[i]]: a gather, used on purpose
            # (focal-loss code computes 1 - p_t this way).
            return
        value = self.ctx.value_of(argument)
        loss = fixes.source_of(node.func)
        torch_class = self.ctx.torch_class(callee if callee is not None else self.ctx.value_of(_module_of(node.func)))
        if default is not None:
            loss += f"` (default `{fixes.source_of(default)}`)"
        elif torch_class is not None and type(node.func) is not cst.Call:
            loss += f"` (`{torch_class.rsplit('.', 1)[-1]}`)"
        else:
            loss += "`"
        if expects == _LOGITS:
            message = (
                f"`{loss} applies log-softmax itself: given softmax probabilities it takes a softmax twice, "
                "the loss cannot fall below a floor (1.46 for 10 classes) and training stalls; pass the logits"
            )
        else:
            message = (
                f"`{loss} expects log-probabilities: given softmax probabilities it minimises -p instead of "
                "-log p and training stalls; use `log_softmax`"
            )
        if never_passed is not None:
            self._report_default_loss(node, message, value, argument, never_passed)
        elif "softmax" in value.tags:
            self.report(node, message, _fix(self.ctx, argument, expects))
        elif "model-output" in value.tags or MODEL_OUTPUT_ITEM in value.tags or value.outputs or value.kind is Kind.UNKNOWN:
            # A module of this file: its forward is analysed later (or already was); a module
            # handed in as a parameter of a function no call has bound yet (``classifier(x)``):
            # what the call sites pass, later in this file or in the files importing it
            # (``call_sites.py``).
            function = self.ctx.function
            later = self.ctx.value_given_call_sites(argument) if function and not function.call_arguments else None

            def classes() -> tuple[str, ...] | None:
                found = self.ctx.softmax_classes(value)
                if found is None and later is not None:
                    given = later()
                    found = self.ctx.softmax_classes(given) if given is not None else None
                return found

            self._pending.append((node, message, self.ctx.statement, classes))

    def finish(self) -> None:
        # The messages of model outputs name the classes, known once the file is analysed.
        for node, message, statement, classes in self._pending:
            found = classes()
            if found is not None:
                self.report(node, _model_message(message, found), statement=statement)
        self._pending.clear()

    def _expected_of_default(self, callee: Value) -> str | None:
        """A loss parameter whose default builds a torch loss module: what that loss expects."""
        param = callee.origin
        if callee.kind is not Kind.UNKNOWN or type(param) is not cst.Param or type(param.default) is not cst.Call:
            return None
        return _expected_of_class(self.ctx.qualify(param.default.func))

    def _report_default_loss(
        self, node: cst.Call, message: str, value: Value, argument: cst.BaseExpression, never_passed: Callable[[], bool]
    ) -> None:
        """The loss is a parameter's default no call in the file overrides: the input must be
        softmax probabilities (or a softmax model's output, here or given the call sites)."""
        if "softmax" not in value.tags and "model-output" not in value.tags and not value.outputs:
            later = self.ctx.value_given_call_sites(argument)
            if later is None:
                return
            given = later
        else:
            given = lambda: value  # noqa: E731

        def classes() -> tuple[str, ...] | None:
            if not never_passed():
                return None
            found = given()
            return None if found is None else self.ctx.softmax_classes(found)

        self._pending.append((node, message, self.ctx.statement, classes))

    def _expected_input(self, node: cst.Call) -> tuple[str | None, Value | None]:
        """What the loss called expects, and (when it is no torch function) the callee's value."""
        qualified = self.ctx.qualify(node.func)
        if qualified in api.LOGIT_LOSS_FUNCTIONS:
            return _LOGITS, None
        if qualified in api.LOG_PROBABILITY_LOSS_FUNCTIONS:
            return _LOG_PROBABILITIES, None
        callee = self.ctx.value_of(_module_of(node.func))  # `criterion.forward(out, y)` too
        if callee.kind is not Kind.MODULE:
            return None, callee
        torch_class = self.ctx.torch_class(callee)
        if torch_class in api.LOGIT_LOSS_MODULES:
            return _LOGITS, callee
        if torch_class in api.LOG_PROBABILITY_LOSS_MODULES:
            return _LOG_PROBABILITIES, callee
        return None, None


def _expected_of_class(torch_class: str | None) -> str | None:
    """What a loss module of ``torch_class`` expects as input (None: no such loss)."""
    if torch_class in api.LOGIT_LOSS_MODULES:
        return _LOGITS
    if torch_class in api.LOG_PROBABILITY_LOSS_MODULES:
        return _LOG_PROBABILITIES
    return None


def _model_message(message: str, classes: tuple[str, ...]) -> str:
    """The message for the output of a model ending in softmax (one of ``classes``, when the
    model is built from one of several classes)."""
    if classes:
        named = " or ".join(f"`{name}`" for name in classes)
        model = f"the output of a model ending in softmax ({named}: the model is built from one of several classes, and this one's forward ends in softmax)"
    else:
        model = "the output of a model ending in softmax"
    return message.replace("softmax probabilities", model, 1)


def _module_of(func: cst.BaseExpression) -> cst.BaseExpression:
    """``criterion`` for ``criterion``, ``criterion.forward`` and ``criterion.__call__``."""
    if type(func) is cst.Attribute and func.attr.value in api.MODULE_CALL_METHODS:
        return func.value
    return func


def _unreduced(node: cst.Call) -> bool:
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value == "reduction":
            return type(arg.value) is cst.SimpleString and arg.value.evaluated_value == "none"
    return False


def _input_argument(node: cst.Call) -> cst.BaseExpression | None:
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value == "input":
            return arg.value
    for arg in node.args:
        if arg.keyword is None:
            return None if arg.star else arg.value
    return None


def _fix(ctx: object, argument: cst.BaseExpression, expects: str) -> Fix | None:
    """For a softmax written inline in the loss call: drop it (cross-entropy) or make it a
    ``log_softmax`` (NLL).  A softmax bound to a name may have other uses: no fix."""
    if type(argument) is not cst.Call:
        return None
    func = argument.func
    qualified = ctx.qualify(func)  # type: ignore[attr-defined]
    if qualified in api.SOFTMAX_FUNCTIONS and type(func) in (cst.Attribute, cst.Name):
        logits = next((a.value for a in argument.args if a.keyword is None and not a.star), None)
    elif type(func) is cst.Attribute and func.attr.value in api.SOFTMAX_METHODS:
        logits = func.value
    else:
        return None
    if logits is None:
        return None
    if expects == _LOGITS:
        return fixes.replace("drop the softmax (the loss applies log-softmax itself)", argument, logits)
    renamed = cst.Name(api.LOG_SOFTMAX_NAME)
    new_func = func.with_changes(attr=renamed) if type(func) is cst.Attribute else None
    if new_func is None:
        return None  # `from torch.nn.functional import softmax`: `log_softmax` may not be imported
    return fixes.replace("use `log_softmax`", func, new_func)
