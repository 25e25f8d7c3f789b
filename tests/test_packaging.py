"""``helpers`` as a library: what ``import helpers`` loads, and the wheel outside the repository.

- ``import helpers`` loads the maths only: not matplotlib, ipywidgets or IPython (the teaching
  stack, imported on first use of ``helpers.plots``, ``helpers.widgets``, ``helpers.exercises``),
  nor SciPy (imported by ``continuous_kernel`` when it runs), and every name of ``helpers.__all__``
  still resolves.
- The wheel (what ``pip install .`` installs, not the editable install of ``make setup``) holds
  what the package reads: installed into a directory of its own and imported from a working
  directory outside the repository, ``rope_models()`` and ``model_rope()`` give what they give in
  the repository, and its metadata names the distribution ``posenc-helpers`` with the maths as
  dependencies and the teaching stack as the ``teaching`` extra.

Each test names the bug it is there to catch.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

import helpers

ROOT = pathlib.Path(__file__).resolve().parents[1]
TEACHING_STACK = ("matplotlib", "ipywidgets", "IPython", "scipy")  # scipy: only continuous_kernel uses it

# Run in a fresh Python: what `import helpers` loaded, then every public name resolved.
_IMPORT_PROBE = """
import json, sys
import helpers
loaded = sorted({{m.split(".")[0] for m in sys.modules}} & set({teaching!r}))
missing = [name for name in helpers.__all__ if not hasattr(helpers, name)]
print(json.dumps({{"file": helpers.__file__, "loaded": loaded, "missing": missing, "dir": dir(helpers)}}))
"""


def _probe(code: str, *, cwd: pathlib.Path, pythonpath: str | None = None) -> dict:
    env = dict(os.environ, HELPERS_DEVICE="cpu")
    env.pop("PYTHONPATH", None)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    result = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_import_helpers_leaves_the_teaching_stack_unloaded():
    """Catches ``from . import plots, widgets`` back in ``helpers/__init__.py`` (matplotlib,
    ipywidgets and IPython loaded by every ``import helpers``, seconds for an engineer who wants
    the encodings), and a lazy name that no longer resolves."""
    found = _probe(_IMPORT_PROBE.format(teaching=TEACHING_STACK), cwd=ROOT)
    assert pathlib.Path(found["file"]).resolve() == ROOT / "helpers" / "__init__.py"
    assert found["loaded"] == [], f"import helpers loaded the teaching stack: {found['loaded']}"
    assert found["missing"] == [], f"names of helpers.__all__ that do not resolve: {found['missing']}"
    assert {"plots", "widgets", "exercises", "experiment"} <= set(found["dir"])


def test_the_submodules_imported_on_first_use_are_the_modules():
    """``helpers.plots`` (and the others) are the submodules themselves, reached by attribute, by
    ``from helpers import ...`` and by ``import helpers.x``; an unknown name still raises."""
    import helpers.widgets
    from helpers import exercises, experiment, plots

    assert plots is sys.modules["helpers.plots"] and hasattr(plots, "Drawing")
    assert helpers.widgets is sys.modules["helpers.widgets"] and hasattr(helpers.widgets, "Explorer")
    assert exercises is sys.modules["helpers.exercises"] and callable(exercises.check)
    assert experiment is sys.modules["helpers.experiment"]
    with pytest.raises(AttributeError, match="no attribute 'plot'"):
        helpers.plot  # noqa: B018  (the attribute access is the test)
    from helpers import stretch

    assert stretch is sys.modules["helpers.experiment.stretch"] and callable(stretch.load_stretch)


#: The maths modules whose public names ``helpers/__init__.py`` lists.
MATHS_MODULES = ("sinusoidal", "rope", "alibi", "relative", "kernels", "self_attention", "model_catalog", "device")


def test_the_public_api_lists_every_public_name_of_the_maths_modules():
    """``helpers/__init__.py`` names its API plainly instead of star-importing: catches a function
    added to a module's ``__all__`` but not to the package's (the star import did that by itself),
    and a name listed in ``__all__`` that the package does not hold."""
    import importlib

    for name in MATHS_MODULES:
        module = importlib.import_module(f"helpers.{name}")
        missing = [n for n in module.__all__ if n not in helpers.__all__]
        assert not missing, f"helpers.{name} exports {missing}, which helpers.__all__ does not list"
        assert all(getattr(helpers, n) is getattr(module, n) for n in module.__all__)
    assert len(helpers.__all__) == len(set(helpers.__all__)), "a name listed twice in helpers.__all__"


def test_no_module_is_named_like_a_function_it_exports():
    """``helpers.attention`` was both a module and the function that shadowed it in the package, so
    the module could only be reached through sys.modules; no module of the package may be named
    like one of its own public names."""
    import importlib

    for path in sorted((ROOT / "helpers").rglob("*.py")):
        if path.name.startswith("_"):
            continue
        dotted = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        module = importlib.import_module(dotted)
        assert path.stem not in getattr(module, "__all__", ()), f"{dotted} exports a name {path.stem!r} like its own"


def _can_build_offline() -> bool:
    """setuptools in this environment can build the wheel without pip fetching a build backend:
    setuptools 70.1 and later carry bdist_wheel, earlier ones (from 64, pyproject.toml's floor)
    need the wheel package."""
    try:
        version = tuple(int(part) for part in re.findall(r"\d+", importlib.metadata.version("setuptools"))[:2])
    except importlib.metadata.PackageNotFoundError:
        return False
    return version >= (70, 1) or (version >= (64, 0) and importlib.util.find_spec("wheel") is not None)


def _build_wheel(tmp_path: pathlib.Path) -> pathlib.Path:
    """Build the wheel from a copy of the files the build reads, so that setuptools' build/ and
    egg-info land in tmp_path and not in the work tree."""
    source = tmp_path / "source"
    shutil.copytree(ROOT / "helpers", source / "helpers", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    isolation = ["--no-build-isolation"] if _can_build_offline() else []  # else pip fetches setuptools
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", *isolation, "-w", tmp_path / "dist"]
    result = subprocess.run([*map(str, command), str(source)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    return wheel


def _requires(metadata: str) -> tuple[set[str], set[str]]:
    """The names of the wheel's requirements: without a marker, and under ``extra == "teaching"``."""
    plain, teaching = set(), set()
    for line in metadata.split("\n\n", 1)[0].splitlines():  # the headers, not the README after them
        if line.startswith("Requires-Dist:"):
            name = re.match(r"[A-Za-z0-9_.-]+", line.split(":", 1)[1].strip()).group(0).lower()
            if ";" not in line:
                plain.add(name)
            elif re.search(r"""extra\s*==\s*["']teaching["']""", line):
                teaching.add(name)
    return plain, teaching


_WHEEL_PROBE = """
import json, sys, importlib
import helpers
loaded = sorted({{m.split(".")[0] for m in sys.modules}} & set({teaching!r}))
module = importlib.import_module("helpers.model_catalog")
models = helpers.rope_models()
rope = helpers.model_rope({key!r})
print(json.dumps({{
    "file": helpers.__file__, "loaded": loaded, "data": str(module.ROPE_MODELS_PATH),
    "keys": sorted(models), "inv_freq": rope.inv_freq.tolist(), "factor": rope.attention_factor,
    "plots": helpers.plots.__file__,
}}))
"""


@pytest.mark.slow
def test_the_installed_wheel_works_outside_the_repository(tmp_path):
    """Catches a file the package reads left out of the wheel (``rope_models()`` failed after
    ``pip install .`` while data/rope_models.json lay beside the package, not in it), and
    metadata that puts the teaching stack back among the dependencies or the old name back."""
    wheel = _build_wheel(tmp_path)
    assert wheel.name.startswith("posenc_helpers-"), wheel.name
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (metadata_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = archive.read(metadata_name).decode()
    assert "helpers/data/rope_models.json" in names
    assert not any("sitebuild" in n or "templates" in n for n in names), "the site builder stays out of the wheel"
    assert all(n.startswith(("helpers/", "posenc_helpers-")) for n in names), "the wheel installs only helpers"
    assert re.search(r"^Name: posenc-helpers$", metadata, re.M)
    assert _requires(metadata) == ({"numpy", "scipy", "torch"}, {"matplotlib", "ipywidgets", "tqdm"})

    target = tmp_path / "site"
    install = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", "--target"]
    result = subprocess.run([*install, str(target), str(wheel)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]

    elsewhere = tmp_path / "elsewhere"  # not the repository: its helpers/ is not on the path
    elsewhere.mkdir()
    key = "llama3_1_8b"
    found = _probe(_WHEEL_PROBE.format(teaching=TEACHING_STACK, key=key), cwd=elsewhere, pythonpath=str(target))
    for name in ("file", "data", "plots"):
        assert pathlib.Path(found[name]).resolve().is_relative_to(target.resolve()), (name, found[name])
    assert found["loaded"] == []
    assert found["keys"] == sorted(helpers.rope_models())
    here = helpers.model_rope(key)
    assert found["inv_freq"] == here.inv_freq.tolist() and found["factor"] == here.attention_factor


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("helpers.rope_models", "helpers.model_catalog"),
        ("helpers.attention", "helpers.self_attention"),
        ("helpers.stretch", "helpers.experiment.stretch"),
        ("helpers._experiment_train", "helpers.experiment.train"),
        ("helpers._site", "tools/sitebuild"),
    ],
)
def test_a_moved_module_names_its_new_place(old, new):
    """The layout moved these module paths; ``import`` of the old one must say where it went, not
    only "No module named" (a user's ``from helpers.rope_models import model_rope`` broke)."""
    import importlib

    with pytest.raises(ModuleNotFoundError, match=re.escape(new)):
        importlib.import_module(old)


def test_a_module_that_never_existed_is_still_plainly_missing():
    import importlib

    with pytest.raises(ModuleNotFoundError, match="No module named 'helpers.no_such_module'"):
        importlib.import_module("helpers.no_such_module")
