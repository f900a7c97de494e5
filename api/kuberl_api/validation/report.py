"""What a valid document was accepted with, in words: its warnings and its no-effect keys.

One renderer for every place that tells the user: ``kuberl validate`` prints these lines in
full; the operator's ``Validated`` condition and its events carry them capped (``limit``), so a
job's status stays bounded. Only key paths and rendered problems, never a config's values beyond
what ``Problem.render`` shows.
"""

from collections.abc import Sequence

from kuberl_api.validation.problems import Problem

NOT_HONOURED = "set but not honoured (accepted, no effect in kuberl; see `kuberl keys`)"


def problem_line(problem: Problem) -> str:
    """``error: <problem>`` or ``warning: <problem>``, as ``kuberl validate`` prints it."""
    label = "error" if problem.is_error else "warning"
    return f"{label}: {problem.render()}"


def warnings_summary(warnings: Sequence[Problem], limit: int | None = None) -> str:
    """The warnings, one ``warning: ...`` each joined by ``; `` (the first ``limit``, then how
    many more); empty when there are none."""
    shown, more = _capped(list(warnings), limit)
    parts = [problem_line(w) for w in shown]
    if more:
        parts.append(f"and {more} more warning(s)")
    return "; ".join(parts)


def not_honoured_summary(
    changed: Sequence[str], at_verl_default: Sequence[str], limit: int | None = None
) -> str:
    """One line: the no-effect keys set to something other than verl's default, by name (the
    first ``limit``, then how many more), and how many more were set to verl's own default or to
    what kuberl does anyway (a copied verl config sets ~100: no news). Empty when there are
    none."""
    if not changed and not at_verl_default:
        return ""
    text = f"{len(changed)} key(s) {NOT_HONOURED}"
    shown, more = _capped(list(changed), limit)
    if shown:
        text += ": " + ", ".join(shown)
    if more:
        text += f" and {more} more"
    if at_verl_default:
        text += f"; {len(at_verl_default)} more set to verl's default (nothing lost), not listed"
    return text


def accepted_with(
    warnings: Sequence[Problem],
    changed: Sequence[str],
    at_verl_default: Sequence[str],
    limit: int | None = None,
) -> list[str]:
    """The non-empty summaries of what a valid document was accepted with: its warnings, then
    its no-effect keys."""
    texts = [
        warnings_summary(warnings, limit),
        not_honoured_summary(changed, at_verl_default, limit),
    ]
    return [text for text in texts if text]


def _capped(items: list, limit: int | None) -> tuple[list, int]:
    if limit is None or len(items) <= limit:
        return items, 0
    return items[:limit], len(items) - limit
