"""Credentials files of salted hashes and token checks (fairshare.credentials)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fairshare.credentials import (
    Credentials,
    CredentialsError,
    entry_toml,
    hash_secret,
    split_token,
    verify_secret,
)


def test_a_hash_verifies_its_secret_only_and_is_salted() -> None:
    first, second = hash_secret("s3cret"), hash_secret("s3cret")
    assert first != second and "s3cret" not in first
    assert verify_secret("s3cret", first) and not verify_secret("s3cret!", first)


def test_tokens_are_checked_and_remembered(tmp_path: Path) -> None:
    path = tmp_path / "credentials.toml"
    path.write_text(entry_toml("batch", hash_secret("good")))
    credentials = Credentials.load(path)
    assert credentials.cached("batch:good") is None
    assert credentials.check("batch:good") == "batch"
    assert credentials.cached("batch:good") == "batch"
    assert credentials.check("batch:bad") is None and credentials.cached("batch:bad") is False
    assert credentials.check("mallory:good") is None
    assert split_token("no-colon") is None and split_token(":x") is None


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('{"credentials": [{"principal": "a"}]}', "exactly principal and secret_hash"),
        ('{"credentials": [{"principal": "a b", "secret_hash": "x"}]}', "must be 1-128"),
        ('{"credentials": [{"principal": "a", "secret_hash": "md5$x"}]}', "scrypt"),
        ('{"other": []}', "expected a list 'credentials'"),
        ("{", "not valid"),
    ],
)
def test_bad_files_name_the_file_and_entry(tmp_path: Path, text: str, named: str) -> None:
    path = tmp_path / "credentials.json"
    path.write_text(text)
    with pytest.raises(CredentialsError, match=named):
        Credentials.load(path)


def test_a_principal_given_twice_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "credentials.json"
    entry = {"principal": "a", "secret_hash": hash_secret("x")}
    path.write_text(json.dumps({"credentials": [entry, entry]}))
    with pytest.raises(CredentialsError, match="given twice"):
        Credentials.load(path)


def test_an_unknown_principal_costs_the_same_hash_as_a_wrong_secret(tmp_path: Path) -> None:
    """Issue 23, item 6: refusals took 54 ms for a known principal and 1 ms for an unknown one,
    which told an attacker who exists. Both now run one scrypt of the same parameters."""
    credentials = Credentials({"batch": hash_secret("good")})
    assert credentials.check("batch:wrong") is None
    assert credentials.kdf_runs == 1
    assert credentials.check("nobody-here:wrong") is None
    assert credentials.kdf_runs == 2
    assert credentials.check("batch:good") == "batch" and credentials.kdf_runs == 3
    assert credentials.cached("nobody-here:wrong") is False  # seen before: no hash at all
    assert credentials.kdf_runs == 3
