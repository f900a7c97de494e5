"""Base classes every schema model derives from.

Unknown keys are errors (``extra="forbid"``) and values keep the type YAML gave them
(``strict=True``): ``"8"`` is not an integer here, just as it is not one for the API server.
"""

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class ConfigModel(BaseModel):
    """A node of the verl ``backend_config`` tree: snake_case keys, as verl users write them."""

    model_config = ConfigDict(extra="forbid", strict=True, validate_default=False)


class PlatformModel(BaseModel):
    """A Kubernetes-facing node of the job spec: camelCase keys only, as in every k8s API."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        alias_generator=to_camel,
        validate_by_alias=True,
        validate_by_name=False,
        serialize_by_alias=True,
    )
