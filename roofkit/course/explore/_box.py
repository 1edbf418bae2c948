"""What every explorer with a figure shares: a figure that follows every control, and its static picture.

A :class:`LiveFigure` is a matplotlib figure drawn once on an Agg canvas and
then updated in place, in three layers: the base (axes, ticks, labels: drawn
once, with limits that no control changes), a key layer (what a choice such as
the accelerator changes: its roofs, a title with its figures; drawn once per
key, its pixels kept for the last few keys) and the moving artists
(:meth:`LiveFigure.animate`: the dot on the roofline, a bar's width, a value
written beside it). A change sets the moving artists' data (``set_data``,
``set_width``, ``set_text``), and :meth:`LiveFigure.frame` pastes the key's
pixels back and draws only those artists (blitting), then encodes the pixels
as a PNG with the fastest settings (no filter, zlib level 1), which the box's
``image`` widget (an ``ipywidgets.Image``) shows: the frontend receives one
binary PNG and swaps it in, nothing else. No control redraws the axes: a new
log axis costs a tenth of a second in ticks alone, which is why a
:class:`Scene` keeps its axes and their limits fixed across keys.

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
import collections
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
    import numpy as np  # deferred: numpy costs ~0.1 s at import

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

    Its pixels are drawn in three layers, so that no change redraws axes, ticks or labels:

    * the **base**, drawn once with the first frame: the axes, their fixed limits, ticks and labels,
      what no input changes (the layout, constrained when asked, is computed then and kept);
    * the **key layer** (:meth:`layer`): what changes with the scene's key, a choice such as the
      accelerator (its roofs, a title with its figures, a scale's labels). It is drawn over the base once per
      key and its pixels are kept for the last ``keep`` keys, so that coming back to a key pastes
      them back without drawing anything;
    * the **moving** artists (:meth:`animate`): what a slider moves (the dot, a bar's width, a
      value written beside it), drawn over the key's pixels on every frame.

    ``build(live)`` draws the base into ``live.fig``, an empty
    :class:`~matplotlib.figure.Figure`, marks its moving artists with ``live.animate``, and
    shows its first key with ``live.layer``; it runs once.
    """

    def __init__(self, build, figsize, dpi: int = 96, layout: str | None = "constrained", keep: int = 24):
        from matplotlib.backends.backend_agg import FigureCanvasAgg  # deferred: matplotlib costs ~0.2 s at import
        from matplotlib.figure import Figure  # deferred: matplotlib costs ~0.2 s at import

        self.fig = Figure(figsize=figsize, dpi=dpi, layout=layout)
        self.canvas = FigureCanvasAgg(self.fig)
        self._layout, self.keep = layout, keep
        self._moving: list = []
        self._drawn: list = []  # the artists of the key layer drawn last
        self._titles: list = []  # the axes titles the key layer sets
        self._key, self._layers = None, collections.OrderedDict()  # key -> its pixels, the oldest first
        self._base = None
        build(self)

    def animate(self, *artists):
        """Mark ``artists`` as the ones a change moves: drawn on every frame, left out of the other layers."""
        for artist in artists:
            _set_aside(artist)
            self._moving.append(artist)
        return artists[0] if len(artists) == 1 else artists

    def layer(self, key, draw) -> None:
        """Show ``key``'s layer under the moving artists: its kept pixels, or what ``draw()`` draws.

        ``draw()`` runs only when the pixels of ``key`` are not kept; it adds the key's artists to the
        figure's axes (or to the figure), and may set axes titles: a title it changes belongs to the key
        layer from then on, so a scene that sets a title in ``draw()`` sets it for every key. The artists
        of the layer drawn before are removed first, so that what ``draw()`` adds is the layer.
        """
        if key == self._key:
            return
        self._key = key
        if key in self._layers:
            self._layers.move_to_end(key)
            return
        for artist in self._drawn:
            artist.remove()
        before, titles = {id(a) for a in self._children()}, [(t, t.get_text()) for t in self._all_titles()]
        draw()
        self._drawn = [a for a in self._children() if id(a) not in before]
        self._titles += [t for t, text in titles if t.get_text() != text and t not in self._titles]
        for artist in self._drawn + self._titles:
            _set_aside(artist)
        for title in self._titles:
            title.set_in_layout(True)  # the layout keeps room for it (the same height whatever its text)

    def _children(self) -> list:
        return [*self.fig.get_children(), *(a for ax in self.fig.axes for a in ax.get_children())]

    def _all_titles(self) -> list:
        return [t for ax in self.fig.axes for t in (ax.title, ax._left_title, ax._right_title)]

    def _draw_layer(self) -> None:
        """The base's pixels with the key layer drawn over them, by axes and zorder as a full draw would."""
        self.canvas.restore_region(self._base)
        renderer = self.canvas.get_renderer()
        order = {id(ax): i for i, ax in enumerate(self.fig.axes)}
        ranked = sorted(self._drawn + self._titles,
                        key=lambda a: (order.get(id(a.axes), len(order)), a.get_zorder()))
        for artist in ranked:
            if artist.get_visible():
                artist.draw(renderer)
        self._layers[self._key] = self.canvas.copy_from_bbox(self.fig.bbox)
        while len(self._layers) > self.keep:
            self._layers.popitem(last=False)

    def frame(self) -> bytes:
        """The figure as it is now, as PNG bytes: the key's pixels pasted back, the moving artists drawn on them."""
        if self._base is None:
            self.canvas.draw()  # the base: everything but the key layer and the moving artists
            if self._layout is not None:
                self.fig.set_layout_engine("none")  # keep the axes where the first draw put them
            self._base = self.canvas.copy_from_bbox(self.fig.bbox)
        if self._key in self._layers:
            self.canvas.restore_region(self._layers[self._key])
        else:
            self._draw_layer()
        renderer = self.canvas.get_renderer()
        for artist in self._moving:
            if artist.get_visible():
                artist.draw(renderer)
        return encode_png(self.canvas.buffer_rgba())

    def still(self) -> bytes:
        """The last frame as a PNG at zlib's best compression: the picture a static page keeps."""
        return encode_png(self.canvas.buffer_rgba(), level=9)


def _set_aside(artist) -> None:
    """Leave ``artist`` out of the base and of the layout: it is drawn by hand, over the base's pixels."""
    artist.set_animated(True)
    artist.set_in_layout(False)


class Scene:
    """An explorer's figure: its base drawn once, a key layer drawn once per :meth:`key`, moving artists moved.

    A subclass says what is drawn once (:meth:`build`: the axes with fixed limits, and the moving artists,
    marked with ``live.animate``), what decides the key layer (:meth:`key`: the accelerator, the precisions,
    ...), what that layer holds (:meth:`layer`: the roofs, a title with GB figures, a scale) and how a
    change moves the artists (:meth:`move`, which also sets anything the key changes that is not drawn, such
    as an axis' limits: a key whose pixels are kept does not run :meth:`layer`). ``figure`` is passed to
    :class:`LiveFigure` (``figsize``, ``layout``).
    """

    def __init__(self, state: dict, **figure):
        self.state = state
        self.live = LiveFigure(self._draw, **figure)

    def key(self, state: dict):
        raise NotImplementedError

    def build(self, live: LiveFigure) -> None:
        raise NotImplementedError

    def layer(self, state: dict) -> None:
        raise NotImplementedError

    def move(self, state: dict) -> None:
        raise NotImplementedError

    def _draw(self, live: LiveFigure) -> None:
        self.build(live)
        self._show(live, self.state)

    def _show(self, live: LiveFigure, state: dict) -> None:
        live.layer(self.key(state), lambda: self.layer(state))
        self.move(state)

    def update(self, state: dict) -> None:
        """Show ``state``: its key's layer (kept, or drawn), and the moving artists moved."""
        self.state = state
        self._show(self.live, state)


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
