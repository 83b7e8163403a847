"""What to cite: BibTeX of the package, of the dataset release read (with its manifest
digest, which ``dgtraces verify`` re-checks the files against) and of the paper whose DAG
model the predictor follows. ``dgtraces cite [--release X]`` prints it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Citation:
    """The entries to cite for one dataset release."""

    release: str
    digest: str
    package_version: str
    bibtex: str


def dataset_bibtex(manifest: dict) -> str:
    """A ``@misc`` entry naming the release, its creation year and its manifest digest."""
    version = manifest["version"]
    key = "dgtraces_data_" + version.replace(".", "_")
    year = str(manifest.get("created_utc", ""))[:4] or "2026"
    return (f"@misc{{{key},\n  title   = {{dgtraces dataset release {version}: layer-wise "
            f"deep-learning training traces}},\n  author  = {{{{dgtraces developers}}}},\n"
            f"  year    = {{{year}}},\n  version = {{{version}}},\n"
            f"  note    = {{manifest digest sha256:{manifest['digest']}}}\n}}")


def cite(release: str | None = None, root=None) -> Citation:
    """The citation of ``release`` (default: latest); NOT_FOUND for an unknown release."""
    from dgtraces._version import __version__
    from dgtraces.publish.card import PAPER_BIBTEX, package_bibtex
    from dgtraces.store.manifest import read_manifest

    manifest = read_manifest(release, root)
    text = "\n\n".join((package_bibtex(), dataset_bibtex(manifest), PAPER_BIBTEX))
    return Citation(manifest["version"], manifest["digest"], __version__, text)
