"""At start: does the installed KubeRay lock Ray heads? Its RayCluster CRD must have authOptions.

The operator turns on each head's token lock through ``RayCluster.spec.authOptions``. A KubeRay
whose CRD lacks the field prunes it silently and every head runs unauthenticated, so the operator
refuses to start there, saying what to upgrade. A namespaced install may not read CRDs at all
(cluster-scoped): it starts with a warning, and the per-attempt head probe (attempts) guards it.
"""

import logging
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

log = logging.getLogger(__name__)

MIN_KUBERAY = "1.5.1"
"""The first KubeRay whose RayCluster has spec.authOptions (charts/kuberl/Chart.yaml says so)."""
CRD_NAME = "rayclusters.ray.io"
VERSION = "v1"
UPGRADE = (
    f"install or upgrade KubeRay to {MIN_KUBERAY} or later (its RayCluster has spec.authOptions, "
    "token authentication), with its CRDs (helm upgrade does not update CRDs: "
    "kubectl apply --server-side -f the release's crds/)"
)


def auth_options_problem(crd: dict[str, Any] | None) -> str | None:
    """Why ``crd`` (the rayclusters.ray.io CustomResourceDefinition) cannot lock heads, or None."""
    if crd is None:
        return f"KubeRay's CRD {CRD_NAME} is not installed: {UPGRADE}"
    versions = (crd.get("spec") or {}).get("versions") or []
    version = next((v for v in versions if v.get("name") == VERSION), None)
    if version is None:
        return f"KubeRay's CRD {CRD_NAME} has no version {VERSION}: {UPGRADE}"
    schema = ((version.get("schema") or {}).get("openAPIV3Schema") or {}).get("properties") or {}
    spec = (schema.get("spec") or {}).get("properties") or {}
    if "authOptions" not in spec:
        return (
            f"KubeRay's CRD {CRD_NAME} ({VERSION}) has no spec.authOptions, so Ray heads would "
            f"run without their token lock: {UPGRADE}"
        )
    return None


def kuberay_problem(api: client.ApiClient) -> str | None:
    """Read the installed CRD and judge it; an API error reading it is a problem too."""
    extensions = client.ApiextensionsV1Api(api)
    try:
        crd = api.sanitize_for_serialization(extensions.read_custom_resource_definition(CRD_NAME))
    except ApiException as err:
        if err.status == 403:  # a namespaced install holds no cluster-wide read of CRDs
            log.warning(
                "cannot read the CRD %s (HTTP 403: no cluster-wide read in this install), so "
                "KubeRay's head lock is not checked at start; each attempt still probes its head "
                "and fails HeadUnauthenticated if the head answers without the token",
                CRD_NAME,
            )
            return None
        if err.status != 404:
            return f"could not read the CRD {CRD_NAME} (HTTP {err.status} {err.reason})"
        crd = None
    return auth_options_problem(crd)
