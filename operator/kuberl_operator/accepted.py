"""What a valid job was accepted with, told on the job: ``kubectl describe rlj`` shows it.

The ``Validated=True`` message names the warnings and the keys accepted without effect (the
text ``kuberl validate`` prints, from ``kuberl_api.validation.report``), capped at
``MAX_LISTED`` of each so status stays bounded; the same go out as events once per spec
generation, not on every reconcile.
"""

from dataclasses import dataclass, field

from kuberl_api.job import Condition
from kuberl_api.validation import Problem
from kuberl_api.validation.report import accepted_with, not_honoured_summary, warnings_summary
from kuberl_operator import conditions as cond
from kuberl_operator.redact import redact
from kuberl_operator.state import Event

MAX_LISTED = 8
"""Warnings, and no-effect keys, named in the condition and each event; the rest are counted."""
VALID = "Valid"
VALIDATION_WARNINGS = "ValidationWarnings"
KEYS_WITHOUT_EFFECT = "KeysWithoutEffect"


@dataclass(frozen=True)
class Accepted:
    """The non-error findings of a valid spec."""

    warnings: list[Problem] = field(default_factory=list)
    not_honoured: list[str] = field(default_factory=list)
    """No-effect keys set to something other than verl's default: named."""
    at_verl_default: list[str] = field(default_factory=list)
    """No-effect keys set to verl's own default: counted (nothing lost)."""


def validated_message(config_key: str, accepted: Accepted) -> str:
    """``spec and <key> are valid``, then the warnings and no-effect keys (capped)."""
    notes = accepted_with(
        accepted.warnings, accepted.not_honoured, accepted.at_verl_default, MAX_LISTED
    )
    return redact("; ".join([f"spec and {config_key} are valid", *notes]))[: cond.MAX_MESSAGE]


def accepted_events(accepted: Accepted) -> list[Event]:
    """A Warning event naming the warnings, a Normal one naming the keys without effect (as
    ``kuberl validate`` prints them: information on stdout, not a warning); none when there is
    nothing to tell. Keys only at verl's default lose nothing: no event for them alone."""
    events = []
    if accepted.warnings:
        text = f"{len(accepted.warnings)} warning(s): " + warnings_summary(
            accepted.warnings, MAX_LISTED
        )
        events.append(Event("Warning", VALIDATION_WARNINGS, redact(text)))
    if accepted.not_honoured:
        text = not_honoured_summary(accepted.not_honoured, accepted.at_verl_default, MAX_LISTED)
        events.append(Event("Normal", KEYS_WITHOUT_EFFECT, text))
    return events


def is_news(previous: Condition | None, generation: int | None, message: str) -> bool:
    """Whether this generation's ``Validated=True`` message was not yet on the job: a new spec
    generation, a first validation, or a different verdict (an operator that says more)."""
    return (
        previous is None
        or previous.status != "True"
        or previous.observed_generation != generation
        or previous.message != message
    )
