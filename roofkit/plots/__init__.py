"""The course's figures, one module per topic, in one style (:mod:`roofkit.plots.style`).

Every number on a figure comes from the models below (:mod:`roofkit.perf`, the
catalogs, the formulas); a module here draws and tabulates, and imports
matplotlib only inside the functions that draw, so that importing it stays
cheap (docs/architecture.md).
"""
