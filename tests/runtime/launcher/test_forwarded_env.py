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
