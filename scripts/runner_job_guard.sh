#!/usr/bin/env bash
# The GPU runners' job-started hook: refuses every job that is not the nightly of this repository started by
# its schedule or a manual dispatch. Install it on each self-hosted GPU runner, in the runner's .env:
#
#     ACTIONS_RUNNER_HOOK_JOB_STARTED=/opt/robocache/runner_job_guard.sh   (a copy outside the work folder)
#     ROBOCACHE_RUNNER_REPO=OWNER/NAME
#     ROBOCACHE_RUNNER_BRANCH=main      (optional: the only branch whose nightly.yml may run here)
#
# Why on the runner: a pull request from a fork runs the workflow files of ITS branch, so it can edit any
# workflow (ci.yml included) to ask for the GPU labels; no check in this repository can stop that. The runner
# runs this hook from its own configuration before any step of the job, and a non-zero exit fails the job.
# (Also: Settings, Actions, "Require approval for all outside collaborators", and, for organisation runner
# groups, "Selected workflows" = nightly.yml on the default branch. docs/ci.md, "Fork pull requests".)
set -u
repo=${ROBOCACHE_RUNNER_REPO:-}
refuse() {
  echo "runner_job_guard: refusing this job: $1 (event ${GITHUB_EVENT_NAME:-?}, workflow ${GITHUB_WORKFLOW_REF:-?})" >&2
  exit 1
}
[ -n "$repo" ] || refuse "ROBOCACHE_RUNNER_REPO is not set in the runner's .env"
case "${GITHUB_EVENT_NAME:-}" in
  schedule|workflow_dispatch) ;;
  *) refuse "only the schedule and manual dispatches may use the GPU runners" ;;
esac
[ "${GITHUB_REPOSITORY:-}" = "$repo" ] || refuse "repository ${GITHUB_REPOSITORY:-?} is not $repo"
case "${GITHUB_WORKFLOW_REF:-}" in
  "$repo/.github/workflows/nightly.yml@refs/heads/${ROBOCACHE_RUNNER_BRANCH:-main}") ;;
  *) refuse "only $repo/.github/workflows/nightly.yml on ${ROBOCACHE_RUNNER_BRANCH:-main} may use the GPU runners (a dispatch from another branch would run that branch's code)" ;;
esac
echo "runner_job_guard: ${GITHUB_EVENT_NAME} of ${GITHUB_WORKFLOW_REF} accepted"
