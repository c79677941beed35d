"""The Architecture Definition Language: syntax tree, parser, printer, errors and layer registry.

The builder (:mod:`adlnmt.layers.builder`) turns a checked tree into layers.
"""

from adlnmt.adl.errors import ADLError
from adlnmt.adl.parser import parse, parse_assignments, substitute
from adlnmt.adl.syntax import to_text

__all__ = ["ADLError", "parse", "parse_assignments", "substitute", "to_text"]
