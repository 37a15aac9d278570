"""docker/: what can be checked without a container engine. Images, ports, volumes, the environment wiring
(every INDEXER_* name is a setting, values validate), healthchecks that hit endpoints the app serves, the
Dockerfile's stages and user, the cluster's shard and replication settings, and the systemd unit."""

from __future__ import annotations

import configparser
import json
import re
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")

from indexer.settings import Settings  # noqa: E402

DOCKER = Path(__file__).parents[2] / "docker"
HEALTH_PATHS = {"/readyz", "/healthz"}
# Settings of `indexer serve`: checked as soon as the HTTP server's settings exist in this checkout.
SERVE_ENV = {"INDEXER_SERVER_HOST", "INDEXER_SERVER_PORT", "INDEXER_API_KEYS", "INDEXER_ADMIN_API_KEYS"}
HAS_SERVE = "server_port" in Settings.model_fields
SERVER_PORT = int(Settings.model_fields["server_port"].default) if HAS_SERVE else 8480


def _compose(name: str) -> dict[str, Any]:
    return yaml.safe_load((DOCKER / name).read_text())


def _env(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment", {})
    return dict(env) if isinstance(env, dict) else dict(item.split("=", 1) for item in env)


def _indexer_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The services that run indexer (the Ray head and workers run `ray start` from the same image)."""
    return {n: s for n, s in compose["services"].items()
            if (s.get("build") or s.get("image", "").startswith("indexer")) and not n.startswith("ray-")}


def _settings_from(env: dict[str, str]) -> Settings:
    """Validate the environment as the container would read it (${VAR...} placeholders filled with samples)."""
    samples = {"INDEXER_API_KEYS": '["k"]', "INDEXER_ADMIN_API_KEYS": "[]"}
    values = {}
    for key, value in env.items():
        default = re.fullmatch(r"\$\{\w+:-(.*)\}", str(value))
        if default:  # ${VAR:-default}: the value when VAR is unset
            values[key] = default.group(1)
        else:
            values[key] = samples.get(key, "x") if str(value).startswith("${") else str(value)
    field_names = {f"INDEXER_{name.upper()}" for name in Settings.model_fields}
    if not HAS_SERVE:
        values = {k: v for k, v in values.items() if k not in SERVE_ENV}
    unknown = sorted(k for k in values if k.startswith("INDEXER_") and k not in field_names)
    assert not unknown, f"environment names that are no setting: {unknown}"
    kwargs = {k[len("INDEXER_") :].lower(): v for k, v in values.items() if k.startswith("INDEXER_")}
    kwargs.pop("api_keys", None), kwargs.pop("admin_api_keys", None)  # JSON lists: parsed from env only
    if "allowed_hosts" in kwargs:
        kwargs["allowed_hosts"] = tuple(json.loads(kwargs["allowed_hosts"]))
    return Settings(**kwargs)


def _health_path(test: list[str] | str) -> str:
    text = " ".join(test) if isinstance(test, list) else test
    found = re.search(r"http://127\.0\.0\.1:(?:\d+|%s)(/[a-z]+)", text)
    assert found, f"no local HTTP healthcheck in {text!r}"
    return found.group(1)


@pytest.mark.parametrize("name", ["compose.yaml", "compose.cluster.yml"])
def test_compose_files_wire_the_indexer_to_qdrant_with_keys_from_the_environment(name):
    compose = _compose(name)
    qdrants = {n: s for n, s in compose["services"].items() if s.get("image", "").startswith("qdrant/qdrant:")}
    assert qdrants and all(re.fullmatch(r"qdrant/qdrant:v\d+\.\d+\.\d+", s["image"]) for s in qdrants.values())
    for service in qdrants.values():
        assert _env(service)["QDRANT__SERVICE__API_KEY"].startswith("${QDRANT_API_KEY")
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"Qdrant published beyond loopback: {port}"
    indexers = _indexer_services(compose)
    assert indexers
    for service in indexers.values():
        env = _env(service)
        settings = _settings_from(env)
        assert settings.store == "qdrant"
        host = env["INDEXER_QDRANT_URL"].split("//")[1].split(":")[0]
        assert host in qdrants or set(_upstream("qdrant_nodes")) == {f"{q}:6333" for q in qdrants} and host == "lb", (
            f"INDEXER_QDRANT_URL names {host}, not a Qdrant service nor the load balancer over all of them")
        assert env["INDEXER_QDRANT_API_KEY"].startswith("${QDRANT_API_KEY")
        assert env["INDEXER_API_KEYS"].startswith("${INDEXER_API_KEYS:?")  # required: serve binds 0.0.0.0
        if settings.stateless:  # a search worker: its own empty data directory, no shared state volume
            assert service["tmpfs"] == ["/data"] and not service.get("volumes")
            continue
        assert any(str(v).endswith(":/data") for v in service["volumes"])
        for port in service.get("ports", []):
            published, container = str(port).rsplit(":", 1)
            assert published.startswith("127.0.0.1:") and int(container) == SERVER_PORT
        assert _health_path(service["healthcheck"]["test"]) == "/readyz"
        assert service["build"]["dockerfile"] == "docker/Dockerfile"
        assert (DOCKER / service["build"]["context"]).resolve() == DOCKER.parent.resolve()
    for service in indexers.values():  # the stateless workers above skipped the writer's checks: these apply too
        assert _health_path(service["healthcheck"]["test"]) == "/readyz"


def test_the_watched_folder_is_mounted_read_only_and_indexed_before_serving():
    service = _compose("compose.yaml")["services"]["indexer"]
    assert "./watched:/watched:ro" in service["volumes"]
    command = " ".join(service["command"])
    assert "indexer index /watched" in command and "exec indexer serve" in command
    assert {"indexer-data", "indexer-models", "qdrant-storage"} <= set(_compose("compose.yaml")["volumes"])


def test_cluster_is_three_nodes_in_distributed_mode_with_consistent_replication():
    compose = _compose("compose.cluster.yml")
    nodes = {n: s for n, s in compose["services"].items() if n.startswith("qdrant-")}
    assert len(nodes) == 3
    assert all(_env(s)["QDRANT__CLUSTER__ENABLED"] == "true" for s in nodes.values())
    assert "--uri http://qdrant-0:6335" in nodes["qdrant-0"]["command"]
    for name in ("qdrant-1", "qdrant-2"):
        assert "--bootstrap http://qdrant-0:6335" in nodes[name]["command"] and name in nodes[name]["command"]
    for service in _indexer_services(compose).values():
        s = _settings_from(_env(service))
        if s.stateless:  # a search worker creates no collection
            continue
        assert s.qdrant_shard_number and s.qdrant_replication_factor and s.qdrant_write_consistency_factor
        assert s.qdrant_write_consistency_factor <= s.qdrant_replication_factor <= len(nodes)
        assert s.qdrant_shard_number >= len(nodes)  # every node holds shards
    search = compose["services"]["search"]
    assert search["command"] == ["serve", "--no-watch", "--stateless"]  # scaled workers never write
    worker = _settings_from(_env(search))
    assert worker.stateless and worker.qdrant_read_consistency == "majority"
    assert worker.qdrant_route_affinity == "caller"  # each caller one view (nginx passes the caller's mark)
    writer = _settings_from(_env(compose["services"]["indexer"]))
    replicas = writer.qdrant_replication_factor or 1
    # a majority read and the confirmed write overlap in at least one replica: every worker sees a committed write
    assert writer.qdrant_write_consistency_factor + (replicas // 2 + 1) > replicas


def _upstream(name: str) -> list[str]:
    """The servers of an nginx upstream in docker/nginx/cluster.conf."""
    text = (DOCKER / "nginx" / "cluster.conf").read_text()
    block = re.search(rf"upstream {name} \{{(.*?)\}}", text, flags=re.S)
    assert block, f"no upstream {name}"
    return re.findall(r"^\s*server\s+(\S+?)(?:\s+resolve)?;", block.group(1), flags=re.M)


def test_cluster_load_balancer_spreads_over_every_qdrant_node_and_every_search_worker():
    compose = _compose("compose.cluster.yml")
    services = compose["services"]
    lb = services["lb"]
    assert re.fullmatch(r"nginx:1\.(2[7-9]|[3-9]\d)(\.\d+)?-alpine", lb["image"])  # `resolve` needs >= 1.27.3
    assert "./nginx/cluster.conf:/etc/nginx/conf.d/default.conf:ro" in lb["volumes"]
    nodes = sorted(n for n in services if n.startswith("qdrant-"))
    assert sorted(_upstream("qdrant_nodes")) == [f"{n}:6333" for n in nodes]
    assert _upstream("search_workers") == [f"search:{SERVER_PORT}"]
    text = (DOCKER / "nginx" / "cluster.conf").read_text()
    assert re.search(r"listen 6333;.*?proxy_pass http://qdrant_nodes;", text, flags=re.S)
    assert re.search(r"listen 8490;.*?proxy_pass http://search_workers;.*?proxy_set_header Host \$host;", text,
                     flags=re.S)
    assert lb["ports"] == ["127.0.0.1:8490:8490"] and "resolver 127.0.0.11" in text
    # the caller's route-affinity mark: its own header, else its address (the workers see nginx's address only)
    assert re.search(r'map \$http_x_qdrant_route_affinity \$route_affinity \{\s*""\s+\$remote_addr;', text)
    assert re.search(r"listen 8490;.*?proxy_set_header X-Qdrant-Route-Affinity \$route_affinity;", text, flags=re.S)
    assert _env(services["search"])["INDEXER_QDRANT_URL"] == "http://lb:6333"


def test_dockerfile_is_multi_stage_non_root_with_volumes_and_a_readyz_healthcheck():
    text = (DOCKER / "Dockerfile").read_text()
    stages = re.findall(r"^FROM\s+(\S+)(?:\s+AS\s+(\w+))?", text, flags=re.M)
    assert len(stages) >= 2 and stages[0][1] == "build"
    build_stage = text.split("FROM", 2)[1]
    assert "cmake" in build_stage and "pip wheel" in build_stage  # llama-cpp-python compiled in the build stage
    runtime = text.rsplit("\nFROM", 1)[1]
    assert "build-essential" not in runtime and "COPY --from=build /wheels" in runtime
    user = re.findall(r"^USER\s+(\S+)", runtime, flags=re.M)
    assert user and user[-1] not in ("root", "0")
    assert re.search(r'^VOLUME \["/data", "/models"\]', runtime, flags=re.M)
    env = dict(re.findall(r"(INDEXER_[A-Z_]+)=(\S+)", runtime))
    assert env["INDEXER_DATA_DIR"] == "/data" and env["INDEXER_MODELS_DIR"] == "/models"
    _settings_from({k: v for k, v in env.items() if k != "INDEXER_MODELS_DIR"})  # names are settings
    healthcheck = re.search(r"^HEALTHCHECK .*?CMD (.+)$", runtime, flags=re.M | re.S)
    assert healthcheck and _health_path(healthcheck.group(1)) == "/readyz"
    assert re.search(rf"^EXPOSE {SERVER_PORT}$", runtime, flags=re.M)
    for path in re.findall(r"^COPY (?!--from)(\S+) ", text, flags=re.M):
        assert (DOCKER.parent / path).exists(), f"COPY of a missing path: {path}"


def test_healthcheck_endpoints_exist_in_the_app():
    app_module = pytest.importorskip("indexer.server.app", reason="the HTTP app (indexer serve) is not built yet")
    from fastapi.routing import APIRoute

    app = app_module.create_app(Settings(), warm_up=False, mcp=False)
    paths = {r.path for r in app.routes if isinstance(r, APIRoute) and "GET" in r.methods}
    assert paths >= HEALTH_PATHS


def test_systemd_user_unit_runs_serve_and_logs_to_the_journal():
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment, method-assign]
    unit.read_string((DOCKER / "indexer.service").read_text())
    service = unit["Service"]
    assert service["ExecStart"].split()[1:] == ["serve"]
    assert service["StandardOutput"] == service["StandardError"] == "journal"
    assert service["Restart"] == "on-failure" and unit["Install"]["WantedBy"] == "default.target"


@pytest.mark.parametrize("name", ["compose.yaml", "compose.cluster.yml"])
def test_compose_servers_answer_their_healthcheck_host(name):
    """The Host allow-list (allowed_hosts) of every served container admits the healthcheck's 127.0.0.1."""
    for service in _indexer_services(_compose(name)).values():
        settings = _settings_from(_env(service))
        assert "127.0.0.1" in settings.allowed_hosts and "localhost" in settings.allowed_hosts


def test_ray_services_require_a_token_publish_nothing_and_run_no_dashboard():
    """The Ray head and workers of compose.cluster.yml (issue 47): token authentication on every Ray process (the
    token required from the environment), no published port, no dashboard; the writer joins the head with the
    same token (no container engine runs here, so the file is checked, not run)."""
    services = _compose("compose.cluster.yml")["services"]
    head, worker, writer = services["ray-head"], services["ray-worker"], services["indexer"]
    for svc in (head, worker, writer):
        env = _env(svc)
        assert env["RAY_AUTH_MODE"] == "token"
        assert env["RAY_AUTH_TOKEN"].startswith("${RAY_AUTH_TOKEN:?"), "the token must come from the environment"
    for svc in (head, worker):
        assert not svc.get("ports"), "a Ray port published outside the compose network"
        assert svc["build"]["args"]["EXTRAS"] == "cluster"
    assert "--include-dashboard=false" in head["command"][0] and "--head" in head["command"][0]
    assert "--num-cpus=0" in head["command"][0]  # the head schedules; workers embed
    assert "--address=ray-head:6379" in worker["command"][0]
    assert _env(writer)["INDEXER_CLUSTER"] == "ray-head:6379"
    assert "ray-head" in writer["depends_on"]
    assert 'ARG EXTRAS=""' in (DOCKER / "Dockerfile").read_text()
