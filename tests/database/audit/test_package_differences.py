"""Two runs made in two virtual environments that differ by one package version: the differences
view names exactly that package, and nothing else."""

import subprocess
import sys
import sysconfig
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from tests.offline.engine.test_cli import SMALL

pytestmark = pytest.mark.django_db

OTHER_TQDM = "4.66.5"


def second_environment(tmp_path: Path) -> Path:
    """A venv whose own site-packages holds only another tqdm, and which sees everything else of ours."""
    venv = tmp_path / "venv2"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    ours = sysconfig.get_paths()["purelib"]
    (site / "zz_rolloutlab.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site),
                    f"tqdm=={OTHER_TQDM}"], check=True)  # fmt: skip
    return venv / "bin" / "python"


def run_and_bundle(python, config: Path, out: Path) -> bytes:
    subprocess.run([str(python), "-m", "workers", "run", str(config), "--out", str(out), "--no-progress"],
                   cwd=REPO, check=True, capture_output=True)  # fmt: skip
    bundle = out.with_suffix(".zip")
    subprocess.run([sys.executable, "-m", "workers", "bundle", str(out), "--out", str(bundle)], cwd=REPO, check=True)
    return bundle.read_bytes()


def test_the_differences_view_names_exactly_the_changed_package(alice_client, tmp_path):
    assert version("tqdm") != OTHER_TQDM
    config = tmp_path / "small.yaml"
    config.write_text(yaml.safe_dump({**SMALL, "schedule": {"steps": 2}}))
    other_python = second_environment(tmp_path)
    ids = []
    for python, name in ((sys.executable, "ours"), (other_python, "other")):
        data = run_and_bundle(python, config, tmp_path / name)
        response = alice_client.post("/api/bundles", data=data, content_type="application/zip")
        assert response.status_code == 201, response.content
        ids.append(response.json()["id"])
    diff = alice_client.get(f"/api/differences?a={ids[0]}&b={ids[1]}").json()["differences"]
    assert diff["packages"] == [{"item": "packages.tqdm", "a": version("tqdm"), "b": OTHER_TQDM}]
    assert all(items == [] for category, items in diff.items() if category != "packages"), diff
    page = alice_client.get(f"/audit/differences/?a={ids[0]}&b={ids[1]}").content.decode()
    assert 'data-item="packages.tqdm"' in page and page.count("data-item=") == 1
