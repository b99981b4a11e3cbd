"""Declarations: reading YAML with locations, schema checks and the typed model."""
