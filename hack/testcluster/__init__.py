"""Parts of the local control plane that hack/localcluster.py assembles.

Kept beside hack/localcluster.py (not in the product packages) because only the tests, the
Makefile and the demo use it; the product never starts a control plane.
"""
