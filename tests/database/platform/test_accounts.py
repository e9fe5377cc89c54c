"""Accounts: demo_user makes ordinary users; tokens, team members and the activity log from their pages."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from rolloutlab.accounts.models import Activity, Membership
from rolloutlab.runs.access import project_for_launch

pytestmark = pytest.mark.django_db


def test_demo_user_makes_an_ordinary_user_and_admin_only_on_request():
    call_command("demo_user", username="erin", password="pw")
    erin = get_user_model().objects.get(username="erin")
    assert not erin.is_superuser and not erin.is_staff and erin.check_password("pw")
    call_command("demo_user", username="root", password="pw", admin=True)
    assert get_user_model().objects.get(username="root").is_superuser


def test_demo_user_joins_a_team_with_a_role():
    call_command("demo_user", username="vic", password="pw", team="lab", role="viewer")
    membership = Membership.objects.get(user__username="vic")
    assert membership.team.name == "lab" and membership.role == "viewer"


def test_a_user_without_a_team_gets_their_own_and_launches_are_logged(alice, monkeypatch):
    from rolloutlab.execution.services import launch_run
    from tests.support.platform_fixtures import SMALL_RUN

    monkeypatch.setattr("rolloutlab.execution.services.submit", lambda run_id: None)
    project = project_for_launch(alice, "arith")
    assert project.team.memberships.get().user == alice
    run = launch_run(alice, SMALL_RUN, project=project)
    entry = Activity.objects.get()
    assert (entry.actor, entry.action, entry.project) == (alice, "launched", project)
    assert f"run #{run.id}" in entry.subject


def test_a_user_creates_lists_and_revokes_tokens_and_sees_when_one_was_used(alice_client, client, alice):
    page = alice_client.post("/account/tokens/", {"name": "laptop", "days": "30"}).content.decode()
    raw = page.split('id="new-token"')[1].split("<code>")[1].split("</code>")[0]
    assert raw.startswith("rl_")
    assert client.get("/api/runs", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 200
    listed = alice_client.get("/account/tokens/").content.decode()
    created, last_used, expires = re.findall(r"<td>([^<]*)</td>", listed.split("laptop</td>")[1].split("</tr>")[0])
    assert last_used != "never" and expires != "never"  # used once already; expires in 30 days
    token = alice.api_tokens.get()
    assert token.last_used_at is not None and token.expires_at is not None
    alice_client.post(f"/account/tokens/{token.id}/revoke/")
    assert client.get("/api/runs", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 401
    bad = alice_client.post("/account/tokens/", {"name": "x\x00", "days": "99999"})
    assert bad.status_code == 400 and alice.api_tokens.count() == 1


def test_a_team_admin_adds_and_promotes_members_and_keeps_one_admin(alice_client, alice, bob):
    team = project_for_launch(alice, "p").team  # alice's own team, she is its admin
    alice_client.post(f"/account/teams/{team.id}/members/", {"username": "bob", "role": "viewer"})
    assert Membership.objects.get(team=team, user=bob).role == "viewer"
    alice_client.post(f"/account/teams/{team.id}/members/", {"username": "bob", "role": "admin"})
    assert Membership.objects.get(team=team, user=bob).role == "admin"
    mine = Membership.objects.get(team=team, user=alice)
    alice_client.post(f"/account/teams/{team.id}/members/{mine.id}/remove/")
    assert not Membership.objects.filter(team=team, user=alice).exists()  # bob is still an admin
    last = Membership.objects.get(team=team, user=bob)
    from rolloutlab.accounts import services
    from rolloutlab.inputs import UserInputError

    with pytest.raises(UserInputError, match="at least one admin"):
        services.remove_member(bob, team, last.id)


def test_the_activity_page_logs_launch_and_cancel_per_project(alice_client, alice, monkeypatch):
    from rolloutlab.execution.services import launch_run, request_cancel
    from tests.support.platform_fixtures import SMALL_RUN

    monkeypatch.setattr("rolloutlab.execution.services.submit", lambda run_id: None)
    project = project_for_launch(alice, "logged")
    run = launch_run(alice, SMALL_RUN, project=project, name="watched")
    request_cancel(run, alice)
    page = alice_client.get(f"/account/projects/{project.id}/activity/").content.decode()
    assert page.index("cancelled") < page.index("launched")  # newest first
    assert f"run #{run.id} watched" in page
