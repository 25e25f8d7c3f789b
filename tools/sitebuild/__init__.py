"""The static formats of the collection: a web site (``make html``) and lecture slides (``make slides``).

nbconvert turns each notebook into a page or a reveal.js deck; this module adds what it cannot
know by itself:

- ``SitePreprocessor``, an nbconvert preprocessor: a slider explorer's output is a live widget,
  which a static page cannot run. An explorer that recorded the call that made it is made again
  and becomes a static explorer: its frames rendered ahead and a small script that swaps them as
  the sliders move (``sitebuild.frames``); any other widget becomes the picture it showed when the
  notebook was executed (saved in the notebook's widget state). Links between notebooks
  (``03_many_clocks.ipynb``) are pointed at the built pages (``03_many_clocks.html``).
- ``copy_assets``: MathJax (from the package ``jupyter-server-mathjax``) and, for slides,
  reveal.js (from ``sphinx-revealjs``) copied beside the pages, which the templates in
  ``tools/sitebuild/templates`` load instead of a CDN: the pages and decks work offline.
- ``build_index``: the site's index page, one entry per notebook with its title and what it reads
  alongside.

Run ``PYTHONPATH=tools python -m sitebuild --out build/html [notebooks...]`` after nbconvert has written the
pages (the Makefile does both; ``--slides`` for the decks).
"""

from __future__ import annotations

import argparse
import html
import re
import shutil
from pathlib import Path

import markupsafe
import nbformat
from nbconvert.filters import markdown2html
from nbconvert.preprocessors import Preprocessor
from traitlets import Bool, Unicode

from helpers.widgets._explorer import EXPLORER_SPEC

from . import frames as _frames

__all__ = ["SitePreprocessor", "build_index", "copy_assets", "notebook_entry", "main"]

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
# A relative link to a notebook of the collection, in markdown: ](03_many_clocks.ipynb) or ](03_x.ipynb#anchor)
NOTEBOOK_LINK = re.compile(r"\]\((\d\d_[\w-]+)\.ipynb(#[^)]*)?\)")


def _widget_pictures(state: dict, model_id: str) -> list[tuple[str, str]]:
    """``(mime type, base64 data)`` of every ``Image`` inside widget ``model_id``, in display order."""
    model = state.get(model_id)
    if model is None:
        return []
    if model.get("model_name") == "ImageModel":
        mime = "image/" + model.get("state", {}).get("format", "png")
        return [
            (mime, buffer["data"])
            for buffer in model.get("buffers", [])
            if buffer.get("path") == ["value"] and buffer.get("encoding") == "base64"
        ]
    pictures = []
    for child in model.get("state", {}).get("children", []):
        pictures += _widget_pictures(state, str(child).removeprefix("IPY_MODEL_"))
    return pictures


# Lines of a code cell that speak to the tests, not to a reader (tests/test_notebooks_hygiene.py).
TEST_MARKERS = ("# NBVAL_", "# Not compared by the tests:")


class SitePreprocessor(Preprocessor):
    """Live widgets become their saved pictures; links between notebooks point at the built pages."""

    link_suffix = Unicode(
        "",
        help="Suffix that replaces '.ipynb' in links between notebooks "
        "('.html' for the site, '.slides.html' for slides); empty leaves links alone.",
    ).tag(config=True)

    render_frames = Bool(
        True, help="Render the frames of explorers that recorded their call (False: saved pictures only)."
    ).tag(config=True)
    explorer_subslide = Bool(
        False, help="Start a sub-slide at each explorer's cell (for decks: the explorer fills a slide)."
    ).tag(config=True)

    def _static_explorer(self, spec: dict, resources: dict, number: int) -> dict | None:
        """A display_data output with the static explorer; its frames go to ``resources['outputs']``.
        None (and a warning) when the explorer cannot be made again: the page keeps its picture."""
        try:
            explorer = _frames.make_explorer(spec)
        except Exception as error:  # a renamed function, a changed signature: the build goes on
            self.log.warning("explorer %s could not be made again (%s): its saved picture is shown", spec, error)
            return None
        plan = _frames.plan_frames(explorer.controls)
        frames = _frames.render_frames(explorer, plan)
        if len(frames) < len(plan.frames):
            self.log.warning(
                "%s: %d of %d frames refused by the drawing (the page greys the picture there)",
                spec["function"],
                len(plan.frames) - len(frames),
                len(plan.frames),
            )
        name = resources.get("metadata", {}).get("name") or "notebook"
        folder = resources.get("output_files_dir") or f"{name}_files"
        outputs = resources.setdefault("outputs", {})
        urls = {}
        for k, (index, picture) in enumerate(frames.items()):
            url = f"{folder}/explorer{number}/{k:03d}.jpg"
            outputs[url] = picture
            urls[index] = url
        page = _frames.SCRIPT + _frames.static_explorer_html(plan, urls, number)  # the script runs once
        return nbformat.v4.new_output(
            "display_data", data={"text/html": page, "text/plain": f"(a static explorer: {len(urls)} frames)"}
        )

    def preprocess(self, nb, resources):
        state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
        explorers = 0
        for cell in nb.cells:
            if cell.cell_type == "markdown" and self.link_suffix:
                cell.source = NOTEBOOK_LINK.sub(
                    lambda m: f"]({m.group(1)}{self.link_suffix}{m.group(2) or ''})", cell.source
                )
            if cell.cell_type != "code":
                continue
            # the test markers mean nothing to a reader: "# NBVAL_IGNORE_OUTPUT" and the line that
            # follows it with its reason ("# Not compared by the tests: a live widget.") go
            cell.source = "\n".join(line for line in cell.source.split("\n") if not line.startswith(TEST_MARKERS))
            outputs = []
            for output in cell.get("outputs", []):
                view = output.get("data", {}).get(WIDGET_VIEW)
                if view is None:
                    outputs.append(output)
                    continue
                spec = output.get("data", {}).get(EXPLORER_SPEC)
                static = self._static_explorer(spec, resources, explorers) if spec and self.render_frames else None
                if static is not None:
                    outputs.append(static)
                    explorers += 1
                    if self.explorer_subslide and cell.metadata.get("slideshow", {}).get("slide_type") in (
                        None,
                        "-",
                    ):
                        cell.metadata.setdefault("slideshow", {})["slide_type"] = "subslide"
                    continue
                pictures = _widget_pictures(state, view.get("model_id", ""))
                if not pictures:
                    continue  # nothing a static page can show
                for mime, picture in pictures:
                    outputs.append(
                        nbformat.v4.new_output(
                            "display_data",
                            data={
                                mime: picture,
                                "text/plain": (
                                    "(the explorer's picture when the notebook was executed; "
                                    "run the notebook to move the sliders)"
                                ),
                            },
                        )
                    )
            cell.outputs = outputs
        # Without widget state the page does not load a widget renderer from the network.
        nb.metadata.pop("widgets", None)
        self._link_stylesheets(resources)
        return nb, resources

    @staticmethod
    def _link_stylesheets(resources: dict) -> None:
        """The templates' stylesheets (JupyterLab's is 240 kB) are written once beside the pages and
        linked, not inlined into every page: the site is smaller and a browser caches them."""
        inline = resources.get("include_css")
        if inline is None:
            return
        outputs = resources.setdefault("outputs", {})

        def link(name: str) -> markupsafe.Markup:
            style = str(inline(name))  # '<style type="text/css">\n' + the file + '</style>'
            opening, closing = '<style type="text/css">\n', "</style>"
            if not (style.startswith(opening) and style.endswith(closing)):
                return inline(name)  # another nbconvert: keep its inline style
            url = f"{ASSETS}/css/{Path(name).name}"
            outputs[url] = style[len(opening) : -len(closing)].encode("utf-8")
            return markupsafe.Markup(f'<link rel="stylesheet" type="text/css" href="{url}">')

        resources["include_css"] = link


def notebook_entry(path: Path) -> dict:
    """Title, reading and page name of one notebook, from its markdown."""
    notebook = nbformat.read(path, as_version=4)
    title, reading = path.stem, ""
    for cell in notebook.cells:
        if cell.cell_type != "markdown":
            continue
        lines = cell.source.splitlines()
        for k, line in enumerate(lines):
            if line.startswith("# ") and title == path.stem:
                title = line[2:].strip()
            elif re.match(r"^\W*read alongside", line, flags=re.IGNORECASE) and not reading:
                paragraph = [line.strip()]  # the rest of its paragraph
                for more in lines[k + 1 :]:
                    if not more.strip() or more.lstrip().startswith(("#", "-", "*", "|")):
                        break
                    paragraph.append(more.strip())
                reading = " ".join(paragraph)
        if title != path.stem and reading:
            break
    return {"page": f"{path.stem}.html", "title": title, "reading": reading}


def build_index(notebooks: list[Path], out: Path) -> Path:
    """Write ``out/index.html``: one linked entry per notebook. Returns the path written."""
    items = []
    for path in notebooks:
        entry = notebook_entry(path)
        missing = "" if (out / entry["page"]).exists() else " <em>(page not built)</em>"
        reading = markdown2html(entry["reading"]) if entry["reading"] else ""
        items.append(
            f'<li><a href="{html.escape(entry["page"])}">{html.escape(entry["title"])}</a>{missing}'
            f'<div class="reading">{reading}</div></li>'
        )
    page = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Where is this token? Positional encoding, notebook by notebook</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 48rem; margin: 2rem auto; padding: 0 1rem; line-height: 1.5; }}
ul.notebooks {{ list-style: none; padding: 0; }}
li {{ margin-bottom: 1rem; }}
li > a {{ font-size: 1.15rem; font-weight: 600; }}
.reading p {{ margin: 0.2rem 0; color: #444; font-size: 0.95rem; }}
</style>
</head>
<body>
<h1>Where is this token? Positional encoding, notebook by notebook</h1>
<p>How a Transformer learns where each token is: from attention that cannot see order, through the
sinusoidal clocks, to RoPE and ALiBi. Each page is an executed notebook. Its sliders move without
Python: they show pictures rendered when the site was built, for the values each page names. For
every value, and to change the code, open the notebooks in JupyterLab (see the README).</p>
<ul class="notebooks">
{chr(10).join(items)}
</ul>
</body>
</html>
"""
    out.mkdir(parents=True, exist_ok=True)
    index = out / "index.html"
    index.write_text(page, encoding="utf-8")
    return index


#: Where the templates' copies of MathJax and reveal.js go, relative to the pages.
ASSETS = "_static"
# MathJax 2's parts the pages never load (translations, the SVG output, the accessibility extensions).
MATHJAX_SKIP = ("localization", "SVG", "a11y")


def copy_assets(out: Path, *, slides: bool) -> list[Path]:
    """Copy MathJax (and reveal.js for slides) into ``out/_static``; returns the folders written.

    MathJax 2 comes from the package ``jupyter-server-mathjax``, reveal.js from ``sphinx-revealjs``
    (its ``dist`` and the speaker-notes plugin): both are requirements of the collection.
    """
    import jupyter_server_mathjax

    written = []
    mathjax = Path(jupyter_server_mathjax.__file__).resolve().parent / "static"
    target = out / ASSETS / "mathjax"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(mathjax, target, ignore=shutil.ignore_patterns(*MATHJAX_SKIP))
    written.append(target)
    if slides:
        import sphinx_revealjs

        reveal = Path(sphinx_revealjs.__file__).resolve().parent / "_static" / "revealjs"
        target = out / ASSETS / "reveal"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(reveal / "dist", target / "dist")
        shutil.copytree(reveal / "plugin" / "notes", target / "plugin" / "notes")
        written.append(target)
    return written


def folder_size(folder: Path) -> int:
    """Bytes of every file under ``folder``."""
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Finish the static site (or the slides): assets and index page.")
    parser.add_argument("--out", type=Path, default=Path("build/html"), help="folder of the built pages")
    parser.add_argument("--slides", action="store_true", help="the folder holds slide decks: copy reveal.js too")
    parser.add_argument("notebooks", nargs="*", type=Path, help="notebooks, in order (default: notebooks/NN_*.ipynb)")
    args = parser.parse_args(argv)
    notebooks = args.notebooks or sorted(Path("notebooks").glob("[0-9][0-9]_*.ipynb"))
    for folder in copy_assets(args.out, slides=args.slides):
        print(f"copied {folder} ({folder_size(folder) / 1e6:.1f} MB)")
    if args.slides:
        print(f"{args.out}: {folder_size(args.out) / 1e6:.1f} MB in all")
        return
    index = build_index(notebooks, args.out)
    print(f"wrote {index} ({len(notebooks)} notebooks); {args.out}: {folder_size(args.out) / 1e6:.1f} MB in all")
    missing = [f"{path.stem}.html" for path in notebooks if not (args.out / f"{path.stem}.html").exists()]
    if missing:
        raise SystemExit(f"pages not built in {args.out}: {', '.join(missing)}")
