"""Where ROLL meets document validation: a ROLL document, or a manifest's ``spec.roll_config``,
becomes the equivalent verl document; problems found later point back at the ROLL keys.
"""

from dataclasses import dataclass, field, replace
from typing import Any

from kuberl_api.roll.translate import translate_roll_config
from kuberl_api.validation.documents import Document, DocumentKind
from kuberl_api.validation.problems import Problem, join_path

ROLL_CONFIG_KEY = "roll_config"
_NO_POOLS = None


@dataclass
class TranslatedDocument:
    document: Document | None
    """The verl-shaped document, or None when the ROLL config has errors."""
    problems: list[Problem] = field(default_factory=list)
    origins: dict[str, str] = field(default_factory=dict)
    backend_path: str = ""


def translate_roll_document(doc: Document) -> TranslatedDocument | None:
    """None when ``doc`` holds no ROLL config (nothing to translate)."""
    if doc.kind is DocumentKind.ROLL:
        done = translate_roll_config(doc.body, doc.prefix)
        verl = None
        if done.backend_config is not None:
            verl = Document(
                DocumentKind.BACKEND_CONFIG, done.backend_config, doc.prefix, doc.source, {}
            )
        return TranslatedDocument(verl, done.problems, done.origins, doc.prefix)
    if doc.kind is not DocumentKind.MANIFEST or ROLL_CONFIG_KEY not in doc.body:
        return None
    return _translate_manifest(doc)


def _translate_manifest(doc: Document) -> TranslatedDocument:
    spec = doc.body
    prefix = join_path(doc.prefix, ROLL_CONFIG_KEY)
    backend_path = join_path(doc.prefix, "backend_config")
    if "backend_config" in spec:
        problem = Problem(
            prefix,
            "a spec holds backend_config or roll_config, not both",
            "keep one of them",
        )
        return TranslatedDocument(None, [problem])
    raw = spec[ROLL_CONFIG_KEY]
    if not isinstance(raw, dict):
        return TranslatedDocument(None, [Problem(prefix, "must be a mapping", "", raw)])
    done = translate_roll_config(raw, prefix, world_size=pool_world_size(spec.get("workerPools")))
    if done.backend_config is None:
        return TranslatedDocument(None, done.problems)
    body = {k: v for k, v in spec.items() if k != ROLL_CONFIG_KEY}
    body["backend_config"] = done.backend_config
    verl = Document(DocumentKind.MANIFEST, body, doc.prefix, doc.source, doc.metadata)
    return TranslatedDocument(verl, done.problems, done.origins, backend_path)


def pool_world_size(pools: Any) -> int | None:
    """Devices the pools give (accelerators, or one rank per CPU node); None if unreadable."""
    if not isinstance(pools, list) or not all(isinstance(p, dict) for p in pools):
        return None
    accelerated = [p for p in pools if (p.get("accelerator") or {}).get("type", "none") != "none"]
    try:
        if accelerated:
            return sum(
                int(p.get("nodes", 1)) * int(p["accelerator"]["perNode"]) for p in accelerated
            )
        return sum(int(p.get("nodes", 1)) for p in pools) or None
    except (KeyError, TypeError, ValueError):
        return None


def point_at_roll_keys(problems: list[Problem], backend_path: str, origins: dict) -> list[Problem]:
    """A problem at a translated verl key is reported at the ROLL key it came from."""
    out = []
    for problem in problems:
        key = problem.path.removeprefix(backend_path).lstrip(".") if backend_path else problem.path
        origin = origins.get(key)
        if origin is None and backend_path and not problem.path.startswith(backend_path):
            out.append(problem)
        elif origin is None:
            out.append(replace(problem, message=f"{problem.message} (in the translated {key})"))
        else:
            out.append(replace(problem, path=origin, message=f"{problem.message} (as {key})"))
    return out
