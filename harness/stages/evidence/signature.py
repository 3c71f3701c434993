"""Ed25519 signatures of an evidence package: ``assay evidence --sign-key KEY.pem`` signs ``evidence.json``'s bytes
(which list every other file's SHA-256, so one signature binds the whole package) into ``DIR.sig`` beside
``DIR/`` and ``DIR.zip``; ``assay evidence verify DIR --public-key PUB.pem`` checks it.

The package digest (``DIR.sha256``) binds the package only when the user kept it apart; whoever rewrites the package
can rewrite the digest file beside it. A signature cannot be rewritten without the private key: a package changed
after signing, or a signature of an older package put beside a new one, does not verify with the signer's public
key. The keys are PEM files as OpenSSL writes them (``openssl genpkey -algorithm ed25519 -out key.pem``, ``openssl
pkey -in key.pem -pubout -out pub.pem``); the cryptography is the ``cryptography`` package's, never our own.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from harness.errors import AssayError

SCHEMA = "assay-evidence-signature/1"
SUFFIX = ".sig"


def signature_file(location: Path) -> Path:
    """``DIR.sig`` of the package ``DIR/`` or ``DIR.zip``."""
    location = Path(location)
    return location.with_name((location.stem if location.suffix == ".zip" else location.name) + SUFFIX)


def _pem(path: Path, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise AssayError(f"{path}: cannot read the {what} ({exc.strerror})") from None


def private_key(path: Path) -> Ed25519PrivateKey:
    """The Ed25519 private key of a PEM file (PKCS #8, not encrypted); an AssayError naming the file otherwise."""
    try:
        key = serialization.load_pem_private_key(_pem(path, "private key"), password=None)
    except (ValueError, TypeError) as exc:
        raise AssayError(f"{path}: not an unencrypted PEM private key ({exc})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise AssayError(f"{path}: a {type(key).__name__.removeprefix('_')} key, not an Ed25519 one")
    return key


def public_key(path: Path) -> Ed25519PublicKey:
    """The Ed25519 public key of a PEM file (SubjectPublicKeyInfo); an AssayError naming the file otherwise."""
    try:
        key = serialization.load_pem_public_key(_pem(path, "public key"))
    except ValueError as exc:
        raise AssayError(f"{path}: not a PEM public key ({exc})") from None
    if not isinstance(key, Ed25519PublicKey):
        raise AssayError(f"{path}: a {type(key).__name__.removeprefix('_')} key, not an Ed25519 one")
    return key


def fingerprint(key: Ed25519PublicKey) -> str:
    """The SHA-256 of the raw public key: names the signer's key in ``DIR.sig`` and in ``verify``'s line."""
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def sign(root: Path, index: bytes, key_file: Path) -> Path:
    """Sign ``index`` (``evidence.json``'s bytes) of the package ``root`` with the key of ``key_file``; write
    ``DIR.sig`` (canonical JSON: the signed file, its digest, the key's fingerprint, the signature) and return it."""
    key = private_key(key_file)
    document = {"schema": SCHEMA, "algorithm": "Ed25519", "signed": f"{root.name}/evidence.json",
                "digest": hashlib.sha256(index).hexdigest(), "public_key_sha256": fingerprint(key.public_key()),
                "signature": key.sign(index).hex()}
    target = signature_file(root)
    target.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    return target


def check(location: Path, index: bytes, key_file: Path) -> tuple[list[str], str]:
    """(findings, the line saying what was checked) for the signature ``DIR.sig`` beside the package at ``location``
    over ``index`` (its ``evidence.json``'s bytes), with the public key of ``key_file``."""
    key = public_key(key_file)
    beside = signature_file(location)
    if not beside.is_file():
        return [f"{beside.name}: missing: the package is not signed (--public-key {key_file} given)"], \
            "signature NOT checked: no signature file"
    try:
        document = json.loads(beside.read_text())
        signature = bytes.fromhex(document["signature"])
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError):
        return [f"{beside.name}: not an {SCHEMA} signature file"], "signature NOT checked: unreadable"
    try:
        key.verify(signature, index)
    except InvalidSignature:
        return [f"{beside.name}: the signature does not verify with {Path(key_file).name} over evidence.json: the "
                f"package was changed after signing, or signed with another key"], \
            f"signature DOES NOT VERIFY with key {fingerprint(key)[:16]}"
    return [], f"signature verified: Ed25519, key {fingerprint(key)[:16]} ({Path(key_file).name})"
