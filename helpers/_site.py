"""The static formats of the collection: a web site (``make html``) and lecture slides (``make slides``).

nbconvert turns each notebook into a page or a reveal.js deck; this module adds what it cannot
know by itself:

- ``SitePreprocessor``, an nbconvert preprocessor: a slider explorer's output is a live widget,
  which a static page cannot run, so it is replaced by the picture the explorer showed when the
  notebook was executed (saved in the notebook's widget state); links between notebooks
  (``03_many_clocks.ipynb``) are pointed at the built pages (``03_many_clocks.html``).
- ``build_index``: the site's index page, one entry per notebook with its title and what it reads
  alongside.

Run ``python -m helpers._site --out build/html [notebooks...]`` after nbconvert has written the
pages (the Makefile does both).
"""

from __future__ import annotations

import argparse
import html
import re
from pathlib import Path

import nbformat
from nbconvert.filters import markdown2html
from nbconvert.preprocessors import Preprocessor
from traitlets import Unicode

__all__: list[str] = []  # private: used by the Makefile, not by notebooks

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


class SitePreprocessor(Preprocessor):
    """Live widgets become their saved pictures; links between notebooks point at the built pages."""

    link_suffix = Unicode(
        "",
        help="Suffix that replaces '.ipynb' in links between notebooks "
        "('.html' for the site, '.slides.html' for slides); empty leaves links alone.",
    ).tag(config=True)

    def preprocess(self, nb, resources):
        state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
        for cell in nb.cells:
            if cell.cell_type == "markdown" and self.link_suffix:
                cell.source = NOTEBOOK_LINK.sub(
                    lambda m: f"]({m.group(1)}{self.link_suffix}{m.group(2) or ''})", cell.source
                )
            if cell.cell_type != "code":
                continue
            outputs = []
            for output in cell.get("outputs", []):
                view = output.get("data", {}).get(WIDGET_VIEW)
                if view is None:
                    outputs.append(output)
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
        return nb, resources


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
sinusoidal clocks, to RoPE and ALiBi. Each page is an executed notebook; the sliders are shown as
their default picture. To move them, open the notebooks in JupyterLab (see the README).</p>
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write the index page of the static site.")
    parser.add_argument("--out", type=Path, default=Path("build/html"), help="folder of the built pages")
    parser.add_argument("notebooks", nargs="*", type=Path, help="notebooks, in order (default: notebooks/NN_*.ipynb)")
    args = parser.parse_args(argv)
    notebooks = args.notebooks or sorted(Path("notebooks").glob("[0-9][0-9]_*.ipynb"))
    index = build_index(notebooks, args.out)
    print(f"wrote {index} ({len(notebooks)} notebooks)")
    missing = [f"{path.stem}.html" for path in notebooks if not (args.out / f"{path.stem}.html").exists()]
    if missing:
        raise SystemExit(f"pages not built in {args.out}: {', '.join(missing)}")


if __name__ == "__main__":
    main()
