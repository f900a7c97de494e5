"""Ray pods that let the ranks save before they go: a termination grace period and a preStop hook.

Whoever deletes a job's Ray pods (Kueue's eviction through KubeRay, a node drain, the garbage
collector after the job is deleted) makes the kubelet run each container's ``preStop`` hook and
only then send SIGTERM to ``ray start``, which takes every Ray process of the pod with it. The
hook asks the training to stop the way ``ray job stop`` does (runtime trainer/preemption.py):

* a process whose command line runs ``kuberl train`` (the Ray job's driver, on the head) gets
  SIGTERM: the driver creates the run's stop file on the output directory;
* a process that names a stop file (``KUBERL_STOP_FILE``: every rank actor) has that file
  created: the ranks of a pod deleted alone (one node drained) see it too;

then it waits until every process of the Ray job in the pod (those with
``KUBERL_SUBMISSION_ID``; a zombie counts as exited) has exited: the ranks finish the step in
flight, save a checkpoint at it, the driver exits and Ray ends the job's actors. The wait ends
in any case a few seconds before the grace period (``--stop-grace-seconds``), which the kubelet
enforces anyway. A pod with no Ray job in it stops at once.
"""

from typing import Any

PRESTOP_SCRIPT = r"""
root="$1"; end=$(( $(date +%s) + $2 )); pids=""
for dir in "$root"/[0-9]*; do
  pid="${dir##*/}"
  env=$(tr '\0' '\n' < "$dir/environ" 2>/dev/null) || continue
  case "$env" in *KUBERL_SUBMISSION_ID=*) ;; *) continue ;; esac
  pids="$pids $pid"
  file=$(printf '%s\n' "$env" | sed -n 's/^KUBERL_STOP_FILE=//p' | head -n 1)
  if [ -n "$file" ]; then touch "$file" 2>/dev/null; fi
  case "$(tr '\0' ' ' < "$dir/cmdline" 2>/dev/null)" in
    *"kuberl train"*) kill -TERM "$pid" 2>/dev/null ;;
  esac
done
while [ "$(date +%s)" -lt "$end" ]; do
  alive=""
  for pid in $pids; do
    if [ -d "$root/$pid" ] && ! grep -q '^State:[[:space:]]*Z' "$root/$pid/status" 2>/dev/null
    then alive=1; fi
  done
  if [ -z "$alive" ]; then exit 0; fi
  sleep 1
done
"""
MARGIN_SECONDS = 5
"""The hook gives up this long before the grace period ends, so `ray start` still gets its
SIGTERM (and a moment to stop) before the kubelet's SIGKILL."""


def prestop_command(grace_seconds: int, proc_root: str = "/proc") -> list[str]:
    """The hook's command; ``proc_root`` is where it looks for processes (tests: a copy)."""
    wait = max(grace_seconds - MARGIN_SECONDS, 0)
    return ["/bin/sh", "-c", PRESTOP_SCRIPT, "kuberl-prestop", proc_root, str(wait)]


def stop_gracefully(raycluster: dict[str, Any], grace_seconds: int) -> None:
    """Give the head and every worker pod the grace period and the preStop hook."""
    spec = raycluster["spec"]
    groups = [spec["headGroupSpec"], *spec.get("workerGroupSpecs", [])]
    for group in groups:
        pod = group["template"]["spec"]
        pod["terminationGracePeriodSeconds"] = grace_seconds
        for container in pod["containers"]:
            hook = {"exec": {"command": prestop_command(grace_seconds)}}
            container.setdefault("lifecycle", {})["preStop"] = hook
