"""``keys/verl_defaults.json`` holds verl 0.9.1's own default of every no-effect key.

kuberl does not depend on verl at run time, so the defaults a no-effect key is compared with
(``kuberl validate`` lists only the ones a user changed) are a generated copy. Regenerate with
``.venv/bin/python tests/api/keys/test_verl_defaults.py`` after a verl upgrade.
"""

import json
import sys
from pathlib import Path
from typing import Any

import verl

from kuberl_api.keys import REGISTRY, Fate
from kuberl_api.keys.verl_defaults import DATA, verl_defaults
from kuberl_api.yamlio import load_yaml

ROOT = Path(__file__).resolve().parents[3]
COPY = ROOT / "api" / "kuberl_api" / "keys" / DATA
GENERATED = Path(verl.__file__).parent / "trainer" / "config" / "_generated_ppo_trainer.yaml"
TARGET = "_target_"
_ABSENT = object()


def _lookup(tree: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(tree, dict) or part not in tree:
            return _ABSENT
        tree = tree[part]
    return tree


def _targets(tree: Any, prefix: str = "") -> dict[str, str]:
    found: dict[str, str] = {}
    if isinstance(tree, dict):
        for key, value in tree.items():
            path = f"{prefix}{key}"
            if key == TARGET:
                found[path] = value
            else:
                found.update(_targets(value, path + "."))
    return found


def expected() -> tuple[dict[str, Any], dict[str, str]]:
    """verl's raw defaults (interpolations as written) of the no-effect keys it has."""
    tree = load_yaml(GENERATED.read_text())
    defaults = {}
    for key, entry in REGISTRY.items():
        value = _lookup(tree, key)
        if entry.fate is Fate.NO_EFFECT and value is not _ABSENT:
            defaults[key] = value
    return defaults, _targets(tree)


def test_the_copy_is_verls_own():
    defaults, targets = expected()
    assert defaults == verl_defaults().values
    assert targets == verl_defaults().targets


def test_most_no_effect_keys_are_verl_keys_with_a_default():
    no_effect = [k for k, e in REGISTRY.items() if e.fate is Fate.NO_EFFECT]
    missing = [k for k in no_effect if k not in verl_defaults().values]
    # The rest are older verl keys 0.9.1 dropped (data.val_batch_size, ...) and kuberl's copies of
    # fsdp_config keys verl's tree lacks for a role: any value is a change. 38 of 149 when the
    # loss modes' parameters became honoured (they were verl keys with a default).
    assert len(missing) * 10 <= len(no_effect) * 3, missing


def _write() -> None:
    defaults, targets = expected()
    text = json.dumps({"values": defaults, "targets": targets}, indent=1, sort_keys=True)
    COPY.write_text(text + "\n")


if __name__ == "__main__":
    _write()
    sys.exit(0)
