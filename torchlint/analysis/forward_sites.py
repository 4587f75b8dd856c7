"""How many calls in the file run a module class's ``forward``: the call sites its parameters
can be bound from.

``self.hyper = HyperConv(3)`` in ``__init__`` and ``self.hyper(adj, self.embedding.weight)`` in
another ``forward``: calling the instance runs ``HyperConv.forward`` with ``embedding`` the
embedding's weight.  Unlike a helper's calls, an instance's calls cannot be counted by the
function's name: they are counted from the names that hold the instances.  The count is only
given when every instance is seen: each ``HyperConv(`` in the file is bound straight to a holder
(``self.hyper = HyperConv(...)``, ``net = HyperConv(...).to(device)``), the class is named
nowhere else but its ``class`` line and ``super(HyperConv, self)``, and each holder is only
called (``self.hyper(...)``, ``self.hyper.forward(...)``) or used through an attribute
(``self.hyper.eval()``) — not handed on (``nn.Sequential(self.hyper)``, ``train(net)``), where
something unseen may call it.  Counted from the text: comments and strings only add to what is
counted, and then the counts disagree and no parameter is bound.
"""

from __future__ import annotations

import re

from torchlint.analysis.names import count_after_non_word

_HOLDER = r"((?:self\.)?[A-Za-z_]\w*)"


def forward_call_count(source: str, class_name: str) -> int | None:
    """The number of calls of instances of ``class_name`` in ``source``, or None when its
    instances may be called where the file does not show."""
    name = re.escape(class_name)
    mentions = count_after_non_word(rf"{name}\b", source, after_dot=False)  # not `x.HyperConv`
    declared = len(re.findall(rf"\bclass\s+{name}\b", source)) + len(re.findall(rf"\bsuper\(\s*{name}\s*,", source))
    holders = re.findall(rf"(?<![\w.]){_HOLDER}\s*=\s*{name}\s*\(", source)
    if not holders or mentions != declared + len(holders):
        return None
    calls = 0
    for holder in set(holders):
        found = _holder_calls(source, holder, holders.count(holder))
        if found is None:
            return None
        calls += found
    return calls


def _holder_calls(source: str, holder: str, constructed: int) -> int | None:
    """Calls of ``holder``; None when it is bound to anything else or used otherwise than
    called or reached into (``holder.eval()``)."""
    calls = assigned = 0
    for use in re.finditer(rf"(?<![\w.]){re.escape(holder)}\b", source):
        rest = source[use.end():use.end() + 80]
        if re.match(r"\s*=[^=]", rest):
            assigned += 1
        elif re.match(r"\s*\(", rest) or re.match(r"\s*\.\s*forward\s*\(", rest):
            calls += 1
        elif not re.match(r"\s*\.\s*[A-Za-z_]", rest):
            return None  # handed on, returned, compared ...
    return calls if assigned == constructed else None
