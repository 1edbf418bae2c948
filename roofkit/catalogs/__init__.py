"""The catalogs: sourced data, looked up by name.

    hardware   accelerators: peaks per precision, bandwidth, memory, each number sourced   (data/hardware.toml)
    models     model shapes: layers, widths, heads, experts                              (data/models.toml)
    links      interconnects, per direction                                               (data/links.toml)
    measured   whole layers timed on a GPU, the data layertime is calibrated on          (data/measured/)
    lookup     how every catalog finds an entry by any spelling and refuses a name twice

Above the foundations (errors, units, quantities, dtypes, formulas) and below everything
else: a catalog holds data and the arithmetic that reads it, never a model of
time (docs/architecture.md).
"""
