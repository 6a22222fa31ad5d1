from __future__ import annotations

import re
from collections.abc import Iterator

from app.checks.gpu_tests import is_gpu_test
from app.checks.model import Branch, Function, Macro, Severity
from app.checks.patterns import has_return
from app.checks.rules.base import Hit, Rule, function_name
from app.checks.workspace import IndexedFunction, Workspace

_SKIP_CONDITION = re.compile(
    r"env::var|is_err\(\)|is_none\(\)|available|device_count|cuda|gpu|runtime|backend|client"
    r"|Device::|::new\(\s*0?\s*\)|!.*is_ok\(\)",
    re.I,
)
_ASSERT = re.compile(r"assert")
# A probe for the device (`tch::Cuda::is_available()`, `Cuda::device_count() > 0`): a
# block under it runs only on a machine that has one.
_DEVICE_PROBE = re.compile(
    r"^(?!\s*!).*(?:\bis_available\b|\bdevice_count\b|\bhas_(?:cuda|gpu|metal|mps|vulkan)\b)"
)
_FAILS = re.compile(r"assert|panic!|unreachable!|\.expect\(|\.unwrap\(")
_METHOD_ON_LOCAL = re.compile(r"\s*&?\s*[a-z_]\w*\s*\.\s*\w+")
_NAN = r"(?:\b(?:std::|core::)?f(?:32|64)::)?\bNAN\b"
_MESSAGE = r'(?:\s*,\s*".*)?'
# Checks that pass whatever the value: NaN is unequal to everything, itself included,
# so `assert_ne!(x, f32::NAN)` and `assert!(x != f32::NAN)` hold for every `x`.
_NEVER_FAILS = {
    "assert_ne": re.compile(rf"^\(\s*(?:[^,]+,\s*{_NAN}|{_NAN}\s*,[^,]+){_MESSAGE}\s*\)$"),
    "assert": re.compile(rf"^\(\s*[^,=!]+!=\s*{_NAN}{_MESSAGE}\s*\)$"),
}
# A helper that checks a result (`assert_close(..)`, `check_output(..)`); not `.expect(..)`.
_CHECKING_CALL = re.compile(r"^(?:assert|check|verify|expect|compare)_", re.I)


def check(ws: Workspace, item: IndexedFunction) -> Iterator[Hit]:
    """## What it does
    Flags a GPU test that cannot run or cannot fail on the GPU: `#[ignore]`,
    `#[cfg(not(test))]`, an early `return` when an environment variable or the
    device is missing (`Err(_) => return`, `let Ok(..) = .. else { return }`,
    `if .. .is_err() { return; }`), a test whose every GPU device is built inside
    `if Cuda::is_available() { .. }` with no failing `else`, an empty body, or a test
    whose only checks compare with NaN (`assert_ne!(x, f32::NAN)`), which hold for
    every value.

    ## Why is this bad?
    Spec Step 2 #9: such a test passes on a machine with no GPU, so a green run
    says nothing about the GPU path. A missing GPU must fail the test (or the job
    must not be scheduled there), not turn it into a silent pass.

    ## Example
    ```rust
    #[test]
    fn gpu_matmul_matches_cpu() {
        let Ok(dev) = CudaDevice::new(0) else {
            return;
        };
        let a = dev.htod_copy(vec![1.0f32; 4]).unwrap();
        assert_eq!(gpu_matmul(&a, &a, &dev).unwrap().len(), 4);
    }
    ```

    ## Use instead
    ```rust
    #[test]
    fn gpu_matmul_matches_cpu() {
        let dev = CudaDevice::new(0).expect("this test needs a CUDA device");
        let a = dev.htod_copy(vec![1.0f32; 4]).unwrap();
        assert_eq!(gpu_matmul(&a, &a, &dev).unwrap().len(), 4);
    }
    ```
    """
    fn = item.fn
    if not is_gpu_test(item, ws):
        return
    for attr in fn.attrs:
        if re.match(r"#\[\s*ignore\b", attr):
            yield Hit(
                fn.line,
                f"GPU test {function_name(item)} is switched off with `{attr}`: "
                f"it never runs on the GPU. Run it on a GPU runner instead.",
            )
            return
        if "cfg(not(test))" in attr.replace(" ", ""):
            yield Hit(fn.line, f"GPU test {function_name(item)} is compiled out by `{attr}`.")
            return
    if re.sub(rb"\s+", b"", fn.text) == b"{}":
        yield Hit(fn.fn_line, f"GPU test {function_name(item)} has an empty body: it cannot fail.")
        return
    never_fails = _checks_that_never_fail(item)
    if never_fails:
        yield Hit(
            fn.line_of(never_fails[0].offset),
            f"GPU test {function_name(item)} checks its result only with "
            f"`{never_fails[0].name}!{never_fails[0].args[:60]}`: NaN is unequal to every "
            f"value, so the check passes whatever the GPU computed. Compare with expected "
            f"values, or use `.is_nan()`.",
        )
        return
    for region in fn.regions:
        if (
            region.kind == "let-else"
            and _skips_on_setup(region.head)
            and has_return(item, region.start, region.end)
        ):
            yield Hit(fn.line_of(region.start), _early_exit(item, f"`{region.head[:70]}`"))
            return
    for arm in fn.arms:
        body = fn.text[arm.body_start : arm.end]
        if (
            arm.pattern.lstrip().startswith(("Err", "None"))
            and re.search(rb"\breturn\b", body)
            and not _ASSERT.search(body.decode("utf-8", "replace"))
        ):
            yield Hit(
                fn.line_of(arm.start),
                _early_exit(item, f"`{arm.pattern.strip()} => return` on `{arm.scrutinee[:50]}`"),
            )
            return
    for branch in fn.branches:
        then = fn.text[branch.then_start : branch.then_end].decode("utf-8", "replace")
        if (
            _SKIP_CONDITION.search(branch.condition)
            and re.search(r"\breturn\b", then)
            and not _ASSERT.search(then)
            and "panic" not in then
        ):
            yield Hit(
                fn.line_of(branch.start),
                _early_exit(item, f"`if {branch.condition.strip()[:60]} {{ return }}`"),
            )
            return
    probed = _only_where_probed(item)
    if probed:
        yield Hit(
            fn.line_of(probed.start),
            f"GPU test {function_name(item)} builds its GPU devices only inside "
            f"`if {probed.condition.strip()[:60]} {{ .. }}`, so on a machine with no GPU it "
            f"skips them and passes. Fail instead when the device is missing "
            f'(`assert!(..., "this test needs a CUDA device")`), and run it on a GPU runner.',
        )


def _checks_that_never_fail(item: IndexedFunction) -> list[Macro]:
    """The test's assertions, when every one compares with NaN by `!=` (and it hands
    its result to no checking helper): checks that hold for any value."""
    fn = item.fn
    asserts = [m for m in fn.macros if m.name.startswith(("assert", "debug_assert"))]
    if not asserts or any(_CHECKING_CALL.match(c.name) for c in fn.calls):
        return []
    never = [
        m
        for m in asserts
        if (shape := _NEVER_FAILS.get(m.name.removeprefix("debug_")))
        and shape.match(" ".join(m.args.split()))
    ]
    return never if len(never) == len(asserts) else []


def _only_where_probed(item: IndexedFunction) -> Branch | None:
    """The device probe (`if tch::Cuda::is_available() { .. }`) inside which the test
    builds every GPU device it builds, when nothing fails without one (no failing
    `else`); None when some device is built outside such a block."""
    fn = item.fn
    probed = [b for b in fn.branches if _DEVICE_PROBE.search(b.condition) and not _else_fails(fn, b)]
    devices = [s.offset for s in fn.signals if s.kind == "gpu_device"]
    if not (probed and devices):
        return None
    covering = [next((b for b in probed if b.then_start <= at < b.then_end), None) for at in devices]
    return covering[0] if all(covering) else None


def _else_fails(fn: Function, branch: Branch) -> bool:
    """The probe's `else` fails the test (`else { panic!("needs a GPU") }`)."""
    return branch.else_start >= 0 and bool(
        _FAILS.search(fn.text[branch.else_start : branch.else_end].decode("utf-8", "replace"))
    )


def _skips_on_setup(let_statement: str) -> bool:
    """`let Some(dev) = cuda_device() else { return }` skips the test when the GPU (or
    its setup) is missing. A method on a value the test already holds
    (`device.residency_set()`) is an optional feature of a device it has."""
    value = let_statement.partition("=")[2]
    optional_feature = _METHOD_ON_LOCAL.match(value) and not _SKIP_CONDITION.search(value)
    return not optional_feature


def _early_exit(item: IndexedFunction, how: str) -> str:
    return (
        f"GPU test {function_name(item)} returns early with {how} when the GPU or its "
        f"configuration is missing, so it passes on a machine with no GPU. Fail instead "
        f'(`.expect("this test needs a CUDA device")`), and run it on a GPU runner.'
    )


RULE = Rule(
    id="disabled-gpu-test",
    severity=Severity.ERROR,
    spec="Step 2 #9",
    summary="GPU test that is ignored, compiled out, empty, or returns early without a GPU",
    check=check,
)
