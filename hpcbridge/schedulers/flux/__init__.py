"""Flux: jobspec and command builders, version policies, URI resolution, drivers, adapter."""
