#!/usr/bin/env bash
# make test's pytest run as two lanes side by side, so the control plane's waiting overlaps the
# CPU work instead of adding to it:
#   control plane: the tiers on the local cluster (cluster, e2e, realpods; a test that starts the
#                  cluster is marked so by tests/conftest.py), one cluster, in order; they mostly
#                  wait on the apiserver, the operator's polls, kwok and pods, so the few long
#                  runs that need no cluster (marked long_cpu: the learning demos, the Ray
#                  launcher's local Ray head) run here too, to even out the lanes;
#   cpu:           everything else: first the tests not marked runtime (unit tests, dry runs)
#                  on CPU_WORKERS pytest-xdist workers (default 2; a module stays on one worker,
#                  so its module-scoped fixtures are built once), then the runtime tests (CPU
#                  training runs, most of them 2-rank gloo runs that already fill both cores:
#                  two at once only wait on each other) one after another.
# The lanes share nothing: own basetemp, own cluster or none, and every server port comes from
# hack/freeport.py, which never hands one port to two pickers. The cpu lane's output is printed
# after the control plane's; the run fails if either lane failed, or if neither ran a test.
# usage: hack/pytest-lanes.sh PYTHON [pytest args...]
set -uo pipefail

py=$1
shift
tiers="cluster or e2e or realpods or long_cpu"
work=$(mktemp -d -t kuberl-pytest.XXXXXX)
cpu_log="${work}/cpu.log"

start=${SECONDS}
set -m # the cpu lane in a process group of its own, so an interrupted run stops all of it
(
  "${py}" -m pytest -m "not (${tiers}) and not runtime" --basetemp="${work}/cpu" \
    -n "${CPU_WORKERS:-2}" --dist loadscope "$@" >"${cpu_log}" 2>&1
  unit_rc=$?
  "${py}" -m pytest -m "not (${tiers}) and runtime" --basetemp="${work}/cpu-runtime" \
    "$@" >>"${cpu_log}" 2>&1
  runtime_rc=$?
  # 5 = nothing collected: fine for one part (PYTEST_ARGS may select only the other), not both.
  if [ "${unit_rc}" -eq 5 ]; then rc=${runtime_rc}
  elif [ "${runtime_rc}" -eq 5 ] || [ "${runtime_rc}" -eq 0 ]; then rc=${unit_rc}
  else rc=${runtime_rc}; fi
  echo $((SECONDS - start)) >"${work}/cpu.seconds"
  exit "${rc}"
) &
cpu_pid=$!
set +m
trap 'kill -- -"${cpu_pid}" 2>/dev/null' EXIT INT TERM

echo "==> lane 1, control-plane tiers (${tiers}); lane 2 (the rest) runs beside it: ${cpu_log}"
"${py}" -m pytest -m "${tiers}" --basetemp="${work}/cluster" "$@"
cluster_rc=$?
cluster_s=$((SECONDS - start))
wait "${cpu_pid}"
cpu_rc=$?
cpu_s=$(cat "${work}/cpu.seconds" 2>/dev/null || echo "?")
trap - EXIT INT TERM

echo
echo "==> lane 2: unit, runtime and dry-run tests (ran beside lane 1)"
cat "${cpu_log}"
echo
echo "==> lane 1 (control plane): exit ${cluster_rc} after ${cluster_s} s;" \
  "lane 2 (cpu): exit ${cpu_rc} after ${cpu_s} s"
# 5 = nothing collected: fine for a lane PYTEST_ARGS left empty, never for both.
if [ "${cluster_rc}" -eq 5 ] && [ "${cpu_rc}" -eq 5 ]; then
  exit 5
fi
for rc in "${cluster_rc}" "${cpu_rc}"; do
  if [ "${rc}" -ne 0 ] && [ "${rc}" -ne 5 ]; then
    exit "${rc}"
  fi
done
rm -rf "${work}"
exit 0
