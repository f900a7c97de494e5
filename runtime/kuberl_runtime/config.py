"""What one training run needs besides the backend_config: where its outputs go.

`load_run_config` is the runtime's edge: a bare backend_config, a ModelArts YAML or a full
RLTrainingJob manifest, plus dotted `key=value` overrides applied to the backend_config before
validation, become one validated `RunConfig`.
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from kuberl_api.backend_config import BackendConfig
from kuberl_api.validation import DocumentKind, SpecInvalid, load_documents, validate_document
from kuberl_api.validation.documents import Document, set_dotted
from kuberl_api.validation.problems import Problem


@dataclass(frozen=True)
class RunConfig:
    backend_config: BackendConfig
    af_output_dir: str | None = None

    @property
    def checkpoint_dir(self) -> Path:
        """`trainer.default_local_dir`, resolved against the working directory."""
        return Path(self.backend_config.trainer.default_local_dir or "checkpoints").resolve()

    @property
    def output_dir(self) -> Path:
        """af_output_dir, or the checkpoint directory itself when there is none.

        Logs go to `<output_dir>/logs/` and the exported model to `<output_dir>/huggingface/`.
        """
        if self.af_output_dir:
            return Path(self.af_output_dir).resolve()
        return self.checkpoint_dir

    def to_json(self) -> str:
        return json.dumps(
            {
                "backend_config": self.backend_config.model_dump(mode="json"),
                "af_output_dir": self.af_output_dir,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> RunConfig:
        raw = json.loads(text)
        return cls(BackendConfig.model_validate(raw["backend_config"]), raw["af_output_dir"])


def load_run_config(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> RunConfig:
    """Validate the single job in `path` with `a.b.c=value` overrides on its backend_config.

    `path` "-" reads the YAML from stdin (a launcher can pipe the config in, no file needed).
    """
    if str(path) == "-":
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / "stdin.yaml"
            copy.write_text(sys.stdin.read())
            return load_run_config(copy, overrides)
    documents = load_documents(path)
    if len(documents) != 1:
        raise SpecInvalid(
            [Problem(str(path), f"holds {len(documents)} documents", "keep one job per file")]
        )
    doc = apply_overrides(documents[0], overrides)
    result = validate_document(doc)
    result.raise_for_errors()
    assert result.backend_config is not None
    return RunConfig(result.backend_config, result.af_output_dir)


def apply_overrides(doc: Document, overrides: list[str] | tuple[str, ...]) -> Document:
    """A copy of `doc` with each `dotted.key=value` (value parsed as YAML) set in backend_config."""
    if not overrides:
        return doc
    body = json.loads(json.dumps(doc.body))
    target = (
        body if doc.kind is DocumentKind.BACKEND_CONFIG else body.setdefault("backend_config", {})
    )
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SpecInvalid(
                [Problem(item, "override is not key=value", "write e.g. trainer.total_epochs=2")]
            )
        set_dotted(target, key.lstrip("+"), yaml.safe_load(value))
    return Document(doc.kind, body, doc.prefix, doc.source, doc.metadata)
