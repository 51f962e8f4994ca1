"""Scripted false and honest ``complete`` claims for the completion audit (SPEC §9)."""
