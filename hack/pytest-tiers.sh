#!/usr/bin/env bash
# make test's pytest run, as two processes side by side:
#   control plane: the tiers on the local cluster (cluster, e2e, realpods), one cluster, in order;
#                  they mostly wait (for the apiserver, the operator's polls, kwok, pods);
#   the rest:      unit tests and the CPU training runs (runtime).
# Their wall times overlap instead of adding up. Each process has its own basetemp; the rest's
# output is printed after the control plane's, and the run fails if either half failed.
# usage: hack/pytest-tiers.sh PYTHON [pytest args...]
set -uo pipefail

py=$1
shift
tiers="cluster or e2e or realpods"
work=$(mktemp -d -t kuberl-pytest.XXXXXX)
rest_log="${work}/rest.log"

"${py}" -m pytest -m "not (${tiers})" --basetemp="${work}/rest" "$@" >"${rest_log}" 2>&1 &
rest_pid=$!
trap 'kill "${rest_pid}" 2>/dev/null' EXIT INT TERM

echo "==> control-plane tiers (${tiers}); the other tests run beside them (${rest_log})"
"${py}" -m pytest -m "${tiers}" --basetemp="${work}/cluster" "$@"
cluster_rc=$?
wait "${rest_pid}"
rest_rc=$?
trap - EXIT INT TERM

echo
echo "==> unit and runtime tests (ran beside the control-plane tiers)"
cat "${rest_log}"
echo
echo "==> control-plane tiers: pytest exit ${cluster_rc}; unit and runtime: pytest exit ${rest_rc}"
# 5 = nothing collected (PYTEST_ARGS picked tests of one half only): fine if the other half ran.
if { [ "${cluster_rc}" -eq 5 ] && [ "${rest_rc}" -eq 5 ]; }; then
  exit 5
fi
for rc in "${cluster_rc}" "${rest_rc}"; do
  if [ "${rc}" -ne 0 ] && [ "${rc}" -ne 5 ]; then
    exit "${rc}"
  fi
done
rm -rf "${work}"
exit 0
