"""The rules of a resource request's keys beyond those every submission reads (those, and
wall times, are ``resources.py``'s): start times (``begins``), counts, memory, flags and
generic resources (``values``)."""

#: Flux Standard Duration's units, in seconds (wall times and start times read them)
FSD_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
