"""Test-environment shim: lets the PyPI torchvision wheel import next to the CPU build of torch.

Loaded by Python at start-up when `tests/shims` is on PYTHONPATH (the tests and
benchmarks/corpus.py put it there; the tool and the scripts it writes never do).

The torchvision 0.28.0 wheel on PyPI is built against CUDA torch. Next to torch 2.13.0+cpu its
`_C` extension does not load, and `import torchvision` then fails in `_meta_registrations` with
"operator torchvision::nms does not exist". Defining the schemas of the two operators it
registers fake kernels for (`nms`, `qnms`) is enough for the pure-Python parts (datasets,
transforms, models) to import and run; calling `torchvision.ops.nms` still raises.

It costs nothing unless torchvision is imported: a meta-path finder waits for the first
`import torchvision`, and only then imports torch, tries to load torchvision's own `_C` the way
torchvision does, and defines the schemas only if that fails. It never finds a module itself.
"""

from __future__ import annotations

import os
import sys
from importlib.machinery import EXTENSION_SUFFIXES, PathFinder

_libraries: list[object] = []  # a torch Library deregisters its definitions when collected


def _define_torchvision_schemas() -> None:
    import torch

    spec = PathFinder.find_spec("torchvision")
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        for suffix in EXTENSION_SUFFIXES:
            extension = os.path.join(folder, "_C" + suffix)
            if os.path.exists(extension):
                try:
                    torch.ops.load_library(extension)
                    return  # a matching build: torchvision registers its own operators
                except OSError:
                    break
    library = torch.library.Library("torchvision", "DEF")
    library.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    library.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _libraries.append(library)


class _BeforeTorchvision:
    """Meta-path finder that runs the shim once, just before torchvision is first imported."""

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):  # type: ignore[no-untyped-def]
        if fullname == "torchvision":
            sys.meta_path.remove(cls)  # once, and never re-entered
            _define_torchvision_schemas()
        return None  # the ordinary finders import the module


sys.meta_path.insert(0, _BeforeTorchvision)
