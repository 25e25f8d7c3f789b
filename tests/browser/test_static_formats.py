"""The static site and slides (``tools/sitebuild``): widgets become their saved pictures, links follow
the pages, the index lists every notebook. No browser needed: these run in ``make test``."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import nbformat
import pytest
from sitebuild import SitePreprocessor, build_index, notebook_entry

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n pretend picture").decode()


def _model(name, state=None, buffers=None):
    model = {"model_name": name, "model_module": "@jupyter-widgets/controls", "state": state or {}}
    if buffers:
        model["buffers"] = buffers
    return model


def _explorer_notebook():
    """A notebook shaped like an executed explorer: VBox(HBox(slider), Image) with its saved state."""
    state = {
        "box": _model("VBoxModel", {"children": ["IPY_MODEL_bar", "IPY_MODEL_img"]}),
        "bar": _model("HBoxModel", {"children": ["IPY_MODEL_slider"]}),
        "slider": _model("IntSliderModel", {"value": 3}),
        "img": _model("ImageModel", {"format": "png"}, [{"path": ["value"], "encoding": "base64", "data": PNG}]),
        "lonely": _model("IntSliderModel", {"value": 1}),
    }
    nb = nbformat.v4.new_notebook()
    nb.metadata["widgets"] = {WIDGET_STATE: {"state": state, "version_major": 2, "version_minor": 0}}
    explorer = nbformat.v4.new_code_cell("helpers.widgets.one_clock_explorer()")
    explorer.outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={
                WIDGET_VIEW: {"model_id": "box", "version_major": 2, "version_minor": 0},
                "text/plain": "Explorer(...)",
            },
        )
    ]
    slider = nbformat.v4.new_code_cell("ipywidgets.IntSlider(1)")
    slider.outputs = [
        nbformat.v4.new_output(
            "execute_result",
            execution_count=2,
            data={
                WIDGET_VIEW: {"model_id": "lonely", "version_major": 2, "version_minor": 0},
                "text/plain": "IntSlider(1)",
            },
        )
    ]
    printed = nbformat.v4.new_code_cell("print(1)")
    printed.outputs = [nbformat.v4.new_output("stream", name="stdout", text="1\n")]
    links = nbformat.v4.new_markdown_cell(
        "[Next: 03 · Many clocks](03_many_clocks.ipynb), [kernel](04_kernel_decorrelation.ipynb#the-table), "
        "[elsewhere](https://example.org/05_x.ipynb)"
    )
    nb.cells = [explorer, slider, printed, links]
    return nb


def test_explorer_output_becomes_its_saved_picture():
    nb, _ = SitePreprocessor().preprocess(_explorer_notebook(), {})
    explorer, slider, printed, _ = nb.cells
    assert [o["data"]["image/png"] for o in explorer.outputs] == [PNG]
    assert not any(WIDGET_VIEW in o.get("data", {}) for cell in nb.cells for o in cell.get("outputs", []))
    assert slider.outputs == []  # a widget with no picture has nothing a static page can show
    assert printed.outputs[0]["text"] == "1\n"
    assert "widgets" not in nb.metadata  # no widget renderer loaded from the network


@pytest.mark.parametrize(
    "suffix, expected",
    [
        (
            ".html",
            "[Next: 03 · Many clocks](03_many_clocks.html), [kernel](04_kernel_decorrelation.html#the-table), "
            "[elsewhere](https://example.org/05_x.ipynb)",
        ),
        (
            ".slides.html",
            "[Next: 03 · Many clocks](03_many_clocks.slides.html), "
            "[kernel](04_kernel_decorrelation.slides.html#the-table), [elsewhere](https://example.org/05_x.ipynb)",
        ),
        (
            "",
            "[Next: 03 · Many clocks](03_many_clocks.ipynb), [kernel](04_kernel_decorrelation.ipynb#the-table), "
            "[elsewhere](https://example.org/05_x.ipynb)",
        ),
    ],
)
def test_links_between_notebooks_follow_the_pages(suffix, expected):
    nb, _ = SitePreprocessor(link_suffix=suffix).preprocess(_explorer_notebook(), {})
    assert nb.cells[-1].source == expected


def test_index_lists_every_notebook_with_title_and_reading(tmp_path):
    paths = []
    for stem, title in [("02_one_clock", "02 · One clock (一个时钟)"), ("03_many_clocks", "03 · Many <clocks>")]:
        nb = nbformat.v4.new_notebook()
        nb.cells = [
            nbformat.v4.new_markdown_cell(
                f"# {title}\n\n**Read alongside (对照阅读):** article 000, section {stem[1]}"
            ),
            nbformat.v4.new_markdown_cell("# not the title"),
        ]
        path = tmp_path / f"{stem}.ipynb"
        nbformat.write(nb, path)
        paths.append(path)
    out = tmp_path / "html"
    out.mkdir()
    (out / "02_one_clock.html").write_text("page")
    assert notebook_entry(paths[0]) == {
        "page": "02_one_clock.html",
        "title": "02 · One clock (一个时钟)",
        "reading": "**Read alongside (对照阅读):** article 000, section 2",
    }
    page = build_index(paths, out).read_text(encoding="utf-8")
    assert '<a href="02_one_clock.html">02 · One clock (一个时钟)</a>' in page
    assert '<a href="03_many_clocks.html">03 · Many &lt;clocks&gt;</a> <em>(page not built)</em>' in page
    assert "<strong>Read alongside (对照阅读):</strong> article 000, section 3" in page
    assert page.index("02_one_clock.html") < page.index("03_many_clocks.html")


NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_slide_metadata_follows_the_headings(path):
    """For ``make slides``: the title and each ``## `` section start a slide, each ``### `` a subslide."""
    wrong = []
    for k, cell in enumerate(nbformat.read(path, as_version=4).cells):
        first = cell.source.lstrip().split("\n", 1)[0] if cell.cell_type == "markdown" else ""
        expected = "slide" if re.match(r"#{1,2} ", first) else "subslide" if first.startswith("### ") else None
        got = cell.metadata.get("slideshow", {}).get("slide_type")
        if expected and got != expected:
            wrong.append(f"cell {k} {first[:50]!r}: slide_type {got!r}, expected {expected!r}")
    assert not wrong, f"{path.name}:\n" + "\n".join(wrong)
