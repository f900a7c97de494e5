"""A plan's schema is pinned to its PLAN_VERSION: change a field and this test asks for a bump.

The operator ships the plan as JSON and the job's image loads it (`kuberl train --plan`), so the two
ends agree only while the schema of a version never changes. The fingerprint is the JSON schema of
RunPlan and SFTPlan without prose (descriptions and titles): names, types, required fields.
"""

import hashlib
import json
from typing import Any

from kuberl_api.plan.run_plan import RunPlan
from kuberl_api.plan.sft import SFTPlan
from kuberl_api.plan.version import PLAN_VERSION

# PLAN_VERSION -> the schema it names. A new version adds a line; a line never changes.
SCHEMAS = {
    1: "85476a0b9fab59931a096954f77450b9c49d9fb5af08e475daf8335671521aa1",
    2: "5290e0eb1e69fcd02ddfe0d6eb6ae1b5c56d18cbd764dd3547c32ab134ba4613",  # RolloutPlan.multi_turn
    3: "617d3ad1d46047edfb62e747c8c31e02f62db2c24a15b10aef7cfcadaba3eec2",  # checkpoint_mirror
    4: "e20f48d049e730e0d710d2ab39d16f2d281c69bb18a3e40d59aa912210395427",  # DAPO filter_groups
    5: "9a7b20a9cf99c83aab90be89fe45f9338ba16ad716e56c0219484a25f71cd297",  # loss parameters
    6: "f1e3d3e71eee0715b3b2daac2d078c09203baa22e5cd3bda06b70140bb1c76c1",  # rollout_correction
    7: "4f8eb02f5a43d17535d230445d3540ac6216d429fbf328c7182b2df31849001b",  # inputs, SFT mirror
    8: "69828e3e08112584cd30a9d1f19c54a0b360e78b5e49ac36223b48c061da22e3",  # reward_judge, gdpo
    9: "ba4d0293057ca151a6a1df57ad9fbc2d4d4db28dbbdebce8bb4f7b7d3e6515c7",  # tool_timeout
    10: "b6cb9183b7b0b2bed125f681ead912b41a2316c4956a0e03eda7aa2f6f4e4f24",  # paths.output_url
    11: "1339f769b4c6b5a331d8f169a207ac19750df5a9442c9d1935c56002d8b74be3",  # activation_offload
}


def _without_prose(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _without_prose(v) for k, v in node.items() if k not in ("description", "title")}
    if isinstance(node, list):
        return [_without_prose(v) for v in node]
    return node


def schema_fingerprint() -> str:
    schemas = [_without_prose(m.model_json_schema()) for m in (RunPlan, SFTPlan)]
    return hashlib.sha256(json.dumps(schemas, sort_keys=True).encode()).hexdigest()


def test_the_plan_schema_is_the_one_its_version_names():
    assert schema_fingerprint() == SCHEMAS[PLAN_VERSION], (
        "RunPlan/SFTPlan changed: bump PLAN_VERSION in kuberl_api/plan/version.py and add "
        f"{PLAN_VERSION + 1}: {schema_fingerprint()!r} to SCHEMAS"
    )


def test_prose_is_not_part_of_the_fingerprint():
    schema = RunPlan.model_json_schema()
    assert _without_prose({"description": "x", **schema}) == _without_prose(schema)
    assert "properties" in _without_prose(schema)
