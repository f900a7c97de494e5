"""kuberl runtime: everything that runs inside the training image (data plane)."""
