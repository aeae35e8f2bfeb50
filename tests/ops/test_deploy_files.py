"""Dockerfile, .dockerignore and docker-compose.yml: parsed and checked for what a deployment
relies on; `docker-compose config` validates the compose file where the binary is installed
(Debian's docker-compose package; no container engine is needed for it)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.ops.server import running_server, serve_env

REPO = Path(__file__).resolve().parents[2]
COMPOSE_ENV_FILES = {
    "postgres.env": "POSTGRES_PASSWORD=test-password\n",
    "spamsift.env": (
        "SPAMSIFT_DATABASE_URL=postgresql+psycopg://spamsift:test-password@db:5432/spamsift\n"
        "SPAMSIFT_ADMIN_KEY=" + "a" * 64 + "\n"
    ),
}


def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in (REPO / "Dockerfile").read_text().splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        whole = (pending + line).strip()
        pending = ""
        keyword, _, arguments = whole.partition(" ")
        instructions.append((keyword.upper(), arguments.strip()))
    return instructions


def final_stage() -> list[tuple[str, str]]:
    instructions = dockerfile()
    last_from = max(i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM")
    return instructions[last_from:]


def exec_form(arguments: str) -> list[str]:
    parsed = json.loads(arguments)
    assert isinstance(parsed, list), f"{arguments} is not the exec (JSON) form"
    return [str(part) for part in parsed]


def test_the_image_is_built_in_stages_on_python_3_11_slim() -> None:
    stages = [arguments for keyword, arguments in dockerfile() if keyword == "FROM"]

    assert len(stages) >= 2
    assert all(stage.split()[0] == "python:3.11-slim" for stage in stages)
    assert stages[0].lower().endswith(" as build")
    final = final_stage()
    assert any(k == "COPY" and a.startswith("--from=build ") for k, a in final)
    building = " ".join(a for k, a in dockerfile()[: len(dockerfile()) - len(final)] if k == "RUN")
    assert "pip wheel" in building  # spamsift is installed from its wheel


def test_the_server_runs_as_a_non_root_user() -> None:
    final = final_stage()
    users = [arguments for keyword, arguments in final if keyword == "USER"]

    assert users, "the final stage sets no USER: it would run as root"
    assert users[-1].split(":")[0] not in ("root", "0")
    user_at = max(i for i, (keyword, _) in enumerate(final) if keyword == "USER")
    entry_at = next(i for i, (keyword, _) in enumerate(final) if keyword == "ENTRYPOINT")
    assert user_at < entry_at


def test_the_entry_point_is_spamsift_serve_on_all_addresses() -> None:
    final = dict(final_stage())

    command = exec_form(final["ENTRYPOINT"]) + exec_form(final["CMD"])
    assert command[:2] == ["spamsift", "serve"]
    assert command[command.index("--host") + 1] == "0.0.0.0"
    assert final["EXPOSE"] == "8000"


def healthcheck_command(arguments: str) -> list[str]:
    options, _, command = arguments.partition("CMD ")
    assert re.search(r"--interval=\d+s", options)
    assert re.search(r"--timeout=\d+s", options)
    return exec_form(command)


@pytest.mark.slow
def test_the_health_check_asks_healthz_without_curl_and_works(tmp_path: Path) -> None:
    command = healthcheck_command(dict(final_stage())["HEALTHCHECK"])
    assert command[0] == "python"
    assert "curl" not in " ".join(command)
    assert "http://127.0.0.1:8000/healthz" in command[-1]

    with running_server(tmp_path, serve_env(tmp_path)) as server:
        port = server.url.rsplit(":", 1)[1]
        probe = [sys.executable, *command[1:-1], command[-1].replace(":8000/", f":{port}/")]
        healthy = subprocess.run(probe, capture_output=True, timeout=30)
    unhealthy = subprocess.run(probe, capture_output=True, timeout=30)  # nothing listens now

    assert healthy.returncode == 0, healthy.stderr
    assert unhealthy.returncode != 0


def test_the_build_context_holds_only_what_the_image_needs() -> None:
    patterns = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]

    assert patterns[0] == "*"  # everything out, then only these back in
    included = {pattern[1:].rstrip("/") for pattern in patterns if pattern.startswith("!")}
    assert included == {"pyproject.toml", "setup.py", "README.md", "app", "migrations"}
    copied = " ".join(a for k, a in dockerfile() if k == "COPY" and not a.startswith("--from"))
    for name in included:
        assert name in copied


def test_the_build_stage_compiles_the_extensions_and_the_run_stage_has_no_compiler() -> None:
    text = (REPO / "Dockerfile").read_text()
    build, _, run = text.partition("# --- run:")
    assert "build-essential" in build
    # the optional extensions (setup.py) were really built
    assert 'import app.text._core, app.bayes._index"' in build
    assert "build-essential" not in run


def compose() -> dict[str, Any]:
    document = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    assert isinstance(document, dict)
    return document


def test_compose_runs_postgres_with_a_volume_and_a_health_check() -> None:
    db = compose()["services"]["db"]

    assert db["image"].startswith("postgres:")
    volume = db["volumes"][0].split(":")
    assert volume[0] in compose()["volumes"]  # a named volume, not a host path
    assert volume[1] == "/var/lib/postgresql/data"
    assert "pg_isready" in " ".join(db["healthcheck"]["test"])
    assert db["env_file"] == "postgres.env"


def test_compose_migrates_once_before_the_app_starts() -> None:
    services = compose()["services"]
    migrate, app = services["migrate"], services["app"]

    assert migrate["command"] == ["db", "upgrade"]
    assert migrate["depends_on"]["db"]["condition"] == "service_healthy"
    assert migrate["restart"] == "no"
    assert app["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert app["depends_on"]["db"]["condition"] == "service_healthy"
    assert migrate["build"] == app["build"] == "."
    assert migrate["image"] == app["image"]


def test_compose_gives_the_app_its_database_and_admin_key_from_an_env_file() -> None:
    app = compose()["services"]["app"]

    assert app["env_file"] == "spamsift.env"
    assert "SPAMSIFT_DATABASE_URL" not in app.get("environment", {})  # secrets stay in the file
    assert "SPAMSIFT_ADMIN_KEY" not in app.get("environment", {})
    assert app["command"][:3] == ["serve", "--host", "0.0.0.0"]
    assert "/healthz" in " ".join(app["healthcheck"]["test"])
    assert "8000:8000" in app["ports"]
    for variable in ("SPAMSIFT_DATABASE_URL", "SPAMSIFT_ADMIN_KEY"):
        assert variable in (REPO / "docker-compose.yml").read_text()  # how to write the file


def test_docker_compose_config_accepts_the_file(tmp_path: Path) -> None:
    binary = shutil.which("docker-compose")
    if binary is None:
        pytest.skip("docker-compose is not installed (Debian: apt-get install -y docker-compose)")
    for name in ("docker-compose.yml", "Dockerfile"):
        shutil.copy(REPO / name, tmp_path / name)
    for name, text in COMPOSE_ENV_FILES.items():
        (tmp_path / name).write_text(text)

    result = subprocess.run(
        [binary, "-f", "docker-compose.yml", "config"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr
    resolved = yaml.safe_load(result.stdout)
    app = resolved["services"]["app"]
    assert app["environment"]["SPAMSIFT_ADMIN_KEY"] == "a" * 64
    assert app["environment"]["SPAMSIFT_DATABASE_URL"].endswith("@db:5432/spamsift")
    assert "SPAMSIFT_ADMIN_KEY" not in resolved["services"]["db"].get("environment", {})
    assert set(resolved["volumes"]) == {"pgdata"}


def test_the_package_list_names_every_package_of_the_app() -> None:
    """A wheel (and so the container image) holds only the packages pyproject.toml lists: a
    room left out installs fine in an editable checkout and is missing everywhere else."""
    import tomllib

    listed = set(
        tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    on_disk = {
        ".".join(init.parent.relative_to(REPO).parts)
        for init in (REPO / "app").rglob("__init__.py")
    }
    assert on_disk <= listed, f"not in [tool.setuptools] packages: {sorted(on_disk - listed)}"
