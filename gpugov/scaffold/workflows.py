"""The GitHub Actions workflows of a new config repository: gpugov's own two (.github/workflows of its
repository), for a repository of declarations only.

The pull-request gate is the same job (tests/unit/test_init.py holds it equal to gpugov's own), without
the Pulumi preview, which needs the Pulumi program of gpugov's repository; the drift check runs for the
one cluster. Both install the pinned gpugov that `--pip-spec` names (the repository variable
GPUGOV_PIP_SPEC overrides it: a mirror's wheel, a git tag).
"""

from __future__ import annotations

PULL_REQUEST_HEADER = """\
# The pull-request gate, written by `gpugov init` (gpugov's README, "Pull requests: the review gate").
# The verdict is data to the pull request, never its code: the job checks out the BASE revision,
# installs the pinned gpugov (GPUGOV_PIP_SPEC), fetches the head's commits as git objects, and that
# trusted gpugov reads the head's declarations with git (`gpugov plan --head`, `gpugov codeowners
# --check --rev`). A change outside tenants/, policies/ and hardware/ is a risk (GP011) and, through
# CODEOWNERS' default owner `*`, needs the platform team's review.
#
# What makes it binding: a branch ruleset on the default branch requiring the checks "gpugov gate"
# and "platform approval" and a code-owner review, stale approvals dismissed; the environment
# gpugov-platform-approval with the platform team as required reviewers and self-review prevented.
"""

PULL_REQUEST = r'''name: gpugov pull request

on:
  pull_request:  # never pull_request_target: it runs with the base's secrets and a write token

permissions:
  contents: read
  pull-requests: write

env:
  GPUGOV_PIP_SPEC: ${{ vars.GPUGOV_PIP_SPEC || '@PIP_SPEC@' }}
  BASE_SHA: ${{ github.event.pull_request.base.sha }}
  HEAD_SHA: ${{ github.event.pull_request.head.sha }}

concurrency:
  group: gpugov-pr-${{ github.event.pull_request.number }}
  cancel-in-progress: true

jobs:
  validate-and-plan:
    name: gpugov gate
    runs-on: ubuntu-latest
    outputs:
      risky: ${{ steps.risks.outputs.risky }}
    steps:
      - name: Check out the base revision (the trusted gpugov)
        uses: actions/checkout@v4
        with:
          ref: ${{ github.event.pull_request.base.sha }}
          fetch-depth: 0   # plan reads the base revision from git
      - name: Fetch the head as data
        run: git fetch --no-tags --quiet origin "+$HEAD_SHA:refs/gpugov/head"
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      - name: Install the trusted gpugov
        run: python -m pip install "$GPUGOV_PIP_SPEC"
      - name: CODEOWNERS of the head is current
        run: gpugov codeowners --check --rev "$HEAD_SHA" .
      - name: Plan
        run: |
          if ! gpugov plan --base "$BASE_SHA" --head "$HEAD_SHA" --format markdown . > plan.md; then
            cat plan.md
            echo "::error title=gpugov gate::the head's declarations do not validate (the findings are above)"
            exit 1
          fi
      - name: Post or update the plan comment
        if: github.event.pull_request.head.repo.full_name == github.repository  # a fork's token cannot comment
        uses: actions/github-script@v7
        with:
          script: |
            const fs = require('fs');
            const body = fs.readFileSync('plan.md', 'utf8');
            const marker = '<!-- gpugov-plan -->';
            const { owner, repo } = context.repo;
            const issue_number = context.issue.number;
            const comments = await github.paginate(github.rest.issues.listComments, { owner, repo, issue_number });
            const mine = comments.find(c => c.body && c.body.includes(marker));
            if (mine) {
              await github.rest.issues.updateComment({ owner, repo, comment_id: mine.id, body });
            } else {
              await github.rest.issues.createComment({ owner, repo, issue_number, body });
            }
      - name: What-if (when the base holds a job trace)
        id: whatif
        run: |
          if [ -f whatif/trace.csv ]; then
            gpugov whatif --base "$BASE_SHA" --head "$HEAD_SHA" --trace whatif/trace.csv --format markdown . > whatif.md
            echo "posted=true" >> "$GITHUB_OUTPUT"
          else
            echo "no whatif/trace.csv: no what-if comment (README, What-if)"
          fi
      - name: Post or update the what-if comment
        if: steps.whatif.outputs.posted == 'true' && github.event.pull_request.head.repo.full_name == github.repository
        uses: actions/github-script@v7
        with:
          script: |
            const fs = require('fs');
            const body = fs.readFileSync('whatif.md', 'utf8');
            const marker = '<!-- gpugov-whatif -->';
            const { owner, repo } = context.repo;
            const issue_number = context.issue.number;
            const comments = await github.paginate(github.rest.issues.listComments, { owner, repo, issue_number });
            const mine = comments.find(c => c.body && c.body.includes(marker));
            if (mine) {
              await github.rest.issues.updateComment({ owner, repo, comment_id: mine.id, body });
            } else {
              await github.rest.issues.createComment({ owner, repo, issue_number, body });
            }
      - name: Risks the platform team must approve
        id: risks
        run: |
          set +e
          gpugov plan --base "$BASE_SHA" --head "$HEAD_SHA" --format text --fail-on risk . > risks.txt
          code=$?
          set -e
          cat risks.txt
          case "$code" in
            0) echo "risky=false" >> "$GITHUB_OUTPUT" ;;
            1) echo "risky=true" >> "$GITHUB_OUTPUT"
               echo "::warning title=gpugov plan::risks found: the platform-approval job waits for the platform team" ;;
            *) exit "$code" ;;
          esac

  # The binding approval of a risky plan (README, "Pull requests: the review gate"): this job waits
  # until a member of the platform team approves it in the environment gpugov-platform-approval, whose required
  # reviewers are the platform team ("Prevent self-review" on). No label, no one else can release it.
  # Require "gpugov gate" and "platform approval" as status checks; a plan without risks skips this
  # job, and a skipped job counts as passed. Every push runs the gate again and asks again.
  platform-approval:
    name: platform approval
    needs: validate-and-plan
    if: needs.validate-and-plan.outputs.risky == 'true'
    runs-on: ubuntu-latest
    environment: gpugov-platform-approval
    permissions: {}
    steps:
      - name: Approved by the platform team
        run: echo "The platform team approved the plan's risks for $HEAD_SHA"
'''

DRIFT_HEADER = """\
# Scheduled drift check, written by `gpugov init` (gpugov's README, "Drift"): compares the
# declarations with the live cluster and alerts on change. Exit 1 (drift) and 3 (could not check)
# both fail the run. Credentials: the secret named in the matrix below (a kubeconfig with the drift
# ClusterRole's read-only rights), kept in the environment gpugov-drift, whose deployment branches are
# the default branch only. Add a matrix entry per cluster you declare.
"""

DRIFT = r'''name: gpugov drift

on:
  schedule:
    - cron: "17 * * * *"
  workflow_dispatch:

permissions:
  contents: read

env:
  GPUGOV_PIP_SPEC: ${{ vars.GPUGOV_PIP_SPEC || '@PIP_SPEC@' }}

jobs:
  drift:
    runs-on: ubuntu-latest
    environment: gpugov-drift  # holds the kubeconfig secrets; deployment branches: the default branch only
    strategy:
      fail-fast: false
      matrix:
        include:
          - cluster: @CLUSTER@
            secret: @SECRET@
    env:
      CLUSTER: ${{ matrix.cluster }}
      KUBECONFIG_SECRET: ${{ matrix.secret }}
      KUBECONFIG_DATA: ${{ secrets[matrix.secret] }}
      GPUGOV_SLACK_WEBHOOK_URL: ${{ secrets.GPUGOV_SLACK_WEBHOOK_URL }}
      GPUGOV_NOTIFY_STATE: ${{ github.workspace }}/.gpugov-state/notify-${{ matrix.cluster }}.json
    steps:
      - name: Cluster credentials
        run: |
          if [ -z "$KUBECONFIG_DATA" ]; then
            echo "::error title=gpugov drift::secret $KUBECONFIG_SECRET is empty or not set: add the kubeconfig of cluster $CLUSTER as a repository secret"
            exit 1
          fi
          printf '%s' "$KUBECONFIG_DATA" > "$RUNNER_TEMP/kubeconfig"
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      - name: Install gpugov
        run: |
          case "$GPUGOV_PIP_SPEC" in
            .) spec=".[cluster,notify]" ;;
            gpugov*) spec="gpugov[cluster,notify]${GPUGOV_PIP_SPEC#gpugov}" ;;
            *) echo "::error::GPUGOV_PIP_SPEC must be '.', 'gpugov==VERSION' or 'gpugov @ git+URL@TAG', not '$GPUGOV_PIP_SPEC'"
               exit 1 ;;
          esac
          python -m pip install "$spec"
      - name: Restore the alert state
        uses: actions/cache/restore@v4
        with:
          path: .gpugov-state
          key: gpugov-notify-${{ matrix.cluster }}-${{ github.run_id }}-${{ github.run_attempt }}
          restore-keys: gpugov-notify-${{ matrix.cluster }}-
      - name: Drift
        run: |
          mkdir -p .gpugov-state
          notify=()
          if [ -n "$GPUGOV_SLACK_WEBHOOK_URL" ]; then notify=(--notify slack); fi
          gpugov drift . --cluster "$CLUSTER" --kubeconfig "$RUNNER_TEMP/kubeconfig" \
            --format github "${notify[@]}"
      - name: Save the alert state
        if: always()
        uses: actions/cache/save@v4
        with:
          path: .gpugov-state
          key: gpugov-notify-${{ matrix.cluster }}-${{ github.run_id }}-${{ github.run_attempt }}
'''


def kubeconfig_secret(cluster: str) -> str:
    """The repository secret that holds `cluster`'s kubeconfig: GPUGOV_KUBECONFIG_<NAME>."""
    return "GPUGOV_KUBECONFIG_" + cluster.upper().replace("-", "_")


def workflow_files(cluster: str, pip_spec: str) -> dict[str, str]:
    """Relative path -> text of both workflows, for one cluster and a pinned gpugov."""
    spec = pip_spec.replace("'", "''")  # inside a single-quoted expression string
    return {
        ".github/workflows/pull-request.yml": PULL_REQUEST_HEADER + PULL_REQUEST.replace("@PIP_SPEC@", spec),
        ".github/workflows/drift.yml": DRIFT_HEADER
        + DRIFT.replace("@PIP_SPEC@", spec).replace("@CLUSTER@", cluster).replace("@SECRET@", kubeconfig_secret(cluster)),
    }
