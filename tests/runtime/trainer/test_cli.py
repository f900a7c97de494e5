"""`kuberl train` refuses a bad config before starting any rank, with the path of the problem."""

from __future__ import annotations

from pathlib import Path

from kuberl_cli.main import main

REPO = Path(__file__).resolve().parents[3]


def test_invalid_override_exits_2_and_names_the_key(capsys):
    code = main(["train", str(REPO / "examples" / "demo.yaml"), "trainer.totl_epochs=1"])
    assert code == 2
    assert "totl_epochs" in capsys.readouterr().err


def test_multi_node_configs_are_refused_locally(capsys):
    demo = str(REPO / "examples" / "demo.yaml")
    code = main(["train", demo, "trainer.nnodes=2", "trainer.n_gpus_per_node=1"])
    assert code == 2
    assert "nnodes" in capsys.readouterr().err


def test_missing_file(capsys, tmp_path):
    assert main(["train", str(tmp_path / "nope.yaml")]) == 2
