"""Publishing a release: its dataset card (:mod:`~dgtraces.publish.card`, with the per-shard
statistics and third-party licences of :mod:`~dgtraces.publish.card_stats`), its Croissant
metadata (:mod:`~dgtraces.publish.croissant`), the Hugging Face Hub folder
(:mod:`~dgtraces.publish.hf`) and its citation (:mod:`~dgtraces.publish.citation`).
:func:`write_card` writes the card and the Croissant file together.
"""

from __future__ import annotations

from pathlib import Path


def write_card(out_dir: str | Path = "cards", version: str | None = None, root=None, *,
               fragments_dir: str | Path | None = None) -> list[Path]:
    """Write ``README.md`` and ``croissant.json`` of a release (default: latest) to
    ``out_dir``, and the figures the card links to (``fragments/<name>``) into
    ``out_dir/fragments/`` unless they are there already (the checkout's ``cards/``): a
    card written elsewhere linked to figures it did not write (#36 trial)."""
    from dgtraces.io.files import atomic_write_all
    from dgtraces.publish import croissant
    from dgtraces.publish.card import render_card
    from dgtraces.publish.card_stats import provenance_stats
    from dgtraces.store.release import Release

    out = Path(out_dir)
    readme, meta = out / "README.md", out / "croissant.json"
    release = Release.open(version, root)  # the manifest read once for both files
    stats = provenance_stats(release)  # one pass over the data for both files
    files = {readme: render_card(release, fragments_dir=fragments_dir, stats=stats).encode(),
             meta: croissant.render(release, stats=stats).encode()}
    from dgtraces.publish.card import linked_figures

    for fig in linked_figures(fragments_dir, stats):
        dest = out / "fragments" / fig.name
        if dest.exists() and dest.resolve() == fig.resolve():
            continue  # the card is written where its figures live
        dest.parent.mkdir(parents=True, exist_ok=True)
        files[dest] = fig.read_bytes()
    return atomic_write_all(files)  # every name checked before the first is written
