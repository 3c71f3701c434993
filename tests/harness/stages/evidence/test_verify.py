"""``assay evidence verify`` against a certification reviewer's attacks on a real package (issue 24): each one,
applied to a copy of one small package built once per session, is found and named in one line; the untouched
package verifies."""

from __future__ import annotations

import json
import os
import posixpath
import shutil
import subprocess
import sys
import tracemalloc
import zipfile
from html.parser import HTMLParser
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from harness.core import configuration
from harness.core.locks import exclusive
from harness.errors import AssayError
from harness.stages.evidence import integrity, package, signature, verdicts

pytestmark = pytest.mark.skipif(shutil.which("gcovr") is None, reason="gcovr not installed (the package measures "
                                "coverage); run .ci/setup")

# Assay's own tests the package's tool qualification part runs: a quick selection (its matrix says incomplete)
TOR_TESTS = "tests/harness/stages/evidence/test_sci.py -m tor"


def assay(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, timeout=1200)


def write_key_pair(folder: Path, name: str) -> tuple[Path, Path]:
    """An Ed25519 key pair as PEM files (what openssl genpkey and openssl pkey -pubout write): (private, public)."""
    key = Ed25519PrivateKey.generate()
    private, public = folder / f"{name}.pem", folder / f"{name}.pub.pem"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    return private, public


@pytest.fixture(scope="session")
def built_package(tmp_path_factory) -> Path:
    """A real package, built once per session by ``assay evidence`` (pytest-xdist's workers share it, under a
    lock): acas-reg50 on the host, 20 inputs, the uniform input set, 2 mutants, a few of Assay's own tests, signed
    with the key ``signer.pem`` beside it (public key ``signer.pub.pem``)."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the session's folder, above the workers' own
    out = shared / "evidence-package" / "pkg"
    with exclusive(shared / "evidence-package.lock"):
        if not package.digest_file(out).is_file():
            out.parent.mkdir(parents=True, exist_ok=True)
            key, _public = write_key_pair(out.parent, "signer")
            done = assay("evidence", "--models", "acas-reg50", "--targets", "host", "--inputs", "20",
                         "--set-inputs", "5", "--input-sets", "uniform", "--mutants", "2", "--tor-tests", TOR_TESTS,
                         "--sign-key", str(key), "--out", str(out), "--work", str(out.parent / "work"))
            assert done.returncode in (0, 1) and package.digest_file(out).is_file(), done.stderr[-2000:]
    return out


@pytest.fixture
def pkg(built_package, tmp_path) -> Path:
    """A copy of the package (folder, zip, digest file and signature) to attack."""
    copy = tmp_path / "pkg"
    shutil.copytree(built_package, copy, symlinks=True)
    for suffix in (".zip", package.DIGEST_SUFFIX, signature.SUFFIX):
        shutil.copyfile(built_package.with_name("pkg" + suffix), copy.with_name("pkg" + suffix))
    return copy


def index_of(root: Path) -> dict:
    return json.loads((root / package.INDEX).read_text())


def rewrite_index(root: Path, edit) -> str:
    """What an attacker who knows the format does: edit evidence.json, write it back as the build does and rewrite
    the digest file beside it, so that only the check under test can see it. Returns the original digest (what the
    user recorded)."""
    recorded = package.sha256(root / package.INDEX)
    index = index_of(root)
    edit(index)
    package.write_json(root / package.INDEX, index)
    package.write_digest(root)
    return recorded


def relist(root: Path, path: str) -> None:
    """Rewrite ``path``'s size and SHA-256 in evidence.json (and the digest file) after changing it."""
    def edit(index):
        entry = next(e for e in index["files"] if e["path"] == path)
        entry.update(size=(root / path).stat().st_size, sha256=package.sha256(root / path))
    rewrite_index(root, edit)


def unlist(root: Path, prefix: str) -> None:
    rewrite_index(root, lambda index: index.update(files=[e for e in index["files"]
                                                          if not e["path"].startswith(prefix)]))


@pytest.mark.tor("TOR-EVD-001")
def test_the_untouched_package_its_zip_and_its_digest_verify(built_package, pkg):
    recorded = package.sha256(pkg / package.INDEX)
    assert package.digest_file(pkg).read_text() == f"{recorded}  pkg/evidence.json\n"  # sha256sum -c reads it
    for location in (pkg, pkg.with_name("pkg.zip")):
        result = integrity.verify(location, recorded)
        assert result.lines() == [] and result.intact and result.checked == len(index_of(pkg)["files"])
        assert result.digest.startswith(f"package digest checked: {recorded} against --digest and pkg.sha256")
    package.digest_file(pkg).unlink()
    assert integrity.verify(pkg).digest == "package digest not checked: no pkg.sha256 and no --digest"
    done = assay("evidence", "verify", str(pkg.with_name("pkg.zip")), "--digest", recorded)
    assert done.returncode == 0, done.stdout
    assert done.stdout.splitlines()[-4:] == [f"package digest checked: {recorded} against --digest",
                                             "signature not checked: no --public-key",
                                             integrity.built_by(json.loads((pkg / verdicts.SCI).read_text())["assay"],
                                                                configuration.identity()),
                                             f"{pkg.with_name('pkg.zip')}: intact ({result.checked} files checked); "
                                             f"the package's verdict: {index_of(pkg)['verdict']}"]
    assert "the same Assay as this one" in done.stdout  # the package was built by the Assay under test


@pytest.mark.tor("TOR-EVD-001")
def test_d1_a_weight_changed_and_relisted_differs_from_the_configuration_index(pkg):
    (params,) = pkg.glob("code/acas-reg50/assay-v2-keras/acas_reg50_params.c")
    text = params.read_text()
    start = text.index("{", text.index("=")) + 1  # the first weight of the first array
    params.write_text(text[:start] + " 1.5f," + text[start:].split(",", 1)[1])
    relist(pkg, params.relative_to(pkg).as_posix())
    assert integrity.verify(pkg).lines() == \
        ["code/acas-reg50/assay-v2-keras/acas_reg50_params.c: sha256 differs from sci/sci.json"]


@pytest.mark.tor("TOR-EVD-001")
def test_d2_a_null_hash_is_a_failure_not_a_skipped_check(pkg):
    table = pkg / "results" / "semantic" / "table1.md"
    table.write_text(table.read_text() + "| forged | row |\n")
    rewrite_index(pkg, lambda index: next(e for e in index["files"] if e["path"] == "results/semantic/table1.md")
                  .update(sha256=None, size=table.stat().st_size))
    assert integrity.verify(pkg).lines() == \
        ["results/semantic/table1.md: no sha256 in evidence.json (every file but volatile.json has one)"]


@pytest.mark.tor("TOR-EVD-001")
def test_d3_verdicts_of_evidence_json_are_recomputed_from_the_packaged_results(pkg):
    index = index_of(pkg)
    flip = {"pass": "fail", "fail": "pass", "incomplete": "pass"}
    rewrite_index(pkg, lambda i: i.update(verdict=flip[i["verdict"]], tool_qualification="pass",
                                          verdicts={**i["verdicts"], "semantic": flip[i["verdicts"]["semantic"]]}))
    assert integrity.verify(pkg).lines() == [
        f"verdicts.semantic: evidence.json says {flip[index['verdicts']['semantic']]}, the packaged files give "
        f"{index['verdicts']['semantic']}",
        f"tool_qualification: evidence.json says pass, tool-qualification/tor-matrix.json gives "
        f"{index['tool_qualification']}",
        f"verdict: evidence.json says {flip[index['verdict']]}, the packaged verdicts give {index['verdict']}"]


@pytest.mark.tor("TOR-EVD-001")
def test_d3_notes_are_bound_by_the_package_digest(pkg):
    recorded = rewrite_index(pkg, lambda index: index.update(notes=[]))
    digest = package.sha256(pkg / package.INDEX)
    assert integrity.verify(pkg).lines() == []  # the digest file beside was rewritten too: only the recorded one
    assert integrity.verify(pkg, recorded).lines() == \
        [f"evidence.json: package digest {digest} differs from --digest ({recorded})"]
    assert integrity.verify(pkg, recorded).digest.startswith("package digest DIFFERS")
    # the same content in other bytes: the digest is of the canonical bytes, which verify requires
    (pkg / package.INDEX).write_text(json.dumps(index_of(pkg), indent=2, sort_keys=True) + "\n")
    package.write_digest(pkg)
    assert integrity.verify(pkg).lines() == ["evidence.json: not in its canonical form (sorted keys, one-space "
                                             "indentation), so not as written by assay evidence"]


@pytest.mark.tor("TOR-EVD-001")
def test_d4_a_stage_removed_with_its_entries_is_missing(pkg):
    said = index_of(pkg)["verdicts"]["mutate"]
    shutil.rmtree(pkg / "results" / "mutate")
    unlist(pkg, "results/mutate/")
    assert integrity.verify(pkg).lines() == [
        f"results/mutate: stage missing from the package (its verdict part says {said})"]
    rewrite_index(pkg, lambda index: index["verdicts"].pop("mutate"))  # the sci's command still says it ran
    assert integrity.verify(pkg).lines() == [
        "results/mutate: stage missing from the package (sci/sci.json lists its command)"]


@pytest.mark.tor("TOR-EVD-001")
def test_d5_a_zip_entry_outside_the_package_folder_is_extra(pkg, tmp_path):
    tampered = tmp_path / "tampered.zip"
    shutil.copyfile(pkg.with_name("pkg.zip"), tampered)
    with zipfile.ZipFile(tampered, "a") as zf:
        zf.writestr("other/evil.c", "int evil;\n")
    assert integrity.verify(tampered).lines() == ["other/evil.c: outside the package's folder pkg/ in the zip"]


@pytest.mark.tor("TOR-EVD-001")
def test_d5_an_unlisted_file_a_symbolic_link_or_an_empty_folder_anywhere_in_the_folder(pkg):
    (pkg / "results" / "semantic" / "notes.txt").write_text("not listed")
    (pkg / "code" / "acas-reg50" / "link.c").symlink_to(pkg / "code" / "acas-reg50" / "assay-v2-keras" /
                                                       "acas_reg50_params.c")
    (pkg / "results" / "empty").mkdir()
    assert sorted(integrity.verify(pkg).lines()) == [
        "code/acas-reg50/link.c: a symbolic link (a package holds plain files and folders only)",
        "results/empty/: a folder with no listed file",
        "results/semantic/notes.txt: in the package, not listed in evidence.json"]


@pytest.mark.tor("TOR-EVD-001")
def test_d6_the_volatile_file_holds_only_dates_and_timings(pkg):
    volatile = json.loads((pkg / package.VOLATILE).read_text())
    volatile.update(verdict="pass", started_at=5)
    volatile["stages"]["semantic"][0]["verdict"] = "pass"
    (pkg / package.VOLATILE).write_text(json.dumps(volatile))
    assert integrity.verify(pkg).lines() == [
        "volatile.json: verdict: not a field the volatile file may hold (dates, timings)",
        "volatile.json: stages: " + json.dumps(volatile["stages"])[:60] + " is not what the field holds",
        "volatile.json: started_at: 5 is not what the field holds"]


@pytest.mark.tor("TOR-EVD-001")
def test_the_volatile_file_holds_no_text_no_bulk_and_no_backward_dates(pkg):
    """Issue 39: '... DER approved ...' in the old configuration_notes, a 200 MB note, dates out of order."""
    volatile = json.loads((pkg / package.VOLATILE).read_text())
    (pkg / package.VOLATILE).write_text(json.dumps({**volatile, "configuration_notes": ["reviewed, DER approved"]}))
    assert integrity.verify(pkg).lines() == [
        "volatile.json: configuration_notes: not a field the volatile file may hold (dates, timings)"]
    (pkg / package.VOLATILE).write_text(json.dumps({**volatile, "parts_s": {"x" * (2 << 20): 1.0}}))
    lines = integrity.verify(pkg).lines()
    assert len(lines) == 1 and lines[0].endswith(f"bytes, more than the {1 << 20} a volatile file may hold")
    (pkg / package.VOLATILE).write_text(json.dumps({**volatile, "finished_at": "2019-01-01T00:00:00+00:00"}))
    assert integrity.verify(pkg).lines() == ["volatile.json: finished_at is not after started_at"]


@pytest.mark.tor("TOR-EVD-001")
def test_a_forged_tor_matrix_differs_from_its_packaged_junit_xml(pkg):
    path = "tool-qualification/tor-matrix.json"
    matrix = json.loads((pkg / path).read_text())
    assert {row["id"]: row["status"] for row in matrix["rows"]}["TOR-CFG-001"] == "incomplete"
    for row in matrix["rows"]:
        row["status"] = "pass"
    matrix.update(verdict="pass", results_verdict="pass", counts={**matrix["counts"], "pass": len(matrix["rows"]),
                                                                  "incomplete": 0, "not run": 0})
    package.write_json(pkg / path, matrix)
    relist(pkg, path)
    # the forger states what the forged matrix gives: tool qualification pass, hence the package verdict
    rewrite_index(pkg, lambda index: index.update(tool_qualification="pass",
                                                  verdict=verdicts.overall(index["verdicts"], "pass")))
    lines = integrity.verify(pkg).lines()
    assert f"{path}: TOR-CFG-001 says pass, the packaged JUnit XML gives incomplete" in lines
    assert f"{path}: verdict 'pass', the packaged JUnit XML gives 'incomplete'" in lines
    assert len(lines) == len(matrix["rows"]) + 3  # every row, the counts, the verdict and the results' verdict


@pytest.mark.tor("TOR-EVD-001")
def test_the_signed_package_verifies_with_the_signers_public_key_only(built_package, pkg, tmp_path):
    public = built_package.parent / "signer.pub.pem"
    for location in (pkg, pkg.with_name("pkg.zip")):
        result = integrity.verify(location, public_key=public)
        assert result.intact, result.lines()
        assert result.signature.startswith("signature verified: Ed25519, key ")
    done = assay("evidence", "verify", str(pkg), "--public-key", str(public))
    assert done.returncode == 0 and "signature verified" in done.stdout, done.stdout
    _other, other_public = write_key_pair(tmp_path, "other")
    assert integrity.verify(pkg, public_key=other_public).lines() == [
        "pkg.sig: the signature does not verify with other.pub.pem over evidence.json: the package was changed "
        "after signing, or signed with another key"]
    signature.signature_file(pkg).unlink()
    assert integrity.verify(pkg, public_key=public).lines() == [
        f"pkg.sig: missing: the package is not signed (--public-key {public} given)"]
    with pytest.raises(AssayError, match="not a PEM public key"):
        integrity.verify(pkg, public_key=built_package.parent / "signer.pem")


@pytest.mark.tor("TOR-EVD-001")
def test_a_forged_package_with_its_digest_rewritten_keeps_an_old_signature_that_no_longer_verifies(built_package,
                                                                                                  pkg):
    """D1 done completely (the weight, its hashes in evidence.json and sci.json, the digest file beside): every hash
    agrees, only the signature, which the forger cannot make, shows it."""
    (params,) = pkg.glob("code/acas-reg50/assay-v2-keras/acas_reg50_params.c")
    text = params.read_text()
    start = text.index("{", text.index("=")) + 1
    params.write_text(text[:start] + " 1.5f," + text[start:].split(",", 1)[1])
    sci = json.loads((pkg / "sci" / "sci.json").read_text())
    next(code for code in sci["generated_code"] if code["directory"] == "code/acas-reg50/assay-v2-keras")[
        "files"]["acas_reg50_params.c"] = package.sha256(params)
    package.write_json(pkg / "sci" / "sci.json", sci)
    relist(pkg, "sci/sci.json")
    relist(pkg, params.relative_to(pkg).as_posix())
    assert integrity.verify(pkg).lines() == []  # without the recorded digest or the key: nothing to see
    assert integrity.verify(pkg, public_key=built_package.parent / "signer.pub.pem").lines() == [
        "pkg.sig: the signature does not verify with signer.pub.pem over evidence.json: the package was changed "
        "after signing, or signed with another key"]


def test_a_key_that_cannot_sign_is_refused_before_the_build(tmp_path):
    public = write_key_pair(tmp_path, "k")[1]
    done = assay("evidence", "--models", "acas-reg50", "--targets", "host", "--sign-key", str(public),
                 "--out", str(tmp_path / "pkg"), "--work", str(tmp_path / "work"))
    assert done.returncode == 2 and "not an unencrypted PEM private key" in done.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "pkg").exists()


# --- meaning: consistent rewrites the digest beside the package cannot show (issue 39) ----------------------------

SEMANTIC = "results/semantic/results.json"


def edit_json(root: Path, path: str, edit) -> None:
    """Edit a packaged JSON file and relist it: a rewrite consistent with every hash of the package."""
    document = json.loads((root / path).read_text())
    edit(document)
    package.write_json(root / path, document)
    relist(root, path)


def found(root: Path, text: str) -> list[str]:
    return [line for line in integrity.verify(root).lines() if text in line]


@pytest.mark.tor("TOR-EVD-011")
def test_m1_a_record_over_its_tolerance_left_pass_is_found_from_its_own_figures(pkg):
    edit_json(pkg, SEMANTIC, lambda d: d["records"][0].update(max_abs_error=1e-3))
    assert found(pkg, "acas-reg50 assay-v2 keras host keras: pass with max |C - reference| = 1.0000e-03 above "
                      "atol + rtol x max |reference|")
    assert found(pkg, "verdicts.semantic: evidence.json says pass, the packaged files give fail")


@pytest.mark.tor("TOR-EVD-011")
def test_m2_a_deleted_record_is_missing_from_the_plan_and_a_raised_tolerance_differs_from_it(pkg):
    edit_json(pkg, SEMANTIC, lambda d: d["records"].pop())
    assert found(pkg, f"{SEMANTIC}: no record of acas-reg50 assay-v2 onnx host onnxruntime (planned in sci/sci.json)")
    edit_json(pkg, SEMANTIC, lambda d: d["records"][0].update(tolerance=1e-2))
    assert found(pkg, f"{SEMANTIC}: acas-reg50 assay-v2 keras host keras: tolerance 0.01, the plan gives 1e-05")


@pytest.mark.tor("TOR-EVD-011")
def test_m3_a_replaced_model_with_its_index_hash_fixed_differs_from_the_manifests_and_records(pkg):
    model = pkg / "models" / "acas-reg50" / "model.onnx"
    model.write_bytes(model.read_bytes() + b"\0")
    digest = package.sha256(model)

    def fix(sci: dict) -> None:
        sci["models"][0]["files"]["onnx"]["sha256"] = digest
        next(a for a in sci["archived"] if a["file"] == "models/acas-reg50/model.onnx")["sha256"] = digest
    relist(pkg, "models/acas-reg50/model.onnx")
    edit_json(pkg, verdicts.SCI, fix)
    assert found(pkg, "code/acas-reg50/assay-v2-onnx/manifest.json: generated from model 8ba3") or \
        found(pkg, "manifest.json: generated from model")
    assert len(found(pkg, "judged the onnx model")) == 4  # each semantic record names the old hash


@pytest.mark.tor("TOR-EVD-011")
def test_m4_a_rewritten_assay_commit_and_lock_differ_from_the_records_and_from_the_running_assay(pkg):
    edit_json(pkg, verdicts.SCI, lambda sci: sci["assay"].update(commit="0" * 40, requirements_lock_sha256="1" * 64))
    lines = found(pkg, "not the commit 0000000000000000000000000000000000000000 (lock 111111111111)")
    assert len([line for line in lines if line.startswith(SEMANTIC)]) == 4  # and the mutate records'
    assert len(lines) == 6
    assert "NOT this Assay (Assay" in integrity.verify(pkg).built_by


@pytest.mark.tor("TOR-EVD-011")
def test_built_by_names_the_package_assay_and_whether_it_is_the_running_one():
    ours = {"version": "0.1.0", "commit": "a" * 40, "dirty": False, "requirements_lock_sha256": "b" * 64,
            "sources_sha256": None}
    assert integrity.built_by(ours, ours) == (f"built by: Assay 0.1.0 commit {'a' * 40}, lock {'b' * 12}; the same "
                                              f"Assay as this one")
    older = {**ours, "commit": "c" * 40, "requirements_lock_sha256": "d" * 64}
    assert integrity.built_by(older, ours).endswith(f"NOT this Assay (Assay 0.1.0 commit {'a' * 40}, lock {'b' * 12}): "
                                                    f"its figures are that Assay's")
    assert integrity.built_by(None, ours) == "built by: unknown (sci/sci.json names no Assay)"


@pytest.mark.tor("TOR-EVD-011", "TOR-EVD-012")
def test_m5_coverage_is_judged_by_the_criteria_of_the_packaged_level(pkg):
    """50 % of the branch outcomes and 10 % MC/DC used to give coverage=pass at every --level (lines only)."""
    def weaken(summary: dict) -> None:
        for code in summary["codes"].values():
            code.update(branch_percent=50.0, mcdc={**code["mcdc"], "decisions": 3, "mcdc_percent": 10.0})
    edit_json(pkg, verdicts.COVERAGE, weaken)
    code = "acas-reg50/assay-v2-keras"
    assert found(pkg, f"{verdicts.COVERAGE}: {code} at level A: decisions (branch outcomes) 50.0 %, MC/DC 10.0 % of "
                      f"conditions")
    assert found(pkg, "verdicts.coverage: evidence.json says pass, the packaged files give incomplete")
    edit_json(pkg, verdicts.SCI, lambda sci: sci.update(level="B"))
    assert found(pkg, f"{code} at level B: decisions (branch outcomes) 50.0 %") and not found(pkg, "MC/DC 10.0")
    edit_json(pkg, verdicts.SCI, lambda sci: sci.update(level="C"))
    assert not found(pkg, "at level C") and not found(pkg, "verdicts.coverage")


@pytest.mark.tor("TOR-EVD-011")
def test_m6_verify_warns_when_only_the_digest_beside_the_package_was_checked(pkg):
    done = assay("evidence", "verify", str(pkg))
    assert done.returncode == 0 and "warning: the digest file travels with the package" in done.stdout
    assert "the package's verdict: " in done.stdout.splitlines()[-1]
    given = assay("evidence", "verify", str(pkg), "--digest", package.sha256(pkg / package.INDEX))
    assert given.returncode == 0 and "warning" not in given.stdout


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        self.hrefs += [value for name, value in attrs if name in ("href", "src") and value]


@pytest.mark.tor("TOR-EVD-010")
def test_every_file_of_the_package_is_reachable_from_its_index_page(built_package):
    """Following links from index.html through every page reaches every file evidence.json lists: the mutate part's
    report, results.json, the TOR matrix and the generated C used to be out of reach (107 of 224 files)."""
    listed = {entry["path"] for entry in index_of(built_package)["files"]} | {package.INDEX}
    reached, pending = set(), ["index.html"]
    while pending:
        page = pending.pop()
        if page in reached:
            continue
        reached.add(page)
        if page.endswith(".html"):
            parser = _Links()
            parser.feed((built_package / page).read_text())
            for href in parser.hrefs:
                target = href.split("#")[0]
                if target and "://" not in target:
                    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(page), target))
                    if resolved in listed or resolved == "index.html":
                        pending.append(resolved)
    assert sorted(listed - reached) == []


@pytest.mark.tor("TOR-EVD-001")
def test_a_huge_unlisted_file_in_the_folder_is_named_not_read(pkg):
    """A 2 GiB file (sparse: no disk used) beside the package's files was read whole into memory; now it is over the
    caps of a package file and named without being read."""
    huge = pkg / "results" / "semantic" / "huge.bin"
    with huge.open("wb") as stream:
        stream.truncate(2 << 30)
    tracemalloc.start()
    try:
        lines = integrity.verify(pkg).lines()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert lines == [f"results/semantic/huge.bin: {2 << 30} bytes, over what a package file may hold "
                     f"({256 << 20}, {1 << 30} in all): not read"]
    assert peak < 512 << 20


@pytest.mark.tor("TOR-EVD-011")
def test_m7_layers_said_to_reach_the_output_are_checked_against_the_archived_graph(pkg):
    """Issue 40: where the end-to-end bound is no number, a record passes on its layers only if they were judged
    through the model's output (``covers_output``). A forged record (its bound broken, the output layer not judged,
    the claim kept) verified before, as the record's own figures agree with it; the archived ONNX graph does not."""
    def forge(document: dict) -> None:
        record = document["records"][0]
        layers = record["layer_local"]
        last = next(row for row in reversed(layers["layers"]) if row.get("judged"))
        last.update(judged=False, reason="not judged")
        layers.update(covers_output=True, verdict="pass", cause=None)
        record["derived"].update(verdict="error", bound=None)
        record["verdict"] = "pass"
    edit_json(pkg, SEMANTIC, forge)
    assert found(pkg, "acas-reg50 assay-v2 keras host keras: its layers are said to reach the model's output, but no "
                      "judged layer is an output of the archived ONNX graph")
    edit_json(pkg, verdicts.SCI, lambda sci: sci["models"][0]["files"].pop("onnx"))
    assert found(pkg, "its layers are said to reach the model's output, which cannot be checked: the package has no "
                      "ONNX graph of model acas-reg50")
