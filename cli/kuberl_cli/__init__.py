"""The ``kuberl`` command line: one entry point for the spec, the runtime and the operator."""
