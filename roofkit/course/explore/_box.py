"""What every explorer with a figure shares: a figure that follows the sliders, and its static picture.

A :class:`LiveFigure` is a matplotlib figure drawn once on an Agg canvas and
then updated in place. Its builder marks the artists a change can move
(:meth:`LiveFigure.animate`: the dot on the roofline, a bar's width, a value
written beside it); everything else (axes, ticks, roofs, legends) is drawn
once into a background. A change sets the moving artists' data
(``set_data``, ``set_width``, ``set_text``), and :meth:`LiveFigure.frame`
pastes the background back and draws only those artists (blitting), then
encodes the pixels as a PNG with the fastest settings (no filter, zlib level 1),
which the box's ``image`` widget (an ``ipywidgets.Image``) shows: the
frontend receives one binary PNG and swaps it in, nothing else.

A notebook rendered without a live kernel (the static site, nbconvert,
GitHub) cannot show widgets; the box's mimebundle then offers one line of
text and the picture of its starting state, rendered once when the explorer
is built (:meth:`FigureBox.attach`), never again on a change.

Heavy model calls are cached per input with :func:`cached`.

Why an image and not ipympl (matplotlib's widget backend): ipympl draws with
the same Agg renderer and sends each frame as a PNG too (Pillow's encoder,
five times slower than :func:`encode_png`), through a frontend extension of
its own; it would add a dependency and make no frame cheaper
(``benchmarks/explorers.py`` measures the explorers).
"""

from __future__ import annotations

import base64
import functools
import io
import struct
import zlib

import ipywidgets as w

__all__ = ["FigureBox", "LiveFigure", "Scene", "cached", "encode_png"]


def _chunk(tag: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))


def encode_png(rgba, level: int = 1) -> bytes:
    """An (height, width, 4) uint8 RGBA array as a PNG: no row filter, zlib ``level``.

    On an explorer's figure (936 x 374 pixels) about 5 ms against Pillow's 25 ms
    (adaptive row filters, zlib level 6; 17 ms at level 1), for a file about a
    tenth larger. The bytes depend on the pixels only.
    """
    import numpy as np

    pixels = np.asarray(rgba, dtype=np.uint8)
    height, width, _ = pixels.shape
    rows = np.zeros((height, 1 + 4 * width), dtype=np.uint8)  # each row: filter type 0, then its pixels
    rows[:, 1:] = pixels.reshape(height, 4 * width)
    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)  # 8 bits, RGBA, deflate, no interlace
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(rows.tobytes(), level))
            + _chunk(b"IEND", b""))


def cached(function, maxsize: int = 512):
    """``function`` with its results kept per input (keyword arguments included), as a fresh dict each time.

    For an explorer's state: a slider swept back and forth asks for the same
    inputs again and again. The result is a shallow copy, so that a caller
    that changes it does not change what the cache holds.
    """
    remember = functools.lru_cache(maxsize=maxsize)(function)

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        result = remember(*args, **kwargs)
        return dict(result) if isinstance(result, dict) else result

    wrapper.cache_clear = remember.cache_clear
    wrapper.cache_info = remember.cache_info
    return wrapper


class LiveFigure:
    """A matplotlib figure updated in place and shown as a PNG in an ``ipywidgets.Image``.

    ``build(live)`` draws the figure into ``live.fig``, an empty
    :class:`~matplotlib.figure.Figure`, and marks its moving artists with
    ``live.animate``; it runs once, and again
    after :meth:`rebuild` (when what is drawn once changes: another accelerator).
    The layout (constrained, when asked) is computed on the first draw and then
    kept, so the axes stay put as the sliders move.
    """

    def __init__(self, build, figsize, dpi: int = 72, layout: str | None = "constrained"):
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        self.fig = Figure(figsize=figsize, dpi=dpi, layout=layout)
        self.canvas = FigureCanvasAgg(self.fig)
        self._build, self._layout = build, layout
        self._moving: list = []
        self._background = None
        self._build(self)

    def animate(self, *artists):
        """Mark ``artists`` as the ones a change moves: drawn on every frame, left out of the background."""
        for artist in artists:
            artist.set_animated(True)
            self._moving.append(artist)
        return artists[0] if len(artists) == 1 else artists

    def rebuild(self) -> None:
        """Clear the figure and build it again (keeping its layout); the next frame draws it all."""
        positions = [ax.get_position() for ax in self.fig.axes] if self._background is not None else None
        self.fig.clear()
        self._moving, self._background = [], None
        self._build(self)
        if positions and len(positions) == len(self.fig.axes):
            for ax, box in zip(self.fig.axes, positions):
                ax.set_position(box)

    def frame(self) -> bytes:
        """The figure as it is now, as PNG bytes: the background pasted back, the moving artists drawn on it."""
        if self._background is None:
            self.canvas.draw()  # everything but the moving artists (and the layout, the first time)
            if self._layout is not None:
                self.fig.set_layout_engine("none")  # keep the axes where the first draw put them
            self._background = self.canvas.copy_from_bbox(self.fig.bbox)
        else:
            self.canvas.restore_region(self._background)
        renderer = self.canvas.get_renderer()
        for artist in self._moving:
            if artist.get_visible():
                artist.draw(renderer)
        return encode_png(self.canvas.buffer_rgba())

    def still(self) -> bytes:
        """The last frame as a PNG at zlib's best compression: the picture a static page keeps."""
        return encode_png(self.canvas.buffer_rgba(), level=9)


class Scene:
    """An explorer's figure: drawn once for each :meth:`key` of its state, moved in place for every other change.

    A subclass says what is drawn once (:meth:`build`, which marks its moving artists with ``live.animate``),
    what decides a redraw (:meth:`key`: the accelerator, the precisions, ...) and how a change moves the
    artists (:meth:`move`). ``figure`` is passed to :class:`LiveFigure` (``figsize``, ``layout``).
    """

    def __init__(self, state: dict, **figure):
        self.state = state
        self.live = LiveFigure(self._draw, **figure)

    def key(self, state: dict):
        raise NotImplementedError

    def build(self, live: LiveFigure) -> None:
        raise NotImplementedError

    def move(self, state: dict) -> None:
        raise NotImplementedError

    def _draw(self, live: LiveFigure) -> None:
        self.build(live)
        self._drawn = self.key(self.state)
        self.move(self.state)

    def update(self, state: dict) -> None:
        """Show ``state``: move the artists, or draw the figure again when its key changed."""
        self.state = state
        if self.key(state) != self._drawn:
            self.live.rebuild()
        else:
            self.move(state)


class FigureBox(w.VBox):
    """An explorer: a VBox whose ``plot`` (a Box, CSS class ``roofkit-plot``) holds ``image``, the live figure.

    Subclasses set ``text``, the one line a page without live widgets shows;
    ``_png`` is the picture it shows, the starting figure, rendered once.
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

    @staticmethod
    def image_box(css_class: str = "roofkit-plot") -> tuple[w.Box, w.Image]:
        """The Box that holds the figure (with ``css_class``) and the Image widget in it."""
        image = w.Image(format="png", layout=w.Layout(max_width="100%", height="auto"))
        box = w.Box([image])
        box.add_class(css_class)
        return box, image

    def attach(self, live: LiveFigure) -> None:
        """Show ``live`` in ``self.image``, and keep its starting picture as the static ``_png``."""
        self.live = live
        self.image.value = live.frame()
        self._png = live.still()

    def redraw(self) -> None:
        """Send the live figure's current frame to the frontend."""
        self.image.value = self.live.frame()
