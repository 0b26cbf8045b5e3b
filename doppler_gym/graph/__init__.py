"""Dataflow graphs: the immutable type, op specs, validation, file formats and analysis."""
