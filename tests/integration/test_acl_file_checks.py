"""A master refuses an ACL file with a typo before serving (issue 24, item 7): it exits 2
naming the file, the rule and the key; a principal no token can carry is refused the same way
when no certificate names callers; one absent from the credentials file is logged as a
warning."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from daemons import ROOT, daemon_env, wait_for
from fairshare.credentials import entry_toml, hash_secret, new_secret
from secure import Pki, start_secure_master


def run_master(work_dir: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """A master expected to refuse its settings: run to its exit (bounded)."""
    argv = ["master", "--port", "0", "--metrics-port", "0", "--work-dir", str(work_dir)]
    return subprocess.run(
        [sys.executable, "-m", "fairshare.cli", *argv, *flags],
        cwd=ROOT,
        env=daemon_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def credentials_file(tmp_path: Path, *principals: str) -> Path:
    path = tmp_path / "credentials.toml"
    path.write_text("\n".join(entry_toml(p, hash_secret(new_secret())) for p in principals))
    return path


def test_a_misspelled_keyword_stops_the_master_naming_the_key(tmp_path: Path) -> None:
    acls = tmp_path / "acls.toml"
    acls.write_text('[[kill_tasks]]\nprincipals = ["ops"]\nframework_principals = "OWN"\n')
    ended = run_master(tmp_path / "m", "--acls", str(acls))
    assert ended.returncode == 2, ended.stderr
    assert f"--acls: ACL file {acls}, kill_tasks rule 1: framework_principals: 'OWN'" in (
        ended.stderr
    )


def test_a_principal_no_token_can_carry_stops_the_master(tmp_path: Path) -> None:
    acls = tmp_path / "acls.toml"
    acls.write_text('[[maintain_agents]]\nprincipals = ["ops team"]\n')
    credentials = credentials_file(tmp_path, "ops")
    tls = Pki(tmp_path / "pki").flags("master")[2:]  # TLS for the tokens, no --tls-ca
    flags = ("--acls", str(acls), "--credentials", str(credentials), *tls)
    ended = run_master(tmp_path / "m", *flags)
    assert ended.returncode == 2, ended.stderr
    assert "maintain_agents rule 1: principals: 'ops team' is not a principal name" in ended.stderr


def test_a_principal_missing_from_the_credentials_is_a_warning(tmp_path: Path) -> None:
    acls = tmp_path / "acls.toml"
    acls.write_text('[[maintain_agents]]\nprincipals = ["opps"]\n')
    credentials = credentials_file(tmp_path, "ops")
    flags = ("--acls", str(acls), "--credentials", str(credentials))
    master = start_secure_master(tmp_path / "m", Pki(tmp_path / "pki"), *flags, mutual=False)
    try:
        wait_for(lambda: "acl.warning" in master.log(), 30, "the acl.warning line")
        assert "principal 'opps' is not in the --credentials file (did you mean 'ops'?)" in (
            master.log()
        )
    finally:
        master.kill()
