"""Which tests are GPU tests, and which functions they reach."""

from __future__ import annotations

import re
import weakref

from app.checks import gpu_code
from app.checks.workspace import IndexedFunction, Workspace

_CPU_TEST_NAME = re.compile(r"(?:^|_)(?:cpu|host)(?:_|$)", re.I)
_REACH: weakref.WeakKeyDictionary[Workspace, set[int]] = weakref.WeakKeyDictionary()


def is_gpu_test(item: IndexedFunction) -> bool:
    """A ``#[test]`` that is about the GPU: by name, file, module, feature gate, or
    because it builds a GPU device."""
    fn = item.fn
    if not gpu_code.is_test(fn):
        return False
    builds_device = any(s.kind == "gpu_device" for s in fn.signals)
    if _CPU_TEST_NAME.search(fn.name) and not (builds_device or gpu_code.GPU_NAME.search(fn.name)):
        return False  # `training_cpu` in a GPU test file: the CPU twin of a GPU test
    return bool(
        builds_device
        or gpu_code.GPU_NAME.search(fn.name)
        or gpu_code.GPU_PATH.search(item.path)
        or any(gpu_code.GPU_NAME.search(m) for m in fn.modules)
        or gpu_code.has_gpu_cfg(fn.attrs + fn.outer_attrs)
    )


def gpu_test_reach(ws: Workspace) -> set[int]:
    """``id()`` of every function some enabled GPU test reaches through calls."""
    reach = _REACH.get(ws)
    if reach is None:
        # Imported here: the rule itself asks is_gpu_test.
        from app.checks.rules.disabled_gpu_test import check as disabled

        # A disabled test (ignored, or returning early without a GPU) reaches nothing on the GPU.
        roots = [f for f in ws.functions if is_gpu_test(f) and not any(disabled(ws, f))]
        reach = {id(ws.functions[i]) for i in ws.reached_from(roots)}
        _REACH[ws] = reach
    return reach
