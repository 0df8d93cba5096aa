"""Plugin discovery with real entry points of a small installed test distribution."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from gpubench_sdk import PluginNotFoundError, list_plugins, load_provider
from gpubench_sdk._local import LocalProvider
from gpubench_sdk._plugins import provider_class

PLUGIN_CODE = {
    "gpb_testplugins/__init__.py": """
        from gpubench_sdk import Capabilities, Provider, Result

        class GoodProvider(Provider):
            name = "good"
            capabilities = Capabilities(streaming=True, server_timings=frozenset({"queue_ms"}))

            async def invoke(self, request):
                return Result(output=dict(request.payload))
    """,
    "gpb_testplugins/broken.py": """
        import a_module_that_does_not_exist  # noqa
    """,
    "gpb_testplugins/wrong.py": """
        class NotAProvider:
            pass
    """,
}
ENTRY_POINTS = """
[gpubench.providers]
good = gpb_testplugins:GoodProvider
broken = gpb_testplugins.broken:Thing
wrongtype = gpb_testplugins.wrong:NotAProvider
"""


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An installed distribution (a dist-info directory with entry_points.txt) on a path."""
    root = tmp_path_factory.mktemp("site")
    for rel, code in PLUGIN_CODE.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(code))
    info = root / "gpb_testplugins-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gpb-testplugins\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    return root


def _run(plugin_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(plugin_path), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)


def test_listing_reports_broken_and_wrong_type_and_keeps_going(plugin_path: Path) -> None:
    proc = _run(plugin_path, sys.executable, "-m", "gpubench_sdk", "providers", "--json")
    assert proc.returncode == 0, proc.stderr
    providers = {p["name"]: p for p in json.loads(proc.stdout)["providers"]}
    assert providers["good"]["error"] is None
    assert providers["good"]["distribution"] == "gpb-testplugins 1.0"
    assert "streaming" in providers["good"]["capabilities"]
    assert "a_module_that_does_not_exist" in providers["broken"]["error"]
    assert "not a subclass of gpubench_sdk.Provider" in providers["wrongtype"]["error"]
    assert providers["local"]["error"] is None  # the built-in keeps working beside broken ones


def test_asking_by_name_fails_loudly(plugin_path: Path) -> None:
    code = textwrap.dedent("""
        from gpubench_sdk import PluginLoadError, PluginNotFoundError
        from gpubench_sdk._plugins import provider_class
        for name in ("broken", "wrongtype", "nosuch"):
            try:
                provider_class(name)
            except (PluginLoadError, PluginNotFoundError) as exc:
                print(type(exc).__name__, "|", exc)
        print("good", provider_class("good").name)
    """)
    proc = _run(plugin_path, sys.executable, "-c", code)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("PluginLoadError |") and "a_module_that_does_not_exist" in lines[0]
    assert lines[1].startswith("PluginLoadError |") and "not a subclass" in lines[1]
    assert (
        lines[2].startswith("PluginNotFoundError |") and "pip install gpubench-nosuch" in lines[2]
    )
    assert lines[3] == "good good"


def test_builtins_are_registered() -> None:
    names = {i.name for i in list_plugins()}
    assert "local" in names
    assert provider_class("local") is LocalProvider
    with pytest.raises(PluginNotFoundError, match=r"installed: .*local"):
        provider_class("definitely-not-installed")


def test_load_provider_validates_options() -> None:
    from gpubench_sdk import ConfigError

    with pytest.raises(ConfigError, match=r"provider 'local'\.max_workers"):
        load_provider("local", max_workers="many")


ROOT = Path(__file__).resolve().parents[1]
# every distribution of the repository -> the providers it registers
DISTRIBUTIONS = {
    ".": {"local"},
    "plugins/runpod": {"runpod"},
    "plugins/replicate": {"replicate", "cog"},
    "plugins/huggingface": {"huggingface"},
    "plugins/inferless": {"inferless"},
    "plugins/openai": {"openai"},
    "plugins/sagemaker": {"sagemaker"},
    "plugins/cloudrun": {"cloudrun"},
    "plugins/http": {"http"},
}


def _dependencies_without_gpubench(tmp: Path) -> Path:
    """This environment's installed packages minus every gpubench distribution (editable or
    not): what a clean environment would have pip fetch, without the network."""
    import sysconfig

    view = tmp / "deps"
    view.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if "gpubench" not in entry.name and entry.suffix != ".pth":
            (view / entry.name).symlink_to(entry)
    return view


@pytest.mark.slow
def test_every_distribution_builds_a_wheel_that_installs_and_registers(tmp_path: Path) -> None:
    """As a user would: `pip wheel` each distribution, install the wheels into a fresh venv
    (dependencies from this environment, gpubench itself only from the wheels), and list the
    providers with the installed `gpubench` command."""
    wheels = tmp_path / "wheels"
    # Without build isolation: this environment's hatchling (the dev extra) builds them all,
    # where isolation would set up a build environment from the index 13 times (minutes in CI).
    # So the backend each declares is checked here instead of by pip.
    for d in DISTRIBUTIONS:
        build = tomllib.loads((ROOT / d / "pyproject.toml").read_text())["build-system"]
        assert build == {"requires": ["hatchling>=1.21"], "build-backend": "hatchling.build"}, d
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
        + ["-w", str(wheels)]
        + [str(ROOT / d) for d in DISTRIBUTIONS],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    assert len(list(wheels.glob("*.whl"))) == len(DISTRIBUTIONS), sorted(wheels.iterdir())

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site) / "_deps.pth").write_text(f"{_dependencies_without_gpubench(tmp_path)}\n")
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    installed = subprocess.run(
        [*pip, "install", "-q", "--no-index", "--no-deps", *map(str, wheels.glob("*.whl"))],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    listed = subprocess.run(
        [str(venv / "bin" / "gpubench"), "providers", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,  # not the checkout: nothing may be imported from the source tree
    )
    assert listed.returncode == 0, listed.stderr[-3000:]
    providers = {p["name"]: p for p in json.loads(listed.stdout)["providers"]}
    for directory, names in DISTRIBUTIONS.items():
        for name in names:
            assert name in providers, f"{directory} did not register {name!r}"
            assert providers[name]["error"] is None, providers[name]
    where = subprocess.run(
        [str(python), "-c", "import gpubench_sdk, gpubench_runpod; print(gpubench_sdk.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    assert where.stdout.startswith(str(venv)), where  # the wheel's copy, not the checkout's
