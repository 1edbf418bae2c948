"""How a catalog finds an entry by name: the one lookup behind accelerators, models and links.

An entry (an :class:`~roofkit.hardware.Accelerator`, a :class:`~roofkit.models.Model`,
a :class:`~roofkit.links.Link`) has a ``key``, a ``name`` and ``aliases``; any of them
finds it, compared in :func:`normalize`'s form, so "H100 SXM", "h100-sxm" and
"h100_sxm" are one name. A name that belongs to two entries is refused; an
unknown name raises the catalog's own error, which suggests the closest names.

>>> normalize("H100 SXM") == normalize("h100-sxm") == "h100sxm"
True
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from ..errors import InvalidValue, UnknownName

__all__ = ["normalize", "Catalog", "check_table"]

T = TypeVar("T")


def normalize(name: str) -> str:
    """The form names are compared in: lower case, no spaces, dashes or underscores."""
    return re.sub(r"[\s_\-]+", "", name.lower())


class Catalog(Generic[T]):
    """Entries of one ``kind`` by key, read by ``load`` on first use.

    ``what`` names an entry in the error for a name given to two entries ("link");
    ``unknown`` is the :class:`~roofkit.errors.UnknownName` subclass raised for a
    name that is not there.
    """

    def __init__(self, kind: type[T], load: Callable[[], Iterable[T]], unknown: type[UnknownName], what: str):
        self.kind, self._read, self.unknown, self.what = kind, load, unknown, what
        self._entries: dict[str, T] | None = None
        self._index: dict[str, str] = {}

    def _loaded(self) -> dict[str, T]:
        if self._entries is None:
            entries: dict[str, T] = {}
            index: dict[str, str] = {}
            for entry in self._read():
                _claim(index, entry, self.what)
                entries[entry.key] = entry
            self._entries, self._index = entries, index
        return self._entries

    def add(self, entry: T, replace: bool = False) -> T:
        """Add ``entry``; a name it shares with another entry is refused unless ``replace``."""
        entries = self._loaded()
        if not replace:
            _claim(dict(self._index), entry, self.what, hint=" or pass replace=True")
        entries[entry.key] = entry
        for spelling in _spellings(entry):
            self._index[normalize(spelling)] = entry.key
        return entry

    def get(self, name: str | T) -> T:
        """The entry called ``name`` (its key, name or an alias); an entry is returned as it is."""
        if isinstance(name, self.kind):
            return name
        entries = self._loaded()
        if isinstance(name, str) and normalize(name) in self._index:
            return entries[self._index[normalize(name)]]
        spellings = {s: e.key for e in entries.values() for s in (e.name, *e.aliases)}
        raise self.unknown(name, entries, spellings)

    def entries(self) -> list[T]:
        """Every entry, in the order they were read or added."""
        return list(self._loaded().values())

    def keys(self) -> list[str]:
        return list(self._loaded())

    def snapshot(self) -> tuple[dict[str, T], dict[str, str]]:
        """The catalog as it is now, for :meth:`restore` (tests that register entries put it back)."""
        return dict(self._loaded()), dict(self._index)

    def restore(self, state: tuple[dict[str, T], dict[str, str]]) -> None:
        self._entries, self._index = dict(state[0]), dict(state[1])


def _spellings(entry) -> tuple[str, ...]:
    return (entry.key, entry.name, *entry.aliases)


def _claim(index: dict[str, str], entry, what: str, hint: str = "") -> None:
    """Enter ``entry``'s spellings in ``index``; InvalidValue if one already belongs to another entry."""
    for spelling in _spellings(entry):
        owner = index.setdefault(normalize(spelling), entry.key)
        if owner != entry.key:
            raise InvalidValue(f"the name {spelling!r} already belongs to the {what} {owner!r}; choose another "
                               f"name or alias for {entry.key!r}{hint}.")


def check_table(where: str, table: dict, known, required=()) -> None:
    """One catalog table, as read from TOML: only ``known`` fields, every ``required`` one, and a source."""
    unknown = set(table) - set(known)
    if unknown:
        raise InvalidValue(f"{where}: unknown field(s) {sorted(unknown)}; expected some of {sorted(known)}.")
    missing = [f for f in required if f not in table]
    if missing:
        raise InvalidValue(f"{where}: needs {', '.join(missing)}.")
    if "source" not in table:
        raise InvalidValue(f"{where}: needs a source (every figure must say where it comes from).")
