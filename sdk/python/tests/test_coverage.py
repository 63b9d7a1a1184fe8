"""Every scenario of sdk/scenarios.json is named by a test (sync and async), and every
problem code of docs/protocol.md has an error class."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import List, Set

from conftest import PROTOCOL_DOC, SCENARIOS_FILE

import idemkey

TESTS_DIR = Path(__file__).resolve().parent
# Scenarios about no client in particular: one test is enough.
CLIENT_AGNOSTIC = {"key_helper_uuidv7"}


def _test_names() -> List[str]:
    names: List[str] = []
    for f in sorted(TESTS_DIR.glob("test_*.py")):
        if f.name == "test_coverage.py":
            continue
        names += re.findall(r"^(?:async )?def (test_\w+)\(", f.read_text(), flags=re.M)
    return names


def _scenario_ids() -> List[str]:
    ids = [s["id"] for s in json.loads(SCENARIOS_FILE.read_text())["scenarios"]]
    assert ids, "no scenarios"
    return ids


def _named(scenario: str, names: List[str], variant: str = "") -> bool:
    # A test names a scenario as test_<id>, or test_<id>__<more>; __async marks the async client's.
    for n in names:
        if n == f"test_{scenario}" or n.startswith(f"test_{scenario}__"):
            if not variant or variant in n.split("__")[1:]:
                return True
    return False


def test_every_scenario_is_named_by_a_test() -> None:
    names = _test_names()
    missing = [i for i in _scenario_ids() if not _named(i, names)]
    assert missing == [], f"scenarios with no test named after them: {', '.join(missing)}"


def test_every_scenario_is_tested_on_the_async_client_too() -> None:
    names = _test_names()
    missing = [i for i in _scenario_ids() if i not in CLIENT_AGNOSTIC and not _named(i, names, "async")]
    assert missing == [], f"scenarios with no __async test: {', '.join(missing)}"


def test_coverage_check_fails_for_a_missing_id() -> None:
    assert not _named("no_such_scenario", _test_names())
    assert not _named("claimed_runs", ["test_claimed_runs_effect_once"])


def _protocol_codes() -> Set[str]:
    text = PROTOCOL_DOC.read_text()
    section = text.split("\n## Errors\n", 1)[1].split("\n## ", 1)[0]
    codes = set(re.findall(r"^\| `([a-z_]+)` \| \d{3}", section, flags=re.M))
    assert len(codes) > 20, codes
    return codes


def test_every_problem_code_has_an_error_class() -> None:
    codes = _protocol_codes()
    assert sorted(codes - set(idemkey.ERROR_CLASSES)) == []
    for code in codes:
        cls = idemkey.ERROR_CLASSES[code]
        assert issubclass(cls, idemkey.IdemkeyError)
        err = idemkey.error_from_problem(400, {"code": code, "title": "t", "request_id": "r1"})
        assert type(err) is cls and err.code == code and err.request_id == "r1"
        assert getattr(idemkey, cls.__name__) is cls
    # one class per code
    assert len(set(idemkey.ERROR_CLASSES.values())) == len(idemkey.ERROR_CLASSES)
    unknown = idemkey.error_from_problem(418, {"code": "teapot"})
    assert isinstance(unknown, idemkey.UnexpectedResponseError) and unknown.code == "teapot"
