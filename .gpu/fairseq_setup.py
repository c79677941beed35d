"""Make fairseq's source (main, 3d262bb) run on Python >= 3.11 and build its one Cython module that translation needs.

    python .gpu/fairseq_setup.py SRC SITE   # SRC: the folder holding fairseq/; SITE: the one holding hydra/

Python 3.11 refuses dataclass fields whose default is a mutable (unhashable) instance, which fairseq's configs use
(``common: CommonConfig = CommonConfig()``; fairseq issue #5012), and so does hydra-core 1.0.7, which fairseq pins.
fairseq reads those defaults back (``Field.default``), so they stay; instead every bare ``@dataclass`` of both becomes
``@dataclass(unsafe_hash=True)``: the instances are hashable, which is all the check asks, and the defaults are shared
as on Python 3.10 (nothing hashes them, so nothing else changes).
fairseq's ``--bf16`` implies ``--tpu`` (``options.py``: ``if args.bf16: args.tpu = True``), so on a GPU it fails at
``xm.xla_device``; that implication is dropped, and ``--bf16`` on a GPU then runs fairseq's own bf16 path as its
trainer has it for CUDA (the model and batches in bf16, ``FP16Optimizer`` with fp32 master weights, no loss scaling).
Then ``fairseq/data/data_utils_fast.pyx`` (batching by tokens) is compiled in place with Cython and NumPy's headers.
"""

import re
import sys
from pathlib import Path

BARE_DATACLASS = re.compile(r"^(\s*)@dataclass$", re.MULTILINE)


def patch(package: Path) -> int:
    changed = 0
    for path in package.glob("**/*.py"):
        text = path.read_text()
        new, count = BARE_DATACLASS.subn(r"\1@dataclass(unsafe_hash=True)", text)
        if count:
            path.write_text(new)
            changed += count
    return changed


def build(source: Path) -> None:
    import numpy
    from Cython.Build import cythonize
    from setuptools import Extension, setup

    extension = Extension(
        "fairseq.data.data_utils_fast",
        [str(source / "fairseq/data/data_utils_fast.pyx")],
        include_dirs=[numpy.get_include()],
        language="c++",
        extra_compile_args=["-std=c++11", "-O2"],
    )
    setup(
        name="fairseq_fast",
        ext_modules=cythonize([extension], language_level=3, quiet=True),
        script_args=["build_ext", "--inplace", "--build-temp", "/tmp/fairseq-build"],
    )


if __name__ == "__main__":
    src, site = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    plugins = site / "hydra/core/plugins.py"  # Python 3.12 dropped FileFinder.find_module; find_spec's loader does
    old, new = "importer.find_module(modname)", "importer.find_spec(modname).loader"
    plugins.write_text(plugins.read_text().replace(old, new))
    print("dataclass defaults patched: fairseq", patch(src / "fairseq"), "hydra", patch(site / "hydra"))
    options = src / "fairseq/options.py"
    old, new = "    if args.bf16:\n        args.tpu = True\n", "    # bf16 on a GPU: no --tpu implied (.gpu/fairseq_setup.py)\n"
    if old not in options.read_text():
        sys.exit(f"{options}: the --bf16 implies --tpu lines are not there; another fairseq version?")
    options.write_text(options.read_text().replace(old, new))
    import os

    os.chdir(src)
    build(Path("."))
