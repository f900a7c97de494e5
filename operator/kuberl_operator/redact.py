"""Redaction of what a job's head says before it lands in status or events.

Anyone who may ``get`` the job or list events in its namespace reads ``status.attempts[].message``
and the Warning events, so a traceback that prints a token must not carry it there. This is a
best effort on well-known shapes (bearer tokens, ``*TOKEN=``/``*SECRET=``/``*PASSWORD=``
assignments, Hugging Face, GitHub, AWS, OpenAI-style and Slack keys, JWTs), not a guarantee:
the whole log stays on the job's own volume (``logs/attempt-N/driver.log``).
"""

import re

MASK = "[REDACTED]"

_PATTERNS = [
    # Authorization: Bearer <token>
    (re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"), rf"\1{MASK}"),
    # FOO_TOKEN=..., "password": "...", api_key: ...
    (
        re.compile(
            r"(?i)([A-Za-z0-9_.-]*(?:token|secret|passw(?:or)?d|api[_-]?key|access[_-]?key|"
            r"credential)s?[\"']?\s*[=:]\s*[\"']?)[^\s\"',;}]{4,}"
        ),
        rf"\1{MASK}",
    ),
    (re.compile(r"\bhf_[A-Za-z0-9]{20,}"), MASK),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"), MASK),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), MASK),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{20,}"), MASK),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), MASK),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"), MASK),
]


def redact(text: str) -> str:
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text
