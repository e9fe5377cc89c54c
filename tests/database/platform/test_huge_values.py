"""Values near the largest float (1.7e308) are finite, but their sums, means and spreads are not: every page and
answer that aggregates them stays valid JSON (no Infinity) and never a 500."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from rolloutlab.accounts.models import ApiToken

pytestmark = pytest.mark.django_db

HUGE = 1.7e308


def strict(text: bytes):
    """JSON as the standard writes it: Infinity and NaN are not JSON, and a browser's parser refuses them."""

    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture
def huge_runs(alice, alice_client):
    _, secret = ApiToken.issue(alice, "t")
    api = Client(HTTP_AUTHORIZATION=f"Bearer {secret}")
    ids = []
    for sign in (1, -1, 1):
        made = api.post("/api/runs/external", {"project": "huge", "name": "big", "total_steps": 3},
                        content_type="application/json")  # fmt: skip
        run_id = made.json()["id"]
        # one step a batch at first: the second adds a huge value to a stored bucket's huge total
        for steps in ([1], [2], range(3, 31)):
            points = [{"name": name, "step": step, "value": sign * HUGE}
                      for name in ("reward/mean", "eval/pass@1") for step in steps]  # fmt: skip
            stored = api.post(f"/api/runs/{run_id}/points", {"points": points}, content_type="application/json")
            assert stored.status_code == 200, stored.content
        samples = [{"key": f"sample-{i:04d}", "step": 1, "prompt": "1+1=", "completion": "2", "reward": sign * HUGE,
                    "advantage": HUGE, "rewards": {"correct": HUGE}} for i in range(2)]  # fmt: skip
        assert (
            api.post(f"/api/runs/{run_id}/samples", {"samples": samples}, content_type="application/json").status_code
            == 200
        )
        assert api.post(f"/api/runs/{run_id}/finish", {}, content_type="application/json").status_code == 200
        ids.append(run_id)
    return api, ids


def test_every_answer_about_runs_of_huge_values_is_json_and_no_page_fails(huge_runs, alice_client):
    api, ids = huge_runs
    runs = ",".join(map(str, ids))
    answers = [f"/api/runs/{ids[0]}", f"/api/runs/{ids[0]}/series?keys=reward/mean&points=10",
               f"/api/runs/{ids[0]}/samples", f"/api/runs/{ids[0]}/rollouts", "/api/runs?sort=-metric:reward/mean",
               f"/api/compare?runs={runs}", f"/api/compare?runs={runs}&band=ci", f"/api/compare?runs={runs}&band=se",
               f"/api/compare?runs={runs}&x=tokens", f"/api/compare?runs={runs}&metric=eval/pass@1"]  # fmt: skip
    for path in answers:
        response = api.get(path)
        assert response.status_code == 200, (path, response.status_code, response.content[:300])
        try:
            strict(response.content)
        except ValueError as exc:
            raise AssertionError(f"{path}: {exc}") from None
    pages = ["/runs/", f"/runs/{ids[0]}/", f"/compare/?runs={runs}", f"/compare/?runs={runs}&band=ci",
             "/runs/?sort=-metric:reward/mean", f"/api/compare/export?runs={runs}&format=csv"]  # fmt: skip
    for path in pages:
        response = alice_client.get(path)
        assert response.status_code == 200, (path, response.status_code)
