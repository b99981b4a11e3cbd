"""Job profiles, pure (gpugov.profile.job): measured time only, the declared thresholds (Guardrails.profile,
defaults and a declared override), the smallest MIG profile by memory and compute, and advice.
tests/e2e/test_profile.py runs `gpugov profile` against a real Prometheus."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from gpugov.catalog.accelerators import lookup_model
from gpugov.declarations.model import ProfileThresholds
from gpugov.profile.job import JobFacts, profile, smallest_mig
from tests.helpers.repos import overlay_repo, write

T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
STEP = timedelta(seconds=60)
H100 = lookup_model("H100-80GB")


def facts(**changes: object) -> JobFacts:
    base: dict[str, object] = {"key": "nlp/train", "tenant": "nlp", "resource": "nvidia.com/gpu", "devices": 1,
                               "model": H100, "created": T0 - timedelta(minutes=20), "admitted": T0}
    return JobFacts(**{**base, **changes})  # type: ignore[arg-type]


def flat(value: float, minutes: int = 60) -> list[tuple[datetime, float]]:
    return [(T0 + STEP * i, value) for i in range(1, minutes + 1)]


def test_idle_half_its_life_and_fitting_a_mig_profile() -> None:
    activity = {"train-0": [*flat(1.0, 30), *[(T0 + STEP * (30 + i), 50.0) for i in range(1, 31)]]}
    memory = {"train-0": flat(30000.0)}
    p = profile(facts(), activity, memory, {}, STEP, T0 + timedelta(hours=1), Decimal(5), ProfileThresholds())
    assert (p.idle_share, p.activity_peak, p.memory_peak_mib, p.queue_wait) == (0.5, 50.0, 30000.0, 1200)
    assert p.fits_mig == "4g.40gb"  # 33,000 MiB (10 % headroom) at 50 %: a 3g (3/7 = 43 %) is too slow
    assert p.advice[0] == "idle 50% of its measured life: release the cards between runs, or let gpugov reclaim do it"
    assert "waited 20m00s in the queue before admission" in p.advice
    assert smallest_mig(H100, 33000, 40) == "3g.40gb" and smallest_mig(H100, 9000, 5) == "1g.10gb"
    assert smallest_mig(H100, 33000, 60) is None  # no 5g or 6g: only the whole card


def test_time_without_samples_is_not_measured_and_a_waiting_job_is_said_to_wait() -> None:
    lost = {"train-0": flat(0.0, 10)}  # the exporter lost it after 10 minutes of a 60-minute life
    p = profile(facts(), lost, {}, {}, STEP, T0 + timedelta(hours=1), Decimal(5), ProfileThresholds())
    assert p.measured == 9 * 60 and p.admitted_for == 3600 and p.idle_share == 1.0
    waiting = profile(facts(admitted=None), {}, {}, {}, STEP, T0, Decimal(5), ProfileThresholds())
    assert waiting.advice == ("waiting in the queue for 20m00s: not admitted yet",)


def test_thresholds_are_declared_in_the_guardrails(tmp_path) -> None:
    from gpugov.app.pipeline import validate_repo

    repo = overlay_repo(tmp_path)
    write(repo, "policies/guardrails.yaml", """apiVersion: gpugov.io/v1alpha1
kind: Guardrails
metadata:
  name: default
spec:
  capacityRatio: 1.0
  platformTeam: ["@lab/platform"]
  profile: {lowActivityBelowPercent: 20, adviseIdleSharePercent: 60}
""")
    model = validate_repo(repo).model
    assert model is not None
    assert model.limits.profile == ProfileThresholds(Decimal(20), Decimal(60), Decimal(1000000000), Decimal(10))
    activity = {"train-0": [*flat(1.0, 30), *[(T0 + STEP * (30 + i), 60.0) for i in range(1, 31)]]}
    p = profile(facts(), activity, {}, {}, STEP, T0 + timedelta(hours=1), Decimal(5), model.limits.profile)
    assert not any(a.startswith("idle") for a in p.advice)  # 50 % idle is under the declared 60 %
