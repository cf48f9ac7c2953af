# SPDX-License-Identifier: Apache-2.0
"""Builds the cffi extension from wsel_build.py (metadata: pyproject.toml)."""
from setuptools import setup

setup(cffi_modules=["wsel_build.py:ffibuilder"])
