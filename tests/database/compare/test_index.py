"""The compare index: the navigation's way into compare, listing the experiments the user's teams hold."""

import pytest

from rolloutlab.accounts.models import Membership, Role
from rolloutlab.runs.models import Experiment
from tests.conftest import project_of
from tests.database.compare.test_comparison import make_run

pytestmark = pytest.mark.django_db


def sweep_of(user, name, seeds=(0, 1)):
    project = project_of(user, f"{name} project")
    experiment = Experiment.objects.create(project=project, name=name, owner=user)
    for seed in seeds:
        run = make_run(project, "grpo", seed, lambda t: 0.1, 1, steps=2)
        run.experiment = experiment
        run.save()
    return experiment


def test_the_navigation_leads_to_the_index(alice_client):
    page = alice_client.get("/runs/").content.decode()
    assert (
        'id="nav-compare" href="/compare/experiments/"' in page
        or 'href="/compare/experiments/" id="nav-compare"' in page
    )
    bare = alice_client.get("/compare/")
    assert bare.status_code == 302 and bare["Location"] == "/compare/experiments/"


def test_the_index_lists_only_the_experiments_of_the_users_teams_each_linking_to_its_comparison(
    alice, bob, alice_client
):
    mine = sweep_of(alice, "lr sweep", seeds=(0, 1, 2))
    theirs = sweep_of(bob, "bob's secret sweep")
    page = alice_client.get("/compare/experiments/").content.decode()
    assert f'href="/compare/?experiment={mine.id}">lr sweep</a>' in page and 'data-field="runs">3</td>' in page
    assert "secret" not in page and f"experiment={theirs.id}" not in page
    Membership.objects.create(team=theirs.project.team, user=alice, role=Role.VIEWER)  # now alice reads bob's team
    assert f"?experiment={theirs.id}" in alice_client.get("/compare/experiments/").content.decode()


def test_the_index_pages_and_refuses_a_bad_page_number(alice, alice_client):
    project = project_of(alice)
    Experiment.objects.bulk_create([Experiment(project=project, name=f"e{i}", owner=alice) for i in range(55)])
    first = alice_client.get("/compare/experiments/").content.decode()
    assert ">e54</a>" in first and ">e4</a>" not in first and "Page 1 of 2" in first
    assert ">e4</a>" in alice_client.get("/compare/experiments/?page=2").content.decode()
    for bad in ("0", "x", "١", "100001"):
        assert alice_client.get(f"/compare/experiments/?page={bad}").status_code == 400


def test_with_no_experiments_the_index_says_how_to_make_one(alice_client):
    page = alice_client.get("/compare/experiments/").content.decode()
    assert 'id="no-experiments"' in page and 'href="/compare/sweep/"' in page


def test_the_index_needs_a_login(client):
    assert client.get("/compare/experiments/")["Location"].startswith("/login/")


def test_the_index_narrows_to_one_project_the_user_may_see(alice, bob, alice_client):
    mine, other = sweep_of(alice, "lr sweep"), sweep_of(alice, "clip sweep")
    theirs = sweep_of(bob, "bob's sweep")
    page = alice_client.get(f"/compare/experiments/?project={mine.project_id}").content.decode()
    assert f"?experiment={mine.id}" in page and f"?experiment={other.id}" not in page
    assert f'href="?project={other.project_id}"' in alice_client.get("/compare/experiments/").content.decode()
    assert alice_client.get(f"/compare/experiments/?project={theirs.project_id}").status_code == 404
    assert alice_client.get("/compare/experiments/?project=-1").status_code == 400
