"""The README's five-minute tour, run command by command as a new user would.

The tour's ```sh blocks are read from README.md. Each command runs with bash, in order, in a
fresh folder holding the repository's committed `examples/`, against a real `spamsift serve`
started there (so `./spamsift.db` is the server's, as in the README), with no SPAMSIFT_*
setting inherited: the defaults a new user gets, the min_learns floor included. A `# → text`
line under a command is a piece of what it must print. The server takes training committed by
other processes within a second, so a command whose output misses its piece is asked again a
few times before the test fails.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.servers import free_port, wait_until_ready

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
TOUR_HEADING = "## Five-minute tour"
RETRIES = 8


@dataclass
class Step:
    command: str
    expected: list[str] = field(default_factory=list)


def tour_steps(readme: str) -> list[Step]:
    """The commands of the tour's ```sh blocks, each with the `# →` lines under it."""
    start = readme.index(TOUR_HEADING)
    end = readme.find("\n## ", start + len(TOUR_HEADING))
    section = readme[start : end if end >= 0 else None]
    steps: list[Step] = []
    for block in re.findall(r"```sh\n(.*?)```", section, re.S):
        for line in block.splitlines():
            if line.startswith("# →"):
                steps[-1].expected.append(line.removeprefix("# →").strip())
            elif line.strip() and not line.startswith("#"):
                steps.append(Step(line))
    return steps


def test_the_tour_has_the_steps_the_readme_promises() -> None:
    steps = tour_steps((REPO / "README.md").read_text())
    commands = [step.command.split()[:2] for step in steps]

    assert ["spamsift", "train"] in commands
    assert ["spamsift", "classify"] in commands
    assert any("/feedback" in step.command and "message_id" in step.command for step in steps)
    assert all(step.expected for step in steps), "every command shows what it prints"


def committed_examples(target: Path) -> None:
    """Copy examples/ as a fresh clone has it: tracked files only, when git can say."""
    listed = subprocess.run(
        ["git", "ls-files", "examples"], cwd=REPO, capture_output=True, text=True
    )
    names = listed.stdout.split() if listed.returncode == 0 and listed.stdout else []
    if not names:  # not a git checkout (a source archive): the folder as it is
        shutil.copytree(REPO / "examples", target / "examples")
        return
    for name in names:
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, target / name)


@pytest.mark.slow
def test_the_readme_tour_runs_in_order(tmp_path: Path) -> None:
    if shutil.which("curl") is None:
        pytest.skip("the tour uses curl, which is not installed here")
    committed_examples(tmp_path)
    env = {name: value for name, value in os.environ.items() if not name.startswith("SPAMSIFT_")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as output:
        server = subprocess.Popen(
            [str(BIN / "spamsift"), "serve", "--port", str(port)],
            cwd=tmp_path,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until_ready(f"http://127.0.0.1:{port}", server, log.read_text, name="spamsift serve")
        for step in tour_steps((REPO / "README.md").read_text()):
            run_step(step, port=port, cwd=tmp_path, env=env)
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)


def run_step(step: Step, *, port: int, cwd: Path, env: dict[str, str]) -> None:
    command = step.command.replace("localhost:8000", f"127.0.0.1:{port}")
    repeatable = not command.startswith("spamsift train")
    for attempt in range(RETRIES):
        done = subprocess.run(
            ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
        )
        missing = [piece for piece in step.expected if piece not in done.stdout]
        if done.returncode == 0 and not missing:
            return
        if not repeatable or attempt == RETRIES - 1:
            break
        time.sleep(0.5)
    pytest.fail(
        f"README tour: `{step.command}` exited {done.returncode}, missing {missing}\n"
        f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    )
