"""The package's optional extras agree with the versions the adapters are tested against.

Each ``requirements-NAME.txt`` pins what ``scripts/integrations-check.sh`` installs for an
adapter; the extra of the same name (``_`` spelt ``-``) in ``pyproject.toml`` is what
``pip install 'cutctx-rs[NAME]'`` installs. Every pinned version must lie in its extra's
range, and every extra must name each framework its requirement file pins.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
PYPROJECT = HERE.parent.parent / "pyproject.toml"


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"{path.name}: {line!r} is not an exact pin"
            pins[re.sub(r"\[.*\]", "", name).strip().lower()] = version.strip()
    return pins


def _satisfies(version: str, spec: str) -> bool:
    for clause in spec.split(","):
        found = re.fullmatch(r"\s*(>=|<|==)\s*([0-9.]+)\s*", clause)
        assert found, clause
        op, bound = found.groups()
        v, b = _version(version), _version(bound)
        if not {">=": v >= b, "<": v < b, "==": v == b}[op]:
            return False
    return True


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib is 3.11's")
def test_every_pinned_framework_is_in_its_extras_range() -> None:
    import tomllib

    extras = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    files = sorted(HERE.glob("requirements-*.txt"))
    assert files, "the adapters' requirement files"
    for path in files:
        name = path.stem.removeprefix("requirements-")
        pins = _pins(path)
        extra = extras.get(name.replace("_", "-"))
        if extra is None:
            # An adapter tested through several SDKs (wrap) has an extra per SDK.
            missing = [f for f in pins if f not in extras]
            assert not missing, f"no extra for {missing} ({path.name})"
            extra = [r for f in pins for r in extras[f]]
        ranges = {}
        for requirement in extra:
            found = re.fullmatch(r"([A-Za-z0-9_.\-]+)(\[.*\])?\s*(.*)", requirement)
            assert found, requirement
            ranges[found.group(1).lower()] = found.group(3)
        for framework, version in pins.items():
            assert framework in ranges, f"extra {name!r} lacks {framework} pinned by {path.name}"
            assert _satisfies(version, ranges[framework]), (
                f"{framework}=={version} ({path.name}) is outside {ranges[framework]!r}"
            )
