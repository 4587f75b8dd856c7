"""TL100 unused-noqa: a ``# noqa: TLxxx`` comment that suppresses nothing.

An audit of the suppression comments (see ``torchlint.noqa.NoqaAudit``), not of
the code: the engine runs it after the other rules with the noqa comments that
suppressed a finding.
"""

from __future__ import annotations

import re
from collections.abc import Sequence, Set

from torchlint.noqa import NoqaAudit, NoqaDirective, Use, replace_comment, without_codes
from torchlint.rule import Fix, FixSafety

# Codes of other tools (E501, F401, ...) share noqa comments with ours and are never reported.
_OWN_CODE = re.compile(r"TL[0-9]+$")


class UnusedNoqa(NoqaAudit):
    code = "TL100"
    name = "unused-noqa"
    summary = "A `# noqa: TLxxx` comment lists a torchlint code that suppresses nothing there"
    default = False
    fix_safety = FixSafety.SAFE

    def audit(self, directives: Sequence[NoqaDirective], used: Set[Use], enabled: frozenset[str]) -> None:
        from torchlint.rulebook import pages
        from torchlint.rules import all_rules

        # Codes with a rule or a rule-book page are known (a page may precede its rule).
        known = {rule.code for rule in all_rules()} | set(pages())
        for directive in directives:
            unused: list[str] = []
            unknown: list[str] = []
            for listed in directive.codes:
                if not _OWN_CODE.match(listed) or self.code.startswith(listed) or (directive.line, listed) in used:
                    continue
                if not any(code.startswith(listed) for code in known):
                    unknown.append(listed)
                elif any(code.startswith(listed) for code in enabled):
                    unused.append(listed)
                # A rule that is not enabled here may well fire under another configuration.
            if unused or unknown:
                self._report(directive, unused, unknown)

    def _report(self, directive: NoqaDirective, unused: list[str], unknown: list[str]) -> None:
        details = "; ".join(
            f"{label}: {', '.join(codes)}" for label, codes in (("unused", unused), ("unknown", unknown)) if codes
        )
        new_comment = without_codes(directive.comment.value, {*unused, *unknown})
        description = "remove the unused `noqa` directive" if new_comment is None else "remove the unused codes"
        fix = Fix(description, (replace_comment(directive, new_comment),), FixSafety.SAFE)  # type: ignore[arg-type]
        self.report_directive(directive, f"unused `noqa` directive ({details})", fix)
