"""How every process reaches etcd (``fairshare.etcd_security``, ``ETCD_SECURITY_SETTINGS``;
issue 23, finding 2): the settings fit together or are refused naming the flag, the password
comes from a file or the environment only, and never shows."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from fairshare.etcd_security import PLAIN_ETCD, EtcdSecurity
from fairshare.settings import (
    CLIENT_SETTINGS,
    SettingsError,
    add_setting_flags,
    client_security,
    etcd_security,
    resolve_settings,
)


def files(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name in ("ca.pem", "cert.pem", "cert.key", "password"):
        out[name] = tmp_path / name
        out[name].write_text("x\n")
    out["password"].write_text("s3cret\nignored\n")
    return out


def parse(argv: list[str], environ: dict[str, str]) -> dict[str, object]:
    parser = argparse.ArgumentParser()
    add_setting_flags(parser, CLIENT_SETTINGS)
    return resolve_settings("status", CLIENT_SETTINGS, parser.parse_args(argv), environ)


def test_no_settings_is_plain_etcd() -> None:
    assert etcd_security({}) == PLAIN_ETCD
    assert not PLAIN_ETCD.tls


def test_a_password_from_its_file_or_the_variable_never_a_flag(tmp_path: Path) -> None:
    f = files(tmp_path)
    common = ["--etcd-tls-ca", str(f["ca.pem"]), "--etcd-user", "reader"]
    values = parse([*common, "--etcd-password-file", str(f["password"])], {})
    security = etcd_security(values)
    assert security.password == "s3cret" and security.user == "reader" and security.tls
    from_env = etcd_security(parse(common, {"FAIRSHARE_ETCD_PASSWORD": "from-env"}))
    assert from_env.password == "from-env"
    assert "s3cret" not in repr(security) and "s3cret" not in security.describe()
    # no password flag (argparse reads --etcd-password as --etcd-password-file: a path)
    with pytest.raises(SettingsError, match="is not a file"):
        parse([*common, "--etcd-password", "on-the-command-line"], {})
    assert client_security(values).etcd == security  # the commands carry it to MasterFinder


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"etcd_tls_cert": "cert.pem"}, "needs its key"),
        ({"etcd_tls_cert": "cert.pem", "etcd_tls_key": "cert.key"}, "--etcd-tls-ca"),
        ({"etcd_tls_ca": "ca.pem", "etcd_user": "u"}, "FAIRSHARE_ETCD_PASSWORD"),
        ({"etcd_user": "u", "etcd_password": "p"}, "never sent in plaintext"),
    ],
)
def test_settings_that_do_not_fit_are_refused_naming_the_flag(
    tmp_path: Path, values: dict[str, str], named: str
) -> None:
    f = files(tmp_path)
    resolved = {k: f.get(v, v) for k, v in values.items()}
    with pytest.raises(SettingsError, match="--etcd-") as raised:
        etcd_security(resolved)
    assert named in str(raised.value)


def test_an_empty_password_file_is_refused(tmp_path: Path) -> None:
    f = files(tmp_path)
    f["password"].write_text("\n")
    with pytest.raises(SettingsError, match=r"--etcd-password-file: .* is empty"):
        etcd_security(
            {"etcd_tls_ca": f["ca.pem"], "etcd_user": "u", "etcd_password_file": f["password"]}
        )


def test_describe_names_what_is_used() -> None:
    security = EtcdSecurity(Path("ca"), Path("c"), Path("k"), "m", "p")
    assert security.describe() == "tls=on cert=on user=m"
