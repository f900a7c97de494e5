"""What the Ray launcher forwards from the driver to every rank, and what each rank keeps."""

from kuberl_runtime.device import requested_device
from kuberl_runtime.launcher.ray import forwarded_env


def test_job_settings_travel_but_the_driver_pods_own_port_and_ip_do_not():
    driver = {
        "KUBERL_JOB_NAME": "grpo",
        "KUBERL_FAULT_POINT": "step_middle",
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "KUBERL_METRICS_PORT": "26339",  # the head pod's port under hostNetwork
        "KUBERL_NODE_IP": "10.0.0.1",
        "PATH": "/usr/bin",
    }
    env = forwarded_env(driver, requested_device("cpu"))
    assert env == {
        "KUBERL_JOB_NAME": "grpo",
        "KUBERL_FAULT_POINT": "step_middle",
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
    }


def test_credentials_never_travel_in_the_runtime_env():
    """Ray's runtime-env agent logs each runtime_env it creates, env_vars included."""
    driver = {
        "HF_TOKEN": "hf_secret",
        "HF_HUB_OFFLINE": "1",
        "WANDB_API_KEY": "wandb-secret",
        "WANDB_PROJECT": "p",
        "MLFLOW_TRACKING_PASSWORD": "pw",
        "MLFLOW_TRACKING_TOKEN": "tok",
        "SWANLAB_API_KEY": "sk",
        "KUBERL_STORAGE_SECRET": "job-s3",
        "TOKENIZERS_PARALLELISM": "false",
    }
    env = forwarded_env(driver, requested_device("cpu"))
    assert env == {"HF_HUB_OFFLINE": "1", "WANDB_PROJECT": "p", "TOKENIZERS_PARALLELISM": "false"}
