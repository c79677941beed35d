"""adlnmt: NMT architectures as sentences of an Architecture Definition Language.

``from adlnmt import Translator, SearchOptions, Constraints`` gives the translation API (imported lazily, so ``import
adlnmt`` stays cheap).
"""

from typing import Any

from adlnmt.version import __version__

__all__ = ["Constraints", "SearchOptions", "Translator", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "Translator":
        from adlnmt.inference.translator import Translator

        return Translator
    if name == "SearchOptions":
        from adlnmt.inference.options import SearchOptions

        return SearchOptions
    if name == "Constraints":
        from adlnmt.inference.constraints import Constraints

        return Constraints
    raise AttributeError(f"module 'adlnmt' has no attribute {name!r}")
