"""``fairshare credential PRINCIPAL``: mint a principal's secret for the master's ``--credentials``.

It makes a random secret, writes the client's token ``PRINCIPAL:SECRET`` to ``--token-file``
(mode 0600; what ``--token-file`` of every client command reads) and puts the principal's salted
hash in ``--credentials`` (created if missing, TOML, or JSON when it ends in ``.json``). The
master reads the file when it starts: restart it (or start it) after adding a principal.

Invariants: the secret is never printed or logged, only written to the token file; an existing
token file, or a principal already in the credentials file, is left alone unless ``--force``;
the credentials file is rewritten atomically (tmp + rename, mode 0600), keeping every other
entry (comments are not kept); a bad principal name or an unusable file exits 2 naming it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Final

from fairshare.cli import command_settings
from fairshare.credentials import (
    PRINCIPAL_RE,
    Credentials,
    CredentialsError,
    entry_toml,
    hash_secret,
    new_secret,
)
from fairshare.settings import SHARED_SETTINGS, add_setting_flags

__all__ = ["CREDENTIAL_SETTINGS", "add_arguments", "main"]

CREDENTIAL_SETTINGS: Final = tuple(s for s in SHARED_SETTINGS if s.name != "master")
"""The log flags and ``--config`` (the command talks to no master)."""

EXIT_OK: Final = 0
EXIT_BAD_INPUT: Final = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``fairshare credential``."""
    parser.description = (
        "Mint a secret for PRINCIPAL: its token goes to --token-file (for the client), its salted"
        " hash to the master's --credentials file."
    )
    parser.add_argument("principal", metavar="PRINCIPAL", help="the principal's name")
    parser.add_argument(
        "--credentials", required=True, metavar="FILE", help="the master's credentials file"
    )
    parser.add_argument(
        "--token-file", required=True, metavar="FILE", help="where the client's token goes"
    )
    parser.add_argument(
        "--force", action="store_true", help="replace an existing token file or principal"
    )
    add_setting_flags(parser, CREDENTIAL_SETTINGS)


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically with mode 0600."""
    temporary = path.with_name(f".{path.name}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as sink:
        sink.write(text)
    os.replace(temporary, path)


def _render(entries: dict[str, str], json_file: bool) -> str:
    if json_file:
        items = [{"principal": p, "secret_hash": h} for p, h in entries.items()]
        return json.dumps({"credentials": items}, indent=2) + "\n"
    header = "# fairshare credentials: principals and salted hashes of their secrets\n\n"
    return header + "\n".join(entry_toml(p, h) for p, h in entries.items())


def main(args: argparse.Namespace) -> int:
    """Mint the secret, write the token and the hash; the exit code."""
    command_settings("credential", CREDENTIAL_SETTINGS, args)
    principal: str = args.principal
    credentials, token_file = Path(args.credentials), Path(args.token_file)
    if not PRINCIPAL_RE.match(principal):
        print(
            f"fairshare credential: PRINCIPAL {principal!r}: 1-128 of [A-Za-z0-9_.@-], starting"
            " with a letter or digit",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    entries: dict[str, str] = {}
    if credentials.exists():
        try:
            entries = Credentials.load(credentials).hashes()
        except CredentialsError as error:
            print(f"fairshare credential: --credentials: {error}", file=sys.stderr)
            return EXIT_BAD_INPUT
    if principal in entries and not args.force:
        print(
            f"fairshare credential: {principal!r} is already in {credentials} (--force replaces)",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    if token_file.exists() and not args.force:
        print(f"fairshare credential: --token-file {token_file} exists (--force replaces it)")
        return EXIT_BAD_INPUT
    secret = new_secret()
    entries[principal] = hash_secret(secret)
    try:
        _write_private(token_file, f"{principal}:{secret}\n")
        _write_private(credentials, _render(entries, credentials.suffix == ".json"))
    except OSError as error:
        print(f"fairshare credential: cannot write: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"principal {principal}: token in {token_file}, salted hash in {credentials}")
    return EXIT_OK
