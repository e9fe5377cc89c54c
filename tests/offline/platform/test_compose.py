"""compose.yaml, read as compose reads it: which ports the team deployment publishes, and how workers run."""

from __future__ import annotations

import re

import yaml

from tests.support.live import ROOT

UNAUTHENTICATED = ("postgres", "redis", "ray-head")  # no login of their own: never published
LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


def services() -> dict:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]


def published(service: dict) -> list[tuple[str, str]]:
    """(host address, container port) of each published port; the address as it is when unset."""
    found = []
    for port in service.get("ports", []):
        if isinstance(port, dict):  # the long syntax
            found.append((port.get("host_ip", "0.0.0.0"), str(port["target"])))
            continue
        text = re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", str(port))  # ${VAR:-default} -> default
        parts = text.rsplit(":", 2)
        found.append((parts[0] if len(parts) == 3 else "0.0.0.0", parts[-1]))
    return found


def test_no_service_without_a_login_publishes_a_port():
    for name in UNAUTHENTICATED:
        assert services()[name].get("ports") in (None, []), f"{name} publishes {services()[name]['ports']}"


def test_only_the_web_server_is_published():
    exposed = {name: published(service) for name, service in services().items() if published(service)}
    assert list(exposed) == ["web"]
    assert [port for _, port in exposed["web"]] == ["8000"]


def test_the_web_server_can_be_bound_to_loopback_for_a_proxy():
    assert "${WEB_BIND:-" in services()["web"]["ports"][0]


def test_the_ray_dashboard_listens_on_its_container_loopback_only():
    command = services()["ray-head"]["command"]
    host = re.search(r"--dashboard-host[= ](\S+)", command)
    assert host is not None and host.group(1) in LOOPBACK, command
    assert "8265" not in str(services()["ray-head"])


def test_each_worker_runs_one_run_per_fresh_child_process():
    for name in ("worker-cpu", "worker-gpu"):
        command = services()[name]["command"].split()
        for option, value in (("-P", "prefork"), ("--concurrency", "1"), ("--max-tasks-per-child", "1")):
            assert command[command.index(option) + 1] == value, (name, option)


def overlay(name: str) -> dict:
    return yaml.safe_load((ROOT / name).read_text())


RAY_SERVICES = ("worker-ray", "ray-head", "ray-worker")


def test_every_ray_process_runs_the_one_image_with_ray_and_token_auth():
    """The learner and the actors unpickle each other's objects: one image, one Ray, one token."""
    node = overlay("compose.node.yaml")["services"]["ray-worker"]
    for name, service in [*((n, services()[n]) for n in RAY_SERVICES), ("node's ray-worker", node)]:
        assert service["image"] == "rolloutlab:gpu", name
        assert "ray" in service["build"]["args"]["EXTRAS"].split(","), name
        assert service["environment"]["RAY_AUTH_MODE"] == "token", name
        assert service["environment"]["RAY_AUTH_TOKEN"].startswith("${RAY_AUTH_TOKEN:?"), name  # no default token


def test_the_ray_queue_has_a_driver_worker_and_the_head_runs_nothing_itself():
    command = services()["worker-ray"]["command"].split()
    assert command[command.index("-Q") + 1] == "ray"
    assert command[command.index("--max-tasks-per-child") + 1] == "1"  # a run's driver owns its process
    head = services()["ray-head"]["command"]
    assert "--num-cpus=0" in head and "--num-gpus=0" in head
    assert services()["ray-head"]["environment"]["RAY_ADDRESS"] == "ray-head:6379"  # the port it starts on
    assert "--port=6379" in head


def test_two_machines_publish_the_databases_on_the_loopback_only_and_join_one_head():
    cluster, node = overlay("compose.cluster.yaml")["services"], overlay("compose.node.yaml")["services"]
    for name in ("postgres", "redis"):
        assert [host for host, _ in published(cluster[name])] == ["127.0.0.1"], name
    for name in RAY_SERVICES:
        assert cluster[name]["network_mode"] == "host", name
    head_port = re.search(r"--port=(\S+)", cluster["ray-head"]["command"]).group(1)
    assert f"${{RAY_HEAD_IP:?set RAY_HEAD_IP in .env}}:{head_port}" in node["ray-worker"]["command"]
    assert cluster["ray-worker"]["environment"]["RAY_ADDRESS"].endswith(f":{head_port}")
