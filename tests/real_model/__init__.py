"""Tests against a real model served by llama.cpp (issue 14); see ``conftest.py``.

A package, so that its ``conftest.py`` is ``real_model.conftest`` and never shadows the shared
``tests/conftest.py`` that the other test modules import as ``conftest``.
"""
