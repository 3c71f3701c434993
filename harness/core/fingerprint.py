"""Content keys: a hash of everything a stage's record depends on, so that a re-run recomputes exactly
what changed and serves nothing stale.

A record's identity (model name, generator, variant, target, ...) says which
cell of a table it fills; its ``fingerprint`` says what it was computed from:
the model files' bytes, the generator (its version and the digest of its
source, or the bytes of prebuilt C), the target profile with the compiler's
version and flags and the runners' driver code, the tool versions, and the
stage's settings (inputs, seeds, tolerances, ...). A stored record is reused
only when both match; otherwise the item runs again and its record replaces
the old one.

A key holds content only, never where it lies: the same sources, tools and
settings give the same key in any folder and on any host (the shards of a
campaign computed on other machines are merged only when their keys equal the
controller's, docs/sharding.md). So a file counts by its bytes, not its path,
and the platform by its architecture and C library, not the running kernel.
When two keys differ, ``differences`` names each component that does.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import platform
from pathlib import Path

from harness import generators, targets
from harness.core.configuration import Difference
from harness.core.plan import Item, Settings
from harness.core.provenance import tool_versions
from harness.digests import digest, tree_digest
from harness.models.model import Model, file_sha256

RUNNERS_DIR = Path(__file__).resolve().parents[1] / "runners"
_SHOWN_CHARS = 80  # a differing value longer than this (a digest, a whole list) is cut in a difference line


# key -> its components, for every key this process computed: what a host stores with its shards (plain data:
# a key travels between processes as a plain str) so that a host whose key differs names the component that does
_COMPONENTS: dict[str, dict] = {}


def content_key(components: dict) -> str:
    """The digest of ``components``, remembered with them (``components_of``)."""
    key = digest(components)
    _COMPONENTS[key] = components
    return key


def components_of(key: str) -> dict | None:
    """The components of ``key`` when this process computed it, else None."""
    return _COMPONENTS.get(key)


def target_identity(target: str, opt: str) -> dict:
    """The profile of ``target`` as content keys count it (``profile_identity``)."""
    return profile_identity(targets.get(target), opt)


def profile_identity(profile: targets.TargetProfile, opt: str) -> dict:
    """The profile (with what it extends) by content, the compiler's version, the flags and the runners' code.

    The profile's own file counts by the keys read from it (``path`` is where it lies, left out); a file it
    names (the linker script) counts by its bytes, and so does the reset code a multi-core profile is linked
    with (``<name>-start.S`` beside it, harness.runners.qemu_smp), which it names by convention only."""
    fields = {name: _content(value) for name, value in dataclasses.asdict(profile).items() if name != "path"}
    startup = targets.beside(profile.path, f"{profile.name}-start.S")
    if startup is not None:
        fields["startup"] = _content(startup)
    return {"profile": fields, "flags": profile.flags(opt),
            "compiler": profile.compiler_version(), "runners": tree_digest(RUNNERS_DIR)}


def _content(value: object) -> object:
    """A file by the SHA-256 of its bytes ("missing" when it is not there); any other value as it is."""
    if isinstance(value, Path):
        return file_sha256(value) if value.is_file() else "missing"
    return value


@functools.cache
def key_tools() -> dict[str, str]:
    """``tool_versions`` as a key counts them: the platform is the OS, the architecture and the C library (the
    generated code links its libm), not ``platform.platform()``'s kernel release, which changes at each kernel
    update and differs between otherwise identical hosts without changing a result."""
    return {**tool_versions(),
            "platform": " ".join(filter(None, (platform.system(), platform.machine(), *platform.libc_ver())))}


def item_fingerprint(item: Item, model: Model, settings: Settings, **stage: object) -> str:
    """The content key of ``item``'s records; ``stage`` adds what only this stage depends on."""
    return content_key({"model": model.sha256(), "model_seed": settings.model_seed,
                        "generator": generators.get(item.generator).identity(model, item.variant),
                        "target": target_identity(item.target, settings.opt),
                        "inputs": {"n": settings.n_inputs, "seed": settings.seed, "domain": model.input_domain,
                                   **({"file": file_sha256(settings.inputs_from)} if settings.inputs_from else {})},
                        "tools": key_tools(), "stage": stage})


def differences(here: dict, there: dict, host: str) -> list[Difference]:
    """One ``Difference`` (as ``assay doctor`` prints them) per component of two keys' components that differs,
    named by its path (``target.compiler``, ``tools.numpy``): what ``host`` has, what this host has."""
    ours, theirs = _leaves(_plain(here)), _leaves(_plain(there))
    return [Difference(name, f"{_shown(ours.get(name, '(none)'))} here",
                       f"{_shown(theirs.get(name, '(none)'))} on {host}")
            for name in sorted({*ours, *theirs}) if ours.get(name) != theirs.get(name)]


def _leaves(components: object, prefix: str = "") -> dict[str, object]:
    """Nested components as dotted path -> value (lists and scalars are leaves)."""
    if not isinstance(components, dict):
        return {prefix: components}
    found: dict[str, object] = {}
    for name, value in components.items():
        found.update(_leaves(value, f"{prefix}.{name}" if prefix else str(name)))
    return found


def _plain(components: dict) -> dict:
    """The components as read back from JSON (a tuple becomes a list): those a host sent compare equal to
    those computed here."""
    return json.loads(json.dumps(components, default=str))


def _shown(value: object) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS - 3] + "..."
