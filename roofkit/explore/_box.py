"""What every explorer's box shares: it carries its current figure as a PNG.

A notebook rendered without a live kernel (the static site, nbconvert, GitHub)
cannot show widgets; the box's mimebundle then offers one line of text and the
picture of its starting state instead.
"""

from __future__ import annotations

import base64
import io

import ipywidgets as w

__all__ = ["FigureBox", "png"]


def png(fig, dpi=72) -> bytes:
    """A figure as PNG bytes, without the matplotlib version in its metadata (stable outputs)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None})
    return buffer.getvalue()


class FigureBox(w.VBox):
    """An explorer: a VBox whose ``plot`` output shows the current figure, also kept as ``_png``.

    Subclasses set ``text``, the one line a page without live widgets shows.
    """

    text = "explorer (widgets: run the notebook live to use it)"
    _png = b""

    def __repr__(self):
        return self.text

    def _repr_mimebundle_(self, **kwargs):
        data = super()._repr_mimebundle_(**kwargs) or {}
        data["text/plain"] = repr(self)
        data["image/png"] = base64.b64encode(self._png).decode("ascii")
        return data

    def show(self, fig, summary: str) -> None:
        """Draw ``fig`` in the box's ``plot`` output, with ``summary`` as its text form."""
        self._png = png(fig)
        self.plot.outputs = ({"output_type": "display_data", "metadata": {},
                              "data": {"image/png": base64.b64encode(self._png).decode("ascii"),
                                       "text/plain": summary}},)
